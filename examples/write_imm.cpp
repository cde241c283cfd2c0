// SPDX-License-Identifier: BSD-3-Clause
// examples/write_imm — a one-sided write that also notifies the target, with immediate data.
//
// A plain RDMA write is silent on the target. write_with_imm() writes the same way and, once the
// bytes are in place, delivers a completion on the target's CQ: op::remote_write, carrying a
// 64-bit (provider permitting: caps().cq_data_size bytes) immediate value chosen by the writer.
// The target learns "new data arrived" and "which" without polling its memory or a second message.
//
// The server hands the client its region's 40-byte descriptor in the accept private data, as in
// examples/write. On providers where immediate data consumes a posted receive (verbs:
// caps().rx_cq_data) the target must have a receive posted; tcp and sockets do not need one.
// The server waits on its CQ for the notification, and that wait drives tcp's progress: no
// progress thread needed (see examples/read for a target that needs one).
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <remora/remora.hpp>

#include "example_common.hpp"

namespace {

using namespace std::chrono_literals;
using example::die;
using example::must;
using example::next_completion;
using example::text_of;
using remora::usage;

constexpr std::size_t write_offset = 256;
constexpr std::string_view message = "written with immediate data";
// Fits 4 bytes, the smallest immediate of the providers remora runs on (verbs).
constexpr std::uint64_t immediate = 0xC0FFEE;

void run_server(std::promise<std::uint16_t>& port, std::promise<void>& checked) {
    auto dom = must(remora::domain::open(), "server: open domain");

    std::vector<std::byte> target(1024);
    auto target_mr =
        must(remora::memory_region::create(dom, target, usage::write_destination), "server: reg");
    const auto wire = must(target_mr.describe(), "server: describe").serialize();

    auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
    port.set_value(lst.port());
    auto req = must(lst.get_request(10s), "server: get_request");
    auto conn = must(req.accept({}, wire), "server: accept");

    // Only where immediate data consumes a receive: post one (a zero-length receive would do on
    // verbs; a small registered buffer is portable).
    std::vector<std::byte> spare(16);
    std::optional<remora::memory_region> spare_mr;
    if (dom.caps().rx_cq_data) {
        spare_mr = must(remora::memory_region::create(dom, spare, usage::receive), "server: reg");
        must(conn.recv(*spare_mr, 0, spare.size()), "server: recv");
        std::printf("server: %s needs a posted receive for immediate data; posted one\n",
                    dom.caps().provider.c_str());
    }

    // The remote write arrives on our CQ (on the RCQ if the connection had one).
    const remora::completion c = next_completion(conn.cq(), "server");
    if (c.op != remora::op::remote_write || !c.has_imm) {
        die(std::string("server: expected a remote_write with immediate data, got ") +
            remora::to_string(c.op));
    }
    // c.bytes should be the length written; sockets reports it, tcp (libfabric 1.17) reports 0.
    std::printf("server: %s completion with immediate 0x%llx\n", remora::to_string(c.op),
                static_cast<unsigned long long>(c.imm));
    if (c.imm != immediate) {
        die("server: wrong immediate value");
    }
    // The completion comes after the data: the bytes are already in place.
    const std::string got = text_of(std::span(target).subspan(write_offset, message.size()));
    if (got != message) {
        die("server: the written bytes are wrong: \"" + got + "\"");
    }
    std::printf("server: offset %zu holds \"%s\"\n", write_offset, got.c_str());
    checked.set_value();

    example::wait_for_close(conn, "server");
}

}  // namespace

int main() {
    example::program_name = "example_write_imm";
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s (immediate data: %zu bytes)\n", dom.caps().provider.c_str(),
                dom.caps().cq_data_size);

    std::promise<void> checked;
    example::server_thread server(run_server, std::ref(checked));
    auto conn =
        must(remora::connection::connect(dom, "127.0.0.1", server.port()), "client: connect");
    const remora::remote_region remote =
        must(remora::remote_region::parse(conn.peer_private_data()), "client: parse descriptor");

    std::vector<std::byte> local(message.size());
    std::memcpy(local.data(), message.data(), message.size());
    auto local_mr =
        must(remora::memory_region::create(dom, local, usage::write_source), "client: reg");

    must(conn.write_with_imm(remote, write_offset, local_mr, 0, local.size(), immediate),
         "client: write_with_imm");
    // The initiator's own completion is an ordinary op::write.
    const remora::completion c = next_completion(conn.cq(), "client");
    if (c.op != remora::op::write) {
        die(std::string("client: expected a write completion, got ") + remora::to_string(c.op));
    }
    std::printf("client: wrote %zu bytes with immediate 0x%llx\n", local.size(),
                static_cast<unsigned long long>(immediate));

    // Close once the server has checked (it then sees conn_event::closed).
    checked.get_future().get();
    must(conn.close(), "client: close");
    server.join();
    std::printf("write_imm: ok\n");
    return 0;
}

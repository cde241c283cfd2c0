// SPDX-License-Identifier: BSD-3-Clause
// examples/flush_gpspm — choosing the flush method, and what a volatile region refuses.
//
// The server exposes two regions through one target_service: a file-backed persistent_region
// (in a scratch directory) and a volatile one (persistent_region opened without a path:
// anonymous memory). It hands the file's 40-byte descriptor to the client in its accept private
// data and the volatile region's in a message on the same connection (persistence_config::
// message_size): two descriptors would not fit the private data rdma_cm carries over InfiniBand.
//
// The client, on the persistent region:
//  - writes a record and flushes it with flush_method::gpspm named explicitly: a flush request
//    the target's service answers once it has persisted (msync) the range;
//  - asks for a persistence flush by read-after-write and is refused: the target did not declare
//    placed writes durable, so a read behind the writes proves only that they are visible;
//  - writes a note and flushes it for visibility with flush_method::read_after_write: an 8-byte
//    read behind the write, which returns only once the write is placed. No service involved.
// and on the volatile region:
//  - a persistence flush is refused with errc::not_supported (nothing there can be durable),
//  - a visibility flush works; this one goes to the service (gpspm), which answers it without
//    persisting anything.
//
// After the client closes, the server checks the record in the file (ordinary file I/O), the
// note and the volatile bytes in its memory, and that its service answered exactly 2 requests.
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <string_view>
#include <vector>

#include <remora/remora.hpp>

#include "example_common.hpp"

namespace {

using namespace std::chrono_literals;
using example::die;
using example::must;
using remora::flush_method;
using remora::flush_options;
using remora::flush_type;
using remora::usage;

constexpr std::size_t region_size = 8192;
constexpr std::uint32_t service_depth = 4;
// GPSPM and the application's messages (up to one descriptor) on one connection, both sides.
const remora::persistence_config persistence{
    .service_depth = service_depth, .message_size = remora::remote_region::serialized_size};
// What the client writes where: [0] into the file at 256, [1] into the file at 4096 (visible
// only), [2] into the volatile region at 128.
constexpr std::string_view texts[] = {"durable record", "visible note", "volatile bytes"};
constexpr std::size_t offsets[] = {256, 4096, 128};

std::string_view in_memory(const remora::persistent_region& r, std::size_t i) {
    return {reinterpret_cast<const char*>(r.memory().data() + offsets[i]), texts[i].size()};
}

void run_server(std::promise<std::uint16_t>& port, const std::string& path,
                std::promise<void>& served) {
    {
        // The file region holds its file alone while it is open (a lease: another open, even
        // this process's, would wait for it to close): the file is read below, once it is closed.
        auto dom = must(remora::domain::open(), "server: open domain");
        auto file = must(remora::persistent_region::open(
                             dom, {.path = path, .size = region_size, .create = true}),
                         "server: open " + path);
        auto memory = must(remora::persistent_region::open(dom, {.size = region_size}),
                           "server: open volatile region");
        auto service = must(remora::target_service::create(), "server: create service");
        const auto file_wire = must(service.expose(file), "server: expose").serialize();
        auto memory_wire = must(service.expose(memory), "server: expose").serialize();
        auto wire_mr =
            must(remora::memory_region::create(dom, memory_wire, usage::send), "server: reg");

        auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
        port.set_value(lst.port());
        auto req = must(lst.get_request(10s), "server: get_request");
        // A message of the application's takes one scatter-gather entry more (its mark).
        auto conn = must(
            req.accept({.max_sge = 2, .progress_thread = true, .addons = {persistence}}, file_wire),
            "server: accept");
        must(service.serve(conn), "server: serve");
        must(conn.send(wire_mr, 0, memory_wire.size()), "server: send");
        if (example::next_completion(conn.cq(), "server").op != remora::op::send) {
            die("server: unexpected completion for a send");
        }
        served.set_value();
        example::wait_for_close(conn, "server");

        if (service.requests() != 2 || service.refused() != 0) {
            die("server: expected 2 answered requests, got " + std::to_string(service.requests()) +
                " (" + std::to_string(service.refused()) + " refused)");
        }
        if (in_memory(file, 1) != texts[1] || in_memory(memory, 2) != texts[2]) {
            die("server: a flushed write is not in the server's memory");
        }
    }
    if (example::read_file(path, offsets[0], texts[0].size()) != texts[0]) {
        die("server: the persisted record is not in the file");
    }
    std::printf("server: file holds \"%s\"; memory holds \"%s\" and \"%s\"; 2 requests served\n",
                texts[0].data(), texts[1].data(), texts[2].data());
}

// Writes texts[i] at offsets[i] of `dst` and waits for the write's completion.
void write_text(remora::connection& conn, const remora::remote_region& dst,
                const remora::memory_region& src, std::size_t i) {
    must(conn.write(dst, offsets[i], src, offsets[i], texts[i].size()), "client: write");
    if (example::next_completion(conn.cq(), "client").op != remora::op::write) {
        die("client: unexpected completion for a write");
    }
}

// Flushes texts[i]'s range of `dst` as `how` says, waits for the flush, and prints it.
void flush_text(remora::connection& conn, const remora::remote_region& dst, std::size_t i,
                flush_options how) {
    const flush_method method =
        must(remora::flush_method_for(conn, dst, how), "client: flush method");
    must(remora::flush(conn, dst, offsets[i], texts[i].size(), how), "client: flush");
    if (example::next_completion(conn.cq(), "client").op != remora::op::flush) {
        die("client: unexpected completion for a flush");
    }
    std::printf("client: \"%s\" flushed for %s by %s\n", texts[i].data(),
                how.type == flush_type::persistence  ? "persistence"
                : how.type == flush_type::visibility ? "visibility"
                                                     : "the strongest the region offers",
                remora::to_string(method));
}

// Dies unless `r` failed with errc::not_supported; prints why it was refused.
void expect_refused(const remora::result<void>& r, const char* what) {
    if (r || !(r.error() == remora::errc::not_supported)) {
        die(std::string("client: ") + what + " was not refused with not_supported");
    }
    std::printf("client: %s refused: %s\n", what, r.error().message().c_str());
}

}  // namespace

int main() {
    example::program_name = "example_flush_gpspm";
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s\n", dom.caps().provider.c_str());

    const example::temp_dir dir;
    const std::string path = dir.file("region.bin");
    std::promise<void> served;
    example::server_thread server(run_server, std::cref(path), std::ref(served));
    auto conn = must(
        remora::connection::connect(dom, "127.0.0.1", server.port(), {.addons = {persistence}}),
        "client: connect");
    const auto file = must(remora::remote_region::parse(conn.peer_private_data()), "client: parse");
    std::array<std::byte, remora::remote_region::serialized_size> wire{};
    auto wire_mr = must(remora::memory_region::create(dom, wire, usage::receive), "client: reg");
    must(conn.recv(wire_mr, 0, wire.size()), "client: recv");
    if (example::next_completion(conn.cq(), "client").op != remora::op::recv) {
        die("client: unexpected completion for a receive");
    }
    const auto memory = must(remora::remote_region::parse(wire), "client: parse");

    // Start once the server serves the connection: a request sent earlier would wait in the
    // provider until serve() posts the service's receives (it is not lost, only delayed).
    served.get_future().wait();

    std::vector<std::byte> local(region_size);
    for (std::size_t i = 0; i < std::size(texts); ++i) {
        std::memcpy(local.data() + offsets[i], texts[i].data(), texts[i].size());
    }
    auto local_mr =
        must(remora::memory_region::create(dom, local, usage::write_source), "client: reg");

    // The file: persisted by the target's service, then a note made visible only.
    write_text(conn, file, local_mr, 0);
    flush_text(conn, file, 0, {.type = flush_type::persistence, .method = flush_method::gpspm});
    auto raw =
        remora::flush(conn, file, offsets[0], texts[0].size(),
                      {.type = flush_type::persistence, .method = flush_method::read_after_write});
    expect_refused(raw, "a persistence flush by read_after_write");
    write_text(conn, file, local_mr, 1);
    flush_text(conn, file, 1,
               {.type = flush_type::visibility, .method = flush_method::read_after_write});

    // Volatile memory: never durable, but writes into it can be made visible.
    write_text(conn, memory, local_mr, 2);
    expect_refused(
        remora::flush(conn, memory, offsets[2], texts[2].size(), {.type = flush_type::persistence}),
        "a persistence flush of volatile memory");
    expect_refused(remora::flush(conn, memory, offsets[2], texts[2].size(),
                                 {.type = flush_type::persistence, .method = flush_method::gpspm}),
                   "a GPSPM persistence flush of volatile memory");
    flush_text(conn, memory, 2, {.type = flush_type::visibility, .method = flush_method::gpspm});
    // The default type, flush_type::strongest, is visibility for volatile memory.
    flush_text(conn, memory, 2, {});

    must(conn.close(), "client: close");  // after the service's replies: accept has returned
    server.join();
    std::printf("flush_gpspm: ok\n");
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
// examples/read — a one-sided RDMA read of the server's memory.
//
// The server fills a buffer, registers it for remote reads only (usage::read_source), and hands
// its 40-byte serialised descriptor to the client as the private data of its accept. The client
// parses the descriptor (remote_region::parse), reads the whole buffer into its own memory without
// the server's CPU taking part, checks it, and closes. The server keeps its memory registered
// until it sees the client close (conn_event::closed).
//
// Progress: on tcp the target's provider moves one-sided traffic only when the target calls into
// libfabric; connection_config::progress_thread runs a library thread that does it for us while
// the server just waits for the connection's next event.
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include <remora/remora.hpp>

#include "example_common.hpp"

namespace {

using namespace std::chrono_literals;
using example::die;
using example::must;
using example::next_completion;
using remora::usage;

constexpr std::size_t region_size = 64 * 1024;

std::byte pattern(std::size_t i) {
    return static_cast<std::byte>((i * 31 + i / 256) & 0xff);
}

void run_server(std::promise<std::uint16_t>& port, std::promise<void>& accepted) {
    auto dom = must(remora::domain::open(), "server: open domain");

    std::vector<std::byte> source(region_size);
    for (std::size_t i = 0; i < source.size(); ++i) {
        source[i] = pattern(i);
    }
    auto mr = must(remora::memory_region::create(dom, source, usage::read_source), "server: reg");
    const auto wire = must(mr.describe(), "server: describe").serialize();

    auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
    port.set_value(lst.port());
    auto req = must(lst.get_request(10s), "server: get_request");
    auto conn = must(req.accept({.progress_thread = true}, wire), "server: accept");
    std::printf("server: accepted, exposing %zu bytes for reading\n", source.size());
    accepted.set_value();

    // Nothing to do but keep the memory registered until the client is done.
    example::wait_for_close(conn, "server");
    std::printf("server: the client closed\n");
}

}  // namespace

int main() {
    example::program_name = "example_read";
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s\n", dom.caps().provider.c_str());

    std::promise<void> accepted;
    example::server_thread server(run_server, std::ref(accepted));
    auto conn =
        must(remora::connection::connect(dom, "127.0.0.1", server.port()), "client: connect");
    const remora::remote_region remote =
        must(remora::remote_region::parse(conn.peer_private_data()), "client: parse descriptor");
    if (remote.length() > dom.caps().max_msg_size) {
        die("client: the region is larger than one operation may move");
    }

    // The destination of the read must be registered for it (usage::read_destination).
    std::vector<std::byte> local(remote.length());
    auto local_mr =
        must(remora::memory_region::create(dom, local, usage::read_destination), "client: reg");

    const auto start = std::chrono::steady_clock::now();
    must(conn.read(local_mr, 0, remote, 0, local.size()), "client: read");
    const remora::completion c = next_completion(conn.cq(), "client");
    const auto took = std::chrono::steady_clock::now() - start;
    if (c.op != remora::op::read) {
        die(std::string("client: expected a read completion, got ") + remora::to_string(c.op));
    }
    for (std::size_t i = 0; i < local.size(); ++i) {
        if (local[i] != pattern(i)) {
            die("client: byte " + std::to_string(i) + " read back wrong");
        }
    }
    std::printf("client: read %zu bytes of the server's memory in %.1f us, all correct\n",
                local.size(), std::chrono::duration<double, std::micro>(took).count());

    // Every operation is checked against the descriptor before anything is posted: a range
    // past its end is refused with errc::out_of_range (and nothing is sent).
    auto refused = conn.read(local_mr, 0, remote, remote.length() - 4, 8);
    if (refused || !(refused.error() == remora::errc::out_of_range)) {
        die("client: a read past the end of the descriptor was not refused");
    }
    std::printf("client: a read past the end is refused: %s\n", refused.error().message().c_str());

    // Close only once the server's accept() has returned. The client may be done before that
    // (connect() returns as soon as the server answers), and libfabric 1.17's sockets provider
    // loses a disconnect that arrives while the accepting side is still inside fi_accept: the
    // server would never see conn_event::closed. (A real protocol gets this for free from any
    // message the server sends; here a promise between the two threads stands in for it.)
    accepted.get_future().get();
    must(conn.close(), "client: close");
    server.join();
    std::printf("read: ok\n");
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
// examples/flush_persistent — a remote write made durable in the target's file by a flush.
//
// The server maps a file (in a scratch directory) as a persistent_region and exposes it through
// a target_service: the region's descriptor then says "persistent, and the target's service
// persists a range on request" (persistence::gpspm). It hands the serialised descriptor to the
// client in the accept private data and lets connection_config::progress_thread answer the
// service's requests while it waits for the client to close.
//
// The client writes a message into the region and flushes it for persistence. It leaves the
// method to flush_method::automatic and prints what flush_method_for() resolved: nothing on
// this target declares placed writes durable (that needs a DAX mapping and the operator's word),
// so a read-after-write cannot persist, and the flush goes to the target's service (GPSPM), which
// msyncs the range and replies. The flush's completion means the bytes are in the file.
//
// Once the client has closed, the server reads the file with ordinary file I/O and checks the
// message is there, and that its service answered exactly one request.
//
// Both sides set connection_config::service_depth (the target's at least the client's): the
// service's messages get queue entries of their own. Such a connection carries only the
// service's messages (send and recv are refused), so the client's "done" is its close.
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
using remora::flush_method;
using remora::flush_type;
using remora::persistence;
using remora::usage;

constexpr std::size_t region_size = 8192;
constexpr std::size_t message_offset = 4100;  // anywhere in the region; not page-aligned
constexpr std::string_view message = "this line is in the file once the flush completes";
constexpr std::uint32_t service_depth = 4;  // service requests in flight (we use one)

void run_server(std::promise<std::uint16_t>& port, const std::string& path,
                std::promise<void>& served) {
    auto dom = must(remora::domain::open(), "server: open domain");
    {
        // The region holds its file alone while it is open (a lease: another open would make it
        // stop); the file is read below, once the region is closed.
        auto region = must(remora::persistent_region::open(
                               dom, {.path = path, .size = region_size, .create = true}),
                           "server: open " + path);
        std::printf("server: %zu-byte region backed by %s (%s)\n", region.memory().size(),
                    path.c_str(),
                    region.is_dax() ? "DAX, MAP_SYNC" : "page cache, persisted by msync");

        // Exposing the region lets peers flush it through this service; the descriptor says so.
        auto service = must(remora::target_service::create(), "server: create service");
        const remora::remote_region desc = must(service.expose(region), "server: expose");
        const auto wire = desc.serialize();

        auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
        port.set_value(lst.port());
        auto req = must(lst.get_request(10s), "server: get_request");
        auto conn = must(
            req.accept({.progress_thread = true,
                        .addons = {remora::persistence_config{.service_depth = service_depth}}},
                       wire),
            "server: accept");
        // From here the progress thread answers the client's flush requests.
        must(service.serve(conn), "server: serve");
        served.set_value();

        example::wait_for_close(conn, "server");
        if (service.requests() != 1 || service.refused() != 0) {
            die("server: expected 1 answered flush request, got " +
                std::to_string(service.requests()) + " (" + std::to_string(service.refused()) +
                " refused)");
        }
    }
    const std::string in_file = example::read_file(path, message_offset, message.size());
    if (in_file != message) {
        die("server: the file does not hold the client's message at offset " +
            std::to_string(message_offset));
    }
    std::printf("server: the service persisted 1 range; read back from the file: \"%s\"\n",
                in_file.c_str());
}

}  // namespace

int main() {
    example::program_name = "example_flush_persistent";
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s\n", dom.caps().provider.c_str());

    const example::temp_dir dir;
    const std::string path = dir.file("region.bin");
    std::promise<void> served;
    example::server_thread server(run_server, std::cref(path), std::ref(served));
    auto conn = must(remora::connection::connect(
                         dom, "127.0.0.1", server.port(),
                         {.addons = {remora::persistence_config{.service_depth = service_depth}}}),
                     "client: connect");
    const remora::remote_region remote =
        must(remora::remote_region::parse(conn.peer_private_data()), "client: parse descriptor");
    const persistence p = remote.persistence();
    std::printf("client: descriptor says persistent: %s, apm: %s, gpspm: %s\n",
                remora::has_all(p, persistence::persistent) ? "yes" : "no",
                remora::has_all(p, persistence::apm) ? "yes" : "no",
                remora::has_all(p, persistence::gpspm) ? "yes" : "no");

    // Start once the server serves the connection: a request sent earlier would wait in the
    // provider until serve() posts the service's receives (it is not lost, only delayed).
    served.get_future().wait();

    std::vector<std::byte> local(message.size());
    std::memcpy(local.data(), message.data(), message.size());
    auto local_mr =
        must(remora::memory_region::create(dom, local, usage::write_source), "client: reg");

    must(conn.write(remote, message_offset, local_mr, 0, local.size()), "client: write");
    if (next_completion(conn.cq(), "client").op != remora::op::write) {
        die("client: unexpected completion for the write");
    }
    std::printf("client: wrote %zu bytes at offset %zu\n", local.size(), message_offset);

    // flush_method::automatic: the cheapest method that persists this region.
    const remora::flush_options how{.type = flush_type::persistence};
    const flush_method method =
        must(remora::flush_method_for(conn, remote, how), "client: flush method");
    std::printf("client: flush_method_for(persistence) chose %s\n", remora::to_string(method));
    if (method != flush_method::gpspm) {
        die("client: expected GPSPM: this target does not declare placed writes durable");
    }

    int flush_ctx = 0;
    const auto start = std::chrono::steady_clock::now();
    must(remora::flush(conn, remote, message_offset, local.size(), how, {.context = &flush_ctx}),
         "client: flush");
    const remora::completion f = next_completion(conn.cq(), "client");
    const auto took = std::chrono::steady_clock::now() - start;
    if (f.op != remora::op::flush || f.context != &flush_ctx) {
        die("client: unexpected completion for the flush");
    }
    std::printf("client: flush to persistence completed in %.0f us: the range is in the file\n",
                std::chrono::duration<double, std::micro>(took).count());

    // The server has served the connection, so its accept() has returned: closing now cannot
    // race it (see examples/read).
    must(conn.close(), "client: close");
    server.join();
    std::printf("flush_persistent: ok\n");
    return 0;
}

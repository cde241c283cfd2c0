// SPDX-License-Identifier: BSD-3-Clause
// examples/cas_lock — a spin lock in the target's memory, shared by several clients.
//
// The server registers a small buffer holding two 8-byte words, a lock and a counter, and
// exposes it through a target_service (on tcp, which has no atomics, the service runs them).
// It accepts one connection per client and hands each the buffer's descriptor.
//
// Each client (a thread with its own connection) adds 1 to the counter many times, each time
// under the lock:
//   take      compare_swap(lock, 0 -> its id) until the old value it gets back is 0 (backing
//             off between tries);
//   update    read the counter, add 1, write it back, and flush for visibility (a read behind
//             the write), so the next holder's read sees it;
//   release   atomic_write(lock, 0).
// The read-modify-write of the counter is not atomic: only the lock keeps two clients from
// reading the same value. The server checks, once every client has closed, that the counter is
// exactly clients x increments and the lock is free.
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <remora/remora.hpp>

#include "example_common.hpp"

namespace {

using namespace std::chrono_literals;
using example::die;
using example::must;
using remora::usage;

constexpr int clients = 4;
constexpr int increments = 20;          // per client
constexpr std::size_t lock_at = 0;      // the lock word: 0 free, else the holder's id
constexpr std::size_t counter_at = 64;  // the counter, on a cache line of its own
constexpr std::uint32_t service_depth = 4;

void run_server(std::promise<std::uint16_t>& port, std::promise<void>& all_served) {
    auto dom = must(remora::domain::open(), "server: open domain");
    std::vector<std::uint64_t> words(16);  // 8-byte aligned, zero: the lock is free
    auto mr = must(remora::memory_region::create(dom, std::as_writable_bytes(std::span(words)),
                                                 usage::read_source | usage::write_destination |
                                                     usage::atomic_target | usage::flush_target),
                   "server: reg");
    auto service = must(remora::target_service::create(), "server: create service");
    const auto wire = must(service.expose(mr), "server: expose").serialize();

    auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
    port.set_value(lst.port());
    std::vector<remora::connection> conns;
    for (int i = 0; i < clients; ++i) {
        auto req = must(lst.get_request(10s), "server: get_request");
        conns.push_back(must(
            req.accept({.progress_thread = true,
                        .addons = {remora::persistence_config{.service_depth = service_depth}}},
                       wire),
            "server: accept"));
        must(service.serve(conns.back()), "server: serve");
    }
    all_served.set_value();  // the clients start together
    for (auto& conn : conns) {
        example::wait_for_close(conn, "server");
    }

    const std::uint64_t lock = std::atomic_ref(words[lock_at / 8]).load();
    const std::uint64_t counter = std::atomic_ref(words[counter_at / 8]).load();
    if (counter != std::uint64_t{clients} * increments || lock != 0) {
        die("server: counter " + std::to_string(counter) + " (want " +
            std::to_string(clients * increments) + "), lock " + std::to_string(lock));
    }
    std::printf(
        "server: counter = %llu = %d clients x %d increments, lock free; the service "
        "answered %llu requests\n",
        static_cast<unsigned long long>(counter), clients, increments,
        static_cast<unsigned long long>(service.requests()));
}

// Waits for the next completion and dies unless it is a `want`.
void expect(remora::connection& conn, remora::op want, const char* who) {
    const remora::op got = example::next_completion(conn.cq(), who).op;
    if (got != want) {
        die(std::string(who) + ": expected " + remora::to_string(want) + ", got " +
            remora::to_string(got));
    }
}

void run_client(std::uint64_t id, const remora::domain& dom, std::uint16_t port,
                std::shared_future<void> start, std::atomic<std::uint64_t>& taken) {
    const std::string who = "client " + std::to_string(id);
    const char* w = who.c_str();
    auto conn = must(remora::connection::connect(
                         dom, "127.0.0.1", port,
                         {.addons = {remora::persistence_config{.service_depth = service_depth}}}),
                     who + ": connect");
    const remora::remote_region remote =
        must(remora::remote_region::parse(conn.peer_private_data()), who + ": parse descriptor");
    if (id == 1) {
        std::printf("%s: atomics go %s\n", w, remora::to_string(remora::atomics(conn)));
    }
    // [0]: compare_swap's old value; [1]: the counter read, incremented and written back.
    std::vector<std::uint64_t> local(2);
    auto local_mr =
        must(remora::memory_region::create(dom, std::as_writable_bytes(std::span(local)),
                                           usage::read_destination | usage::write_source),
             who + ": reg");
    start.wait();

    std::uint64_t busy = 0;
    for (int i = 0; i < increments; ++i) {
        for (int tries = 0;;) {
            must(remora::compare_swap(conn, remote, lock_at, 0, id, local_mr, 0),
                 who + ": compare_swap");
            expect(conn, remora::op::atomic, w);
            if (local[0] == 0) {
                break;  // it was free and is ours now
            }
            if (local[0] > clients) {
                die(who + ": the lock word holds " + std::to_string(local[0]));
            }
            // Back off (50 us, doubling to 1.6 ms): spinning on the wire only slows the holder.
            ++busy;
            std::this_thread::sleep_for(std::chrono::microseconds(50 << std::min(tries++, 5)));
        }
        must(conn.read(local_mr, 8, remote, counter_at, 8), who + ": read");
        expect(conn, remora::op::read, w);
        ++local[1];
        must(conn.write(remote, counter_at, local_mr, 8, 8), who + ": write");
        expect(conn, remora::op::write, w);
        must(remora::flush(conn, remote, counter_at, 8, {.type = remora::flush_type::visibility}),
             who + ": flush");
        expect(conn, remora::op::flush, w);
        must(remora::atomic_write(conn, remote, lock_at, 0), who + ": release");
        expect(conn, remora::op::atomic, w);
    }
    taken += busy;
    std::printf("%s: %d increments done; %llu compare_swaps found the lock taken\n", w, increments,
                static_cast<unsigned long long>(busy));
    must(conn.close(), who + ": close");
}

}  // namespace

int main() {
    example::program_name = "example_cas_lock";
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s\n", dom.caps().provider.c_str());

    std::promise<void> all_served;
    const std::shared_future<void> start = all_served.get_future().share();
    example::server_thread server(run_server, std::ref(all_served));
    const std::uint16_t port = server.port();

    const auto began = std::chrono::steady_clock::now();
    std::atomic<std::uint64_t> taken{0};
    std::vector<std::thread> threads;
    for (std::uint64_t id = 1; id <= clients; ++id) {
        threads.emplace_back(run_client, id, std::cref(dom), port, start, std::ref(taken));
    }
    for (auto& t : threads) {
        t.join();
    }
    server.join();
    std::printf(
        "clients: %d x %d locked increments in %.0f ms; %llu tries found the lock taken\n", clients,
        increments,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count(),
        static_cast<unsigned long long>(taken.load()));
    std::printf("cas_lock: ok\n");
    return 0;
}

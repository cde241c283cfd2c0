// SPDX-License-Identifier: BSD-3-Clause
// examples/ping_pong — two-sided messaging: send/recv round trips and their latency.
//
// The client sends a 64-byte "ping" carrying a sequence number; the server receives it and sends
// it back as the "pong". 1000 round trips are timed (after a few untimed warm-up ones) and the
// average round-trip latency is printed in microseconds.
//
// Both sides post each receive before the message it is meant for can arrive, and reap every
// completion of their own sends before reusing a send buffer: a buffer belongs to the provider
// from post until its completion. Waiting for a completion first polls in a tight loop (the
// lowest latency) and falls back to blocking on the CQ's channel when nothing comes soon.
// Spinning pays only where polling is what moves the provider (tcp: caps().target_needs_progress).
// A provider with progress threads of its own (sockets) needs the CPU a spinning thread would
// take from them: there both sides block at once (on a 2-core machine spinning makes sockets
// ~15x slower).
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include <remora/remora.hpp>

#include "example_common.hpp"

namespace {

using namespace std::chrono_literals;
using example::die;
using example::must;
using remora::usage;

// How many times next_completion() polls before it blocks. Set once from the provider's caps.
int spin_polls = 0;

// The next completion on `cq`: busy-polls first (spin_polls times), then blocks (10 s at most).
remora::completion next_completion(remora::completion_queue& cq, const char* who) {
    return example::next_completion(cq, who, spin_polls);
}

constexpr std::size_t message_size = 64;
constexpr int warmup = 10;
constexpr int round_trips = 1000;
constexpr int total = warmup + round_trips;

// Each side has one registered buffer with two slots: [0, 64) receives, [64, 128) sends.
constexpr std::size_t recv_slot = 0;
constexpr std::size_t send_slot = message_size;

std::uint64_t sequence_in(const std::vector<std::byte>& buf, std::size_t slot) {
    std::uint64_t v;
    std::memcpy(&v, buf.data() + slot, sizeof(v));
    return v;
}

void run_server(std::promise<std::uint16_t>& port) {
    auto dom = must(remora::domain::open(), "server: open domain");
    std::vector<std::byte> buf(2 * message_size);
    auto mr =
        must(remora::memory_region::create(dom, buf, usage::send | usage::receive), "server: reg");

    auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
    port.set_value(lst.port());
    auto req = must(lst.get_request(10s), "server: get_request");
    // Two-sided only, and the server polls its own CQ: no progress thread needed.
    auto conn = must(req.accept(), "server: accept");

    must(conn.recv(mr, recv_slot, message_size), "server: recv");
    int sends_done = 0;
    for (int i = 0; i < total; ++i) {
        // Wait for ping i (completions of earlier pongs may come first).
        for (;;) {
            const remora::completion c = next_completion(conn.cq(), "server");
            if (c.op == remora::op::send) {
                ++sends_done;
                continue;
            }
            if (c.op != remora::op::recv || c.bytes != message_size) {
                die("server: unexpected completion " + std::string(remora::to_string(c.op)));
            }
            break;
        }
        if (sequence_in(buf, recv_slot) != static_cast<std::uint64_t>(i)) {
            die("server: ping " + std::to_string(i) + " out of sequence");
        }
        // The send slot is reusable once the previous pong's send has completed.
        while (sends_done < i) {
            const remora::completion c = next_completion(conn.cq(), "server");
            if (c.op != remora::op::send) {
                die("server: unexpected completion " + std::string(remora::to_string(c.op)));
            }
            ++sends_done;
        }
        std::memcpy(buf.data() + send_slot, buf.data() + recv_slot, message_size);
        if (i + 1 < total) {
            must(conn.recv(mr, recv_slot, message_size), "server: recv");
        }
        must(conn.send(mr, send_slot, message_size), "server: send");
    }
    while (sends_done < total) {
        if (next_completion(conn.cq(), "server").op != remora::op::send) {
            die("server: unexpected completion after the last pong");
        }
        ++sends_done;
    }
    example::wait_for_close(conn, "server");
}

}  // namespace

int main() {
    example::program_name = "example_ping_pong";
    auto dom = must(remora::domain::open(), "client: open domain");
    spin_polls = dom.caps().target_needs_progress ? 2000 : 0;  // before the server thread starts
    std::printf("provider: %s (%s)\n", dom.caps().provider.c_str(),
                spin_polls > 0 ? "busy-polling, then blocking" : "blocking waits");

    example::server_thread server(run_server);
    auto conn =
        must(remora::connection::connect(dom, "127.0.0.1", server.port()), "client: connect");
    std::vector<std::byte> buf(2 * message_size);
    auto mr =
        must(remora::memory_region::create(dom, buf, usage::send | usage::receive), "client: reg");

    std::chrono::steady_clock::time_point start;
    for (int i = 0; i < total; ++i) {
        if (i == warmup) {
            start = std::chrono::steady_clock::now();
        }
        // Post the receive for the pong first, then send the ping.
        must(conn.recv(mr, recv_slot, message_size), "client: recv");
        const std::uint64_t seq = static_cast<std::uint64_t>(i);
        std::memcpy(buf.data() + send_slot, &seq, sizeof(seq));
        must(conn.send(mr, send_slot, message_size), "client: send");

        // The round trip is over when both the ping's send and the pong's receive completed,
        // in whichever order the provider reports them.
        bool sent = false;
        bool received = false;
        while (!sent || !received) {
            const remora::completion c = next_completion(conn.cq(), "client");
            if (c.op == remora::op::send) {
                sent = true;
            } else if (c.op == remora::op::recv && c.bytes == message_size) {
                received = true;
            } else {
                die("client: unexpected completion " + std::string(remora::to_string(c.op)));
            }
        }
        if (sequence_in(buf, recv_slot) != seq) {
            die("client: pong " + std::to_string(i) + " out of sequence");
        }
    }
    const auto took = std::chrono::steady_clock::now() - start;
    const double us = std::chrono::duration<double, std::micro>(took).count();
    std::printf("client: %d round trips of %zu bytes, average round trip %.2f us\n", round_trips,
                message_size, us / round_trips);

    must(conn.close(), "client: close");
    server.join();
    std::printf("ping_pong: ok\n");
    return 0;
}

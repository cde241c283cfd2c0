// SPDX-License-Identifier: BSD-3-Clause
// examples/shared_channel — one server thread, many connections, one file descriptor to wait on.
//
// Four clients connect to one server. The server attaches every accepted connection to ONE
// completion_channel (connection_config{.channel = channel_mode::shared, .shared_channel = ch,
// .tag = client id}) and puts ch.fd() into its own epoll set, next to whatever else it would
// watch. Each wake-up of its epoll, it asks the channel which CQ fired (ch.wait(0ms)) and
// dispatches by the event's tag (which connection) and kind (which of its CQs).
//
// The server's connections have a receive CQ (.rcq = true): the clients' messages complete on
// the RCQ (event.kind == cq_kind::rcq), and the server's own sends (one acknowledgement per
// client, once all of its messages are in) on the CQ (cq_kind::cq).
//
// Waking up correctly: ch.wait(0ms) arms every attached CQ before it looks, and reports one whose
// completions are already pending. So the server drains the channel (ch.wait(0ms) until it times
// out: every CQ is then armed and empty) and only then blocks in epoll_wait; nothing can arrive
// unnoticed in between. A wait may report `ready == 0`, a no_completion wake-up (tcp signals both
// CQs of a connection for one socket event): normal, poll and go on.
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <remora/remora.hpp>

#include "example_common.hpp"

namespace {

using namespace std::chrono_literals;
using example::context_for;
using example::die;
using example::must;
using example::next_completion;
using example::slot_of;
using remora::usage;

constexpr std::size_t clients = 4;
constexpr std::uint32_t messages = 200;  // per client
constexpr std::size_t receives = 16;     // receives the server keeps posted per connection

// A message: which client sent it, and its sequence number on that connection.
struct message {
    std::uint32_t client;
    std::uint32_t seq;
};

void run_server(std::promise<std::uint16_t>& port) {
    auto dom = must(remora::domain::open(), "server: open domain");
    auto ch = must(remora::completion_channel::create(), "server: channel");

    // Receive slots for all connections (client c uses slots [c * receives, (c + 1) * receives)),
    // then one acknowledgement (a message count) per client.
    std::vector<message> inbox(clients * receives);
    std::vector<std::uint32_t> acks(clients);
    auto inbox_mr = must(remora::memory_region::create(
                             dom, std::as_writable_bytes(std::span(inbox)), usage::receive),
                         "server: reg");
    auto acks_mr = must(
        remora::memory_region::create(dom, std::as_writable_bytes(std::span(acks)), usage::send),
        "server: reg");
    auto post_receive = [&](remora::connection& conn, std::size_t slot) {
        must(conn.recv(inbox_mr, slot * sizeof(message), sizeof(message),
                       {.context = context_for(slot)}),
             "server: recv");
    };

    auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
    port.set_value(lst.port());

    // Accept the clients; each says who it is in its private data, which becomes the tag.
    std::array<std::optional<remora::connection>, clients> conns;
    for (std::size_t n = 0; n < clients; ++n) {
        auto req = must(lst.get_request(10s), "server: get_request");
        if (req.private_data().size() != 1 ||
            static_cast<std::size_t>(req.private_data()[0]) >= clients ||
            conns[static_cast<std::size_t>(req.private_data()[0])]) {
            die("server: a request without a valid client id");
        }
        const auto id = static_cast<std::size_t>(req.private_data()[0]);
        conns[id] = must(req.accept({.rcq = true,
                                     .channel = remora::channel_mode::shared,
                                     .shared_channel = ch,
                                     .tag = id}),
                         "server: accept");
        for (std::size_t s = 0; s < receives; ++s) {
            post_receive(*conns[id], id * receives + s);
        }
    }
    std::printf("server: %zu connections, %zu CQs attached to one channel (fd %d)\n", clients,
                ch.attached(), ch.fd());

    // The server's own epoll set; a real server would add its listener, timers, ... here too.
    const int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) {
        die(std::string("server: epoll_create1: ") + std::strerror(errno));
    }
    epoll_event watch{};
    watch.events = EPOLLIN;
    watch.data.fd = ch.fd();
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, ch.fd(), &watch) != 0) {
        die(std::string("server: epoll_ctl: ") + std::strerror(errno));
    }

    std::array<std::uint32_t, clients> received{};
    std::size_t acks_done = 0;
    std::size_t wakeups = 0;        // epoll_wait returns
    std::size_t events = 0;         // channel events with completions
    std::size_t no_completion = 0;  // channel events with ready == 0
    const auto deadline = std::chrono::steady_clock::now() + 20s;

    // Handles one completion of connection `tag`.
    auto dispatch = [&](std::uint64_t tag, remora::cq_kind kind, const remora::completion& c) {
        if (!c.ok()) {
            die("server: client " + std::to_string(tag) + ": " + remora::to_string(c.op) +
                " failed: " + c.status.message());
        }
        remora::connection& conn = *conns.at(tag);
        if (kind == remora::cq_kind::rcq) {  // a client's message
            const std::size_t slot = slot_of(c);
            const message m = inbox.at(slot);
            if (c.op != remora::op::recv || m.client != tag || m.seq != received[tag]) {
                die("server: connection " + std::to_string(tag) + " got a wrong message");
            }
            ++received[tag];
            post_receive(conn, slot);  // the slot is free again: keep the receive queue full
            if (received[tag] == messages) {
                acks[tag] = received[tag];  // all in: acknowledge with the count
                must(conn.send(acks_mr, tag * sizeof(std::uint32_t), sizeof(std::uint32_t)),
                     "server: send");
            }
        } else {  // the CQ: completions of our own sends
            if (c.op != remora::op::send) {
                die("server: unexpected " + std::string(remora::to_string(c.op)) + " on the cq");
            }
            ++acks_done;
        }
    };

    while (acks_done < clients) {
        // Drain the channel: each event names one CQ (by connection tag and kind) to poll.
        for (;;) {
            auto ev = ch.wait(0ms);
            if (!ev) {
                if (ev.error() == remora::errc::timed_out) {
                    break;  // every CQ is armed and empty: safe to block
                }
                die(std::string("server: channel wait: ") + ev.error().what());
            }
            if (ev->ready == 0) {
                ++no_completion;  // a no_completion wake-up: poll anyway and go on
            } else {
                ++events;
            }
            std::array<remora::completion, 16> batch;
            const std::size_t n = must(ev->cq->poll(batch), "server: poll");
            for (std::size_t i = 0; i < n; ++i) {
                dispatch(ev->tag, ev->kind, batch[i]);
            }
        }
        if (acks_done == clients) {
            break;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        epoll_event out[4];
        const int n = epoll_wait(epfd, out, 4, static_cast<int>(std::max<long>(0, left.count())));
        if (n < 0 && errno != EINTR) {
            die(std::string("server: epoll_wait: ") + std::strerror(errno));
        }
        if (n == 0) {
            die("server: no channel event within 20 s");
        }
        ++wakeups;
    }
    ::close(epfd);

    for (std::size_t c = 0; c < clients; ++c) {
        std::printf("server: connection tag %zu: %u messages\n", c, received[c]);
    }
    std::printf("server: %zu epoll wake-ups, %zu channel events, %zu no_completion wake-ups\n",
                wakeups, events, no_completion);
}

}  // namespace

int main() {
    example::program_name = "example_shared_channel";
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s\n", dom.caps().provider.c_str());

    example::server_thread server(run_server);
    const std::uint16_t p = server.port();

    // Each message has its own slot, so no buffer is reused while a send may still read it.
    std::vector<message> outbox(clients * messages);
    std::vector<std::uint32_t> acks(clients);
    auto out_mr = must(
        remora::memory_region::create(dom, std::as_writable_bytes(std::span(outbox)), usage::send),
        "client: reg");
    auto acks_mr = must(
        remora::memory_region::create(dom, std::as_writable_bytes(std::span(acks)), usage::receive),
        "client: reg");

    std::vector<remora::connection> conns;
    for (std::size_t c = 0; c < clients; ++c) {
        const std::byte id{static_cast<unsigned char>(c)};
        conns.push_back(must(remora::connection::connect(dom, "127.0.0.1", p, {}, {&id, 1}),
                             "client: connect"));
        // The receive for the server's acknowledgement, posted before anything is sent.
        must(conns[c].recv(acks_mr, c * sizeof(std::uint32_t), sizeof(std::uint32_t)),
             "client: recv");
    }

    // Every client sends its messages, interleaved, never more than its send queue holds. The
    // acknowledgement (a receive) completes on the same CQ as the sends.
    std::vector<std::uint32_t> in_flight(clients, 0);
    std::vector<bool> acked(clients, false);
    auto reap_one = [&](std::size_t c) {
        const remora::completion done = next_completion(conns[c].cq(), "client");
        if (done.op == remora::op::send) {
            --in_flight[c];
        } else if (done.op == remora::op::recv) {
            acked[c] = true;
        } else {
            die("client: unexpected " + std::string(remora::to_string(done.op)));
        }
    };
    for (std::uint32_t seq = 0; seq < messages; ++seq) {
        for (std::size_t c = 0; c < clients; ++c) {
            while (in_flight[c] == conns[c].config().sq_size) {
                reap_one(c);
            }
            const std::size_t slot = c * messages + seq;
            outbox[slot] = message{static_cast<std::uint32_t>(c), seq};
            must(conns[c].send(out_mr, slot * sizeof(message), sizeof(message)), "client: send");
            ++in_flight[c];
        }
    }
    // The rest of the send completions, and each acknowledgement.
    for (std::size_t c = 0; c < clients; ++c) {
        while (in_flight[c] > 0 || !acked[c]) {
            reap_one(c);
        }
        if (acks[c] != messages) {
            die("client " + std::to_string(c) + ": the server counted " + std::to_string(acks[c]));
        }
    }
    std::printf("client: %zu clients sent %u messages each; every one acknowledged\n", clients,
                messages);

    server.join();
    for (auto& conn : conns) {
        must(conn.close(), "client: close");
    }
    std::printf("shared_channel: ok\n");
    return 0;
}

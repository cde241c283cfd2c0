// SPDX-License-Identifier: BSD-3-Clause
// examples/shared_cq — one completion queue for all of a server's connections, with one budget.
//
// The server creates a shared_completion_queue of 48 entries and accepts clients onto it
// (connection_config{.sq_size = 4, .rq_size = 8, .tag = client id, .shared_cq = cq}; the client
// sends its id as private data). Each
// connection reserves 12 entries, one for every queue entry that completes there, so the CQ
// cannot overflow however the clients behave: four fit, and a fifth is refused
// (errc::too_large, with the figures) — the server rejects it and the client is told.
//
// The server then serves everything from one loop: wait on the shared CQ, poll a batch, and
// dispatch each completion by its tag (which connection) and context (which receive slot). A
// receive is posted again as soon as its message is counted; when a client's last message is in,
// the server acknowledges it. The shared CQ's reader also drives its connections (tcp notices a
// peer's close as its data path progresses), so the server keeps polling it while it waits for
// the clients to close.
//
// The clients send from unregistered memory: send_copy() copies each message into a
// pre-registered bounce buffer of a small buffer_pool, held by the send until its completion.
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <array>
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
constexpr std::size_t refused_client = clients;  // the fifth: no room left in the CQ
constexpr std::uint32_t messages = 100;          // per client
constexpr std::uint32_t sq = 4, rq = 8;          // per connection: 12 CQ entries
constexpr std::size_t msg_size = 32;

void run_server(std::promise<std::uint16_t>& port, std::promise<void>& all_attached) {
    auto dom = must(remora::domain::open(), "server: domain");
    // Sized from what each connection takes (remora::cq_entries), not from a copied formula.
    const std::uint32_t per_connection =
        remora::cq_entries({.sq_size = sq, .rq_size = rq}, remora::cq_kind::cq);
    auto cq = must(remora::shared_completion_queue::create(
                       dom, {.size = static_cast<std::uint32_t>(clients) * per_connection}),
                   "server: shared CQ");
    auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
    port.set_value(lst.port());

    std::vector<std::byte> inbox(clients * rq * msg_size);
    auto inbox_mr = must(remora::memory_region::create(dom, inbox, usage::receive), "inbox");
    std::array<std::byte, 4> ack{std::byte{'d'}, std::byte{'o'}, std::byte{'n'}, std::byte{'e'}};
    auto ack_mr = must(remora::memory_region::create(dom, ack, usage::send), "ack");

    std::vector<std::optional<remora::connection>> conns(clients);
    for (std::size_t n = 0; n <= refused_client; ++n) {
        auto req = must(lst.get_request(10s), "server: connection request");
        std::uint8_t id_byte = 0;
        if (req.private_data().size() == 1) {
            std::memcpy(&id_byte, req.private_data().data(), 1);
        }
        const std::size_t id = id_byte;
        auto conn = req.accept({.sq_size = sq, .rq_size = rq, .tag = id, .shared_cq = cq});
        if (n == refused_client) {
            if (conn || conn.error() != remora::errc::too_large) {
                die("server: a fifth connection should not fit the shared CQ");
            }
            std::printf("server: client %zu refused: %s\n", id, conn.error().message().c_str());
            continue;  // accept() rejected the request: the client is told
        }
        if (id >= clients || conns[id]) {
            die("server: bad client id " + std::to_string(id));
        }
        conns[id].emplace(must(std::move(conn), "server: accept"));
        for (std::uint32_t k = 0; k < rq; ++k) {
            const std::size_t slot = id * rq + k;
            must(conns[id]->recv(inbox_mr, slot * msg_size, msg_size,
                                 {.context = context_for(slot)}),
                 "server: recv");
        }
        std::printf("server: client %zu attached, %zu of %zu CQ entries reserved\n", id,
                    cq.reserved(), cq.size());
        if (n + 1 == clients) {
            all_attached.set_value();  // now the fifth may come
        }
    }

    std::array<std::uint32_t, clients> counted{};
    std::size_t finished = 0;
    remora::completion batch[16];
    while (finished < clients) {
        (void)must(cq.queue().wait(10s), "server: wait on the shared CQ");
        const std::size_t n = must(cq.queue().poll(batch), "server: poll");
        for (std::size_t i = 0; i < n; ++i) {
            const remora::completion& c = batch[i];
            if (!c.ok()) {
                die(std::string("server: ") + remora::to_string(c.op) +
                    " failed: " + c.status.message());
            }
            if (c.op != remora::op::recv) {
                continue;  // an acknowledgement went out
            }
            const std::size_t id = c.tag;  // which connection
            const std::size_t slot = slot_of(c);
            const std::string text(reinterpret_cast<const char*>(&inbox[slot * msg_size]), c.bytes);
            if (text != "client " + std::to_string(id) + " #" + std::to_string(counted[id])) {
                die("server: unexpected message \"" + text + "\" on connection " +
                    std::to_string(id));
            }
            if (++counted[id] == messages) {
                must(conns[id]->send(ack_mr, 0, ack.size()), "server: send ack");
                ++finished;
            } else if (counted[id] + rq <= messages) {
                must(conns[id]->recv(inbox_mr, slot * msg_size, msg_size, {.context = c.context}),
                     "server: recv again");
            }
        }
    }
    std::printf("server: %u messages from each of %zu clients, in order, on one CQ\n", messages,
                clients);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    for (auto& conn : conns) {
        for (;;) {
            (void)must(cq.queue().poll(batch), "server: poll");  // drives the connections
            auto ev = conn->next_event(1ms);
            if (ev && *ev == remora::conn_event::closed) {
                break;
            }
            if ((ev && *ev != remora::conn_event::closed) ||
                std::chrono::steady_clock::now() > deadline) {
                die("server: the client did not close");
            }
        }
    }
}

void run_client(std::uint16_t port, std::size_t id) {
    auto dom = must(remora::domain::open(), "client: domain");
    auto pool = must(remora::buffer_pool::create(dom, {.buffers = sq, .buffer_size = msg_size}),
                     "client: buffer pool");
    const auto id_byte = static_cast<std::byte>(id);
    auto conn = remora::connection::connect(dom, "127.0.0.1", port,
                                            {.sq_size = sq, .rq_size = 1, .addons = {pool}},
                                            std::span(&id_byte, 1));
    if (id == refused_client) {
        if (conn || conn.error() != remora::errc::rejected) {
            die("client: the fifth connection should have been rejected");
        }
        return;
    }
    auto c = must(std::move(conn), "client: connect");
    std::array<std::byte, 4> ack{};
    auto ack_mr = must(remora::memory_region::create(dom, ack, usage::receive), "client: ack");
    must(c.recv(ack_mr, 0, ack.size()), "client: recv");
    for (std::uint32_t k = 0; k < messages;) {
        const std::string text = "client " + std::to_string(id) + " #" + std::to_string(k);
        auto r = remora::send_copy(c, example::bytes_of(text));  // text's memory is free at once
        if (r) {
            ++k;
        } else if (r.error() == remora::errc::would_block) {
            next_completion(c.cq(), "client");  // a send (and its bounce buffer) came back
        } else {
            die("client: send_copy: " + r.error().what());
        }
    }
    for (;;) {
        auto done = next_completion(c.cq(), "client");
        if (done.op == remora::op::recv) {
            break;
        }
    }
    must(c.close(), "client: close");
}

}  // namespace

int main() {
    example::program_name = "example_shared_cq";
    std::promise<void> all_attached;
    auto attached = all_attached.get_future();
    example::server_thread server(run_server, std::ref(all_attached));
    std::vector<std::future<void>> running;
    for (std::size_t id = 0; id < clients; ++id) {
        running.push_back(std::async(std::launch::async, run_client, server.port(), id));
    }
    if (attached.wait_for(10s) != std::future_status::ready) {
        die("the server did not attach the clients");
    }
    run_client(server.port(), refused_client);  // the fifth: refused
    for (auto& f : running) {
        f.get();
    }
    server.join();
    std::printf("client: every message acknowledged; the fifth client was refused\n");
    return 0;
}

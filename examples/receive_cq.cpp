// SPDX-License-Identifier: BSD-3-Clause
// examples/receive_cq — receives on their own completion queue.
//
// With connection_config{.rcq = true} a connection has two completion queues: receives complete
// on conn.rcq(), everything else (sends, reads, writes) on conn.cq(). Each has its own depth
// (cq_size covers the send queue, rcq_size the receive queue) and, with the default
// channel_mode::separate, its own channel, so one thread can wait for incoming messages while
// another reaps send completions, or a loop can serve them at different priorities.
//
// The client posts 8 receives, then sends 8 requests; the server receives each request on its
// RCQ and answers it; the client finds its 8 send completions on the CQ and the 8 answers on the
// RCQ, and never one on the other. Each operation's context (here its slot number) comes back in
// its completion.
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
using example::context_for;
using example::die;
using example::must;
using example::next_completion;
using remora::usage;

// Expects `c` to be `want`, and returns the slot number carried in its context.
std::size_t slot_of(const remora::completion& c, remora::op want, const char* who) {
    if (c.op != want) {
        die(std::string(who) + ": expected " + remora::to_string(want) + ", got " +
            remora::to_string(c.op));
    }
    return example::slot_of(c);
}

constexpr std::size_t messages = 8;
constexpr std::size_t slot_size = 32;
// Each side's buffer: `messages` receive slots, then `messages` send slots.
constexpr std::size_t recv_at(std::size_t i) {
    return i * slot_size;
}
constexpr std::size_t send_at(std::size_t i) {
    return (messages + i) * slot_size;
}

std::string text_at(const std::vector<std::byte>& buf, std::size_t at, std::size_t n) {
    return {reinterpret_cast<const char*>(buf.data()) + at, n};
}
void put_text(std::vector<std::byte>& buf, std::size_t at, const std::string& s) {
    std::memcpy(buf.data() + at, s.data(), s.size());
}

const remora::connection_config config{.rcq = true};

void run_server(std::promise<std::uint16_t>& port) {
    auto dom = must(remora::domain::open(), "server: open domain");
    std::vector<std::byte> buf(2 * messages * slot_size);
    auto mr =
        must(remora::memory_region::create(dom, buf, usage::send | usage::receive), "server: reg");

    auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
    port.set_value(lst.port());
    auto req = must(lst.get_request(10s), "server: get_request");
    auto conn = must(req.accept(config), "server: accept");
    remora::completion_queue* rcq = conn.rcq();  // non-null: the connection has an RCQ
    if (rcq == nullptr) {
        die("server: no receive CQ");
    }

    for (std::size_t i = 0; i < messages; ++i) {
        must(conn.recv(mr, recv_at(i), slot_size, {.context = context_for(i)}), "server: recv");
    }
    // Serve requests from the RCQ; each answer's send completes on the CQ.
    for (std::size_t n = 0; n < messages; ++n) {
        const remora::completion c = next_completion(*rcq, "server");
        const std::size_t slot = slot_of(c, remora::op::recv, "server rcq");
        const std::string request = text_at(buf, recv_at(slot), c.bytes);
        const std::string answer = "answer to [" + request + "]";
        if (answer.size() > slot_size) {
            die("server: answer too long");
        }
        put_text(buf, send_at(slot), answer);
        must(conn.send(mr, send_at(slot), answer.size(), {.context = context_for(slot)}),
             "server: send");
    }
    for (std::size_t n = 0; n < messages; ++n) {
        (void)slot_of(next_completion(conn.cq(), "server"), remora::op::send, "server cq");
    }
    std::printf("server: %zu receives reaped from the rcq, %zu sends from the cq\n", messages,
                messages);

    example::wait_for_close(conn, "server");
}

}  // namespace

int main() {
    example::program_name = "example_receive_cq";
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s\n", dom.caps().provider.c_str());

    example::server_thread server(run_server);
    auto conn = must(remora::connection::connect(dom, "127.0.0.1", server.port(), config),
                     "client: connect");
    // The effective depths: the CQ holds the send queue only, the RCQ the receive queue.
    std::printf("client: cq depth %u (send queue %u), rcq depth %u (receive queue %u)\n",
                conn.config().cq_size, conn.config().sq_size, conn.config().rcq_size,
                conn.config().rq_size);

    std::vector<std::byte> buf(2 * messages * slot_size);
    auto mr =
        must(remora::memory_region::create(dom, buf, usage::send | usage::receive), "client: reg");

    // Receives for the answers first, then the requests.
    for (std::size_t i = 0; i < messages; ++i) {
        must(conn.recv(mr, recv_at(i), slot_size, {.context = context_for(i)}), "client: recv");
    }
    for (std::size_t i = 0; i < messages; ++i) {
        const std::string request = "request " + std::to_string(i);
        put_text(buf, send_at(i), request);
        must(conn.send(mr, send_at(i), request.size(), {.context = context_for(i)}),
             "client: send");
    }

    // Send completions only on the CQ...
    std::vector<bool> sent(messages, false);
    for (std::size_t n = 0; n < messages; ++n) {
        sent.at(slot_of(next_completion(conn.cq(), "client"), remora::op::send, "client cq")) =
            true;
    }
    // ...and the answers only on the RCQ.
    for (std::size_t n = 0; n < messages; ++n) {
        const remora::completion c = next_completion(*conn.rcq(), "client");
        const std::size_t slot = slot_of(c, remora::op::recv, "client rcq");
        std::printf("client: rcq: recv in slot %zu: \"%s\"\n", slot,
                    text_at(buf, recv_at(slot), c.bytes).c_str());
    }
    // Nothing is left over on either queue.
    remora::completion extra;
    if (must(conn.cq().poll({&extra, 1}), "client: poll") != 0 ||
        must(conn.rcq()->poll({&extra, 1}), "client: poll") != 0) {
        die("client: an unexpected extra completion");
    }
    for (std::size_t i = 0; i < messages; ++i) {
        if (!sent[i]) {
            die("client: no send completion for slot " + std::to_string(i));
        }
    }
    std::printf("client: %zu send completions on the cq, %zu receive completions on the rcq\n",
                messages, messages);

    must(conn.close(), "client: close");
    server.join();
    std::printf("receive_cq: ok\n");
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
// The application's messages beside the target service's on one connection
// (persistence_config::message_size): GPSPM flushes interleaved with send/recv ping-pongs, each
// message at its own consumer with its bytes; one side's receives missing while the other's
// traffic goes on; the peer going away in the middle; a peer process killed mid-traffic. MSG
// (tcp, sockets) and RDM peers (shm, tcp;ofi_rxm, net, sockets).
#include <remora/remora.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <string>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

// Posts with `post` until it is taken: an RDM provider answers would_block while it sets up the
// path to a new peer.
template <class Post>
result<void> retrying(Post&& post, std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        auto r = post();
        if (r || !(r.error() == errc::would_block) || std::chrono::steady_clock::now() >= deadline)
            return r;
        std::this_thread::yield();
    }
}

constexpr std::uint32_t depth = 4;
constexpr std::uint32_t rq = 4;
constexpr std::uint32_t msg = 200;

class service_messages : public testing::TestWithParam<std::string> {
  protected:
    // The server's in_flight() once its progress thread has reaped what is still on its way
    // (the service's last reply send completes after the client has the reply), within 10 s.
    static std::size_t settled_in_flight(connection& c) {
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (c.in_flight() != 0 && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(1ms);
        }
        return c.in_flight();
    }
    // A serving target answers the hello whatever serve_wait is; the wait bounds only a target
    // that does not serve, so it is generous here (a loaded or sanitized run answers slowly).
    void start(bool serve = true, std::chrono::milliseconds serve_wait = 10s,
               std::chrono::milliseconds timeout = 30s) {
        const persistence_config pc{.service_depth = depth,
                                    .message_size = msg,
                                    .service_timeout = timeout,
                                    .serve_wait = serve_wait};
        pair_ =
            must(connect_pair(GetParam(), {.rq_size = rq, .progress_thread = true, .addons = {pc}},
                              {.rq_size = rq, .addons = {pc}}));
        server_ = &*pair_->server;
        client_ = &*pair_->client;
        target_mem_ = std::make_unique<buffer>(1 << 12);
        target_ = must(memory_region::create(
            pair_->server_domain, target_mem_->span(),
            usage::write_destination | usage::flush_target | usage::atomic_target));
        service_ = must(target_service::create());
        desc_ = must(service_->expose(*target_));
        if (serve) {
            REMORA_ASSERT_OK(service_->serve(*server_));
        }
        for (auto* b : {&cbuf_, &sbuf_}) {
            *b = std::make_unique<buffer>(1 << 14);
        }
        cmr_ = must(memory_region::create(pair_->client_domain, cbuf_->span(),
                                          usage::send | usage::receive | usage::write_source));
        smr_ = must(memory_region::create(pair_->server_domain, sbuf_->span(),
                                          usage::send | usage::receive));
    }

    // Writes `text` into buffer `b` at `at` (a message's bytes).
    static void put(buffer& b, std::size_t at, const std::string& text) {
        std::memcpy(b.bytes.data() + at, text.data(), text.size());
    }
    static std::string get(buffer& b, std::size_t at, std::size_t n) {
        return {reinterpret_cast<const char*>(b.bytes.data() + at), n};
    }
    // A message's text: distinct lengths and bytes per round.
    static std::string text(const char* who, int i) {
        return std::string(who) + " #" + std::to_string(i) +
               std::string(10 + (i * 37) % 150, 'a' + i % 26);
    }

    completion_queue& rq_of(connection& c) { return c.rcq() != nullptr ? *c.rcq() : c.cq(); }

    // The memory outlives the connections: a progress thread may still be in the provider with
    // it when the test ends (ASan's sendmsg check).
    std::unique_ptr<buffer> target_mem_, cbuf_, sbuf_;
    std::optional<connected_pair> pair_;
    connection* server_ = nullptr;
    connection* client_ = nullptr;
    std::optional<memory_region> target_, cmr_, smr_;
    std::optional<target_service> service_;
    remote_region desc_;
};

constexpr flush_options gpspm{.type = flush_type::visibility, .method = flush_method::gpspm};

TEST_P(service_messages, gpspm_flushes_and_ping_pongs_share_the_connection) {
    start();
    EXPECT_EQ(client_->config().rq_size, depth + 1 + 2 * rq);
    constexpr int rounds = 24;
    int server_ctx[rounds], client_ctx[rounds];
    // The server keeps its receives posted ahead; the client posts one per round.
    for (int i = 0; i < 2; ++i) {
        REMORA_ASSERT_OK(
            server_->recv(*smr_, std::size_t(i % 2) * 4096, msg, {.context = &server_ctx[i]}));
    }
    for (int i = 0; i < rounds; ++i) {
        const std::size_t slot = std::size_t(i % 2) * 4096;
        REMORA_ASSERT_OK(client_->recv(*cmr_, 8192 + slot, msg, {.context = &client_ctx[i]}));
        put(*cbuf_, 1024 + 8 * i, "word" + std::to_string(1000 + i).substr(0, 4));
        REMORA_ASSERT_OK(
            retrying([&] { return client_->write(desc_, 8 * i, *cmr_, 1024 + 8 * i, 8); }));
        REMORA_ASSERT_OK(
            remora::flush(*client_, desc_, 8 * i, 8, gpspm, {.context = &client_ctx[i]}));
        const std::string ping = text("ping", i);
        put(*cbuf_, slot, ping);
        REMORA_ASSERT_OK(retrying([&] { return client_->send(*cmr_, slot, ping.size()); }));
        // The server's application gets exactly the ping, never a service message.
        std::vector<completion> got;
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (got.empty() && std::chrono::steady_clock::now() < until) {
            for (const auto& c : collect(rq_of(*server_), 1, true, 100ms)) {
                if (c.op == op::send) {  // the last round's pong (no receive CQ)
                    EXPECT_TRUE(c.ok()) << c.status.message();
                } else {
                    got.push_back(c);
                }
            }
        }
        ASSERT_EQ(got.size(), 1u) << "round " << i;
        ASSERT_TRUE(got[0].ok()) << got[0].status.message();
        EXPECT_EQ(got[0].op, op::recv);
        EXPECT_EQ(got[0].context, &server_ctx[i]);
        ASSERT_EQ(got[0].bytes, ping.size());
        EXPECT_EQ(get(*sbuf_, slot, ping.size()), ping);
        // Reposted for round i + 2 (its context array index wraps to the slot).
        if (i + 2 < rounds) {
            REMORA_ASSERT_OK(server_->recv(*smr_, slot, msg, {.context = &server_ctx[i + 2]}));
        }
        const std::string pong = text("pong", i);
        put(*sbuf_, 2048 + slot, pong);
        REMORA_ASSERT_OK(retrying(
            [&] { return server_->send_with_imm(*smr_, 2048 + slot, pong.size(), 7000 + i); }));
        // The client: its write, its flush and the pong (any order between flush and pong).
        bool flushed = false, ponged = false;
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while ((!flushed || !ponged) && std::chrono::steady_clock::now() < deadline) {
            for (const auto& c : collect(client_->cq(), 1, true, 100ms)) {
                ASSERT_TRUE(c.ok()) << to_string(c.op) << ": " << c.status.message();
                if (c.op == op::flush) {
                    EXPECT_EQ(c.context, &client_ctx[i]);
                    flushed = true;
                } else if (c.op == op::recv) {
                    EXPECT_EQ(c.context, &client_ctx[i]);
                    ASSERT_EQ(c.bytes, pong.size());
                    EXPECT_EQ(get(*cbuf_, 8192 + slot, pong.size()), pong);
                    EXPECT_TRUE(c.has_imm);
                    EXPECT_EQ(c.imm, std::uint64_t(7000 + i));
                    ponged = true;
                } else {
                    EXPECT_TRUE(c.op == op::write || c.op == op::send) << to_string(c.op);
                }
            }
        }
        ASSERT_TRUE(flushed && ponged) << "round " << i;
        EXPECT_EQ(
            std::memcmp(target_mem_->bytes.data() + 8 * i, cbuf_->bytes.data() + 1024 + 8 * i, 8),
            0);
    }
    // Every service request was a flush of ours, every one answered without refusal: no
    // application message reached the service.
    EXPECT_EQ(service_->requests(), std::uint64_t(rounds));
    EXPECT_EQ(service_->refused(), 0u);
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (client_->in_flight() != 0 && std::chrono::steady_clock::now() < until) {
        collect(client_->cq(), 1, true, 50ms);
    }
    EXPECT_EQ(client_->in_flight(), 0u);
}

TEST_P(service_messages, messages_wait_for_late_receives_while_flushes_go_on) {
    start();
    // The server's application posts no receive yet: its messages wait in the library's.
    constexpr int kept = 3;
    for (int i = 0; i < kept; ++i) {
        const std::string m = text("early", i);
        put(*cbuf_, 256 * i, m);
        REMORA_ASSERT_OK(retrying([&] { return client_->send(*cmr_, 256 * i, m.size()); }));
    }
    // Service requests keep being answered meanwhile, past the service depth.
    constexpr int flushes = 4 * depth;
    int done = 0;
    for (int i = 0; i < flushes; ++i) {
        REMORA_ASSERT_OK(retrying([&] { return remora::flush(*client_, desc_, 0, 8, gpspm); }));
        for (const auto& c : collect(client_->cq(), 1, true, 10s)) {
            ASSERT_TRUE(c.ok()) << to_string(c.op) << ": " << c.status.message();
            done += c.op == op::flush ? 1 : 0;
        }
    }
    while (done < flushes) {
        auto got = collect(client_->cq(), 1, true, 10s);
        ASSERT_EQ(got.size(), 1u);
        done += got[0].op == op::flush ? 1 : 0;
    }
    EXPECT_EQ(service_->requests(), std::uint64_t(flushes));
    EXPECT_EQ(service_->refused(), 0u);
    // The receives come late: each completes with its message, in order.
    int ctx[kept];
    for (int i = 0; i < kept; ++i) {
        REMORA_ASSERT_OK(server_->recv(*smr_, 1024 * i, msg, {.context = &ctx[i]}));
    }
    auto got = collect(rq_of(*server_), kept, true, 10s);
    ASSERT_EQ(got.size(), std::size_t(kept));
    for (int i = 0; i < kept; ++i) {
        const std::string m = text("early", i);
        ASSERT_TRUE(got[i].ok()) << got[i].status.message();
        EXPECT_EQ(got[i].op, op::recv);
        EXPECT_EQ(got[i].context, &ctx[i]);
        ASSERT_EQ(got[i].bytes, m.size());
        EXPECT_EQ(get(*sbuf_, 1024 * i, m.size()), m);
    }
    EXPECT_EQ(settled_in_flight(*server_), 0u);
    // The application's receives are bounded by rq_size, apart from the service's.
    for (std::uint32_t i = 0; i < rq; ++i) {
        REMORA_ASSERT_OK(client_->recv(*cmr_, 8192, 16));
    }
    EXPECT_ERRC(client_->recv(*cmr_, 8192, 16), errc::would_block);
    EXPECT_EQ(client_->in_flight(), std::size_t(rq));
    REMORA_ASSERT_OK(retrying([&] { return remora::flush(*client_, desc_, 0, 8, gpspm); }));
    auto f = collect(client_->cq(), 1, true, 10s);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].op, op::flush);
    EXPECT_TRUE(f[0].ok()) << f[0].status.message();
}

TEST_P(service_messages, messages_past_rq_size_ahead_of_receives_fail_their_receives_in_order) {
    start();
    // rq_size + 2 messages before any receive: rq_size wait, the last two are dropped.
    constexpr int sent = rq + 2;
    for (int i = 0; i < sent; ++i) {
        const std::string m = text("ahead", i);
        put(*cbuf_, 256 * i, m);
        REMORA_ASSERT_OK(retrying([&] { return client_->send(*cmr_, 256 * i, m.size()); }));
    }
    // The send completions say the messages left; a flush behind them says they arrived (and
    // that the service's messages go on meanwhile).
    REMORA_ASSERT_OK(retrying([&] { return remora::flush(*client_, desc_, 0, 8, gpspm); }));
    bool flushed = false;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!flushed && std::chrono::steady_clock::now() < deadline) {
        for (const auto& c : collect(client_->cq(), 1, true, 100ms)) {
            ASSERT_TRUE(c.ok()) << to_string(c.op) << ": " << c.status.message();
            flushed = flushed || c.op == op::flush;
        }
    }
    ASSERT_TRUE(flushed);
    int ctx[sent + 1];
    for (int i = 0; i < int(rq); ++i) {
        REMORA_ASSERT_OK(server_->recv(*smr_, 1024 * i, msg, {.context = &ctx[i]}));
    }
    auto got = collect(rq_of(*server_), rq, true, 10s);
    for (int i = rq; i < sent; ++i) {
        REMORA_ASSERT_OK(server_->recv(*smr_, 0, msg, {.context = &ctx[i]}));
        auto more = collect(rq_of(*server_), 1, true, 10s);
        got.insert(got.end(), more.begin(), more.end());
    }
    ASSERT_EQ(got.size(), std::size_t(sent));
    for (int i = 0; i < sent; ++i) {
        EXPECT_EQ(got[i].op, op::recv);
        EXPECT_EQ(got[i].context, &ctx[i]);
        if (i < int(rq)) {
            const std::string m = text("ahead", i);
            ASSERT_TRUE(got[i].ok()) << got[i].status.message();
            ASSERT_EQ(got[i].bytes, m.size());
            EXPECT_EQ(get(*sbuf_, 1024 * i, m.size()), m);
        } else {
            EXPECT_TRUE(got[i].status == errc::would_block) << got[i].status.message();
            EXPECT_EQ(got[i].bytes, 0u);
        }
    }
    // The connection goes on: the next message reaches the next receive.
    REMORA_ASSERT_OK(server_->recv(*smr_, 0, msg, {.context = &ctx[sent]}));
    const std::string m = text("after", 0);
    put(*cbuf_, 0, m);
    REMORA_ASSERT_OK(retrying([&] { return client_->send(*cmr_, 0, m.size()); }));
    auto last = collect(rq_of(*server_), 1, true, 10s);
    ASSERT_EQ(last.size(), 1u);
    ASSERT_TRUE(last[0].ok()) << last[0].status.message();
    EXPECT_EQ(last[0].context, &ctx[sent]);
    EXPECT_EQ(get(*sbuf_, 0, m.size()), m);
    EXPECT_EQ(settled_in_flight(*server_), 0u);
}

TEST_P(service_messages, an_unserved_service_does_not_hold_up_the_applications_messages) {
    // The target never serves: the client's service messages find no receive of the service's
    // there, yet the applications' messages flow both ways.
    start(false, 300ms);
    int ctx = 0;
    REMORA_ASSERT_OK(
        retrying([&] { return remora::flush(*client_, desc_, 0, 8, gpspm, {.context = &ctx}); }));
    for (int i = 0; i < 6; ++i) {
        REMORA_ASSERT_OK(server_->recv(*smr_, 0, msg));
        const std::string m = text("ping", i);
        put(*cbuf_, 0, m);
        REMORA_ASSERT_OK(retrying([&] { return client_->send(*cmr_, 0, m.size()); }));
        auto got = collect(rq_of(*server_), 1, true, 10s);
        ASSERT_EQ(got.size(), 1u);
        ASSERT_TRUE(got[0].ok()) << got[0].status.message();
        ASSERT_EQ(got[0].bytes, m.size());
        EXPECT_EQ(get(*sbuf_, 0, m.size()), m);
    }
    // The flush ends as an unserved target's request does.
    completion flush{};
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (flush.op != op::flush && std::chrono::steady_clock::now() < deadline) {
        for (const auto& c : collect(client_->cq(), 1, true, 100ms)) {
            if (c.op == op::flush) {
                flush = c;
            }
        }
    }
    ASSERT_EQ(flush.op, op::flush);
    EXPECT_EQ(flush.context, &ctx);
    EXPECT_TRUE(flush.status == errc::bad_state) << flush.status.message();
    EXPECT_EQ(service_->requests(), 0u);
}

TEST_P(service_messages, a_request_that_comes_before_the_target_serves_is_answered_once_it_does) {
    // The server's application posts a receive first (the library's receives are then posted),
    // the client's flush (and its hello) arrive before the target serves: they wait for the
    // service, which answers them once it serves. Not dropped as a late reply.
    start(false);
    REMORA_ASSERT_OK(server_->recv(*smr_, 0, msg));
    int ctx = 0;
    REMORA_ASSERT_OK(
        retrying([&] { return remora::flush(*client_, desc_, 0, 8, gpspm, {.context = &ctx}); }));
    std::this_thread::sleep_for(200ms);  // the requests reach the server's receives first
    EXPECT_TRUE(collect(client_->cq(), 1, true, 10ms).empty());
    REMORA_ASSERT_OK(service_->serve(*server_));
    auto got = collect(client_->cq(), 1, true, 10s);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].op, op::flush);
    EXPECT_EQ(got[0].context, &ctx);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(service_->requests(), 1u);
}

TEST_P(service_messages, a_request_past_service_timeout_ends_while_messages_flow) {
    // No serve_wait check and a target that never serves: the flushes end at service_timeout,
    // through an entry of the library's receives (a canceled one), and messages go on.
    start(false, 0ms, 300ms);
    int ctx[2];
    for (int& x : ctx) {
        REMORA_ASSERT_OK(
            retrying([&] { return remora::flush(*client_, desc_, 0, 8, gpspm, {.context = &x}); }));
    }
    std::size_t ended = 0;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (ended < 2 && std::chrono::steady_clock::now() < deadline) {
        for (const auto& c : collect(client_->cq(), 1, true, 100ms)) {
            if (c.op == op::flush) {
                EXPECT_TRUE(c.context == &ctx[0] || c.context == &ctx[1]);
                EXPECT_TRUE(c.status == errc::timed_out) << c.status.message();
                ++ended;
            }
        }
    }
    EXPECT_EQ(ended, 2u);
    EXPECT_EQ(client_->in_flight(), 0u);
    REMORA_ASSERT_OK(server_->recv(*smr_, 0, msg));
    const std::string m = text("still", 1);
    put(*cbuf_, 0, m);
    REMORA_ASSERT_OK(retrying([&] { return client_->send(*cmr_, 0, m.size()); }));
    auto got = collect(rq_of(*server_), 1, true, 10s);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(get(*sbuf_, 0, m.size()), m);
}

TEST_P(service_messages, receives_and_requests_in_flight_end_once_when_the_peer_goes_away) {
    start();
    int rctx[2];
    REMORA_ASSERT_OK(client_->recv(*cmr_, 8192, msg, {.context = &rctx[0]}));
    REMORA_ASSERT_OK(client_->recv(*cmr_, 9000, msg, {.context = &rctx[1]}));
    // One ping-pong first, so both sides' paths are up.
    REMORA_ASSERT_OK(server_->recv(*smr_, 0, msg));
    put(*cbuf_, 0, "hello");
    REMORA_ASSERT_OK(retrying([&] { return client_->send(*cmr_, 0, 5); }));
    ASSERT_EQ(collect(rq_of(*server_), 1, true, 10s).size(), 1u);
    put(*sbuf_, 100, "back!");
    REMORA_ASSERT_OK(retrying([&] { return server_->send(*smr_, 100, 5); }));
    std::size_t recvs = 0, flushes = 0;
    for (const auto& c : collect(client_->cq(), 2, true, 10s)) {
        recvs += c.op == op::recv ? 1 : 0;
    }
    ASSERT_EQ(recvs, 1u);
    for (std::uint32_t i = 0; i < depth; ++i) {
        REMORA_ASSERT_OK(retrying([&] { return remora::flush(*client_, desc_, 0, 8, gpspm); }));
    }
    REMORA_ASSERT_OK(server_->close());
    if (is_rdm(GetParam())) {
        // An RDM peer's end is not announced: this side's close ends what waits. (The target
        // goes first: an RDM endpoint closed in this process while its peer here still posts to
        // it is not a supported case, docs/providers.md.)
        REMORA_ASSERT_OK(client_->close());
    }
    recvs = 0;
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while ((recvs < 1 || flushes < depth) && std::chrono::steady_clock::now() < deadline) {
        for (const auto& c : collect(client_->cq(), 1, true, 100ms)) {
            if (c.op == op::recv) {
                ++recvs;
                EXPECT_EQ(c.context, &rctx[1]);
                EXPECT_FALSE(c.ok());
            } else if (c.op == op::flush) {
                ++flushes;
            }
        }
    }
    EXPECT_EQ(recvs, 1u);
    EXPECT_EQ(flushes, std::size_t(depth));
    // What is left (requests' send completions) reports nothing more: each ended once.
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (client_->in_flight() != 0 && std::chrono::steady_clock::now() < until) {
        for (const auto& c : collect(client_->cq(), 1, true, 50ms)) {
            EXPECT_TRUE(c.op != op::recv && c.op != op::flush) << to_string(c.op);
        }
    }
    EXPECT_EQ(client_->in_flight(), 0u);
}

// A message with immediate data sent just before the peer goes away reaches the receive waiting
// for it, whether the receive came before the message or after (kept meanwhile): the close's
// cancels of the library's receives may be reported ahead of the message (sockets reads error
// entries first), and they end the receives still waiting only once every library receive has
// come back. Each round races the peer's end against the message's delivery (the default receive
// queue: many library receives to cancel); the outcome must not depend on who wins. MSG only: an
// RDM peer's end is not announced.
class service_messages_msg : public service_messages {};

TEST_P(service_messages_msg, a_message_just_before_the_peer_goes_away_reaches_its_receive) {
    const persistence_config pc{.service_depth = depth, .message_size = msg};
    buffer sbuf(4096), cbuf(4096), target(4096);
    for (int round = 0; round < 6; ++round) {
        SCOPED_TRACE(round);
        auto p = must(connect_pair(
            GetParam(), {.rcq = true, .progress_thread = true, .addons = {pc}}, {.addons = {pc}}));
        auto tmr = must(memory_region::create(p.server_domain, target.span(),
                                              usage::write_destination | usage::flush_target));
        auto smr = must(memory_region::create(p.server_domain, sbuf.span(), usage::receive));
        auto cmr = must(memory_region::create(p.client_domain, cbuf.span(), usage::send));
        auto service = must(target_service::create());
        const remote_region desc = must(service.expose(tmr));
        REMORA_ASSERT_OK(service.serve(*p.server));
        // A flush first: the service's receives and the path are in use, as in an application.
        REMORA_ASSERT_OK(remora::flush(*p.client, desc, 0, 8, gpspm));
        ASSERT_EQ(collect(p.client->cq(), 1, true, 10s).size(), 1u);
        const bool receive_first = round % 2 == 0;
        int ctx = 0;
        if (receive_first) {
            REMORA_ASSERT_OK(p.server->recv(smr, 0, msg, {.context = &ctx}));
        }
        // The server waits meanwhile, as an application blocked on its receive (a wait watches the
        // connection's events: the peer's end is seen at once).
        auto waiting =
            std::async(std::launch::async, [&] { return collect(*p.server->rcq(), 1, true, 10s); });
        std::memcpy(cbuf.bytes.data(), "done", 4);
        REMORA_ASSERT_OK(p.client->send_with_imm(cmr, 0, 4, 42 + round));
        ASSERT_EQ(collect(p.client->cq(), 1, true, 10s).size(), 1u);  // the send's completion
        if (!receive_first) {
            REMORA_ASSERT_OK(p.server->recv(smr, 0, msg, {.context = &ctx}));
        }
        p.client.reset();  // closed and gone at once, as a peer that exits
        const auto got = waiting.get();
        ASSERT_EQ(got.size(), 1u);
        EXPECT_TRUE(got[0].ok()) << got[0].status.message();
        EXPECT_EQ(got[0].op, op::recv);
        EXPECT_EQ(got[0].context, &ctx);
        EXPECT_EQ(got[0].bytes, 4u);
        EXPECT_TRUE(got[0].has_imm);
        EXPECT_EQ(got[0].imm, std::uint64_t(42 + round));
        EXPECT_EQ(std::memcmp(sbuf.bytes.data(), "done", 4), 0);
    }
}

TEST_P(service_messages, bad_configuration_and_oversize_messages_are_refused) {
    start();
    std::string big(msg + 1, 'x');
    put(*cbuf_, 0, big);
    EXPECT_ERRC(client_->send(*cmr_, 0, big.size()), errc::too_large);
    auto dom = must(domain::open({.provider = "tcp"}));
    auto lst = must(listener::create(dom, "127.0.0.1", 0));
    EXPECT_ERRC(connection::connect(dom, "127.0.0.1", lst.port(),
                                    {.addons = {persistence_config{.message_size = 64}}}),
                errc::invalid_argument);
}

const persistence_config child_pc{.service_depth = depth, .message_size = msg};

// The peer process of killed_peer_process_*: a target that serves GPSPM on the connection and
// sends the application's messages on it, paced, until it is killed.
TEST(service_messages_child, DISABLED_peer_process) {
    const char* prov = std::getenv("REMORA_SM_CHILD");
    const char* fds = std::getenv("REMORA_SM_CHILD_FDS");
    if (prov == nullptr || fds == nullptr)
        GTEST_SKIP() << "the peer process of killed_peer_process_*: runs only from that test";
    int in = -1, out = -1;
    ASSERT_EQ(std::sscanf(fds, "%d,%d", &in, &out), 2);
    const std::string p = prov;
    const connection_config cfg{.rq_size = rq, .progress_thread = true, .addons = {child_pc}};
    std::optional<domain> d;
    std::optional<listener> l;
    std::optional<connection> c;
    if (is_rdm(p)) {
        d = must(domain::open({.provider = p.substr(4), .endpoint = endpoint_type::rdm}));
        c = must(connection::open_peer(*d, cfg));
        const auto n = static_cast<std::uint32_t>(c->local_address().size());
        ASSERT_TRUE(write_all(out, &n, 4) && write_all(out, c->local_address().data(), n));
        std::uint32_t m = 0;
        ASSERT_TRUE(read_all(in, &m, 4) && m < 4096);
        std::vector<std::byte> peer(m);
        ASSERT_TRUE(read_all(in, peer.data(), m));
        REMORA_ASSERT_OK(c->attach(peer));
    } else {
        d = must(domain::open({.provider = p}));
        l = must(listener::create(*d, "127.0.0.1", 0));
        const std::uint32_t port = l->port();
        ASSERT_TRUE(write_all(out, &port, 4));
        auto req = must(l->get_request(10s));
        c = must(req.accept(cfg));
    }
    buffer target(1 << 12), mem(1 << 12);
    auto tmr = must(
        memory_region::create(*d, target.span(), usage::write_destination | usage::flush_target));
    auto svc = must(target_service::create());
    const auto desc = must(svc.expose(tmr)).serialize();
    REMORA_ASSERT_OK(svc.serve(*c));
    ASSERT_TRUE(write_all(out, desc.data(), desc.size()));
    auto mr = must(memory_region::create(*d, mem.span(), usage::send));
    completion buf[8];
    for (std::uint64_t i = 0;; ++i) {  // until killed
        std::memcpy(mem.bytes.data(), &i, 8);
        (void)c->send(mr, 0, 64);  // would_block while the parent's receives are all taken
        for (int k = 0; k < 10; ++k) {
            (void)c->cq().poll(buf);
            std::this_thread::sleep_for(50us);
        }
    }
}

// The peer process (a target serving GPSPM and sending the application's messages) is killed
// while messages and flushes flow; this side's library progress thread is still placing messages
// (posting its receives again) as the connection ends: every receive and flush posted ends exactly
// once, and nothing is left in flight. MSG: the peer's death ends them; RDM (no event): close().
TEST_P(service_messages, killed_peer_process_ends_every_receive_and_request_once) {
    int to_child[2], from_child[2];
    ASSERT_EQ(::pipe2(to_child, O_CLOEXEC), 0);
    ASSERT_EQ(::pipe2(from_child, O_CLOEXEC), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        ::dup2(to_child[0], 100);  // survive exec (O_CLOEXEC)
        ::dup2(from_child[1], 101);
        ::setenv("REMORA_SM_CHILD", GetParam().c_str(), 1);
        ::setenv("REMORA_SM_CHILD_FDS", "100,101", 1);
        ::execl("/proc/self/exe", "service_messages_test", "--gtest_also_run_disabled_tests",
                "--gtest_filter=service_messages_child.DISABLED_peer_process",
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    struct reap {
        pid_t pid;
        int fds[2];
        ~reap() {
            if (pid > 0) {  // never kill(-1, ...)
                ::kill(pid, SIGKILL);
                ::waitpid(pid, nullptr, 0);
                remove_shm_regions_of(pid);
            }
            ::close(fds[0]);
            ::close(fds[1]);
        }
    } reaper{child, {to_child[1], from_child[0]}};

    const std::string p = GetParam();
    const connection_config cfg{.rq_size = rq, .progress_thread = true, .addons = {child_pc}};
    std::optional<domain> d;
    std::optional<connection> c;
    if (is_rdm(p)) {
        d = must(domain::open({.provider = p.substr(4), .endpoint = endpoint_type::rdm}));
        c = must(connection::open_peer(*d, cfg));
        std::uint32_t n = 0;
        ASSERT_TRUE(read_all(from_child[0], &n, 4) && n < 4096);
        std::vector<std::byte> peer(n);
        ASSERT_TRUE(read_all(from_child[0], peer.data(), n));
        const auto m = static_cast<std::uint32_t>(c->local_address().size());
        ASSERT_TRUE(write_all(to_child[1], &m, 4) &&
                    write_all(to_child[1], c->local_address().data(), m));
        REMORA_ASSERT_OK(c->attach(peer));
    } else {
        d = must(domain::open({.provider = p}));
        std::uint32_t port = 0;
        ASSERT_TRUE(read_all(from_child[0], &port, 4));
        c = must(connection::connect(*d, "127.0.0.1", static_cast<std::uint16_t>(port), cfg));
    }
    std::array<std::byte, remote_region::serialized_size> raw;
    ASSERT_TRUE(read_all(from_child[0], raw.data(), raw.size()));
    const auto desc = must(remote_region::parse(raw));
    buffer mem(1 << 14);
    auto mr = must(memory_region::create(*d, mem.span(), usage::receive | usage::write_source));

    // Contexts: receives 1, 2, ...; flushes 100000 + 1, 2, ...; each must end exactly once.
    std::map<std::uintptr_t, int> ended;
    std::uintptr_t recvs = 0, flushes = 0, in_flight_flushes = 0;
    auto post_recv = [&] {
        ++recvs;
        REMORA_ASSERT_OK(
            c->recv(mr, (recvs % rq) * 256, msg, {.context = reinterpret_cast<void*>(recvs)}));
    };
    auto take = [&](const completion& x, bool more) {
        const auto id = reinterpret_cast<std::uintptr_t>(x.context);
        if (x.op == op::recv || x.op == op::flush) {
            ++ended[id];
            EXPECT_TRUE(x.op == op::recv ? id >= 1 && id <= recvs
                                         : id > 100000 && id <= 100000 + flushes)
                << to_string(x.op) << " " << id;
        }
        if (x.op == op::flush) {
            --in_flight_flushes;
        }
        // A message that came when rq_size of them waited already fails its receive
        // would_block (this child sends as fast as it may).
        if (more && x.op == op::recv && (x.ok() || x.status == errc::would_block)) {
            post_recv();
        }
    };
    for (std::uint32_t i = 0; i < rq; ++i) {
        post_recv();
    }
    std::size_t received = 0;
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (received < 40 && std::chrono::steady_clock::now() < until) {
        while (in_flight_flushes < depth) {
            auto f = remora::flush(*c, desc, 0, 8, gpspm,
                                   {.context = reinterpret_cast<void*>(100000 + flushes + 1)});
            if (!f) {
                ASSERT_TRUE(f.error() == errc::would_block) << f.error().what();
                break;
            }
            ++flushes;
            ++in_flight_flushes;
        }
        for (const auto& x : collect(c->cq(), 1, true, 100ms)) {
            received += x.op == op::recv && x.ok() ? 1 : 0;
            take(x, true);
        }
    }
    ASSERT_GE(received, 40u) << "messages did not flow before the kill";
    ::kill(child, SIGKILL);  // the peer dies mid-traffic
    reaper.pid = 0;
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);
    remove_shm_regions_of(child);
    auto all_ended = [&] {
        return std::all_of(ended.begin(), ended.end(), [](auto& e) { return e.second >= 1; }) &&
               ended.size() == recvs + flushes;
    };
    if (!is_rdm(p)) {
        // The peer's death is a close: what waits ends without this side's close.
        const auto deadline = std::chrono::steady_clock::now() + 15s;
        while (!all_ended() && std::chrono::steady_clock::now() < deadline) {
            for (const auto& x : collect(c->cq(), 1, true, 100ms)) {
                take(x, false);
            }
        }
        EXPECT_TRUE(all_ended()) << ended.size() << " of " << recvs + flushes << " ended";
    }
    REMORA_ASSERT_OK(c->close());
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while ((c->in_flight() != 0 || !all_ended()) && std::chrono::steady_clock::now() < deadline) {
        for (const auto& x : collect(c->cq(), 1, true, 50ms)) {
            take(x, false);
        }
    }
    EXPECT_EQ(c->in_flight(), 0u);
    EXPECT_EQ(ended.size(), recvs + flushes);
    for (const auto& [id, n] : ended) {
        EXPECT_EQ(n, 1) << "context " << id << " ended " << n << " times";
    }
}

std::vector<std::string> params() {
    return {"tcp", "sockets", "rdm:shm", "rdm:tcp;ofi_rxm", "rdm:net", "rdm:sockets"};
}

INSTANTIATE_TEST_SUITE_P(providers, service_messages, testing::ValuesIn(params()), provider_name);
INSTANTIATE_TEST_SUITE_P(providers, service_messages_msg, testing::Values("tcp", "sockets"),
                         provider_name);

}  // namespace
}  // namespace remora::test

// SPDX-License-Identifier: BSD-3-Clause
// Completion channels: CQ only / CQ + RCQ, each with separate or shared channels, driven by busy
// polling and by blocking waits, on every provider. Request/response traffic both ways; every
// completion must arrive on the CQ it belongs to, exactly once, and no wait may lose one.
#include <future>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "support.hpp"

namespace remora::test {
namespace {

struct channel_case {
    std::string provider;
    bool rcq;
    channel_mode mode;
    bool blocking;
};

std::string name_of(const channel_case& c) {
    return c.provider + (c.rcq ? "_cq_rcq" : "_cq_only") +
           (c.mode == channel_mode::shared ? "_shared" : "_separate") +
           (c.blocking ? "_blocking" : "_busy");
}

std::string case_name(const testing::TestParamInfo<channel_case>& i) {
    return name_of(i.param);
}

// What GoogleTest (and ctest's listing) prints for a case: its name, not its bytes.
void PrintTo(const channel_case& c, std::ostream* os) {
    *os << name_of(c);
}

std::vector<channel_case> all_cases() {
    std::vector<channel_case> out;
    for (const auto& p : providers()) {
        for (bool rcq : {false, true}) {
            for (auto mode : {channel_mode::separate, channel_mode::shared}) {
                for (bool blocking : {false, true}) {
                    out.push_back({p, rcq, mode, blocking});
                }
            }
        }
    }
    return out;
}

// Gathers completions from a connection in the configured way, checking each lands on the right
// queue: receives on the RCQ when there is one, everything else on the CQ.
class reaper {
  public:
    reaper(connection& c, const channel_case& cc) : conn_(c), cc_(cc) {}

    // Reaps until `sends` send completions and `recvs` receive completions have been seen.
    void reap(std::size_t sends, std::size_t recvs, std::vector<completion>& got_recv) {
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while ((sends_ < sends || recvs_ < recvs) && std::chrono::steady_clock::now() < deadline) {
            if (!cc_.blocking) {
                drain(conn_.cq(), got_recv);
                if (conn_.rcq() != nullptr)
                    drain(*conn_.rcq(), got_recv);
                continue;
            }
            if (cc_.mode == channel_mode::shared) {
                auto ev = conn_.wait(1s);
                if (!ev) {
                    ASSERT_TRUE(ev.error() == errc::timed_out) << ev.error().what();
                    continue;
                }
                ++wakeups_;
                if (ev->ready == 0)
                    ++empty_wakeups_;
                ASSERT_EQ(ev->tag, conn_.config().tag);
                ASSERT_EQ(ev->kind, ev->cq->kind());
                drain(*ev->cq, got_recv);
            } else {
                // Separate channels: wait on the queue that still owes completions.
                completion_queue& q = (recvs_ < recvs && conn_.rcq() != nullptr)   ? *conn_.rcq()
                                      : (sends_ < sends || conn_.rcq() == nullptr) ? conn_.cq()
                                                                                   : *conn_.rcq();
                auto w = q.wait(1s);
                if (!w) {
                    ASSERT_TRUE(w.error() == errc::timed_out) << w.error().what();
                    continue;
                }
                ++wakeups_;
                if (*w == 0)
                    ++empty_wakeups_;
                drain(q, got_recv);
            }
        }
        EXPECT_EQ(sends_, sends);
        EXPECT_EQ(recvs_, recvs);
    }
    std::size_t wakeups() const { return wakeups_; }
    std::size_t empty_wakeups() const { return empty_wakeups_; }

  private:
    void drain(completion_queue& q, std::vector<completion>& got_recv) {
        completion buf[8];
        auto n = q.poll(buf);
        ASSERT_TRUE(n) << n.error().what();
        for (std::size_t i = 0; i < *n; ++i) {
            const completion& c = buf[i];
            ASSERT_TRUE(c.ok()) << to_string(c.op) << ": " << c.status.message();
            if (c.op == op::recv) {
                // With an RCQ, receives must never show up on the CQ (and vice versa).
                EXPECT_EQ(q.kind(), conn_.rcq() != nullptr ? cq_kind::rcq : cq_kind::cq);
                got_recv.push_back(c);
                ++recvs_;
            } else {
                EXPECT_EQ(c.op, op::send);
                EXPECT_EQ(q.kind(), cq_kind::cq);
                ++sends_;
            }
        }
    }
    connection& conn_;
    const channel_case& cc_;
    std::size_t sends_ = 0, recvs_ = 0, wakeups_ = 0, empty_wakeups_ = 0;
};

class channels : public testing::TestWithParam<channel_case> {};

// A GPSPM-like exchange: the client sends a request, the server answers, `rounds` times, with
// `window` requests in flight.
TEST_P(channels, request_response_exactly_once) {
    const channel_case& cc = GetParam();
    constexpr std::size_t rounds = 200, window = 8, msg = 64;
    connection_config cfg{.sq_size = 16, .rq_size = 16, .rcq = cc.rcq, .channel = cc.mode};
    connection_config server_cfg = cfg;
    server_cfg.tag = 7;
    connection_config client_cfg = cfg;
    client_cfg.tag = 9;
    auto p = must(connect_pair(cc.provider, server_cfg, client_cfg));
    ASSERT_EQ(p.client->rcq() != nullptr, cc.rcq);
    ASSERT_EQ(p.client->config().cq_size, cc.rcq ? 16u : 32u);

    std::thread server([&] {
        buffer mem(window * 2 * msg);
        auto mr =
            must(memory_region::create(p.server_domain, mem.span(), usage::send | usage::receive));
        connection& s = *p.server;
        for (std::size_t i = 0; i < window; ++i) {
            REMORA_ASSERT_OK(s.recv(mr, i * msg, msg, {.context = reinterpret_cast<void*>(i)}));
        }
        reaper r(s, cc);
        std::size_t answered = 0;
        std::vector<completion> recvs;
        while (answered < rounds) {
            recvs.clear();
            // Wait for at least one request, then answer each one received.
            r.reap(answered, answered + 1, recvs);
            for (const completion& c : recvs) {
                const auto slot = reinterpret_cast<std::size_t>(c.context);
                std::uint64_t seq;
                std::memcpy(&seq, mem.bytes.data() + slot * msg, sizeof(seq));
                EXPECT_EQ(seq, answered);
                std::memcpy(mem.bytes.data() + (window + slot) * msg, &seq, sizeof(seq));
                REMORA_ASSERT_OK(s.send(mr, (window + slot) * msg, msg));
                if (answered + window < rounds) {
                    REMORA_ASSERT_OK(s.recv(mr, slot * msg, msg, {.context = c.context}));
                }
                ++answered;
            }
        }
        std::vector<completion> none;
        r.reap(rounds, rounds, none);
        if (cc.mode == channel_mode::shared && cc.blocking) {
            // Every operation here reports its completion, so every wake-up has one: on tcp a
            // message wakes the CQ and the RCQ (both watch the socket), and the one that finds
            // nothing is not reported.
            EXPECT_GT(r.wakeups(), 0u);
            EXPECT_EQ(r.empty_wakeups(), 0u) << "of " << r.wakeups() << " server wake-ups";
        }
    });

    buffer mem(window * 2 * msg);
    auto mr =
        must(memory_region::create(p.client_domain, mem.span(), usage::send | usage::receive));
    connection& c = *p.client;
    for (std::size_t i = 0; i < window; ++i) {
        REMORA_ASSERT_OK(
            c.recv(mr, (window + i) * msg, msg, {.context = reinterpret_cast<void*>(i)}));
    }
    reaper r(c, cc);
    std::size_t sent = 0, answered = 0;
    std::set<std::uint64_t> replies;
    std::vector<completion> recvs;
    auto send_next = [&] {
        const std::size_t slot = sent % window;
        const std::uint64_t seq = sent;
        std::memcpy(mem.bytes.data() + slot * msg, &seq, sizeof(seq));
        REMORA_ASSERT_OK(c.send(mr, slot * msg, msg));
        ++sent;
    };
    // One request in flight at a time keeps request order == sequence on the server.
    send_next();
    while (answered < rounds) {
        recvs.clear();
        r.reap(sent, answered + 1, recvs);
        if (HasFatalFailure())
            break;
        for (const completion& rc : recvs) {
            const auto slot = reinterpret_cast<std::size_t>(rc.context);
            EXPECT_EQ(rc.bytes, msg);
            std::uint64_t seq;
            std::memcpy(&seq, mem.bytes.data() + (window + slot) * msg, sizeof(seq));
            EXPECT_TRUE(replies.insert(seq).second) << "duplicate reply " << seq;
            if (answered + window < rounds) {
                REMORA_ASSERT_OK(c.recv(mr, (window + slot) * msg, msg, {.context = rc.context}));
            }
            ++answered;
        }
        if (sent < rounds)
            send_next();
    }
    server.join();
    EXPECT_EQ(replies.size(), rounds);
    if (cc.mode == channel_mode::shared && cc.blocking) {
        EXPECT_EQ(r.empty_wakeups(), 0u) << "of " << r.wakeups() << " client wake-ups";
    }
}

class channel_waits : public testing::TestWithParam<channel_case> {};

std::vector<channel_case> blocking_cases() {
    std::vector<channel_case> out;
    for (const auto& c : all_cases()) {
        if (c.blocking)
            out.push_back(c);
    }
    return out;
}

// A wait that times out reports errc::timed_out, and one posted completion then wakes it.
TEST_P(channel_waits, wait_times_out_then_wakes) {
    const channel_case& cc = GetParam();
    connection_config cfg{.rcq = cc.rcq, .channel = cc.mode};
    buffer mem(64), out(64);
    auto p = must(connect_pair(cc.provider, cfg, cfg));
    auto smr = must(memory_region::create(p.server_domain, mem.span(), usage::receive));
    auto cmr = must(memory_region::create(p.client_domain, out.span(), usage::send));
    REMORA_ASSERT_OK(p.server->recv(smr, 0, 64));

    auto waiter = [&](std::chrono::milliseconds t) -> result<std::size_t> {
        if (cc.mode == channel_mode::shared) {
            auto ev = p.server->wait(t);
            if (!ev)
                return fail(ev.error());
            return ev->ready;
        }
        return (p.server->rcq() ? *p.server->rcq() : p.server->cq()).wait(t);
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto w = waiter(200ms);
    ASSERT_FALSE(w);
    EXPECT_TRUE(w.error() == errc::timed_out) << w.error().what();
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 190ms);

    // The peer sends once the server is about to block (a send that lands first makes the wait
    // return at once: either way the wait must end with the completion, not time out).
    std::promise<void> waiting;
    std::thread sender([&, go = waiting.get_future()] {
        go.wait();
        EXPECT_TRUE(p.client->send(cmr, 0, 64));
    });
    std::size_t got = 0;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    bool first = true;
    while (got == 0 && std::chrono::steady_clock::now() < deadline) {
        if (std::exchange(first, false))
            waiting.set_value();
        auto r = waiter(5s);
        if (!r) {
            ADD_FAILURE() << "the wait did not wake for the completion: " << r.error().what();
            break;
        }
        completion c[2];
        auto n = (p.server->rcq() ? *p.server->rcq() : p.server->cq()).poll(c);
        if (!n) {
            ADD_FAILURE() << n.error().what();
            break;
        }
        got += *n;
    }
    sender.join();
    EXPECT_EQ(got, 1u);
    // Reap the client's send so teardown is clean.
    EXPECT_EQ(collect(p.client->cq(), 1, false).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(all, channels, testing::ValuesIn(all_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(blocking, channel_waits, testing::ValuesIn(blocking_cases()), case_name);

// One channel shared by several connections: a server waits on one fd and learns which
// connection (tag) and which queue fired.
class shared_by_many : public testing::TestWithParam<std::string> {};

TEST_P(shared_by_many, server_dispatches_by_tag_and_queue) {
    constexpr int conns = 3;
    constexpr int per_conn = 20;
    // Memory first: it must outlive every connection that may still touch it.
    buffer out(16);
    std::vector<buffer> server_mem;
    server_mem.reserve(conns);
    auto ch = must(completion_channel::create());
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto l = must(listener::create(sd, "127.0.0.1", 0));
    std::vector<connection> servers, clients;
    std::vector<memory_region> server_mr;
    for (int i = 0; i < conns; ++i) {
        auto acc = std::async(std::launch::async, [&, i] {
            auto req = must(l.get_request(10s));
            return req.accept({.rcq = (i % 2) == 1,
                               .channel = channel_mode::shared,
                               .shared_channel = ch,
                               .tag = static_cast<std::uint64_t>(100 + i)});
        });
        clients.push_back(must(connection::connect(cd, "127.0.0.1", l.port())));
        servers.push_back(must(acc.get()));
        server_mem.emplace_back(per_conn * 16);
        server_mr.push_back(
            must(memory_region::create(sd, server_mem.back().span(), usage::receive)));
        for (int k = 0; k < per_conn; ++k) {
            REMORA_ASSERT_OK(servers.back().recv(server_mr.back(), k * 16, 16));
        }
    }
    EXPECT_EQ(ch.attached(), 4u);  // three CQs and the RCQ of connection 1
    auto omr = must(memory_region::create(cd, out.span(), usage::send));
    for (int k = 0; k < per_conn; ++k) {
        for (int i = 0; i < conns; ++i) {
            REMORA_ASSERT_OK(clients[i].send(omr, 0, 16));
        }
    }
    std::map<std::uint64_t, int> per_tag;
    int total = 0;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (total < conns * per_conn && std::chrono::steady_clock::now() < deadline) {
        auto ev = ch.wait(1s);
        if (!ev) {
            ASSERT_TRUE(ev.error() == errc::timed_out) << ev.error().what();
            continue;
        }
        const int idx = static_cast<int>(ev->tag) - 100;
        ASSERT_GE(idx, 0);
        ASSERT_LT(idx, conns);
        // Connection 1 has an RCQ: its receives arrive there.
        completion c[8];
        auto n = ev->cq->poll(c);
        ASSERT_TRUE(n);
        for (std::size_t j = 0; j < *n; ++j) {
            ASSERT_TRUE(c[j].ok());
            ASSERT_EQ(c[j].op, op::recv);
            EXPECT_EQ(ev->kind, idx % 2 == 1 ? cq_kind::rcq : cq_kind::cq);
            ++per_tag[ev->tag];
            ++total;
        }
        // Keep the client side reaped so its send queue never fills.
        for (auto& cl : clients) {
            completion cc[8];
            (void)cl.cq().poll(cc);
        }
    }
    for (int i = 0; i < conns; ++i) {
        EXPECT_EQ(per_tag[100 + i], per_conn) << "connection " << i;
    }
    servers.clear();
    EXPECT_EQ(ch.attached(), 0u);
}

INSTANTIATE_TEST_SUITE_P(providers, shared_by_many, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

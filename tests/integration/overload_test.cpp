// SPDX-License-Identifier: BSD-3-Clause
// Target-side back-pressure: 32 clients against a target whose receive_pool has 8 buffers shared
// by all connections. Every request is served, none is dropped, the target never holds more
// than its 8 buffers, and connections take turns (FIFO). Also: buffers come back when a
// connection dies or is detached, and attach refuses connections it cannot serve.
#include <atomic>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

struct request {
    std::uint32_t client;
    std::uint32_t seq;
};

class overload_test : public testing::TestWithParam<std::string> {};

TEST_P(overload_test, thirty_two_clients_eight_buffers_every_request_served) {
    constexpr std::uint32_t clients = 32;
    constexpr std::uint32_t requests = 40;
    constexpr std::uint32_t buffers = 8;
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto pool = must(receive_pool::create(
        sd, {.buffers = buffers, .buffer_size = sizeof(request), .per_connection = 1}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));

    // Connect everyone first (the target attaches each connection to the pool as it accepts).
    std::vector<connection> conns, client_conns;
    std::vector<std::vector<std::byte>> reply_mem(clients, std::vector<std::byte>(sizeof(request)));
    std::vector<memory_region> reply_mr;
    for (std::uint32_t i = 0; i < clients; ++i) {
        auto accepted = std::async(std::launch::async, [&]() -> result<connection> {
            auto req = lst.get_request(20s);
            if (!req)
                return fail(req.error());
            return req->accept({.rq_size = 2, .progress_thread = true, .tag = i});
        });
        client_conns.push_back(
            must(connection::connect(cd, "127.0.0.1", lst.port(), {.sq_size = 4, .rq_size = 4})));
        conns.push_back(must(accepted.get()));
        REMORA_ASSERT_OK(pool.attach(conns.back()));
        reply_mr.push_back(must(memory_region::create(sd, reply_mem[i], usage::send)));
    }

    // Clients: each sends a request, waits for its reply, and checks it, `requests` times.
    std::atomic<int> failures{0};
    std::atomic<std::uint32_t> replies{0};
    std::vector<std::thread> threads;
    for (std::uint32_t id = 0; id < clients; ++id) {
        threads.emplace_back([&, id] {
            connection* conn = &client_conns[id];
            std::vector<std::byte> mem(2 * sizeof(request));
            auto mr = must(memory_region::create(cd, mem, usage::send | usage::receive));
            for (std::uint32_t seq = 0; seq < requests; ++seq) {
                const request rq{id, seq};
                std::memcpy(mem.data(), &rq, sizeof rq);
                if (!conn->recv(mr, sizeof rq, sizeof rq) || !conn->send(mr, 0, sizeof rq)) {
                    failures++;
                    return;
                }
                auto got = collect(conn->cq(), 2, true, 30s);
                request back{};
                std::memcpy(&back, mem.data() + sizeof rq, sizeof back);
                if (got.size() != 2 || !got[0].ok() || !got[1].ok() || back.client != id ||
                    back.seq != seq + 1000) {
                    ADD_FAILURE() << "client " << id << " request " << seq << ": bad reply ("
                                  << got.size() << " completions, client " << back.client << " seq "
                                  << back.seq << ")";
                    failures++;
                    return;
                }
                replies++;
            }
        });
    }

    // The target serves from the pool in batches (holding messages while it works, so the pool
    // runs dry and back-pressure is real).
    const auto t0 = std::chrono::steady_clock::now();
    std::uint32_t served = 0;
    std::vector<message> batch;
    while (served < clients * requests && failures == 0) {
        auto m = pool.next(batch.empty() ? 20s : 0ms);
        if (m) {
            batch.push_back(std::move(*m));
            const auto s = pool.stats();
            ASSERT_LE(s.posted + s.held, buffers) << "the pool gave out more than its buffers";
            if (batch.size() < 4) {
                continue;
            }
        } else {
            ASSERT_TRUE(m.error() == errc::timed_out);
            if (batch.empty()) {
                const auto st = pool.stats();
                ADD_FAILURE() << "no request within 20 s after " << served
                              << " served: back-pressure never released (posted " << st.posted
                              << ", held " << st.held << ", owed " << st.owed << ", reclaimed "
                              << st.reclaimed << ")";
                failures++;
                break;
            }
        }
        for (message& msg : batch) {
            ASSERT_EQ(msg.data().size(), sizeof(request));
            request rq;
            std::memcpy(&rq, msg.data().data(), sizeof rq);
            ASSERT_EQ(rq.client, msg.tag());
            rq.seq += 1000;
            std::memcpy(reply_mem[rq.client].data(), &rq, sizeof rq);
            REMORA_ASSERT_OK(conns[rq.client].send(reply_mr[rq.client], 0, sizeof rq,
                                                   {.report = completion_mode::on_error}));
            ++served;
        }
        batch.clear();  // releases the buffers: posted again on the connections waiting longest
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& t : threads) {
        t.join();
    }
    const auto s = pool.stats();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(replies.load(), clients * requests);
    EXPECT_EQ(s.received, static_cast<std::uint64_t>(clients) * requests);
    EXPECT_LE(s.max_held, buffers);
    EXPECT_GT(s.backpressure_events, 0u);
    std::printf(
        "%u clients, %u pool buffers: %u requests in %.2f s (%.0f requests/s), at most %u "
        "held, %llu back-pressure events, %llu receives moved off quiet connections\n",
        clients, buffers, served, secs, served / secs, s.max_held,
        static_cast<unsigned long long>(s.backpressure_events),
        static_cast<unsigned long long>(s.reclaimed));
    client_conns.clear();
    conns.clear();  // destroyed connections give their posted buffers back
    EXPECT_EQ(pool.stats().posted, 0u);
    EXPECT_EQ(pool.stats().held, 0u);
    EXPECT_EQ(pool.stats().connections, 0u);
}

// Six buffers, four per connection. Detaching A cancels its receives: A's queue entries come back
// (its CQ's waiters wake as the progress thread reaps the canceled receives) and so do their
// buffers, which B then takes at once and fills with four messages held beside A's. A held
// message survives its connection, and every buffer comes back when the connections are gone.
TEST_P(overload_test, buffers_return_when_a_connection_dies_or_is_detached) {
    constexpr std::uint32_t buffers = 6, per_connection = 4;
    std::vector<std::byte> mem(64 * 4);  // outlives the connections
    auto srv = server_side::open(GetParam());
    std::optional<connection> a{must(srv.add({.rq_size = 4, .progress_thread = true, .tag = 1}))};
    std::optional<connection> b{must(srv.add({.rq_size = 4, .progress_thread = true, .tag = 2}))};
    connection& a_client = srv.clients[0];
    connection& b_client = srv.clients[1];
    auto pool = must(receive_pool::create(
        srv.dom, {.buffers = buffers, .buffer_size = 64, .per_connection = per_connection}));
    REMORA_ASSERT_OK(pool.attach(*a));
    EXPECT_EQ(pool.stats().posted, per_connection);
    EXPECT_ERRC(pool.attach(*a), errc::bad_state);
    // A message held by the application survives its connection.
    auto cmr = must(memory_region::create(srv.client_dom, mem, usage::send));
    std::memcpy(mem.data(), "ping", 4);
    REMORA_ASSERT_OK(a_client.send(cmr, 0, 4));
    auto m = must(pool.next(10s));
    EXPECT_EQ(m.tag(), 1u);
    EXPECT_EQ(std::memcmp(m.data().data(), "ping", 4), 0);
    EXPECT_EQ(pool.stats().held, 1u);
    pool.detach(*a);
    EXPECT_EQ(pool.stats().connections, 0u);
    // Nobody else wants a buffer, so only the cancellation can bring them back (not a rebalance).
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (a->in_flight() != 0 && std::chrono::steady_clock::now() < deadline) {
        auto w = a->cq().wait(1s);
        if (!w && !(w.error() == errc::timed_out)) {
            ADD_FAILURE() << w.error().what();
            break;
        }
    }
    ASSERT_EQ(a->in_flight(), 0u) << "A's receives were never canceled";
    completion none[4];
    EXPECT_EQ(must(a->cq().poll(none)), 0u);  // the pool's completions are not A's to report
    EXPECT_EQ(pool.stats().posted, 0u);
    EXPECT_EQ(pool.stats().held, 1u);
    EXPECT_EQ(pool.stats().reclaimed, 0u);
    // B takes four of the five free buffers at once, and holds its four messages beside A's.
    REMORA_ASSERT_OK(pool.attach(*b));
    EXPECT_EQ(pool.stats().posted, per_connection);
    EXPECT_EQ(pool.stats().owed, 0u);
    for (int i = 0; i < 4; ++i) {
        std::memcpy(mem.data() + 64 * i, "b0", 2);
        mem[64 * i + 1] = static_cast<std::byte>('0' + i);
        REMORA_ASSERT_OK(b_client.send(cmr, 64 * i, 2));
    }
    std::vector<message> from_b;
    for (int i = 0; i < 4; ++i) {
        auto got = pool.next(10s);
        ASSERT_TRUE(got) << "message " << i << " of B: " << got.error().what()
                         << " (A's buffers never came back: posted " << pool.stats().posted
                         << ", held " << pool.stats().held << ")";
        EXPECT_EQ(got->tag(), 2u);
        from_b.push_back(std::move(*got));
    }
    // Held: the ping and B's four; the sixth buffer is posted on B. Nothing is left on A.
    EXPECT_EQ(pool.stats().held, 5u);
    EXPECT_EQ(pool.stats().posted, 1u);
    EXPECT_EQ(collect(a_client.cq(), 1, true).size(), 1u);
    EXPECT_EQ(collect(b_client.cq(), 4, true).size(), 4u);
    a.reset();
    EXPECT_EQ(m.data().size(), 4u);
    EXPECT_EQ(std::memcmp(m.data().data(), "ping", 4), 0);
    m.release();
    from_b.clear();
    // Released buffers are posted on B (up to per_connection); destroying B returns them all.
    b.reset();
    EXPECT_EQ(pool.stats().held, 0u);
    EXPECT_EQ(pool.stats().posted, 0u);
    EXPECT_EQ(pool.stats().connections, 0u);

    // Refused: a connection whose receive queue is smaller than per_connection.
    auto small = must(connect_pair(GetParam(), {.rq_size = 2}, {}));
    EXPECT_ERRC(pool.attach(*small.server), errc::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(providers, overload_test, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

// SPDX-License-Identifier: BSD-3-Clause
// Completion delivery seen from the headers: connection::in_flight() counts an operation until the
// application has its completion, whichever call read it from the provider (poll, wait, the
// progress thread, close); no completion the application did not post ever reaches it; and a
// connection may be destroyed from inside a completion callback, or on another thread while a
// callback runs, without a deadlock and without losing or duplicating another connection's
// completion.
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

class delivery : public testing::TestWithParam<std::string> {};

// Fails the test and aborts the process when a scope is not left within `limit`: a deadlock is
// reported as such instead of hanging the suite.
struct watchdog {
    explicit watchdog(const char* what, std::chrono::seconds limit = 60s)
        : t([this, what, limit] {
              std::unique_lock l(mu);
              if (!cv.wait_for(l, limit, [&] { return done; })) {
                  std::fprintf(stderr, "watchdog: %s did not finish within %llds (deadlock)\n",
                               what, static_cast<long long>(limit.count()));
                  std::abort();
              }
          }) {}
    ~watchdog() {
        {
            std::lock_guard l(mu);
            done = true;
        }
        cv.notify_all();
        t.join();
    }
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread t;
};

// Reads `q` with the obvious loop from the headers, "poll, and wait when poll found nothing,
// while in_flight() > 0", recording every completion's context; then checks that nothing more
// arrives. Returns how many times each context was seen.
std::map<void*, int> reap_until_idle(connection& c, completion_queue& q,
                                     std::vector<completion>* all = nullptr) {
    std::map<void*, int> seen;
    completion buf[16];
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (c.in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
        auto n = q.poll(buf);
        if (!n) {
            ADD_FAILURE() << "poll: " << n.error().what();
            break;
        }
        for (std::size_t i = 0; i < *n; ++i) {
            ++seen[buf[i].context];
            if (all != nullptr) {
                all->push_back(buf[i]);
            }
        }
        if (*n == 0) {
            auto w = q.wait(100ms);
            if (!w && !(w.error() == errc::timed_out)) {
                ADD_FAILURE() << "wait: " << w.error().what();
                break;
            }
        }
    }
    EXPECT_EQ(c.in_flight(), 0u) << "in_flight() did not reach 0 within 20 s";
    // in_flight() is 0: every completion has been handed out, none may come later.
    (void)q.wait(50ms);
    auto n = q.poll(buf);
    EXPECT_TRUE(n.has_value());
    EXPECT_EQ(n.value_or(0), 0u) << "a completion arrived after in_flight() reached 0 (context "
                                 << buf[0].context << ", status " << buf[0].status.message() << ")";
    return seen;
}

struct one_sided {
    // The buffers outlive the connections: a target's progress thread may still be sending from
    // one while the pair is torn down (TSan in CI: a freed buffer read by sendmsg).
    buffer target{1 << 16}, local{1 << 16};
    connected_pair p;
    std::optional<memory_region> tmr, lmr;
    remote_region desc;
    static connection_config config(bool progress) {
        connection_config c;
        c.sq_size = 16;
        c.progress_thread = progress;
        return c;
    }
    explicit one_sided(const std::string& provider, bool progress)
        : p(must(connect_pair(provider, config(true), config(progress)))) {
        tmr = must(memory_region::create(p.server_domain, target.span(),
                                         usage::write_destination | usage::read_source));
        lmr = must(memory_region::create(p.client_domain, local.span(),
                                         usage::write_source | usage::read_destination));
        desc = must(tmr->describe());
    }
    // Posts reads and writes (alternating) until the send queue is full or `n` are posted.
    std::size_t post(std::vector<int>& ids, std::size_t first, std::size_t n) {
        std::size_t posted = 0;
        for (; posted < n; ++posted) {
            const std::size_t i = first + posted;
            const std::size_t off = (i % 16) * 4096;
            auto r = i % 2 == 0 ? p.client->read(*lmr, off, desc, off, 4096, {.context = &ids[i]})
                                : p.client->write(desc, off, *lmr, off, 4096, {.context = &ids[i]});
            if (!r) {
                EXPECT_TRUE(r.error() == errc::would_block) << r.error().what();
                break;
            }
        }
        return posted;
    }
};

// Rounds of reads and writes reaped by "poll/wait while in_flight() > 0": every operation's
// completion is received exactly once, none arrives after in_flight() reached 0. With and
// without the library's progress thread on the reading side.
TEST_P(delivery, in_flight_counts_until_the_completion_is_handed_out) {
    for (bool progress : {false, true}) {
        SCOPED_TRACE(progress ? "progress thread" : "application reads");
        one_sided s(GetParam(), progress);
        const std::size_t rounds = 60;
        std::vector<int> ids(rounds * 16);
        for (std::size_t round = 0; round < rounds; ++round) {
            const std::size_t posted = s.post(ids, round * 16, 16);
            ASSERT_GT(posted, 0u);
            auto seen = reap_until_idle(*s.p.client, s.p.client->cq());
            for (std::size_t i = round * 16; i < round * 16 + posted; ++i) {
                ASSERT_EQ(seen[&ids[i]], 1) << "operation " << i << " of round " << round;
            }
            ASSERT_EQ(seen.size(), posted) << "completions of operations never posted";
        }
    }
}

// close() with operations in flight: each completes once (success or canceled), counted in
// in_flight() until handed out; none arrives after.
TEST_P(delivery, in_flight_counts_after_close) {
    for (int round = 0; round < 10; ++round) {
        one_sided s(GetParam(), false);
        std::vector<int> ids(16);
        const std::size_t posted = s.post(ids, 0, 16);
        ASSERT_GT(posted, 0u);
        REMORA_ASSERT_OK(s.p.client->close());
        auto seen = reap_until_idle(*s.p.client, s.p.client->cq());
        for (std::size_t i = 0; i < posted; ++i) {
            ASSERT_EQ(seen[&ids[i]], 1) << "operation " << i << " of round " << round;
        }
        ASSERT_EQ(seen.size(), posted) << "completions of operations never posted";
    }
}

// The peer destroys its connection while operations are in flight, many rounds: every completion
// the application gets is one of its operations, once (sockets wrote an extra entry with no
// context, reported as op::unknown / disconnected in about 1 round in 8).
TEST_P(delivery, peer_destroy_reports_only_posted_operations) {
    for (int round = 0; round < 40; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        one_sided s(GetParam(), false);
        std::vector<int> ids(16);
        const std::size_t posted = s.post(ids, 0, 16);
        ASSERT_GT(posted, 0u);
        s.p.server.reset();
        std::vector<completion> all;
        auto seen = reap_until_idle(*s.p.client, s.p.client->cq(), &all);
        for (const completion& c : all) {
            ASSERT_NE(c.context, nullptr)
                << "a completion of no posted operation: op " << to_string(c.op) << ", status "
                << c.status.message() << ", tag " << c.tag;
        }
        for (std::size_t i = 0; i < posted; ++i) {
            ASSERT_EQ(seen[&ids[i]], 1) << "operation " << i;
        }
        ASSERT_EQ(seen.size(), posted);
    }
}

// ---------------------------------------------------------------- destroy from callbacks

std::optional<connection>* doomed = nullptr;  // destroyed by its own callback
std::atomic<int> doomed_calls{0};
std::atomic<int> other_calls{0};
std::mutex* app_lock = nullptr;        // an application lock the other thread holds
std::atomic<bool> in_callback{false};  // the other connection's callback has started

void destroy_own_connection(const completion&) {
    ++doomed_calls;
    doomed->reset();  // the connection this completion belongs to
}
void count_other(const completion&) {
    ++other_calls;
}
void wait_for_app_lock(const completion&) {
    in_callback = true;
    std::lock_guard g(*app_lock);  // held by the thread destroying another connection
    ++other_calls;
}

// A connection destroyed from inside its own completion callback, on a shared CQ (read by the
// application, or by the progress thread) and on its own private CQ: no deadlock, the callback
// runs once, and the other connection's completions all arrive once.
TEST_P(delivery, destroy_a_connection_from_its_own_callback) {
    for (int mode = 0; mode < 3; ++mode) {
        const bool shared_cq = mode != 0;
        const bool progress = mode == 2;
        SCOPED_TRACE(!shared_cq ? "private CQ"
                     : progress ? "shared CQ, progress thread"
                                : "shared CQ, application reads");
        watchdog w("destroying a connection from its own callback");
        auto s = server_side::open(GetParam());
        auto shared =
            must(shared_completion_queue::create(s.dom, {.size = 32, .progress_thread = progress}));
        connection_config cfg{.sq_size = 4, .rq_size = 4, .tag = 1};
        if (shared_cq) {
            cfg.shared_cq = shared;
        }
        std::optional<connection> a = must(s.add(cfg));
        cfg.tag = 2;
        connection b = must(s.add(cfg));
        buffer inbox(256);
        auto in_mr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
        doomed = &a;
        doomed_calls = 0;
        other_calls = 0;
        REMORA_ASSERT_OK(a->recv(in_mr, 0, 32, {.callback = destroy_own_connection}));
        for (int i = 0; i < 3; ++i) {
            REMORA_ASSERT_OK(b.recv(in_mr, 64 + 32 * i, 32, {.callback = count_other}));
        }
        buffer out(32);
        auto out_mr = must(memory_region::create(s.client_dom, out.span(), usage::send));
        REMORA_ASSERT_OK(s.clients[0].send(out_mr, 0, 16));  // to a
        for (int i = 0; i < 3; ++i) {
            REMORA_ASSERT_OK(s.clients[1].send(out_mr, 0, 16));  // to b
        }
        ASSERT_EQ(collect(s.clients[0].cq(), 1, true).size(), 1u);
        ASSERT_EQ(collect(s.clients[1].cq(), 3, true).size(), 3u);
        const auto until = std::chrono::steady_clock::now() + 10s;
        completion got[8];
        while ((doomed_calls.load() == 0 || other_calls.load() < 3) &&
               std::chrono::steady_clock::now() < until) {
            if (!progress) {
                // Callbacks consume their entries: poll reports none of them.
                if (shared_cq) {
                    ASSERT_EQ(must(shared.queue().poll(got)), 0u);
                } else {
                    if (a.has_value()) {
                        ASSERT_EQ(must(a->cq().poll(got)), 0u);
                    }
                    ASSERT_EQ(must(b.cq().poll(got)), 0u);
                }
            }
            std::this_thread::yield();
        }
        EXPECT_EQ(doomed_calls.load(), 1);
        EXPECT_FALSE(a.has_value()) << "the callback did not destroy its connection";
        EXPECT_EQ(other_calls.load(), 3) << "the other connection's callbacks";
        EXPECT_EQ(b.in_flight(), 0u);
    }
}

// Another thread destroys a connection on a shared CQ while a callback of another connection
// runs on the CQ's reader and waits for an application lock that the destroying thread holds
// (a registry of connections): the destroy must not wait for that callback (it did: the callback
// ran under the CQ's read lock, which the destroy takes), and the callback runs once.
TEST_P(delivery, destroy_on_another_thread_while_a_callback_runs) {
    for (bool progress : {false, true}) {
        SCOPED_TRACE(progress ? "progress thread" : "application reads");
        watchdog w("destroying a connection while a callback waits for the destroyer's lock");
        auto s = server_side::open(GetParam());
        auto shared =
            must(shared_completion_queue::create(s.dom, {.size = 32, .progress_thread = progress}));
        std::optional<connection> a =
            must(s.add({.sq_size = 4, .rq_size = 4, .tag = 1, .shared_cq = shared}));
        connection b = must(s.add({.sq_size = 4, .rq_size = 4, .tag = 2, .shared_cq = shared}));
        buffer inbox(256);
        auto in_mr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
        std::mutex registry;
        app_lock = &registry;
        in_callback = false;
        other_calls = 0;
        REMORA_ASSERT_OK(a->recv(in_mr, 0, 32, {.callback = count_other}));  // never completes
        REMORA_ASSERT_OK(b.recv(in_mr, 64, 32, {.callback = wait_for_app_lock}));
        std::unique_lock held(registry);  // the destroying thread's registry lock
        buffer out(32);
        auto out_mr = must(memory_region::create(s.client_dom, out.span(), usage::send));
        REMORA_ASSERT_OK(s.clients[1].send(out_mr, 0, 16));  // to b
        ASSERT_EQ(collect(s.clients[1].cq(), 1, true).size(), 1u);
        std::atomic<bool> stop{false};
        std::thread reader([&] {
            completion got[4];
            while (!stop.load()) {
                if (!progress) {
                    (void)shared.queue().poll(got);
                }
                std::this_thread::yield();
            }
        });
        ASSERT_TRUE(eventually([&] { return in_callback.load(); })) << "b's callback never started";
        a.reset();  // while b's callback waits for `registry`, held here
        held.unlock();
        ASSERT_TRUE(eventually([&] { return other_calls.load() == 1; }));
        stop = true;
        reader.join();
        EXPECT_EQ(other_calls.load(), 1) << "b's callback ran once, a's never";
        EXPECT_EQ(b.in_flight(), 0u);
    }
}

// ---------------------------------------------------------------- receive_pool vs destroy

// A receive_pool with fewer slots than connections keeps moving its receives (rebalance, in
// next()'s idle slices, cancels receives parked on quiet connections) while another thread
// destroys connections: the rebalance must never touch a connection being torn down (it read the
// connection's records and endpoint while teardown closed them; ThreadSanitizer reports it).
TEST_P(delivery, receive_pool_rebalance_while_connections_are_destroyed) {
    watchdog w("receive_pool rebalance vs destroy");
    auto s = server_side::open(GetParam());
    auto pool =
        must(receive_pool::create(s.dom, {.buffers = 4, .buffer_size = 256, .per_connection = 1}));
    std::atomic<bool> stop{false};
    std::thread reader([&] {
        while (!stop.load()) {
            (void)pool.next(5ms);  // rebalances in its idle slices
        }
    });
    for (int round = 0; round < 8; ++round) {
        std::vector<std::optional<connection>> conns;
        for (int i = 0; i < 8; ++i) {
            connection_config cfg;
            cfg.rq_size = 4;
            cfg.progress_thread = true;
            cfg.tag = static_cast<std::uint64_t>(i);
            conns.emplace_back(must(s.add(cfg)));
            REMORA_ASSERT_OK(pool.attach(*conns.back()));
        }
        // Let the pool move its slots around: some receives canceled and reposted.
        const auto moved_from = pool.stats().reclaimed;
        ASSERT_TRUE(eventually([&] { return pool.stats().reclaimed >= moved_from + 4; }))
            << "the pool never moved a receive";
        for (auto& c : conns) {
            c.reset();  // while the reader rebalances
        }
    }
    stop = true;
    reader.join();
    EXPECT_EQ(pool.stats().posted, 0u) << "slots of destroyed connections came back";
}

INSTANTIATE_TEST_SUITE_P(providers, delivery, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

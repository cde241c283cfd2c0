// SPDX-License-Identifier: BSD-3-Clause
// slot_pool accounting: budgets, all-or-nothing multi-unit holdings, both exhaustion policies,
// FIFO fairness, deadlines and teardown, units returned on every path.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <remora/slot_pool.hpp>

#include "support.hpp"

namespace remora {

// gtest prints acquired by name (found by ADL).
void PrintTo(acquired a, std::ostream* os) {
    *os << to_string(a);
}

namespace {

units make(std::uint32_t sq, std::uint32_t cq, std::uint32_t reg = 0) {
    units u;
    u.with(unit::sq, sq).with(unit::cq, cq).with(unit::registration, reg);
    return u;
}

std::shared_ptr<slot_pool> pool(units cap, exhaustion p = exhaustion::backpressure,
                                std::size_t waiters = 16) {
    auto r = slot_pool::create({.capacity = cap, .policy = p, .max_waiters = waiters});
    EXPECT_TRUE(r) << r.error().what();
    return *r;
}

// Records completions of parked requests.
struct recorder {
    std::vector<int> order;
    std::vector<held_units> holdings;
    std::vector<error> errors;
    struct slot {
        recorder* r;
        int id;
    };
    static void done(void* ctx, result<held_units> l) {
        auto* s = static_cast<slot*>(ctx);
        s->r->order.push_back(s->id);
        if (l) {
            s->r->holdings.push_back(std::move(*l));
        } else {
            s->r->errors.push_back(l.error());
        }
    }
};

TEST(slot_pool, a_holding_takes_every_unit_and_returns_them_on_every_path) {
    auto p = pool(make(4, 8, 2));
    {
        auto a = p->try_acquire(make(1, 1, 1));
        ASSERT_TRUE(a);
        EXPECT_EQ(p->available(), make(3, 7, 1));
        held_units moved = std::move(*a);  // move: still held once
        EXPECT_EQ(p->available(), make(3, 7, 1));
        EXPECT_FALSE(static_cast<bool>(*a));
        held_units other = std::move(moved);
        other.reset();  // explicit give-back
        EXPECT_FALSE(static_cast<bool>(other));
        EXPECT_TRUE(other.held().empty());
        EXPECT_EQ(p->available(), make(4, 8, 2));
        other.reset();  // idempotent
        EXPECT_EQ(p->available(), make(4, 8, 2));
        auto b = p->try_acquire(make(2, 2));
        ASSERT_TRUE(b);
        held_units assigned = std::move(*b);
        assigned = *p->try_acquire(make(1, 1));  // assignment returns the old units
        EXPECT_EQ(p->available(), make(3, 7, 2));
    }  // destruction
    EXPECT_EQ(p->available(), make(4, 8, 2));
}

TEST(slot_pool, classic_bug_registrations_plentiful_queue_entries_scarce) {
    // Accounting registrations alone would admit 100 operations; the CQ has room for 8.
    auto p = pool(make(8, 8, 100));
    std::vector<held_units> held;
    for (int i = 0; i < 100; ++i) {
        auto l = p->try_acquire(make(1, 1, 1));
        if (!l) {
            EXPECT_TRUE(l.error() == errc::would_block) << l.error().what();
            break;
        }
        held.push_back(std::move(*l));
    }
    EXPECT_EQ(held.size(), 8u);
    EXPECT_EQ(p->available()[unit::cq], 0u);
    EXPECT_EQ(p->available()[unit::registration], 92u);
}

TEST(slot_pool, all_or_nothing) {
    auto p = pool(make(4, 2));
    auto a = p->try_acquire(make(1, 1));
    ASSERT_TRUE(a);
    // 3 SQ entries are free but only 1 CQ entry: nothing is taken.
    auto b = p->try_acquire(make(3, 2));
    ASSERT_FALSE(b);
    EXPECT_TRUE(b.error() == errc::would_block);
    EXPECT_EQ(p->available(), make(3, 1));
}

TEST(slot_pool, demand_that_can_never_fit_is_too_large_under_both_policies) {
    for (auto policy : {exhaustion::forbid, exhaustion::backpressure}) {
        auto p = pool(make(4, 4), policy);
        auto r = p->try_acquire(make(5, 1));
        ASSERT_FALSE(r);
        EXPECT_TRUE(r.error() == errc::too_large) << r.error().what();
        EXPECT_EQ(p->available(), make(4, 4));
    }
    auto p = pool(make(4, 4));
    recorder rec;
    recorder::slot s{&rec, 1};
    auto r = p->acquire(make(1, 9), &recorder::done, &s);
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error() == errc::too_large);
    EXPECT_EQ(p->waiting(), 0u);
}

// slot_pool.hpp: an empty demand or a null callback is invalid_argument; nothing taken or parked.
TEST(slot_pool, bad_input_is_refused_and_changes_nothing) {
    auto p = pool(make(2, 2));
    EXPECT_ERRC(p->try_acquire(units{}), errc::invalid_argument);
    recorder rec;
    recorder::slot s{&rec, 1};
    EXPECT_ERRC(p->acquire(units{}, &recorder::done, &s), errc::invalid_argument);
    EXPECT_ERRC(p->acquire(make(1, 1), nullptr, &s), errc::invalid_argument);
    EXPECT_TRUE(rec.order.empty());
    EXPECT_EQ(p->waiting(), 0u);
    EXPECT_EQ(p->available(), make(2, 2));
}

TEST(slot_pool, backpressure_parks_fifo_and_resumes_when_units_return) {
    auto p = pool(make(2, 2));
    auto first = p->try_acquire(make(2, 2));
    ASSERT_TRUE(first);
    recorder rec;
    recorder::slot s1{&rec, 1}, s2{&rec, 2}, s3{&rec, 3};
    ASSERT_EQ(p->acquire(make(2, 2), &recorder::done, &s1).value(),
              acquired::parked);  // big, first
    ASSERT_EQ(p->acquire(make(1, 1), &recorder::done, &s2).value(),
              acquired::parked);  // small, later
    ASSERT_EQ(p->acquire(make(1, 1), &recorder::done, &s3).value(), acquired::parked);
    EXPECT_EQ(p->waiting(), 3u);
    // A new try_acquire does not jump the queue even though nothing is free for it anyway.
    EXPECT_FALSE(p->try_acquire(make(1, 1)));
    first->reset();
    // FIFO: the big request at the head is served first; the small ones wait behind it.
    ASSERT_EQ(rec.order, std::vector<int>({1}));
    // Request 1 completes: both small ones now fit. (Giving back runs their callbacks, which
    // store holdings in `rec`: give back from a copy.)
    auto done1 = std::move(rec.holdings);
    rec.holdings.clear();
    done1.clear();
    EXPECT_EQ(rec.order, std::vector<int>({1, 2, 3}));
    EXPECT_EQ(p->waiting(), 0u);
    auto done23 = std::move(rec.holdings);
    done23.clear();
    EXPECT_EQ(p->available(), make(2, 2));
}

// slot_pool.hpp: acquire() returns acquired::now when `done` already ran: with the units free,
// it runs `done` at once, exactly once, with a holding of exactly the demand, parks nothing.
TEST(slot_pool, acquire_grants_at_once_when_units_are_free) {
    auto p = pool(make(4, 4, 2));
    recorder rec;
    recorder::slot s{&rec, 7};
    auto r = p->acquire(make(2, 1, 1), &recorder::done, &s);
    ASSERT_TRUE(r.has_value()) << r.error().what();
    EXPECT_EQ(*r, acquired::now) << "units were free: done should already have run";
    EXPECT_EQ(rec.order, std::vector<int>({7}));
    EXPECT_TRUE(rec.errors.empty());
    ASSERT_EQ(rec.holdings.size(), 1u);
    EXPECT_TRUE(static_cast<bool>(rec.holdings[0]));
    EXPECT_EQ(rec.holdings[0].held(), make(2, 1, 1));
    EXPECT_EQ(p->waiting(), 0u);
    EXPECT_EQ(p->available(), make(2, 3, 1));
    // Nothing else runs it later: returning units with nobody parked calls no callback.
    rec.holdings.clear();
    EXPECT_EQ(rec.order, std::vector<int>({7}));
    EXPECT_EQ(p->available(), make(4, 4, 2));
}

// slot_pool.hpp: callbacks run "never under the pool's lock" — the immediate one too, on the
// calling thread: it may call back into the pool (here: available() and try_acquire()).
struct reentrant {
    std::shared_ptr<slot_pool> pool;
    std::thread::id ran_on;
    units seen;
    bool nested = false;
    held_units held;
    static void done(void* ctx, result<held_units> l) {
        auto* self = static_cast<reentrant*>(ctx);
        self->ran_on = std::this_thread::get_id();
        self->seen = self->pool->available();  // deadlocks if called under the pool's lock
        self->nested = self->pool->try_acquire(make(1, 1)).has_value();
        if (l) {
            self->held = std::move(*l);
        }
    }
};
TEST(slot_pool, acquire_runs_an_immediate_callback_on_the_caller_outside_the_lock) {
    auto p = pool(make(4, 4));
    auto* ctx = new reentrant{p, {}, {}, false, {}};  // leaked if the callback deadlocks
    std::promise<result<acquired>> out;
    auto got = out.get_future();
    std::thread caller(
        [p, ctx, &out] { out.set_value(p->acquire(make(2, 2), &reentrant::done, ctx)); });
    if (got.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        caller.detach();  // stuck on the pool's lock: the callback ran under it
        FAIL() << "acquire's immediate callback deadlocked calling back into the pool";
    }
    const auto caller_id = caller.get_id();
    caller.join();
    auto r = got.get();
    ASSERT_TRUE(r.has_value()) << r.error().what();
    EXPECT_EQ(*r, acquired::now);
    EXPECT_EQ(ctx->ran_on, caller_id);
    EXPECT_EQ(ctx->seen, make(2, 2));  // the holding's units were already taken
    EXPECT_TRUE(ctx->nested);
    EXPECT_EQ(ctx->held.held(), make(2, 2));
    delete ctx;
    EXPECT_EQ(p->available(), make(4, 4));
}

// slot_pool.hpp: parked requests are served in FIFO order: an acquire() whose units are free
// still parks behind a parked request, and is served after it.
TEST(slot_pool, acquire_parks_behind_a_parked_request_even_when_its_units_are_free) {
    auto p = pool(make(2, 2));
    auto a = p->try_acquire(make(1, 1));
    ASSERT_TRUE(a);
    recorder rec;
    recorder::slot big{&rec, 1}, small{&rec, 2};
    ASSERT_EQ(p->acquire(make(2, 2), &recorder::done, &big).value(), acquired::parked);
    auto r = p->acquire(make(1, 1), &recorder::done, &small);  // fits the free {1, 1}
    ASSERT_TRUE(r.has_value()) << r.error().what();
    EXPECT_EQ(*r, acquired::parked) << "granted ahead of the parked request";
    EXPECT_TRUE(rec.order.empty());
    EXPECT_EQ(p->waiting(), 2u);
    a->reset();
    EXPECT_EQ(rec.order, std::vector<int>({1}));
    auto first = std::move(rec.holdings);
    rec.holdings.clear();
    first.clear();
    EXPECT_EQ(rec.order, std::vector<int>({1, 2}));
    rec.holdings.clear();
    EXPECT_EQ(p->available(), make(2, 2));
}

TEST(slot_pool, try_acquire_does_not_overtake_parked_requests) {
    auto p = pool(make(2, 2));
    auto a = p->try_acquire(make(1, 1));
    ASSERT_TRUE(a);
    recorder rec;
    recorder::slot s{&rec, 1};
    ASSERT_EQ(p->acquire(make(2, 2), &recorder::done, &s).value(), acquired::parked);
    // One unit of each is free, but a request is parked: fairness says wait.
    auto b = p->try_acquire(make(1, 1));
    ASSERT_FALSE(b);
    EXPECT_TRUE(b.error() == errc::would_block);
    a->reset();
    EXPECT_EQ(rec.order, std::vector<int>({1}));
}

TEST(slot_pool, waiter_cap_deadline_and_cancel) {
    auto p = pool(make(1, 1), exhaustion::backpressure, 2);
    auto held = p->try_acquire(make(1, 1));
    ASSERT_TRUE(held);
    recorder rec;
    recorder::slot s1{&rec, 1}, s2{&rec, 2}, s3{&rec, 3};
    const auto now = slot_pool::clock::now();
    // Far deadlines: only the manual expire() below reaches them, never the pool's timer.
    ASSERT_EQ(p->acquire(make(1, 1), &recorder::done, &s1, now + std::chrono::hours(1)).value(),
              acquired::parked);
    ASSERT_EQ(p->acquire(make(1, 1), &recorder::done, &s2).value(), acquired::parked);
    auto over = p->acquire(make(1, 1), &recorder::done, &s3);
    ASSERT_FALSE(over);  // the cap: refused, not parked
    EXPECT_TRUE(over.error() == errc::would_block);
    EXPECT_EQ(p->expire(now), 0u);
    EXPECT_EQ(p->expire(now + std::chrono::hours(2)), 1u);
    ASSERT_EQ(rec.errors.size(), 1u);
    EXPECT_TRUE(rec.errors[0] == errc::timed_out);
    EXPECT_EQ(p->cancel_all(), 1u);
    ASSERT_EQ(rec.errors.size(), 2u);
    EXPECT_TRUE(rec.errors[1] == errc::canceled);
    EXPECT_EQ(rec.order, std::vector<int>({1, 2}));
    EXPECT_EQ(p->waiting(), 0u);
    held->reset();
    EXPECT_EQ(p->available(), make(1, 1));  // nothing leaked to the dead requests
}

// Records completions that may run on the pool's timer thread: under a lock, with a wait.
struct sync_recorder {
    struct event {
        int id;
        std::optional<errc> failed;  // empty: granted
        std::thread::id thread;
        slot_pool::clock::time_point at;
    };
    struct slot {
        sync_recorder* r;
        int id;
        held_units drop_in_callback{};  // reset inside the callback (on the callback's thread)
        bool drop_grant = false;        // drop the granted holding inside the callback
    };
    std::mutex mu;
    std::condition_variable cv;
    std::vector<event> events;
    std::vector<held_units> holdings;

    static void done(void* ctx, result<held_units> l) {
        auto* s = static_cast<slot*>(ctx);
        s->drop_in_callback.reset();  // may grant others: outside our own lock
        std::optional<errc> failed;
        if (!l) {
            for (auto c : {errc::timed_out, errc::canceled}) {
                if (l.error() == c)
                    failed = c;
            }
            if (!failed)
                failed = errc::provider_error;  // unexpected: fails the tests' comparisons
        } else if (s->drop_grant) {
            l->reset();
        }
        std::lock_guard lock(s->r->mu);
        s->r->events.push_back(
            {s->id, failed, std::this_thread::get_id(), slot_pool::clock::now()});
        if (l && !s->drop_grant)
            s->r->holdings.push_back(std::move(*l));
        s->r->cv.notify_all();
    }
    // Waits (at most 5 s) until `n` completions were recorded.
    bool wait_for(std::size_t n) {
        std::unique_lock lock(mu);
        return cv.wait_for(lock, std::chrono::seconds(5), [&] { return events.size() >= n; });
    }
    std::vector<int> order() {
        std::lock_guard lock(mu);
        std::vector<int> ids;
        for (auto& e : events)
            ids.push_back(e.id);
        return ids;
    }
};

// slot_pool.hpp (Deadlines): a parked request completes with timed_out at its deadline on its
// own — nobody calls expire() — on the pool's timer thread, never before the deadline; the
// requests behind it keep their FIFO order and are served as units return.
TEST(slot_pool, a_deadline_fires_on_its_own_and_the_rest_keep_fifo_order) {
    auto p = pool(make(2, 2));
    auto held = p->try_acquire(make(2, 2));
    ASSERT_TRUE(held);
    sync_recorder rec;
    sync_recorder::slot s1{&rec, 1}, s2{&rec, 2}, s3{&rec, 3}, s4{&rec, 4};
    const auto parked_at = slot_pool::clock::now();
    const auto deadline = parked_at + std::chrono::milliseconds(50);
    ASSERT_EQ(p->acquire(make(1, 1), &sync_recorder::done, &s1).value(), acquired::parked);
    ASSERT_EQ(p->acquire(make(1, 1), &sync_recorder::done, &s2, deadline).value(),
              acquired::parked);
    ASSERT_EQ(p->acquire(make(1, 1), &sync_recorder::done, &s3).value(), acquired::parked);
    ASSERT_EQ(p->acquire(make(1, 1), &sync_recorder::done, &s4).value(), acquired::parked);
    ASSERT_TRUE(rec.wait_for(1)) << "the 50 ms deadline did not fire within 5 s";
    {
        std::lock_guard lock(rec.mu);
        ASSERT_EQ(rec.events.size(), 1u);
        EXPECT_EQ(rec.events[0].id, 2);
        EXPECT_EQ(rec.events[0].failed, errc::timed_out);
        EXPECT_GE(rec.events[0].at, deadline) << "completed before its deadline";
        EXPECT_NE(rec.events[0].thread, std::this_thread::get_id());
    }
    EXPECT_EQ(p->waiting(), 3u);
    EXPECT_EQ(p->available(), make(0, 0));  // a timed-out request took nothing
    held->reset();                          // {2, 2} back: 1 and 3 in FIFO order; 4 waits
    EXPECT_EQ(rec.order(), std::vector<int>({2, 1, 3}));
    EXPECT_EQ(p->waiting(), 1u);
    std::vector<held_units> granted;
    {
        std::lock_guard lock(rec.mu);
        granted = std::move(rec.holdings);
        rec.holdings.clear();
    }
    granted.front().reset();  // 1's units: 4 is served
    EXPECT_EQ(rec.order(), std::vector<int>({2, 1, 3, 4}));
    granted.clear();
    {
        std::lock_guard lock(rec.mu);
        rec.holdings.clear();
        for (auto& e : rec.events)
            EXPECT_EQ(e.failed.has_value(), e.id == 2) << "request " << e.id;
    }
    EXPECT_EQ(p->available(), make(2, 2));
    EXPECT_EQ(p->expire(slot_pool::clock::now() + std::chrono::hours(1)), 0u);  // none twice
}

// slot_pool.hpp (Deadlines): when a timed-out request was the head blocking smaller ones, the
// timer grants them too, with nobody calling into the pool.
TEST(slot_pool, a_timed_out_head_unblocks_the_requests_behind_it_on_its_own) {
    auto p = pool(make(2, 2));
    auto held = p->try_acquire(make(1, 1));
    ASSERT_TRUE(held);
    sync_recorder rec;
    sync_recorder::slot big{&rec, 1}, small{&rec, 2};
    ASSERT_EQ(p->acquire(make(2, 2), &sync_recorder::done, &big,
                         slot_pool::clock::now() + std::chrono::milliseconds(50))
                  .value(),
              acquired::parked);
    ASSERT_EQ(p->acquire(make(1, 1), &sync_recorder::done, &small).value(), acquired::parked);
    ASSERT_TRUE(rec.wait_for(2)) << "the head's deadline did not unblock the request behind it";
    {
        std::lock_guard lock(rec.mu);
        EXPECT_EQ(rec.events[0].id, 1);
        EXPECT_EQ(rec.events[0].failed, errc::timed_out);
        EXPECT_EQ(rec.events[1].id, 2);
        EXPECT_FALSE(rec.events[1].failed.has_value());
        ASSERT_EQ(rec.holdings.size(), 1u);
        EXPECT_EQ(rec.holdings[0].held(), make(1, 1));
        rec.holdings.clear();
    }
    EXPECT_EQ(p->waiting(), 0u);
    held->reset();
    EXPECT_EQ(p->available(), make(2, 2));
}

// slot_pool.hpp (Teardown and destruction): cancel_all() completes a request with a pending
// deadline once, with canceled, and its deadline never fires afterwards; destroying the pool
// while its timer sleeps towards a far deadline does not wait for it.
TEST(slot_pool, teardown_with_a_pending_deadline_neither_hangs_nor_completes_twice) {
    sync_recorder rec;
    sync_recorder::slot canceled{&rec, 1}, granted{&rec, 2};
    std::weak_ptr<slot_pool> weak;
    {
        auto p = pool(make(1, 1));
        weak = p;
        auto held = p->try_acquire(make(1, 1));
        ASSERT_TRUE(held);
        ASSERT_EQ(p->acquire(make(1, 1), &sync_recorder::done, &canceled,
                             slot_pool::clock::now() + std::chrono::milliseconds(100))
                      .value(),
                  acquired::parked);
        EXPECT_EQ(p->cancel_all(), 1u);
        std::this_thread::sleep_for(std::chrono::milliseconds(250));  // past its deadline
        {
            std::lock_guard lock(rec.mu);
            ASSERT_EQ(rec.events.size(), 1u) << "a canceled request also timed out";
            EXPECT_EQ(rec.events[0].failed, errc::canceled);
        }
        // The timer now sleeps towards a far deadline; the request is granted when `held` goes
        // and drops its holding at once, so the pool is destroyed while that deadline is pending.
        granted.drop_grant = true;
        ASSERT_EQ(p->acquire(make(1, 1), &sync_recorder::done, &granted,
                             slot_pool::clock::now() + std::chrono::seconds(60))
                      .value(),
                  acquired::parked);
        held->reset();
        ASSERT_TRUE(rec.wait_for(2));
        // The last reference goes on another thread, bounded: the timer must not be waited for.
        auto destroyed =
            std::async(std::launch::async, [q = std::move(p)]() mutable { q.reset(); });
        ASSERT_EQ(destroyed.wait_for(std::chrono::seconds(5)), std::future_status::ready)
            << "destroying the pool waited for its timer's deadline";
    }
    EXPECT_TRUE(weak.expired());
    std::lock_guard lock(rec.mu);
    ASSERT_EQ(rec.events.size(), 2u) << "a request completed twice";
    EXPECT_EQ(rec.events[1].id, 2);
    EXPECT_FALSE(rec.events[1].failed.has_value());
}

// slot_pool.hpp (Teardown and destruction): the last reference may go inside a callback the
// timer thread runs; the pool is then destroyed on that thread (which must not join itself).
TEST(slot_pool, the_pool_may_be_destroyed_on_its_own_timer_thread) {
    sync_recorder rec;
    sync_recorder::slot head{&rec, 1}, behind{&rec, 2};
    std::weak_ptr<slot_pool> weak;
    {
        auto p = pool(make(2, 2));
        weak = p;
        head.drop_in_callback = *p->try_acquire(make(1, 1));  // goes when the head times out
        ASSERT_EQ(p->acquire(make(2, 2), &sync_recorder::done, &head,
                             slot_pool::clock::now() + std::chrono::milliseconds(50))
                      .value(),
                  acquired::parked);
        behind.drop_grant = true;  // its holding, the last, goes inside its callback
        ASSERT_EQ(p->acquire(make(1, 1), &sync_recorder::done, &behind).value(), acquired::parked);
    }  // the test's own reference goes: only the holdings hold the pool now
    ASSERT_TRUE(rec.wait_for(2));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!weak.expired() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(weak.expired()) << "the pool was not destroyed after its last holding went";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the detached timer exits
    std::lock_guard lock(rec.mu);
    ASSERT_EQ(rec.events.size(), 2u);
    // The head's callback gives its holding back before it records: `behind` records first.
    for (auto& e : rec.events) {
        if (e.id == 1)
            EXPECT_EQ(e.failed, errc::timed_out);
        else
            EXPECT_FALSE(e.failed.has_value()) << "request " << e.id;
    }
    EXPECT_EQ(rec.events[0].thread, rec.events[1].thread);  // the timer thread
    EXPECT_NE(rec.events[0].thread, std::this_thread::get_id());
}

// slot_pool.hpp: under forbid, exhaustion is a sizing bug reported as errc::bad_state naming the
// demand and the capacity — in every build of the library (no assertion in Debug), and nothing
// is taken or parked.
TEST(slot_pool, forbid_never_parks_and_exhaustion_is_bad_state_in_every_build) {
    auto p = pool(make(1, 2), exhaustion::forbid);
    recorder rec;
    recorder::slot s{&rec, 1};
    EXPECT_ERRC(p->acquire(make(1, 1), &recorder::done, &s), errc::bad_state);
    EXPECT_EQ(p->waiting(), 0u);
    EXPECT_TRUE(rec.order.empty());
    auto a = p->try_acquire(make(1, 1));
    ASSERT_TRUE(a);
    auto b = p->try_acquire(make(1, 1));
    ASSERT_ERRC(b, errc::bad_state);
    const std::string& msg = b.error().message();
    EXPECT_NE(msg.find("forbid"), std::string::npos) << msg;
    EXPECT_NE(msg.find("demand {sq 1, cq 1}"), std::string::npos) << msg;
    EXPECT_NE(msg.find("capacity {sq 1, cq 2}"), std::string::npos) << msg;
    EXPECT_EQ(p->available(), make(0, 1));  // the failed demand took nothing
    a->reset();
    EXPECT_TRUE(p->try_acquire(make(1, 1)).has_value());  // sized right again: granted
}

TEST(slot_pool, concurrent_acquire_and_release_never_over_commit) {
    auto p = pool(make(8, 8), exhaustion::backpressure, 64);
    std::atomic<int> in_use{0}, peak{0}, done{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 5000; ++i) {
                auto l = p->try_acquire(make(2, 1));
                if (!l)
                    continue;
                const int now = in_use.fetch_add(2) + 2;
                int prev = peak.load();
                while (now > prev && !peak.compare_exchange_weak(prev, now)) {
                }
                in_use.fetch_sub(2);
                ++done;
            }
        });
    }
    for (auto& t : threads)
        t.join();
    EXPECT_LE(peak.load(), 8);
    EXPECT_GT(done.load(), 0);
    EXPECT_EQ(p->available(), make(8, 8));
}

}  // namespace
}  // namespace remora

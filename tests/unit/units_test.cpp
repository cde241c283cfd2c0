// SPDX-License-Identifier: BSD-3-Clause
// The base layer's units (include/remora/units.hpp, src/base/unit_budget.hpp): unit_budget's
// all-or-nothing reservation, under concurrency; held_units' give-back (no release()), the one
// holder whether a connection's operation or the application took the units; slot_pool seen as
// a `budget` (what connection_config::slots holds).
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include <remora/slot_pool.hpp>
#include <remora/units.hpp>

#include "base/budget_access.hpp"
#include "base/unit_budget.hpp"
#include "support.hpp"

using namespace remora;
using namespace remora::test;

TEST(unit_budget, takes_all_or_nothing) {
    detail::unit_budget<3> b({2, 2, 1});
    EXPECT_TRUE(b.try_take({2, 1, 0}));
    EXPECT_EQ(b.available(), (detail::unit_budget<3>::counts{0, 1, 1}));
    // One kind short: nothing is taken of the others.
    EXPECT_FALSE(b.try_take({0, 1, 2}));
    EXPECT_FALSE(b.try_take({1, 0, 0}));
    EXPECT_EQ(b.available(), (detail::unit_budget<3>::counts{0, 1, 1}));
    EXPECT_TRUE(b.try_take({0, 1, 1}));
    EXPECT_EQ(b.available(), (detail::unit_budget<3>::counts{0, 0, 0}));
    b.give({2, 2, 1});
    EXPECT_EQ(b.available(), (detail::unit_budget<3>::counts{2, 2, 1}));
    // Never more than the capacity, whatever comes back.
    b.give({5, 0, 0});
    EXPECT_EQ(b.available(), (detail::unit_budget<3>::counts{2, 2, 1}));
    EXPECT_EQ(b.exclusive([](const auto& l) { return l.used(0); }), 0u);
}

TEST(unit_budget, concurrent_takers_never_exceed_the_capacity) {
    constexpr std::uint32_t cap = 8;
    detail::unit_budget<2> b({cap, cap});
    std::atomic<int> out_a{0}, out_b{0}, over{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 20000; ++i) {
                const std::uint32_t a = 1 + (i + t) % 3, c = (i * 7 + t) % 4;
                if (!b.try_take({a, c})) {
                    continue;
                }
                if (out_a.fetch_add(a) + a > cap || out_b.fetch_add(c) + c > cap) {
                    ++over;
                }
                out_a.fetch_sub(a);
                out_b.fetch_sub(c);
                b.give({a, c});
            }
        });
    }
    for (auto& th : threads) {
        th.join();
    }
    EXPECT_EQ(over.load(), 0);
    EXPECT_EQ(b.available(), (detail::unit_budget<2>::counts{cap, cap}));
}

// reset() gives units back; there is no release(), which in C++ means "stop owning without
// giving back" and would leak units a budget has no public call to take back.
template <class H>
concept has_release = requires(H& h) {
    h.release();
};
static_assert(!has_release<held_units>, "release() would read as unique_ptr::release()");
static_assert(requires(held_units & h) {
    { h.reset() }
    noexcept;
});
// slot_pool hands out the same holder a connection's operations keep.
static_assert(
    std::is_same_v<decltype(std::declval<slot_pool&>().try_acquire(units{})), result<held_units>>);
static_assert(std::is_same_v<slot_pool::callback, void (*)(void*, result<held_units>)>);

TEST(held_units, gives_back_exactly_once) {
    auto pool = must(slot_pool::create({.capacity = units{}.with(unit::sq, 2).with(unit::cq, 2),
                                        .policy = exhaustion::backpressure}));
    const std::shared_ptr<budget> b = pool;  // what connection_config::slots holds
    const units one = units{}.with(unit::sq, 1).with(unit::cq, 1);
    {
        auto h = must(held_units::take(b, one));
        EXPECT_TRUE(static_cast<bool>(h));
        EXPECT_EQ(h.held(), one);
        EXPECT_EQ(pool->available()[unit::sq], 1u);
        held_units moved = std::move(h);
        EXPECT_FALSE(static_cast<bool>(h));
        EXPECT_TRUE(h.held().empty());
        EXPECT_EQ(pool->available()[unit::sq], 1u);  // a move gives nothing back
        moved.reset();
        EXPECT_FALSE(static_cast<bool>(moved));
        EXPECT_EQ(pool->available(), pool->capacity());
        moved.reset();  // empty: a no-op
        EXPECT_EQ(pool->available(), pool->capacity());
    }
    {
        auto a = must(held_units::take(b, one));
        auto c = must(pool->try_acquire(one));  // the application's: the same type
        EXPECT_EQ(pool->available()[unit::sq], 0u);
        a = std::move(c);  // assignment gives the old units back, once
        EXPECT_EQ(pool->available()[unit::sq], 1u);
    }  // destruction
    EXPECT_EQ(pool->available(), pool->capacity());
}

// Units the application gives back wake the posts parked on the pool (a connection's, waiting
// in the budget's FIFO), as a connection's own give-backs do.
TEST(held_units, an_application_give_back_wakes_posts_parked_on_the_budget) {
    auto pool = must(slot_pool::create({.capacity = units{}.with(unit::sq, 1)}));
    const std::shared_ptr<budget> b = pool;
    const units one = units{}.with(unit::sq, 1);
    auto mine = must(pool->try_acquire(one));
    int owner = 0;
    std::optional<result<held_units>> got;
    std::thread parked([&] {
        got = budget_access::gate(*pool).run(
            &owner, detail::park_gate::clock::now() + std::chrono::seconds(60), "post",
            [&] { return held_units::take(b, one); });
    });
    EXPECT_TRUE(eventually([&] { return budget_access::gate(*pool).waiting() == 1; }));
    const auto before = std::chrono::steady_clock::now();
    mine.reset();
    parked.join();
    EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(30));
    ASSERT_TRUE(got.has_value());
    ASSERT_TRUE(got->has_value()) << got->error().what();
    EXPECT_EQ((*got)->held(), one);
}

TEST(held_units, a_refusal_is_the_budgets_error_and_takes_nothing) {
    for (exhaustion policy : {exhaustion::backpressure, exhaustion::forbid}) {
        SCOPED_TRACE(policy == exhaustion::forbid ? "forbid" : "backpressure");
        auto pool = must(slot_pool::create(
            {.capacity = units{}.with(unit::sq, 1).with(unit::cq, 2), .policy = policy}));
        const std::shared_ptr<budget> b = pool;
        auto h = must(held_units::take(b, units{}.with(unit::sq, 1).with(unit::cq, 1)));
        // sq is gone, cq is not: all or nothing, with the policy's code.
        EXPECT_ERRC(held_units::take(b, units{}.with(unit::sq, 1).with(unit::cq, 1)),
                    policy == exhaustion::forbid ? errc::bad_state : errc::would_block);
        EXPECT_EQ(pool->available()[unit::cq], 1u);
        EXPECT_ERRC(held_units::take(b, units{}.with(unit::cq, 3)), errc::too_large);
        EXPECT_ERRC(held_units::take(b, units{}), errc::invalid_argument);
        EXPECT_EQ(pool->available()[unit::cq], 1u);
    }
}

TEST(held_units, parked_requests_go_first) {
    auto pool = must(slot_pool::create({.capacity = units{}.with(unit::sq, 2)}));
    const std::shared_ptr<budget> b = pool;
    auto first = must(held_units::take(b, units{}.with(unit::sq, 1)));
    static std::optional<held_units> granted;
    granted.reset();
    // Parks: it wants 2, one is out.
    ASSERT_EQ(must(pool->acquire(
                  units{}.with(unit::sq, 2),
                  [](void*, result<held_units> l) { granted = std::move(*l); }, nullptr)),
              acquired::parked);
    // One unit is free, but the parked request is ahead of the budget's caller.
    EXPECT_ERRC(held_units::take(b, units{}.with(unit::sq, 1)), errc::would_block);
    first.reset();  // grants the parked request on this thread
    ASSERT_TRUE(granted.has_value());
    EXPECT_EQ(pool->available()[unit::sq], 0u);
    granted.reset();
    EXPECT_EQ(pool->available(), pool->capacity());
}

// SPDX-License-Identifier: BSD-3-Clause
// The base layer's units (include/remora/units.hpp): detail::unit_budget's all-or-nothing
// reservation, under concurrency; held_units' give-back and release(); slot_pool seen as a
// `budget` (what connection_config::slots holds).
#include <atomic>
#include <thread>
#include <vector>

#include <remora/slot_pool.hpp>
#include <remora/units.hpp>

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

TEST(held_units, gives_back_once_and_release_stops_owning) {
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
        EXPECT_EQ(pool->available()[unit::sq], 1u);  // a move gives nothing back
        moved.reset();
        EXPECT_EQ(pool->available(), pool->capacity());
        moved.reset();  // empty: a no-op
        EXPECT_EQ(pool->available(), pool->capacity());
    }
    auto kept = must(held_units::take(b, one));
    EXPECT_EQ(kept.release(), one);
    EXPECT_FALSE(static_cast<bool>(kept));
    EXPECT_EQ(pool->available()[unit::sq], 1u);  // released: still out, not given back
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
    static std::optional<lease> granted;
    granted.reset();
    // Parks: it wants 2, one is out.
    ASSERT_EQ(must(pool->acquire(
                  units{}.with(unit::sq, 2),
                  [](void*, result<lease> l) { granted = std::move(*l); }, nullptr)),
              acquired::parked);
    // One unit is free, but the parked request is ahead of the budget's caller.
    EXPECT_ERRC(held_units::take(b, units{}.with(unit::sq, 1)), errc::would_block);
    first.reset();  // grants the parked request on this thread
    ASSERT_TRUE(granted.has_value());
    EXPECT_EQ(pool->available()[unit::sq], 0u);
    granted.reset();
    EXPECT_EQ(pool->available(), pool->capacity());
}

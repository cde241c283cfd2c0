// SPDX-License-Identifier: BSD-3-Clause
// A connection's operation records (src/ops/op_pool.hpp): the lock-free free lists under take
// and give-back keep each queue's capacity, never hand one record to two takers, and count what
// is taken, from many threads at once.
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ops/op_pool.hpp"

namespace remora::detail {
namespace {

std::vector<op_record*> take_all(op_pool& p, queue q) {
    std::vector<op_record*> out;
    while (op_record* r = p.take(q)) {
        out.push_back(r);
        if (out.size() > 64) {
            break;  // more than any test's queue: a broken list (a cycle) ends here
        }
    }
    return out;
}

TEST(op_pool, each_queue_holds_its_capacity_and_refuses_past_it) {
    op_pool p;
    p.reset(3, 2, 4);
    auto sends = take_all(p, queue::send);
    EXPECT_EQ(sends.size(), 3u);
    EXPECT_EQ(p.in_use(queue::send), 3u);
    EXPECT_EQ(p.in_use(queue::recv), 0u);  // queues are independent
    auto service = take_all(p, queue::service);
    auto recvs = take_all(p, queue::recv);
    EXPECT_EQ(service.size(), 2u);
    EXPECT_EQ(recvs.size(), 4u);
    EXPECT_EQ(p.in_use(), 9u);
    std::set<op_record*> distinct(sends.begin(), sends.end());
    distinct.insert(service.begin(), service.end());
    distinct.insert(recvs.begin(), recvs.end());
    EXPECT_EQ(distinct.size(), 9u);
    for (op_record* r : distinct) {
        EXPECT_TRUE(r->in_use.load());
        EXPECT_EQ(r->owner, &p);
    }
    p.give(sends[1]);
    EXPECT_EQ(p.in_use(queue::send), 2u);
    EXPECT_EQ(p.take(queue::send), sends[1]);  // the one given back, not another queue's
    EXPECT_EQ(p.take(queue::send), nullptr);
}

TEST(op_pool, a_second_give_of_one_record_changes_nothing) {
    op_pool p;
    p.reset(2, 0, 1);
    op_record* a = p.take(queue::send);
    ASSERT_NE(a, nullptr);
    p.give(a);
    p.give(a);  // an RDM close and the provider's own completion, say
    op_record* both[2] = {a, a};
    p.give_n(both, 2);
    EXPECT_EQ(p.in_use(), 0u);
    auto sends = take_all(p, queue::send);
    ASSERT_EQ(sends.size(), 2u);  // not three: the record is on its list once
    EXPECT_NE(sends[0], sends[1]);
}

TEST(op_pool, take_n_is_all_or_nothing_and_give_n_mixes_queues) {
    op_pool p;
    p.reset(4, 0, 2);
    op_record* out[5] = {};
    EXPECT_FALSE(p.take_n(queue::send, 5, out));
    EXPECT_EQ(p.in_use(queue::send), 0u);
    ASSERT_TRUE(p.take_n(queue::send, 3, out));
    EXPECT_EQ(p.in_use(queue::send), 3u);
    EXPECT_FALSE(p.take_n(queue::send, 2, out + 3));
    EXPECT_EQ(p.in_use(queue::send), 3u);
    op_record* r = p.take(queue::recv);
    ASSERT_NE(r, nullptr);
    op_record* back[4] = {out[0], r, out[1], out[2]};
    p.give_n(back, 4);
    EXPECT_EQ(p.in_use(), 0u);
    EXPECT_EQ(take_all(p, queue::send).size(), 4u);
    EXPECT_EQ(take_all(p, queue::recv).size(), 2u);
}

// Posters take from many threads while others give back (a progress thread, pollers): no record
// is ever held by two at once, none is lost, and the counts end where they began.
TEST(op_pool, concurrent_takes_and_gives_never_share_or_lose_a_record) {
    op_pool p;
    constexpr std::size_t sends = 4;
    constexpr std::size_t recvs = 3;
    p.reset(sends, 0, recvs);
    std::vector<op_record*> all;
    {
        auto s = take_all(p, queue::send);
        auto r = take_all(p, queue::recv);
        all.insert(all.end(), s.begin(), s.end());
        all.insert(all.end(), r.begin(), r.end());
        p.give_n(all.data(), all.size());
    }
    std::vector<std::atomic<int>> holders(all.size());
    auto slot = [&](op_record* r) -> std::atomic<int>& {
        for (std::size_t i = 0; i < all.size(); ++i) {
            if (all[i] == r) {
                return holders[i];
            }
        }
        ADD_FAILURE() << "a record that is not the pool's";
        return holders[0];
    };
    std::atomic<bool> shared{false};
    constexpr int threads = 4;
    constexpr int rounds = 1000000;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            std::vector<op_record*> mine;
            for (int i = 0; i < rounds; ++i) {
                const queue q = (i + t) % 3 == 0 ? queue::recv : queue::send;
                if (op_record* r = p.take(q)) {
                    if (slot(r).fetch_add(1) != 0) {
                        shared = true;
                    }
                    mine.push_back(r);
                }
                if (mine.size() >= 2 || (i % 5 == 0 && !mine.empty())) {
                    for (op_record* r : mine) {
                        slot(r).fetch_sub(1);
                    }
                    if (mine.size() == 1) {
                        p.give(mine[0]);
                    } else {
                        p.give_n(mine.data(), mine.size());
                    }
                    mine.clear();
                }
            }
            for (op_record* r : mine) {
                slot(r).fetch_sub(1);
            }
            p.give_n(mine.data(), mine.size());
        });
    }
    for (auto& t : ts) {
        t.join();
    }
    EXPECT_FALSE(shared.load()) << "one record was handed to two takers at once";
    EXPECT_EQ(p.in_use(), 0u);
    EXPECT_EQ(take_all(p, queue::send).size(), sends);
    EXPECT_EQ(take_all(p, queue::recv).size(), recvs);
}

}  // namespace
}  // namespace remora::detail

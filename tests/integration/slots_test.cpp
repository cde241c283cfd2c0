// SPDX-License-Identifier: BSD-3-Clause
// The registration cache (hits, eviction of idle entries only, invalidation, usages) and
// coroutine awaitables over real operations on tcp and sockets.
#include <atomic>

#include "support.hpp"

namespace remora::test {
namespace {

TEST(registration_cache, reuses_covering_registrations_and_evicts_only_idle_ones) {
    auto dom = must(domain::open({.provider = "tcp"}));
    auto cache = must(registration_cache::create(dom, 2));
    std::vector<std::byte> a(8192), b(4096), c(4096);
    auto whole = must(cache.get(a, usage::write_source));
    EXPECT_EQ(whole.offset(), 0u);
    // A sub-range of a cached registration is a hit, at its offset.
    auto part = must(cache.get(std::span(a).subspan(100, 50), usage::write_source));
    EXPECT_EQ(&part.region(), &whole.region());
    EXPECT_EQ(part.offset(), 100u);
    // More usage than cached: a new registration.
    auto more = must(cache.get(a, usage::write_source | usage::send));
    EXPECT_NE(&more.region(), &whole.region());
    auto st = cache.stats();
    EXPECT_EQ(st.hits, 1u);
    EXPECT_EQ(st.misses, 2u);
    // Over capacity: nothing can be evicted while everything is held.
    auto hb = must(cache.get(b, usage::send));
    EXPECT_EQ(cache.stats().entries, 3u);
    EXPECT_EQ(cache.stats().evictions, 0u);
    // Once its handles go, an idle entry can be evicted; held ones stay (over capacity).
    whole = {};
    part = {};
    auto hc = must(cache.get(c, usage::send));
    EXPECT_EQ(cache.stats().evictions, 1u);
    EXPECT_EQ(cache.stats().entries, 3u);
    more = {};
    auto hit = must(cache.get(std::span(c).subspan(1), usage::send));
    EXPECT_EQ(&hit.region(), &hc.region());
    // Invalidation drops overlapping entries; a held handle stays usable until released.
    cache.invalidate(std::span<const std::byte>(b).subspan(10, 1));
    EXPECT_EQ(cache.stats().entries, 2u);
    EXPECT_EQ(hb.region().size(), 4096u);
    auto again = must(cache.get(b, usage::send));
    EXPECT_NE(&again.region(), &hb.region());
    EXPECT_ERRC(cache.get({}, usage::send), errc::invalid_argument);
    EXPECT_ERRC(registration_cache::create(dom, 0), errc::invalid_argument);
}

class coro_test : public testing::TestWithParam<std::string> {};

task copy_rounds(connection& c, const remote_region& dst, memory_region& src, int rounds,
                 std::atomic<int>& done, std::atomic<int>& errors) {
    for (int i = 0; i < rounds; ++i) {
        std::memcpy(src.data(), &i, sizeof i);
        auto w = co_await co_op([&](op_options o) { return c.write(dst, 0, src, 0, 64, o); });
        auto r = co_await co_op([&](op_options o) { return c.read(src, 64, dst, 0, 64, o); });
        int back = -1;
        std::memcpy(&back, src.data() + 64, sizeof back);
        if (!w || !r || back != i) {
            ++errors;
        }
        ++done;
    }
    // A post that fails resumes at once with its error.
    auto bad =
        co_await co_op([&](op_options o) { return c.write(dst, dst.length(), src, 0, 64, o); });
    if (bad || !(bad.error() == errc::out_of_range)) {
        ++errors;
    }
}

TEST_P(coro_test, awaited_writes_and_reads_resume_in_order) {
    // The buffers outlive the connections (declared first, destroyed last): the target's
    // provider may still touch them until its connection is closed.
    std::vector<std::byte> target(4096), local(128);
    auto pair = must(connect_pair(GetParam(), {.progress_thread = true}, {}));
    auto tmr = must(memory_region::create(pair.server_domain, target,
                                          usage::write_destination | usage::read_source));
    auto lmr = must(memory_region::create(pair.client_domain, local,
                                          usage::write_source | usage::read_destination));
    const auto dst = must(tmr.describe());
    std::atomic<int> done{0}, errors{0};
    constexpr int rounds = 500;
    auto t = copy_rounds(*pair.client, dst, lmr, rounds, done, errors);
    // The coroutine resumes on this thread, inside poll.
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!t.done() && std::chrono::steady_clock::now() < deadline) {
        completion buf[4];
        EXPECT_EQ(must(pair.client->cq().poll(buf)), 0u);  // callbacks take them all
        (void)pair.client->cq().wait(10ms);
    }
    EXPECT_TRUE(t.done());
    EXPECT_EQ(done.load(), rounds);
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(pair.client->in_flight(), 0u);
}

TEST_P(coro_test, connections_sharing_a_slot_pool_keep_one_budget) {
    // backpressure: the pool is the limit (4 for both connections, whose own depth is 64).
    // forbid: the pool is sized for both connections (2 + 2), so it is never the limit; their
    // own send queues are. (Exhausting a forbid pool is a sizing bug, asserted in debug builds.)
    for (exhaustion policy : {exhaustion::backpressure, exhaustion::forbid}) {
        SCOPED_TRACE(policy == exhaustion::forbid ? "forbid" : "backpressure");
        auto pool = must(slot_pool::create(
            {.capacity = units{}.with(unit::sq, 4).with(unit::cq, 4), .policy = policy}));
        const std::uint32_t depth = policy == exhaustion::forbid ? 2 : 64;
        const connection_config cfg{.sq_size = depth, .slots = pool};
        // Declared before the connections: the targets' providers may still be writing into
        // ta and tb (a tcp write completes once sent) until the connections close.
        std::vector<std::byte> ta(4096), tb(4096), src(64);
        auto a = must(connect_pair(GetParam(), {.progress_thread = true}, cfg));
        auto b = must(connect_pair(GetParam(), {.progress_thread = true}, cfg));
        auto ma = must(memory_region::create(a.server_domain, ta, usage::write_destination));
        auto mb = must(memory_region::create(b.server_domain, tb, usage::write_destination));
        auto sa = must(memory_region::create(a.client_domain, src, usage::write_source));
        auto sb = must(memory_region::create(b.client_domain, src, usage::write_source));
        const auto da = must(ma.describe());
        const auto db = must(mb.describe());
        int admitted = 0;
        for (int i = 0; i < 10; ++i) {
            for (auto* p : {&a, &b}) {
                auto r =
                    p == &a ? a.client->write(da, 0, sa, 0, 8) : b.client->write(db, 0, sb, 0, 8);
                if (r) {
                    ++admitted;
                    continue;
                }
                EXPECT_TRUE(r.error() == errc::would_block) << r.error().what();
                if (policy == exhaustion::backpressure) {
                    EXPECT_NE(r.error().message().find("shared slot pool"), std::string::npos);
                }
            }
        }
        EXPECT_EQ(admitted, 4);
        EXPECT_EQ(pool->available()[unit::sq], 0u);
        const std::size_t on_a = a.client->in_flight(), on_b = b.client->in_flight();
        EXPECT_EQ(on_a + on_b, 4u);
        EXPECT_EQ(collect(a.client->cq(), on_a, true).size(), on_a);
        EXPECT_EQ(collect(b.client->cq(), on_b, true).size(), on_b);
        // Reading the completions gave every unit back.
        EXPECT_EQ(pool->available(), pool->capacity());
        REMORA_ASSERT_OK(a.client->write(da, 0, sa, 0, 8));
        EXPECT_EQ(pool->available()[unit::sq], 3u);
        a.client.reset();  // a destroyed connection returns what it held
        EXPECT_EQ(pool->available(), pool->capacity());
    }
}

INSTANTIATE_TEST_SUITE_P(providers, coro_test, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

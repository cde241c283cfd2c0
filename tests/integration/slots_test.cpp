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
    EXPECT_FALSE(cache.get({}, usage::send).has_value());
    EXPECT_FALSE(registration_cache::create(dom, 0).has_value());
}

class coro_test : public testing::TestWithParam<std::string> {};

task copy_rounds(connection& c, const remote_region& dst, memory_region& src, int rounds,
                 std::atomic<int>& done, std::atomic<int>& errors) {
    for (int i = 0; i < rounds; ++i) {
        std::memcpy(src.data(), &i, sizeof i);
        auto w = co_await co_op(c, [&](op_options o) { return c.write(dst, 0, src, 0, 64, o); });
        auto r = co_await co_op(c, [&](op_options o) { return c.read(src, 64, dst, 0, 64, o); });
        int back = -1;
        std::memcpy(&back, src.data() + 64, sizeof back);
        if (!w || !r || back != i) {
            ++errors;
        }
        ++done;
    }
    // A post that fails resumes at once with its error.
    auto bad =
        co_await co_op(c, [&](op_options o) { return c.write(dst, dst.length(), src, 0, 64, o); });
    if (bad || !(bad.error() == errc::out_of_range)) {
        ++errors;
    }
}

TEST_P(coro_test, awaited_writes_and_reads_resume_in_order) {
    auto pair = must(connect_pair(GetParam(), {.progress_thread = true}, {}));
    std::vector<std::byte> target(4096), local(128);
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

INSTANTIATE_TEST_SUITE_P(providers, coro_test, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

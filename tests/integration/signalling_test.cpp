// SPDX-License-Identifier: BSD-3-Clause
// Selective signalling (connection_config::signal_every): eligible writes and sends go
// unsignalled at most N - 1 in a row, keep their entries until a later signalled completion
// reclaims them, and nothing else is ever unsignalled. On tcp and sockets.
#include <array>
#include <atomic>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

class signalling : public testing::TestWithParam<std::string> {};

struct rig {
    // The buffers and their registrations outlive the connections (declared after them, so
    // destroyed first): an operation still in flight at the end touches valid, registered
    // memory.
    buffer target{1 << 16};
    buffer local{1 << 16};
    memory_region tmr;
    memory_region lmr;
    remote_region dst;
    connected_pair p;
};

rig make_rig(const std::string& provider, std::uint32_t signal_every, std::uint32_t sq = 64) {
    auto p = must(connect_pair(provider, {.progress_thread = true},
                               {.sq_size = sq, .rq_size = 4, .signal_every = signal_every}));
    buffer target(1 << 16), local(1 << 16);
    auto tmr = must(memory_region::create(p.server_domain, target.span(),
                                          usage::write_destination | usage::read_source));
    auto lmr = must(memory_region::create(p.client_domain, local.span(),
                                          usage::write_source | usage::read_destination));
    auto dst = must(tmr.describe());
    return rig{std::move(target), std::move(local), std::move(tmr), std::move(lmr), dst,
               std::move(p)};
}

// Reads completions until `pred` holds or 5 s pass; returns what was reported.
template <class Pred>
std::vector<completion> drain_until(connection& c, Pred pred) {
    std::vector<completion> seen;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    completion buf[16];
    while (!pred() && std::chrono::steady_clock::now() < deadline) {
        auto n = must(c.cq().poll(buf));
        seen.insert(seen.end(), buf, buf + n);
        if (n == 0) {
            std::this_thread::sleep_for(1ms);
        }
    }
    return seen;
}

TEST_P(signalling, an_unsignalled_write_holds_its_entry_until_a_signalled_one_completes) {
    auto r = make_rig(GetParam(), 8);
    connection& c = *r.p.client;
    EXPECT_EQ(c.config().signal_every, 8u);
    const op_options quiet{.report = completion_mode::on_error};
    // The buffer is copied at post (inject): change it at once; the target gets the old bytes.
    std::memset(r.local.bytes.data(), 0x5a, 64);
    REMORA_ASSERT_OK(c.write(r.dst, 0, r.lmr, 0, 64, quiet));
    std::memset(r.local.bytes.data(), 0x00, 64);
    EXPECT_EQ(c.in_flight(), 1u);
    // A signalled read after it: the connection completes in order, so the write's completion,
    // had it one, would be reaped before the read's. None comes: its entry stays held, since a
    // read does not reclaim (only signalled writes and sends do).
    REMORA_ASSERT_OK(c.read(r.lmr, 4096, r.dst, 0, 64, {.context = &r}));
    auto seen = drain_until(c, [&] { return c.in_flight() < 2; });
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].context, &r);
    EXPECT_EQ(c.in_flight(), 1u);
    REMORA_ASSERT_OK(c.write(r.dst, 64, r.lmr, 0, 8, {.context = &c}));
    seen = drain_until(c, [&] { return c.in_flight() == 0; });
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].context, &c);
    EXPECT_EQ(c.in_flight(), 0u);
    // The injected bytes landed as they were at post.
    EXPECT_EQ(r.local.bytes[4096], std::byte{0x5a});
    EXPECT_EQ(r.target.bytes[63], std::byte{0x5a});
}

TEST_P(signalling, operations_that_must_be_seen_are_always_signalled) {
    auto r = make_rig(GetParam(), 8);
    connection& c = *r.p.client;
    const std::size_t big = r.p.client_domain.caps().inject_size + 1;
    // Larger than the inject size (its buffer must outlive the transfer), a callback, or a
    // completion asked for: each comes back by itself.
    REMORA_ASSERT_OK(c.write(r.dst, 0, r.lmr, 0, big, {.report = completion_mode::on_error}));
    drain_until(c, [&] { return c.in_flight() == 0; });
    EXPECT_EQ(c.in_flight(), 0u);
    static std::atomic<int> calls{0};
    calls = 0;
    REMORA_ASSERT_OK(c.write(
        r.dst, 0, r.lmr, 0, 8,
        {.report = completion_mode::on_error, .callback = [](const completion&) { ++calls; }}));
    drain_until(c, [&] { return c.in_flight() == 0; });
    EXPECT_EQ(calls.load(), 1);
    REMORA_ASSERT_OK(c.write(r.dst, 0, r.lmr, 0, 8, {.context = &r}));
    auto seen = drain_until(c, [&] { return c.in_flight() == 0; });
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(c.in_flight(), 0u);
}

// The bound: never more than N - 1 unsignalled in a row, so a run of eligible writes drains by
// itself; and signal_every is clamped to the send queue, so a full queue always holds a
// signalled operation.
TEST_P(signalling, the_counter_bounds_unsignalled_runs) {
    for (std::uint32_t every : {2u, 4u, 16u}) {
        SCOPED_TRACE("signal_every " + std::to_string(every));
        auto r = make_rig(GetParam(), every, 16);
        connection& c = *r.p.client;
        const op_options quiet{.report = completion_mode::on_error};
        const int total = GetParam() == "sockets" ? 1000 : 20000;  // sockets is slow here
        int posted = 0;
        std::size_t peak = 0;
        completion buf[16];
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (posted < total && std::chrono::steady_clock::now() < deadline) {
            auto w = c.write(r.dst, (posted % 64) * 8, r.lmr, (posted % 64) * 8, 8, quiet);
            if (w) {
                ++posted;
                peak = std::max(peak, c.in_flight());
                continue;
            }
            ASSERT_ERRC(w, errc::would_block);
            auto n = must(c.cq().poll(buf));
            EXPECT_EQ(n, 0u);  // successes of on_error writes are never reported
        }
        EXPECT_EQ(posted, total);
        EXPECT_LE(peak, 16u);
        // Every run of `every` holds a signalled write, whose completion reclaims the rest;
        // at most every - 1 trailing writes wait for the next signalled one.
        drain_until(c, [&] { return c.in_flight() < every; });
        EXPECT_LT(c.in_flight(), every);
        REMORA_ASSERT_OK(c.write(r.dst, 0, r.lmr, 0, 8, {.context = &r}));
        drain_until(c, [&] { return c.in_flight() == 0; });
        EXPECT_EQ(c.in_flight(), 0u);
    }
    EXPECT_EQ(must(connect_pair(GetParam(), {}, {.sq_size = 8, .signal_every = 100}))
                  .client->config()
                  .signal_every,
              8u);
    EXPECT_ERRC(connect_pair(GetParam(), {}, {.signal_every = 0}), errc::invalid_argument);
}

// A peer that dies with unsignalled copies outstanding: nothing hangs, every failure is
// reported with errc::disconnected, and every bounce buffer is back before the connection is
// destroyed: an injected copy's at its post, a signalled one's at its (error) completion.
// What each provider does after the death:
// - tcp takes posts until it notices, and fails each with an error completion (reported,
//   signalled or not); the first signalled one's reclaims the unsignalled entries before it.
// - sockets refuses posts with errc::disconnected once it has noticed (taking nothing); the
//   unsignalled entries taken before the death then stay counted in in_flight() (no signalled
//   completion can come to reclaim them) until the connection is destroyed.
TEST_P(signalling, peer_death_returns_every_unit) {
    const bool tcp = GetParam() == "tcp";
    // The buffer and its registration outlive the connections (declared before them).
    buffer target(4096);
    std::optional<memory_region> tmr;
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto pool = must(buffer_pool::create(cd, {.buffers = 16, .buffer_size = 64}));
    auto l = must(listener::create(sd, "127.0.0.1", 0));
    auto accepted = std::async(std::launch::async, [&] {
        return must(must(l.get_request(10s)).accept({.progress_thread = true}));
    });
    auto client = must(
        connection::connect(cd, "127.0.0.1", l.port(),
                            {.sq_size = 16, .rq_size = 4, .signal_every = 4, .addons = {pool}}));
    connected_pair p{sd, cd, std::move(l), accepted.get(), std::move(client)};
    tmr.emplace(must(memory_region::create(p.server_domain, target.span(),
                                           usage::write_destination | usage::read_source)));
    const auto dst = must(tmr->describe());
    buffer probe(64);
    auto probe_mr =
        must(memory_region::create(p.client_domain, probe.span(), usage::read_destination));
    connection& c = *p.client;
    const op_options quiet{.report = completion_mode::on_error};
    const std::string word = "8 bytes!";
    for (int i = 0; i < 7; ++i) {
        REMORA_ASSERT_OK(remora::write_copy(c, dst, 8 * i, bytes_of(word), quiet));
    }
    // The 4th was signalled: its completion reclaims the 3 before it; 3 wait for the next.
    // Only the signalled ones held a buffer past their post.
    auto seen = drain_until(c, [&] { return c.in_flight() <= 3; });
    EXPECT_TRUE(seen.empty());  // on_error: the success is not reported
    EXPECT_EQ(c.in_flight(), 3u);
    EXPECT_EQ(pool.available(), 16u);
    // A read after them (the connection is ordered) shows all 7 landed: none can fail later.
    REMORA_ASSERT_OK(c.read(probe_mr, 0, dst, 0, 56, {.context = &probe}));
    seen = drain_until(c, [&] { return c.in_flight() == 3; });
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_TRUE(seen[0].ok()) << seen[0].status.message();
    for (int i = 0; i < 7; ++i) {
        EXPECT_EQ(string_of(std::span(probe.bytes).subspan(8 * i, 8)), word) << "write " << i;
    }
    EXPECT_EQ(c.in_flight(), 3u);  // a read does not reclaim
    p.server.reset();              // the peer dies
    p.lst.reset();
    // Signalled copies after the death: each holds its buffer until its completion.
    std::array<int, 8> ids{};
    int taken = 0;
    for (int k = 0; k < 8; ++k) {
        const std::size_t before = pool.available();
        auto w = remora::write_copy(c, dst, 0, bytes_of(word), {.context = &ids[k]});
        if (!w) {
            ASSERT_FALSE(tcp) << "tcp refused a post before it noticed the death: "
                              << w.error().what();
            EXPECT_ERRC(w, errc::disconnected);
            EXPECT_EQ(pool.available(), before) << "a refused post kept its buffer";
            break;
        }
        ++taken;
    }
    if (tcp) {
        EXPECT_EQ(taken, 8);
    }
    EXPECT_EQ(pool.available(), 16u - taken);
    // The disconnect event comes; then each taken copy completes once. One the kernel took
    // before the peer's reset came back (tcp, its first) completes locally, successfully;
    // once one has failed, every later one fails with errc::disconnected. (sockets may add one
    // error of its own that belongs to no operation.)
    auto ev = c.next_event(10s);
    ASSERT_TRUE(ev.has_value()) << ev.error().what();
    EXPECT_EQ(*ev, conn_event::closed);
    std::array<int, 8> times{};
    std::array<bool, 8> ok{};
    int completed = 0;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (completed < taken && std::chrono::steady_clock::now() < deadline) {
        for (const completion& done :
             collect(c.cq(), static_cast<std::size_t>(taken - completed), true, 1s)) {
            if (done.context == nullptr) {
                EXPECT_FALSE(tcp) << "tcp reported a completion of no operation";
                EXPECT_EQ(done.op, op::unknown);
                EXPECT_EQ(done.status, errc::disconnected) << done.status.message();
                continue;
            }
            const auto k = static_cast<int*>(done.context) - ids.data();
            ASSERT_TRUE(k >= 0 && k < taken) << "unexpected context " << done.context;
            EXPECT_EQ(done.op, op::write);
            ++times[k];
            ++completed;
            ok[k] = done.ok();
            if (!done.ok()) {
                EXPECT_EQ(done.status, errc::disconnected) << done.status.message();
            }
        }
    }
    ASSERT_EQ(completed, taken);
    for (int k = 0; k < taken; ++k) {
        EXPECT_EQ(times[k], 1) << "copy " << k;
        if (k > 0 && ok[k]) {
            EXPECT_TRUE(ok[k - 1])
                << "copy " << k << " succeeded after copy " << k - 1 << " failed";
        }
    }
    // Every buffer is back before the connection is destroyed. The unsignalled entries were
    // reclaimed by a signalled completion, or wait for the destroy when none could be taken.
    EXPECT_EQ(pool.available(), 16u);
    EXPECT_EQ(c.in_flight(), taken != 0 ? 0u : 3u);
    EXPECT_FALSE(c.is_open());
    EXPECT_ERRC(remora::write_copy(c, dst, 0, bytes_of(word), {}), errc::disconnected);
    EXPECT_EQ(pool.available(), 16u);
    p.client.reset();
    EXPECT_EQ(pool.available(), 16u);
}

// completion_mode::at_post: the bytes are injected, the write is done for the caller when the
// post returns; only writes and sends of at most the inject size may ask for it.
task inject_twice(connection& c, const remote_region& dst, memory_region& src, bool& ok) {
    auto a = co_await co_op([&](op_options o) { return c.write(dst, 0, src, 0, 8, o); },
                            {.at_post = true});
    auto big = co_await co_op(
        [&](op_options o) { return c.write(dst, 0, src, 0, c.dom().caps().inject_size + 1, o); },
        {.at_post = true});
    ok = a.has_value() && !big.has_value() && big.error() == errc::too_large;
}

TEST_P(signalling, at_post_writes_are_done_when_the_post_returns) {
    auto r = make_rig(GetParam(), 1);
    connection& c = *r.p.client;
    const op_options at_post{.report = completion_mode::at_post};
    std::memset(r.local.bytes.data(), 0x77, 8);
    REMORA_ASSERT_OK(c.write(r.dst, 200, r.lmr, 0, 8, at_post));
    std::memset(r.local.bytes.data(), 0x00, 8);  // free at once: the bytes were copied
    // Nothing is reported; the entry comes back when the library reaps it.
    auto seen = drain_until(c, [&] { return c.in_flight() == 0; });
    EXPECT_TRUE(seen.empty());
    EXPECT_EQ(c.in_flight(), 0u);
    REMORA_ASSERT_OK(c.read(r.lmr, 1024, r.dst, 200, 8, {.context = &r}));
    ASSERT_EQ(drain_until(c, [&] { return c.in_flight() == 0; }).size(), 1u);
    EXPECT_EQ(r.local.bytes[1024], std::byte{0x77});
    // Refused, taking nothing: too large, a read, or with a callback.
    const std::size_t big = r.p.client_domain.caps().inject_size + 1;
    EXPECT_ERRC(c.write(r.dst, 0, r.lmr, 0, big, at_post), errc::too_large);
    EXPECT_ERRC(c.read(r.lmr, 0, r.dst, 0, 8, at_post), errc::invalid_argument);
    EXPECT_ERRC(c.write(r.dst, 0, r.lmr, 0, 8,
                        {.report = completion_mode::at_post, .callback = [](const completion&) {}}),
                errc::invalid_argument);
    EXPECT_EQ(c.in_flight(), 0u);
    // A coroutine awaiting at-post writes never suspends: it has finished when it returns.
    bool ok = false;
    auto t = inject_twice(c, r.dst, r.lmr, ok);
    EXPECT_TRUE(t.done());
    EXPECT_TRUE(ok);
}

// A blocking wait returns when it reaps entries that report nothing (reclaimed unsignalled
// writes, hidden successes): a waiter watching in_flight() is not left asleep.
TEST_P(signalling, a_blocking_wait_returns_when_entries_are_reclaimed) {
    for (bool progress : {false, true}) {
        SCOPED_TRACE(progress ? "progress thread" : "application");
        // The buffers and registrations outlive the connections (declared before them).
        buffer target(4096), local(4096);
        std::optional<memory_region> tmr, lmr;
        auto p = must(connect_pair(
            GetParam(), {.progress_thread = true},
            {.sq_size = 8, .rq_size = 4, .progress_thread = progress, .signal_every = 4}));
        tmr.emplace(
            must(memory_region::create(p.server_domain, target.span(), usage::write_destination)));
        lmr.emplace(
            must(memory_region::create(p.client_domain, local.span(), usage::write_source)));
        const auto dst = must(tmr->describe());
        connection& c = *p.client;
        for (int i = 0; i < 8; ++i) {
            REMORA_ASSERT_OK(c.write(dst, 0, *lmr, 0, 8, {.report = completion_mode::on_error}));
        }
        for (int round = 0; round < 20 && c.in_flight() != 0; ++round) {
            auto w = c.cq().wait(10s);
            ASSERT_TRUE(w.has_value()) << w.error().what();  // not timed_out
            completion buf[4];
            EXPECT_EQ(must(c.cq().poll(buf)), 0u);
        }
        EXPECT_EQ(c.in_flight(), 0u);
    }
}

// A progress thread that reclaims entries between the application's look at in_flight() and
// its wait() must not leave the wait sleeping: the reap is news that wait() has not returned yet,
// so the next wait returns it (0, a no_completion wake-up) at once; the one after blocks again.
TEST_P(signalling, a_reap_by_the_progress_thread_before_the_wait_is_not_slept_through) {
    buffer target(4096), local(4096);
    std::optional<memory_region> tmr, lmr;
    auto p = must(connect_pair(GetParam(), {.progress_thread = true},
                               {.sq_size = 8, .progress_thread = true, .signal_every = 4}));
    tmr.emplace(
        must(memory_region::create(p.server_domain, target.span(), usage::write_destination)));
    lmr.emplace(must(memory_region::create(p.client_domain, local.span(), usage::write_source)));
    const auto dst = must(tmr->describe());
    connection& c = *p.client;
    for (int i = 0; i < 4; ++i) {
        REMORA_ASSERT_OK(c.write(dst, 0, *lmr, 0, 8, {.report = completion_mode::on_error}));
    }
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (c.in_flight() != 0 && std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();  // the progress thread reclaims them, not this thread
    }
    ASSERT_EQ(c.in_flight(), 0u);
    const auto t0 = std::chrono::steady_clock::now();
    auto w = c.cq().wait(10s);
    REMORA_ASSERT_OK(w);
    EXPECT_EQ(*w, 0u);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "the wait slept through the reap";
    EXPECT_ERRC(c.cq().wait(200ms), errc::timed_out);  // nothing new: it blocks again
}

INSTANTIATE_TEST_SUITE_P(providers, signalling, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

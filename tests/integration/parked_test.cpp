// SPDX-License-Identifier: BSD-3-Clause
// Parked posts (op_options::park_until): a post that finds its queue entries or budget units
// taken waits for them in FIFO order, sleeping until a completion gives something back; it ends
// once with its own result, or with timed_out (deadline), canceled (cancel_parked),
// disconnected (close, destruction, the peer's close), having taken nothing. From inside a
// completion callback a post never parks.
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <mutex>

#include <remora/coro.hpp>

#include "support.hpp"

using namespace remora;
using namespace remora::test;

namespace {

using clk = std::chrono::steady_clock;

// Providers this test runs on: the MSG ones and the RDM ones (connect_pair's "rdm:").
std::vector<std::string> parked_providers() {
    auto all = providers();
    for (auto& p : rdm_providers())
        all.push_back(p);
    return all;
}

class parked_test : public testing::TestWithParam<std::string> {
  protected:
    void open(const connection_config& client_cfg) {
        pair_.emplace(must(connect_pair(GetParam(), {}, client_cfg)));
        tmr_.emplace(must(
            memory_region::create(pair_->server_domain, target_.span(), usage::write_destination)));
        smr_.emplace(
            must(memory_region::create(pair_->client_domain, src_.span(), usage::write_source)));
        desc_ = must(tmr_->describe());
    }
    connection& client() { return *pair_->client; }
    result<void> write(void* ctx, clk::time_point park = {}) {
        return client().write(desc_, 0, *smr_, 0, 64, {.context = ctx, .park_until = park});
    }
    static clk::time_point in(std::chrono::milliseconds d) { return clk::now() + d; }

    buffer target_{4096};
    buffer src_{4096};
    std::optional<connected_pair> pair_;
    std::optional<memory_region> tmr_;
    std::optional<memory_region> smr_;
    remote_region desc_;
};

int ctx_[8];

}  // namespace

TEST_P(parked_test, a_parked_post_waits_for_a_completion_and_then_posts) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    EXPECT_ERRC(write(&ctx_[1]), errc::would_block);  // not parked: refused at once
    auto parked = std::async(std::launch::async, [&] { return write(&ctx_[1], in(10s)); });
    ASSERT_TRUE(eventually([&] { return client().parked() == 1; }));
    EXPECT_EQ(parked.wait_for(0s), std::future_status::timeout) << "the post did not park";
    auto first = collect(client().cq(), 1, true);  // gives the entry back: the parked post goes
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].context, &ctx_[0]);
    REMORA_ASSERT_OK(parked.get());
    auto second = collect(client().cq(), 1, true);
    ASSERT_EQ(second.size(), 1u);
    EXPECT_EQ(second[0].context, &ctx_[1]);
    EXPECT_TRUE(second[0].ok()) << second[0].status.message();
    EXPECT_EQ(client().parked(), 0u);
    EXPECT_EQ(client().in_flight(), 0u);
}

TEST_P(parked_test, the_deadline_ends_a_parked_post_with_timed_out_having_taken_nothing) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    const auto start = clk::now();
    EXPECT_ERRC(write(&ctx_[1], start + 200ms), errc::timed_out);
    EXPECT_GE(clk::now() - start, 200ms) << "ended before its deadline";
    EXPECT_EQ(client().parked(), 0u);
    EXPECT_EQ(client().in_flight(), 1u);
    auto got = collect(client().cq(), 2, false, 1s);  // only the first write ever completes
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx_[0]);
}

TEST_P(parked_test, cancel_parked_ends_every_parked_post_once_with_canceled) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    auto a =
        std::async(std::launch::async, [&] { return write(&ctx_[1], clk::time_point::max()); });
    auto b =
        std::async(std::launch::async, [&] { return write(&ctx_[2], clk::time_point::max()); });
    ASSERT_TRUE(eventually([&] { return client().parked() == 2; }));
    EXPECT_EQ(client().cancel_parked(), 2u);
    EXPECT_ERRC(a.get(), errc::canceled);
    EXPECT_ERRC(b.get(), errc::canceled);
    EXPECT_EQ(client().cancel_parked(), 0u);
    EXPECT_EQ(client().in_flight(), 1u);
    auto got = collect(client().cq(), 3, false, 1s);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx_[0]);
    // Posts parked afterwards wait as usual.
    REMORA_ASSERT_OK(write(&ctx_[3], in(10s)));
    EXPECT_EQ(collect(client().cq(), 1, true).size(), 1u);
}

TEST_P(parked_test, parked_posts_are_admitted_in_fifo_order) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    constexpr int waiters = 5;
    std::vector<std::future<result<void>>> posts;
    for (int i = 1; i <= waiters; ++i) {
        posts.push_back(
            std::async(std::launch::async, [&, i] { return write(&ctx_[i], in(20s)); }));
        // Each joins the queue before the next starts: the order is known.
        ASSERT_TRUE(eventually([&] { return client().parked() == static_cast<std::size_t>(i); }));
    }
    // One entry: each completion admits exactly the next waiter, so the CQ's order is the
    // admission order.
    for (int i = 0; i <= waiters; ++i) {
        auto got = collect(client().cq(), 1, true);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].context, &ctx_[i]) << "completion " << i << " out of FIFO order";
    }
    for (auto& p : posts) {
        REMORA_ASSERT_OK(p.get());
    }
    EXPECT_EQ(client().in_flight(), 0u);
}

TEST_P(parked_test, close_ends_a_parked_post_with_disconnected) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    auto p = std::async(std::launch::async, [&] { return write(&ctx_[1], in(20s)); });
    ASSERT_TRUE(eventually([&] { return client().parked() == 1; }));
    REMORA_ASSERT_OK(client().close());
    EXPECT_ERRC(p.get(), errc::disconnected);
    EXPECT_EQ(client().parked(), 0u);
}

TEST_P(parked_test, destroying_the_connection_ends_its_parked_post_once) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    connection* c = &client();
    std::atomic<int> returned{0};
    auto p = std::async(std::launch::async, [&] {
        auto r = c->write(desc_, 0, *smr_, 0, 64, {.context = &ctx_[1], .park_until = in(20s)});
        ++returned;
        return r;
    });
    ASSERT_TRUE(eventually([&] { return c->parked() == 1; }));
    pair_->client.reset();  // waits for the parked post to leave
    EXPECT_ERRC(p.get(), errc::disconnected);
    EXPECT_EQ(returned.load(), 1);
}

TEST_P(parked_test, the_peers_close_ends_a_parked_post) {
    if (is_rdm(GetParam())) {
        GTEST_SKIP() << "RDM peers are not connected: a peer's close is no event on the other";
    }
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    auto first = collect(client().cq(), 1, true);
    ASSERT_EQ(first.size(), 1u);
    // The peer goes; the client notices while it reads its CQ. A post parked behind a full
    // queue ends then, once, with disconnected (or, had an entry come back first, its retry
    // finds the connection closed: disconnected too).
    REMORA_ASSERT_OK(write(&ctx_[1]));
    auto p = std::async(std::launch::async, [&] { return write(&ctx_[2], in(20s)); });
    ASSERT_TRUE(eventually([&] { return client().parked() == 1; }));
    pair_->server.reset();
    const auto deadline = clk::now() + 10s;
    while (client().is_open() && clk::now() < deadline) {
        (void)client().cq().next(50ms);
        (void)client().next_event(0ms);
    }
    EXPECT_FALSE(client().is_open());
    ASSERT_EQ(p.wait_for(10s), std::future_status::ready) << "the parked post never ended";
    auto r = p.get();
    if (r) {
        // Admitted before the close was noticed: posted, and its completion reports the loss.
        auto got = collect(client().cq(), 1, true);
        ASSERT_EQ(got.size(), 1u);
    } else {
        EXPECT_TRUE(r.error() == errc::disconnected) << r.error().what();
    }
}

namespace {
std::atomic<int> callback_code{-1};
connection* other_conn = nullptr;
const remote_region* other_desc = nullptr;
const memory_region* other_src = nullptr;
}  // namespace

TEST_P(parked_test, a_post_from_a_completion_callback_does_not_park) {
    // Two connections: the callback of one posts, with park_until, on the other, whose only
    // entry is taken. It must not wait on the thread that reads completions: would_block.
    open({.sq_size = 1});
    // Its own target bytes (declared first: they outlive the connection): two targets' progress
    // threads writing the same bytes at once is a race in the test (TSan saw it).
    buffer target2{4096};
    auto second = must(connect_pair(GetParam(), {}, {.sq_size = 1}));
    auto tmr2 =
        must(memory_region::create(second.server_domain, target2.span(), usage::write_destination));
    auto smr2 = must(memory_region::create(second.client_domain, src_.span(), usage::write_source));
    const auto d2 = must(tmr2.describe());
    REMORA_ASSERT_OK(second.client->write(d2, 0, smr2, 0, 64));  // its one entry
    other_conn = &*second.client;
    other_desc = &d2;
    other_src = &smr2;
    callback_code = -1;
    REMORA_ASSERT_OK(client().write(desc_, 0, *smr_, 0, 64, {.callback = [](const completion&) {
                                        auto r =
                                            other_conn->write(*other_desc, 0, *other_src, 0, 64,
                                                              {.park_until = clk::now() + 20s});
                                        callback_code =
                                            r ? 0 : static_cast<int>(r.error().code().value());
                                    }}));
    const auto start = clk::now();
    EXPECT_TRUE(eventually([&] {
        completion c[1];
        (void)client().cq().poll(c);
        return callback_code.load() != -1;
    }));
    EXPECT_LT(clk::now() - start, 10s);
    EXPECT_EQ(callback_code.load(), static_cast<int>(errc::would_block));
    EXPECT_EQ(second.client->in_flight(), 1u);
    EXPECT_EQ(collect(second.client->cq(), 1, true).size(), 1u);
}

TEST_P(parked_test, a_shared_budget_parks_across_connections_and_wakes_on_its_units) {
    // Two connections drawing on one slot pool of one write: a post parked on the second wakes
    // when the first's write completes and gives its units back.
    auto pool = must(slot_pool::create({.capacity = units{}.with(unit::sq, 1).with(unit::cq, 1),
                                        .policy = exhaustion::backpressure}));
    open({.sq_size = 4, .slots = pool});
    buffer target2{4096};  // its own target bytes (see a_post_from_a_completion_callback...)
    auto second = must(connect_pair(GetParam(), {}, {.sq_size = 4, .slots = pool}));
    auto smr2 = must(memory_region::create(second.client_domain, src_.span(), usage::write_source));
    auto tmr2 =
        must(memory_region::create(second.server_domain, target2.span(), usage::write_destination));
    const auto d2 = must(tmr2.describe());
    REMORA_ASSERT_OK(write(&ctx_[0]));
    EXPECT_ERRC(second.client->write(d2, 0, smr2, 0, 64), errc::would_block);
    auto p = std::async(std::launch::async, [&] {
        return second.client->write(d2, 0, smr2, 0, 64,
                                    {.context = &ctx_[1], .park_until = in(10s)});
    });
    ASSERT_TRUE(eventually([&] { return second.client->parked() == 1; }));
    EXPECT_EQ(client().parked(), 0u);  // the gate is shared; each counts its own
    EXPECT_EQ(collect(client().cq(), 1, true).size(), 1u);
    REMORA_ASSERT_OK(p.get());
    auto got = collect(second.client->cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx_[1]);
    EXPECT_EQ(pool->available(), pool->capacity());
}

// ---- park_mode::queue: parked posts without a waiting thread ----

namespace {

// What the queued posts' callbacks saw, in order.
struct seen_completion {
    void* context;
    std::error_code status;
    op kind;
};
std::mutex seen_mu;
std::vector<seen_completion> seen;
void record(const completion& c) {
    std::lock_guard lock(seen_mu);
    seen.push_back({c.context, c.status, c.op});
}
std::vector<seen_completion> seen_now() {
    std::lock_guard lock(seen_mu);
    return seen;
}
void reset_seen() {
    std::lock_guard lock(seen_mu);
    seen.clear();
}

}  // namespace

class queued_test : public parked_test {
  protected:
    void SetUp() override { reset_seen(); }
    result<void> queued(void* ctx, clk::time_point until) {
        return client().write(
            desc_, 0, *smr_, 0, 64,
            {.context = ctx, .callback = record, .park_until = until, .park = park_mode::queue});
    }
    // Reads the client's CQ until `n` callbacks were recorded (or 10 s pass).
    bool reap_until(std::size_t n) {
        return eventually([&] {
            completion c[4];
            (void)client().cq().poll(c);
            return seen_now().size() >= n;
        });
    }
};

TEST_P(queued_test, a_queued_post_returns_at_once_and_reports_once_admitted_and_completed) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    REMORA_ASSERT_OK(queued(&ctx_[1], in(10s)));  // returns at once: the entry is taken
    EXPECT_EQ(client().parked(), 1u);
    EXPECT_EQ(client().in_flight(), 1u) << "a queued post is not in flight before it is posted";
    auto first = collect(client().cq(), 1, true);  // gives the entry back: the queued one posts
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].context, &ctx_[0]);
    ASSERT_TRUE(reap_until(1));
    auto got = seen_now();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx_[1]);
    EXPECT_FALSE(got[0].status) << got[0].status.message();
    EXPECT_EQ(got[0].kind, op::write);
    EXPECT_EQ(client().parked(), 0u);
    EXPECT_TRUE(eventually([&] { return client().in_flight() == 0; }));
    EXPECT_TRUE(collect(client().cq(), 1, false, 200ms).empty()) << "reported twice";
}

TEST_P(queued_test, with_free_units_a_queued_post_posts_at_once) {
    open({.sq_size = 4});
    REMORA_ASSERT_OK(queued(&ctx_[0], in(10s)));
    EXPECT_EQ(client().parked(), 0u);
    EXPECT_EQ(client().in_flight(), 1u);
    ASSERT_TRUE(reap_until(1));
    EXPECT_EQ(seen_now()[0].context, &ctx_[0]);
    EXPECT_FALSE(seen_now()[0].status);
}

TEST_P(queued_test, its_deadline_reports_timed_out_through_the_callback_having_posted_nothing) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    const auto start = clk::now();
    REMORA_ASSERT_OK(queued(&ctx_[1], start + 200ms));
    ASSERT_TRUE(eventually([&] { return !seen_now().empty(); }));  // nobody reads the CQ
    EXPECT_GE(clk::now() - start, 200ms) << "ended before its deadline";
    auto got = seen_now();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx_[1]);
    EXPECT_EQ(got[0].status, make_error_code(errc::timed_out));
    EXPECT_EQ(client().parked(), 0u);
    EXPECT_EQ(client().in_flight(), 1u);
    auto done = collect(client().cq(), 2, false, 1s);  // only the first write ever completes
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].context, &ctx_[0]);
}

TEST_P(queued_test, cancel_and_close_end_queued_posts_once_through_their_callbacks) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    REMORA_ASSERT_OK(queued(&ctx_[1], clk::time_point::max()));
    REMORA_ASSERT_OK(queued(&ctx_[2], clk::time_point::max()));
    EXPECT_EQ(client().parked(), 2u);
    EXPECT_EQ(client().cancel_parked(), 2u);
    ASSERT_TRUE(eventually([&] { return seen_now().size() == 2; }));
    REMORA_ASSERT_OK(queued(&ctx_[3], clk::time_point::max()));
    REMORA_ASSERT_OK(client().close());
    ASSERT_TRUE(eventually([&] { return seen_now().size() == 3; }));
    auto got = seen_now();
    EXPECT_EQ(got[0].context, &ctx_[1]);
    EXPECT_EQ(got[0].status, make_error_code(errc::canceled));
    EXPECT_EQ(got[1].context, &ctx_[2]);
    EXPECT_EQ(got[1].status, make_error_code(errc::canceled));
    EXPECT_EQ(got[2].context, &ctx_[3]);
    EXPECT_EQ(got[2].status, make_error_code(errc::disconnected));
    EXPECT_EQ(client().parked(), 0u);
}

TEST_P(queued_test, destroying_the_connection_ends_its_queued_post_once) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    REMORA_ASSERT_OK(queued(&ctx_[1], in(20s)));
    pair_->client.reset();
    auto got = seen_now();  // destruction waited for it
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx_[1]);
    EXPECT_EQ(got[0].status, make_error_code(errc::disconnected));
}

TEST_P(queued_test, queued_and_blocking_posts_share_one_fifo) {
    open({.sq_size = 1});
    // Every completion goes through `record`, so the callbacks' order is the admission order.
    auto blocking = [&](void* ctx) {
        return client().write(desc_, 0, *smr_, 0, 64,
                              {.context = ctx, .callback = record, .park_until = in(20s)});
    };
    REMORA_ASSERT_OK(blocking(&ctx_[0]));
    auto a = std::async(std::launch::async, [&] { return blocking(&ctx_[1]); });
    ASSERT_TRUE(eventually([&] { return client().parked() == 1; }));
    REMORA_ASSERT_OK(queued(&ctx_[2], in(20s)));
    auto c = std::async(std::launch::async, [&] { return blocking(&ctx_[3]); });
    ASSERT_TRUE(eventually([&] { return client().parked() == 3; }));
    // One entry: each completion admits exactly the next waiter, blocking or queued.
    ASSERT_TRUE(reap_until(4));
    REMORA_ASSERT_OK(a.get());
    REMORA_ASSERT_OK(c.get());
    auto got = seen_now();
    ASSERT_EQ(got.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(got[i].context, &ctx_[i]) << "completion " << i << " out of FIFO order";
        EXPECT_FALSE(got[i].status) << got[i].status.message();
    }
}

TEST_P(queued_test, bad_queued_posts_are_refused_at_once) {
    open({.sq_size = 1});
    EXPECT_ERRC(
        client().write(desc_, 0, *smr_, 0, 64, {.park_until = in(1s), .park = park_mode::queue}),
        errc::invalid_argument);  // no callback
    EXPECT_ERRC(
        client().write(desc_, 0, *smr_, 0, 64, {.callback = record, .park = park_mode::queue}),
        errc::invalid_argument);  // no deadline
    EXPECT_ERRC(
        client().write(desc_, 4096, *smr_, 0, 64,
                       {.callback = record, .park_until = in(1s), .park = park_mode::queue}),
        errc::out_of_range);  // checked now, not later
    buffer word(8), target(64);
    auto wmr = must(memory_region::create(pair_->client_domain, word.span(),
                                          usage::read_destination | usage::write_source));
    auto amr =
        must(memory_region::create(pair_->server_domain, target.span(), usage::atomic_target));
    const auto adesc = must(amr.describe());
    auto fa =
        remora::fetch_add(client(), adesc, 0, 1, wmr, 0,
                          {.callback = record, .park_until = in(1s), .park = park_mode::queue});
    ASSERT_FALSE(fa.has_value());
    // Not offered there: refused at admission, after the call's own checks (without native
    // atomics and without a service, the call itself is not supported first).
    EXPECT_TRUE(fa.error() == (remora::atomics(client()) == atomic_path::native
                                   ? errc::invalid_argument
                                   : errc::not_supported))
        << fa.error().what();
    EXPECT_EQ(client().in_flight(), 0u);
    EXPECT_EQ(client().parked(), 0u);
    EXPECT_TRUE(seen_now().empty());
}

namespace {
std::atomic<int> coro_state{0};
result<std::size_t> coro_result{std::size_t{0}};

task parked_writer(connection& c, const remote_region& d, const memory_region& m,
                   clk::time_point until) {
    coro_state = 1;
    coro_result = co_await co_op([&](op_options o) { return c.write(d, 0, m, 0, 64, o); },
                                 {.park_until = until});
    coro_state = 2;
}
}  // namespace

TEST_P(queued_test, a_coroutine_awaits_a_parked_post_without_blocking_its_thread) {
    open({.sq_size = 1});
    REMORA_ASSERT_OK(write(&ctx_[0]));
    coro_state = 0;
    auto t = parked_writer(client(), desc_, *smr_, in(10s));
    EXPECT_EQ(coro_state.load(), 1) << "the coroutine did not suspend while parked";
    EXPECT_EQ(client().parked(), 1u);
    ASSERT_EQ(collect(client().cq(), 1, true).size(), 1u);  // frees the entry: it posts
    ASSERT_TRUE(eventually([&] {
        completion c[4];
        (void)client().cq().poll(c);
        return t.done();
    }));
    EXPECT_EQ(coro_state.load(), 2);
    ASSERT_TRUE(coro_result.has_value()) << coro_result.error().what();

    // Its deadline resumes it with timed_out.
    REMORA_ASSERT_OK(write(&ctx_[1]));
    auto late = parked_writer(client(), desc_, *smr_, in(100ms));
    ASSERT_TRUE(eventually([&] { return late.done(); }));
    ASSERT_FALSE(coro_result.has_value());
    EXPECT_TRUE(coro_result.error() == errc::timed_out) << coro_result.error().what();
}

INSTANTIATE_TEST_SUITE_P(providers, queued_test, testing::ValuesIn(parked_providers()),
                         provider_name);

INSTANTIATE_TEST_SUITE_P(providers, parked_test, testing::ValuesIn(parked_providers()),
                         provider_name);

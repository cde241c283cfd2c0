// SPDX-License-Identifier: BSD-3-Clause
// completion_queue::next(timeout): the next completion to report within a timeout, on tcp and
// sockets. It returns what poll() would, blocks between polls, absorbs what callbacks consume,
// and says timed_out (never sooner than the timeout) when nothing comes.
#include <atomic>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

class next_completion : public testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        connection_config server_cfg;
        server_cfg.progress_thread = true;  // the target answers one-sided traffic on its own
        pair_.emplace(must(connect_pair(GetParam(), server_cfg)));
        tmr_.emplace(must(memory_region::create(pair_->server_domain, target_.span(),
                                                usage::write_destination | usage::receive)));
        lmr_.emplace(must(memory_region::create(pair_->client_domain, local_.span(),
                                                usage::write_source | usage::send)));
        desc_ = must(tmr_->describe());
    }
    connection& client() { return *pair_->client; }
    connection& server() { return *pair_->server; }

    buffer target_{4096};
    buffer local_{4096};
    std::optional<connected_pair> pair_;
    std::optional<memory_region> tmr_;
    std::optional<memory_region> lmr_;
    remote_region desc_;
};

TEST_P(next_completion, returns_the_posted_operations_completion) {
    int ctx = 0;
    REMORA_ASSERT_OK(client().write(desc_, 0, *lmr_, 0, 64, {.context = &ctx}));
    auto c = client().cq().next(10s);
    REMORA_ASSERT_OK(c);
    EXPECT_EQ(c->context, &ctx);
    EXPECT_EQ(c->op, op::write);
    EXPECT_TRUE(c->ok()) << c->status.message();
    EXPECT_ERRC(client().cq().next(0ms), errc::timed_out);  // nothing else is there
}

TEST_P(next_completion, times_out_no_sooner_than_its_timeout_when_nothing_comes) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_ERRC(client().cq().next(300ms), errc::timed_out);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
}

// A receive posted first completes when the peer sends, while next() blocks on another thread.
TEST_P(next_completion, blocks_until_a_completion_arrives) {
    int ctx = 0;
    REMORA_ASSERT_OK(server().recv(*tmr_, 0, 64, {.context = &ctx}));
    auto waiter = std::async(std::launch::async, [&] { return server().cq().next(10s); });
    std::memcpy(local_.bytes.data(), "twelve bytes", 12);
    REMORA_ASSERT_OK(client().send(*lmr_, 0, 12));
    auto c = waiter.get();
    REMORA_ASSERT_OK(c);
    EXPECT_EQ(c->op, op::recv);
    EXPECT_EQ(c->context, &ctx);
    EXPECT_EQ(c->bytes, 12u);
    EXPECT_EQ(std::memcmp(target_.bytes.data(), "twelve bytes", 12), 0);
    auto sent = client().cq().next(10s);
    REMORA_ASSERT_OK(sent);
    EXPECT_EQ(sent->op, op::send);
}

std::atomic<int> callbacks_run{0};
void count_callback(const completion& c) {
    if (c.ok()) {
        callbacks_run.fetch_add(1);
    }
}

// Completions consumed by callbacks are not reported: next() goes on to the one that is.
TEST_P(next_completion, skips_what_callbacks_consume) {
    callbacks_run = 0;
    for (int i = 0; i < 3; ++i) {
        REMORA_ASSERT_OK(client().write(desc_, 0, *lmr_, 0, 64, {.callback = count_callback}));
    }
    int ctx = 0;
    REMORA_ASSERT_OK(client().write(desc_, 64, *lmr_, 0, 64, {.context = &ctx}));
    auto c = client().cq().next(10s);
    REMORA_ASSERT_OK(c);
    EXPECT_EQ(c->context, &ctx);
    EXPECT_EQ(callbacks_run.load(), 3);  // the connection is ordered: they completed first
}

TEST_P(next_completion, is_refused_on_a_cq_whose_channel_is_shared) {
    auto p = must(connect_pair(GetParam(), {}, {.channel = channel_mode::shared}));
    EXPECT_ERRC(p.client->cq().next(0ms), errc::bad_state);
}

// Polls until `done` is set by a callback, and once more (or until `limit` passes); true when
// it was set. Every poll on
// the way reports nothing: the only completions are the callback's.
bool poll_until(completion_queue& cq, const std::atomic<bool>& done,
                std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    completion out[4];
    bool was_done = false;
    do {  // one poll at least after the callback ran
        was_done = done.load();
        auto n = cq.poll(out);
        EXPECT_TRUE(n.has_value() && *n == 0) << "poll reported a callback's completion";
    } while (!was_done && std::chrono::steady_clock::now() < deadline);
    return was_done;
}

std::atomic<bool> callback_done{false};
void mark_done(const completion&) {
    callback_done = true;
}

// The obvious loop `if (poll() == 0) wait()`: a poll whose callbacks consumed everything returns
// 0, and the wait after it returns at once (0: look again) instead of sleeping its timeout (it
// would fail with timed_out: nothing else comes). Said once: the next wait blocks again.
TEST_P(next_completion, a_wait_after_a_poll_that_ran_callbacks_does_not_sleep) {
    callback_done = false;
    REMORA_ASSERT_OK(client().write(desc_, 0, *lmr_, 0, 64, {.callback = mark_done}));
    ASSERT_TRUE(poll_until(client().cq(), callback_done));
    auto w = client().cq().wait(10s);
    REMORA_ASSERT_OK(w);
    EXPECT_EQ(*w, 0u);
    EXPECT_ERRC(client().cq().wait(200ms), errc::timed_out);
}

// The same for a CQ whose ring the library's progress thread fills: the thread ran the callback,
// and the poll that found the ring empty must not swallow that news.
TEST_P(next_completion, a_wait_after_a_poll_of_a_progress_thread_cq_does_not_sleep) {
    connection_config server_cfg;
    server_cfg.progress_thread = true;
    connection_config client_cfg;
    client_cfg.progress_thread = true;
    auto p = must(connect_pair(GetParam(), server_cfg, client_cfg));
    auto tmr =
        must(memory_region::create(p.server_domain, target_.span(), usage::write_destination));
    auto lmr = must(memory_region::create(p.client_domain, local_.span(), usage::write_source));
    callback_done = false;
    REMORA_ASSERT_OK(p.client->write(must(tmr.describe()), 0, lmr, 0, 64, {.callback = mark_done}));
    ASSERT_TRUE(poll_until(p.client->cq(), callback_done));
    auto w = p.client->cq().wait(10s);
    REMORA_ASSERT_OK(w);
    EXPECT_EQ(*w, 0u);
    EXPECT_ERRC(p.client->cq().wait(200ms), errc::timed_out);
}

// The same on a shared CQ's queue(): a receive's callback, run by the server's poll.
TEST_P(next_completion, a_wait_after_a_poll_of_a_shared_cq_does_not_sleep) {
    auto s = server_side::open(GetParam());
    auto shared = must(shared_completion_queue::create(s.dom, {.size = 64}));
    auto conn = must(s.add({.sq_size = 8, .rq_size = 8, .shared_cq = shared}));
    auto rmr = must(memory_region::create(s.dom, target_.span(), usage::receive));
    auto smr = must(memory_region::create(s.client_dom, local_.span(), usage::send));
    callback_done = false;
    REMORA_ASSERT_OK(conn.recv(rmr, 0, 64, {.callback = mark_done}));
    REMORA_ASSERT_OK(s.clients.back().send(smr, 0, 8));
    ASSERT_TRUE(poll_until(shared.queue(), callback_done));
    auto w = shared.queue().wait(10s);
    REMORA_ASSERT_OK(w);
    EXPECT_EQ(*w, 0u);
    EXPECT_ERRC(shared.queue().wait(200ms), errc::timed_out);
}

INSTANTIATE_TEST_SUITE_P(providers, next_completion, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

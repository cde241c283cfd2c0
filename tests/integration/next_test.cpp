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

INSTANTIATE_TEST_SUITE_P(providers, next_completion, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

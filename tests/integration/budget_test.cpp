// SPDX-License-Identifier: BSD-3-Clause
// connection_config::slots through the base layer's `budget` interface: any budget serves (here
// one written by the application), its refusal is the post's error (exact code, and the post
// takes nothing: no record, no units), and every unit comes back when completions are read.
#include <atomic>
#include <mutex>

#include "support.hpp"

using namespace remora;
using namespace remora::test;

namespace {

// Lends sq units up to a limit (cq units are not counted), then refuses with errc::bad_state.
class counting_budget : public budget {
  public:
    explicit counting_budget(std::uint32_t limit) : limit_(limit) {}
    std::uint32_t out() const {
        std::lock_guard lock(mu_);
        return out_;
    }
    std::uint32_t taken_total() const {
        std::lock_guard lock(mu_);
        return total_;
    }

  private:
    result<void> take_units(const units& need) override {
        std::lock_guard lock(mu_);
        if (out_ + need[unit::sq] > limit_) {
            return fail(errc::bad_state, "counting_budget: limit reached");
        }
        out_ += need[unit::sq];
        total_ += need[unit::sq];
        return {};
    }
    void give_units(const units& u) noexcept override {
        std::lock_guard lock(mu_);
        out_ -= u[unit::sq];
    }
    mutable std::mutex mu_;
    std::uint32_t limit_;
    std::uint32_t out_ = 0;
    std::uint32_t total_ = 0;
};

class budget_test : public testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(budget_test, an_application_budget_bounds_posts_and_gets_every_unit_back) {
    auto b = std::make_shared<counting_budget>(3);
    auto pair = must(connect_pair(GetParam(), {}, {.sq_size = 16, .slots = b}));
    buffer target(4096), src(64);
    auto tmr =
        must(memory_region::create(pair.server_domain, target.span(), usage::write_destination));
    auto smr = must(memory_region::create(pair.client_domain, src.span(), usage::write_source));
    const auto d = must(tmr.describe());
    for (int i = 0; i < 3; ++i) {
        REMORA_ASSERT_OK(pair.client->write(d, 0, smr, 0, 8));
    }
    EXPECT_EQ(b->out(), 3u);
    EXPECT_EQ(pair.client->in_flight(), 3u);
    // The budget's refusal is the post's error, with its code, and the post took nothing.
    {
        auto r = pair.client->write(d, 0, smr, 0, 8);
        ASSERT_FALSE(r.has_value());
        EXPECT_TRUE(r.error() == errc::bad_state) << r.error().what();
        EXPECT_NE(r.error().message().find("counting_budget: limit reached"), std::string::npos)
            << r.error().what();
    }
    EXPECT_EQ(pair.client->in_flight(), 3u);
    EXPECT_EQ(b->out(), 3u);
    EXPECT_EQ(collect(pair.client->cq(), 3, true).size(), 3u);
    EXPECT_EQ(b->out(), 0u);
    EXPECT_EQ(pair.client->in_flight(), 0u);
    // A callback operation goes through the same budget and gives back when it has run.
    static std::atomic<int> called{0};
    called = 0;
    REMORA_ASSERT_OK(pair.client->write(d, 0, smr, 0, 8, {.callback = [](const completion& c) {
                                            if (c.ok())
                                                ++called;
                                        }}));
    EXPECT_EQ(b->out(), 1u);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (called.load() == 0 && std::chrono::steady_clock::now() < deadline) {
        completion c;
        auto n = pair.client->cq().poll({&c, 1});
        ASSERT_TRUE(n.has_value()) << n.error().what();
        EXPECT_EQ(*n, 0u);  // delivered to the callback, not reported
    }
    EXPECT_EQ(called.load(), 1);
    EXPECT_EQ(b->out(), 0u);
    EXPECT_EQ(b->taken_total(), 4u);
}

INSTANTIATE_TEST_SUITE_P(providers, budget_test, testing::ValuesIn(providers()), provider_name);

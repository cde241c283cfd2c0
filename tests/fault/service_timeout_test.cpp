// SPDX-License-Identifier: BSD-3-Clause
// Service requests have a deadline (connection_config::service_timeout): a GPSPM flush or a
// service atomic whose reply never comes (the target does not answer: its connection is not
// served, or its service stopped) completes with errc::timed_out, exactly once, and gives back
// its slot and queue entries (in_flight() 0, the full service depth usable again). Waits wake
// for the deadline by themselves; a busy poller ends them too. On the connected providers and on
// the RDM peers (issue 13, defect B: a GPSPM flush to a dead RDM target never completed).
#include <set>

#include "support.hpp"

namespace remora::test {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::uint32_t depth = 4;
constexpr auto timeout = 300ms;

class service_timeout : public testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        // The target has a service but never serves this connection: nothing answers.
        const connection_config target{
            .addons = {remora::persistence_config{.service_depth = depth}}};
        const connection_config client_cfg{
            .addons = {
                remora::persistence_config{.service_depth = depth, .service_timeout = timeout}}};
        if (is_rdm(GetParam())) {
            // RDM peers attached to each other (no warm-up message: the connection carries only
            // the service's messages).
            connection_config t = target;
            t.progress_thread = true;  // it sets up the provider's path, and answers nothing
            auto p = attach_rdm_pair(GetParam().substr(4), t, client_cfg);
            ASSERT_TRUE(p.has_value()) << p.error().what();
            rdm_.emplace(std::move(*p));
            client_ = &*rdm_->b;
            target_domain_ = &rdm_->a_dom;
        } else {
            auto p = connect_pair(GetParam(), target, client_cfg);
            ASSERT_TRUE(p.has_value()) << p.error().what();
            pair_.emplace(std::move(*p));
            client_ = &*pair_->client;
            target_domain_ = &pair_->server_domain;
        }
        svc_ = must(target_service::create());
        mem_ = std::make_unique<buffer>(4096);
        mr_ = must(memory_region::create(
            *target_domain_, mem_->span(),
            usage::write_destination | usage::atomic_target | usage::flush_target));
        desc_ = must(svc_->expose(*mr_));
    }

    connection& client() { return *client_; }

    // Posts `n` GPSPM flushes and returns their completions, read with waits (blocking) or a
    // busy poll, and when the last arrived.
    std::vector<completion> flush_and_reap(std::size_t n, bool blocking, std::vector<int>& ctx) {
        ctx.assign(n, 0);
        for (std::size_t i = 0; i < n; ++i) {
            // An RDM peer's first post may meet the provider setting up its path (would_block).
            const auto limit = clock_type::now() + 10s;
            auto r = remora::flush(client(), desc_, 0, 8,
                                   {.type = flush_type::visibility, .method = flush_method::gpspm},
                                   {.context = &ctx[i]});
            while (!r && r.error() == errc::would_block && clock_type::now() < limit) {
                completion none[4];
                EXPECT_EQ(client().cq().poll(none).value_or(0), 0u);
                std::this_thread::yield();
                r = remora::flush(client(), desc_, 0, 8,
                                  {.type = flush_type::visibility, .method = flush_method::gpspm},
                                  {.context = &ctx[i]});
            }
            EXPECT_TRUE(r.has_value()) << r.error().what();
        }
        // Generous upper bound: the deadline is 300 ms.
        return collect(client().cq(), n, blocking, 10s);
    }

    void check(const std::vector<completion>& got, const std::vector<int>& ctx,
               clock_type::time_point posted) {
        const auto took = clock_type::now() - posted;
        ASSERT_EQ(got.size(), ctx.size()) << "service requests without a reply never ended";
        std::set<const void*> seen;
        for (const completion& c : got) {
            EXPECT_EQ(c.op, op::flush) << to_string(c.op);
            EXPECT_EQ(c.status, make_error_code(errc::timed_out)) << c.status.message();
            EXPECT_TRUE(seen.insert(c.context).second) << "a request completed twice";
            EXPECT_TRUE(c.context >= static_cast<const void*>(&ctx.front()) &&
                        c.context <= static_cast<const void*>(&ctx.back()))
                << "completion with a foreign context";
        }
        EXPECT_GE(took, timeout) << "ended before its deadline";
        // Everything comes back: slots, send entries, receives.
        EXPECT_TRUE(eventually(
            [&] {
                completion none[4];
                (void)client().cq().poll(none);
                return client().in_flight() == 0;
            },
            5s))
            << "in_flight() is " << client().in_flight();
    }

    std::optional<connected_pair> pair_;
    std::optional<rdm_pair> rdm_;
    connection* client_ = nullptr;
    domain* target_domain_ = nullptr;
    std::optional<target_service> svc_;
    std::unique_ptr<buffer> mem_;
    std::optional<memory_region> mr_;
    remote_region desc_;
};

TEST_P(service_timeout, unanswered_flushes_end_timed_out_through_a_wait) {
    std::vector<int> ctx;
    const auto t0 = clock_type::now();
    auto got = flush_and_reap(depth, true, ctx);
    check(got, ctx, t0);
    if (GetParam() == "rdm:shm") {
        // shm keeps the unanswered requests in the target's receive queue (sized by its
        // service depth), so it refuses more sends to that target: the client hears it at once,
        // and nothing is taken.
        auto r = remora::flush(client(), desc_, 0, 8,
                               {.type = flush_type::visibility, .method = flush_method::gpspm});
        ASSERT_FALSE(r.has_value());
        EXPECT_TRUE(r.error() == errc::would_block) << r.error().what();
        EXPECT_EQ(client().in_flight(), 0u);
        return;
    }
    // The whole depth is usable again, and a second round ends the same way.
    const auto t1 = clock_type::now();
    auto again = flush_and_reap(depth, true, ctx);
    check(again, ctx, t1);
    completion late[4];
    auto n = client().cq().poll(late);
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(*n, 0u) << "a late completion";
}

TEST_P(service_timeout, unanswered_flushes_end_timed_out_for_a_busy_poller) {
    std::vector<int> ctx;
    const auto t0 = clock_type::now();
    auto got = flush_and_reap(depth, false, ctx);
    check(got, ctx, t0);
}

TEST(service_timeout_config, must_be_positive) {
    auto p = connect_pair(
        "tcp", {},
        {.addons = {remora::persistence_config{.service_depth = 2, .service_timeout = 0ms}}});
    ASSERT_FALSE(p.has_value());
    EXPECT_TRUE(p.error() == errc::invalid_argument) << p.error().what();
    EXPECT_NE(p.error().message().find("service_timeout"), std::string::npos) << p.error().what();
}

INSTANTIATE_TEST_SUITE_P(providers, service_timeout, testing::ValuesIn([] {
                             auto v = providers();
                             for (auto& r : rdm_providers())
                                 v.push_back(r);
                             return v;
                         }()),
                         provider_name);

}  // namespace
}  // namespace remora::test

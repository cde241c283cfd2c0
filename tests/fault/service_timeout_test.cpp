// SPDX-License-Identifier: BSD-3-Clause
// Service requests have a deadline (connection_config::service_timeout): a GPSPM flush or a
// service atomic whose reply never comes (the target does not answer: its connection is not
// served, or its service stopped) completes with errc::timed_out, exactly once, and gives back
// its slot and queue entries (in_flight() 0, the full service depth usable again). Waits wake
// for the deadline by themselves; a busy poller ends them too. On the connected providers and on
// the RDM peers (issue 13, defect B: a GPSPM flush to a dead RDM target never completed).
//
// A target that accepts with a service depth and never serves is told apart from a slow one
// (persistence_config::serve_wait): the client's requests end errc::bad_state within the wait,
// not at service_timeout, later ones are refused with a message saying so, and a target that
// serves late (or within the wait) is served as before. The timeout tests turn that check off.
#include <mutex>
#include <set>
#include <string>

#include "support.hpp"

namespace remora::test {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::uint32_t depth = 4;
constexpr auto timeout = 300ms;

class service_timeout : public testing::TestWithParam<std::string> {
  protected:
    // No serve_wait: the requests end at their service_timeout alone.
    void SetUp() override {
        open({.service_depth = depth, .service_timeout = timeout, .serve_wait = 0ms});
    }

    void open(const remora::persistence_config& client_persist) {
        // The target has a service but never serves this connection: nothing answers.
        const connection_config target{
            .addons = {remora::persistence_config{.service_depth = depth}}};
        const connection_config client_cfg{.addons = {client_persist}};
        if (is_rdm(GetParam())) {
            // RDM peers attached to each other (no warm-up message: the connection carries only
            // the service's messages).
            connection_config t = target;
            t.progress_thread = true;  // it sets up the provider's path, and answers nothing
            auto p = attach_rdm_pair(GetParam().substr(4), t, client_cfg);
            ASSERT_TRUE(p.has_value()) << p.error().what();
            rdm_.emplace(std::move(*p));
            client_ = &*rdm_->b;
            target_ = &*rdm_->a;
            target_domain_ = &rdm_->a_dom;
        } else {
            auto p = connect_pair(GetParam(), target, client_cfg);
            ASSERT_TRUE(p.has_value()) << p.error().what();
            pair_.emplace(std::move(*p));
            client_ = &*pair_->client;
            target_ = &*pair_->server;
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
    std::vector<completion> flush_and_reap(std::size_t n, bool blocking, std::vector<int>& ctx,
                                           std::chrono::milliseconds limit = 10s) {
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
        return collect(client().cq(), n, blocking, limit);
    }

    void check(const std::vector<completion>& got, const std::vector<int>& ctx,
               clock_type::time_point posted, errc want = errc::timed_out,
               std::chrono::milliseconds at_least = timeout) {
        const auto took = clock_type::now() - posted;
        ASSERT_EQ(got.size(), ctx.size()) << "service requests without a reply never ended";
        std::set<const void*> seen;
        for (const completion& c : got) {
            EXPECT_EQ(c.op, op::flush) << to_string(c.op);
            EXPECT_EQ(c.status, make_error_code(want)) << c.status.message();
            EXPECT_TRUE(seen.insert(c.context).second) << "a request completed twice";
            EXPECT_TRUE(c.context >= static_cast<const void*>(&ctx.front()) &&
                        c.context <= static_cast<const void*>(&ctx.back()))
                << "completion with a foreign context";
        }
        EXPECT_GE(took, at_least) << "ended before its deadline";
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

    // The memory outlives the connections: a progress thread may still be in the provider with
    // it when the test ends (ASan's sendmsg check).
    std::unique_ptr<buffer> mem_;
    std::optional<connected_pair> pair_;
    std::optional<rdm_pair> rdm_;
    connection* client_ = nullptr;
    connection* target_ = nullptr;
    domain* target_domain_ = nullptr;
    std::optional<target_service> svc_;
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
        // service depth and one for a client's hello, which this client does not send, and
        // rounded up by shm), so once that is full it refuses more sends to that target: the
        // client hears it at once, and nothing is taken.
        bool refused = false;
        for (int more = 0; more < 16 && !refused; ++more) {
            int one = 0;
            auto r = remora::flush(client(), desc_, 0, 8,
                                   {.type = flush_type::visibility, .method = flush_method::gpspm},
                                   {.context = &one});
            if (!r) {
                EXPECT_TRUE(r.error() == errc::would_block) << r.error().what();
                refused = true;
                break;
            }
            auto got_one = collect(client().cq(), 1, true, 10s);
            ASSERT_EQ(got_one.size(), 1u);
            EXPECT_EQ(got_one[0].status, make_error_code(errc::timed_out));
        }
        EXPECT_TRUE(refused) << "shm took more requests than its receive queue holds";
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

// The target accepts with a service depth and never serves (service_timeout 30 s, serve_wait
// 200 ms).
class unserved : public service_timeout {
  protected:
    static constexpr auto wait = 200ms;
    void SetUp() override {
        open({.service_depth = depth, .service_timeout = 30s, .serve_wait = wait});
    }

    // Reads the target's CQ where this thread must (a connected target has no progress thread).
    void drive_target() {
        if (!is_rdm(GetParam())) {
            completion buf[8];
            (void)target_->cq().poll(buf);
        }
    }

    // Posts one GPSPM flush, retried while refused (would_block, or bad_state until the target
    // is heard from), driving the target; returns its completion.
    std::optional<completion> flush_served() {
        const auto limit = clock_type::now() + 10s;
        bool posted = false;
        while (clock_type::now() < limit) {
            drive_target();
            if (!posted) {
                auto r =
                    remora::flush(client(), desc_, 0, 8,
                                  {.type = flush_type::visibility, .method = flush_method::gpspm});
                posted = r.has_value();
                if (!r) {
                    EXPECT_TRUE(r.error() == errc::would_block || r.error() == errc::bad_state)
                        << r.error().what();
                }
            }
            completion got[4];
            auto n = client().cq().poll(got);
            EXPECT_TRUE(n.has_value());
            if (n.value_or(0) != 0) {
                EXPECT_EQ(*n, 1u);
                return got[0];
            }
            std::this_thread::yield();
        }
        return std::nullopt;
    }
};

TEST_P(unserved, a_target_that_never_serves_fails_fast_and_says_so) {
    struct warnings {
        std::mutex mu;
        std::vector<std::string> lines;
    } log;
    set_log_function(
        [](log_level level, const char* line, void* context) {
            auto& w = *static_cast<warnings*>(context);
            if (level == log_level::warning) {
                std::lock_guard lock(w.mu);
                w.lines.emplace_back(line);
            }
        },
        &log);
    std::vector<int> ctx;
    const auto t0 = clock_type::now();
    auto got = flush_and_reap(depth, true, ctx, 10s);
    // Within the wait, far from service_timeout (30 s), with bad_state.
    check(got, ctx, t0, errc::bad_state, wait);
    EXPECT_LT(clock_type::now() - t0, 10s);
    set_log_function(nullptr);
    {
        std::lock_guard lock(log.mu);
        ASSERT_FALSE(log.lines.empty());
        EXPECT_NE(log.lines.front().find("does not serve it"), std::string::npos)
            << log.lines.front();
    }
    // Later requests are refused at once, saying what is wrong; nothing is taken.
    auto r = remora::flush(client(), desc_, 0, 8,
                           {.type = flush_type::visibility, .method = flush_method::gpspm});
    ASSERT_FALSE(r.has_value());
    EXPECT_TRUE(r.error() == errc::bad_state) << r.error().what();
    EXPECT_NE(r.error().message().find("accepted a service"), std::string::npos)
        << r.error().what();
    EXPECT_NE(r.error().message().find("target_service::serve"), std::string::npos)
        << r.error().what();
    EXPECT_EQ(client().in_flight(), 0u);
}

TEST_P(unserved, a_target_that_serves_late_is_served_again) {
    std::vector<int> ctx;
    auto got = flush_and_reap(depth, true, ctx, 10s);
    check(got, ctx, clock_type::now() - 1s, errc::bad_state, 0ms);
    REMORA_ASSERT_OK(svc_->serve(*target_));
    auto c = flush_served();
    ASSERT_TRUE(c.has_value()) << "a late-served target never answered";
    EXPECT_EQ(c->op, op::flush);
    EXPECT_TRUE(c->ok()) << c->status.message();
    EXPECT_TRUE(eventually([&] {
        drive_target();
        completion none[4];
        (void)client().cq().poll(none);
        return client().in_flight() == 0;
    }));
}

TEST_P(unserved, a_target_that_serves_within_the_wait_is_served) {
    int ctx = 0;
    auto r = remora::flush(client(), desc_, 0, 8,
                           {.type = flush_type::visibility, .method = flush_method::gpspm},
                           {.context = &ctx});
    // An RDM peer's first post may meet the provider setting up its path (would_block).
    for (const auto limit = clock_type::now() + 10s;
         !r && r.error() == errc::would_block && clock_type::now() < limit;) {
        completion none[4];
        EXPECT_EQ(client().cq().poll(none).value_or(0), 0u);
        std::this_thread::yield();
        r = remora::flush(client(), desc_, 0, 8,
                          {.type = flush_type::visibility, .method = flush_method::gpspm},
                          {.context = &ctx});
    }
    ASSERT_TRUE(r.has_value()) << r.error().what();
    std::this_thread::sleep_for(wait / 4);
    REMORA_ASSERT_OK(svc_->serve(*target_));
    const auto limit = clock_type::now() + 10s;
    std::vector<completion> got;
    while (got.empty() && clock_type::now() < limit) {
        drive_target();
        completion buf[4];
        auto n = client().cq().poll(buf);
        ASSERT_TRUE(n.has_value());
        got.assign(buf, buf + *n);
    }
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    // The hello is no request: the target counts one, and the client has nothing in flight.
    EXPECT_EQ(svc_->requests(), 1u);
    EXPECT_EQ(svc_->requests(*target_), 1u);
    EXPECT_TRUE(eventually([&] {
        drive_target();
        completion none[4];
        (void)client().cq().poll(none);
        return client().in_flight() == 0;
    }));
    // Served from then on, past the wait.
    std::this_thread::sleep_for(wait * 2);
    auto again = flush_served();
    ASSERT_TRUE(again.has_value());
    EXPECT_TRUE(again->ok()) << again->status.message();
}

TEST(service_timeout_config, serve_wait_must_not_be_negative) {
    auto p = connect_pair(
        "tcp", {},
        {.addons = {remora::persistence_config{.service_depth = 2, .serve_wait = -1ms}}});
    ASSERT_FALSE(p.has_value());
    EXPECT_TRUE(p.error() == errc::invalid_argument) << p.error().what();
    EXPECT_NE(p.error().message().find("serve_wait"), std::string::npos) << p.error().what();
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
INSTANTIATE_TEST_SUITE_P(providers, unserved, testing::ValuesIn([] {
                             auto v = providers();
                             for (auto& r : rdm_providers())
                                 v.push_back(r);
                             return v;
                         }()),
                         provider_name);

}  // namespace
}  // namespace remora::test

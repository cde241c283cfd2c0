// SPDX-License-Identifier: BSD-3-Clause
// Every operation is accounted from post to completion: per-operation callbacks run exactly
// once, tiny queues never overflow under mixed load, and every entry comes back.
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

class accounting : public testing::TestWithParam<std::string> {};

struct tally {
    std::mutex mu;
    std::map<const void*, int> calls;
    std::size_t errors = 0;
    std::set<std::thread::id> threads;
};
tally* current = nullptr;

void count(const completion& c) {
    std::lock_guard lock(current->mu);
    ++current->calls[c.context];
    current->errors += c.ok() ? 0 : 1;
    current->threads.insert(std::this_thread::get_id());
}

// Tiny queues (send queue 4, receive queue 4), mixed writes, reads and sends with callbacks,
// many more operations than entries: every operation is admitted only when an entry is free,
// its callback runs exactly once, the CQ never overflows, and everything comes back.
TEST_P(accounting, tiny_queues_mixed_operations_callbacks_exactly_once) {
    // sockets round-trips slowly on a busy 2-core machine (its own progress threads compete):
    // fewer operations there, still hundreds of times the queues' depth.
    const std::size_t ops = GetParam() == "sockets" ? 1500 : 6000;
    buffer target(1 << 14), local(1 << 14), inbox(64 * 4);
    connection_config tiny{.sq_size = 4, .rq_size = 4};
    connection_config server_cfg = tiny;
    server_cfg.progress_thread = true;
    auto p = must(connect_pair(GetParam(), server_cfg, tiny));
    EXPECT_EQ(p.client->config().cq_size, 8u);
    auto tmr = must(memory_region::create(p.server_domain, target.span(),
                                          usage::write_destination | usage::read_source));
    auto imr = must(memory_region::create(p.server_domain, inbox.span(), usage::receive));
    auto lmr =
        must(memory_region::create(p.client_domain, local.span(),
                                   usage::write_source | usage::read_destination | usage::send));
    auto desc = must(tmr.describe());
    tally t;
    current = &t;
    std::vector<int> ids(ops);
    std::atomic<bool> stop{false};
    std::atomic<std::size_t> received{0};
    std::mutex received_mu;
    std::condition_variable received_cv;  // signalled for every message the target takes
    // The target keeps receives posted and counts what arrives (its CQ is the progress
    // thread's; the application polls the ring).
    std::thread server([&] {
        for (int k = 0; k < 4; ++k) {
            ASSERT_TRUE(p.server->recv(imr, k * 64, 64, {.context = &inbox.bytes[k * 64]}));
        }
        completion c[8];
        while (!stop) {
            auto n = p.server->cq().wait(50ms);
            (void)n;
            auto got = p.server->cq().poll(c);
            ASSERT_TRUE(got);
            for (std::size_t i = 0; i < *got; ++i) {
                ASSERT_TRUE(c[i].ok()) << c[i].status.message();
                {
                    std::lock_guard lock(received_mu);
                    ++received;
                }
                received_cv.notify_all();
                ASSERT_TRUE(p.server->recv(imr, 0, 64, {.context = c[i].context}));
            }
        }
    });
    std::size_t posted = 0, sends = 0, blocked = 0;
    completion none[8];
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (posted < ops && std::chrono::steady_clock::now() < deadline) {
        const std::size_t k = posted;
        const op_options o{.context = &ids[k], .callback = &count};
        result<void> r;
        switch (k % 3) {
            case 0:
                r = p.client->write(desc, (k * 8) % 8192, lmr, 0, 8, o);
                break;
            case 1:
                r = p.client->read(lmr, 64, desc, (k * 8) % 8192, 8, o);
                break;
            default:
                // Don't outrun the target's receives: at most 4 sends unanswered.
                if (sends >= received.load() + 4) {
                    r = fail(errc::would_block, "target busy");
                } else {
                    r = p.client->send(lmr, 128, 16, o);
                    if (r)
                        ++sends;
                }
        }
        if (r) {
            ++posted;
            EXPECT_LE(p.client->in_flight(), 4u);
            continue;
        }
        ASSERT_TRUE(r.error() == errc::would_block) << r.error().what();
        ++blocked;
        // Reap: callbacks run here; poll reports nothing for them.
        auto n = p.client->cq().poll(none);
        ASSERT_TRUE(n);
        EXPECT_EQ(*n, 0u);
    }
    while (p.client->in_flight() != 0 && std::chrono::steady_clock::now() < deadline) {
        auto n = p.client->cq().poll(none);
        ASSERT_TRUE(n);
        EXPECT_EQ(*n, 0u);
    }
    {
        std::unique_lock lock(received_mu);
        received_cv.wait_until(lock, deadline, [&] { return received.load() >= sends; });
    }
    stop = true;
    server.join();
    current = nullptr;
    EXPECT_EQ(posted, ops);
    EXPECT_GT(blocked, 0u) << "the queues were never full: the test did not test admission";
    EXPECT_EQ(p.client->in_flight(), 0u);
    EXPECT_EQ(t.errors, 0u);
    ASSERT_EQ(t.calls.size(), ops) << "some callbacks never ran";
    for (const auto& [ctx, n] : t.calls) {
        ASSERT_EQ(n, 1) << "a callback ran " << n << " times";
    }
    EXPECT_EQ(received.load(), sends);
    EXPECT_EQ(p.server->in_flight(), 4u);  // its four receives, still posted
}

// Operations posted with completion_mode::on_error report nothing on success, yet their entries
// come back when the CQ is reaped.
TEST_P(accounting, unreported_successes_still_return_their_entries) {
    buffer target(4096), local(4096);
    auto p = must(connect_pair(GetParam(), {.progress_thread = true}, {.sq_size = 4}));
    auto tmr =
        must(memory_region::create(p.server_domain, target.span(), usage::write_destination));
    auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::write_source));
    auto desc = must(tmr.describe());
    completion c[8];
    for (int i = 0; i < 100; ++i) {
        auto r = p.client->write(desc, 0, lmr, 0, 8, {.report = completion_mode::on_error});
        if (!r) {
            ASSERT_TRUE(r.error() == errc::would_block) << r.error().what();
            auto n = p.client->cq().poll(c);
            ASSERT_TRUE(n);
            EXPECT_EQ(*n, 0u);
            --i;
        }
    }
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (p.client->in_flight() != 0 && std::chrono::steady_clock::now() < deadline) {
        auto n = p.client->cq().poll(c);
        ASSERT_TRUE(n);
        EXPECT_EQ(*n, 0u);
    }
    EXPECT_EQ(p.client->in_flight(), 0u);
}

INSTANTIATE_TEST_SUITE_P(providers, accounting, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

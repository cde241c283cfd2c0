// SPDX-License-Identifier: BSD-3-Clause
// Selective signalling and at_post against the pools around them: a progress-owned wait blocks
// again after a reap that reported nothing, injected copies give their bounce buffer back at
// post, and a shared slot pool cannot be wedged by unsignalled writes.
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

using clk = std::chrono::steady_clock;

class signalling_pools : public testing::TestWithParam<std::string> {};

// Sleeps (never polls: poll would clear what the bug leaves behind) until `pred` or 5 s.
template <class Pred>
void sleep_until(Pred pred) {
    const auto deadline = clk::now() + 5s;
    while (!pred() && clk::now() < deadline) {
        std::this_thread::sleep_for(1ms);
    }
}

// A reap without a report (an on_error success) wakes a progress-owned CQ's waiter once; the
// waits after it block again (the eventfd is cleared when the ring is empty), rather than
// returning 0 at once in a loop that spins at full CPU and never times out.
TEST_P(signalling_pools, progress_owned_wait_blocks_again_after_a_silent_reap) {
    // The buffers and registrations outlive the connections (in-flight operations).
    buffer target(4096), local(4096);
    std::optional<memory_region> tmr, lmr;
    auto p = must(connect_pair(GetParam(), {.progress_thread = true},
                               {.sq_size = 8, .rq_size = 4, .progress_thread = true}));
    tmr.emplace(
        must(memory_region::create(p.server_domain, target.span(), usage::write_destination)));
    lmr.emplace(must(memory_region::create(p.client_domain, local.span(), usage::write_source)));
    const auto dst = must(tmr->describe());
    connection& c = *p.client;
    REMORA_ASSERT_OK(c.write(dst, 0, *lmr, 0, 8, {.report = completion_mode::on_error}));
    sleep_until([&] { return c.in_flight() == 0; });  // reaped by the progress thread
    ASSERT_EQ(c.in_flight(), 0u);
    (void)c.cq().wait(100ms);  // may return 0 for that reap: documented
    // Nothing happens any more: each wait must block for its timeout.
    for (int i = 0; i < 3; ++i) {
        const auto t0 = clk::now();
        auto w = c.cq().wait(300ms);
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0);
        if (w) {
            ADD_FAILURE() << "wait " << i << " returned " << *w << " after " << took.count()
                          << " ms with nothing to reap";
        } else {
            EXPECT_ERRC(w, errc::timed_out);
        }
        EXPECT_GE(took, 250ms) << "wait " << i;
    }
}

// An injected (unsignalled) write_copy gives its bounce buffer back at post: were it held until
// a later signalled completion, unsignalled writes could hold every buffer of the pool, so that
// no write_copy (not even a signalled one) could be posted and reaping would never free one.
TEST_P(signalling_pools, unsignalled_write_copies_cannot_wedge_the_bounce_pool) {
    // The buffer and its registration outlive the connections (in-flight operations).
    buffer target(4096);
    std::optional<memory_region> tmr;
    auto cd = must(domain::open({.provider = GetParam()}));
    auto pool = must(buffer_pool::create(cd, {.buffers = 2, .buffer_size = 64}));
    auto sd = must(domain::open({.provider = GetParam()}));
    auto l = must(listener::create(sd, "127.0.0.1", 0));
    auto accepted = std::async(std::launch::async, [&] {
        return must(must(l.get_request(10s)).accept({.progress_thread = true}));
    });
    auto client = must(
        connection::connect(cd, "127.0.0.1", l.port(),
                            {.sq_size = 16, .rq_size = 4, .signal_every = 8, .addons = {pool}}));
    auto server = accepted.get();
    tmr.emplace(must(
        memory_region::create(sd, target.span(), usage::write_destination | usage::flush_target)));
    const auto dst = must(tmr->describe());
    const std::string text = "12345678";
    const op_options quiet{.report = completion_mode::on_error};
    REMORA_ASSERT_OK(remora::write_copy(client, dst, 0, bytes_of(text), quiet));
    REMORA_ASSERT_OK(remora::write_copy(client, dst, 8, bytes_of(text), quiet));
    // Both buffers are back the moment the posts return (the provider copied the bytes) ...
    EXPECT_EQ(pool.available(), 2u);
    EXPECT_EQ(client.in_flight(), 2u);  // ... while their entries wait for a signalled write
    // A flush after them on the ordered connection (a read, which reclaims nothing): the bytes
    // landed.
    REMORA_ASSERT_OK(
        remora::flush(client, dst, 0, 16, {.type = flush_type::visibility}, {.context = &pool}));
    auto flushed = collect(client.cq(), 1, true);
    ASSERT_EQ(flushed.size(), 1u);
    EXPECT_TRUE(flushed[0].ok()) << flushed[0].status.message();
    EXPECT_EQ(flushed[0].context, &pool);
    EXPECT_EQ(string_of(std::span(target.bytes).subspan(0, 16)), text + text);
    EXPECT_EQ(pool.available(), 2u);
    EXPECT_EQ(client.in_flight(), 2u);
    // A signalled copy gets a buffer, and its completion reclaims the two entries.
    REMORA_ASSERT_OK(remora::write_copy(client, dst, 16, bytes_of(text), {.context = &target}));
    EXPECT_EQ(pool.available(), 1u);
    auto done = collect(client.cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok()) << done[0].status.message();
    EXPECT_EQ(done[0].context, &target);
    EXPECT_EQ(client.in_flight(), 0u);
    EXPECT_EQ(pool.available(), 2u);
}

// A shared slot_pool: unsignalled writes would keep their {sq, cq} units until a later signalled
// write completes, and on a budget shared by connections that write might never be admitted.
// The combination is refused.
TEST_P(signalling_pools, selective_signalling_with_a_shared_slot_pool_is_refused) {
    auto units_pool = must(slot_pool::create(
        {.capacity = units{}.with(unit::sq, 2).with(unit::cq, 2).with(unit::recv, 4),
         .policy = exhaustion::backpressure}));
    auto p = connect_pair(GetParam(), {.progress_thread = true},
                          {.sq_size = 16, .rq_size = 4, .slots = units_pool, .signal_every = 8});
    EXPECT_ERRC(p, errc::invalid_argument);
    EXPECT_EQ(units_pool->available(), units_pool->capacity());
}

INSTANTIATE_TEST_SUITE_P(providers, signalling_pools, testing::ValuesIn(providers()),
                         provider_name);

}  // namespace
}  // namespace remora::test

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

// Reaps for `d`: polls and waits, as "would_block ... reap completions" tells the caller to.
void reap_for(connection& c, std::chrono::milliseconds d) {
    completion buf[16];
    const auto deadline = clk::now() + d;
    while (clk::now() < deadline) {
        (void)c.cq().poll(buf);
        (void)c.cq().wait(20ms);
    }
}

// A reap without a report (an on_error success) wakes a progress-owned CQ's waiter once; the
// waits after it block again (the eventfd is cleared when the ring is empty), rather than
// returning 0 at once in a loop that spins at full CPU and never times out.
TEST_P(signalling_pools, progress_owned_wait_blocks_again_after_a_silent_reap) {
    buffer target(4096), local(4096);  // outlive the connections (in-flight operations)
    auto p = must(connect_pair(GetParam(), {.progress_thread = true},
                               {.sq_size = 8, .rq_size = 4, .progress_thread = true}));
    auto tmr =
        must(memory_region::create(p.server_domain, target.span(), usage::write_destination));
    auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::write_source));
    const auto dst = must(tmr.describe());
    connection& c = *p.client;
    REMORA_ASSERT_OK(c.write(dst, 0, lmr, 0, 8, {.completion = completion_mode::on_error}));
    sleep_until([&] { return c.in_flight() == 0; });  // reaped by the progress thread
    ASSERT_EQ(c.in_flight(), 0u);
    (void)c.cq().wait(100ms);  // may return 0 for that reap: documented
    // Nothing happens any more: each wait must block for its timeout.
    for (int i = 0; i < 3; ++i) {
        const auto t0 = clk::now();
        auto w = c.cq().wait(300ms);
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0);
        EXPECT_FALSE(w.has_value()) << "wait " << i << " returned " << *w << " after "
                                    << took.count() << " ms with nothing to reap";
        EXPECT_GE(took, 250ms) << "wait " << i;
    }
}

// An injected (unsignalled) write_copy gives its bounce buffer back at post: were it held until
// a later signalled completion, unsignalled writes could hold every buffer of the pool, so that
// no write_copy (not even a signalled one) could be posted and reaping would never free one.
TEST_P(signalling_pools, unsignalled_write_copies_cannot_wedge_the_bounce_pool) {
    buffer target(4096);  // outlives the connections (in-flight operations)
    auto cd = must(domain::open({.provider = GetParam()}));
    auto pool = must(buffer_pool::create(cd, {.buffers = 2, .buffer_size = 64}));
    auto sd = must(domain::open({.provider = GetParam()}));
    auto l = must(listener::create(sd, "127.0.0.1", 0));
    auto accepted = std::async(std::launch::async, [&] {
        return must(must(l.get_request(10s)).accept({.progress_thread = true}));
    });
    auto client =
        must(connection::connect(cd, "127.0.0.1", l.port(),
                                 {.sq_size = 16, .rq_size = 4, .signal_every = 8, .bounce = pool}));
    auto server = accepted.get();
    auto tmr = must(memory_region::create(sd, target.span(), usage::write_destination));
    const auto dst = must(tmr.describe());
    const std::string text = "12345678";
    const op_options quiet{.completion = completion_mode::on_error};
    REMORA_ASSERT_OK(client.write_copy(dst, 0, bytes_of(text), quiet));
    REMORA_ASSERT_OK(client.write_copy(dst, 8, bytes_of(text), quiet));
    reap_for(client, 500ms);
    // Both writes are long done (injected, and the target saw them) ...
    EXPECT_EQ(string_of(std::span(target.bytes).subspan(8, 8)), text);
    // ... yet their buffers are still held, and the caller cannot get a completion that would
    // give them back.
    auto w = client.write_copy(dst, 16, bytes_of(text), {.context = &target});
    EXPECT_TRUE(w.has_value()) << "write_copy after reaping: " << w.error().what()
                               << " (pool available " << pool.available() << ", in_flight "
                               << client.in_flight() << ")";
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
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error(), errc::invalid_argument);
    EXPECT_EQ(units_pool->available(), units_pool->capacity());
}

INSTANTIATE_TEST_SUITE_P(providers, signalling_pools, testing::ValuesIn(providers()),
                         provider_name);

}  // namespace
}  // namespace remora::test

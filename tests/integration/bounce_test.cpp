// SPDX-License-Identifier: BSD-3-Clause
// Pre-registered bounce buffers: write_copy and send_copy from unregistered memory, each
// operation's buffer held by its slot until completion, taken with its queue entries at once or
// not at all, and returned on every path; write_or_copy, which takes one only past max_sge. On
// tcp and sockets.
#include "support.hpp"

namespace remora::test {
namespace {

class bounce : public testing::TestWithParam<std::string> {};

TEST(buffer_pool, hands_out_each_buffer_once_and_takes_it_back) {
    auto dom = must(domain::open({.provider = "tcp"}));
    EXPECT_ERRC(buffer_pool::create(dom, {.buffers = 0}), errc::invalid_argument);
    EXPECT_ERRC(buffer_pool::create(dom, {.buffer_size = 0}), errc::invalid_argument);
    auto pool = must(buffer_pool::create(dom, {.buffers = 3, .buffer_size = 100}));
    EXPECT_EQ(pool.capacity(), 3u);
    EXPECT_EQ(pool.buffer_size(), 100u);
    std::vector<pooled_buffer> out;
    for (int i = 0; i < 3; ++i) {
        out.push_back(must(pool.try_get()));
        EXPECT_EQ(out.back().data().size(), 100u);
        EXPECT_EQ(&out.back().region(), &out.front().region());  // one registration
    }
    // Disjoint buffers inside the registration.
    EXPECT_NE(out[0].offset(), out[1].offset());
    EXPECT_NE(out[1].offset(), out[2].offset());
    EXPECT_ERRC(pool.try_get(), errc::would_block);
    out.pop_back();
    EXPECT_EQ(pool.available(), 1u);
    pooled_buffer moved = std::move(out[0]);
    EXPECT_EQ(pool.available(), 1u);
    moved.release();
    EXPECT_EQ(pool.available(), 2u);
    out.clear();
    EXPECT_EQ(pool.available(), 3u);
}

struct rig {
    buffer target{1 << 16};  // outlives the connections
    connected_pair p;
    memory_region tmr;
    remote_region dst;
    buffer_pool pool;
};

rig make_rig(const std::string& provider, std::size_t buffers, std::uint32_t sq = 16,
             std::uint32_t max_sge = 1) {
    // The pool is registered in the client's domain and given to its connection at connect.
    auto sd = must(domain::open({.provider = provider}));
    auto cd = must(domain::open({.provider = provider}));
    auto pool = must(buffer_pool::create(cd, {.buffers = buffers, .buffer_size = 512}));
    auto l = must(listener::create(sd, "127.0.0.1", 0));
    auto accepted = std::async(std::launch::async, [&] {
        return must(must(l.get_request(10s)).accept({.progress_thread = true}));
    });
    auto client =
        connection::connect(cd, "127.0.0.1", l.port(),
                            {.sq_size = sq, .rq_size = 4, .max_sge = max_sge, .addons = {pool}});
    auto server = accepted.get();
    connected_pair p{sd, cd, std::move(l), std::move(server), must(std::move(client))};
    buffer target(1 << 16);
    auto tmr = must(memory_region::create(
        p.server_domain, target.span(),
        usage::write_destination | usage::read_source | usage::receive | usage::flush_target));
    auto dst = must(tmr.describe());
    return rig{std::move(target), std::move(p), std::move(tmr), dst, pool};
}

TEST_P(bounce, write_copy_frees_the_callers_memory_at_once_and_holds_the_buffer) {
    auto r = make_rig(GetParam(), 4);
    connection& c = *r.p.client;
    std::string text = "written from unregistered memory";
    REMORA_ASSERT_OK(remora::write_copy(c, r.dst, 100, bytes_of(text), {.context = &r}));
    EXPECT_EQ(r.pool.available(), 3u);  // held by the operation's slot
    text.assign(text.size(), 'x');      // the caller's memory is free already
    auto done = collect(c.cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok()) << done[0].status.message();
    EXPECT_EQ(done[0].context, &r);
    EXPECT_EQ(r.pool.available(), 4u);  // back once the completion is read
    // Make it visible (tcp completes a write once sent) and check the bytes.
    REMORA_ASSERT_OK(remora::flush(c, r.dst, 100, 32, {.type = flush_type::visibility}));
    ASSERT_EQ(collect(c.cq(), 1, true).size(), 1u);
    EXPECT_EQ(string_of(std::span(r.target.bytes).subspan(100, 32)),
              "written from unregistered memory");
}

TEST_P(bounce, send_copy_delivers_the_bytes) {
    auto r = make_rig(GetParam(), 2);
    REMORA_ASSERT_OK(r.p.server->recv(r.tmr, 0, 64));
    REMORA_ASSERT_OK(remora::send_copy(*r.p.client, bytes_of("hello through a bounce buffer")));
    auto sent = collect(r.p.client->cq(), 1, true);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_TRUE(sent[0].ok());
    auto got = collect(r.p.server->cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(string_of(std::span(r.target.bytes).subspan(0, got[0].bytes)),
              "hello through a bounce buffer");
    EXPECT_EQ(r.pool.available(), 2u);
}

// write_or_copy: up to max_sge segments go straight from their regions in one post (no buffer
// taken); past it their bytes go through one bounce buffer, in order.
TEST_P(bounce, write_or_copy_gathers_in_one_post_up_to_max_sge_and_bounces_past_it) {
    auto r = make_rig(GetParam(), 1, 16, 2);
    connection& c = *r.p.client;
    buffer local(256);
    for (std::size_t i = 0; i < 256; ++i) {
        local.bytes[i] = static_cast<std::byte>('a' + i % 26);
    }
    auto lmr = must(memory_region::create(r.p.client_domain, local.span(), usage::write_source));
    // Two segments, out of order in the region: one scatter-gather write ("klmno" "abc").
    const local_segment two[] = {{&lmr, 10, 5}, {&lmr, 0, 3}};
    REMORA_ASSERT_OK(remora::write_or_copy(c, r.dst, 300, two, {.context = &r}));
    EXPECT_EQ(r.pool.available(), 1u) << "a write within max_sge took a bounce buffer";
    auto done = collect(c.cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok()) << done[0].status.message();
    EXPECT_EQ(done[0].context, &r);
    // Three: past max_sge, copied into the pool's one buffer ("xyz" "de" "klmno").
    const local_segment three[] = {{&lmr, 23, 3}, {&lmr, 3, 2}, {&lmr, 10, 5}};
    EXPECT_ERRC(c.write(r.dst, 400, three), errc::too_large);  // what it spares the caller
    REMORA_ASSERT_OK(remora::write_or_copy(c, r.dst, 400, three, {.context = &r}));
    EXPECT_EQ(r.pool.available(), 0u) << "held by the operation until its completion is read";
    done = collect(c.cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok()) << done[0].status.message();
    EXPECT_EQ(r.pool.available(), 1u);
    REMORA_ASSERT_OK(remora::flush(c, r.dst, 300, 110, {.type = flush_type::visibility}));
    ASSERT_EQ(collect(c.cq(), 1, true).size(), 1u);
    EXPECT_EQ(string_of(std::span(r.target.bytes).subspan(300, 8)), "klmnoabc");
    EXPECT_EQ(string_of(std::span(r.target.bytes).subspan(400, 10)), "xyzdeklmno");
}

// Past max_sge every segment is checked before a buffer is taken; too many bytes for a buffer,
// or no pool at all, are refused the same way.
TEST_P(bounce, write_or_copy_refuses_bad_segments_past_max_sge_taking_nothing) {
    auto r = make_rig(GetParam(), 1, 16, 2);
    connection& c = *r.p.client;
    buffer local(1024);
    auto lmr = must(memory_region::create(r.p.client_domain, local.span(), usage::write_source));
    auto rmr = must(memory_region::create(r.p.client_domain, local.span(), usage::receive));
    local_segment three[] = {{&lmr, 0, 8}, {&lmr, 8, 8}, {&lmr, 1020, 8}};
    EXPECT_ERRC(remora::write_or_copy(c, r.dst, 0, three), errc::out_of_range);
    three[2] = {&rmr, 0, 8};
    EXPECT_ERRC(remora::write_or_copy(c, r.dst, 0, three), errc::access_denied);
    three[2] = {nullptr, 0, 8};
    EXPECT_ERRC(remora::write_or_copy(c, r.dst, 0, three), errc::invalid_argument);
    three[2] = {&lmr, 16, 500};  // 516 bytes: past the pool's 512-byte buffers
    EXPECT_ERRC(remora::write_or_copy(c, r.dst, 0, three), errc::too_large);
    EXPECT_EQ(r.pool.available(), 1u);
    EXPECT_EQ(c.in_flight(), 0u);
    // Without a buffer_pool: within max_sge it writes, past it bad_state.
    buffer mine(64);
    buffer theirs(64);  // outlives the connections: a write may land after its completion
    auto s = server_side::open(GetParam());
    auto plain = must(s.add({.sq_size = 8, .rq_size = 4, .max_sge = 2}));
    auto mmr = must(memory_region::create(s.dom, mine.span(), usage::write_source));
    auto tmr = must(memory_region::create(s.client_dom, theirs.span(), usage::write_destination));
    auto desc = must(tmr.describe());
    const local_segment within[] = {{&mmr, 0, 8}, {&mmr, 8, 8}};
    const local_segment past[] = {{&mmr, 0, 8}, {&mmr, 8, 8}, {&mmr, 16, 8}};
    EXPECT_ERRC(remora::write_or_copy(plain, desc, 0, past), errc::bad_state);
    REMORA_ASSERT_OK(remora::write_or_copy(plain, desc, 0, within));
    EXPECT_EQ(collect(plain.cq(), 1, true).size(), 1u);
    s.clients.clear();  // the target goes before its region
}

// All or nothing: with the pool dry, or the send queue full, the operation takes nothing.
TEST_P(bounce, an_operation_takes_its_buffer_and_entries_together_or_nothing) {
    {
        auto r = make_rig(GetParam(), 2, 16);
        connection& c = *r.p.client;
        REMORA_ASSERT_OK(remora::write_copy(c, r.dst, 0, bytes_of("one")));
        REMORA_ASSERT_OK(remora::write_copy(c, r.dst, 8, bytes_of("two")));
        EXPECT_ERRC(remora::write_copy(c, r.dst, 16, bytes_of("three")), errc::would_block);
        EXPECT_EQ(c.in_flight(), 2u);  // no queue entry taken for it
        ASSERT_EQ(collect(c.cq(), 2, true).size(), 2u);
        EXPECT_EQ(r.pool.available(), 2u);
        REMORA_ASSERT_OK(remora::write_copy(c, r.dst, 16, bytes_of("three")));
        ASSERT_EQ(collect(c.cq(), 1, true).size(), 1u);
    }
    {
        auto r = make_rig(GetParam(), 8, 2);
        connection& c = *r.p.client;
        REMORA_ASSERT_OK(remora::write_copy(c, r.dst, 0, bytes_of("one")));
        REMORA_ASSERT_OK(remora::write_copy(c, r.dst, 8, bytes_of("two")));
        EXPECT_ERRC(remora::write_copy(c, r.dst, 16, bytes_of("three")), errc::would_block);
        EXPECT_EQ(r.pool.available(), 6u);  // its buffer went back
        ASSERT_EQ(collect(c.cq(), 2, true).size(), 2u);
        EXPECT_EQ(r.pool.available(), 8u);
        // A failed check takes nothing either.
        std::string big(513, 'b');
        EXPECT_ERRC(remora::write_copy(c, r.dst, 0, bytes_of(big)), errc::too_large);
        EXPECT_ERRC(remora::write_copy(c, r.dst, r.dst.length(), bytes_of("x")),
                    errc::out_of_range);
        EXPECT_EQ(r.pool.available(), 8u);
        EXPECT_EQ(c.in_flight(), 0u);
    }
    auto p = must(connect_pair(GetParam()));
    EXPECT_ERRC(remora::send_copy(*p.client, bytes_of("x")), errc::bad_state);  // no pool
}

// A peer that dies with copies in flight: every buffer comes back through the operations'
// completions, read after the disconnect event and before the connection is destroyed (its
// destructor would return them whatever the completions did). What each provider reports:
// - tcp completes a write once the socket took it: those posted while the peer lived complete
//   successfully however it dies. It takes posts after the death (it has not noticed yet); one
//   the kernel takes before the peer's reset comes back completes successfully too, and once
//   one has failed every later one fails with errc::disconnected: their buffers come back
//   through those error completions.
// - sockets: a write in flight at the death completes or fails with errc::disconnected (it
//   varies from run to run); posts after the death are refused with errc::disconnected (taking
//   no buffer) once it has noticed, or taken and failed like tcp's until then.
TEST_P(bounce, peer_death_returns_every_buffer) {
    const bool tcp = GetParam() == "tcp";
    auto r = make_rig(GetParam(), 64, 64);
    connection& c = *r.p.client;
    const std::string data(256, 'd');
    auto ctx = [](int i) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(i + 1)); };
    constexpr int alive = 32;  // posted while the peer lives
    for (int i = 0; i < alive; ++i) {
        REMORA_ASSERT_OK(
            remora::write_copy(c, r.dst, i * 256, bytes_of(data), {.context = ctx(i)}));
    }
    EXPECT_EQ(r.pool.available(), 64u - alive);
    r.p.server.reset();  // the peer dies: its endpoint closes
    r.p.lst.reset();
    int dead = 0;  // posts taken after the death
    for (int i = alive; i < 64; ++i) {
        const std::size_t before = r.pool.available();
        auto w = remora::write_copy(c, r.dst, i * 256, bytes_of(data), {.context = ctx(i)});
        if (!w) {
            ASSERT_FALSE(tcp) << "tcp refused a post before it noticed the death: "
                              << w.error().what();
            EXPECT_ERRC(w, errc::disconnected);
            EXPECT_EQ(r.pool.available(), before) << "a refused post kept its buffer";
            break;
        }
        ++dead;
    }
    if (tcp) {
        EXPECT_EQ(dead, 64 - alive);
    }
    const int posted = alive + dead;
    EXPECT_EQ(r.pool.available(), 64u - posted);
    // The disconnect event comes (the peer shut its endpoint down) ...
    auto ev = c.next_event(10s);
    ASSERT_TRUE(ev.has_value()) << ev.error().what();
    EXPECT_EQ(*ev, conn_event::closed);
    // ... and every operation completes exactly once, giving its buffer back. sockets may add
    // an error of its own that belongs to no operation (op::unknown, no context,
    // errc::disconnected: the provider's report of the connection's failure); nothing else.
    std::vector<int> seen(64, 0);
    std::vector<bool> ok(64, false);
    int completed = 0;
    int unowned = 0;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (completed < posted && std::chrono::steady_clock::now() < deadline) {
        for (const completion& done :
             collect(c.cq(), static_cast<std::size_t>(posted - completed), true, 1s)) {
            if (done.context == nullptr) {
                EXPECT_FALSE(tcp) << "tcp reported a completion of no operation";
                EXPECT_EQ(done.op, op::unknown);
                EXPECT_EQ(done.status, errc::disconnected) << done.status.message();
                ++unowned;
                continue;
            }
            const auto i = static_cast<int>(reinterpret_cast<std::uintptr_t>(done.context)) - 1;
            ASSERT_TRUE(i >= 0 && i < posted) << "unexpected context " << done.context;
            ++seen[i];
            ++completed;
            EXPECT_EQ(done.op, op::write);
            ok[i] = done.ok();
            if (tcp && i < alive) {
                // Taken by the socket while the peer lived: tcp has completed it.
                EXPECT_TRUE(done.ok()) << "write " << i << ": " << done.status.message();
            } else if (!done.ok()) {
                EXPECT_EQ(done.status, errc::disconnected)
                    << "write " << i << ": " << done.status.message();
                // The same failure as a call's error: its code, and a message naming the op.
                const error e = done.error();
                EXPECT_EQ(e.code(), done.status);
                EXPECT_EQ(e.message(), "write failed") << e.what();
            } else {
                EXPECT_EQ(done.error().code(), std::error_code{});
            }
        }
    }
    ASSERT_EQ(completed, posted);
    EXPECT_LE(unowned, 1);
    for (int i = 0; i < posted; ++i) {
        EXPECT_EQ(seen[i], 1) << "write " << i;
        if (i > alive && ok[i]) {
            EXPECT_TRUE(ok[i - 1])
                << "write " << i << " succeeded after write " << i - 1 << " failed";
        }
    }
    EXPECT_EQ(c.in_flight(), 0u);
    EXPECT_EQ(r.pool.available(), 64u) << "buffers still held after every completion was read";
    // The connection is closed: a later copy is refused and takes no buffer.
    EXPECT_FALSE(c.is_open());
    EXPECT_ERRC(remora::write_copy(c, r.dst, 0, bytes_of(data)), errc::disconnected);
    EXPECT_EQ(r.pool.available(), 64u);
    r.p.client.reset();
    EXPECT_EQ(r.pool.available(), 64u);
}

INSTANTIATE_TEST_SUITE_P(providers, bounce, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

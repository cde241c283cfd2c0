// Pre-registered bounce buffers: write_copy and send_copy from unregistered memory, each
// operation's buffer held by its slot until completion, taken with its queue entries at once or
// not at all, and returned on every path. On tcp and sockets.
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

class bounce : public testing::TestWithParam<std::string> {};

TEST(buffer_pool, hands_out_each_buffer_once_and_takes_it_back) {
    auto dom = must(domain::open({.provider = "tcp"}));
    EXPECT_EQ(buffer_pool::create(dom, {.buffers = 0}).error(), errc::invalid_argument);
    EXPECT_EQ(buffer_pool::create(dom, {.buffer_size = 0}).error(), errc::invalid_argument);
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
    auto none = pool.try_get();
    ASSERT_FALSE(none.has_value());
    EXPECT_EQ(none.error(), errc::would_block);
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

rig make_rig(const std::string& provider, std::size_t buffers, std::uint32_t sq = 16) {
    // The pool is registered in the client's domain and given to its connection at connect.
    auto sd = must(domain::open({.provider = provider}));
    auto cd = must(domain::open({.provider = provider}));
    auto pool = must(buffer_pool::create(cd, {.buffers = buffers, .buffer_size = 512}));
    auto l = must(listener::create(sd, "127.0.0.1", 0));
    auto accepted = std::async(std::launch::async, [&] {
        return must(must(l.get_request(10s)).accept({.progress_thread = true}));
    });
    auto client = connection::connect(cd, "127.0.0.1", l.port(),
                                      {.sq_size = sq, .rq_size = 4, .bounce = pool});
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
    REMORA_ASSERT_OK(c.write_copy(r.dst, 100, bytes_of(text), {.context = &r}));
    EXPECT_EQ(r.pool.available(), 3u);  // held by the operation's slot
    text.assign(text.size(), 'x');      // the caller's memory is free already
    auto done = collect(c.cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok()) << done[0].status.message();
    EXPECT_EQ(done[0].context, &r);
    EXPECT_EQ(r.pool.available(), 4u);  // back once the completion is read
    // Make it visible (tcp completes a write once sent) and check the bytes.
    REMORA_ASSERT_OK(c.flush(r.dst, 100, 32, {.type = flush_type::visibility}));
    ASSERT_EQ(collect(c.cq(), 1, true).size(), 1u);
    EXPECT_EQ(string_of(std::span(r.target.bytes).subspan(100, 32)),
              "written from unregistered memory");
}

TEST_P(bounce, send_copy_delivers_the_bytes) {
    auto r = make_rig(GetParam(), 2);
    REMORA_ASSERT_OK(r.p.server->recv(r.tmr, 0, 64));
    REMORA_ASSERT_OK(r.p.client->send_copy(bytes_of("hello through a bounce buffer")));
    auto sent = collect(r.p.client->cq(), 1, true);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_TRUE(sent[0].ok());
    auto got = collect(r.p.server->cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(string_of(std::span(r.target.bytes).subspan(0, got[0].bytes)),
              "hello through a bounce buffer");
    EXPECT_EQ(r.pool.available(), 2u);
}

// All or nothing: with the pool dry, or the send queue full, the operation takes nothing.
TEST_P(bounce, an_operation_takes_its_buffer_and_entries_together_or_nothing) {
    {
        auto r = make_rig(GetParam(), 2, 16);
        connection& c = *r.p.client;
        REMORA_ASSERT_OK(c.write_copy(r.dst, 0, bytes_of("one")));
        REMORA_ASSERT_OK(c.write_copy(r.dst, 8, bytes_of("two")));
        auto dry = c.write_copy(r.dst, 16, bytes_of("three"));
        ASSERT_FALSE(dry.has_value());
        EXPECT_EQ(dry.error(), errc::would_block);
        EXPECT_EQ(c.in_flight(), 2u);  // no queue entry taken for it
        ASSERT_EQ(collect(c.cq(), 2, true).size(), 2u);
        EXPECT_EQ(r.pool.available(), 2u);
        REMORA_ASSERT_OK(c.write_copy(r.dst, 16, bytes_of("three")));
        ASSERT_EQ(collect(c.cq(), 1, true).size(), 1u);
    }
    {
        auto r = make_rig(GetParam(), 8, 2);
        connection& c = *r.p.client;
        REMORA_ASSERT_OK(c.write_copy(r.dst, 0, bytes_of("one")));
        REMORA_ASSERT_OK(c.write_copy(r.dst, 8, bytes_of("two")));
        auto full = c.write_copy(r.dst, 16, bytes_of("three"));
        ASSERT_FALSE(full.has_value());
        EXPECT_EQ(full.error(), errc::would_block);
        EXPECT_EQ(r.pool.available(), 6u);  // its buffer went back
        ASSERT_EQ(collect(c.cq(), 2, true).size(), 2u);
        EXPECT_EQ(r.pool.available(), 8u);
        // A failed check takes nothing either.
        std::string big(513, 'b');
        EXPECT_EQ(c.write_copy(r.dst, 0, bytes_of(big)).error(), errc::too_large);
        EXPECT_EQ(c.write_copy(r.dst, r.dst.length(), bytes_of("x")).error(), errc::out_of_range);
        EXPECT_EQ(r.pool.available(), 8u);
        EXPECT_EQ(c.in_flight(), 0u);
    }
    auto p = must(connect_pair(GetParam()));
    EXPECT_EQ(p.client->send_copy(bytes_of("x")).error(), errc::bad_state);  // no pool
}

// A full pool's worth of copies in flight over a dying peer: every buffer comes back.
TEST_P(bounce, peer_death_returns_every_buffer) {
    auto r = make_rig(GetParam(), 64, 64);
    connection& c = *r.p.client;
    int posted = 0;
    std::string data(256, 'd');
    completion buf[16];
    for (int i = 0; i < 64; ++i) {
        if (c.write_copy(r.dst, (i % 64) * 256, bytes_of(data))) {
            ++posted;
        }
    }
    EXPECT_EQ(posted, 64);  // every buffer and entry in flight
    EXPECT_EQ(r.pool.available(), 0u);
    r.p.server.reset();
    r.p.lst.reset();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (c.in_flight() != 0 && std::chrono::steady_clock::now() < deadline) {
        (void)c.write_copy(r.dst, 0, bytes_of(data));
        (void)c.cq().poll(buf);
        std::this_thread::sleep_for(1ms);
    }
    r.p.client.reset();
    EXPECT_EQ(r.pool.available(), 64u);
}

INSTANTIATE_TEST_SUITE_P(providers, bounce, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

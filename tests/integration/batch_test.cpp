// SPDX-License-Identifier: BSD-3-Clause
// Bursts of posts with op_options::more (FI_MORE): every operation of a burst completes, a burst
// left open completes too (connection.hpp: the 1.17 providers defer nothing on FI_MORE), a failed
// post with `more` changes nothing, on the connected and the RDM providers.
#include "support.hpp"

namespace remora::test {
namespace {

class batch : public testing::TestWithParam<std::string> {};

constexpr std::size_t burst = 16;
constexpr std::size_t slot = 4096;

// The buffers come first, so they are destroyed last: the target's progress thread may still be
// writing into them until the connections are gone.
struct burst_pair {
    explicit burst_pair(connected_pair q) : p(std::move(q)) {}
    buffer target{burst * slot}, local{2 * burst * slot};
    connected_pair p;
    std::optional<memory_region> tmr, lmr;
    std::optional<remote_region> desc;
};

// The target application never calls in: its progress thread serves the bursts.
std::unique_ptr<burst_pair> make_pair(const std::string& provider) {
    auto b = std::make_unique<burst_pair>(must(
        connect_pair(provider, {.progress_thread = true}, {.sq_size = 2 * burst, .rq_size = 16})));
    b->tmr.emplace(must(memory_region::create(b->p.server_domain, b->target.span(),
                                              usage::write_destination | usage::read_source)));
    b->lmr.emplace(must(memory_region::create(b->p.client_domain, b->local.span(),
                                              usage::write_source | usage::read_destination)));
    b->desc.emplace(must(b->tmr->describe()));
    for (std::size_t i = 0; i < burst * slot; ++i)
        b->local.bytes[i] = static_cast<std::byte>((i * 13 + i / slot) & 0xff);
    return b;
}

// Posts, retrying while an RDM provider sets up its path (would_block, as its message says).
template <class Post>
result<void> post_retrying(Post&& post) {
    const auto limit = std::chrono::steady_clock::now() + 10s;
    auto r = post();
    while (!r && r.error() == errc::would_block && std::chrono::steady_clock::now() < limit)
        r = post();
    return r;
}

// What the target holds in [0, len), read back into the client's second half (a write's
// completion on tcp means sent, not landed; a read after it on the connection sees it).
void expect_target_holds(burst_pair& b, std::size_t len) {
    auto& c = *b.p.client;
    std::memset(b.local.bytes.data() + burst * slot, 0, len);
    REMORA_ASSERT_OK(post_retrying([&] { return c.read(*b.lmr, burst * slot, *b.desc, 0, len); }));
    auto r = collect(c.cq(), 1, true, 10s);
    ASSERT_EQ(r.size(), 1u);
    ASSERT_TRUE(r[0].ok()) << r[0].status.message();
    EXPECT_EQ(0, std::memcmp(b.local.bytes.data() + burst * slot, b.local.bytes.data(), len));
}

// A burst of 16 writes of 4 KiB, `more` on all but the last, then a burst of 16 reads back:
// 32 completions, each write's bytes at the target and each read's bytes back at the client.
TEST_P(batch, a_burst_completes_every_operation) {
    auto b = make_pair(GetParam());
    auto& c = *b->p.client;
    for (std::size_t k = 0; k < burst; ++k) {
        const op_options o{.context = reinterpret_cast<void*>(k + 1), .more = k + 1 < burst};
        REMORA_ASSERT_OK(
            post_retrying([&] { return c.write(*b->desc, k * slot, *b->lmr, k * slot, slot, o); }));
    }
    auto w = collect(c.cq(), burst, true, 10s);
    ASSERT_EQ(w.size(), burst) << "every write of the burst completes";
    for (const auto& d : w)
        ASSERT_TRUE(d.ok()) << d.status.message();
    for (std::size_t k = 0; k < burst; ++k) {
        const op_options o{.more = k + 1 < burst};
        REMORA_ASSERT_OK(post_retrying(
            [&] { return c.read(*b->lmr, (burst + k) * slot, *b->desc, k * slot, slot, o); }));
    }
    auto r = collect(c.cq(), burst, true, 10s);
    ASSERT_EQ(r.size(), burst) << "every read of the burst completes";
    for (const auto& d : r)
        ASSERT_TRUE(d.ok()) << d.status.message();
    EXPECT_EQ(
        0, std::memcmp(b->local.bytes.data() + burst * slot, b->local.bytes.data(), burst * slot));
}

// A burst left open: all 16 writes carry `more` and nothing follows them. They complete as any
// post (what connection.hpp says of these providers); a post without `more` afterwards too.
TEST_P(batch, a_burst_left_open_still_completes) {
    auto b = make_pair(GetParam());
    auto& c = *b->p.client;
    for (std::size_t k = 0; k < burst; ++k) {
        REMORA_ASSERT_OK(post_retrying(
            [&] { return c.write(*b->desc, k * slot, *b->lmr, k * slot, slot, {.more = true}); }));
    }
    auto w = collect(c.cq(), burst, true, 10s);
    ASSERT_EQ(w.size(), burst) << "an open burst's writes complete without a closing post";
    for (const auto& d : w)
        ASSERT_TRUE(d.ok()) << d.status.message();
    expect_target_holds(*b, burst * slot);
    REMORA_ASSERT_OK(post_retrying([&] { return c.write(*b->desc, 0, *b->lmr, 0, 8); }));
    auto last = collect(c.cq(), 1, true, 10s);
    ASSERT_EQ(last.size(), 1u);
    EXPECT_TRUE(last[0].ok()) << last[0].status.message();
}

// A post with `more` that is refused posts nothing and takes nothing: the burst goes on.
TEST_P(batch, a_refused_post_in_a_burst_changes_nothing) {
    auto b = make_pair(GetParam());
    auto& c = *b->p.client;
    REMORA_ASSERT_OK(
        post_retrying([&] { return c.write(*b->desc, 0, *b->lmr, 0, slot, {.more = true}); }));
    EXPECT_ERRC(c.write(*b->desc, burst * slot, *b->lmr, 0, slot, {.more = true}),
                errc::out_of_range);
    EXPECT_EQ(c.in_flight(), 1u);
    REMORA_ASSERT_OK(post_retrying([&] { return c.write(*b->desc, slot, *b->lmr, slot, slot); }));
    auto w = collect(c.cq(), 2, true, 10s);
    ASSERT_EQ(w.size(), 2u);
    for (const auto& d : w)
        EXPECT_TRUE(d.ok()) << d.status.message();
    expect_target_holds(*b, 2 * slot);
}

std::vector<std::string> all_providers() {
    auto v = providers();
    for (auto& r : rdm_providers())
        v.push_back(r);
    return v;
}

INSTANTIATE_TEST_SUITE_P(providers, batch, testing::ValuesIn(all_providers()), provider_name);

}  // namespace
}  // namespace remora::test

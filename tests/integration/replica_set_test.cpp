// SPDX-License-Identifier: BSD-3-Clause
// The replica set on every provider: a write completes once the quorum made it durable (or
// visible) and lands on every live replica; a member that fails or is dropped leaves the set
// and the set keeps completing while the quorum stays; with fewer, writes fail and are refused;
// a rejoining member is caught up (the ranges it missed, or its whole range) while writes go
// on, and then holds what the others hold.
#include <atomic>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <remora/replica_set.hpp>

#include "replica_rig.hpp"

using namespace remora;
using namespace remora::test;

namespace {

constexpr std::size_t region_size = replica_rig_region;

std::vector<std::string> all_providers() {
    auto all = providers();
    for (auto& p : rdm_providers())
        all.push_back(p);
    return all;
}

// What a completion says, for a failure's message.
std::string describe(const replica_completion& c) {
    std::string s = c.ok() ? "ok" : c.status.message();
    s += " outcomes:";
    for (std::uint32_t m = 0; m < c.replicas; ++m)
        s += " " + std::to_string(static_cast<int>(c.outcome[m]));
    return s;
}

// The next completion polled from `set` (a failed one if none comes in 10 s).
replica_completion next(replica_set& set) {
    replica_completion c;
    if (!set.wait(10s) || set.poll({&c, 1}) != 1)
        c.status = make_error_code(errc::timed_out);
    return c;
}

class replica_set_test : public testing::TestWithParam<std::string> {
  protected:
    // The client's source memory, and what every replica should hold.
    buffer src{region_size};
    std::vector<std::byte> expected = std::vector<std::byte>(region_size);
    std::optional<memory_region> src_mr;

    void SetUp() override {
        // sockets' own thread may write to a pipe of an endpoint the set just closed
        // (docs/providers.md): the broken pipe must not end the test.
        ::signal(SIGPIPE, SIG_IGN);
        for (std::size_t i = 0; i < region_size; ++i)
            src.bytes[i] = static_cast<std::byte>((i * 7 + 3) & 0xff);
    }
    void register_src(rig& g) {
        src_mr = must(memory_region::create(*g.client_dom, src.span(), usage::write_source));
    }
    // Writes [off, off + len) from the same offset of `src` and waits for its completion.
    replica_completion write_and_wait(replica_set& set, std::uint64_t off, std::size_t len) {
        auto r = set.write(off, *src_mr, off, len,
                           {.park_until = std::chrono::steady_clock::now() + 10s});
        if (!r) {
            replica_completion c;
            c.status = r.error().code();
            return c;
        }
        auto c = next(set);
        if (c.ok())
            std::memcpy(expected.data() + off, src.bytes.data() + off, len);
        return c;
    }
    // Whether target i holds `expected`.
    bool holds_expected(const rig& g, std::size_t i) {
        auto b = g.targets[i]->bytes();
        return std::memcmp(b.data(), expected.data(), region_size) == 0;
    }
};

TEST_P(replica_set_test, a_write_completes_at_the_quorum_and_lands_on_every_replica) {
    auto g = rig::make(GetParam(), 3);
    register_src(g);
    auto set = must(replica_set::create(g.members, {.quorum = 2}));
    EXPECT_EQ(set.size(), 3u);
    EXPECT_EQ(set.quorum(), 2u);
    EXPECT_EQ(set.range(), region_size);
    for (std::uint64_t off = 0; off < region_size; off += 16384) {
        auto c = write_and_wait(set, off, 4096 + off / 64);
        ASSERT_TRUE(c.ok()) << c.status.message();
        EXPECT_EQ(c.offset, off);
        EXPECT_GE(c.durable, 2u);
        EXPECT_EQ(c.replicas, 3u);
        for (std::uint32_t m = 0; m < 3; ++m)
            EXPECT_TRUE(c.outcome[m] == replica_outcome::durable ||
                        c.outcome[m] == replica_outcome::pending);
    }
    REMORA_ASSERT_OK(set.drain(10s));
    EXPECT_EQ(set.live(), 3u);
    for (std::size_t i = 0; i < 3; ++i)
        EXPECT_TRUE(holds_expected(g, i)) << "target " << i;
}

TEST_P(replica_set_test, writes_in_flight_complete_through_callbacks) {
    auto g = rig::make(GetParam(), 3);
    register_src(g);
    auto set = must(replica_set::create(g.members, {.quorum = 2, .depth = 8}));
    static std::atomic<int> ok, bad;
    ok = 0;
    bad = 0;
    auto cb = [](const replica_completion& c) { (c.ok() ? ok : bad).fetch_add(1); };
    constexpr int writes = 200;
    for (int i = 0; i < writes; ++i) {
        const std::uint64_t off = static_cast<std::uint64_t>(i % 64) * 4096;
        REMORA_ASSERT_OK(
            set.write(off, *src_mr, off, 4096,
                      {.callback = cb, .park_until = std::chrono::steady_clock::now() + 10s}));
    }
    REMORA_ASSERT_OK(set.drain(10s));
    EXPECT_EQ(ok.load(), writes);
    EXPECT_EQ(bad.load(), 0);
    std::memcpy(expected.data(), src.bytes.data(), region_size);
    for (std::size_t i = 0; i < 3; ++i)
        EXPECT_TRUE(holds_expected(g, i)) << "target " << i;
}

TEST_P(replica_set_test, durable_on_persistent_regions_through_the_targets_service) {
    const auto dir = std::filesystem::path(testing::TempDir()) /
                     ("replica_set_" + std::to_string(getpid()) + "_" +
                      std::to_string(std::hash<std::string>{}(GetParam())));
    std::filesystem::create_directories(dir);
    {
        auto g = rig::make(GetParam(), 3, dir, 4);
        register_src(g);
        auto set = must(replica_set::create(g.members, {.quorum = 2, .depth = 4}));
        for (std::uint64_t off = 0; off < 8 * 4096; off += 4096) {
            auto c = write_and_wait(set, off, 4096);
            ASSERT_TRUE(c.ok()) << describe(c);
        }
        REMORA_ASSERT_OK(set.drain(10s));
        for (std::size_t i = 0; i < 3; ++i)
            EXPECT_TRUE(holds_expected(g, i)) << "target " << i;
    }
    std::filesystem::remove_all(dir);
}

TEST_P(replica_set_test, a_failed_member_is_dropped_once_and_the_quorum_goes_on) {
    auto g = rig::make(GetParam(), 3);
    register_src(g);
    event_log log;
    auto set = must(replica_set::create(
        g.members, {.quorum = 2, .on_event = &event_log::on, .event_context = &log}));
    ASSERT_TRUE(write_and_wait(set, 0, 4096).ok());
    REMORA_ASSERT_OK(set.drain(10s));  // member 1's flush too
    // Member 1's connection ends under the set (as a link that fails: posts on it fail).
    REMORA_ASSERT_OK(g.clients[1].close());
    auto c = write_and_wait(set, 4096, 4096);
    ASSERT_TRUE(c.ok()) << c.status.message();
    EXPECT_EQ(c.outcome[1], replica_outcome::failed);
    EXPECT_EQ(c.outcome[0], replica_outcome::durable);
    EXPECT_EQ(c.outcome[2], replica_outcome::durable);
    EXPECT_EQ(set.state(1), replica_state::dropped);
    EXPECT_EQ(set.live(), 2u);
    for (std::uint64_t off = 8192; off < 65536; off += 4096)
        ASSERT_TRUE(write_and_wait(set, off, 4096).ok());
    EXPECT_EQ(log.count(replica_event_kind::dropped, 1), 1u);
    EXPECT_EQ(log.count(replica_event_kind::quorum_lost, 1), 0u);
    EXPECT_EQ(set.missing(1), 65536u - 4096u);
    REMORA_ASSERT_OK(set.drain(10s));
    EXPECT_TRUE(holds_expected(g, 0));
    EXPECT_TRUE(holds_expected(g, 2));
    EXPECT_FALSE(holds_expected(g, 1));
}

TEST_P(replica_set_test, fewer_live_than_the_quorum_fails_what_cannot_reach_it_and_refuses_more) {
    auto g = rig::make(GetParam(), 3);
    register_src(g);
    event_log log;
    auto set = must(replica_set::create(
        g.members, {.on_event = &event_log::on, .event_context = &log}));  // quorum: all
    ASSERT_TRUE(write_and_wait(set, 0, 4096).ok());
    REMORA_ASSERT_OK(set.drain(10s));
    REMORA_ASSERT_OK(g.clients[2].close());
    auto c = write_and_wait(set, 4096, 4096);
    EXPECT_FALSE(c.ok());
    EXPECT_EQ(c.outcome[2], replica_outcome::failed);
    EXPECT_EQ(log.count(replica_event_kind::quorum_lost, 2), 1u);
    EXPECT_ERRC(set.write(8192, *src_mr, 8192, 4096), errc::bad_state);
    REMORA_ASSERT_OK(set.drain(10s));
    EXPECT_EQ(log.count(replica_event_kind::dropped, 2), 1u);
}

TEST_P(replica_set_test, a_rejoining_member_catches_up_while_writes_go_on) {
    auto g = rig::make(GetParam(), 3);
    register_src(g);
    event_log log;
    auto set = must(replica_set::create(
        g.members,
        {.quorum = 2, .copy_chunk = 16384, .on_event = &event_log::on, .event_context = &log}));
    ASSERT_TRUE(write_and_wait(set, 0, 65536).ok());
    // Nothing in flight when the set closes its connection: over shm in one process, a peer
    // answering a flush's read into a closed endpoint crashes libfabric (docs/rdm-peers.md).
    REMORA_ASSERT_OK(set.drain(10s));
    REMORA_ASSERT_OK(set.drop(2));
    EXPECT_ERRC(set.drop(2), errc::bad_state);
    // Writes it misses, then a new connection to the same target.
    for (std::uint64_t off = 0; off < region_size; off += 24576)
        ASSERT_TRUE(write_and_wait(set, off, 8192).ok());
    EXPECT_GT(set.missing(2), 0u);
    connection* again = must(g.connect(2));
    EXPECT_ERRC(set.rejoin(0, *again, g.targets[2]->desc), errc::bad_state);  // live
    REMORA_ASSERT_OK(set.rejoin(2, *again, g.targets[2]->desc));
    // Writes go on while it catches up, some into ranges being copied.
    std::uint64_t off = 0;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (set.state(2) == replica_state::catching_up &&
           std::chrono::steady_clock::now() < deadline) {
        off = (off + 12288) % (region_size - 8192);
        auto c = write_and_wait(set, off, 8192);
        ASSERT_TRUE(c.ok()) << describe(c);
    }
    const bool caught_up = set.state(2) == replica_state::live;
    ASSERT_TRUE(caught_up) << "missing " << set.missing(2);
    EXPECT_EQ(log.count(replica_event_kind::rejoined, 2), 1u);
    EXPECT_EQ(set.live(), 3u);
    EXPECT_EQ(set.missing(2), 0u);
    ASSERT_TRUE(write_and_wait(set, 0, 4096).ok());
    REMORA_ASSERT_OK(set.drain(10s));
    for (std::size_t i = 0; i < 3; ++i)
        EXPECT_TRUE(holds_expected(g, i)) << "target " << i;
}

// Counts a set's completions from its callbacks.
struct tally {
    std::atomic<int> ok{0}, failed{0};
    static void on(const replica_completion& c) {
        auto* t = static_cast<tally*>(c.context);
        (c.ok() ? t->ok : t->failed).fetch_add(1);
    }
};

TEST_P(replica_set_test, a_member_dropped_with_writes_in_flight_rejoins_with_every_byte) {
    if (GetParam() == "rdm:shm")
        GTEST_SKIP() << "shm in one process: closing a peer with an answer in flight to it "
                        "crashes libfabric (docs/rdm-peers.md)";
    const auto dir = std::filesystem::path(testing::TempDir()) /
                     ("replica_inflight_" + std::to_string(getpid()) + "_" +
                      std::to_string(std::hash<std::string>{}(GetParam())));
    std::filesystem::create_directories(dir);
    {
        auto g = rig::make(GetParam(), 3, dir, 8);  // persistent regions, GPSPM
        register_src(g);
        event_log log;
        tally t;
        auto set = must(replica_set::create(g.members, {.quorum = 2,
                                                        .depth = 8,
                                                        .copy_chunk = 32768,
                                                        .on_event = &event_log::on,
                                                        .event_context = &log}));
        // Writes in flight from callbacks while member 1 is dropped among them, then more while it
        // catches up; each write takes its own range of src, written once.
        constexpr std::uint64_t piece = 4096;
        constexpr int pieces = static_cast<int>(region_size / piece);
        auto post = [&](int i) {
            const std::uint64_t off = static_cast<std::uint64_t>(i) * piece;
            return set.write(off, *src_mr, off, piece,
                             {.context = &t,
                              .callback = &tally::on,
                              .park_until = std::chrono::steady_clock::now() + 10s});
        };
        for (int i = 0; i < pieces / 2; ++i) {
            REMORA_ASSERT_OK(post(i));
            if (i == pieces / 4)
                REMORA_ASSERT_OK(set.drop(1));
        }
        REMORA_ASSERT_OK(set.drain(10s));
        EXPECT_EQ(set.state(1), replica_state::dropped);
        EXPECT_GT(set.missing(1), 0u);
        connection* again = must(g.connect(1));
        REMORA_ASSERT_OK(set.rejoin(1, *again, g.targets[1]->desc));
        EXPECT_ERRC(set.rejoin(1, *again, g.targets[1]->desc), errc::bad_state);  // catching up
        for (int i = pieces / 2; i < pieces; ++i)
            REMORA_ASSERT_OK(post(i));
        ASSERT_TRUE(eventually([&] { return set.state(1) == replica_state::live; }, 20s))
            << "missing " << set.missing(1);
        REMORA_ASSERT_OK(set.drain(10s));
        EXPECT_EQ(t.ok.load(), pieces);
        EXPECT_EQ(t.failed.load(), 0);
        EXPECT_EQ(log.count(replica_event_kind::dropped, 1), 1u);
        EXPECT_EQ(log.count(replica_event_kind::rejoined, 1), 1u);
        std::memcpy(expected.data(), src.bytes.data(), region_size);
        for (std::size_t i = 0; i < 3; ++i)
            EXPECT_TRUE(holds_expected(g, i)) << "target " << i;
    }
    std::filesystem::remove_all(dir);
}

TEST_P(replica_set_test, a_member_that_falls_behind_is_dropped_at_the_limit) {
    const auto dir = std::filesystem::path(testing::TempDir()) /
                     ("replica_behind_" + std::to_string(getpid()) + "_" +
                      std::to_string(std::hash<std::string>{}(GetParam())));
    std::filesystem::create_directories(dir);
    {
        // Target 2 accepts GPSPM flushes but never answers them: they wait.
        auto g = rig::make(GetParam(), 3, dir, 4, 2);
        register_src(g);
        event_log log;
        auto set = must(replica_set::create(g.members, {.quorum = 2,
                                                        .depth = 4,
                                                        .behind_limit = 1500ms,
                                                        .on_event = &event_log::on,
                                                        .event_context = &log}));
        const auto t0 = std::chrono::steady_clock::now();
        auto c = write_and_wait(set, 0, 4096);
        ASSERT_TRUE(c.ok()) << describe(c);
        ASSERT_TRUE(eventually([&] { return set.state(2) == replica_state::dropped; }, 10s));
        const auto took = std::chrono::steady_clock::now() - t0;
        EXPECT_GE(took, 1500ms);
        // The event is delivered once the set's lock is released, after the state changed.
        EXPECT_TRUE(eventually([&] { return log.count(replica_event_kind::dropped, 2) == 1; }));
        {
            std::lock_guard lock(log.mu);
            for (const auto& e : log.events) {
                if (e.kind == replica_event_kind::dropped) {
                    EXPECT_EQ(e.status, make_error_code(errc::timed_out));
                }
            }
        }
        REMORA_ASSERT_OK(set.drain(10s));
        EXPECT_EQ(set.live(), 2u);
        ASSERT_TRUE(write_and_wait(set, 4096, 4096).ok());
    }
    std::filesystem::remove_all(dir);
}

TEST_P(replica_set_test, a_member_in_another_targets_place_gets_the_whole_range) {
    auto g = rig::make(GetParam(), 3);
    register_src(g);
    auto set = must(replica_set::create(g.members, {.quorum = 2, .copy_chunk = 65536}));
    for (std::uint64_t off = 0; off < region_size; off += 32768)
        ASSERT_TRUE(write_and_wait(set, off, 16384).ok());
    REMORA_ASSERT_OK(set.drain(10s));  // as above
    REMORA_ASSERT_OK(set.drop(1));
    // The target lost its memory: a fresh (zeroed) region in its place, the whole range copied.
    ASSERT_TRUE(eventually([&] { return set.pending(1) == 0; }));
    buffer fresh(region_size);
    auto fresh_mr = must(
        memory_region::create(*g.targets[1]->dom, fresh.span(),
                              usage::write_destination | usage::read_source | usage::flush_target));
    connection* again = must(g.connect(1));
    REMORA_ASSERT_OK(
        set.rejoin(1, *again, must(fresh_mr.describe(0, region_size)), {.whole = true}));
    ASSERT_TRUE(eventually([&] { return set.state(1) == replica_state::live; }, 20s));
    REMORA_ASSERT_OK(set.drain(10s));
    EXPECT_EQ(std::memcmp(fresh.bytes.data(), expected.data(), region_size), 0);
}

TEST_P(replica_set_test, a_full_set_refuses_or_parks_and_bad_input_changes_nothing) {
    auto g = rig::make(GetParam(), 2);
    register_src(g);
    auto set = must(replica_set::create(g.members, {.quorum = 1, .depth = 2}));
    // Two completions not yet polled hold the set's depth.
    REMORA_ASSERT_OK(set.write(0, *src_mr, 0, 4096));
    REMORA_ASSERT_OK(set.write(4096, *src_mr, 4096, 4096));
    REMORA_ASSERT_OK(set.drain(10s));
    EXPECT_ERRC(set.write(8192, *src_mr, 8192, 4096), errc::would_block);
    EXPECT_ERRC(set.write(8192, *src_mr, 8192, 4096,
                          {.park_until = std::chrono::steady_clock::now() + 50ms}),
                errc::timed_out);
    replica_completion got[2];
    EXPECT_EQ(set.poll(got), 2u);
    EXPECT_TRUE(got[0].ok() && got[1].ok());
    EXPECT_EQ(got[0].offset, 0u);
    EXPECT_EQ(got[1].offset, 4096u);
    // Bad input: refused, nothing posted.
    EXPECT_ERRC(set.write(0, *src_mr, 0, 0), errc::invalid_argument);
    EXPECT_ERRC(set.write(region_size - 10, *src_mr, 0, 4096), errc::out_of_range);
    EXPECT_ERRC(set.write(0, *src_mr, region_size - 10, 4096), errc::out_of_range);
    buffer other(4096);
    auto other_dom =
        must(domain::open({.provider = g.rdm ? GetParam().substr(4) : GetParam(),
                           .endpoint = g.rdm ? endpoint_type::rdm : endpoint_type::msg}));
    auto foreign = must(memory_region::create(other_dom, other.span(), usage::write_source));
    EXPECT_ERRC(set.write(0, foreign, 0, 4096), errc::invalid_argument);
    EXPECT_EQ(set.in_flight(), 0u);
    EXPECT_EQ(set.live(), 2u);
    EXPECT_EQ(set.pending(0), 0u);
    ASSERT_TRUE(write_and_wait(set, 0, 4096).ok());
}

TEST_P(replica_set_test, forming_a_set_checks_its_members) {
    auto g = rig::make(GetParam(), 2);
    EXPECT_ERRC(replica_set::create({}), errc::invalid_argument);
    EXPECT_ERRC(replica_set::create(g.members, {.quorum = 3}), errc::invalid_argument);
    EXPECT_ERRC(replica_set::create(g.members, {.depth = 0}), errc::invalid_argument);
    EXPECT_ERRC(replica_set::create(g.members, {.depth = 64}), errc::too_large);  // sq_size 64
    std::vector<replica> bad = g.members;
    bad[1].conn = nullptr;
    EXPECT_ERRC(replica_set::create(bad), errc::invalid_argument);
    bad = g.members;
    auto read_only = must(
        memory_region::create(*g.targets[1]->dom, g.targets[1]->mem.span(), usage::read_source));
    bad[1].region = must(read_only.describe(0, region_size));
    EXPECT_ERRC(replica_set::create(bad), errc::invalid_argument);
    // Members of two client domains.
    auto other = rig::make(GetParam(), 1);
    bad = g.members;
    bad[1] = other.members[0];
    EXPECT_ERRC(replica_set::create(bad), errc::invalid_argument);
    EXPECT_TRUE(replica_set::create(g.members, {.quorum = 1, .depth = 32}).has_value());
}

INSTANTIATE_TEST_SUITE_P(providers, replica_set_test, testing::ValuesIn(all_providers()),
                         provider_name);

}  // namespace

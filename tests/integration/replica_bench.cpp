// SPDX-License-Identifier: BSD-3-Clause
// What a replica set costs, printed, not asserted as timings: 4 KiB durable writes (write +
// GPSPM flush to persistent regions, files in /dev/shm so that the figures are the network
// path's and not a disk's) to three loopback targets, one at a time and 16 in flight, on:
//   solo      one connection, its CQ polled by the writing thread (the plainest durable write);
//   solo_cb   one connection read by the library's progress thread, a callback per operation
//             (what the set's members do);
//   q2of3     a replica set, quorum 2 of 3;
//   q3of3     a replica set, quorum 3 of 3.
// The configurations run in turns (solo, solo_cb, q2of3, q3of3, solo, ...) so that the machine's
// noise falls on all of them; ratios are to solo and solo_cb of the same run. hand2of3 is the
// set's work done by hand (a write and a flush on each member, waiting for 2 flushes and the 3
// writes): the set's own cost is q2of3 against it. Asserted: every
// write completes successfully. REMORA_BENCH_SECONDS sets the time of each (default 0.5, in 5
// turns), REMORA_BENCH_PROVIDER the provider (default tcp).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "replica_rig.hpp"

using namespace remora;
using namespace remora::test;

namespace {

using clk = std::chrono::steady_clock;
constexpr std::size_t record = 4096;
constexpr std::uint32_t depth = 16;
constexpr int fail_mark = 1 << 24;  // added to a count per failed completion

double env_seconds() {
    const char* s = std::getenv("REMORA_BENCH_SECONDS");
    return s != nullptr ? std::max(0.05, std::atof(s)) : 0.5;
}

struct figures {
    std::vector<double> lat_us;
    std::uint64_t ops = 0;
    double seconds = 0;
    double p(double q) {
        if (lat_us.empty())
            return 0;
        std::sort(lat_us.begin(), lat_us.end());
        return lat_us[std::min(lat_us.size() - 1, static_cast<std::size_t>(q * lat_us.size()))];
    }
};

// Completions counted, and the waiting thread woken (a futex: it sleeps rather than spin against
// the progress threads on a small machine). A flush counts 1, a write 0 (the pair is one durable
// write), a failure fail_mark.
void set_flag(const completion& c) {
    auto* n = static_cast<std::atomic<int>*>(c.context);
    n->fetch_add(!c.ok() ? fail_mark : c.op == op::flush ? 1 : 0);
    n->notify_all();
}
void set_done(const replica_completion& c) {
    auto* n = static_cast<std::atomic<int>*>(c.context);
    n->fetch_add(c.ok() ? 1 : fail_mark);
    n->notify_all();
}
// A set's events: none is expected on loopback.
void on_event(const replica_event& e) {
    std::fprintf(stderr, "replica_bench: member %u %s: %s\n", e.index, to_string(e.kind),
                 e.status.message().c_str());
    static_cast<std::atomic<int>*>(e.context)->fetch_add(1);
}

// hand2of3's count: a flush adds 1, a write 1 << 16 (the low byte is flushes, bits 16+ writes;
// a failure, 256, leaves both short).
void hand_count(const completion& c) {
    auto* n = static_cast<std::atomic<int>*>(c.context);
    n->fetch_add(!c.ok() ? 256 : c.op == op::flush ? 1 : 1 << 16);
    n->notify_all();
}

// Sleeps until `n` holds at least `want`.
void wait_for_count(std::atomic<int>& n, int want) {
    for (int v = n.load(); v < want; v = n.load())
        n.wait(v);
}

TEST(replica_bench, durable_4k_writes_one_connection_and_quorums) {
    const char* env_prov = std::getenv("REMORA_BENCH_PROVIDER");
    const std::string provider = env_prov != nullptr ? env_prov : "tcp";
    const double seconds = env_seconds();
    const std::filesystem::path dir =
        std::filesystem::exists("/dev/shm")
            ? std::filesystem::path("/dev/shm") /
                  ("remora-replica-bench-" + std::to_string(getpid()))
            : std::filesystem::path(testing::TempDir()) /
                  ("remora-replica-bench-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    buffer src(record * depth);
    {
        auto g = rig::make(provider, 3, dir, depth);
        auto smr = must(memory_region::create(*g.client_dom, src.span(), usage::write_source));
        connection* solo = must(g.connect(0, false));
        connection& solo_cb = *must(g.connect(0, true));  // apart from the sets' members
        const remote_region& d0 = g.targets[0]->desc;

        const char* names[] = {"solo", "solo_cb", "q2of3", "q3of3", "hand2of3"};
        std::atomic<int> events{0};
        figures lat[5], bw[5];
        // hand2of3: the fan-out by hand, without a set: a write and a flush on each member's
        // connection, done once 2 flushes and all 3 writes came back (what the set waits for).
        auto hand = std::make_unique<std::array<std::atomic<int>, 1024>>();
        std::size_t hand_next = 0;
        // One durable write at a time, for `t` seconds.
        auto latency = [&](int which, double t, figures& f) {
            std::optional<replica_set> set;
            if (which == 2 || which == 3)
                set.emplace(must(replica_set::create(g.members, {.quorum = which == 2 ? 2u : 3u,
                                                                 .depth = depth,
                                                                 .on_event = &on_event,
                                                                 .event_context = &events})));
            const auto end = clk::now() + std::chrono::duration<double>(t);
            while (clk::now() < end) {
                std::atomic<int> done{0};
                const auto t0 = clk::now();
                if (which == 0) {
                    REMORA_ASSERT_OK(solo->write(d0, 0, smr, 0, record));
                    REMORA_ASSERT_OK(remora::flush(*solo, d0, 0, record));
                    auto got = collect(solo->cq(), 2, false);
                    ASSERT_EQ(got.size(), 2u);
                    ASSERT_TRUE(got[0].ok() && got[1].ok());
                } else if (which == 1) {
                    REMORA_ASSERT_OK(solo_cb.write(d0, 0, smr, 0, record,
                                                   {.context = &done, .callback = &set_flag}));
                    REMORA_ASSERT_OK(remora::flush(solo_cb, d0, 0, record, {},
                                                   {.context = &done, .callback = &set_flag}));
                    wait_for_count(done, 1);
                    ASSERT_EQ(done.load(), 1) << "a write failed";
                } else if (which == 4) {
                    // At most `depth` writes with a flush still out, as in the set: wait for
                    // the one `depth` writes ago to end everywhere.
                    constexpr int ended = 3 + 3 * (1 << 16);
                    if (hand_next >= depth) {
                        auto& old = (*hand)[(hand_next - depth) % hand->size()];
                        for (int v = old.load(); v != ended; v = old.load()) {
                            ASSERT_EQ(v & 0xff00, 0) << "a write failed";
                            old.wait(v);
                        }
                    }
                    auto& n = (*hand)[hand_next++ % hand->size()];
                    n = 0;
                    for (int m = 0; m < 3; ++m) {
                        const remote_region& d = g.members[m].region;
                        REMORA_ASSERT_OK(g.members[m].conn->write(
                            d, 0, smr, 0, record, {.context = &n, .callback = &hand_count}));
                        REMORA_ASSERT_OK(remora::flush(*g.members[m].conn, d, 0, record, {},
                                                       {.context = &n, .callback = &hand_count}));
                    }
                    for (int v = n.load(); (v & 0xff) < 2 || (v >> 16) < 3; v = n.load())
                        n.wait(v);
                } else {
                    REMORA_ASSERT_OK(set->write(
                        0, smr, 0, record,
                        {.context = &done, .callback = &set_done, .park_until = clk::now() + 10s}));
                    wait_for_count(done, 1);
                    ASSERT_EQ(done.load(), 1) << "a write failed";
                }
                f.lat_us.push_back(
                    std::chrono::duration<double, std::micro>(clk::now() - t0).count());
            }
            if (set)
                REMORA_ASSERT_OK(set->drain(10s));
        };
        // `depth` durable writes in flight, for `t` seconds.
        auto throughput = [&](int which, double t, figures& f) {
            std::optional<replica_set> set;
            if (which >= 2)
                set.emplace(must(replica_set::create(g.members, {.quorum = which == 2 ? 2u : 3u,
                                                                 .depth = depth,
                                                                 .on_event = &on_event,
                                                                 .event_context = &events})));
            std::atomic<int> done{0};
            std::uint64_t posted = 0;
            const auto t0 = clk::now();
            const auto end = t0 + std::chrono::duration<double>(t);
            std::uint64_t reaped = 0;
            while (clk::now() < end || reaped < posted) {
                const bool more = clk::now() < end;
                if (which == 0) {
                    if (more && posted - reaped < depth) {
                        const std::size_t slot = posted % depth;
                        REMORA_ASSERT_OK(
                            solo->write(d0, slot * record, smr, slot * record, record));
                        REMORA_ASSERT_OK(remora::flush(*solo, d0, slot * record, record));
                        ++posted;
                        continue;
                    }
                    completion c[32];
                    auto n = must(solo->cq().poll(c));
                    for (std::size_t i = 0; i < n; ++i) {
                        ASSERT_TRUE(c[i].ok()) << c[i].status.message();
                        if (c[i].op == op::flush)
                            ++reaped;
                    }
                } else {
                    reaped = static_cast<std::uint64_t>(done.load());
                    if (!more || posted - reaped >= depth) {
                        if (reaped < posted)
                            wait_for_count(done, static_cast<int>(reaped) + 1);
                        continue;
                    }
                    {
                        const std::size_t slot = posted % depth;
                        if (which == 1) {
                            REMORA_ASSERT_OK(
                                solo_cb.write(d0, slot * record, smr, slot * record, record,
                                              {.context = &done, .callback = &set_flag}));
                            REMORA_ASSERT_OK(
                                remora::flush(solo_cb, d0, slot * record, record, {},
                                              {.context = &done, .callback = &set_flag}));
                        } else {
                            REMORA_ASSERT_OK(set->write(
                                slot * record, smr, slot * record, record,
                                {.context = &done,
                                 .callback = &set_done,
                                 .park_until = clk::now() + 10s}));  // a record settles later
                        }
                        ++posted;
                    }
                }
            }
            f.ops += posted;
            f.seconds += std::chrono::duration<double>(clk::now() - t0).count();
            if (set)
                REMORA_ASSERT_OK(set->drain(10s));
            ASSERT_LT(done.load(), fail_mark) << names[which] << ": a write failed";
        };
        constexpr int turns = 5;
        for (int turn = 0; turn < turns; ++turn)
            for (int w = 0; w < 5; ++w) {
                latency(w, seconds / turns, lat[w]);
                if (w < 4)
                    throughput(w, seconds / turns, bw[w]);
            }
        std::printf(
            "replica_bench %s: 4 KiB durable writes (GPSPM, regions in %s), %d turns of "
            "%.2f s\n",
            provider.c_str(), dir.string().c_str(), turns, seconds / turns);
        std::printf("%-8s %9s %9s %9s %10s %9s %10s %12s %10s\n", "config", "p50 us", "p99 us", "n",
                    "QD16 op/s", "MB/s", "p50/solo", "p50/solo_cb", "p50/hand");
        const double s50 = lat[0].p(0.5), c50 = lat[1].p(0.5), h50 = lat[4].p(0.5);
        for (int w = 0; w < 5; ++w) {
            const double p50 = lat[w].p(0.5);
            const double ops = bw[w].seconds > 0 ? bw[w].ops / bw[w].seconds : 0;
            std::printf("%-8s %9.1f %9.1f %9zu %10.0f %9.1f %10.2f %12.2f %10.2f\n", names[w], p50,
                        lat[w].p(0.99), lat[w].lat_us.size(), ops, ops * record / 1e6,
                        s50 > 0 ? p50 / s50 : 0, c50 > 0 ? p50 / c50 : 0, h50 > 0 ? p50 / h50 : 0);
        }
        for (int w = 0; w < 5; ++w)
            EXPECT_GT(lat[w].lat_us.size(), 0u) << names[w];
        EXPECT_EQ(events.load(), 0) << "members dropped on loopback";
    }
    std::filesystem::remove_all(dir);
}

// How long rejoin() takes to copy a whole region into a member (GPSPM, regions in /dev/shm files):
// REMORA_BENCH_CATCHUP_MIB sets the region (default 32). Asserted: the member ends holding what
// the others hold.
TEST(replica_bench, catch_up_of_a_whole_region) {
    const char* env_prov = std::getenv("REMORA_BENCH_PROVIDER");
    const std::string provider = env_prov != nullptr ? env_prov : "tcp";
    const char* env_mib = std::getenv("REMORA_BENCH_CATCHUP_MIB");
    const std::size_t mib = env_mib != nullptr ? std::max(1, std::atoi(env_mib)) : 32;
    const std::filesystem::path dir =
        std::filesystem::path(std::filesystem::exists("/dev/shm") ? "/dev/shm"
                                                                  : testing::TempDir()) /
        ("remora-replica-catchup-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    {
        auto g = rig::make(provider, 3, dir, depth, -1, mib << 20);
        // What the live members hold: a pattern written straight into their files' mappings.
        for (int i = 0; i < 2; ++i) {
            auto m = g.targets[i]->pmem->region().memory();
            for (std::size_t k = 0; k < m.size(); k += 4096)
                std::memset(m.data() + k, static_cast<int>((k / 4096) & 0xff), 4096);
        }
        auto set = must(replica_set::create(g.members, {.quorum = 2, .depth = depth}));
        REMORA_ASSERT_OK(set.drop(2));
        ASSERT_TRUE(eventually([&] { return set.pending(2) == 0; }));
        connection* again = must(g.connect(2));
        const auto t0 = clk::now();
        REMORA_ASSERT_OK(set.rejoin(2, *again, g.targets[2]->desc, {.whole = true}));
        ASSERT_TRUE(eventually([&] { return set.state(2) == replica_state::live; }, 300s));
        const double took = std::chrono::duration<double>(clk::now() - t0).count();
        const auto a = g.targets[0]->pmem->region().memory();
        const auto b = g.targets[2]->pmem->region().memory();
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0);
        std::printf(
            "replica_bench %s: caught up %zu MiB in %.3f s: %.0f MB/s, %.2f s per GiB "
            "(copy_chunk %zu KiB)\n",
            provider.c_str(), mib, took, (mib << 20) / took / 1e6, took * 1024.0 / mib,
            replica_set_config{}.copy_chunk >> 10);
    }
    std::filesystem::remove_all(dir);
}

}  // namespace

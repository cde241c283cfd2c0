// SPDX-License-Identifier: BSD-3-Clause
// A replica set across hosts: target 0 is `remora serve` in the target network namespace, targets
// 1 and 2 serve in this (the client's) namespace, quorum 2 (tests/twohost/run.sh sets the
// namespaces up; run alone, the test skips and says so). Records are appended while the link to
// target 0 goes down: the set drops it once its operations wait past behind_limit and goes on with
// the other two; the link comes back, a new connection rejoins target 0 while records keep coming,
// and it catches up. Afterwards every target holds every record, read back with `remora get`.
#include <atomic>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <remora/replica_set.hpp>

#include "integration/replica_rig.hpp"
#include "serve.hpp"
#include "twohost.hpp"

namespace remora::test {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t record = 4096;
constexpr std::uint32_t depth = 8;

class replica_twohost : public testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        auto e = environment();
        if (!e)
            GTEST_SKIP() << "needs the two network namespaces of tests/twohost/run.sh (root)";
        env = *e;
        ::signal(SIGPIPE, SIG_IGN);
        dir = fs::temp_directory_path() / ("remora-replica-twohost-" + std::to_string(::getpid()));
        fs::create_directories(dir);
    }
    void TearDown() override {
        if (!env.ns_target.empty())
            shell("ip -n " + env.ns_client + " link set " + env.link_client + " up");
        if (!HasFailure() && !dir.empty()) {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    }
    void link(bool up) {
        shell("ip -n " + env.ns_client + " link set " + env.link_client + (up ? " up" : " down"));
    }
    // The first `bytes` of the region served at `address`, through `remora get`.
    std::vector<std::byte> get(const std::string& address, std::size_t bytes) {
        const auto out = dir / "get.bin";
        const std::string cmd = std::string(REMORA_CLI) + " get -p " + GetParam() + " -t " +
                                address + " --offset 0 -l " + std::to_string(bytes) + " > " +
                                out.string();
        EXPECT_TRUE(shell(cmd));
        const std::string text = file_text(out.string());
        std::vector<std::byte> v(text.size());
        std::memcpy(v.data(), text.data(), text.size());
        return v;
    }

    twohost_env env;
    fs::path dir;
};

TEST_P(replica_twohost, a_replica_returns_after_a_link_down_and_catches_up) {
    const std::string prov = GetParam();
    target_process t[3] = {target_process::start_serve(env, prov, (dir / "r0.bin").string(),
                                                       (dir / "serve0.log").string()),
                           target_process::start_serve(env, prov, (dir / "r1.bin").string(),
                                                       (dir / "serve1.log").string(), false, true),
                           target_process::start_serve(env, prov, (dir / "r2.bin").string(),
                                                       (dir / "serve2.log").string(), false, true)};
    std::string address[3];
    for (int i = 0; i < 3; ++i) {
        ASSERT_NE(t[i].port, 0) << t[i].output();
        address[i] =
            (i == 0 ? env.target_addr : std::string("127.0.0.1")) + ":" + std::to_string(t[i].port);
    }
    std::optional<domain> dom;
    std::deque<tool::target_link> links;
    auto connect = [&](int i) -> tool::target_link* {
        auto l =
            tool::connect_target(prov, address[i], depth, nullptr, {}, dom ? &*dom : nullptr, true);
        EXPECT_TRUE(l.has_value()) << address[i] << ": " << l.error().what();
        if (!l)
            return nullptr;
        if (!dom)
            dom = l->dom;
        links.push_back(std::move(*l));
        return &links.back();
    };
    std::vector<replica> members;
    for (int i = 0; i < 3; ++i) {
        auto* l = connect(i);
        ASSERT_NE(l, nullptr);
        members.push_back({&l->conn, l->info.region});
    }
    constexpr std::size_t records = 192;
    buffer src(records * record);
    for (std::size_t i = 0; i < src.bytes.size(); ++i)
        src.bytes[i] = static_cast<std::byte>((i * 131 + i / record) & 0xff);
    auto mr = must(memory_region::create(*dom, src.span(), usage::write_source));
    event_log ev;
    auto set = must(replica_set::create(members, {.quorum = 2,
                                                  .depth = depth,
                                                  .behind_limit = 1000ms,
                                                  .copy_chunk = 64 * 1024,
                                                  .on_event = &event_log::on,
                                                  .event_context = &ev}));
    struct tally {
        std::atomic<int> acked{0}, failed{0};
        static void on(const replica_completion& c) {
            auto* t = static_cast<tally*>(c.context);
            (c.ok() ? t->acked : t->failed).fetch_add(1);
        }
    } done;
    auto append = [&](std::size_t from, std::size_t to) {
        for (std::size_t i = from; i < to; ++i) {
            auto w = set.write(i * record, mr, i * record, record,
                               {.context = &done,
                                .callback = &tally::on,
                                .park_until = std::chrono::steady_clock::now() + 20s});
            ASSERT_TRUE(w.has_value()) << "record " << i << ": " << w.error().what();
        }
    };
    append(0, 64);
    link(false);
    append(64, 128);  // stalls on target 0 until it is dropped
    REMORA_ASSERT_OK(set.drain(20s));
    EXPECT_EQ(set.state(0), replica_state::dropped);
    EXPECT_EQ(ev.count(replica_event_kind::dropped, 0), 1u);
    EXPECT_EQ(set.live(), 2u);
    link(true);
    auto* again = connect(0);
    ASSERT_NE(again, nullptr);
    REMORA_ASSERT_OK(set.rejoin(0, again->conn, again->info.region));
    append(128, records);
    ASSERT_TRUE(eventually([&] { return set.state(0) == replica_state::live; }, 30s))
        << "missing " << set.missing(0);
    REMORA_ASSERT_OK(set.drain(20s));
    EXPECT_EQ(done.acked.load(), static_cast<int>(records));
    EXPECT_EQ(done.failed.load(), 0);
    EXPECT_EQ(ev.count(replica_event_kind::rejoined, 0), 1u);
    std::printf(
        "replica_twohost %s: target 0 dropped after the link went down, rejoined and "
        "caught up; %d records acknowledged\n",
        prov.c_str(), done.acked.load());
    for (int i = 0; i < 3; ++i) {
        const auto got = get(address[i], records * record);
        ASSERT_EQ(got.size(), records * record) << "target " << i;
        EXPECT_EQ(std::memcmp(got.data(), src.bytes.data(), got.size()), 0)
            << "target " << i << " differs";
    }
}

INSTANTIATE_TEST_SUITE_P(providers, replica_twohost, testing::Values("tcp", "sockets"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace remora::test

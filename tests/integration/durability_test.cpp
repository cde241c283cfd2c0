// SPDX-License-Identifier: BSD-3-Clause
// Durability across target crashes: `remora serve` (the real command, a separate process) serves
// a file-backed region; a client appends records, flushing each to persistence (GPSPM) and then
// publishing a tail word with an atomic write and a flush; the target is killed with SIGKILL at a
// random moment. After each restart, every record whose flush completed is present and intact,
// and the tail word is never torn. By default it runs up to 200 kill points (tcp; 100 on sockets)
// within a 40 s budget, and never fewer than 30, so a loaded machine runs fewer rounds instead of
// timing out; REMORA_KILL_POINTS=N runs exactly N, whatever the time.
//
// What this proves here: a completed flush means the bytes were placed in the target's mapping
// before the reply, and the target reopens its file without losing or truncating anything. A
// SIGKILL does not lose the page cache, so it cannot tell whether msync ran (a power cut would,
// and cannot be simulated on this machine): that the GPSPM path calls persist() before replying
// is covered by reading the code and the service's tests, not by this one.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "serve.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t record_size = 64;
constexpr std::size_t records_at = 4096;  // the tail word lives at offset 0
constexpr std::size_t region_size = 1 << 20;

std::uint64_t tail_word(std::uint32_t seq) {
    return (static_cast<std::uint64_t>(seq) << 32) | seq;  // a torn write would mismatch halves
}

void fill_record(std::byte* p, std::uint32_t seq) {
    std::mt19937_64 g(seq);
    std::memcpy(p, &seq, 4);
    for (std::size_t i = 4; i < record_size; ++i) {
        p[i] = static_cast<std::byte>(g());
    }
}

// A `remora serve` child process.
struct target_process {
    pid_t pid = -1;
    std::uint16_t port = 0;

    static target_process start(const std::string& provider, const std::string& path) {
        int out[2];
        EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
        target_process t;
        t.pid = ::fork();
        if (t.pid == 0) {
            ::dup2(out[1], STDOUT_FILENO);
            const std::string region = "file:" + path + ":" + std::to_string(region_size);
            ::execl(REMORA_CLI, REMORA_CLI, "serve", "--provider", provider.c_str(), "--listen",
                    "127.0.0.1:0", "--region", region.c_str(), "--create", nullptr);
            ::_exit(127);
        }
        ::close(out[1]);
        // "remora serve: listening on 127.0.0.1:PORT ..."
        std::string line;
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (line.find('\n') == std::string::npos &&
               std::chrono::steady_clock::now() < deadline) {
            pollfd p{out[0], POLLIN, 0};
            if (::poll(&p, 1, 100) == 1) {
                char buf[256];
                const ssize_t n = ::read(out[0], buf, sizeof(buf));
                if (n <= 0) {
                    break;
                }
                line.append(buf, static_cast<std::size_t>(n));
            }
        }
        ::close(out[0]);  // later log lines go to a closed pipe: SIGPIPE is not fatal to us
        const auto at = line.find("127.0.0.1:");
        EXPECT_NE(at, std::string::npos) << "serve said: " << line;
        if (at != std::string::npos) {
            t.port = static_cast<std::uint16_t>(std::stoul(line.substr(at + 10)));
        }
        return t;
    }

    void kill() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            int status = 0;
            ::waitpid(pid, &status, 0);
            pid = -1;
        }
    }
    ~target_process() { kill(); }
};

result<completion> await_one(connection& c, std::chrono::milliseconds limit = 5s) {
    auto got = collect(c.cq(), 1, true, limit);
    if (got.empty()) {
        return fail(errc::timed_out, "no completion");
    }
    return got[0];
}

// One operation to completion: ok, or the error that ended it.
result<void> complete(connection& c, result<void> posted) {
    if (!posted) {
        return posted;
    }
    auto done = await_one(c);
    if (!done) {
        return fail(done.error());
    }
    if (!done->ok()) {
        return fail(done->status, "completion");
    }
    return {};
}

class durability_test : public testing::TestWithParam<std::string> {};

TEST_P(durability_test, acknowledged_records_survive_a_killed_target) {
    int kill_points = GetParam() == "tcp" ? 200 : 100;
    constexpr int min_kill_points = 30;
    auto budget = std::chrono::steady_clock::now() + 40s;
    if (const char* env = std::getenv("REMORA_KILL_POINTS")) {
        kill_points = std::atoi(env);
        budget = std::chrono::steady_clock::time_point::max();
    }
    ::signal(SIGPIPE, SIG_IGN);
    const fs::path dir = fs::temp_directory_path() /
                         ("remora-durability-" + GetParam() + "-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = (dir / "log.bin").string();
    std::mt19937 rng(20261129);
    std::uint32_t next_seq = 1;
    std::uint32_t last_acked = 0;
    std::vector<std::uint32_t> acked;
    int killed_mid_stream = 0;

    for (int round = 0; round <= kill_points; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        auto target = target_process::start(GetParam(), path);
        ASSERT_NE(target.port, 0);
        auto link =
            must(tool::connect_target(GetParam(), "127.0.0.1:" + std::to_string(target.port), 4));
        connection& conn = link.conn;
        const remote_region& region = link.info.region;
        ASSERT_TRUE(any(region.persistence() & persistence::gpspm));

        // After the restart: everything acknowledged so far is there, the tail is not torn.
        const std::size_t used = records_at + next_seq * record_size;
        std::vector<std::byte> back(used);
        auto back_mr = must(memory_region::create(link.dom, back, usage::read_destination));
        REMORA_ASSERT_OK(complete(conn, conn.read(back_mr, 0, region, 0, used)));
        std::uint64_t tail;
        std::memcpy(&tail, back.data(), 8);
        ASSERT_EQ(tail >> 32, tail & 0xffffffffu) << "torn tail word " << std::hex << tail;
        ASSERT_GE(tail & 0xffffffffu, last_acked) << "an acknowledged tail was lost";
        std::byte expect[record_size];
        for (std::uint32_t seq : acked) {
            fill_record(expect, seq);
            ASSERT_EQ(
                std::memcmp(back.data() + records_at + seq * record_size, expect, record_size), 0)
                << "acknowledged record " << seq << " is missing or damaged";
        }
        if (round == kill_points) {
            break;  // the last round only checks
        }
        if (round >= min_kill_points && std::chrono::steady_clock::now() >= budget) {
            kill_points = round;  // out of time: this round was the last check
            break;
        }

        // Append until the target is killed at a random moment.
        std::thread killer([&, delay = std::chrono::microseconds(rng() % 20000)] {
            std::this_thread::sleep_for(delay);
            target.kill();
        });
        std::vector<std::byte> rec(record_size);
        auto rec_mr = must(memory_region::create(link.dom, rec, usage::write_source));
        for (int i = 0; i < 100; ++i) {
            const std::uint32_t seq = next_seq++;
            fill_record(rec.data(), seq);
            const std::uint64_t at = records_at + seq * record_size;
            if (at + record_size > region_size) {
                break;
            }
            if (!complete(conn, conn.write(region, at, rec_mr, 0, record_size)) ||
                !complete(conn, remora::flush(conn, region, at, record_size)) ||
                !complete(conn, conn.atomic_write(region, 0, tail_word(seq))) ||
                !complete(conn, remora::flush(conn, region, 0, 8))) {
                ++killed_mid_stream;
                break;  // no claim about seq: its flush did not complete
            }
            acked.push_back(seq);
            last_acked = seq;
        }
        killer.join();
    }
    std::printf("%d kill points, %zu records acknowledged, %d kills landed mid-stream\n",
                kill_points, acked.size(), killed_mid_stream);
    EXPECT_GT(killed_mid_stream, kill_points / 2);  // the kills really interrupted appends
    std::error_code ec;
    fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(providers, durability_test, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

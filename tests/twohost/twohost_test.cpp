// SPDX-License-Identifier: BSD-3-Clause
// Two hosts: the real `remora serve` (tcp, sockets) or twohost_peer (an RDM peer: tcp;ofi_rxm, net)
// runs in a "target" network namespace with a file-backed (persistent) region, this binary runs
// in a "client" namespace, and a veth pair joins them
// (tests/twohost/run.sh builds that and runs this binary inside it; run alone, every test skips
// and says so). A client appends 64-byte records, each written and then flushed to persistence
// through the target's service (GPSPM), while a fault hits the path between them:
//   - the link goes down for 1.5 s and comes back;
//   - the link goes down for good;
//   - the target is stopped with SIGSTOP, then continued (SIGCONT) or killed (SIGKILL);
//   - the target's kernel resets the connection (SIGSTOP first so a flush is surely waiting,
//     then `ss -K`, which destroys the target's sockets and sends a RST; then SIGCONT).
// Every operation completes (ok, or with an error), or, where nothing on the wire can end it
// (a link down for good), is ended by close() within a bound; nothing waits past its bound.
// Afterwards every record whose flush completed is read back, intact, by a fresh client from a
// restarted target on the same file.
//
// Bounds: the library has no per-operation deadline. A client bounds its waits itself (here
// op_limit: 20 s where the fault heals, 10 s where the peer is gone), and close() ends what the
// provider never will: with the link down for good, TCP retransmits for ~15 minutes
// (net.ipv4.tcp_retries2 = 15) before the providers hear of anything. Seen here (libfabric 1.17):
// a healed link or a continued target loses nothing; a killed target or a reset ends the waiting
// operation at once (tcp: canceled, sockets: disconnected); with the link down for good, close()
// ends everything on every provider (on sockets, where fi_shutdown leaves an operation waiting for
// the peer's acknowledgement, because close() closes the endpoint too); on tcp;ofi_rxm and net a
// flush whose target was killed or reset never completes by itself (see expect_ended).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "hex.hpp"
#include "serve.hpp"
#include "support.hpp"
#include "twohost.hpp"

namespace remora::test {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t record_size = 64;
constexpr std::size_t records_at = 4096;
constexpr std::uint32_t max_seq = (region_size - records_at) / record_size - 1;

bool is_rdm(const std::string& provider) {
    return provider.find("ofi_rxm") != std::string::npos || provider == "net";
}

using twohost::hex;
using twohost::unhex;

void fill_record(std::byte* p, std::uint32_t seq) {
    std::mt19937_64 g(seq);
    std::memcpy(p, &seq, 4);
    for (std::size_t i = 4; i < record_size; ++i) {
        p[i] = static_cast<std::byte>(g());
    }
}

// A client's domain, connection (or RDM peer endpoint) and the target's region.
struct client_link {
    domain dom;
    connection conn;
    remote_region region;
};

// The operation that ended an append stream.
struct ending {
    std::string what;  // "write N", "flush N"
    bool posted = true;
    bool completed = false;  // false: no completion within op_limit
    std::error_code status;
    std::string message;
};

// Posts, again while the provider says would_block (an RDM provider setting up its path to a
// new peer), for at most a second.
template <class Post>
result<void> retrying(Post&& post) {
    const auto deadline = clock_type::now() + 1s;
    for (;;) {
        auto r = post();
        if (r || !(r.error() == errc::would_block) || clock_type::now() >= deadline) {
            return r;
        }
        std::this_thread::sleep_for(1ms);
    }
}

// Appends records, one write and one flush at a time, until told to stop or an operation does
// not succeed (or does not complete within op_limit).
struct appender {
    client_link link;
    std::chrono::milliseconds op_limit;
    std::vector<std::byte> rec = std::vector<std::byte>(record_size);
    memory_region rec_mr = must(memory_region::create(link.dom, rec, usage::write_source));
    std::atomic<bool> stop{false};
    std::atomic<std::uint32_t> acked_count{0};
    std::atomic<int> waiting{0};  // 0: none, 1: a write, 2: a flush
    std::atomic<clock_type::rep> waiting_since{0};
    // Read only after run() returned:
    std::vector<std::uint32_t> acked;
    std::optional<ending> end;
    std::chrono::milliseconds slowest{0};  // the longest an operation took to complete

    appender(client_link l, std::chrono::milliseconds limit)
        : link(std::move(l)), op_limit(limit) {}

    // How long the operation now awaited has been waiting (0 when none).
    std::chrono::milliseconds waited() const {
        if (waiting.load() == 0) {
            return 0ms;
        }
        return std::chrono::duration_cast<std::chrono::milliseconds>(
            clock_type::now() - clock_type::time_point(clock_type::duration(waiting_since.load())));
    }

    bool step(int kind, std::uint32_t seq, result<void> posted) {
        const std::string what = (kind == 1 ? "write " : "flush ") + std::to_string(seq);
        if (!posted) {
            end = ending{what, false, false, posted.error().code(), posted.error().what()};
            return false;
        }
        const auto t0 = clock_type::now();
        waiting_since = t0.time_since_epoch().count();
        waiting = kind;
        auto c = link.conn.cq().next(op_limit);
        waiting = 0;
        slowest = std::max(
            slowest, std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0));
        if (!c) {
            end = ending{what, true, false, c.error().code(), c.error().what()};
            return false;
        }
        if (!c->ok()) {
            end = ending{what, true, true, c->status, c->status.message()};
            return false;
        }
        return true;
    }

    void run() {
        const remote_region& region = link.region;
        for (std::uint32_t seq = 1; seq <= max_seq && !stop; ++seq) {
            fill_record(rec.data(), seq);
            const std::uint64_t at = records_at + std::uint64_t{seq} * record_size;
            if (!step(1, seq, retrying([&] {
                          return link.conn.write(region, at, rec_mr, 0, record_size);
                      })) ||
                !step(2, seq, retrying([&] {
                          return remora::flush(link.conn, region, at, record_size);
                      }))) {
                return;
            }
            acked.push_back(seq);
            ++acked_count;
        }
    }
};

// Closes the appender's connection and reads what is left: close() returns and every operation
// still in flight completes within 10 s (all but at most `stuck`, see link_down_for_good_...).
// Returns the late completions' statuses.
std::vector<std::error_code> close_and_drain(appender& a, std::size_t stuck = 0) {
    const auto t0 = clock_type::now();
    auto closed = a.link.conn.close();
    const auto took = clock_type::now() - t0;
    EXPECT_TRUE(closed.has_value()) << closed.error().what();
    EXPECT_LT(took, 10s) << "close() took "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                         << " ms";
    std::vector<std::error_code> late;
    const auto deadline = clock_type::now() + 10s;
    while (a.link.conn.in_flight() > 0 && clock_type::now() < deadline) {
        auto c = a.link.conn.cq().next(100ms);
        if (c) {
            late.push_back(c->status);
        }
    }
    EXPECT_LE(a.link.conn.in_flight(), stuck) << "operations never completed after close()";
    return late;
}

// An error that ends an operation when the peer is gone or the connection was reset.
bool is_disconnect(std::error_code e) {
    return e == errc::disconnected || e == errc::canceled;
}

class twohost_test : public testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        auto e = environment();
        if (!e) {
            GTEST_SKIP() << "needs the two network namespaces of tests/twohost/run.sh (root): run "
                            "it as `bash tests/twohost/run.sh "
                         << testing::internal::GetArgvs()[0] << "`";
        }
        env = *e;
        ::signal(SIGPIPE, SIG_IGN);
        std::string name = testing::UnitTest::GetInstance()->current_test_info()->name();
        std::replace(name.begin(), name.end(), '/', '_');
        dir = fs::temp_directory_path() /
              ("remora-twohost-" + std::to_string(::getpid()) + "-" + name);
        fs::create_directories(dir);
        path = (dir / "region.bin").string();
    }
    void TearDown() override {
        if (!env.ns_target.empty()) {
            shell("ip -n " + env.ns_client + " link set " + env.link_client + " up");
        }
        if (!HasFailure() && !dir.empty()) {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    }

    target_process start_target() {
        const std::string log = (dir / ("target-" + std::to_string(++starts) + ".log")).string();
        return is_rdm(GetParam()) ? target_process::start_peer(env, GetParam(), path, log)
                                  : target_process::start_serve(env, GetParam(), path, log);
    }
    bool started(const target_process& t) const {
        return is_rdm(GetParam()) ? !t.address.empty() : t.port != 0;
    }
    result<client_link> connect(target_process& t) {
        if (!is_rdm(GetParam())) {
            auto l =
                tool::connect_target(GetParam(), env.target_addr + ":" + std::to_string(t.port));
            if (!l) {
                return fail(l.error());
            }
            return client_link{std::move(l->dom), std::move(l->conn), l->info.region};
        }
        // An RDM peer: one client per twohost_peer, which attaches the address we send it.
        auto dom = domain::open(
            {.provider = GetParam(), .node = env.client_addr, .endpoint = endpoint_type::rdm});
        if (!dom) {
            return fail(dom.error());
        }
        auto conn = connection::open_peer(
            *dom, {.addons = {remora::persistence_config{.service_depth = 8}}});
        if (!conn) {
            return fail(conn.error());
        }
        if (auto r = conn->attach(t.address); !r) {
            return fail(r.error());
        }
        auto region = remote_region::parse(t.descriptor);
        if (!region) {
            return fail(region.error());
        }
        const std::string line = hex(conn->local_address()) + "\n";
        if (::write(t.to_peer, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
            return fail(errc::disconnected, "twohost_peer does not read its stdin");
        }
        if (!eventually([&] { return t.output().find("attached") != std::string::npos; }, 10s)) {
            return fail(errc::timed_out, "twohost_peer did not attach: " + t.output());
        }
        return client_link{std::move(*dom), std::move(*conn), *region};
    }
    void link(bool up) {
        shell("ip -n " + env.ns_client + " link set " + env.link_client + (up ? " up" : " down"));
    }
    // Resets the target's connections to the client: its kernel destroys the sockets and sends a
    // RST to the client for each.
    void reset_connections() {
        shell("ip netns exec " + env.ns_target + " ss -K -t dst " + env.client_addr +
              " >/dev/null");
    }

    // Starts an appender on a fresh connection and waits until `n` records are acknowledged.
    std::unique_ptr<appender> start_appending(target_process& t, std::chrono::milliseconds op_limit,
                                              std::thread& worker, std::uint32_t n = 50) {
        auto l = connect(t);
        EXPECT_TRUE(l.has_value()) << l.error().what();
        if (!l) {
            return nullptr;
        }
        EXPECT_TRUE(any(l->region.persistence() & persistence::gpspm));
        auto a = std::make_unique<appender>(std::move(*l), op_limit);
        worker = std::thread([p = a.get()] { p->run(); });
        EXPECT_TRUE(eventually([&] { return a->acked_count >= n || a->end.has_value(); }, 20s));
        EXPECT_GE(a->acked_count.load(), n) << "the stream did not start";
        return a;
    }

    // Waits until the appender has waited at least `d` for one operation (the fault holds it).
    void until_stalled(appender& a, std::chrono::milliseconds d) {
        EXPECT_TRUE(eventually([&] { return a.waited() >= d; }, 15s))
            << "no operation stalled under the fault";
    }

    // Kills the target, restarts it on the same file, and reads every acknowledged record back
    // through a fresh client.
    void expect_durable(target_process& t, const std::vector<std::uint32_t>& acked) {
        t.kill();
        auto again = start_target();
        ASSERT_TRUE(started(again)) << again.output();
        auto l = connect(again);
        ASSERT_TRUE(l.has_value()) << l.error().what();
        const std::uint32_t top = acked.empty() ? 0 : acked.back();
        const std::size_t used = records_at + (std::size_t{top} + 1) * record_size;
        std::vector<std::byte> back(used);
        auto mr = must(memory_region::create(l->dom, back, usage::read_destination));
        constexpr std::size_t chunk = 256 << 10;
        for (std::size_t at = 0; at < used; at += chunk) {
            const std::size_t n = std::min(chunk, used - at);
            REMORA_ASSERT_OK(retrying([&] { return l->conn.read(mr, at, l->region, at, n); }));
            auto c = l->conn.cq().next(10s);
            ASSERT_TRUE(c.has_value()) << c.error().what();
            ASSERT_TRUE(c->ok()) << c->status.message();
        }
        std::byte expect[record_size];
        for (std::uint32_t seq : acked) {
            fill_record(expect, seq);
            ASSERT_EQ(
                std::memcmp(back.data() + records_at + seq * record_size, expect, record_size), 0)
                << "acknowledged record " << seq << " is missing or damaged after the fault";
        }
        std::printf("  %zu acknowledged records durable after a restart\n", acked.size());
    }

    // How long a client waits for an operation when its peer is gone: connected endpoints hear
    // the peer's kernel (FIN or RST) at once; an RDM peer's flush may never hear (below).
    std::chrono::milliseconds gone_limit() const { return is_rdm(GetParam()) ? 3s : 10s; }

    // The operation caught by a kill or a reset ended. Connected endpoints: with an error, as
    // soon as the provider hears the peer's kernel. RDM (tcp;ofi_rxm, net): a peer that goes away
    // is not announced (connection.hpp); seen here, a flush waiting for its reply never completes,
    // and only the client's bound and then close() end it (a library-side deadline for service
    // requests would be the fix).
    void expect_ended(const appender& a, const char* fault) const {
        ASSERT_TRUE(a.end.has_value());
        if (is_rdm(GetParam()) && !a.end->completed) {
            EXPECT_TRUE(a.end->status == errc::timed_out) << a.end->message;
            return;
        }
        EXPECT_TRUE(a.end->completed) << "no completion within " << gone_limit().count()
                                      << " ms of the " << fault << ": " << a.end->what;
        EXPECT_TRUE(is_disconnect(a.end->status)) << a.end->what << ": " << a.end->message;
    }

    static void print(const appender& a, const char* fault) {
        std::string how = "stop";
        if (a.end && !a.end->posted) {
            how = "a refused post of " + a.end->what + ": " + a.end->message;
        } else if (a.end && !a.end->completed) {
            how = "no completion of " + a.end->what + " in time";
        } else if (a.end) {
            how = a.end->what + " completing with " + a.end->message;
        }
        std::printf("  %s: %u acknowledged, slowest operation %lld ms, ended by %s\n", fault,
                    a.acked_count.load(), static_cast<long long>(a.slowest.count()), how.c_str());
    }

    twohost_env env;
    fs::path dir;
    std::string path;
    int starts = 0;
};

// The same-host path is offered only to an address of the client's own network namespace: a
// client in the target's namespace takes it (a check that the test can see it), one across the
// veth pair does not, and neither does one in the target's namespace with a /dev/shm of its own
// (another host identity), however both ask for it (REMORA_SAME_HOST=on).
TEST_P(twohost_test, the_same_host_path_is_never_taken_across_hosts) {
    if (is_rdm(GetParam())) {
        GTEST_SKIP() << "the path is set up under connected endpoints (tcp, sockets)";
    }
    auto t = target_process::start_serve(env, GetParam(), path, (dir / "serve.log").string(), true);
    ASSERT_TRUE(started(t)) << t.output();
    const std::string target = env.target_addr + ":" + std::to_string(t.port);
    // serve's log line for its client number n ("client N connected (...)").
    auto client_line = [&](int n) {
        const std::string line = "client " + std::to_string(n) + " connected";
        std::string text;
        EXPECT_TRUE(eventually(
            [&] {
                text = t.output();
                return text.find(line) != std::string::npos;
            },
            10s))
            << text;
        const auto at = text.find(line);
        return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
    };
    // `remora put` of a line, asking for the path, as a client started by the shell prefix
    // `where` (namespaces, mounts).
    const std::string script = (dir / "put.sh").string();
    std::ofstream(script) << "echo same-host | REMORA_SAME_HOST=on " REMORA_CLI " put --provider "
                          << GetParam() << " --target " << target << " --offset 0\n";
    auto put_from = [&](const std::string& where) {
        EXPECT_TRUE(shell(where + " sh " + script + " >>" + (dir / "put.log").string() + " 2>&1"))
            << file_text((dir / "put.log").string());
    };
    const std::string in_target = "ip netns exec " + env.ns_target;
    // In the target's namespace: an address of its own, the same host identity: taken.
    put_from(in_target);
    EXPECT_NE(client_line(1).find("same host, shared memory"), std::string::npos) << t.output();
    // Across the veth pair (this namespace): the target's address is not one of this namespace's,
    // so the client offers nothing.
    ::setenv("REMORA_SAME_HOST", "on", 1);
    auto l = connect(t);
    ::unsetenv("REMORA_SAME_HOST");
    ASSERT_TRUE(l.has_value()) << l.error().what();
    EXPECT_FALSE(l->conn.same_host());
    EXPECT_EQ(client_line(2).find("same host"), std::string::npos) << t.output();
    // In the target's namespace with a /dev/shm of its own (a container's): the host identities
    // differ, the target declines, and the put goes over the provider.
    put_from(in_target + " unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm && exec \"$0\" \"$@\"'");
    EXPECT_EQ(client_line(3).find("same host"), std::string::npos) << t.output();
}

TEST_P(twohost_test, link_down_briefly_every_operation_succeeds) {
    auto t = start_target();
    ASSERT_TRUE(started(t)) << t.output();
    std::thread worker;
    auto a = start_appending(t, 20s, worker);
    ASSERT_TRUE(a);
    link(false);
    until_stalled(*a, 1500ms);
    link(true);
    const auto before = a->acked_count.load();
    EXPECT_TRUE(eventually([&] { return a->acked_count >= before + 50 || a->end; }, 30s));
    a->stop = true;
    worker.join();
    print(*a, "link down 1.5 s");
    EXPECT_FALSE(a->end.has_value())
        << "an operation failed across a healed link: " << a->end->what << ": " << a->end->message;
    EXPECT_GE(a->slowest, 1500ms) << "the link-down did not hold an operation";
    EXPECT_EQ(a->link.conn.in_flight(), 0u);
    expect_durable(t, a->acked);
}

TEST_P(twohost_test, link_down_for_good_close_ends_every_operation) {
    auto t = start_target();
    ASSERT_TRUE(started(t)) << t.output();
    std::thread worker;
    auto a = start_appending(t, 3s, worker);
    ASSERT_TRUE(a);
    link(false);
    worker.join();  // ends by op_limit: nothing on the wire can end the operation
    print(*a, "link down for good");
    ASSERT_TRUE(a->end.has_value());
    EXPECT_TRUE(a->end->posted) << a->end->message;
    EXPECT_FALSE(a->end->completed) << a->end->what << " completed with " << a->end->message;
    EXPECT_TRUE(a->end->status == errc::timed_out) << a->end->message;
    // On sockets (libfabric 1.17) writes and sends complete only when the peer acknowledges
    // them, and fi_shutdown does not flush one still waiting for that acknowledgement: close()
    // therefore closes the endpoint too and completes what is left canceled (as on RDM), so
    // nothing stays in flight on any provider. tcp flushes everything at shutdown already.
    const std::size_t stuck = 0;
    const auto late = close_and_drain(*a, stuck);
    for (auto s : late) {
        EXPECT_TRUE(is_disconnect(s)) << "late completion: " << s.message();
    }
    const bool caught_a_flush = a->end->what.rfind("flush", 0) == 0;
    EXPECT_GE(late.size(), stuck != 0 && !caught_a_flush ? 0u : 1u)
        << "the operation caught by the fault did not complete after close()";
    std::printf("  close() ended %zu operations; %zu still in flight afterwards\n", late.size(),
                a->link.conn.in_flight());
    // Destroying the connection ends everything, at once.
    const auto t0 = clock_type::now();
    auto acked = std::move(a->acked);
    a.reset();
    EXPECT_LT(clock_type::now() - t0, 5s) << "destroying the connection took too long";
    link(true);
    EXPECT_TRUE(t.alive()) << t.output();
    expect_durable(t, acked);
}

TEST_P(twohost_test, stopped_target_continued_every_operation_succeeds) {
    auto t = start_target();
    ASSERT_TRUE(started(t)) << t.output();
    std::thread worker;
    auto a = start_appending(t, 20s, worker);
    ASSERT_TRUE(a);
    t.signal(SIGSTOP);
    until_stalled(*a, 1000ms);
    t.signal(SIGCONT);
    const auto before = a->acked_count.load();
    EXPECT_TRUE(eventually([&] { return a->acked_count >= before + 50 || a->end; }, 30s));
    a->stop = true;
    worker.join();
    print(*a, "target stopped 1 s");
    EXPECT_FALSE(a->end.has_value())
        << "an operation failed across a stopped target: " << a->end->what << ": "
        << a->end->message;
    EXPECT_EQ(a->link.conn.in_flight(), 0u);
    expect_durable(t, a->acked);
}

TEST_P(twohost_test, stopped_target_killed_every_operation_ends_with_an_error) {
    auto t = start_target();
    ASSERT_TRUE(started(t)) << t.output();
    std::thread worker;
    auto a = start_appending(t, gone_limit(), worker);
    ASSERT_TRUE(a);
    t.signal(SIGSTOP);
    until_stalled(*a, 500ms);
    t.signal(SIGKILL);
    worker.join();
    print(*a, "target stopped, then killed");
    expect_ended(*a, "kill");
    for (auto s : close_and_drain(*a)) {
        EXPECT_TRUE(is_disconnect(s)) << "late completion: " << s.message();
    }
    expect_durable(t, a->acked);
}

TEST_P(twohost_test, connection_reset_mid_flush_ends_operations_with_an_error) {
    auto t = start_target();
    ASSERT_TRUE(started(t)) << t.output();
    std::thread worker;
    auto a = start_appending(t, gone_limit(), worker);
    ASSERT_TRUE(a);
    t.signal(SIGSTOP);  // holds the next flush (its reply needs the target's service)
    until_stalled(*a, 300ms);
    const int held = a->waiting.load();
    reset_connections();
    t.signal(SIGCONT);
    worker.join();
    print(*a, held == 2 ? "reset mid-flush" : "reset mid-write");
    expect_ended(*a, "reset");
    for (auto s : close_and_drain(*a)) {
        EXPECT_TRUE(is_disconnect(s)) << "late completion: " << s.message();
    }
    // The target lives on and serves a fresh client (twohost_peer serves one client only).
    EXPECT_TRUE(t.alive()) << t.output();
    if (!is_rdm(GetParam())) {
        auto fresh = connect(t);
        EXPECT_TRUE(fresh.has_value()) << fresh.error().what();
    }
    expect_durable(t, a->acked);
}

INSTANTIATE_TEST_SUITE_P(providers, twohost_test,
                         testing::Values("tcp", "sockets", "tcp;ofi_rxm", "net"),
                         [](const testing::TestParamInfo<std::string>& i) {
                             std::string n = i.param;
                             std::replace(n.begin(), n.end(), ';', '_');
                             return n;
                         });

}  // namespace
}  // namespace remora::test

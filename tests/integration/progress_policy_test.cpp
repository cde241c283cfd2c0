// SPDX-License-Identifier: BSD-3-Clause
// The library progress thread's policy (domain_config::progress): every policy serves a peer's
// one-sided operations while the target application sleeps; adaptive and blocking use no CPU
// when idle; busy polls. CPU is read from the thread's own /proc entry (the thread is named
// "remora-progress"): an idle thread burns nothing however loaded the machine is, and a
// polling one accumulates CPU whenever it is scheduled, so the checks are about the policy, not
// about speed.
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/cq_impl.hpp"
#include "core/domain_impl.hpp"
#include "fabric/fault.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

// Tids of this process's threads named remora-progress.
std::vector<long> progress_tids() {
    std::vector<long> out;
    DIR* d = ::opendir("/proc/self/task");
    if (d == nullptr)
        return out;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.')
            continue;
        std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
        std::string name;
        std::getline(comm, name);
        if (name == "remora-progress")
            out.push_back(std::stol(e->d_name));
    }
    ::closedir(d);
    return out;
}

// CPU time (user + system) of thread `tid`, in milliseconds (clock-tick resolution).
double thread_cpu_ms(long tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string line;
    std::getline(f, line);
    // Fields after the ")" closing the command name: state is field 3; utime 14, stime 15.
    std::istringstream in(line.substr(line.rfind(')') + 2));
    std::string field;
    unsigned long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {
        if (i == 14)
            utime = std::stoul(field);
        if (i == 15)
            stime = std::stoul(field);
    }
    return static_cast<double>(utime + stime) * 1000.0 /
           static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Scheduler state of thread `tid` (/proc stat field 3): 'R' running or runnable, 'S' asleep, ...
char thread_state(long tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string line;
    std::getline(f, line);
    const auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}

// Samples `tid`'s state every 10 ms for about `span`; returns the share of samples in which it
// was running or runnable. Load-independent: a thread asleep in epoll is 'S' however busy the
// machine is, and a polling thread is 'R' whether or not it got the CPU (even when it yields).
double runnable_share(long tid, std::chrono::milliseconds span) {
    int samples = 0, runnable = 0;
    const auto end = std::chrono::steady_clock::now() + span;
    while (std::chrono::steady_clock::now() < end) {
        ++samples;
        runnable += thread_state(tid) == 'R' ? 1 : 0;
        std::this_thread::sleep_for(10ms);  // the sampling interval, not a synchronisation
    }
    return samples == 0 ? 0.0 : static_cast<double>(runnable) / samples;
}

// A target whose connection is served by the progress thread of a domain opened with `policy`,
// and a client in a domain of its own, with a target region described to the client.
struct progress_pair {
    domain target_domain;
    domain client_domain;
    std::optional<listener> lst;
    std::optional<connection> target;
    std::optional<connection> client;
};

result<progress_pair> pair_with(const std::string& provider, progress_policy policy,
                                std::chrono::microseconds spin = 100us) {
    domain_config tc{.provider = provider};
    tc.progress = policy;
    tc.progress_spin = spin;
    auto td = domain::open(tc);
    if (!td)
        return fail(td.error());
    auto cd = domain::open({.provider = provider});
    if (!cd)
        return fail(cd.error());
    auto l = listener::create(*td, "127.0.0.1", 0);
    if (!l)
        return fail(l.error());
    auto client = std::async(std::launch::async,
                             [&] { return connection::connect(*cd, "127.0.0.1", l->port()); });
    auto req = request_while_connecting(*l, client);
    result<connection> s =
        req ? req->accept({.progress_thread = true}) : result<connection>(fail(req.error()));
    auto c = client.get();
    if (!c)
        return fail(c.error());
    if (!s)
        return fail(s.error());
    return progress_pair{*td, *cd, std::move(*l), std::move(*s), std::move(*c)};
}

// A target region the client may write and read, the client's local region, and the target
// region's description.
struct one_sided_regions {
    memory_region target;
    memory_region local;
    remote_region desc;
};
one_sided_regions one_sided(const progress_pair& p, buffer& target, buffer& local) {
    auto tmr = must(memory_region::create(p.target_domain, target.span(),
                                          usage::write_destination | usage::read_source));
    auto lmr = must(memory_region::create(p.client_domain, local.span(),
                                          usage::write_source | usage::read_destination));
    auto desc = must(tmr.describe());
    return {std::move(tmr), std::move(lmr), std::move(desc)};
}

struct policy_case {
    std::string provider;
    progress_policy policy;
};

std::vector<policy_case> cases() {
    std::vector<policy_case> out;
    for (const auto& p : providers())
        for (auto pol :
             {progress_policy::busy, progress_policy::adaptive, progress_policy::blocking})
            out.push_back({p, pol});
    return out;
}

void PrintTo(const policy_case& c, std::ostream* os) {
    *os << c.provider << "/" << to_string(c.policy);
}

class progress_policies : public testing::TestWithParam<policy_case> {};

// Whatever the policy, the target's application never calls in: the progress thread alone serves
// the client's writes and reads, and every byte arrives.
TEST_P(progress_policies, serves_one_sided_operations_while_the_target_sleeps) {
    // The buffers outlive the connections: the target's progress thread may still be sending a
    // read's bytes from `target` while the pair is torn down (ASan: use after free otherwise).
    buffer target(4096), local(4096);
    auto p = must(pair_with(GetParam().provider, GetParam().policy));
    EXPECT_EQ(p.target_domain.progress(), GetParam().policy);
    auto [tmr, lmr, desc] = one_sided(p, target, local);
    for (int round = 0; round < 100; ++round) {
        const auto v = static_cast<std::byte>(round + 1);
        std::memset(local.bytes.data(), static_cast<int>(v), 8);
        REMORA_ASSERT_OK(p.client->write(desc, 64, lmr, 0, 8));
        auto w = collect(p.client->cq(), 1, true);
        ASSERT_EQ(w.size(), 1u) << "write " << round << " did not complete";
        ASSERT_TRUE(w[0].ok()) << w[0].status.message();
        REMORA_ASSERT_OK(p.client->read(lmr, 1024, desc, 64, 8));
        auto r = collect(p.client->cq(), 1, true);
        ASSERT_EQ(r.size(), 1u) << "read " << round << " did not complete";
        ASSERT_TRUE(r[0].ok()) << r[0].status.message();
        ASSERT_EQ(local.bytes[1024], v);
        ASSERT_EQ(target.bytes[64], v);
    }
}

// adaptive and blocking: after a burst of traffic and a second of quiet, the thread uses no CPU
// (under 5 % of a core over the next second; an idle thread is not scheduled at all). busy: the
// thread polls, so its CPU time grows by 100 ms within 10 s however loaded the machine is.
TEST_P(progress_policies, idle_cpu_follows_the_policy) {
    buffer target(4096), local(4096);  // outlive the connections (see above)
    auto p = must(pair_with(GetParam().provider, GetParam().policy));
    auto tmr = must(memory_region::create(p.target_domain, target.span(), usage::receive));
    auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::send));
    // Traffic the progress thread sees: it reads the target's receive completions itself (the
    // application never reads that CQ) and runs their callbacks. adaptive starts polling.
    struct counter {
        std::mutex mu;
        std::condition_variable cv;
        int n = 0;
    } received;
    auto on_recv = [](const completion& c) {
        auto* r = static_cast<counter*>(c.context);
        std::lock_guard lock(r->mu);
        ++r->n;
        r->cv.notify_all();
    };
    for (int round = 0; round < 50; ++round) {
        REMORA_ASSERT_OK(p.target->recv(tmr, 0, 64, {.context = &received, .callback = on_recv}));
        REMORA_ASSERT_OK(p.client->send(lmr, 0, 8));
        ASSERT_EQ(collect(p.client->cq(), 1, true).size(), 1u);
        std::unique_lock lock(received.mu);
        ASSERT_TRUE(received.cv.wait_for(lock, 10s, [&] { return received.n == round + 1; }))
            << "the progress thread did not deliver receive " << round;
    }
    const auto tids = progress_tids();
    ASSERT_EQ(tids.size(), 1u) << "one progress thread, named remora-progress";
    const long tid = tids[0];
    if (GetParam().policy == progress_policy::busy) {
        const double start = thread_cpu_ms(tid);
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        double used = 0;
        while (used < 100.0 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(50ms);  // the interval measured, not a synchronisation
            used = thread_cpu_ms(tid) - start;
        }
        EXPECT_GE(used, 100.0) << "a busy progress thread polls: its CPU time must grow";
        EXPECT_GT(runnable_share(tid, 500ms), 0.9) << "a busy progress thread never sleeps";
        return;
    }
    std::this_thread::sleep_for(1s);  // quiet: adaptive's spin (100 us) has long run out
    const double before = thread_cpu_ms(tid);
    // The interval measured: CPU time, and the thread's state sampled all along (a poller that
    // yields on a loaded machine may get little CPU, but it is never asleep).
    const double share = runnable_share(tid, 1s);
    const double used = thread_cpu_ms(tid) - before;
    EXPECT_LT(used, 50.0) << to_string(GetParam().policy)
                          << ": an idle progress thread must sleep, used " << used << " ms in 1 s";
    EXPECT_LT(share, 0.05) << to_string(GetParam().policy)
                           << ": an idle progress thread must sleep, runnable in " << share * 100
                           << " % of samples";
}

// CPU time (user + system) of the whole process so far, in milliseconds (getrusage).
double process_cpu_ms() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    const auto ms = [](const timeval& t) { return t.tv_sec * 1000.0 + t.tv_usec / 1000.0; };
    return ms(ru.ru_utime) + ms(ru.ru_stime);
}

// A peer that dies while the application has not yet closed its side: the dead socket stays
// readable (a hang-up) until the endpoint is closed, and the progress thread must not take that
// for traffic. The target's application never looks at its connection here, as a busy one may not
// for a while; adaptive and blocking must still sleep. The client writes a burst first, so the
// target has just had traffic (adaptive is polling when the hang-up comes); with `unplaced`, it
// also sends a message the target has posted no receive for: tcp then stops reading the socket,
// never sees the end behind it, and posts no shutdown (the connection is never reported lost
// while nothing of the target's fails), the hang-up staying in its wait set for good.
void dead_peer_left_open(const policy_case& param, bool unplaced) {
    buffer target(4096), local(4096);  // outlive the connections (see above)
    auto p = must(pair_with(param.provider, param.policy));
    auto r = one_sided(p, target, local);
    for (int i = 0; i < 32; ++i)
        REMORA_ASSERT_OK(p.client->write(r.desc, 0, r.local, 0, 64));
    ASSERT_EQ(collect(p.client->cq(), 32, true).size(), 32u);
    if (unplaced) {
        auto smr = must(memory_region::create(p.client_domain, local.span(), usage::send));
        REMORA_ASSERT_OK(p.client->send(smr, 0, 64));
        ASSERT_EQ(collect(p.client->cq(), 1, true).size(), 1u);
    }
    p.client.reset();  // the peer goes; the target's connection stays open
    ASSERT_TRUE(eventually([] { return progress_tids().size() == 1; }))
        << "one progress thread, named remora-progress";
    const auto tids = progress_tids();
    std::this_thread::sleep_for(1s);  // the hang-up has landed; adaptive's spin has run out
    const double before = thread_cpu_ms(tids[0]);
    const double process_before = process_cpu_ms();
    const double share = runnable_share(tids[0], 2s);
    const double used = thread_cpu_ms(tids[0]) - before;
    const double process_used = process_cpu_ms() - process_before;
    const std::string what = to_string(param.policy) + std::string(unplaced ? ", unplaced" : "");
    EXPECT_LT(used, 100.0) << what << ": the progress thread used " << used
                           << " ms of CPU in 2 s beside a dead peer's open connection";
    // sockets runs a progress thread of its own inside libfabric, which polls the dead socket
    // behind an unplaced message at about 60 % of a core (measured) until the endpoint is
    // closed: the process's figure holds where the provider has no thread (tcp).
    if (param.provider != "sockets" || !unplaced) {
        EXPECT_LT(process_used, 150.0) << what << ": the process used " << process_used
                                       << " ms of CPU in 2 s (getrusage), sampling included";
    }
    // Behind an unplaced message the thread wakes up to 125 times a second (the back-off's
    // 8 ms), and on a loaded machine each wake-up waits a while for a core, which the samples
    // see as runnable now and then. A poller, yielding or not, is runnable in nearly all of them.
    const double runnable_limit = unplaced ? 0.25 : 0.05;
    EXPECT_LT(share, runnable_limit) << what << ": runnable in " << share * 100
                                     << " % of samples beside a dead peer's open connection";
    if (!unplaced) {
        auto ev = p.target->next_event(0ms);
        ASSERT_TRUE(ev.has_value()) << ev.error().what();
        EXPECT_TRUE(*ev == conn_event::closed || *ev == conn_event::lost) << to_string(*ev);
    }
}

TEST_P(progress_policies, a_dead_peer_left_open_costs_no_cpu) {
    if (GetParam().policy == progress_policy::busy)
        GTEST_SKIP() << "busy polls by contract";
    dead_peer_left_open(GetParam(), false);
}

TEST_P(progress_policies, a_dead_peer_behind_an_unplaced_message_costs_no_cpu) {
    if (GetParam().policy == progress_policy::busy)
        GTEST_SKIP() << "busy polls by contract";
    dead_peer_left_open(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(policies, progress_policies, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<policy_case>& i) {
                             return i.param.provider + "_" + to_string(i.param.policy);
                         });

// The target domain's progress thread (tests only): its sleeps and its remote-access signs, and
// blocking's waits in the provider.
struct progress_counts {
    std::uint64_t sleeps = 0;
    std::uint64_t remote_signs = 0;
    std::uint64_t provider_waits = 0;
    std::uint64_t provider_wait_timeouts = 0;
    bool provider_wait_off = false;
    std::uint64_t lingering_looks = 0;
};
progress_counts counts_of(const domain& d) {
    std::lock_guard lock(detail::impl_of(d)->progress_mu);
    const auto& e = detail::impl_of(d)->progress;
    return e ? progress_counts{e->sleeps(),
                               e->remote_signs(),
                               e->provider_waits(),
                               e->provider_wait_timeouts(),
                               e->provider_wait_off(),
                               e->lingering_looks()}
             : progress_counts{};
}

// A stream of large one-sided writes leaves no entry on the target, and tcp's CQ fd stays
// readable while the provider catches up with it: whatever the policy, the progress thread
// keeps serving it and never takes it for a peer that sends nothing the provider will take
// (the 1 to 8 ms timer that such a peer gets would hold every write up by as much). 1,024
// writes of 64 KiB, 16 in flight, take tens of milliseconds; held up, seconds.
TEST_P(progress_policies, a_stream_of_large_one_sided_writes_is_served_without_pause) {
    constexpr std::size_t size = 64 * 1024;
    constexpr int depth = 16;
    constexpr int total = 1024;
    buffer target(size * depth), local(size * depth);
    auto p = must(pair_with(GetParam().provider, GetParam().policy));
    auto [tmr, lmr, desc] = one_sided(p, target, local);
    for (int i = 0; i < depth; ++i)
        std::memset(local.bytes.data() + i * size, i + 1, size);
    const auto before = counts_of(p.target_domain);
    const auto t0 = std::chrono::steady_clock::now();
    int posted = 0, done = 0;
    while (done < total) {
        while (posted < total && posted - done < depth) {
            const std::size_t slot = static_cast<std::size_t>(posted % depth) * size;
            REMORA_ASSERT_OK(p.client->write(desc, slot, lmr, slot, size));
            ++posted;
        }
        auto c = collect(p.client->cq(), 1, true);
        ASSERT_EQ(c.size(), 1u) << "write " << done << " did not complete";
        ASSERT_TRUE(c[0].ok()) << c[0].status.message();
        ++done;
    }
    const auto took = std::chrono::steady_clock::now() - t0;
    const auto after = counts_of(p.target_domain);
    for (int i = 0; i < depth; ++i)
        ASSERT_EQ(target.bytes[static_cast<std::size_t>(i) * size + size - 1],
                  static_cast<std::byte>(i + 1));
    // A handful of timer looks may fall at the stream's edges (a look that finds the fd read
    // quiet by then); a stream taken for a stuck fd pays one per write batch, hundreds here.
    EXPECT_LE(after.lingering_looks - before.lingering_looks, 16u)
        << "the progress thread took the stream for a stuck peer and looked on its timer";
    EXPECT_LT(took, 5s) << "1,024 writes of 64 KiB took "
                        << std::chrono::duration<double>(took).count() << " s";
}

// adaptive under a stream of one-sided reads only: the target reads no completion for them, yet
// its progress thread keeps polling (the provider's FI_RMA_EVENT counter of remote accesses tells
// it they happen) and never sleeps while they stream; once they stop it sleeps again.
// Where this matters and works in 1.17: shm (its CQs have no fd, so nothing else shows a read).
// Not here: sockets and net serve one-sided operations on their own threads (remora's thread
// stays asleep through a stream, seen in this test's first version); tcp's counter never moves
// (domain.cpp) and its CQ fd keeps the spin going instead; tcp;ofi_rxm has no FI_RMA_EVENT.
class adaptive_one_sided : public testing::TestWithParam<std::string> {};

TEST_P(adaptive_one_sided, keeps_polling_while_reads_stream_then_sleeps) {
    constexpr auto spin = 50ms;  // long against a loaded machine's yield, short against the run
    buffer target(4096), local(4096);  // outlive the connections (see above)
    domain_config dc;
    dc.progress = progress_policy::adaptive;
    dc.progress_spin = spin;
    auto p = must(connect_rdm_pair(GetParam(), {}, {}, dc));
    ASSERT_TRUE(detail::impl_of(p.server_domain)->rma_events)
        << "FI_RMA_EVENT offered: a counter is open";
    auto tmr = must(memory_region::create(p.server_domain, target.span(), usage::read_source));
    auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::read_destination));
    auto desc = must(tmr.describe());
    auto read_one = [&](int i) {
        // shm may refuse a post for a moment (would_block: retry, as its message says).
        const auto limit = std::chrono::steady_clock::now() + 10s;
        auto posted = p.client->read(lmr, 0, desc, 64, 8);
        while (!posted && posted.error() == errc::would_block &&
               std::chrono::steady_clock::now() < limit)
            posted = p.client->read(lmr, 0, desc, 64, 8);
        REMORA_ASSERT_OK(posted);
        auto r = collect(p.client->cq(), 1, true);
        ASSERT_EQ(r.size(), 1u) << "read " << i << " did not complete";
        ASSERT_TRUE(r[0].ok()) << r[0].status.message();
    };
    read_one(-1);  // wakes the thread: it polls from here on
    const progress_counts before = counts_of(p.server_domain);
    // At least 100 reads and 10 spins' worth of time: a thread that sees CQ traffic only sleeps
    // about once per spin here (10 times).
    const auto start = std::chrono::steady_clock::now();
    int n = 0;
    while (n < 100 || std::chrono::steady_clock::now() - start < 10 * spin) {
        read_one(n++);
        if (HasFatalFailure())
            return;
    }
    const progress_counts during = counts_of(p.server_domain);
    // 0 on a quiet machine. Under load a thread kept off the CPU for a whole spin lapses once,
    // and the next tick's counter read (100 us later) starts the spin again: a few at most.
    // Without the counter: once per spin, and every 100 us tick after it (hundreds, measured).
    EXPECT_LE(during.sleeps - before.sleeps, 3u)
        << n << " reads streamed; the target's progress thread slept in between";
    EXPECT_GT(during.remote_signs, before.remote_signs) << "the remote-access counter moved";
    // Traffic stops: the thread sleeps within a spin (10 s is only an upper bound).
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (counts_of(p.server_domain).sleeps == during.sleeps &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(5ms);  // polling the counter, not a synchronisation
    EXPECT_GT(counts_of(p.server_domain).sleeps, during.sleeps)
        << "no sleep within 10 s of the last read";
}

INSTANTIATE_TEST_SUITE_P(providers, adaptive_one_sided, testing::Values("shm"));

// One write and one read from `c` to `desc`, each awaited; false (with a failure) if either fails.
void write_then_read(connection& c, const memory_region& lmr, const remote_region& desc) {
    REMORA_ASSERT_OK(c.write(desc, 64, lmr, 0, 8));
    auto w = collect(c.cq(), 1, true);
    ASSERT_EQ(w.size(), 1u) << "the write did not complete";
    ASSERT_TRUE(w[0].ok()) << w[0].status.message();
    REMORA_ASSERT_OK(c.read(lmr, 1024, desc, 64, 8));
    auto r = collect(c.cq(), 1, true);
    ASSERT_EQ(r.size(), 1u) << "the read did not complete";
    ASSERT_TRUE(r[0].ok()) << r[0].status.message();
}

// Until the thread has gone back to wait in the provider (10 s is only an upper bound).
std::uint64_t await_provider_wait(const domain& d, std::uint64_t after) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (counts_of(d).provider_waits <= after && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(1ms);  // polling the counter, not a synchronisation
    return counts_of(d).provider_waits;
}

// blocking, tcp, one CQ: the thread sleeps in the provider's own wait (fi_cq_sread), as plain
// libfabric's sleeping target does. Whatever changes what it must watch interrupts that wait:
// a second connection (watch: its operations are served at once, not after the wait's safety
// timeout) and a connection closing (unwatch: returns once the thread is out, before the CQ
// closes). Each missed interrupt would show as one wait that ran out its timeout
// (progress_engine::provider_wait_ms); a stalled machine may cause one, not one per cycle.
TEST(blocking_provider_wait, watch_and_unwatch_interrupt_it) {
    constexpr int cycles = 6;
    std::uint64_t timed_out = 0;
    for (int cycle = 0; cycle < cycles; ++cycle) {
        buffer target(4096), local(4096), target2(4096);  // outlive the connections
        auto p = must(pair_with("tcp", progress_policy::blocking));
        auto [tmr, lmr, desc] = one_sided(p, target, local);
        write_then_read(*p.client, lmr, desc);
        if (HasFatalFailure())
            return;
        ASSERT_GT(await_provider_wait(p.target_domain, 0), 0u)
            << "a blocking thread with one CQ on tcp waits in the provider";
        const std::uint64_t before = counts_of(p.target_domain).provider_wait_timeouts;
        // watch: a second connection of the same target domain, served by the same thread.
        auto client2 = std::async(std::launch::async, [&] {
            return connection::connect(p.client_domain, "127.0.0.1", p.lst->port());
        });
        auto req = request_while_connecting(*p.lst, client2);
        REMORA_ASSERT_OK(req);
        std::optional<connection> target_conn2(must(req->accept({.progress_thread = true})));
        std::optional<connection> c2(must(client2.get()));
        auto tmr2 = must(memory_region::create(p.target_domain, target2.span(),
                                               usage::write_destination | usage::read_source));
        write_then_read(*c2, lmr, must(tmr2.describe()));
        if (HasFatalFailure())
            return;
        c2.reset();
        target_conn2.reset();
        // unwatch while the thread waits in the provider on the first connection's CQ (back
        // there after the first connection's next operations: with two CQs it slept in epoll).
        const std::uint64_t waits = counts_of(p.target_domain).provider_waits;
        write_then_read(*p.client, lmr, desc);
        if (HasFatalFailure())
            return;
        ASSERT_GT(await_provider_wait(p.target_domain, waits), waits);
        p.target.reset();
        timed_out += counts_of(p.target_domain).provider_wait_timeouts - before;
    }
    EXPECT_LE(timed_out, 1u) << "waits in the provider ran out their timeout in " << cycles
                             << " cycles of watch and unwatch: an interrupt was missed";
}

// A provider's wait that fails (not an entry, a signal or its timeout) is given up for epoll:
// the thread neither spins on the failing call nor stops serving. fi_cq_sread fails every time
// here; the operations are still served and the idle thread sleeps.
TEST(blocking_provider_wait, a_failing_wait_falls_back_to_epoll) {
    namespace fault = detail::fabric_fault;
    const unsigned fired_before = fault::fired(detail::fabric_call::cq_sread);
    fault::arm(detail::fabric_call::cq_sread, -FI_EIO, 1'000'000);
    struct disarm_at_exit {
        ~disarm_at_exit() { detail::fabric_fault::disarm(); }
    } disarm;
    buffer target(4096), local(4096);  // outlive the connections
    auto p = must(pair_with("tcp", progress_policy::blocking));
    auto [tmr, lmr, desc] = one_sided(p, target, local);
    for (int round = 0; round < 20; ++round) {
        write_then_read(*p.client, lmr, desc);
        if (HasFatalFailure())
            return;
    }
    EXPECT_GT(fault::fired(detail::fabric_call::cq_sread), fired_before)
        << "the thread waited in the provider";
    EXPECT_TRUE(counts_of(p.target_domain).provider_wait_off);
    const auto tids = progress_tids();
    ASSERT_EQ(tids.size(), 1u);
    std::this_thread::sleep_for(200ms);  // quiet
    const double before = thread_cpu_ms(tids[0]);
    const double share = runnable_share(tids[0], 1s);
    const double used = thread_cpu_ms(tids[0]) - before;
    EXPECT_LT(used, 50.0) << "the thread spins on its failing wait: " << used << " ms in 1 s";
    EXPECT_LT(share, 0.05) << "runnable in " << share * 100 << " % of samples";
}

// Which domains open the remote-access counter: adaptive ones on shm only (domain.cpp says why);
// never busy and blocking (nothing reads it).
TEST(adaptive_one_sided_counter, opened_where_it_counts) {
    EXPECT_FALSE(detail::impl_of(must(domain::open({.provider = "tcp"})))->rma_events);
    EXPECT_FALSE(detail::impl_of(must(domain::open({.provider = "sockets"})))->rma_events);
    EXPECT_TRUE(
        detail::impl_of(must(domain::open({.provider = "shm", .endpoint = endpoint_type::rdm})))
            ->rma_events);
    domain_config blocking{.provider = "shm", .endpoint = endpoint_type::rdm};
    blocking.progress = progress_policy::blocking;
    EXPECT_FALSE(detail::impl_of(must(domain::open(blocking)))->rma_events);
}

// Bad configurations are refused with a clear error and open nothing.
TEST(progress_config, bad_values_are_refused) {
    domain_config c{.provider = "tcp"};
    c.progress = progress_policy::adaptive;
    c.progress_spin = std::chrono::microseconds(0);
    EXPECT_ERRC(domain::open(c), errc::invalid_argument);
    c.progress_spin = std::chrono::seconds(2);
    EXPECT_ERRC(domain::open(c), errc::invalid_argument);
    c.progress_spin = std::chrono::microseconds(-5);
    EXPECT_ERRC(domain::open(c), errc::invalid_argument);
    c.progress = static_cast<progress_policy>(7);
    c.progress_spin = std::chrono::microseconds(100);
    EXPECT_ERRC(domain::open(c), errc::invalid_argument);
    // The spin bound matters to adaptive only; the others take any value.
    c.progress = progress_policy::blocking;
    c.progress_spin = std::chrono::microseconds(0);
    auto d = domain::open(c);
    REMORA_ASSERT_OK(d);
    EXPECT_EQ(d->progress(), progress_policy::blocking);
    // The default is adaptive, with a 100 us spin.
    auto def = must(domain::open({.provider = "tcp"}));
    EXPECT_EQ(def.progress(), progress_policy::adaptive);
    EXPECT_EQ(def.progress_spin(), std::chrono::microseconds(100));
    EXPECT_STREQ(to_string(progress_policy::busy), "busy");
}

}  // namespace
}  // namespace remora::test

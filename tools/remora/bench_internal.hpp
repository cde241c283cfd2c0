// SPDX-License-Identifier: BSD-3-Clause
// tools/remora/bench_internal.hpp — what bench.cpp and baseline.cpp share.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common.hpp"

namespace remora::tool {

struct setup {
    std::string provider, op, wait, channel;
    std::string endpoint = "msg";  // msg: listener + connect; rdm: open_peer + attach
    bool rcq = false;
    bool callbacks = false;            // completions through op_options::callback instead of poll()
    bool coroutines = false;           // each operation awaited by a coroutine (co_op)
    std::string registration = "pre";  // pre (once), per-op, cache (registration_cache)
    unsigned connections = 1, qd = 1;
    std::size_t size = 8;
    double duration = 1.0;
    std::uint64_t count = 0;  // --count: operations per result, split over the connections
    std::string target;       // HOST:PORT of a `remora serve`; empty: a loopback target in-process
    std::string key_file;     // the target's admission key (--key-file); empty: no token
    unsigned signal_every = 1;    // connection_config::signal_every of the client connections
    bool shared_cq = false;       // the client connections share one CQ, read by one thread
    std::string versus;           // non-empty: a ratio to the result before it is printed, named so
    std::string target_progress;  // the loopback target's progress_policy; empty: the default
    unsigned target_spin_us = 0;  // its progress_spin in us; 0: the default
    bool pin = false;             // --pin: target threads on one CPU, client threads on another
    bool one_reader = false;      // --suite fanin: one thread polls every connection's own CQ
    bool more = false;   // --more: a round's reposts go as one burst (op_options::more, FI_MORE)
    unsigned parts = 4;  // --op gather: remote segments (regions) per gather_write
};

// The operations connection i posts under --count (s.count split evenly over the connections,
// the first ones taking the remainder); without --count, no limit.
inline std::uint64_t op_budget(const setup& s, unsigned i = 0) {
    if (s.count == 0)
        return UINT64_MAX;
    return s.count / s.connections + (i < s.count % s.connections ? 1 : 0);
}
// How long a result may run: s.duration, or under --count the longest -d (an hour), after which
// a run still short of its count fails (errc::timed_out).
inline double run_limit_s(const setup& s) {
    return s.count == 0 ? s.duration : 3600.0;
}

// Reaps completions of one connection the configured way. Built once per polling thread: the
// choices (wait mode, channel, which CQs) are made here, not per poll, so the bench's own loop
// costs no more than the plain-libfabric baseline's.
class reaper {
  public:
    reaper(connection& c, const setup& s)
        : c_(c),
          blocking_(s.wait == "blocking"),
          shared_channel_(c.config().channel == channel_mode::shared),
          cq_(c.cq()),
          rcq_(c.rcq()) {}

    // Returns how many completions it wrote into out.
    result<std::size_t> operator()(bool want_recv, std::span<completion> out);

  private:
    connection& c_;
    const bool blocking_, shared_channel_;
    completion_queue& cq_;
    completion_queue* const rcq_;
};

// What one client connection measured: each timed operation's latency, the operations known
// complete, and the first failure.
struct client_result {
    std::vector<std::uint32_t> lat_ns;
    std::uint64_t ops = 0;
    std::optional<error> failure;
    void fail(const error& e) { failure = e; }
};

// --op gather (bench_gather.cpp): the three operations it times in each round, QD 1, post to
// completion: (a) one gather_write over the segments, (b) the same writes posted back to back,
// until the last completes, (c) one write of one segment's size.
enum gather_kind : std::size_t { gather_all, writes_together, one_write, gather_kinds };
struct gather_result {
    client_result timed[gather_kinds];  // each kind's latencies, count and first failure
    double cpu_s[gather_kinds] = {};    // process CPU time (every thread) while each kind ran
    double wall_s[gather_kinds] = {};   // wall time each kind ran
};
// Runs rounds of the three on `c` (segments: distinct regions of the target, s.size bytes
// each) until `budget` rounds are done or `end` has passed; the first failure ends the run.
void run_gather(connection& c, std::span<const remote_region> segments, const setup& s,
                std::chrono::steady_clock::time_point end, std::uint64_t budget,
                gather_result& out);

// --pin: the CPU of the target's threads (0) and of the client's (1, or 0 on one CPU).
enum class side { target, client };
// Pins the calling thread to its side's CPU when s.pin (nothing otherwise); restores the
// thread's previous affinity when the returned guard goes.
class pinned {
  public:
    pinned(const setup& s, side who);
    ~pinned();
    pinned(const pinned&) = delete;
    pinned& operator=(const pinned&) = delete;

  private:
    bool pinned_ = false;
    unsigned char saved_[128] = {};  // a cpu_set_t
};

// Operations that go through remora's persistence layer (flush, atomics): their target exposes
// a file-backed region through a target_service.
inline bool persistence_op(const std::string& op) {
    return op == "flush-raw" || op == "flush-gpspm" || op == "atomic-write" || op == "cas" ||
           op == "fetch-add";
}

struct figures {
    std::uint64_t ops = 0;
    double seconds = 0, ops_per_s = 0, mib_per_s = 0, p50_us = 0, p99_us = 0, p999_us = 0,
           cpu_us_per_op = 0;
    bool has_latency = true;  // false: no operation's own completion was seen (p* are 0)
};

// Process CPU time (user + system) in seconds.
double cpu_seconds();
// Figures from per-operation latencies (ns), wall seconds and CPU seconds.
result<figures> summarize(std::vector<std::uint32_t>& lat_ns, double seconds, double cpu,
                          std::size_t size);
// The same for `ops` operations known complete, of which those in lat_ns were timed (none:
// figures::has_latency is false).
result<figures> summarize(std::vector<std::uint32_t>& lat_ns, std::uint64_t ops, double seconds,
                          double cpu, std::size_t size);
// The same workload through plain libfabric (write, read, send; one connection). The client
// reaps as s.wait says. The target either as remora's in the same run (busy_target false: a
// one-sided target sleeps in its CQ's wait, a send target reaps as s.wait) or in the fastest
// arrangement plain libfabric offers (busy_target: it polls its CQ in a loop).
result<figures> run_baseline(const setup& s, bool busy_target);
// The same over reliable datagram endpoints (FI_EP_RDM, an address vector; baseline_rdm.cpp).
result<figures> run_baseline_rdm(const setup& s);

}  // namespace remora::tool

// SPDX-License-Identifier: BSD-3-Clause
// tools/remora/bench_internal.hpp — what the bench's files (bench*.cpp, baseline*.cpp) share.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench_ops.hpp"
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
    bool same_host = false;       // --same-host on: loopback connections take the same-host path
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

// --wait blocking: completions are waited for (otherwise polled in a loop).
inline bool blocking_wait(const setup& s) {
    return s.wait == "blocking";
}

// Reaps completions of one connection the configured way. Built once per polling thread: the
// choices (wait mode, channel, which CQs) are made here, not per poll, so the bench's own loop
// costs no more than the plain-libfabric baseline's.
class reaper {
  public:
    reaper(connection& c, const setup& s)
        : c_(c),
          blocking_(blocking_wait(s)),
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
    alignas(unsigned long) unsigned char saved_[128] = {};  // a cpu_set_t, aligned as one
};

// Operations that go through remora's persistence layer (flush, atomics): their target exposes
// a file-backed region through a target_service.
inline bool persistence_op(const std::string& op) {
    return op_of(op).persistence;
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

// --- Processes beside the bench's own (bench_apart.cpp) ---

// A child process whose standard output (and optionally standard error) the bench reads.
// Destroyed while still running, it is killed.
class child_process {
  public:
    child_process() = default;
    ~child_process();
    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;
    // argv[0]: a path, or a name looked up on PATH (errc::not_supported: no such program);
    // env_extra: NAME=VALUE entries added to this process's environment.
    result<void> start(const std::vector<std::string>& argv,
                       const std::vector<std::string>& env_extra, bool with_stderr);
    // Reads its output until it closes it, then reaps it; killed after timeout_s
    // (errc::timed_out).
    result<void> finish(double timeout_s);
    // Still running (reaps it when it has ended).
    bool running();
    bool succeeded() const;
    int exit_status() const { return exit_; }
    double cpu_s() const { return cpu_s_; }  // user + system CPU seconds, once reaped
    const std::string& output() const { return out_; }
    std::string last_line() const;

  private:
    pid_t pid_ = -1;
    int fd_ = -1;
    int exit_ = -1;
    double cpu_s_ = 0;
    std::string out_;
};

// The plain-libfabric baseline (run_baseline, run_baseline_rdm) in a process of its own: this
// program re-executed with baseline_verb (common.hpp), the setup handed over as JSON and the
// figures read back.
result<figures> run_baseline_apart(const setup& s, bool busy_target);

// --- Independent programs beside remora (bench_anchor.cpp) ---

// What an anchor (fi_pingpong, ucx_perftest) measured beside a result, or why it did not run.
struct anchor_result {
    std::string name;           // the program
    std::optional<figures> f;   // ops/s: round trips; latency: see below
    double half_rtt_us = 0;     // as the program reports it (a mean for fi_pingpong)
    bool mean_latency = false;  // f->p50_us is a mean round trip, not a median
    std::string skipped;        // non-empty: why it has no figures
};
// The anchors that apply to the result `s` measured `remora` (a send ping-pong at QD 1 on one
// connection; none for other rows), each run as its own client and server processes.
std::vector<anchor_result> run_anchors(const std::vector<std::string>& names, const setup& s,
                                       const figures& remora);
// Whether an anchor's program is on PATH.
bool anchor_installed(const std::string& name);

// --- Options to setups (bench_config.cpp) ---

constexpr std::size_t request_size = 16;  // gpspm flush request: offset + length

endpoint_type endpoint_of(const std::string& e);
inline bool rdm(const setup& s) {
    return endpoint_of(s.endpoint) == endpoint_type::rdm;
}
// The completion channels of a connection (--channel).
channel_mode channel_of(const setup& s);
// Its name: "separate", "shared" or "none".
std::string channel_name(const setup& s);
// The loopback target's progress policy (--target-progress; the library default when unset).
progress_policy target_policy(const setup& s);
// The configuration of a connection of the loopback target's (target) or the client's.
connection_config config_for(const setup& s, bool target);
// A client connection's configuration: to the loopback target, or to a `remora serve`
// (remote), which serves flushes and atomics to one request per operation in flight.
connection_config client_config(const setup& s, bool remote);
// The service depth client_config(s, remote) gives its connections (0: none).
std::uint32_t client_service_depth(const setup& s, bool remote);
// Writes under --signal-every N > 1: posted with completion_mode::on_error, up to N - 1 in a row
// without a completion (see class client).
bool quiet_writes(const setup& s);
// Completions through poll(), per-operation callbacks or coroutines.
void set_completion(setup& s, completion_style how);
// The setup the options describe (their first --op and --size); a suite's rows start from it.
setup setup_of(const bench_options& o);
// Refuses a setup whose options do not go together (the message names them).
result<void> validate(const setup& s);

// --- Suites (bench_suites.cpp) ---

// The setups to run: the rows of o.suite, or every --op at every --size.
std::vector<setup> setups_of(const bench_options& o);
// A suite that runs on its own instead of as rows of results (--suite connect), or nullptr.
using suite_runner = int (*)(const bench_options&);
suite_runner runner_of(const std::string& suite);
// Whether the suite shows each result beside plain libfabric and the anchors (the default one).
bool suite_compares(const std::string& suite);

// --- Running one setup (bench_run.cpp) ---

// What run_one measured: the result and, for --op gather, the two it is compared with, measured
// in the same run.
struct measured {
    figures f;
    std::optional<figures> together, one;  // --op gather: its writes posted together; one write
};
result<measured> run_one(const setup& s);

// --- Output (bench_output.cpp) ---

// The op column: the operation, how it completes, how its buffer is registered.
std::string label(const setup& s);
// Draws ops/s and latency (p50, p99) per result into a PNG with gnuplot.
result<void> plot(const std::vector<std::pair<setup, figures>>& rows, const std::string& png);

// What a result is compared with: the result before it (a suite's paired rows, setup::versus)
// and plain libfabric (--baseline: the target as remora's in this run, and busy-polling).
struct compared {
    std::optional<figures> versus, base, busy_base;
    // --same-host on: plain libfabric over shm (RDM endpoints, its target busy-polls), the
    // medium the path uses, beside the provider asked for (base, busy_base).
    std::optional<figures> shm_base;
    std::vector<anchor_result> anchors;  // --anchor: independent programs on the same workload
};

// Prints the results: a table (with the ratio rows) or one JSON object per result.
class printer {
  public:
    // provider: the one the run uses (the automatic choice resolved), for the column's width.
    printer(const bench_options& o, const std::string& provider);
    // The loopback target's progress policy and the column names (nothing under --json).
    void header() const;
    void print(const setup& s, const measured& m, const compared& vs);
    // The note on "-" in the latency columns, when one was printed.
    void footer() const;

  private:
    void json(const setup& s, const measured& m, const compared& vs) const;
    void table(const setup& s, const measured& m, const compared& vs);
    void row(const std::string& prov, const setup& s, const figures& f);
    void anchor(const setup& s, const measured& m, const anchor_result& a, const figures* plain);

    const bench_options& o_;
    const std::size_t pw_;            // the provider column's width
    bool no_latency_ = false;         // a latency column printed "-"
    std::vector<std::string> notes_;  // the notes printed (each once)
};

}  // namespace remora::tool

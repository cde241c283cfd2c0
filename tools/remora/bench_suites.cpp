// SPDX-License-Identifier: BSD-3-Clause
// `remora bench --suite`: the predefined sets of results, as data. Each suite is a list of rows,
// each row what it sets over the setup the options describe (setup_of), or a run of its own
// (--suite connect). Without --suite, every --op runs at every --size.
#include <optional>
#include <span>
#include <string_view>

#include "bench_internal.hpp"

namespace remora::tool {
namespace {

// One result of a suite: what it sets; what it leaves unset (0, empty) stays as the options say.
// Suites start with one completion in one (signal_every 1) and a CQ per connection.
struct row {
    std::string_view op{};
    std::size_t size = 0;
    unsigned qd = 0, conns = 0;
    std::string_view wait{}, channel{};
    bool rcq = false;  // true: receives on a receive CQ (false: as --rcq says)
    std::optional<completion_style> reap{};  // --completion
    std::string_view reg{};                  // --registration
    unsigned signal_every = 1;
    bool shared_cq = false, one_reader = false;
    std::string_view versus{};  // non-empty: the ratio to the row before, named so
};

struct suite {
    std::string_view name, description;
    std::span<const row> rows;
    suite_runner run = nullptr;  // instead of rows
    bool compares = false;       // each result beside both baselines and the anchors
};

constexpr std::string_view busy = "busy";
constexpr auto poll = completion_style::poll;
constexpr auto callback = completion_style::callback;
constexpr auto coroutine = completion_style::coroutine;

// clang-format off
// GPSPM request/response with CQ + RCQ, blocking waits on both sides: the completion channel
// question librpma left open, at 1 and 8 connections.
constexpr row channel_rows[] = {
    {.op = "gpspm", .qd = 1, .conns = 1, .wait = "blocking", .channel = "separate", .rcq = true},
    {.op = "gpspm", .qd = 1, .conns = 1, .wait = "blocking", .channel = "shared", .rcq = true},
    {.op = "gpspm", .qd = 1, .conns = 8, .wait = "blocking", .channel = "separate", .rcq = true},
    {.op = "gpspm", .qd = 1, .conns = 8, .wait = "blocking", .channel = "shared", .rcq = true},
    // The same with no completion asked for the requests nobody reads (one in 16 signalled),
    // on both sides.
    {.op = "gpspm", .qd = 1, .conns = 8, .wait = "blocking", .channel = "separate", .rcq = true,
     .signal_every = 16},
    {.op = "gpspm", .qd = 1, .conns = 8, .wait = "blocking", .channel = "shared", .rcq = true,
     .signal_every = 16},
};

constexpr row slots[] = {
    // The same 8-byte write through poll(), per-operation callbacks and coroutines.
    {.op = "write", .size = 8, .qd = 1, .conns = 1, .wait = busy, .reap = poll, .reg = "pre"},
    {.op = "write", .size = 8, .qd = 1, .conns = 1, .wait = busy, .reap = callback, .reg = "pre"},
    {.op = "write", .size = 8, .qd = 1, .conns = 1, .wait = busy, .reap = coroutine, .reg = "pre"},
    // 4 KiB writes whose buffer is registered once, per operation, or through the cache.
    {.op = "write", .size = 4096, .qd = 4, .conns = 1, .wait = busy, .reap = poll, .reg = "pre"},
    {.op = "write", .size = 4096, .qd = 4, .conns = 1, .wait = busy, .reap = poll, .reg = "per-op"},
    {.op = "write", .size = 4096, .qd = 4, .conns = 1, .wait = busy, .reap = poll, .reg = "cache"},
    // Selective signalling: 8-byte writes at qd 16 with a completion each, then one per 16
    // (counted as their entries are reclaimed); and 8 connections with a CQ (and a thread)
    // each, then one shared CQ read by one thread. The second of each pair prints the ratio.
    {.op = "write", .size = 8, .qd = 16, .conns = 1, .wait = busy, .reap = poll, .reg = "pre"},
    {.op = "write", .size = 8, .qd = 16, .conns = 1, .wait = busy, .reap = poll, .reg = "pre",
     .signal_every = 16, .versus = "signal_every 16 / 1"},
    {.op = "write", .size = 8, .qd = 1, .conns = 8, .wait = busy, .reap = poll, .reg = "pre"},
    {.op = "write", .size = 8, .qd = 1, .conns = 8, .wait = busy, .reap = poll, .reg = "pre",
     .shared_cq = true, .versus = "shared CQ / CQ per connection"},
};

// Many connections, one reader: 8-byte writes at qd 4 over 1, 8 and 32 connections, each with
// a CQ and a client thread of its own, then all on one shared CQ read by one thread, then each
// with a CQ of its own but one thread reading them all in turn (the second and third print the
// ratio to the one before). cpu_us_per_op is the whole process's (client threads, the loopback
// target and its progress thread).
constexpr row fanin[] = {
    {.op = "write", .size = 8, .qd = 4, .conns = 1, .wait = busy, .reap = poll, .reg = "pre"},
    {.op = "write", .size = 8, .qd = 4, .conns = 1, .wait = busy, .reap = poll, .reg = "pre",
     .shared_cq = true, .versus = "shared CQ / CQ per connection"},
    {.op = "write", .size = 8, .qd = 4, .conns = 1, .wait = busy, .reap = poll, .reg = "pre",
     .one_reader = true, .versus = "one reader of every CQ / shared CQ"},
    {.op = "write", .size = 8, .qd = 4, .conns = 8, .wait = busy, .reap = poll, .reg = "pre"},
    {.op = "write", .size = 8, .qd = 4, .conns = 8, .wait = busy, .reap = poll, .reg = "pre",
     .shared_cq = true, .versus = "shared CQ / CQ per connection"},
    {.op = "write", .size = 8, .qd = 4, .conns = 8, .wait = busy, .reap = poll, .reg = "pre",
     .one_reader = true, .versus = "one reader of every CQ / shared CQ"},
    {.op = "write", .size = 8, .qd = 4, .conns = 32, .wait = busy, .reap = poll, .reg = "pre"},
    {.op = "write", .size = 8, .qd = 4, .conns = 32, .wait = busy, .reap = poll, .reg = "pre",
     .shared_cq = true, .versus = "shared CQ / CQ per connection"},
    {.op = "write", .size = 8, .qd = 4, .conns = 32, .wait = busy, .reap = poll, .reg = "pre",
     .one_reader = true, .versus = "one reader of every CQ / shared CQ"},
};

// Flush latency by method and each atomic path side by side, then the append log: a record
// written and flushed to persistence (GPSPM) at sizes 64 B .. 64 KiB.
constexpr row persistence[] = {
    {.op = "flush-raw", .size = 8, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "flush-gpspm", .size = 8, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "atomic-write", .size = 8, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "cas", .size = 8, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "fetch-add", .size = 8, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "flush-gpspm", .size = 64, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "flush-gpspm", .size = 1024, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "flush-gpspm", .size = 16384, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "flush-gpspm", .size = 65536, .qd = 1, .conns = 1, .wait = "blocking"},
};

// What a user would pick for each workload, beside plain libfabric (in a process of its own,
// its target as remora's and busy-polling) and fi_pingpong: one-sided 8 B write and read
// busy-polling; the send ping-pong busy-polling on both sides, as fi_pingpong runs, and with
// blocking waits (beside plain libfabric blocking the same way: on a machine without a free
// core for each busy poller the busy row measures the scheduler); GPSPM request/response and the
// append log blocking; then 64 KiB writes at qd 16.
constexpr row defaults[] = {
    {.op = "write", .size = 8, .qd = 1, .conns = 1, .wait = busy},
    {.op = "read", .size = 8, .qd = 1, .conns = 1, .wait = busy},
    {.op = "send", .size = 8, .qd = 1, .conns = 1, .wait = busy},
    {.op = "send", .size = 8, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "gpspm", .size = 8, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "flush-gpspm", .size = 8, .qd = 1, .conns = 1, .wait = "blocking"},
    {.op = "write", .size = 65536, .qd = 16, .conns = 1},
};
// clang-format on

// In the order --help lists them.
constexpr suite suites[] = {
    {"default",
     "write, read, send (busy and blocking), gpspm and flush-gpspm at 8 B, and 64 KiB writes at "
     "qd 16, beside plain libfabric (a process of its own) and fi_pingpong",
     defaults, nullptr, true},
    {"channels",
     "GPSPM request/response with CQ + RCQ, blocking waits on both sides, separate vs shared "
     "completion channels at 1 and 8 connections, and at 8 with one request in 16 signalled",
     channel_rows},
    {"persistence",
     "flush latency by method, each atomic path, and the append log (write + GPSPM flush) at "
     "64 B .. 64 KiB",
     persistence},
    {"slots",
     "poll vs callbacks vs coroutines, registration once vs per operation vs cached, selective "
     "signalling, a CQ per connection vs one shared CQ",
     slots},
    {"connect",
     "many connections set up at once from one thread (connect_async)",
     {},
     &run_connect_bench},
    {"fanin",
     "1, 8 and 32 connections: a CQ and thread each vs one shared CQ vs one reader of every CQ",
     fanin},
};

// The base setup with what the row sets.
setup apply(setup s, const row& r) {
    s.op = r.op;
    if (r.size != 0)
        s.size = r.size;
    if (r.qd != 0)
        s.qd = r.qd;
    if (r.conns != 0)
        s.connections = r.conns;
    if (!r.wait.empty())
        s.wait = r.wait;
    if (!r.channel.empty())
        s.channel = r.channel;
    s.rcq = s.rcq || r.rcq;
    if (r.reap)
        set_completion(s, *r.reap);
    if (!r.reg.empty())
        s.registration = r.reg;
    s.signal_every = r.signal_every;
    s.shared_cq = r.shared_cq;
    s.one_reader = r.one_reader;
    s.versus = r.versus;
    return s;
}

}  // namespace

std::vector<std::string> bench_suites() {
    return names_of(suites);
}

suite_runner runner_of(const std::string& name) {
    const suite* s = find_named(suites, name);
    return s != nullptr ? s->run : nullptr;
}

bool suite_compares(const std::string& name) {
    const suite* s = find_named(suites, name);
    return s != nullptr && s->compares;
}

std::vector<setup> setups_of(const bench_options& o) {
    const setup base = setup_of(o);
    std::vector<setup> out;
    if (const suite* s = find_named(suites, o.suite)) {
        for (const row& r : s->rows)
            out.push_back(apply(base, r));
        return out;
    }
    for (const std::string& op : o.ops) {
        for (std::size_t size : o.sizes) {
            setup s = base;
            s.op = op;
            s.size = size;
            out.push_back(s);
        }
    }
    return out;
}

}  // namespace remora::tool

// SPDX-License-Identifier: BSD-3-Clause
// `remora bench`: workloads against a loopback target started in this process.
//
// Operations: write, read (one-sided, `qd` in flight), send (ping-pong: the target echoes), gpspm
// (write, then a flush request message the target answers, written with send/recv: librpma's
// GPSPM request/response, the completion-channel workload), and through remora's persistence
// layer: flush-raw (write, then a read-after-write flush for visibility), flush-gpspm (write,
// then connection::flush to persistence through the target service: the append-log workload),
// atomic-write, cas, fetch-add (native atomics where the provider has them, else the service).
// Completions are reaped by busy polling or blocking waits, with separate or shared completion
// channels, receives on the CQ or a separate receive CQ, a CQ per connection or one shared CQ
// (--shared-cq), every write/send signalled or one in N (--signal-every). Figures: operations/s,
// MiB/s, latency percentiles (post to completion; request to reply; none for unsignalled
// writes), and process CPU time per operation.
//
// The bench's files: bench_config.cpp (options to setups, their checks, connection
// configurations), bench_suites.cpp (--suite: the suites as tables of rows), bench_run.cpp (one
// result: target, connections, loops, figures), bench_target.cpp (the loopback target),
// bench_client.cpp and bench_loops.cpp (the client connections), bench_gather.cpp (--op gather),
// bench_measure.cpp (figures, CPU time, pinning, reaping), bench_output.cpp (table, JSON, plot),
// baseline.cpp and baseline_rdm.cpp (plain libfabric), bench_apart.cpp (the baseline in a
// process of its own), bench_anchor.cpp (independent programs beside: fi_pingpong,
// ucx_perftest), bench_connect.cpp (--suite connect).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "bench_internal.hpp"

namespace remora::tool {
namespace {

// The baselines cover what plain libfabric code in baseline.cpp (MSG) and baseline_rdm.cpp
// (RDM) does: write, read and send on one connection with a CQ of its own, one completion each
// (a send under --signal-every too: the baseline's sends ask for no completion). MSG: two, the
// target as remora's in this run and busy-polling; RDM: one, its target busy-polls; with
// --same-host on also plain shm RDM (the path's medium). Each runs in a process of its own
// (--baseline-in-process: in this one, after remora's result).
result<void> run_baselines(const setup& s, bool in_process, compared& vs) {
    if (!(op_of(s.op).baseline && s.connections == 1 && !s.rcq &&
          channel_of(s) != channel_mode::shared &&
          (s.signal_every == 1 || op_of(s.op).kind == op_kind::send) && !s.shared_cq))
        return {};
    auto run = [&](bool busy_target) {
        if (!in_process)
            return run_baseline_apart(s, busy_target);
        return rdm(s) ? run_baseline_rdm(s) : run_baseline(s, busy_target);
    };
    auto b = run(false);
    if (!b)
        return fail(b.error());
    vs.base = *b;
    if (!rdm(s)) {
        auto bb = run(true);
        if (!bb)
            return fail(bb.error());
        vs.busy_base = *bb;
    }
    if (s.same_host) {
        setup shm = s;
        shm.endpoint = "rdm";
        shm.provider = "shm";
        shm.same_host = false;
        auto sb = in_process ? run_baseline_rdm(shm) : run_baseline_apart(shm, false);
        if (!sb)
            return fail(sb.error());
        vs.shm_base = *sb;
    }
    return {};
}

}  // namespace

int run_bench(const bench_options& o) {
    if (const suite_runner run = runner_of(o.suite))
        return run(o);
    // Options that do not go together are a bad argument (64), found before anything opens.
    for (const setup& s : setups_of(o)) {
        if (auto r = validate(s); !r) {
            report_line("bench", r.error().message());
            return 64;
        }
    }
    bench_options resolved = o;
    if (resolved.provider.empty()) {
        // Name the provider the automatic choice lands on, in the table and for the baseline.
        auto d =
            domain::open({.provider = "", .endpoint = endpoint_of(o.endpoint), .same_host = false});
        if (!d)
            return report("bench", d.error());
        resolved.provider = d->caps().provider;
    }
    // A suite that compares (the default one) brings both baselines and the anchors installed.
    if (suite_compares(o.suite)) {
        resolved.baseline = true;
        for (const char* a : {"fi_pingpong", "ucx_perftest"}) {
            const bool wanted = std::string(a) == "fi_pingpong" || anchor_installed(a);
            if (wanted && std::find(resolved.anchors.begin(), resolved.anchors.end(), a) ==
                              resolved.anchors.end())
                resolved.anchors.emplace_back(a);
        }
    }
    const auto setups = setups_of(resolved);
    printer out(resolved, resolved.provider);
    out.header();
    std::vector<std::pair<setup, figures>> plotted;
    for (setup s : setups) {
        if (quiet_writes(s) && s.qd < s.signal_every) {
            // Writes left unsignalled stay in flight until a signalled one completes: fewer
            // than N in flight would never reach one.
            fmt::print(stderr,
                       "remora bench: --signal-every {} keeps {} writes in flight (qd {})\n",
                       s.signal_every, s.signal_every, s.qd);
            s.qd = s.signal_every;
        }
        auto m = run_one(s);
        if (!m)
            return report("bench", m.error());
        compared vs;
        // A paired result (the slots and fanin suites): the ratio to the result before it.
        if (!s.versus.empty() && !plotted.empty())
            vs.versus = plotted.back().second;
        plotted.emplace_back(s, m->f);
        if (resolved.baseline) {
            if (auto r = run_baselines(s, o.baseline_in_process, vs); !r)
                return report("bench --baseline", r.error());
        }
        vs.anchors = run_anchors(resolved.anchors, s, m->f);
        out.print(s, *m, vs);
    }
    out.footer();
    if (!o.plot.empty()) {
        if (auto r = plot(plotted, o.plot); !r)
            return report("bench --plot", r.error());
    }
    return 0;
}

}  // namespace remora::tool

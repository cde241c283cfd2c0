// SPDX-License-Identifier: BSD-3-Clause
// `remora bench`: the output: the table and its ratio rows, one JSON object per result, and the
// plot of the results (gnuplot).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "bench_internal.hpp"

namespace remora::tool {
namespace {

// Gigabits per second (10^9 bits, as perftest's --report_gbits and link speeds count).
double gbit_per_s(const figures& f) {
    return f.mib_per_s * 1048576.0 * 8 / 1e9;
}

nlohmann::json as_json(const figures& f) {
    auto us = [&](double v) { return f.has_latency ? nlohmann::json(v) : nlohmann::json(); };
    return nlohmann::json{{"ops", f.ops},
                          {"seconds", f.seconds},
                          {"ops_per_s", f.ops_per_s},
                          {"mib_per_s", f.mib_per_s},
                          {"gbit_per_s", gbit_per_s(f)},
                          {"p50_us", us(f.p50_us)},
                          {"p99_us", us(f.p99_us)},
                          {"p999_us", us(f.p999_us)},
                          {"cpu_us_per_op", f.cpu_us_per_op}};
}

// The op column's suffixes: how the operation completes, how its buffer is registered.
constexpr std::pair<std::string_view, std::string_view> registration_labels[] = {{"per-op", "+reg"},
                                                                                 {"cache", "+rc"}};

}  // namespace

// The op column: the operation, how it completes, how its buffer is registered.
std::string label(const setup& s) {
    std::string l = s.op;
    if (op_of(s.op).kind == op_kind::gather)
        l += fmt::format(" x{}", s.parts);
    if (s.callbacks)
        l += "+cb";
    if (s.coroutines)
        l += "+co";
    l += pick(registration_labels, s.registration, std::string_view{});
    if (s.signal_every > 1)
        l += fmt::format("+s{}", s.signal_every);
    if (s.shared_cq)
        l += "+scq";
    if (s.one_reader)
        l += "+1r";
    return l;
}

// Draws ops/s and latency (p50, p99) per result into a PNG with gnuplot.
result<void> plot(const std::vector<std::pair<setup, figures>>& rows, const std::string& png) {
    const char* tmp = std::getenv("TMPDIR");
    std::string data = std::string(tmp != nullptr ? tmp : "/tmp") + "/remora-plot-XXXXXX";
    const int fd = ::mkstemp(data.data());
    if (fd < 0)
        return fail(errc::invalid_argument, "cannot create a temporary file for the plot data");
    std::string text;
    for (const auto& [s, f] : rows) {
        // gnuplot skips NaN: no latency bars for results without latencies.
        // A copy, not the binding: clang 14 cannot capture structured bindings.
        const bool has_latency = f.has_latency;
        auto us = [&](double v) { return has_latency ? fmt::format("{:.2f}", v) : "NaN"; };
        text += fmt::format("\"{} {}B qd{}{}\" {:.0f} {} {}\n", label(s), s.size, s.qd,
                            s.connections > 1 ? fmt::format(" x{}", s.connections) : "",
                            f.ops_per_s, us(f.p50_us), us(f.p99_us));
    }
    const bool wrote = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!wrote)
        return fail(errc::invalid_argument, "cannot write the plot data");
    const std::string script = fmt::format(
        "set terminal pngcairo size 1200,800 font ',10'; set output '{}';"
        "set multiplot layout 2,1 title 'remora bench';"
        "set style data histograms; set style histogram clustered; set style fill solid 0.8;"
        "set xtics rotate by -30; set grid ytics; set key top left;"
        "set logscale y; set yrange [1:*];"
        "set ylabel 'operations/s'; plot '{}' using 2:xtic(1) title 'ops/s';"
        "set ylabel 'latency (us)';"
        "plot '{}' using 3:xtic(1) title 'p50', '' using 4 title 'p99';"
        "unset multiplot",
        png, data, data);
    const std::string cmd = "gnuplot -e \"" + script + "\" 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    if (p != nullptr) {
        char buf[256];
        while (std::fgets(buf, sizeof(buf), p) != nullptr)
            out += buf;
    }
    const int status = p != nullptr ? ::pclose(p) : -1;
    ::unlink(data.c_str());
    if (status != 0)
        return fail(errc::not_supported,
                    "gnuplot failed (install gnuplot-nox): " + out.substr(0, out.find('\n')));
    return {};
}

// The provider column fits "fi:" and the longest name (tcp;ofi_rxm), and the anchors' names.
printer::printer(const bench_options& o, const std::string& provider)
    : o_(o), pw_(std::max<std::size_t>(o.anchors.empty() ? 8 : 12, 3 + provider.size())) {}

void printer::header() const {
    if (o_.json)
        return;
    if (o_.target.empty() && endpoint_of(o_.endpoint) != endpoint_type::rdm) {
        setup first;
        first.target_progress = o_.target_progress;
        const progress_policy pol = target_policy(first);
        const auto spin =
            o_.target_spin_us != 0 ? o_.target_spin_us : domain_config{}.progress_spin.count();
        fmt::print("target progress: {} ({}the loopback target's progress thread)\n",
                   to_string(pol),
                   pol == progress_policy::adaptive ? fmt::format("spin {} us; ", spin) : "");
    }
    if (endpoint_of(o_.endpoint) == endpoint_type::rdm)
        fmt::print("endpoint: rdm (peers over an address vector)\n");
    else if (o_.same_host == "on" && o_.target.empty())
        fmt::print("path: same-host (each connection's operations go over shared memory)\n");
    if (o_.baseline || !o_.anchors.empty()) {
        // What each column and row means, in one line.
        fmt::print(
            "columns: ops/s operations a second (send: round trips); MiB/s, Gb/s payload; p50, "
            "p99, p99.9 us post to completion (send: request to reply; ~: a mean); cpu us/op "
            "CPU of client and target per op. rows: PROVIDER remora; fi:PROVIDER/same plain "
            "libfabric, target as remora's; fi:PROVIDER/busy plain libfabric, target "
            "busy-polls ({}){}\n",
            o_.baseline_in_process ? "in this process" : "a process of its own",
            o_.anchors.empty() ? ""
                               : "; fi_pingpong, ucx_perftest: those programs, server and "
                                 "client processes");
    }
    fmt::print(
        "{:<{}} {:<12} {:>7} {:>3} {:>5} {:<9} {:<8} {:>4} {:>11} {:>9} {:>7} {:>8} {:>8} "
        "{:>8} {:>9}\n",
        "provider", pw_, "op", "size", "qd", "conns", "wait", "channel", "rcq", "ops/s", "MiB/s",
        "Gb/s", "p50 us", "p99 us", "p99.9 us", "cpu us/op");
}

// Latency columns print "-" (JSON null) where no operation's own completion was timed.
void printer::row(const std::string& prov, const setup& s, const figures& f) {
    auto us = [&](double v) { return f.has_latency ? fmt::format("{:.1f}", v) : std::string("-"); };
    no_latency_ = no_latency_ || !f.has_latency;
    fmt::print(
        "{:<{}} {:<12} {:>7} {:>3} {:>5} {:<9} {:<8} {:>4} {:>11.0f} {:>9.1f} {:>7.3f} {:>8} "
        "{:>8} {:>8} {:>9.2f}\n",
        prov, pw_, label(s), s.size, s.qd, s.connections, s.wait, channel_name(s),
        s.rcq ? "yes" : "no", f.ops_per_s, f.mib_per_s, gbit_per_s(f), us(f.p50_us), us(f.p99_us),
        us(f.p999_us), f.cpu_us_per_op);
}

void printer::print(const setup& s, const measured& m, const compared& vs) {
    if (o_.json)
        json(s, m, vs);
    else
        table(s, m, vs);
    std::fflush(stdout);
}

void printer::footer() const {
    if (no_latency_) {
        fmt::print(
            "-: no latency: under --signal-every writes complete unsignalled; they are counted "
            "when their entries are reclaimed\n");
    }
}

void printer::json(const setup& s, const measured& m, const compared& vs) const {
    const std::string& prov = s.provider;
    nlohmann::json j = {{"provider", prov}, {"endpoint", s.endpoint},
                        {"op", s.op},       {"size", s.size},
                        {"qd", s.qd},       {"connections", s.connections},
                        {"wait", s.wait},   {"channel", channel_name(s)},
                        {"rcq", s.rcq}};
    j["completion"] = s.callbacks ? "callback" : s.coroutines ? "coroutine" : "poll";
    j["registration"] = s.registration;
    j["signal_every"] = s.signal_every;
    j["shared_cq"] = s.shared_cq;
    j["one_reader"] = s.one_reader;
    j.update(as_json(m.f));
    if (vs.versus) {
        j["versus"] = {{"what", s.versus},
                       {"ratio_ops_per_s", m.f.ops_per_s / vs.versus->ops_per_s},
                       {"ratio_cpu_us_per_op", m.f.cpu_us_per_op / vs.versus->cpu_us_per_op}};
        if (m.f.has_latency && vs.versus->has_latency)
            j["versus"]["ratio_p50"] = m.f.p50_us / vs.versus->p50_us;
    }
    if (s.target.empty() && !rdm(s)) {
        j["same_host"] = s.same_host;
        j["target_progress"] = to_string(target_policy(s));
        if (target_policy(s) == progress_policy::adaptive)
            j["target_spin_us"] = s.target_spin_us != 0
                                      ? std::int64_t{s.target_spin_us}
                                      : std::int64_t{domain_config{}.progress_spin.count()};
    }
    if (m.together) {
        j["parts"] = s.parts;
        j["writes_together"] = as_json(*m.together);
        j["one_write"] = as_json(*m.one);
        j["ratio_p50_writes_together"] = m.f.p50_us / m.together->p50_us;
        j["ratio_p99_writes_together"] = m.f.p99_us / m.together->p99_us;
        j["ratio_p50_one_write"] = m.f.p50_us / m.one->p50_us;
        j["ratio_p99_one_write"] = m.f.p99_us / m.one->p99_us;
    }
    if (vs.base) {
        j["baseline"] = as_json(*vs.base);
        j["ratio_ops_per_s"] = m.f.ops_per_s / vs.base->ops_per_s;
        j["ratio_p50"] = m.f.p50_us / vs.base->p50_us;
    }
    if (vs.shm_base) {
        j["baseline_shm"] = as_json(*vs.shm_base);
        j["ratio_shm_ops_per_s"] = m.f.ops_per_s / vs.shm_base->ops_per_s;
        j["ratio_shm_p50"] = m.f.p50_us / vs.shm_base->p50_us;
    }
    if (vs.busy_base) {
        j["baseline_busy_target"] = as_json(*vs.busy_base);
        j["ratio_busy_target_ops_per_s"] = m.f.ops_per_s / vs.busy_base->ops_per_s;
        j["ratio_busy_target_p50"] = m.f.p50_us / vs.busy_base->p50_us;
    }
    // Anchors: their figures under their name (p50_us null where the program reports a mean:
    // mean_rtt_us), or why they did not run; remora's ops/s (and p50) over theirs.
    for (const anchor_result& a : vs.anchors) {
        if (!a.f) {
            j[a.name] = {{"skipped", a.skipped}};
            continue;
        }
        figures f = *a.f;
        nlohmann::json aj = as_json(f);
        aj["p99_us"] = nullptr;
        aj["p999_us"] = nullptr;
        aj["half_rtt_us"] = a.half_rtt_us;
        if (a.mean_latency) {
            aj["p50_us"] = nullptr;
            aj["mean_rtt_us"] = f.p50_us;
        }
        j[a.name] = aj;
        j["ratio_" + a.name + "_ops_per_s"] = m.f.ops_per_s / f.ops_per_s;
        if (const auto& plain = vs.busy_base ? vs.busy_base : vs.base)
            j["ratio_baseline_" + a.name + "_ops_per_s"] = plain->ops_per_s / f.ops_per_s;
        if (!a.mean_latency && m.f.has_latency)
            j["ratio_" + a.name + "_p50"] = m.f.p50_us / f.p50_us;
    }
    fmt::print("{}\n", j.dump());
}

void printer::table(const setup& s, const measured& m, const compared& vs) {
    const std::string& prov = s.provider;
    row(prov, s, m.f);
    if (m.together) {
        // --op gather: its writes posted together, then one write, from the same run.
        setup plain = s;
        plain.op = fmt::format("write x{}", s.parts);
        row(prov, plain, *m.together);
        plain.op = "write x1";
        row(prov, plain, *m.one);
        auto ratio = [&](const std::string& what, const figures& b) {
            fmt::print("{:<{}} {} / {}: p50 x{:.3f}, p99 x{:.3f}\n", "ratio", pw_, label(s), what,
                       m.f.p50_us / b.p50_us, m.f.p99_us / b.p99_us);
        };
        ratio(fmt::format("write x{} together (its slowest part)", s.parts), *m.together);
        ratio("write x1", *m.one);
    }
    if (vs.base) {
        // The baseline reads its CQ directly, registers once, and asks for no send
        // completion (selective completion), whatever --signal-every says.
        setup plain = s;
        plain.callbacks = false;
        plain.coroutines = false;
        plain.registration = "pre";
        plain.signal_every = 1;
        plain.op = s.op + "/same";
        row("fi:" + prov, plain, *vs.base);
        plain.op = s.op + "/busy";
        if (vs.busy_base)
            row("fi:" + prov, plain, *vs.busy_base);
        auto ratio = [&](const char* what, const figures& b) {
            fmt::print("{:<{}} remora/baseline ({}): ops/s x{:.3f}, p50 x{:.3f}, p99 x{:.3f}\n",
                       "ratio", pw_, what, m.f.ops_per_s / b.ops_per_s, m.f.p50_us / b.p50_us,
                       m.f.p99_us / b.p99_us);
        };
        ratio(rdm(s) ? "/same: RDM target busy-polls" : "/same: target as remora's", *vs.base);
        if (vs.busy_base)
            ratio("/busy: target busy-polls", *vs.busy_base);
        if (vs.shm_base) {
            plain.op = s.op + "/rdm";
            row("fi:shm", plain, *vs.shm_base);
            ratio("fi:shm/rdm: plain shm RDM, target busy-polls", *vs.shm_base);
        }
    }
    for (const anchor_result& a : vs.anchors)
        anchor(s, m, a, vs.busy_base ? &*vs.busy_base : vs.base ? &*vs.base : nullptr);
    if (vs.versus) {
        fmt::print("{:<{}} {}: ops/s x{:.3f}, p50 {}, cpu us/op x{:.3f}\n", "ratio", pw_, s.versus,
                   m.f.ops_per_s / vs.versus->ops_per_s,
                   m.f.has_latency && vs.versus->has_latency
                       ? fmt::format("x{:.3f}", m.f.p50_us / vs.versus->p50_us)
                       : std::string("-"),
                   m.f.cpu_us_per_op / vs.versus->cpu_us_per_op);
    }
}

// An anchor's row and ratio (its latency: "~" where the program reports a mean), or the note
// on why it did not run (each note once).
void printer::anchor(const setup& s, const measured& m, const anchor_result& a,
                     const figures* plain) {
    if (!a.f) {
        if (std::find(notes_.begin(), notes_.end(), a.skipped) == notes_.end()) {
            notes_.push_back(a.skipped);
            fmt::print("{:<{}} {}\n", "note", pw_, a.skipped);
        }
        return;
    }
    const figures& f = *a.f;
    fmt::print(
        "{:<{}} {:<12} {:>7} {:>3} {:>5} {:<9} {:<8} {:>4} {:>11.0f} {:>9.1f} {:>7.3f} {:>8} "
        "{:>8} {:>8} {:>9.2f}\n",
        a.name, pw_, "send", s.size, 1, 1, "busy", "-", "no", f.ops_per_s, f.mib_per_s,
        gbit_per_s(f), fmt::format("{}{:.1f}", a.mean_latency ? "~" : "", f.p50_us), "-", "-",
        f.cpu_us_per_op);
    std::string latency;
    if (m.f.has_latency) {
        latency =
            a.mean_latency
                ? fmt::format(", half round trip {:.2f} us (remora p50) vs {:.2f} us ({} mean)",
                              m.f.p50_us / 2, a.half_rtt_us, a.name)
                : fmt::format(", p50 x{:.3f}", m.f.p50_us / f.p50_us);
    }
    fmt::print("{:<{}} remora/{}: ops/s x{:.3f}{}\n", "ratio", pw_, a.name,
               m.f.ops_per_s / f.ops_per_s, latency);
    // Whether the plain-libfabric baseline is as fast as the program (a baseline slower than
    // it would flatter remora).
    if (plain != nullptr)
        fmt::print("{:<{}} baseline/{} (plain libfabric's fastest target): ops/s x{:.3f}\n",
                   "ratio", pw_, a.name, plain->ops_per_s / f.ops_per_s);
}

}  // namespace remora::tool

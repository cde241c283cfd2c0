// SPDX-License-Identifier: BSD-3-Clause
// `remora bench`: the measuring parts every result shares: CPU pinning, process CPU time, the
// figures from latencies, and the reaper that reads a connection's completions.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>

#include "bench_internal.hpp"

namespace remora::tool {

using namespace std::chrono_literals;

pinned::pinned(const setup& s, side who) {
    static_assert(sizeof(saved_) == sizeof(cpu_set_t));
    if (!s.pin)
        return;
    auto* saved = reinterpret_cast<cpu_set_t*>(saved_);
    if (pthread_getaffinity_np(pthread_self(), sizeof(cpu_set_t), saved) != 0)
        return;
    const int cpus = std::max(1, CPU_COUNT(saved));
    // The n-th CPU the thread may run on: 0 for the target, 1 for the client.
    const int want = who == side::target ? 0 : std::min(1, cpus - 1);
    int seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, saved))
            continue;
        if (seen++ == want) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pinned_ = pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
            return;
        }
    }
}

pinned::~pinned() {
    if (pinned_)
        pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t),
                               reinterpret_cast<cpu_set_t*>(saved_));
}

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

result<figures> summarize(std::vector<std::uint32_t>& lat, double seconds, double cpu,
                          std::size_t size) {
    return summarize(lat, lat.size(), seconds, cpu, size);
}

result<figures> summarize(std::vector<std::uint32_t>& lat, std::uint64_t ops, double seconds,
                          double cpu, std::size_t size) {
    if (ops == 0)
        return fail(errc::timed_out, "no operation completed");
    figures f;
    f.ops = ops;
    f.seconds = seconds;
    f.ops_per_s = static_cast<double>(f.ops) / seconds;
    f.mib_per_s = f.ops_per_s * static_cast<double>(size) / (1024.0 * 1024.0);
    f.cpu_us_per_op = cpu * 1e6 / static_cast<double>(f.ops);
    f.has_latency = !lat.empty();
    if (f.has_latency) {
        std::sort(lat.begin(), lat.end());
        auto pct = [&](double p) {
            const auto i = static_cast<std::size_t>(p * static_cast<double>(lat.size()));
            return lat[std::min(lat.size() - 1, i)] / 1e3;
        };
        f.p50_us = pct(0.50);
        f.p99_us = pct(0.99);
        f.p999_us = pct(0.999);
    }
    return f;
}

// One read of the connection's CQs (and first a wait, when blocking).
result<std::size_t> reaper::operator()(bool want_recv, std::span<completion> out) {
    std::size_t n = 0;
    auto poll_into = [&](completion_queue& q) -> result<void> {
        auto r = q.poll(out.subspan(n));
        if (!r)
            return fail(r.error());
        n += *r;
        return {};
    };
    if (blocking_) {
        if (shared_channel_) {
            // The event names the CQ that fired: poll that one (a wake-up for the other CQ's
            // silent completions, or with nothing to report, then costs no read of the other).
            auto ev = c_.wait(100ms);
            if (!ev && !(ev.error() == errc::timed_out))
                return fail(ev.error());
            if (ev && ev->cq != nullptr) {
                if (auto r = poll_into(*ev->cq); !r)
                    return fail(r.error());
                return n;
            }
        } else {
            completion_queue& q = want_recv && rcq_ != nullptr ? *rcq_ : cq_;
            auto w = q.wait(100ms);
            if (!w && !(w.error() == errc::timed_out))
                return fail(w.error());
        }
    }
    if (auto r = poll_into(cq_); !r)
        return fail(r.error());
    if (rcq_ != nullptr && n < out.size()) {
        if (auto r = poll_into(*rcq_); !r)
            return fail(r.error());
    }
    return n;
}

}  // namespace remora::tool

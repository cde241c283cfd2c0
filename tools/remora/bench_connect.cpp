// SPDX-License-Identifier: BSD-3-Clause
// `remora bench --suite connect`: sets up many connections from one thread with
// connection::connect_async, all on one completion channel, against a loopback target in this
// process (its own thread, accept_async on a channel of its own) or a `remora serve` (--target).
// Reports the time to issue the requests, the time until every outcome is known, and the
// resident memory the connections added (per connection), then tears them down (timed too).
#include <fmt/format.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "common.hpp"
#include "serve.hpp"

namespace remora::tool {

namespace {

using namespace std::chrono;
using namespace std::chrono_literals;

// Resident set size of this process in KiB (/proc/self/statm).
long rss_kib() {
    std::ifstream f("/proc/self/statm");
    long pages = 0, resident = 0;
    f >> pages >> resident;
    return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

double ms_since(steady_clock::time_point t) {
    return duration<double, std::milli>(steady_clock::now() - t).count();
}

// Waits on `ch` until `n` setup outcomes are in (or `limit` passes); counts them by kind.
std::map<conn_event, unsigned> gather_setups(completion_channel& ch, unsigned n, milliseconds limit,
                                             std::string& err) {
    std::map<conn_event, unsigned> kinds;
    unsigned got = 0;
    const auto deadline = steady_clock::now() + limit;
    while (got < n) {
        const auto left = ceil<milliseconds>(deadline - steady_clock::now());
        if (left.count() <= 0) {
            err = fmt::format("{} of {} setups still under way after {} ms", n - got, n,
                              limit.count());
            break;
        }
        auto e = ch.wait(left);
        if (!e) {
            if (!(e.error() == errc::timed_out))
                err = e.error().what();
            continue;
        }
        if (e->setup) {
            ++kinds[*e->setup];
            ++got;
        }
    }
    return kinds;
}

}  // namespace

int run_connect_bench(const bench_options& o) {
    const unsigned n = o.setups;
    // The provider asked for, never the same-host path: it measures the provider's setup.
    auto dom = domain::open({.provider = o.provider, .same_host = false});
    if (!dom)
        return report("bench", dom.error());
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    std::optional<domain> server_dom;
    std::optional<listener> lst;
    std::thread server;
    std::atomic<bool> server_failed{false};
    std::atomic<bool> client_gave_up{false};
    std::optional<error> issue_err;
    std::vector<connection> accepted;
    std::string server_err;
    const bool loopback = o.target.empty();
    if (loopback) {
        auto sd = domain::open({.provider = dom->caps().provider, .same_host = false});
        if (!sd)
            return report("bench", sd.error());
        server_dom.emplace(std::move(*sd));
        auto l = listener::create(*server_dom, host, 0);
        if (!l)
            return report("bench", l.error());
        lst.emplace(std::move(*l));
        port = lst->port();
    } else {
        auto hp = split_address(o.target);
        if (!hp)
            return report("bench", hp.error());
        host = hp->first;
        port = hp->second;
    }
    auto ch = completion_channel::create();
    if (!ch)
        return report("bench", ch.error());
    const long rss0 = rss_kib();
    if (loopback) {
        server = std::thread([&] {
            auto sch = completion_channel::create();
            if (!sch) {
                server_err = sch.error().what();
                server_failed = true;
                return;
            }
            for (unsigned i = 0; i < n && !client_gave_up;) {
                auto req = lst->get_request(100ms);
                if (!req && req.error() == errc::timed_out)
                    continue;
                if (!req) {
                    server_err = req.error().what();
                    server_failed = true;
                    return;
                }
                auto c = req->accept_async({.channel = channel_mode::shared,
                                            .shared_channel = *sch,
                                            .connect_timeout = 60s,
                                            .tag = i});
                if (!c) {
                    server_err = c.error().what();
                    server_failed = true;
                    return;
                }
                accepted.push_back(std::move(*c));
                ++i;
            }
            std::string err;
            const auto m = static_cast<unsigned>(accepted.size());
            auto kinds = gather_setups(*sch, m, 60s, err);
            if (!err.empty() || kinds[conn_event::established] != n) {
                server_err = err.empty() ? "not every accepted connection was established" : err;
                server_failed = true;
            }
        });
    }
    // The client: one thread issues every request, then waits for the outcomes on one channel.
    const auto want = make_depth_request(default_service_depth);
    const connection_config cfg{.channel = channel_mode::shared,
                                .shared_channel = *ch,
                                .connect_timeout = 60s,
                                .addons = {remora::persistence_config{
                                    .service_depth = loopback ? 0u : default_service_depth}}};
    std::vector<connection> conns;
    conns.reserve(n);
    const auto t0 = steady_clock::now();
    for (unsigned i = 0; i < n; ++i) {
        connection_config c = cfg;
        c.tag = i;
        auto conn = connection::connect_async(
            *dom, host, port, c, loopback ? std::span<const std::byte>() : std::span(want));
        if (!conn) {
            issue_err = error(conn.error().code(),
                              fmt::format("connection {}: {}", i, conn.error().what()));
            client_gave_up = true;
            break;
        }
        conns.push_back(std::move(*conn));
    }
    const double issue_ms = ms_since(t0);
    std::string err;
    auto kinds = gather_setups(*ch, static_cast<unsigned>(conns.size()), 90s, err);
    const double setup_ms = ms_since(t0);
    if (server.joinable())
        server.join();
    const long rss1 = rss_kib();
    const unsigned established = kinds[conn_event::established];
    const auto t1 = steady_clock::now();
    conns.clear();
    accepted.clear();
    const double teardown_ms = ms_since(t1);
    const double per_conn_kib = static_cast<double>(rss1 - rss0) / n;
    if (o.json) {
        std::printf(
            "{\"suite\":\"connect\",\"provider\":\"%s\",\"target\":\"%s\",\"connections\":%u,"
            "\"established\":%u,\"issue_ms\":%.1f,\"setup_ms\":%.1f,\"us_per_connection\":%.1f,"
            "\"rss_delta_kib\":%ld,\"kib_per_connection\":%.1f,\"teardown_ms\":%.1f}\n",
            dom->caps().provider.c_str(), loopback ? "loopback" : o.target.c_str(), n, established,
            issue_ms, setup_ms, setup_ms * 1000.0 / n, rss1 - rss0, per_conn_kib, teardown_ms);
    } else {
        std::printf(
            "connect: %u connections from one thread (connect_async, one channel) to %s "
            "on %s\n",
            n,
            loopback ? "a loopback target in this process (memory: both sides)" : o.target.c_str(),
            dom->caps().provider.c_str());
        std::printf(
            "  issued in %.1f ms, all outcomes in %.1f ms (%.1f us per connection, amortised)\n",
            issue_ms, setup_ms, setup_ms * 1000.0 / n);
        std::printf("  established %u", established);
        for (const auto& [k, v] : kinds)
            if (k != conn_event::established)
                std::printf(", %s %u", to_string(k), v);
        std::printf("\n  RSS +%ld KiB (%.1f KiB per connection); torn down in %.1f ms\n",
                    rss1 - rss0, per_conn_kib, teardown_ms);
    }
    if (issue_err)
        return report("bench", *issue_err);
    if (!err.empty())
        return report("bench", error(errc::timed_out, err));
    if (server_failed)
        return report("bench", error(errc::provider_error, "loopback target: " + server_err));
    if (established != n)
        return report("bench", error(errc::provider_error,
                                     fmt::format("{} of {} connections were not established",
                                                 n - established, n)));
    return 0;
}

}  // namespace remora::tool

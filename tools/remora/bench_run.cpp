// SPDX-License-Identifier: BSD-3-Clause
// `remora bench`: one result: the loopback target started (or a `remora serve` reached), the
// client connections set up, their loops run until the duration or count, and the figures.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>
#include <vector>

#include "bench_client.hpp"
#include "bench_target.hpp"
#include "serve.hpp"

namespace remora::tool {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

// Connects the clients: to the in-process loopback target, or to a `remora serve` at s.target
// (which sends its region's descriptor in a hello and serves flushes and atomics).
// With a shared CQ, every connection completes there, tagged with its index.
result<void> connect_all(const setup& s, target* t, domain& cd, const shared_completion_queue& scq,
                         std::vector<connection>& conns, std::vector<remote_region>& remotes) {
    for (unsigned i = 0; i < s.connections; ++i) {
        connection_config cfg = client_config(s, t == nullptr);
        cfg.tag = i;
        cfg.shared_cq = scq;
        if (t == nullptr) {
            auto hp = split_address(s.target);
            if (!hp)
                return fail(hp.error());
            const std::uint32_t depth = client_service_depth(s, true);
            const std::array<std::byte, 2> want{static_cast<std::byte>(depth & 0xff),
                                                static_cast<std::byte>(depth >> 8)};
            std::optional<admission_key> key;
            if (!s.key_file.empty()) {
                auto k = admission_key::load(s.key_file);
                if (!k)
                    return fail(k.error());
                key.emplace(std::move(*k));
            }
            auto c =
                key ? connect_admitted(cd, hp->first, hp->second, *key, "remora-bench", cfg, want)
                    : connection::connect(cd, hp->first, hp->second, cfg, want);
            if (!c)
                return fail(c.error().code(),
                            connect_failure(s.target, c.error(), key.has_value()));
            auto h = parse_hello(c->peer_private_data());
            if (!h)
                return fail(h.error());
            conns.push_back(std::move(*c));
            remotes.push_back(h->region);
            continue;
        }
        if (rdm(s)) {
            // Both sides open a peer and attach the other's address; the descriptor is handed
            // over in memory, as the user's own exchange would carry it.
            auto c = connection::open_peer(cd, cfg);
            if (!c)
                return fail(c.error());
            auto offer = t->open_peer_for(s, i, c->local_address());
            if (!offer)
                return fail(offer.error());
            if (auto r = c->attach(offer->address); !r)
                return fail(r.error());
            auto remote = remote_region::parse(offer->descriptor);
            if (!remote)
                return fail(remote.error());
            conns.push_back(std::move(*c));
            remotes.push_back(*remote);
            continue;
        }
        result<void> served;
        std::thread acceptor([&] { served = t->accept_and_serve(s, i); });
        auto c = connection::connect(cd, "127.0.0.1", t->port(), cfg);
        acceptor.join();
        if (!c)
            return fail(c.error());
        if (!served)
            return fail(served.error());
        if (s.same_host && !c->same_host())
            return fail(errc::not_supported,
                        "bench: --same-host on, but the connection stayed on " +
                            cd.caps().provider +
                            " (shm missing or left out by FI_PROVIDER, REMORA_SAME_HOST=off, or "
                            "a configuration the path does not take: --shared-cq)");
        auto remote = remote_region::parse(c->peer_private_data());
        if (!remote)
            return fail(remote.error());
        conns.push_back(std::move(*c));
        remotes.push_back(*remote);
    }
    return {};
}

// A progress bar on a terminal for runs of a couple of seconds or more.
void show_progress(const setup& s, clock::time_point t0, clock::time_point end,
                   const std::atomic<bool>& finished) {
    if (!::isatty(STDERR_FILENO) || s.duration < 2.0 || s.count != 0)
        return;
    const double total = std::chrono::duration<double>(end - t0).count();
    while (!finished.load()) {
        const double done =
            std::min(1.0, std::chrono::duration<double>(clock::now() - t0).count() / total);
        const int width = 30;
        const int filled = static_cast<int>(done * width);
        fmt::print(stderr, "\r{} {}B qd{} [{}{}] {:3.0f}%", s.op, s.size, s.qd,
                   std::string(static_cast<std::size_t>(filled), '#'),
                   std::string(static_cast<std::size_t>(width - filled), ' '), done * 100);
        std::fflush(stderr);
        std::this_thread::sleep_for(200ms);
    }
    fmt::print(stderr, "\r{}\r", std::string(60, ' '));
}

}  // namespace

result<measured> run_one(const setup& s) {
    if (auto r = validate(s); !r)
        return fail(r.error());
    const bool gathering = op_of(s.op).kind == op_kind::gather;
    std::optional<target> t;
    if (s.target.empty()) {
        t.emplace();
        if (auto r = t->start(s); !r)
            return fail(r.error());
    }
    std::optional<domain> cd;
    if (auto d = domain::open({.provider = s.provider,
                               .endpoint = endpoint_of(s.endpoint),
                               .same_host = s.same_host});
        d)
        cd = std::move(*d);
    else
        return fail(d.error());
    // --shared-cq: one CQ for every client connection, sized to all their queue entries.
    shared_completion_queue scq;
    if (s.shared_cq) {
        const connection_config c = client_config(s, !t);
        const std::uint32_t per = c.sq_size + client_service_depth(s, !t) + c.rq_size;
        auto q = shared_completion_queue::create(
            *cd, {.size = per * s.connections, .tag = std::uint64_t{s.connections}});
        if (!q)
            return fail(q.error());
        scq = std::move(*q);
    }
    std::vector<connection> conns;
    std::vector<remote_region> remotes;
    if (auto r = connect_all(s, t ? &*t : nullptr, *cd, scq, conns, remotes); !r)
        return fail(r.error());
    std::vector<remote_region> segments;  // --op gather: a region per part
    if (gathering) {
        auto g = t->segments();
        if (!g)
            return fail(g.error());
        segments = std::move(*g);
    }
    std::vector<client_result> results(s.connections);
    gather_result gathered;
    const double cpu0 = cpu_seconds();
    const auto t0 = clock::now();
    const auto end = t0 + std::chrono::duration_cast<clock::duration>(
                              std::chrono::duration<double>(run_limit_s(s)));
    std::vector<std::thread> clients;
    if (gathering) {
        clients.emplace_back(
            [&] { run_gather(conns.front(), segments, s, end, op_budget(s), gathered); });
    } else if (s.shared_cq) {
        clients.emplace_back([&] { run_shared(conns, remotes, scq, s, end, results); });
    } else if (s.one_reader) {
        clients.emplace_back([&] { run_one_reader(conns, remotes, s, end, results); });
    } else {
        for (unsigned i = 0; i < s.connections; ++i) {
            clients.emplace_back(
                [&, i] { run_client(conns[i], remotes[i], s, end, results[i], op_budget(s, i)); });
        }
    }
    std::atomic<bool> finished{false};
    std::thread bar([&] { show_progress(s, t0, end, finished); });
    for (auto& th : clients)
        th.join();
    finished = true;
    bar.join();
    const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
    const double cpu = cpu_seconds() - cpu0;
    // Before the connections close (their receives then end canceled at the target).
    const std::string target_status = t ? t->status() : std::string();
    for (auto& c : conns)
        (void)c.close();
    if (t)
        t->stop();
    if (gathering)
        results.front() = std::move(gathered.timed[gather_all]);
    std::vector<std::uint32_t> lat;
    std::uint64_t ops = 0;
    for (auto& r : results) {
        if (r.failure && t && r.failure->code() == errc::timed_out)
            return fail(errc::timed_out, r.failure->message() + " (" + target_status + ")");
        if (r.failure)
            return fail(*r.failure);
        lat.insert(lat.end(), r.lat_ns.begin(), r.lat_ns.end());
        ops += r.ops;
    }
    if (s.count != 0 && ops != s.count)
        return fail(errc::timed_out, fmt::format("--count {}: {} operations completed in {:.0f} s",
                                                 s.count, ops, seconds));
    if (!gathering) {
        auto f = summarize(lat, ops, seconds, cpu, s.size);
        if (!f)
            return fail(f.error());
        return measured{.f = *f, .together = {}, .one = {}};
    }
    // --op gather: each kind's figures over the time it ran (QD 1: ops/s is 1 / mean latency).
    measured m;
    for (std::size_t k = 0; k < gather_kinds; ++k) {
        client_result& r = k == gather_all ? results.front() : gathered.timed[k];
        if (r.failure)
            return fail(*r.failure);
        auto f = summarize(r.lat_ns, gathered.wall_s[k], gathered.cpu_s[k],
                           k == one_write ? s.size : s.size * s.parts);
        if (!f)
            return fail(f.error());
        if (k == gather_all)
            m.f = *f;
        else
            (k == writes_together ? m.together : m.one) = *f;
    }
    return m;
}

}  // namespace remora::tool

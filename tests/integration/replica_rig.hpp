// SPDX-License-Identifier: BSD-3-Clause
// tests/integration/replica_rig.hpp — N targets and one client domain connected to each, for the
// replica set's tests and bench: plain memory, or persistent regions served by GPSPM.
#pragma once

#include <algorithm>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <remora/replica_set.hpp>

#include "support.hpp"

namespace remora::test {

inline constexpr std::size_t replica_rig_region = 256 * 1024;

// A target: its domain, its memory (plain, or a persistent region served by GPSPM) and, over
// MSG, its listener; `conns` are its side of every connection made to it.
struct target {
    std::optional<domain> dom;
    std::optional<listener> lst;
    buffer mem{replica_rig_region};
    std::optional<memory_region> mr;
    std::optional<persistent_region> pmem;
    std::optional<target_service> svc;
    remote_region desc;
    std::deque<connection> conns;
    bool serves = true;  // its service answers the connections made to it
    std::span<const std::byte> bytes() const {
        return pmem ? std::span<const std::byte>(pmem->region().memory()) : mem.bytes;
    }
};

// N targets and one client domain with a connection to each (progress threads on both sides: the
// set reads nothing itself).
struct rig {
    std::string provider;
    bool rdm = false;
    std::uint32_t service_depth = 0;
    std::optional<domain> client_dom;
    std::vector<std::unique_ptr<target>> targets;
    std::deque<connection> clients;
    std::vector<replica> members;

    connection_config server_cfg() const {
        connection_config c;
        c.progress_thread = true;
        if (service_depth > 0)
            // No hello check: a target that does not serve (`silent`) keeps its flushes waiting
            // rather than failing them after serve_wait.
            c.addons = {persistence_config{.service_depth = service_depth,
                                           .serve_wait = std::chrono::milliseconds(0)}};
        return c;
    }
    connection_config client_cfg(bool progress = true) const {
        auto c = server_cfg();
        c.progress_thread = progress;
        return c;
    }

    // A new connection from the client domain to target i (its old ones stay as they are);
    // `progress`: the library's progress thread reads its CQs (else the caller does).
    result<connection*> connect(std::size_t i, bool progress = true) {
        target& t = *targets[i];
        if (rdm) {
            auto s = connection::open_peer(*t.dom, server_cfg());
            auto c = connection::open_peer(*client_dom, client_cfg(progress));
            if (!s || !c)
                return fail(!s ? s.error() : c.error());
            if (auto r = s->attach(c->local_address()); !r)
                return fail(r.error());
            if (auto r = c->attach(s->local_address()); !r)
                return fail(r.error());
            t.conns.push_back(std::move(*s));
            clients.push_back(std::move(*c));
        } else {
            // sockets sometimes never completes a connect to a listener right after the same
            // domain's earlier connection to it was closed (docs/providers.md): try again.
            result<void> r = {};
            for (int attempt = 1; attempt <= 3; ++attempt)
                if ((r = connect_msg(t, progress)))
                    break;
            if (!r)
                return fail(r.error());
        }
        if (t.svc && t.serves)
            if (auto r = t.svc->serve(t.conns.back()); !r)
                return fail(r.error());
        return &clients.back();
    }

    result<void> connect_msg(target& t, bool progress) {
        connection_config cfg = client_cfg(progress);
        cfg.connect_timeout = std::chrono::seconds(3);
        auto client = std::async(std::launch::async, [&] {
            return connection::connect(*client_dom, "127.0.0.1", t.lst->port(), cfg);
        });
        auto req = request_while_connecting(*t.lst, client);
        result<connection> s = req ? req->accept(server_cfg()) : fail(req.error());
        auto c = client.get();
        if (!c || !s)
            return fail(!c ? c.error() : s.error());
        t.conns.push_back(std::move(*s));
        clients.push_back(std::move(*c));
        return {};
    }

    // `n` targets; with `durable_dir`, each serves a persistent region in a file there by GPSPM.
    // `silent`: that target's service does not serve its connections (its flushes wait).
    static rig make(const std::string& provider, std::size_t n,
                    const std::filesystem::path& durable_dir = {}, std::uint32_t depth = 16,
                    int silent = -1, std::size_t size = replica_rig_region) {
        rig g;
        g.provider = provider;
        g.rdm = is_rdm(provider);
        const std::string prov = g.rdm ? provider.substr(4) : provider;
        const endpoint_type ep = g.rdm ? endpoint_type::rdm : endpoint_type::msg;
        g.client_dom = must(domain::open({.provider = prov, .endpoint = ep}));
        if (!durable_dir.empty())
            g.service_depth = depth;
        for (std::size_t i = 0; i < n; ++i) {
            auto t = std::make_unique<target>();
            t->mem = buffer(durable_dir.empty() ? size : 0);
            t->dom = must(domain::open({.provider = prov, .endpoint = ep}));
            if (!g.rdm)
                t->lst = must(listener::create(*t->dom, "127.0.0.1", 0));
            if (!durable_dir.empty()) {
                t->pmem = must(persistent_region::open(
                    *t->dom, {.path = (durable_dir / ("r" + std::to_string(i))).string(),
                              .size = size,
                              .create = true}));
                t->svc = must(target_service::create());
                t->desc = must(t->svc->expose(*t->pmem));
            } else {
                t->mr = must(memory_region::create(
                    *t->dom, t->mem.span(),
                    usage::write_destination | usage::read_source | usage::flush_target));
                t->desc = must(t->mr->describe(0, size));
            }
            t->serves = static_cast<int>(i) != silent;
            g.targets.push_back(std::move(t));
            connection* c = must(g.connect(i));
            g.members.push_back({c, g.targets.back()->desc});
        }
        return g;
    }
};

// Events, as the set reports them.
struct event_log {
    std::mutex mu;
    std::vector<replica_event> events;
    static void on(const replica_event& e) {
        auto* self = static_cast<event_log*>(e.context);
        std::lock_guard lock(self->mu);
        self->events.push_back(e);
    }
    std::size_t count(replica_event_kind k, std::uint32_t index) {
        std::lock_guard lock(mu);
        return std::count_if(events.begin(), events.end(),
                             [&](const auto& e) { return e.kind == k && e.index == index; });
    }
};

}  // namespace remora::test

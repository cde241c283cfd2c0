// SPDX-License-Identifier: BSD-3-Clause
// `remora bench`: from the options to a setup, the checks that a setup's options go together,
// and the connection configurations a setup asks for.
#include <algorithm>
#include <cstdlib>

#include "bench_internal.hpp"

namespace remora::tool {
namespace {

constexpr std::pair<std::string_view, endpoint_type> endpoints[] = {{"msg", endpoint_type::msg},
                                                                    {"rdm", endpoint_type::rdm}};
constexpr std::pair<std::string_view, progress_policy> policies[] = {
    {"busy", progress_policy::busy},
    {"adaptive", progress_policy::adaptive},
    {"blocking", progress_policy::blocking}};
constexpr std::pair<std::string_view, completion_style> completion_styles[] = {
    {"poll", completion_style::poll},
    {"callback", completion_style::callback},
    {"coroutine", completion_style::coroutine}};
constexpr std::pair<std::string_view, channel_mode> channels[] = {
    {"separate", channel_mode::separate},
    {"shared", channel_mode::shared},
    {"none", channel_mode::none}};

}  // namespace

std::vector<std::string> bench_ops() {
    return names_of(op_table);
}

endpoint_type endpoint_of(const std::string& e) {
    return pick(endpoints, e, endpoint_type::msg);
}

channel_mode channel_of(const setup& s) {
    // A side that busy-polls opens its CQs without a wait object, as plain libfabric does.
    return pick(channels, s.channel,
                s.wait == "busy" ? channel_mode::none : channel_mode::separate);
}

std::string channel_name(const setup& s) {
    const channel_mode m = channel_of(s);
    for (const auto& [name, mode] : channels)
        if (mode == m)
            return std::string(name);
    return "separate";
}

progress_policy target_policy(const setup& s) {
    return pick(policies, s.target_progress, domain_config{}.progress);
}

connection_config config_for(const setup& s, bool target) {
    const op_info& info = op_of(s.op);
    connection_config c;
    c.sq_size = std::max({16u, s.qd * 2, s.parts});  // --op gather: a write per part at once
    c.rq_size = std::max(16u, s.qd * 2);
    if (!target && s.shared_cq && s.connections > 16 && info.rma) {
        // One shared CQ holds every connection's entries, at most the provider's CQ depth (tcp:
        // 512): one-sided clients need no receives, and qd * 2 send entries.
        c.sq_size = std::max(4u, s.qd * 2);
        c.rq_size = 4;
    }
    c.rcq = s.rcq;
    c.channel = channel_of(s);
    // Only one-sided workloads leave the target's application idle: there the library's
    // progress thread serves the peer. Two-sided targets progress as they poll or wait. An RDM
    // target busy-polls its CQ on a thread of its own for one-sided workloads too (see class
    // target), as the plain libfabric baseline does; the service's requests still need the
    // progress thread.
    c.progress_thread = target && (info.persistence || (!rdm(s) && info.idle_target));
    if (s.channel.empty() && target) {
        // The progress thread sleeps on the CQs' fds; an RDM target's thread busy-polls them.
        if (c.progress_thread)
            c.channel = channel_mode::separate;
        else if (rdm(s))
            c.channel = channel_mode::none;
    }
    // One service request per operation in flight (a flush or an atomic without native support).
    if (info.persistence)
        c.addons = {persistence_config{.service_depth = std::max(1u, s.qd)}};
    if (s.signal_every > 1 && (!target || info.two_sided)) {
        // Room for up to N - 1 unsignalled operations awaiting reclaim besides the qd in flight
        // (sends are counted by their replies, not by their entries; a gpspm request is a write
        // and a send). The target of a send or gpspm signals one reply in N too, as plain
        // libfabric's target (the baseline) signals none.
        c.signal_every = s.signal_every;
        c.sq_size = std::max(c.sq_size, 2 * s.qd + s.signal_every);
    }
    return c;
}

std::uint32_t client_service_depth(const setup& s, bool remote) {
    if (remote || op_of(s.op).persistence)
        return std::max(1u, s.qd);
    return 0;
}

connection_config client_config(const setup& s, bool remote) {
    connection_config c = config_for(s, false);
    if (remote)
        c.addons = {persistence_config{.service_depth = client_service_depth(s, remote)}};
    return c;
}

bool quiet_writes(const setup& s) {
    return s.signal_every > 1 && op_of(s.op).kind == op_kind::write;
}

void set_completion(setup& s, completion_style how) {
    s.callbacks = how == completion_style::callback;
    s.coroutines = how == completion_style::coroutine;
}

setup setup_of(const bench_options& o) {
    setup s;
    s.provider = o.provider;
    s.endpoint = o.endpoint;
    s.pin = o.pin;
    s.op = o.ops.front();
    s.wait = o.wait;
    s.channel = o.channel;
    s.rcq = o.rcq;
    set_completion(s, pick(completion_styles, o.completion, completion_style::poll));
    s.registration = o.registration;
    s.connections = o.connections;
    s.qd = o.qd;
    s.size = o.sizes.front();
    s.duration = o.duration;
    s.count = o.count;
    s.target = o.target;
    s.key_file = o.key_file;
    s.target_progress = o.target_progress;
    s.target_spin_us = o.target_spin_us;
    s.same_host = o.same_host == "on";
    if (s.same_host && o.target.empty()) {
        // The loopback target lives in this process, and the library keeps connections between
        // two of a process's own endpoints on their provider unless told otherwise.
        ::setenv("REMORA_SAME_HOST", "process", 1);
    }
    s.more = o.more;
    s.parts = o.parts;
    // The suites choose their own signalling and CQs (the slots suite compares them).
    s.signal_every = o.suite.empty() ? o.signal_every : 1;
    s.shared_cq = o.suite.empty() && o.shared_cq;
    return s;
}

result<void> validate(const setup& s) {
    const op_info& info = op_of(s.op);
    if (info.kind == op_kind::gather && (s.qd != 1 || s.connections != 1 || s.callbacks ||
                                         s.coroutines || s.shared_cq || !s.target.empty()))
        return fail(errc::invalid_argument,
                    "--op gather times one operation at a time (--qd 1), on one connection to "
                    "the loopback target, read by poll()");
    if (s.coroutines && info.two_sided)
        return fail(errc::invalid_argument,
                    "--completion coroutine covers one-sided, flush and atomic operations");
    if (registration_of(s.registration) != registration_mode::pre && !info.rma)
        return fail(errc::invalid_argument, "--registration applies to write and read");
    if (s.signal_every > 1) {
        if (!info.signals)
            return fail(errc::invalid_argument, "--signal-every applies to write and send");
        if (s.callbacks || s.coroutines)
            return fail(errc::invalid_argument,
                        "--signal-every needs --completion poll (operations with a callback are "
                        "always signalled)");
        if (registration_of(s.registration) != registration_mode::pre)
            return fail(errc::invalid_argument, "--signal-every needs --registration pre");
    }
    if (s.shared_cq) {
        if (s.coroutines)
            return fail(errc::invalid_argument,
                        "--shared-cq covers --completion poll and callback");
        if (s.rcq || channel_of(s) == channel_mode::shared)
            return fail(errc::invalid_argument,
                        "--shared-cq takes every completion: no --rcq, no --channel shared");
    }
    if (rdm(s) && !s.target.empty())
        return fail(errc::invalid_argument,
                    "--endpoint rdm runs against a target in this process (no --target)");
    if (s.count != 0 && s.count < s.connections)
        return fail(errc::invalid_argument,
                    fmt::format("--count {} gives each of the {} connections no operation", s.count,
                                s.connections));
    if (!s.target.empty() && info.two_sided)
        return fail(errc::invalid_argument,
                    "op " + s.op +
                        " needs the loopback target (a `remora serve` target carries "
                        "only its service's messages)");
    return {};
}

}  // namespace remora::tool

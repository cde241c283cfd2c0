// SPDX-License-Identifier: BSD-3-Clause
// src/core/same_host_path.cpp — a same-host connection's control: its events, its end and its
// close (same_host_path.hpp).
#include "core/same_host_path.hpp"

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "base/log.hpp"
#include "core/cq_read.hpp"
#include "core/impl.hpp"
#include "core/liveness.hpp"
#include "core/same_host.hpp"
#include "fabric/info.hpp"

namespace remora::detail {
namespace {

using clock = std::chrono::steady_clock;

thread_local bool under_channel_lock = false;  // see same_host_channel_tick

// The end the control reported (or none yet), without taking it from next_event.
std::optional<conn_event> control_end(connection_impl& ctl) {
    std::lock_guard lock(ctl.event_mu);
    if (!ctl.ended) {
        return std::nullopt;
    }
    return ctl.pending_event.value_or(conn_event::closed);
}

// Looks at the control wherever the application reads or waits on the connection's CQs (the
// extension tick), and acts on its end.
struct control_watch final : connection_extension {
    connection_impl* conn = nullptr;
    std::mutex mu;  // one look at a time (the CQ's and the RCQ's readers may tick at once)
    bool ended = false;
    clock::time_point close_at{};

    // The control ended (`what`): no more posts (errc::disconnected), parked posts end, and the
    // shm endpoint closes a second later (a post that passed its checks before is out of the
    // provider by then: posts take no lock), which completes every outstanding operation
    // (canceled, or disconnected after a loss). Caller holds mu.
    void end(conn_event what, clock::time_point now) {
        connection_impl& c = *conn;
        if (ended) {
            return;
        }
        ended = true;
        {
            std::lock_guard lock(c.event_mu);
            if (what == conn_event::lost && !c.lost.load()) {
                c.lost_reason = "the connection under the same-host path reported it lost";
                c.rdm_end.store(conn_event::lost);
                c.lost.store(true);
            }
        }
        c.open = false;
        parked_gate(c).wake_owner(&c, errc::disconnected);
        close_at = now + std::chrono::seconds(1);
    }

    clock::time_point tick(clock::time_point now) override {
        std::lock_guard lock(mu);
        if (conn == nullptr || conn->closed.load()) {
            return clock::time_point::max();
        }
        if (!ended) {
            connection_impl& ctl = *conn->control;
            ctl.drive();  // tcp notices the peer's close while its endpoint progresses
            auto what = control_end(ctl);
            if (!what) {
                return now + control_interval;
            }
            end(*what, now);
        }
        if (now < close_at || in_completion()) {  // not while its CQ is being read
            return std::max(close_at, now + std::chrono::milliseconds(1));
        }
        // Under a completion channel's lock (same_host_channel_tick) the callbacks of what this
        // completes run at the CQs' next read instead: one may destroy a connection of the channel.
        conn->close_endpoint(!under_channel_lock);
        return clock::time_point::max();
    }
};

control_watch& watch_of(connection_impl& c) {
    static constexpr char key = 0;  // its address names the extension
    return static_cast<control_watch&>(
        c.extension(&key, [] { return std::unique_ptr<connection_extension>(new control_watch); }));
}

}  // namespace

bool same_host_config_ok(const domain_impl& dom, const connection_config& cfg,
                         bool async) noexcept {
    return dom.same_host != nullptr && cfg.same_host && !async && !cfg.shared_cq &&
           !cfg.shared_rcq && !cfg.srq && cfg.liveness.count() == 0;
}

bool from_this_process(std::span<const std::byte> address) noexcept {
    const std::string prefix = shm_process_prefix();
    const std::string_view a(reinterpret_cast<const char*>(address.data()), address.size());
    return a.find(prefix) != std::string_view::npos;
}

bool same_host_in_process() noexcept {
    const char* env = std::getenv("REMORA_SAME_HOST");
    return env != nullptr && std::string_view(env) == "process";
}

namespace {

void why_not(const char* side, const std::string& why) {
    if (log_enabled(log_level::debug)) {
        log_line(log_level::debug, std::string(side) + ": no same-host path: " + why);
    }
}

}  // namespace

std::unique_ptr<connection_impl> same_host_client_peer(const domain_impl& dom,
                                                       const connection_config& cfg,
                                                       const fabric_info* dest, bool async) {
    if (!same_host_config_ok(dom, cfg, async) || !destination_is_local(dest)) {
        return nullptr;
    }
    if (auto why = same_host_untrusted()) {
        why_not("connect", *why);
        return nullptr;
    }
    auto shm = open_rdm_peer(dom.same_host, cfg);
    if (!shm) {
        why_not("connect", shm.error().message());
        return nullptr;
    }
    if ((*shm)->local_trailer == 0) {
        why_not("connect", "the shm endpoint offers no word to prove the path with");
        return nullptr;
    }
    return std::move(*shm);
}

std::unique_ptr<connection_impl> same_host_target_peer(const domain_impl& dom,
                                                       const connection_config& cfg,
                                                       std::span<const std::byte> address,
                                                       bool async, clock::time_point deadline) {
    if (!same_host_config_ok(dom, cfg, async)) {
        return nullptr;
    }
    if (from_this_process(address) && !same_host_in_process()) {
        why_not("accept", "the client is this process (REMORA_SAME_HOST=process allows it)");
        return nullptr;
    }
    if (auto why = same_host_untrusted()) {
        why_not("accept", *why);
        return nullptr;
    }
    auto shm = open_rdm_peer(dom.same_host, cfg);
    if (!shm) {
        why_not("accept", shm.error().message());
        return nullptr;
    }
    // The peer's queued one-sided operations (writes with immediate data, atomics) land without
    // the application, as over tcp: a progress thread drives the shm endpoint, and without
    // connection_config::progress_thread reads none of its completions.
    if (!cfg.progress_thread) {
        if (auto r = (*shm)->drive_by_thread(); !r) {
            why_not("accept", r.error().message());
            return nullptr;
        }
    }
    if (auto r = attach_peer(**shm, address); !r) {
        why_not("accept", "the client's shm address: " + r.error().message());
        return nullptr;
    }
    if (auto r = prove_peer(**shm, deadline); !r) {
        why_not("accept", "the client's shm endpoint: " + r.error().message());
        return nullptr;
    }
    return std::move(*shm);
}

result<void> adopt_control(connection_impl& shm, std::unique_ptr<connection_impl> ctl) {
    // The connected endpoint carries no operation from now on: no channel reports its CQs. A
    // progress thread that watches them keeps doing so: it progresses the endpoint, which is how
    // tcp notices the peer's close.
    if (ctl->channel) {
        for (cq_impl* q : {ctl->cq.get(), ctl->rcq.get()}) {
            if (q != nullptr) {
                ctl->channel->detach(q);
                q->channel.reset();
            }
        }
        ctl->channel->detach_events(ctl.get());
        ctl->channel.reset();
    }
    shm.peer_data = ctl->peer_data;
    shm.same_host_offered = ctl->same_host_offered;
    shm.same_host_agreed = ctl->same_host_agreed;
    shm.setup_nonce = ctl->setup_nonce;
    shm.client = ctl->client;
    shm.region_dom = ctl->dom.get();
    shm.dom_handle = ctl->dom_handle;
    shm.same_host = true;
    shm.control = std::move(ctl);
    watch_of(shm).conn = &shm;
    shm.expect_deadline(clock::now() + control_interval);
    return {};
}

result<conn_event> same_host_next_event(connection_impl& c, std::chrono::milliseconds timeout) {
    auto e = c.control->next_event_msg(timeout);
    if (e && (*e == conn_event::closed || *e == conn_event::lost)) {
        control_watch& w = watch_of(c);
        std::lock_guard lock(w.mu);
        w.end(*e, clock::now());
        c.expect_deadline(w.close_at);  // the application's looks close the endpoint then
    }
    return e;
}

void same_host_channel_tick(connection_impl& c) {
    under_channel_lock = true;
    tick_if_due(c);
    under_channel_lock = false;
}

void same_host_forget(connection_impl& c) noexcept {
    control_watch& w = watch_of(c);
    std::lock_guard lock(w.mu);
    w.conn = nullptr;  // a look still under way elsewhere (a channel's wait) finishes first
}

result<void> same_host_close(connection_impl& c) {
    c.open = false;
    c.close_endpoint();  // nothing more goes to the peer over shared memory (as close() on RDM)
    return c.control->close_msg();
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
#include <remora/connection.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/impl.hpp"
#include "core/same_host.hpp"
#include "core/same_host_path.hpp"
#include "fabric/cq.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/eq.hpp"
#include "fabric/info.hpp"

// Connection setup: connect (blocking) and connect_async, waiting for FI_CONNECTED, and the
// asynchronous setup's states: its outcome read from the event queue or the deadline, kept for
// next_event and the channel.

namespace remora {
namespace detail {

using namespace std::chrono;

// What a failed setup event means: the error the caller gets and the event it stands for.
// remora's reject() always sends a marker byte before the user's private data, so a rejection
// is told apart from nobody listening (both are ECONNREFUSED on tcp).
static std::pair<error, conn_event> setup_failure(const error& e, std::vector<std::byte> err_data,
                                                  bool client) {
    if (client && e == errc::connection_refused) {
        if (!err_data.empty() && err_data[0] == reject_marker) {
            err_data.erase(err_data.begin());
            const std::size_t n = err_data.size();
            return {error(errc::rejected, "connect: the peer rejected the request (" +
                                              std::to_string(n) +
                                              " bytes of private data in error::data())")
                        .with_data(std::move(err_data)),
                    conn_event::rejected};
        }
        return {error(errc::connection_refused, "connect: refused (nobody listens)")
                    .with_data(std::move(err_data)),
                conn_event::refused};
    }
    if (e == errc::unreachable || e == errc::timed_out) {
        return {e, conn_event::unreachable};
    }
    if (client && e.code().category() != make_error_code(errc::unreachable).category() &&
        e.code().value() == ENOPROTOOPT) {
        // tcp reports ENOPROTOOPT (libfabric's codes are errno values) for a connect to an
        // address no peer can hold (240.0.0.1): the request reached no peer.
        return {error(errc::unreachable, "connect: no peer was reached (" + e.message() + ")"),
                conn_event::unreachable};
    }
    return {e, conn_event::lost};
}

result<void> connection_impl::await_connected(milliseconds timeout, bool client) {
    std::vector<std::byte> err_data;
    result<eq_event> ev = fail(errc::timed_out, "not read yet");
    if (same_host_peer) {
        // The target proves the same-host path on this side's shm peer before it accepts: the
        // peer progresses (its CQ read) between short looks at the event queue.
        const auto deadline = deadline_after(timeout);
        for (;;) {
            for (cq_impl* q : {same_host_peer->cq.get(), same_host_peer->rcq.get()}) {
                if (q != nullptr && !q->progress_owned()) {
                    q->drive();
                }
            }
            const auto left = std::chrono::ceil<milliseconds>(deadline - steady_clock::now());
            ev = read_eq(eq.get(), std::clamp(left, milliseconds(0), milliseconds(1)),
                         dom->caps.cm_data_size, &err_data);
            if (ev || !(ev.error() == errc::timed_out) || steady_clock::now() >= deadline) {
                break;
            }
        }
    } else {
        ev = read_eq(eq.get(), timeout, dom->caps.cm_data_size, &err_data);
    }
    if (!ev) {
        const error& e = ev.error();
        if (e == errc::timed_out) {
            return fail(errc::timed_out, std::string(client ? "connect" : "accept") +
                                             ": not established within " +
                                             std::to_string(timeout.count()) + " ms");
        }
        return fail(setup_failure(e, std::move(err_data), client).first);
    }
    if (ev->event != cm_event::connected) {
        return fail(errc::provider_error,
                    "expected FI_CONNECTED, got event " +
                        std::to_string(static_cast<std::uint32_t>(ev->event)));
    }
    peer_data = std::move(ev->data);
    if (client) {
        same_host_agreed =
            settle_connect(peer_data, same_host_offered, setup_nonce, &same_host_address);
    }
    {
        std::lock_guard lock(event_mu);
        established = true;
    }
    open = true;
    // Reading FI_CONNECTED leaves the EQ's wait fd signalled on tcp: re-arm it, so event_fd()
    // is not readable while no event is pending.
    (void)arm_events();
    // Only now may a channel wait read this connection's events (before, it could take the
    // FI_CONNECTED this function waits for).
    if (channel && dom->watch_disconnects) {
        if (auto r = channel->attach_events(this); !r) {
            return r;
        }
    }
    return {};
}

result<void> connection_impl::start_async() {
    {
        std::lock_guard lock(event_mu);
        connecting = true;
        setup_deadline = std::chrono::steady_clock::now() + config.connect_timeout;
    }
    // A channel reports the setup's outcome: it watches the event queue from the start.
    if (channel) {
        if (auto r = channel->attach_events(this); !r) {
            connecting = false;
            return r;
        }
    }
    return {};
}

void connection_impl::fail_setup_locked(error e, conn_event what) {
    setup_err = std::move(e);
    setup_event = what;
    setup_outcome = what;
    setup_news = true;
    connecting = false;
    cancel_receives();  // the receives posted early complete canceled (or flushed) now
    // Posts parked for the setup end with its error (its code; they took nothing).
    const std::error_code code = setup_err->code();
    parked_gate(*this).wake_owner(this,
                                  code.category() == make_error_code(errc::canceled).category()
                                      ? static_cast<errc>(code.value())
                                      : errc::disconnected);
}

void connection_impl::poll_setup_locked() {
    if (!connecting.load() || !eq) {
        return;
    }
    std::vector<std::byte> err_data;
    auto ev = read_eq(eq.get(), milliseconds(0), dom->caps.cm_data_size, &err_data);
    if (ev && ev->event == cm_event::connected) {
        if (client) {  // an accepted connection keeps the request's private data
            peer_data = std::move(ev->data);
            same_host_agreed = settle_connect(peer_data, same_host_offered, setup_nonce);
        }
        established = true;
        open = true;
        connecting = false;
        setup_event = conn_event::established;
        setup_outcome = conn_event::established;
        setup_news = true;
        parked_gate(*this).notify(park_gate::everyone);  // posts parked for the setup try now
        // Reading FI_CONNECTED leaves the EQ's wait fd signalled on tcp: re-arm it (events
        // that arrive meanwhile are read by the next look).
        (void)trywait(dom->fabric.get(), eq.as_fid());
        return;
    }
    if (ev) {
        info_ptr ignored(ev->info);
        fail_setup_locked(
            error(errc::provider_error, std::string(client ? "connect" : "accept") +
                                            ": expected FI_CONNECTED, got event " +
                                            std::to_string(static_cast<std::uint32_t>(ev->event))),
            conn_event::lost);
    } else if (ev.error() != errc::timed_out) {
        auto [e, what] = setup_failure(ev.error(), std::move(err_data), client);
        fail_setup_locked(std::move(e), what);
    } else if (std::chrono::steady_clock::now() >= setup_deadline) {
        fail_setup_locked(
            error(errc::timed_out, std::string(client ? "connect" : "accept") +
                                       ": not established within " +
                                       std::to_string(config.connect_timeout.count()) + " ms"),
            conn_event::unreachable);
    } else {
        return;
    }
    // The endpoint is not shut down here: a late FI_CONNECTED is ignored (the setup is over), and
    // destruction closes it. (sockets closes the socket in a shutdown while its own thread may
    // still poll it: a race inside libfabric that ThreadSanitizer reports.)
}

}  // namespace detail

namespace detail {
namespace {

// connect and connect_async up to the request sent: the endpoint set up and fi_connect called.
result<std::unique_ptr<connection_impl>> start_connect(const domain& dom, const std::string& host,
                                                       std::uint16_t port,
                                                       const connection_config& config,
                                                       std::span<const std::byte> private_data,
                                                       bool async) {
    if (!dom) {
        return fail(errc::bad_state, "connect: the domain handle is empty (closed or moved from)");
    }
    const auto& caps = dom.caps();
    if (caps.endpoint != endpoint_type::msg) {
        return fail(errc::not_supported, "connect: the domain was opened for RDM endpoints (" +
                                             caps.provider +
                                             "); use connection::open_peer and attach");
    }
    if (private_data.size() > caps.cm_data_size) {
        return fail(errc::too_large, "connect: private data of " +
                                         std::to_string(private_data.size()) +
                                         " bytes exceeds the " + caps.provider + " limit of " +
                                         std::to_string(caps.cm_data_size) + " bytes");
    }
    info_ptr hints = endpoint_hints(detail::impl_of(dom)->info.get());
    if (!hints) {
        return fail(errc::provider_error, "connect: fi_allocinfo failed: out of memory");
    }
    const std::string service = std::to_string(port);
    info_ptr info;
    int ret = getinfo(host.c_str(), service.c_str(), 0, hints.get(), info);
    if (ret != 0) {
        return fail(errc::unreachable, "connect: cannot resolve " + host + ":" + service + " on " +
                                           caps.provider + " (fi_getinfo: " + fabric_strerror(ret) +
                                           ")");
    }
    auto impl = std::make_unique<connection_impl>(detail::shared_impl_of(dom));
    if (auto r = impl->setup(info.get(), config); !r) {
        return fail(r.error());
    }
    impl->client = true;
    // The application's data, and the library's same-host trailer when it offers the path (with
    // its shm peer's address, when it can take the path).
    if (same_host_eligible(caps)) {
        // From the application's configuration with the depths the provider granted
        // (same_host_sizes): the shm peer sizes its queues for its addons itself.
        impl->same_host_peer = same_host_client_peer(
            *detail::impl_of(dom), same_host_sizes(config, impl->config), info.get(), async);
    }
    const std::vector<std::byte> data = connect_data(
        caps, impl->config, private_data, impl->same_host_offered, impl->setup_nonce,
        impl->same_host_peer ? std::span<const std::byte>(impl->same_host_peer->local_addr)
                             : std::span<const std::byte>());
    if (!impl->same_host_offered) {
        impl->same_host_peer.reset();
    }
    if (async) {
        if (auto r = impl->start_async(); !r) {
            return fail(r.error());
        }
    }
    ret = ep_connect(impl->ep.get(), info.get(), data.data(), data.size());
    if (ret != 0) {
        impl->connecting = false;
        return fail(fabric_error(ret, "fi_connect to " + host + ":" + service));
    }
    return impl;
}

}  // namespace
}  // namespace detail

result<connection> connection::connect(const domain& dom, const std::string& host,
                                       std::uint16_t port, const connection_config& config,
                                       std::span<const std::byte> private_data) {
    auto impl = detail::start_connect(dom, host, port, config, private_data, false);
    if (!impl) {
        return fail(impl.error());
    }
    if (auto r = (*impl)->await_connected((*impl)->config.connect_timeout, true); !r) {
        const auto& e = r.error();
        return fail(error(e.code(), e.message() + " (" + host + ":" + std::to_string(port) + ")")
                        .with_data({e.data().begin(), e.data().end()}));
    }
    auto& c = **impl;
    if (auto shm = std::move(c.same_host_peer);
        shm && c.same_host_agreed && !c.same_host_address.empty()) {
        // The target proved the path on this side's shm peer and answered with its own.
        if (auto r = attach_peer(*shm, c.same_host_address); !r) {
            return fail(errc::provider_error,
                        "connect: the target's same-host address: " + r.error().message() +
                            " (connect with connection_config::same_host off)");
        }
        if (auto r = adopt_control(*shm, std::move(*impl)); !r) {
            return fail(r.error());
        }
        return internal_access::wrap<connection>(std::move(shm));
    }
    return internal_access::wrap<connection>(std::move(*impl));
}

result<connection> connection::connect_async(const domain& dom, const std::string& host,
                                             std::uint16_t port, const connection_config& config,
                                             std::span<const std::byte> private_data) {
    auto impl = detail::start_connect(dom, host, port, config, private_data, true);
    if (!impl) {
        return fail(impl.error());
    }
    return internal_access::wrap<connection>(std::move(*impl));
}

result<void> connection::setup_status() const {
    const auto& c = *detail::impl_of(*this);
    std::lock_guard lock(c.event_mu);
    if (c.setup_err) {
        return fail(*c.setup_err);
    }
    if (c.connecting.load()) {
        return fail(errc::would_block, "the connection is still being set up");
    }
    return {};
}

bool connection::is_connecting() const noexcept {
    return impl_ && detail::impl_of(*this)->connecting.load();
}

std::chrono::steady_clock::time_point connection::setup_deadline() const noexcept {
    return detail::impl_of(*this)->setup_deadline;
}

}  // namespace remora

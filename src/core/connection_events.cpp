// SPDX-License-Identifier: BSD-3-Clause
#include <remora/connection.hpp>

#include <poll.h>
#include <unistd.h>

#include <cstring>

#include "core/cq_read.hpp"
#include "core/impl.hpp"
#include "core/same_host_path.hpp"
#include "fabric/cq.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/eq.hpp"

// A connection's events: reading its event queue (connect, close, loss), cancelling the
// receives a provider keeps, and the waits that watch for them.

namespace remora {
namespace detail {

using namespace std::chrono;

result<eq_event> read_eq(fid_eq* eq, milliseconds timeout, std::size_t max_data,
                         std::vector<std::byte>* err_data) {
    std::vector<std::byte> buf(cm_entry_size + max_data);
    std::uint32_t event = 0;
    const auto deadline = deadline_after(timeout);
    for (;;) {
        auto left = duration_cast<milliseconds>(deadline - steady_clock::now()).count();
        if (left < 0) {
            left = 0;
        }
        ssize_t n = eq_sread(eq, &event, buf.data(), buf.size(), static_cast<int>(left));
        if (n >= 0) {
            eq_event ev;
            ev.event = static_cast<cm_event>(event);
            if (static_cast<std::size_t>(n) >= cm_entry_size) {
                ev.info = cm_entry_info(buf.data());
                ev.data.assign(buf.begin() + cm_entry_size, buf.begin() + n);
            }
            return ev;
        }
        if (n == -fabric_errno::avail) {
            eq_error_entry err{};
            ssize_t r = eq_readerr(eq, &err);
            if (r < 0) {
                return fail(fabric_error(static_cast<int>(r), "fi_eq_readerr"));
            }
            if (err_data != nullptr && err.err_data != nullptr && err.err_data_size > 0) {
                auto* p = static_cast<const std::byte*>(err.err_data);
                err_data->assign(p, p + err.err_data_size);
            }
            return fail(error(status_from_fi(err.err),
                              std::string("connection event error: ") + fabric_strerror(err.err)));
        }
        // A signal (SIGTERM's handler, SIGCONT after a stop) ends the wait early: not an error.
        if (n == -fabric_errno::again || n == -fabric_errno::timed_out ||
            n == -fabric_errno::interrupted) {
            if (steady_clock::now() >= deadline) {
                return fail(errc::timed_out, "no connection event within " +
                                                 std::to_string(timeout.count()) + " ms");
            }
            continue;
        }
        return fail(fabric_error(static_cast<int>(n), "fi_eq_sread"));
    }
}

void connection_impl::cancel_receives() {
    if (!ep) {
        return;
    }
    for (op_record* r : ops.posted_recvs()) {
        (void)cancel_op(*this, r);
    }
}

void connection_impl::poll_events() {
    std::lock_guard lock(event_mu);
    if (connecting.load()) {
        poll_setup_locked();
        return;
    }
    if (!eq || pending_event || !established) {
        return;
    }
    auto ev = read_eq(eq.get(), milliseconds(0), dom->caps.cm_data_size, nullptr);
    if (!ev) {
        if (ended) {
            return;
        }
        if (ev.error() == errc::timed_out) {
            // No shutdown event, but an operation failed because the transport is gone: lost
            // all the same (tcp posts no shutdown while a message it cannot place blocks the
            // socket, and the dead socket keeps every wait in the domain awake until closed).
            if (!ops.transport_lost.load(std::memory_order_relaxed)) {
                return;
            }
        }
        pending_event = conn_event::lost;
    } else if (ev->event == cm_event::shutdown) {
        if (ended && !std::exchange(own_close_event, false)) {
            return;  // the end was reported already (close() queued one of its own)
        }
        pending_event = conn_event::closed;
    } else {
        return;  // nothing else is expected on an established connection
    }
    ended = true;
    open = false;
    cancel_receives();
    parked_gate(*this).wake_owner(this, errc::disconnected);  // parked posts end (parked.cpp)
}

void connection_impl::drive() {
    for (cq_impl* q : {cq.get(), rcq.get()}) {
        if (q != nullptr) {
            q->drive();
        }
    }
    poll_events();
}

bool connection_impl::arm_events() {
    if (!eq) {
        return false;
    }
    if (trywait(dom->fabric.get(), eq.as_fid()) == 0) {
        return true;
    }
    poll_events();
    return false;
}
}  // namespace detail

result<channel_event> connection::wait(std::chrono::milliseconds timeout) {
    if (!detail::impl_of(*this)->channel) {
        return fail(errc::bad_state,
                    "connection::wait needs channel_mode::shared; wait on each CQ instead");
    }
    return detail::impl_of(*this)->channel->wait(timeout);
}

namespace detail {

result<conn_event> connection_impl::next_event_msg(std::chrono::milliseconds timeout) {
    auto& c = *this;
    if (!c.eq) {
        return fail(errc::bad_state, "next_event: connection is torn down");
    }
    // tcp notices a peer's close only while its data path progresses, so drive the CQs while
    // waiting for the event queue: block on the EQ fd and on each CQ fd that can be armed.
    const auto deadline = deadline_after(timeout);
    for (;;) {
        pollfd fds[3];
        nfds_t n = 0;
        bool busy = false;
        if (c.arm_events()) {
            fds[n++] = {c.eq_fd, POLLIN, 0};
        } else {
            busy = true;
        }
        for (cq_impl* q : {c.cq.get(), c.rcq.get()}) {
            if (q == nullptr || q->progress_owned()) {
                continue;  // the progress thread drives it; its events reach the EQ fd
            }
            if (q->shared) {
                // Its reader drives it: arming it here would reset the wait signal under that
                // reader. Look at the events on a short tick instead.
                busy = true;
                continue;
            }
            q->drive();
            auto armed = q->trywait();
            if (armed && *armed) {
                fds[n++] = {q->fd, POLLIN, 0};
            } else {
                busy = true;  // completions wait for the application; re-drive on a short tick
            }
        }
        c.poll_events();
        {
            std::lock_guard lock(c.event_mu);
            if (c.setup_event) {  // an asynchronous setup's outcome comes first, once
                const conn_event e = *c.setup_event;
                c.setup_event.reset();
                return e;
            }
            if (c.pending_event) {
                const conn_event e = *c.pending_event;
                c.pending_event.reset();
                return e;
            }
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
        if (left <= 0) {
            return fail(errc::timed_out,
                        "no connection event within " + std::to_string(timeout.count()) + " ms");
        }
        if (c.connecting.load()) {
            // Nothing fires at the setup deadline: wake up for it.
            const auto to_deadline = std::chrono::ceil<std::chrono::milliseconds>(
                                         c.setup_deadline - std::chrono::steady_clock::now())
                                         .count();
            left = std::min<long>(left, std::max<long>(to_deadline, 0));
        }
        ::poll(fds, n, static_cast<int>(busy ? std::min<long>(left, 10) : left));
    }
}

}  // namespace detail

result<conn_event> connection::next_event(std::chrono::milliseconds timeout) {
    auto& c = *detail::impl_of(*this);
    if (c.control) {
        return detail::same_host_next_event(c, timeout);
    }
    if (!c.rdm) {
        return c.next_event_msg(timeout);
    }
    // No connection events from the provider on RDM: close() and a lost peer (liveness:
    // looked at here too, as by the CQ's readers) are signalled on the eventfd, once.
    pollfd p{c.rdm_event.get(), POLLIN, 0};
    const auto deadline = detail::deadline_after(timeout);
    for (;;) {
        detail::tick_if_due(c);
        std::uint64_t v = 0;
        if (::read(c.rdm_event.get(), &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v))) {
            return c.rdm_end.load();
        }
        const auto now = std::chrono::steady_clock::now();
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
        if (left.count() <= 0) {
            return fail(errc::timed_out,
                        "no connection event within " + std::to_string(timeout.count()) +
                            " ms (an RDM peer reports its close, and its loss with liveness)");
        }
        const auto due = std::chrono::steady_clock::time_point(
            std::chrono::steady_clock::duration(c.ext_deadline.load()));
        if (due < deadline) {  // the next liveness look
            left = std::min(left, std::max(std::chrono::ceil<std::chrono::milliseconds>(due - now),
                                           std::chrono::milliseconds(0)));
        }
        ::poll(&p, 1, static_cast<int>(left.count()));
    }
}

int connection::event_fd() const noexcept {
    const auto& c = *detail::impl_of(*this);
    if (c.control) {
        return c.control->eq_fd;  // the connected endpoint's events (same_host_path.hpp)
    }
    return c.rdm ? c.rdm_event.get() : c.eq_fd;
}
std::span<const std::byte> connection::peer_private_data() const noexcept {
    return detail::impl_of(*this)->peer_data;
}
}  // namespace remora

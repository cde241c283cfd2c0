// SPDX-License-Identifier: BSD-3-Clause
#include <remora/completion_channel.hpp>
#include <remora/completion_queue.hpp>
#include <remora/domain.hpp>

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/impl.hpp"
#include "core/same_host_path.hpp"
#include "fabric/cq.hpp"

#include "core/cq_read.hpp"

// Completion channels: one epoll set over CQs and connections' event queues, and the public
// completion_channel handle.

namespace remora {
namespace detail {

// ---------------------------------------------------------------- channel

result<void> channel_impl::attach(cq_impl* cq) {
    std::lock_guard lock(mu);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &cq->source;
    if (cq->wait_fd() >= 0 && epoll_ctl(epfd.get(), EPOLL_CTL_ADD, cq->wait_fd(), &ev) != 0) {
        return fail(errc::provider_error,
                    std::string("completion channel: epoll_ctl ADD: ") + std::strerror(errno));
    }
    cqs.push_back(cq);
    return {};
}

void channel_impl::detach(cq_impl* cq) {
    std::lock_guard lock(mu);
    if (cq->wait_fd() >= 0) {
        epoll_ctl(epfd.get(), EPOLL_CTL_DEL, cq->wait_fd(), nullptr);
    }
    cqs.erase(std::remove(cqs.begin(), cqs.end(), cq), cqs.end());
}

result<void> channel_impl::attach_events(connection_impl* conn) {
    std::lock_guard lock(mu);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &conn->source;
    if (epoll_ctl(epfd.get(), EPOLL_CTL_ADD, conn->eq_fd, &ev) != 0) {
        return fail(errc::provider_error,
                    std::string("completion channel: epoll_ctl ADD: ") + std::strerror(errno));
    }
    conns.push_back(conn);
    return {};
}

void channel_impl::detach_events(connection_impl* conn) {
    std::lock_guard lock(mu);
    epoll_ctl(epfd.get(), EPOLL_CTL_DEL, conn->eq_fd, nullptr);
    conns.erase(std::remove(conns.begin(), conns.end(), conn), conns.end());
}

result<channel_event> channel_impl::wait(std::chrono::milliseconds timeout) {
    const auto deadline = deadline_after(timeout);
    auto event_for = [](cq_impl* cq, std::size_t ready) {
        return channel_event{&cq->handle, cq->kind, cq->tag, ready, std::nullopt};
    };
    // Callbacks that fill_ready read run once the channel's lock is released (cq_impl::deliver):
    // a callback may destroy a connection, whose teardown detaches it from this channel.
    struct deliver_later {
        std::shared_ptr<cq_impl> cq;
        ~deliver_later() {
            if (cq) {
                cq->deliver();
            }
        }
    } later;
    poll_backoff backoff;
    int empty_woken = 0;  // fired fds whose CQs had nothing (see below)
    for (;;) {
        bool polled = false;  // a CQ without a wait fd (shm) is looked at, not blocked on
        {
            // Arm every CQ; one that cannot be armed has completions pending: report it.
            std::lock_guard lock(mu);
            const std::size_t n = cqs.size();
            for (std::size_t i = 0; i < n; ++i) {
                cq_impl* cq = cqs[(next + i) % n];
                if (cq->conn != nullptr && cq->conn->same_host) {
                    // A same-host connection's control is looked at here too (same_host_path.hpp):
                    // its peer's end ends what the connection holds, which then lands on its CQs
                    // (their callbacks run when they are read, never under this lock).
                    same_host_channel_tick(*cq->conn);
                }
                if (cq->polled && !cq->progress_owned()) {
                    const ssize_t ready = cq->fill_ready();
                    later.cq = cq->self.lock();
                    if (ready < 0) {
                        return cq->read_failure(ready);
                    }
                    if (ready != 0 || cq->reaped) {
                        next = (next + i + 1) % n;
                        return event_for(cq, static_cast<std::size_t>(ready));
                    }
                    polled = true;
                    continue;
                }
                auto armed = cq->trywait();
                if (!armed) {
                    return fail(armed.error());
                }
                if (!*armed) {
                    const ssize_t ready = cq->fill_ready();
                    later.cq = cq->self.lock();
                    if (ready < 0) {
                        return cq->read_failure(ready);
                    }
                    next = (next + i + 1) % n;
                    return event_for(cq, static_cast<std::size_t>(ready));
                }
            }
            // Arm the connections' event queues too; pending events are read now, and a
            // disconnect's canceled completions show up on the next arming pass.
            bool events_read = false;
            for (connection_impl* c : conns) {
                events_read = !c->arm_events() || events_read;
            }
            // An asynchronous setup's outcome (read by the arming above, by a connection
            // event below, or by anybody else) is reported once here.
            for (connection_impl* c : conns) {
                if (c->setup_news || c->connecting.load()) {
                    if (c->connecting.load()) {
                        c->poll_events();  // the deadline passes without any fd firing
                    }
                    std::lock_guard events(c->event_mu);
                    if (c->setup_news) {
                        c->setup_news = false;
                        channel_event e{nullptr, cq_kind::cq, c->config.tag, 0, std::nullopt};
                        e.setup = c->setup_outcome;
                        return e;
                    }
                }
            }
            if (events_read) {
                continue;
            }
        }
        if (clock::now() >= deadline && timeout.count() > 0) {
            return fail(errc::timed_out, "no completion channel event within " +
                                             std::to_string(timeout.count()) + " ms");
        }
        epoll_event evs[4];
        int wait_ms = remaining_ms(deadline);
        {
            std::lock_guard lock(mu);
            // Providers that notice a dead peer only when called into get a liveness slice.
            for (connection_impl* c : conns) {
                const auto slice = static_cast<int>(c->dom->liveness_interval.count());
                if (slice > 0) {
                    wait_ms = std::min(wait_ms, slice);
                }
                if (c->connecting.load()) {  // wake up for its setup deadline
                    wait_ms = std::min(wait_ms, remaining_ms(c->setup_deadline));
                }
            }
            for (cq_impl* q : cqs) {  // and for a same-host connection's next look
                if (q->conn != nullptr && q->conn->same_host) {
                    const auto due = clock::time_point(
                        clock::duration(q->conn->ext_deadline.load(std::memory_order_relaxed)));
                    if (due < deadline) {  // none: max(), which no int holds
                        wait_ms = std::min(wait_ms, remaining_ms(due) + 1);
                    }
                }
            }
        }
        int rc = epoll_wait(epfd.get(), evs, 4, polled ? 0 : wait_ms);
        if (rc < 0 && errno == EINTR) {
            continue;
        }
        if (rc == 0 && polled && clock::now() < deadline) {
            backoff.pause(deadline);
            continue;
        }
        if (rc == 0 && clock::now() < deadline) {
            std::lock_guard lock(mu);
            for (connection_impl* c : conns) {
                c->drive();
            }
            continue;
        }
        if (rc < 0) {
            return fail(errc::provider_error,
                        std::string("completion channel: epoll_wait: ") + std::strerror(errno));
        }
        if (rc == 0) {
            return fail(errc::timed_out, "no completion channel event within " +
                                             std::to_string(timeout.count()) + " ms");
        }
        std::lock_guard lock(mu);
        // Identify each source by address before touching it: its connection may have been
        // detached and destroyed since epoll_wait returned. A connection event: a disconnect
        // cancels what the provider did not flush; the arming pass then reports the CQs those
        // completions landed on.
        cq_impl* fired[std::size(evs)];
        std::size_t nfired = 0;
        bool events_seen = false;
        for (int e = 0; e < rc; ++e) {
            const void* src = evs[e].data.ptr;
            auto conn_it = std::find_if(conns.begin(), conns.end(),
                                        [&](connection_impl* c) { return &c->source == src; });
            if (conn_it != conns.end()) {
                (*conn_it)->poll_events();
                events_seen = true;
                continue;
            }
            auto cq_it =
                std::find_if(cqs.begin(), cqs.end(), [&](cq_impl* q) { return &q->source == src; });
            if (cq_it != cqs.end()) {
                fired[nfired++] = *cq_it;
            }
        }
        // In turn from a rotating start, so a CQ that stays ready does not win every wait (epoll
        // returns a batch of ready fds in the same order each time); a connection's receive CQ
        // before its CQ when both fired: on tcp both watch its socket, so a message wakes both,
        // and reading the receive CQ is what takes it.
        cq_impl* order[std::size(evs)];
        std::size_t norder = 0;
        auto placed = [&](const cq_impl* q) {
            return std::find(order, order + norder, q) != order + norder;
        };
        const std::size_t start = nfired != 0 ? turn++ % nfired : 0;
        for (std::size_t k = 0; k < nfired; ++k) {
            cq_impl* q = fired[(start + k) % nfired];
            if (q->kind == cq_kind::cq) {
                for (std::size_t j = 0; j < nfired; ++j) {
                    if (fired[j]->kind == cq_kind::rcq && fired[j]->conn == q->conn &&
                        !placed(fired[j])) {
                        order[norder++] = fired[j];
                    }
                }
            }
            if (!placed(q)) {
                order[norder++] = q;
            }
        }
        for (std::size_t f = 0; f < norder; ++f) {
            cq_impl* cq = order[f];
            const ssize_t ready = cq->fill_ready();
            later.cq = cq->self.lock();
            if (ready < 0) {
                return cq->read_failure(ready);
            }
            // Nothing on any fired CQ: the first time in a wait that may block (and whenever a
            // connection event came with it), the wait arms and looks again (this read's
            // progress may have put the completion on another CQ, a disconnect's canceled
            // completions show up there) and blocks for the rest of its timeout; the second
            // time, or in a wait that only looks, it reports the wake-up (no_completion), so an
            // fd that stays readable cannot keep the wait spinning.
            const bool last = f + 1 == norder;
            if (ready != 0 || cq->reaped ||
                (last && !events_seen && (empty_woken++ != 0 || timeout.count() <= 0))) {
                return event_for(cq, static_cast<std::size_t>(ready));
            }
            cq->read_dry = false;  // the application was not told of this read
        }
        later.cq.reset();  // nothing to deliver; no CQ kept alive across the next epoll_wait
    }
}
}  // namespace detail

result<completion_channel> completion_channel::create() {
    auto impl = std::make_shared<detail::channel_impl>();
    impl->epfd = detail::unique_fd(epoll_create1(EPOLL_CLOEXEC));
    if (impl->epfd.get() < 0) {
        return fail(errc::provider_error,
                    std::string("completion channel: epoll_create1: ") + std::strerror(errno));
    }
    completion_channel ch;
    ch.impl_ = std::move(impl);
    return ch;
}

int completion_channel::fd() const noexcept {
    return impl_ ? detail::impl_of(*this)->epfd.get() : -1;
}

result<channel_event> completion_channel::wait(std::chrono::milliseconds timeout) {
    if (!impl_) {
        return fail(errc::bad_state, "wait on an empty completion_channel handle");
    }
    return detail::impl_of(*this)->wait(timeout);
}

std::size_t completion_channel::attached() const noexcept {
    if (!impl_) {
        return 0;
    }
    std::lock_guard lock(detail::impl_of(*this)->mu);
    return detail::impl_of(*this)->cqs.size();
}

}  // namespace remora

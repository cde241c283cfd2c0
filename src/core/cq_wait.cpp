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
#include <functional>
#include <thread>

#include "core/impl.hpp"
#include "fabric/cq.hpp"
#include "fabric/rules.hpp"

#include "core/cq_read.hpp"

// Completion queues: trywait and wait (with the connection's request deadlines). poll and
// fill_ready are in cq_impl.cpp, beside the read they inline.

namespace remora::detail {

bool tick_if_due(connection_impl& c) {
    if (c.ext_deadline.load(std::memory_order_relaxed) ==
        std::numeric_limits<std::int64_t>::max()) {
        return false;
    }
    const auto now = clock::now();
    if (!c.deadline_passed(now)) {
        return false;
    }
    c.tick_extensions(now);
    return true;
}

// The verbs rule on receives (cq_read.hpp).
void rx_rule(const cq_impl& cq, completion& c, bool imm) {
    connection_impl& k = *cq.conn;
    if (imm && k.internal_sends != 0) {
        c.status = make_error_code(errc::invalid_argument);
        fabric_rules::report(
            *k.dom->rules,
            "a peer's write with immediate data arrived on a connection whose receives are the "
            "library's (a target service): verbs would consume one of them for it (FI_RX_CQ_DATA), "
            "and the application would never see the write; signal with a message "
            "(persistence_config::message_size) or on another connection");
        return;
    }
    const std::size_t posted = k.ops.in_use(queue::recv);  // a message's own still counts
    const std::size_t taken = k.rx_taken.load(std::memory_order_relaxed);
    if (posted <= taken) {
        c.status = make_error_code(errc::invalid_argument);
        fabric_rules::report(
            *k.dom->rules,
            imm ? "a peer's write with immediate data arrived with no receive posted for it: "
                  "verbs consumes a posted receive for each (FI_RX_CQ_DATA; caps().rx_cq_data), "
                  "and without one the writer's operation fails (receiver not ready)"
                : "a message arrived while peers' writes with immediate data had taken every "
                  "posted receive: verbs would have had none for it (receiver not ready)");
        return;
    }
    if (imm) {
        k.rx_taken.fetch_add(1, std::memory_order_relaxed);
    }
}

int remaining_ms(clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    return static_cast<int>(std::max<std::chrono::milliseconds::rep>(0, left.count()));
}

result<bool> cq_impl::trywait(bool* notified) {
    if (unreported.exchange(false)) {
        // The caller's last poll ran callbacks (or cleared a silent reap) and returned what it
        // reported: that is news, so do not let the caller sleep on it.
        if (notified != nullptr) {
            *notified = true;
        }
        return false;
    }
    if (progress_owned()) {
        pump(nullptr, false);  // see fill_ready
        // The eventfd stays readable while the ring holds entries. With the ring empty, clear
        // what a reap that reported nothing left there (or every wait would return at once);
        // anything the thread adds after this signals it again. A signal cleared here is news
        // the caller has not seen (the thread reaped entries since the last look): not armed,
        // and a wait returns it as a no_completion wake-up instead of sleeping through it.
        std::lock_guard lock(owned_mu);
        if (ready_count == 0) {
            std::uint64_t v;
            if (::read(notify.get(), &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v))) {
                if (notified != nullptr) {
                    *notified = true;
                }
                return false;
            }
        }
        return ready_count == 0;
    }
    if (drive_signals.load()) {
        // fd() is an eventfd the driving thread signals (driven_look): cleared, then armed
        // before this look at the provider, so entries that arrive after it find the arm.
        std::uint64_t v;
        [[maybe_unused]] ssize_t rd = ::read(notify.get(), &v, sizeof(v));
        if (ready_count != 0 || backlog_head < backlog.size()) {
            return false;  // a wait's read or a close left entries here
        }
        fd_armed.store(true);
        if (cq_read(cq.get(), nullptr, 0) != -fabric_errno::again) {
            fd_armed.store(false);
            return false;  // entries wait (a read of none says so), or the read failed
        }
        return true;
    }
    // A shared CQ arms under its read lock: a drain cannot slip entries into the backlog
    // between the check and the arming.
    std::unique_lock lock(read_mu, std::defer_lock);
    if (shared) {
        if (detaching.load() != 0) {
            return false;  // see fill_ready
        }
        lock.lock();
    }
    if (ready_count != 0 || backlog_head < backlog.size() || polled) {
        return false;  // a polled CQ has nothing to block on: look again
    }
    int ret = detail::trywait(dom->fabric.get(), cq.as_fid());
    if (ret == 0) {
        return true;
    }
    if (ret == -fabric_errno::again) {
        return false;
    }
    return fail(fabric_error(ret, "fi_trywait"));
}

void cq_impl::driven_look() noexcept {
    // A read of no entries calls into the provider and says whether entries wait (0).
    if (cq_read(cq.get(), nullptr, 0) == 0 && fd_armed.load(std::memory_order_relaxed) &&
        fd_armed.exchange(false)) {
        signal_notify();
    }
}

int cq_impl::user_fd() {
    if (!polled || progress_owned() || conn == nullptr || !conn->same_host || shared) {
        return wait_fd();
    }
    std::lock_guard lock(fd_mu);
    if (!drive_signals.load()) {
        unique_fd e(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (e.get() < 0) {
            return -1;
        }
        notify = std::move(e);
        drive_signals.store(true);
        if (!driven && !conn->drive_by_thread()) {
            drive_signals.store(false);
            return -1;
        }
    }
    return notify.get();
}

void poll_backoff::pause(clock::time_point deadline) {
    if (spinning) {
        // Not sched_yield: with more waiters than cores, a waiter that yields hands its core to
        // another waiter that yields back, and the thread with work waits for the scheduler's
        // tick (docs/performance.md, the channels rows on shm).
        if (rounds == 0) {
            spin_end = clock::now() + spin_time;
        }
        if ((++rounds & 15) != 0 || clock::now() < spin_end) {
            cpu_relax();
            return;
        }
        spinning = false;
        rounds = 0;
    }
    ++rounds;
    const auto step = std::chrono::microseconds(std::min<long>(1000, 10L << std::min(rounds, 7)));
    const auto left = deadline - clock::now();
    std::this_thread::sleep_for(
        std::min<clock::duration>(step, std::max<clock::duration>(left, {})));
}

namespace {

[[gnu::cold, gnu::noinline]] tl::unexpected<error> timed_out(cq_kind kind,
                                                             std::chrono::milliseconds timeout) {
    return fail(errc::timed_out, std::string("no completion on the ") + to_string(kind) +
                                     " within " + std::to_string(timeout.count()) + " ms");
}

}  // namespace

inline bool cq_impl::look(ssize_t& ready) {
    ready = fill_ready();
    const bool reaped_now = reaped;
    deliver();  // callbacks read here run now, outside the CQ's lock
    // Entries reaped without a completion to report (callbacks, hidden successes, reclaimed
    // unsignalled operations) end the wait too: in_flight() dropped.
    return ready != 0 || reaped_now;
}

result<std::size_t> cq_impl::wait(std::chrono::milliseconds timeout) {
    if (ssize_t ready = 0; look(ready)) [[likely]] {
        if (ready < 0) [[unlikely]] {
            return read_failure(ready);
        }
        return static_cast<std::size_t>(ready);
    }
    return sleep_until_ready(timeout);
}

result<std::size_t> cq_impl::sleep_until_ready(std::chrono::milliseconds timeout) {
    const auto deadline = deadline_after(timeout);
    poll_backoff backoff;
    for (bool first = true;; first = false) {
        if (ssize_t ready = 0; !first && look(ready)) {
            if (ready < 0) {
                return read_failure(ready);
            }
            return static_cast<std::size_t>(ready);
        }
        if (conn != nullptr) {
            // A request's deadline (an addon's, e.g. persistence_config::service_timeout) ends the
            // wait's sleep (below) and is acted on here, before any sleep or fd-less back-off
            // (shm): what it cancels is read on the next round like any completion.
            if (tick_if_due(*conn)) {
                continue;
            }
        }
        if (polled && !progress_owned()) {
            // Nothing to arm or block on (no wait fd): report what trywait would (entries a poll
            // consumed without reporting them), else back off between looks (a spin, then up to
            // 1 ms).
            if (unreported.exchange(false)) {
                return std::size_t{0};
            }
            if (clock::now() >= deadline) {
                return timed_out(kind, timeout);
            }
            backoff.pause(deadline);
            continue;
        }
        bool notified = false;
        auto armed = trywait(&notified);
        if (!armed) {
            return fail(armed.error());
        }
        if (notified) {
            deliver();
            return std::size_t{0};  // the progress thread reaped since the caller last looked
        }
        if (!*armed) {
            if (clock::now() >= deadline) {
                return timed_out(kind, timeout);
            }
            continue;  // the provider says completions are (about to be) ready: read again
        }
        // The connection's event queue wakes the wait too: a disconnect cancels what the
        // provider did not flush, and those completions then land here. Providers that notice a
        // dead peer only when called into (sockets) get a liveness slice; a shared CQ's wait
        // uses the slice to read its connections' events.
        const bool watch_events = conn != nullptr && dom->watch_disconnects && conn->arm_events();
        pollfd p[2] = {{wait_fd(), POLLIN, 0}, {watch_events ? conn->eq_fd : -1, POLLIN, 0}};
        int wait_ms = remaining_ms(deadline);
        const auto slice = static_cast<int>(dom->liveness_interval.count());
        const bool lively = conn != nullptr || shared;
        if (lively && slice > 0) {
            wait_ms = std::min(wait_ms, slice);
        }
        if (conn != nullptr) {
            // A request's deadline (an addon's, e.g. persistence_config::service_timeout) wakes the
            // wait.
            const auto due = std::chrono::steady_clock::time_point(
                std::chrono::steady_clock::duration(conn->ext_deadline.load()));
            if (due < deadline) {
                wait_ms = std::min(wait_ms, remaining_ms(due) + 1);
            }
        }
        int rc = ::poll(p, watch_events ? 2 : 1, wait_ms);
        if (rc < 0 && errno != EINTR) {
            return fail(errc::provider_error,
                        std::string("poll on CQ fd: ") + std::strerror(errno));
        }
        if (rc <= 0 && lively && clock::now() < deadline) {
            if (conn != nullptr) {
                conn->drive();
            } else {
                drive_attached();
            }
            continue;
        }
        if (rc <= 0) {
            return timed_out(kind, timeout);
        }
        if (watch_events && (p[1].revents & POLLIN) != 0) {
            conn->poll_events();
            if ((p[0].revents & POLLIN) == 0) {
                continue;
            }
        }
        const ssize_t woke = fill_ready();  // 0 here is a no_completion wake-up
        if (woke == 0 && progress_owned()) {
            // This wake-up reports what the progress thread signalled (e.g. it ran a callback
            // after the caller's last poll): consume the signal, or the next wait would report
            // the same news again instead of sleeping.
            std::lock_guard lock(owned_mu);
            if (ready_count == 0) {
                std::uint64_t v;
                [[maybe_unused]] ssize_t rd = ::read(notify.get(), &v, sizeof(v));
            }
        }
        deliver();  // last: a callback may destroy the connection owning this CQ
        if (woke < 0) {
            return read_failure(woke);
        }
        return static_cast<std::size_t>(woke);
    }
}

}  // namespace remora::detail

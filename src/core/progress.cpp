// SPDX-License-Identifier: BSD-3-Clause
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/impl.hpp"
#include "core/liveness.hpp"
#include "fabric/cntr.hpp"
#include "fabric/cq.hpp"

// The library-owned progress thread (progress_engine).

namespace remora::detail {

// ---------------------------------------------------------------- progress thread

result<std::unique_ptr<progress_engine>> progress_engine::start(progress_policy policy,
                                                                std::chrono::microseconds spin,
                                                                fid_cntr* rma_events) {
    std::unique_ptr<progress_engine> e(new progress_engine());
    e->policy_ = policy;
    e->spin_ = spin;
    e->rma_events_ = policy == progress_policy::adaptive ? rma_events : nullptr;
    e->epfd_ = unique_fd(epoll_create1(EPOLL_CLOEXEC));
    e->wake_ = unique_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (e->epfd_.get() < 0 || e->wake_.get() < 0) {
        return fail(errc::provider_error, std::string("progress thread: ") + std::strerror(errno));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    epoll_ctl(e->epfd_.get(), EPOLL_CTL_ADD, e->wake_.get(), &ev);
    e->thread_ = std::thread([p = e.get()] {
        // Named, so `top -H` and tests can tell it apart (15 characters at most).
        pthread_setname_np(pthread_self(), "remora-progress");
        p->run();
    });
    return e;
}

progress_engine::~progress_engine() {
    stop_.store(true);
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_.get(), &one, sizeof(one));
    {
        std::lock_guard lock(mu_);
        if (cq_impl* cq = in_provider_.load()) {
            interrupt_wait(cq);
        }
    }
    if (thread_.joinable()) {
        thread_.join();
    }
}

namespace {

// The connection's CQ (not its RCQ: one look each) of a connection watching its RDM peer's
// liveness.
bool watches_liveness(const cq_impl* cq) {
    return cq->conn != nullptr && cq->conn->cq.get() == cq && liveness_on(cq->conn->config);
}

}  // namespace

result<void> progress_engine::watch(cq_impl* cq) {
    waiting_.fetch_add(1);
    std::unique_lock lock(mu_);
    waiting_.fetch_sub(1);
    cq->ready.assign(std::max(cq->size, cq_impl::ready_capacity), completion{});
    cq->ready_from.assign(cq->ready.size(), {});
    cq->notify = unique_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (cq->notify.get() < 0) {
        return fail(errc::provider_error,
                    std::string("progress thread: eventfd: ") + std::strerror(errno));
    }
    epoll_event ev{};
    // Edge-triggered: a CQ fd wakes the thread when something new arrives behind it, not for as
    // long as it stays readable. A dead peer's hang-up, or a message waiting for a receive not
    // yet posted, keeps the fd readable with nothing the provider will take: level-triggered,
    // that is a spin. What a drive leaves readable is looked at again on a timer (run()).
    ev.events = EPOLLIN | EPOLLET;
    ev.data.ptr = cq;
    if (cq_impl* q = in_provider_.load()) {
        interrupt_wait(q);  // two CQs to wait for: the thread waits in epoll from now on
    }
    if (cq->polled) {
        polled_.push_back(cq);  // nothing to block on: looked at every tick
        // The thread may be blocked without a timeout (no polled CQ until now): wake it.
        std::uint64_t one = 1;
        [[maybe_unused]] ssize_t w = ::write(wake_.get(), &one, sizeof(one));
    } else if (epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, cq->fd, &ev) != 0) {
        return fail(errc::provider_error,
                    std::string("progress thread: epoll_ctl ADD: ") + std::strerror(errno));
    }
    watched_.push_back(cq);
    cq->progress = this;
    if (watches_liveness(cq)) {
        live_watch_.fetch_add(1);
        std::uint64_t one = 1;  // a thread blocked without a timeout looks at it now
        [[maybe_unused]] ssize_t w = ::write(wake_.get(), &one, sizeof(one));
    }
    return {};
}

void progress_engine::kick(cq_impl* cq) {
    {
        std::lock_guard lock(kick_mu_);
        if (std::find(kicked_.begin(), kicked_.end(), cq) != kicked_.end()) {
            return;
        }
        kicked_.push_back(cq);
    }
    kicks_.store(true);
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_.get(), &one, sizeof(one));
    if (in_provider_.load() == cq) {  // seq_cst with run()'s store, then load of kicks_
        interrupt_wait(cq);
    }
}

void progress_engine::interrupt_wait(cq_impl* cq) {
    // try_lock in a loop: TSan (GCC 12) does not see timed_mutex::try_lock_for's lock.
    for (int i = 0;; ++i) {
        if (i % 20 == 0) {
            cq_signal(cq->cq.get());  // again each millisecond (see the declaration)
        }
        if (provider_wait_.try_lock()) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    provider_wait_.unlock();
}

void progress_engine::drive(cq_impl* cq) {
    waiting_.fetch_add(1);
    std::unique_lock lock(mu_);
    waiting_.fetch_sub(1);
    if (cq->driven) {
        return;  // driven already (a connection's CQ and RCQ are driven together)
    }
    if (cq_impl* q = in_provider_.load()) {
        interrupt_wait(q);  // a CQ to drive on every tick: the thread waits in epoll from now on
    }
    driven_.push_back(cq);
    cq->driven = true;
    // The thread may be blocked without a timeout (nothing ticked until now): wake it.
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_.get(), &one, sizeof(one));
}

void progress_engine::unwatch(cq_impl* cq) {
    waiting_.fetch_add(1);
    std::unique_lock lock(mu_);
    waiting_.fetch_sub(1);
    if (cq->driven) {
        driven_.erase(std::remove(driven_.begin(), driven_.end(), cq), driven_.end());
        cq->driven = false;
        return;
    }
    if (in_provider_.load() == cq) {
        interrupt_wait(cq);  // out of the provider before the CQ may close
    }
    {
        std::lock_guard k(kick_mu_);
        kicked_.erase(std::remove(kicked_.begin(), kicked_.end(), cq), kicked_.end());
    }
    if (cq->polled) {
        polled_.erase(std::remove(polled_.begin(), polled_.end(), cq), polled_.end());
    } else {
        epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, cq->fd, nullptr);
    }
    const auto before = watched_.size();
    watched_.erase(std::remove(watched_.begin(), watched_.end(), cq), watched_.end());
    if (watched_.size() != before && watches_liveness(cq)) {
        live_watch_.fetch_sub(1);
    }
}

std::chrono::steady_clock::time_point progress_engine::tick_liveness() {
    auto next = std::chrono::steady_clock::time_point::max();
    if (live_watch_.load(std::memory_order_relaxed) == 0) {
        return next;
    }
    const auto now = std::chrono::steady_clock::now();
    for (cq_impl* cq : watched_) {
        if (watches_liveness(cq)) {
            next = std::min(next, liveness_progress(*cq->conn, now));
        }
    }
    return next;
}

void progress_engine::run_busy() {
    // Reads every CQ in a loop: the provider progresses on each read, with no fd in the way. The
    // loop holds mu_ across rounds (no lock per look): a waiting watch or unwatch (waiting_) gets
    // it between two rounds (std::mutex is not fair: yield before re-taking it).
    std::unique_lock lock(mu_);
    for (unsigned round = 0; !stop_.load(std::memory_order_relaxed); ++round) {
        if (round % 1024 == 0) {
            (void)tick_liveness();  // a look at the peers' liveness every so many rounds
        }
        if (kicks_.load(std::memory_order_relaxed) && kicks_.exchange(false)) {
            // Every watched CQ is read below: the kicked ones too.
            std::lock_guard k(kick_mu_);
            kicked_.clear();
        }
        for (cq_impl* cq : watched_) {
            cq->pump(nullptr, true, false);
        }
        for (cq_impl* cq : driven_) {
            cq->driven_look();
        }
        if (waiting_.load(std::memory_order_relaxed) != 0) {
            lock.unlock();
            std::this_thread::yield();
            lock.lock();
        }
    }
}

void progress_engine::run() {
    if (policy_ == progress_policy::busy) {
        run_busy();
        return;
    }
    epoll_event evs[16];
    // CQs whose provider kept refusing to arm (trywait: fabric_errno::again) although reading them
    // yields nothing: tcp does that while a message waits for a receive the application has not
    // posted yet. They are driven again on the lingering CQs' timer (below) instead of spinning
    // on one of them, which would starve every other CQ of this thread.
    std::vector<cq_impl*> unsettled;
    // This thread is each watched CQ's only reader: read (which drives the provider's progress)
    // until it is empty, then arm it; a failed arm means more arrived, so read again.
    // Whether the drives since it was last cleared read any entry.
    bool drove_entries = false;
    auto drive = [&](cq_impl* cq) {
        bool reaped = false;
        if (cq->polled) {
            cq->pump(&reaped);  // no wait object to arm: looked at again next tick
            drove_entries = drove_entries || reaped;
            return;
        }
        for (int round = 0, idle = 0; round < 32 && idle < 2; ++round) {
            cq->pump(&reaped);
            drove_entries = drove_entries || reaped;
            idle = reaped ? 0 : idle + 1;  // refused twice with nothing read: leave it to the timer
            const int armed = detail::trywait(cq->dom->fabric.get(), cq->cq.as_fid());
            if (armed == 0 || cq->ready_now() >= cq->ready.size()) {
                return;
            }
            if (armed != -fabric_errno::again) {
                break;  // not armed (an error): driven again on the timer, never left asleep
            }
        }
        if (std::find(unsettled.begin(), unsettled.end(), cq) == unsettled.end()) {
            unsettled.push_back(cq);
        }
    };
    auto watched = [&](cq_impl* cq) {
        return std::find(watched_.begin(), watched_.end(), cq) != watched_.end();
    };
    // Woken to stop, or to drive CQs kicked from completion hooks.
    auto woken = [&] {
        std::uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(wake_.get(), &v, sizeof(v));
        std::vector<cq_impl*> kicked;
        {
            std::lock_guard k(kick_mu_);
            kicked.swap(kicked_);
            kicks_.store(false);
        }
        for (cq_impl* q : kicked) {
            if (watched(q)) {
                drive(q);
            }
        }
    };
    // blocking with a single CQ to wait for (one with a wait fd whose sread waits, nothing
    // polled): the thread sleeps in the provider's own wait (fi_cq_sread) as a plain libfabric
    // target does, not in epoll on the provider's fd (for tcp itself an epoll fd: one nested
    // wake-up less per event), then drives the CQ as after an epoll wake-up. Stop, kicks, watch
    // and unwatch interrupt it with fi_cq_signal (interrupt_wait). False: wait in epoll.
    auto wait_in_provider = [&] {
        std::unique_lock lock(mu_);
        cq_impl* cq = watched_.size() == 1 && polled_.empty() ? watched_.front() : nullptr;
        if (cq == nullptr || cq->shared || !cq->dom->cq_sread_waits || provider_wait_off_ ||
            live_watch_.load() != 0 || !driven_.empty()) {
            return false;  // (liveness: epoll, whose timeout is the next look)
        }
        {
            // Stored before kicks_ and stop_ are read (seq_cst): a kick or stop from now on
            // interrupts the wait, one before it is seen here.
            in_provider_.store(cq);
            std::unique_lock waiting(provider_wait_);
            if (!kicks_.load() && !stop_.load()) {
                lock.unlock();  // watch and unwatch take mu_, then interrupt the wait
                sleeps_.fetch_add(1, std::memory_order_relaxed);
                provider_waits_.fetch_add(1, std::memory_order_relaxed);
                const auto t0 = std::chrono::steady_clock::now();
                const int r = cq_wait_entry(cq->cq.get(), provider_wait_ms);
                in_provider_.store(nullptr);
                // tcp's sread says fabric_errno::again for a signal and a timeout: the time tells.
                if (std::chrono::steady_clock::now() - t0 >=
                    std::chrono::milliseconds(provider_wait_ms)) {
                    provider_wait_timeouts_.fetch_add(1, std::memory_order_relaxed);
                }
                if (r < 0 && r != -fabric_errno::again && r != -fabric_errno::timed_out &&
                    r != -fabric_errno::canceled && r != -fabric_errno::avail &&
                    r != -fabric_errno::interrupted) {
                    // The wait itself failed (not an entry, a signal or the timeout): waiting
                    // there again could fail at once and spin. epoll from now on.
                    provider_wait_off_ = true;
                }
                waiting.unlock();
                lock.lock();
            } else {
                in_provider_.store(nullptr);
            }
        }
        if (kicks_.load(std::memory_order_relaxed)) {
            woken();
        }
        if (watched(cq)) {
            drive(cq);
        }
        return true;
    };
    // blocking sleeps in epoll until a CQ fd fires. adaptive sleeps the same way, but after each
    // sign of traffic it polls for `spin`: it reads every CQ in a loop as `busy` does, which
    // serves the provider at once, and extends the spin on the next sign. Reading is what
    // serves: it calls into the provider, which then needs no fd to fire. Signs of traffic:
    // entries read, a CQ fd readable before the reads and quiet after them (checked with
    // poll(2)), a wake-up by a CQ fd that its drive served, a kick, and the domain's
    // remote-access counter moving (rma_events_). A peer's one-sided operations read no entry on
    // this side: the provider serves them inside the reads. On shm (no CQ fd) only the counter
    // says they happened; on tcp the fd the reads made quiet does. Without either, a steady
    // stream of them lets the thread sleep once per spin, and the next operation pays one
    // wake-up.
    std::uint64_t rma_seen = rma_events_ != nullptr ? cntr_value(rma_events_) : 0;
    using clock = std::chrono::steady_clock;
    const bool adaptive = policy_ == progress_policy::adaptive;
    clock::time_point spin_until{};
    std::vector<pollfd> fds;
    std::vector<pollfd> readable;  // the CQ fds a polling round found readable before its reads
    bool armed = true;             // every watched CQ armed (trywait) since the last polling read
    // CQs whose fd was still readable after their drive and a few reads more: a provider that
    // holds what it cannot place yet (a message waiting for a receive, a dead peer's hang-up)
    // or a stream the reads have not caught up with. Edge-triggered epoll does not wake the
    // thread for them again until something new arrives, so they are driven on a timer that
    // backs off from 1 to 8 ms while they stay readable and nothing is read.
    std::vector<cq_impl*> lingering;
    std::vector<pollfd> linger_fds;
    int linger_ms = 0;  // the timer's current step (0: nothing lingers)
    // After a wake-up's drives: read the fired and lingering CQs again while their fds stay
    // readable (a peer's one-sided writes and reads complete inside the provider and leave no
    // entry here, one message per read on tcp), at most a few rounds; what is still readable
    // then lingers. True if the provider served anything: an entry read, or an fd made quiet.
    auto settle = [&](std::vector<cq_impl*>& cqs, int rounds) {
        bool served = false;
        std::vector<cq_impl*> pumped;
        for (int round = 0; round < rounds && !cqs.empty(); ++round) {
            linger_fds.clear();
            for (cq_impl* cq : cqs) {
                linger_fds.push_back({cq->fd, POLLIN, 0});
            }
            if (::poll(linger_fds.data(), linger_fds.size(), 0) <= 0) {
                cqs.clear();
                served = true;
                break;
            }
            std::size_t kept = 0;
            for (std::size_t i = 0; i < cqs.size(); ++i) {
                if (linger_fds[i].revents == 0) {
                    served = true;
                    continue;  // drained: armed by its drive, edge-triggered from here
                }
                bool reaped = false;
                cqs[i]->pump(&reaped);
                served = served || reaped;
                if (std::find(pumped.begin(), pumped.end(), cqs[i]) == pumped.end()) {
                    pumped.push_back(cqs[i]);
                }
                cqs[kept++] = cqs[i];
            }
            cqs.resize(kept);
        }
        for (cq_impl* cq : pumped) {
            drive(cq);  // read since its arm: armed again before the thread sleeps
        }
        return served;
    };
    while (!stop_.load(std::memory_order_relaxed)) {
        if (adaptive && clock::now() < spin_until) {
            bool traffic = false;
            {
                std::lock_guard lock(mu_);
                if (watched_.size() != polled_.size()) {
                    fds.clear();  // capacity kept: no allocation once grown
                    fds.push_back({wake_.get(), POLLIN, 0});
                    for (cq_impl* cq : watched_) {
                        if (!cq->polled) {
                            fds.push_back({cq->fd, POLLIN, 0});
                        }
                    }
                    // A readable CQ fd is not traffic by itself (a dead peer's socket stays
                    // readable with nothing to read): what the pumps below read is, and so is an
                    // fd they made quiet (a peer's one-sided operation, served inside the
                    // provider, leaves no entry here).
                    if (::poll(fds.data(), fds.size(), 0) > 0) {
                        if (fds[0].revents != 0) {
                            traffic = true;
                            woken();
                        }
                        readable.clear();
                        for (std::size_t i = 1; i < fds.size(); ++i) {
                            if (fds[i].revents != 0) {
                                readable.push_back({fds[i].fd, POLLIN, 0});
                            }
                        }
                    }
                } else if (kicks_.load(std::memory_order_relaxed)) {
                    // No CQ fd to look at (shm): no poll(2) per round; a kick is the one wake-up
                    // to serve here (a stop ends the loop).
                    traffic = true;
                    woken();
                }
                unsettled.clear();  // read below like every other CQ
                for (cq_impl* cq : watched_) {
                    bool reaped = false;
                    cq->pump(&reaped, true, false);
                    traffic = traffic || reaped;
                }
                for (cq_impl* cq : driven_) {
                    cq->driven_look();  // its entries are the application's: no sign here
                }
                (void)tick_liveness();
                if (!traffic && !readable.empty()) {
                    // Fewer readable after the reads than before: the provider took something.
                    const int still = ::poll(readable.data(), readable.size(), 0);
                    traffic = still >= 0 && static_cast<std::size_t>(still) < readable.size();
                }
                readable.clear();
            }
            if (rma_events_ != nullptr && !traffic) {
                // Only a round without other signs reads the counter (a read is a provider call):
                // a round with them extends the spin anyway, and a later read sees the move.
                const std::uint64_t now_seen = cntr_value(rma_events_);
                if (now_seen != rma_seen) {
                    rma_seen = now_seen;
                    remote_signs_.fetch_add(1, std::memory_order_relaxed);
                    traffic = true;
                }
            }
            armed = false;
            if (traffic) {
                spin_until = clock::now() + spin_;
            }
            // A round that found nothing gives the CPU to any other runnable thread on this core
            // (the application's, typically). On 2 cores loaded by other work, a poller that
            // never yielded held off the very client it served: 8-byte reads at spin + 17 us
            // p50 (118 us with a 100 us spin) against 13 us when idle rounds yield. busy does not
            // yield: it behaves as a plain libfabric target that busy-polls, for a dedicated core
            // (yielding there cut 64 KiB write bandwidth on a loaded machine, measured).
            if (!traffic || waiting_.load(std::memory_order_relaxed) != 0) {
                std::this_thread::yield();
            }
            continue;
        }
        if (!adaptive && unsettled.empty() && lingering.empty() && wait_in_provider()) {
            continue;
        }
        if (!armed) {
            // Leaving the spin: arm every CQ before sleeping on the fds.
            std::lock_guard lock(mu_);
            for (cq_impl* cq : watched_) {
                drive(cq);
            }
            armed = true;
        }
        // A CQ without a wait fd (shm) is looked at every tick of 100 us.
        bool tick = false;
        auto live_next = clock::time_point::max();
        {
            std::lock_guard lock(mu_);
            tick = !polled_.empty() || !driven_.empty();
            live_next = tick_liveness();
        }
        const timespec tick_ts{0, 100'000};
        // Whoever drove a CQ since the last wait (a kick, the spin's last arm) may have left it
        // unsettled: the timer runs whenever anything lingers or is unsettled.
        if (linger_ms == 0 && (!lingering.empty() || !unsettled.empty())) {
            linger_ms = 1;
        }
        const timespec linger_ts{0, static_cast<long>(linger_ms) * 1'000'000};
        const timespec* timeout = tick ? &tick_ts : linger_ms != 0 ? &linger_ts : nullptr;
        timespec live_ts{};
        if (!tick && live_next != clock::time_point::max()) {
            // The next liveness look wakes the thread (no later than the timer would).
            const auto ns = std::max<std::int64_t>(
                0, std::chrono::duration_cast<std::chrono::nanoseconds>(live_next - clock::now())
                       .count());
            const std::int64_t cap = timeout != nullptr ? std::int64_t{linger_ms} * 1'000'000 : ns;
            const std::int64_t wait = std::min(ns, cap);
            live_ts = {static_cast<time_t>(wait / 1'000'000'000),
                       static_cast<long>(wait % 1'000'000'000)};
            timeout = &live_ts;
        }
        sleeps_.fetch_add(1, std::memory_order_relaxed);
        drove_entries = false;
        int n = epoll_pwait2(epfd_.get(), evs, 16, timeout, nullptr);
        if (n < 0 && errno == ENOSYS) {  // kernels before 5.11: millisecond ticks
            n = epoll_wait(epfd_.get(), evs, 16, timeout == nullptr ? -1 : 1);
        }
        std::lock_guard lock(mu_);
        for (cq_impl* cq : polled_) {
            cq->pump();
        }
        for (cq_impl* cq : driven_) {
            cq->driven_look();
        }
        std::vector<cq_impl*> again;
        again.swap(unsettled);
        for (cq_impl* cq : again) {
            if (watched(cq)) {
                drive(cq);
            }
        }
        bool kicked = false;
        bool edge = false;           // a CQ fd fired
        std::vector<cq_impl*> look;  // driven now: read again while their fds stay readable
        look.swap(lingering);
        for (cq_impl* cq : look) {
            if (watched(cq)) {
                drive(cq);  // the timer's look (or a wake-up's): what lingers may be placed now
            }
        }
        for (int i = 0; i < n; ++i) {
            auto* cq = static_cast<cq_impl*>(evs[i].data.ptr);
            if (cq == nullptr) {
                woken();
                kicked = true;
            } else if (watched(cq)) {
                drive(cq);
                edge = true;
                if (std::find(look.begin(), look.end(), cq) == look.end()) {
                    look.push_back(cq);
                }
            }
        }
        look.erase(
            std::remove_if(look.begin(), look.end(), [&](cq_impl* cq) { return !watched(cq); }),
            look.end());
        // Something new arrived (an edge): read until the fds go quiet, as many rounds as a
        // socket's worth of large messages takes (one message per read on tcp). The timer's
        // looks at what lingers: a few rounds.
        const bool served = settle(look, edge ? settle_rounds_new : settle_rounds_timer);
        lingering.swap(look);
        const bool read_something = drove_entries || served;
        if (lingering.empty() && unsettled.empty()) {
            linger_ms = 0;
        } else if (read_something) {
            linger_ms = 1;
        } else {
            linger_ms = linger_ms == 0 ? 1 : std::min(linger_ms * 2, 8);
            // Counted for fds that stayed readable (not for a provider that only refused to arm).
            lingering_looks_.fetch_add(lingering.empty() ? 0 : 1, std::memory_order_relaxed);
        }
        const bool quiet = n > 0 && !kicked && !read_something;
        bool remote = false;
        if (rma_events_ != nullptr) {
            // A CQ without an fd (shm) wakes only on the tick: the counter says whether the
            // pumps above served a peer's reads or writes, and restarts the spin if so.
            const std::uint64_t now_seen = cntr_value(rma_events_);
            remote = now_seen != rma_seen;
            rma_seen = now_seen;
        }
        if (adaptive && ((n > 0 && !quiet) || remote)) {
            spin_until = clock::now() + spin_;
        }
    }
}

}  // namespace remora::detail

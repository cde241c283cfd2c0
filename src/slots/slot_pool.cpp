// SPDX-License-Identifier: BSD-3-Clause
// src/slots/slot_pool.cpp — slot_pool: its policy (forbid, backpressure), the FIFO of parked
// requests and their deadlines' timer thread, over a unit_budget.
#include <remora/slot_pool.hpp>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "base/unit_budget.hpp"

namespace remora {

const char* to_string(acquired a) noexcept {
    switch (a) {
        case acquired::now:
            return "now";
        case acquired::parked:
            return "parked";
    }
    return "?";
}

// Every slot_pool is an impl (create() makes nothing else): the state lives in the same object,
// so a connection's take_units / give_units reach it through budget's virtual call only.
class slot_pool::impl final : public slot_pool {
  public:
    explicit impl(const slot_pool_config& cfg) : slot_pool(cfg), budget_(cfg.capacity.n) {}
    ~impl() override;
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;

    result<void> take(const units& need);
    void give_back(const units& u) noexcept;
    result<acquired> park_or_grant(const units& need, callback done, void* ctx,
                                   clock::time_point deadline);
    std::size_t expire(clock::time_point now);
    std::size_t cancel_all();
    [[nodiscard]] units available() const;
    [[nodiscard]] std::size_t waiting() const;
    /// Sizes the ring of parked requests (backpressure), at creation.
    void make_ring(std::size_t n) { ring_.resize(n); }

  private:
    /// budget (what a connection's operations draw through connection_config::slots): the same
    /// check as try_acquire, without a holding of its own.
    result<void> take_units(const units& need) override { return take(need); }
    void give_units(const units& u) noexcept override { give_back(u); }
    [[nodiscard]] const slot_pool_config& cfg() const noexcept { return slot_pool::cfg_; }
    result<void> check_fits_ever(const units& need) const;
    /// The timer thread's state; shared with it, so the thread outlives a pool destroyed on it.
    struct timer;
    static void run_timer(std::weak_ptr<slot_pool> pool, std::shared_ptr<timer> t);
    result<void> arm_timer(clock::time_point deadline);  ///< under budget_'s lock
    void rearm_timer();  ///< under budget_'s lock: earliest parked deadline

    struct waiter {
        units need;
        callback done;
        void* ctx;
        clock::time_point deadline;
    };
    /// The units free now; its lock also guards the parked requests and timer_ below.
    detail::unit_budget<unit_kinds> budget_;
    /// Parked requests, FIFO, in a ring sized max_waiters at creation: parking allocates nothing
    /// (but for the timer, started once, by the first request parked with a deadline).
    std::vector<waiter> ring_;
    std::size_t head_ = 0;
    std::size_t count_ = 0;
    std::shared_ptr<timer> timer_;  ///< under budget_'s lock; set once, with timer_thread_
    std::thread timer_thread_;
};

// Lock order: the pool's lock (budget_'s), then timer::mu. The timer thread holds only timer::mu
// while it sleeps, and only a strong reference to the pool (no lock) while it expires requests.
struct slot_pool::impl::timer {
    std::mutex mu;
    std::condition_variable cv;
    clock::time_point next = clock::time_point::max();  // earliest parked deadline (or later)
    bool stop = false;
};

void slot_pool::impl::run_timer(std::weak_ptr<slot_pool> pool, std::shared_ptr<timer> t) {
    for (;;) {
        {
            std::unique_lock lock(t->mu);
            for (;;) {
                if (t->stop) {
                    return;
                }
                if (t->next == clock::time_point::max()) {
                    t->cv.wait(lock);
                } else if (const auto next = t->next; clock::now() < next) {
                    t->cv.wait_until(lock, next);  // a copy: `next` may change while we wait
                } else {
                    break;
                }
            }
        }
        auto self = pool.lock();
        if (!self) {
            return;  // the pool is being destroyed (its destructor stops this thread)
        }
        self->expire();  // runs callbacks here and sets t->next again
        // Dropping what may be the last reference runs ~slot_pool on this thread; it detaches
        // this thread and sets t->stop. Only `t` is touched from here on.
        self.reset();
    }
}

result<void> slot_pool::impl::arm_timer(clock::time_point deadline) {
    if (deadline == clock::time_point::max()) {
        return {};
    }
    if (!timer_) {
        try {
            auto t = std::make_shared<timer>();
            timer_thread_ = std::thread(&impl::run_timer, weak_from_this(), t);
            timer_ = std::move(t);
        } catch (const std::exception& e) {
            return fail(
                errc::would_block,
                std::string("slot_pool: cannot start the deadline timer thread: ") + e.what());
        }
    }
    bool earlier = false;
    {
        std::lock_guard lock(timer_->mu);
        if (deadline < timer_->next) {
            timer_->next = deadline;
            earlier = true;
        }
    }
    if (earlier) {
        timer_->cv.notify_one();
    }
    return {};
}

void slot_pool::impl::rearm_timer() {
    if (!timer_) {
        return;
    }
    auto next = clock::time_point::max();
    for (std::size_t i = 0; i < count_; ++i) {
        next = std::min(next, ring_[(head_ + i) % ring_.size()].deadline);
    }
    // Invariant (under the pool's lock): timer_->next <= every parked deadline. Parking lowers it
    // and notifies (arm_timer); here it can only rise, so the sleeping timer wakes at worst early,
    // calls expire() and sleeps again until this value.
    std::lock_guard lock(timer_->mu);
    timer_->next = next;
}

slot_pool::impl::~impl() {
    // No strong reference is left, so no other call runs, and the timer thread is asleep, about
    // to find the pool gone, or is this very thread (dropping its reference after expire()).
    if (timer_) {
        {
            std::lock_guard lock(timer_->mu);
            timer_->stop = true;
        }
        timer_->cv.notify_one();
        if (timer_thread_.get_id() == std::this_thread::get_id()) {
            timer_thread_.detach();  // it returns to run_timer, sees stop and exits
        } else {
            timer_thread_.join();
        }
    }
    // Nothing is parked once the last holding is gone (each give-back grants what fits, and the
    // head always fits a full pool); should that ever change, complete rather than drop.
    cancel_all();
}

slot_pool::~slot_pool() = default;

result<std::shared_ptr<slot_pool>> slot_pool::create(const slot_pool_config& cfg) {
    if (cfg.capacity.empty()) {
        return fail(errc::invalid_argument, "slot_pool: capacity is empty");
    }
    if (cfg.policy == exhaustion::backpressure && cfg.max_waiters == 0) {
        return fail(errc::invalid_argument, "slot_pool: backpressure needs max_waiters > 0");
    }
    auto* p = new impl(cfg);
    std::shared_ptr<slot_pool> pool(p);
    if (cfg.policy == exhaustion::backpressure) {
        p->make_ring(cfg.max_waiters);
    }
    return pool;
}

result<void> slot_pool::impl::check_fits_ever(const units& need) const {
    if (need.empty()) {
        return fail(errc::invalid_argument, "slot_pool: empty demand");
    }
    if (!need.fits_in(cfg().capacity)) {
        return fail(errc::too_large, "slot_pool: demand " + to_string(need) +
                                         " exceeds the pool's capacity " +
                                         to_string(cfg().capacity));
    }
    return {};
}

result<void> slot_pool::impl::take(const units& need) {
    if (auto r = check_fits_ever(need); !r) {
        return r;
    }
    units free;
    const bool taken = budget_.exclusive([&](auto& l) {
        // FIFO fairness: parked requests go first.
        if (count_ == 0 && l.try_take(need.n)) {
            return true;
        }
        free.n = l.available();
        return false;
    });
    if (taken) {
        return {};
    }
    if (cfg().policy == exhaustion::forbid) {
        // The same in every build of the library: a returned error, never an assertion.
        return fail(errc::bad_state,
                    "slot_pool: exhausted under policy forbid (sized too small): "
                    "demand " +
                        to_string(need) + ", capacity " + to_string(cfg().capacity) + ", free " +
                        to_string(free));
    }
    return fail(errc::would_block, "slot_pool: " + to_string(need) + " not available now");
}

result<held_units> slot_pool::try_acquire(const units& need) {
    if (auto r = static_cast<impl&>(*this).take(need); !r) {
        return fail(r.error());
    }
    return hold(shared_from_this(), need);
}

result<acquired> slot_pool::acquire(const units& need, callback done, void* ctx,
                                    clock::time_point deadline) {
    return static_cast<impl&>(*this).park_or_grant(need, done, ctx, deadline);
}

result<acquired> slot_pool::impl::park_or_grant(const units& need, callback done, void* ctx,
                                                clock::time_point deadline) {
    if (cfg().policy == exhaustion::forbid) {
        return fail(errc::bad_state,
                    "slot_pool: acquire() parks requests; policy forbid never does");
    }
    if (done == nullptr) {
        return fail(errc::invalid_argument, "slot_pool: acquire() needs a callback");
    }
    if (auto r = check_fits_ever(need); !r) {
        return fail(r.error());
    }
    auto r = budget_.exclusive([&](auto& l) -> result<acquired> {
        if (count_ == 0 && l.try_take(need.n)) {
            return acquired::now;
        }
        if (count_ == ring_.size()) {
            return fail(errc::would_block, "slot_pool: " + std::to_string(count_) +
                                               " requests already wait (max_waiters)");
        }
        if (auto armed = arm_timer(deadline); !armed) {
            return fail(armed.error());
        }
        ring_[(head_ + count_) % ring_.size()] = waiter{need, done, ctx, deadline};
        ++count_;
        return acquired::parked;
    });
    if (r && *r == acquired::now) {
        done(ctx, hold(shared_from_this(), need));
    }
    return r;
}

void slot_pool::impl::give_back(const units& u) noexcept {
    // Hand the units to parked requests in FIFO order; run their callbacks outside the lock.
    std::vector<waiter> ready;
    budget_.exclusive([&](auto& l) {
        l.give(u.n);
        while (count_ != 0 && l.try_take(ring_[head_].need.n)) {
            ready.push_back(ring_[head_]);
            head_ = (head_ + 1) % ring_.size();
            --count_;
        }
    });
    for (const waiter& w : ready) {
        w.done(w.ctx, hold(shared_from_this(), w.need));
    }
}

std::size_t slot_pool::expire(clock::time_point now) {
    return static_cast<impl&>(*this).expire(now);
}

std::size_t slot_pool::impl::expire(clock::time_point now) {
    std::vector<waiter> expired;
    budget_.exclusive([&](auto&) {
        std::size_t kept = 0;
        for (std::size_t i = 0; i < count_; ++i) {
            waiter& w = ring_[(head_ + i) % ring_.size()];
            if (w.deadline <= now) {
                expired.push_back(w);
            } else {
                ring_[(head_ + kept) % ring_.size()] = w;
                ++kept;
            }
        }
        count_ = kept;
        rearm_timer();
    });
    for (const waiter& w : expired) {
        w.done(w.ctx, fail(errc::timed_out, "slot_pool: request " + to_string(w.need) +
                                                " not met before its deadline"));
    }
    // Removing a blocked head may let the next ones through.
    if (!expired.empty()) {
        give_back(units{});
    }
    return expired.size();
}

std::size_t slot_pool::cancel_all() {
    return static_cast<impl&>(*this).cancel_all();
}

std::size_t slot_pool::impl::cancel_all() {
    std::vector<waiter> all;
    budget_.exclusive([&](auto&) {
        for (std::size_t i = 0; i < count_; ++i) {
            all.push_back(ring_[(head_ + i) % ring_.size()]);
        }
        count_ = 0;
    });
    for (const waiter& w : all) {
        w.done(w.ctx, fail(errc::canceled, "slot_pool: request canceled (teardown)"));
    }
    return all.size();
}

units slot_pool::available() const {
    return static_cast<const impl&>(*this).available();
}

units slot_pool::impl::available() const {
    units u;
    u.n = budget_.available();
    return u;
}

std::size_t slot_pool::waiting() const {
    return static_cast<const impl&>(*this).waiting();
}

std::size_t slot_pool::impl::waiting() const {
    return budget_.exclusive([&](const auto&) { return count_; });
}

}  // namespace remora

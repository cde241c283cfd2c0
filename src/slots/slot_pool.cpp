// SPDX-License-Identifier: BSD-3-Clause
#include <remora/slot_pool.hpp>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <vector>

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

lease& lease::operator=(lease&& o) noexcept {
    if (this != &o) {
        reset();
        pool_ = std::move(o.pool_);
        held_ = o.held_;
        o.held_ = {};
    }
    return *this;
}

void lease::reset() noexcept {
    if (pool_) {
        auto pool = std::move(pool_);
        pool_.reset();
        const units u = held_;
        held_ = {};
        pool->give_back(u);
    }
}

// Lock order: the pool's lock (budget_'s), then timer::mu. The timer thread holds only timer::mu
// while it sleeps, and only a strong reference to the pool (no lock) while it expires requests.
struct slot_pool::timer {
    std::mutex mu;
    std::condition_variable cv;
    clock::time_point next = clock::time_point::max();  // earliest parked deadline (or later)
    bool stop = false;
};

void slot_pool::run_timer(std::weak_ptr<slot_pool> pool, std::shared_ptr<timer> t) {
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
        self->expire(clock::now());  // runs callbacks here and sets t->next again
        // Dropping what may be the last reference runs ~slot_pool on this thread; it detaches
        // this thread and sets t->stop. Only `t` is touched from here on.
        self.reset();
    }
}

result<void> slot_pool::arm_timer(clock::time_point deadline) {
    if (deadline == clock::time_point::max()) {
        return {};
    }
    if (!timer_) {
        try {
            auto t = std::make_shared<timer>();
            timer_thread_ = std::thread(&slot_pool::run_timer, weak_from_this(), t);
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

void slot_pool::rearm_timer() {
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

slot_pool::~slot_pool() {
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
    // Nothing is parked once the last lease is gone (each give-back grants what fits, and the
    // head always fits a full pool); should that ever change, complete rather than drop.
    cancel_all();
}

result<std::shared_ptr<slot_pool>> slot_pool::create(const slot_pool_config& cfg) {
    if (cfg.capacity.empty()) {
        return fail(errc::invalid_argument, "slot_pool: capacity is empty");
    }
    if (cfg.policy == exhaustion::backpressure && cfg.max_waiters == 0) {
        return fail(errc::invalid_argument, "slot_pool: backpressure needs max_waiters > 0");
    }
    std::shared_ptr<slot_pool> p(new slot_pool(cfg));
    if (cfg.policy == exhaustion::backpressure) {
        p->ring_.resize(cfg.max_waiters);
    }
    return p;
}

result<void> slot_pool::check_fits_ever(const units& need) const {
    if (need.empty()) {
        return fail(errc::invalid_argument, "slot_pool: empty demand");
    }
    if (!need.fits_in(cfg_.capacity)) {
        return fail(errc::too_large, "slot_pool: demand " + to_string(need) +
                                         " exceeds the pool's capacity " +
                                         to_string(cfg_.capacity));
    }
    return {};
}

result<void> slot_pool::take_units(const units& need) {
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
    if (cfg_.policy == exhaustion::forbid) {
        // The same in every build of the library: a returned error, never an assertion.
        return fail(errc::bad_state,
                    "slot_pool: exhausted under policy forbid (sized too small): "
                    "demand " +
                        to_string(need) + ", capacity " + to_string(cfg_.capacity) + ", free " +
                        to_string(free));
    }
    return fail(errc::would_block, "slot_pool: " + to_string(need) + " not available now");
}

result<lease> slot_pool::try_acquire(const units& need) {
    if (auto r = take_units(need); !r) {
        return fail(r.error());
    }
    return lease(shared_from_this(), need);
}

result<acquired> slot_pool::acquire(const units& need, callback done, void* ctx,
                                    clock::time_point deadline) {
    if (cfg_.policy == exhaustion::forbid) {
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
        done(ctx, lease(shared_from_this(), need));
    }
    return r;
}

void slot_pool::give_back(const units& u) noexcept {
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
        w.done(w.ctx, lease(shared_from_this(), w.need));
    }
}

std::size_t slot_pool::expire(clock::time_point now) {
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
    units u;
    u.n = budget_.available();
    return u;
}

std::size_t slot_pool::waiting() const {
    return budget_.exclusive([&](const auto&) { return count_; });
}

}  // namespace remora

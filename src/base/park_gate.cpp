// SPDX-License-Identifier: BSD-3-Clause
// src/base/park_gate.cpp — the FIFO of parked posts (see src/base/park_gate.hpp).
#include "base/park_gate.hpp"

#include <vector>

namespace remora::detail {

void park_gate::notify_slow(std::uint64_t n) noexcept {
    std::lock_guard lock(mu_);
    given_ += n;
    if (head_ != nullptr) {
        wake(*head_);
    }
}

void park_gate::wake(node& n) {
    if (n.queued) {
        work_cv_.notify_one();
    } else {
        n.cv.notify_one();
    }
}

park_gate::~park_gate() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    work_cv_.notify_all();
    if (worker_.joinable()) {
        if (worker_.get_id() == std::this_thread::get_id()) {
            worker_.detach();  // destroyed from a queued post's end(): the loop sees stopping_
        } else {
            worker_.join();
        }
    }
    // Queued posts left behind (their owners should have ended them) are dropped.
    for (node* p = head_; p != nullptr;) {
        node* next = p->next;
        if (p->queued) {
            delete p;
        }
        p = next;
    }
}

void park_gate::start_worker() {
    if (!worker_.joinable()) {
        worker_ = std::thread([this] { work(); });
    }
}

result<bool> park_gate::queue(queued_post p) {
    std::uint64_t seen = 0;
    bool tried = false;
    {
        std::lock_guard lock(mu_);
        seen = given_;
        tried = head_ == nullptr;
        if (tried) {
            // Counted before the try (as a blocking waiter is): a give-back landing during it must
            // move given_ past `seen`, or the post would be queued owing nothing and never tried.
            ++waiters_;
        }
    }
    if (tried) {
        // Nobody waits: try now, on the caller's thread (no hop to the worker when units are
        // free). A give-back after `seen` makes the worker try again.
        auto r = p.attempt();
        if (r || !(r.error() == errc::would_block)) {
            --waiters_;
            if (r) {
                return true;
            }
            return fail(r.error());
        }
    }
    auto n = std::make_unique<node>();
    n->owner = p.owner;
    n->queued = std::make_unique<queued_post>(std::move(p));
    n->seen = seen;
    n->tried = tried;
    std::lock_guard lock(mu_);
    start_worker();
    node* raw = n.release();
    raw->prev = tail_;
    if (tail_ != nullptr) {
        tail_->next = raw;
    } else {
        head_ = raw;
    }
    tail_ = raw;
    if (!tried) {
        ++waiters_;
    }
    work_cv_.notify_one();  // a new deadline, or a head to try
    return false;
}

void park_gate::work() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
        // Queued posts that were ended or whose deadline passed leave first.
        const auto now = clock::now();
        std::vector<std::unique_ptr<node>> gone;  // in FIFO order
        for (node* p = head_; p != nullptr;) {
            node* next = p->next;
            if (p->queued && (p->end != errc::ok || p->queued->deadline <= now)) {
                if (p->end == errc::ok) {
                    p->end = errc::timed_out;
                }
                unlink(*p);
                gone.emplace_back(p);
            }
            p = next;
        }
        if (!gone.empty()) {
            lock.unlock();
            for (auto& p : gone) {
                p->queued->end(error(p->end, ended(p->queued->what, p->end)));
            }
            gone.clear();
            lock.lock();
            continue;
        }
        // The head is a queued post and something came back since it last tried: try it.
        if (node* h = head_; h != nullptr && h->queued && may_try(*h)) {
            const std::uint64_t snapshot = given_;
            h->trying = std::this_thread::get_id();
            lock.unlock();
            auto r = h->queued->attempt();
            lock.lock();
            h->trying = {};
            if (r || !(r.error() == errc::would_block)) {
                unlink(*h, static_cast<bool>(r));
                lock.unlock();
                std::unique_ptr<node> done(h);
                if (!r) {
                    done->queued->end(r.error());
                }
                done.reset();
                lock.lock();
            } else {
                h->seen = snapshot;
                h->tried = true;
                left_.notify_all();  // still parked: a wake_owner waiting for the try counts it
            }
            continue;
        }
        clock::time_point next = clock::time_point::max();
        for (node* p = head_; p != nullptr; p = p->next) {
            if (p->queued && p->queued->deadline < next) {
                next = p->queued->deadline;
            }
        }
        if (next == clock::time_point::max()) {
            work_cv_.wait(lock);
        } else {
            work_cv_.wait_until(lock, next);
        }
    }
}

void park_gate::unlink(node& n, bool admitted) {
    const bool was_head = n.prev == nullptr;
    // Admitted after waiting for a give-back: it used one (given_ > n.seen, so seen + 1 <= given_).
    const bool hand_off = admitted && n.tried;
    const std::uint64_t used = n.seen + 1;
    (n.prev != nullptr ? n.prev->next : head_) = n.next;
    (n.next != nullptr ? n.next->prev : tail_) = n.prev;
    n.next = n.prev = nullptr;
    --waiters_;
    if (was_head && head_ != nullptr) {
        // The next waiter's turn: it owes the give-back its predecessor used, and is woken now
        // only if more came back (hand_off); otherwise it tries at once.
        node& h = *head_;
        h.tried = hand_off;
        h.seen = hand_off ? used : 0;
        if (may_try(h)) {
            wake(h);
        }
    }
    left_.notify_all();
}

void park_gate::leave(node& n, bool admitted) {
    std::lock_guard lock(mu_);
    unlink(n, admitted);
}

errc park_gate::await_try(node& n, clock::time_point deadline, std::uint64_t& seen, bool refused) {
    std::unique_lock lock(mu_);
    if (!refused) {
        // Enters the FIFO (one lock with the wait for its turn).
        n.prev = tail_;
        if (tail_ != nullptr) {
            tail_->next = &n;
        } else {
            head_ = &n;
        }
        tail_ = &n;
        ++waiters_;  // before the first try: a give-back after it notifies
    } else {
        n.seen = seen;  // give-backs up to the refused try's snapshot did not suffice
        n.tried = true;
        n.trying = {};
        left_.notify_all();  // still parked: a wake_owner waiting for the try counts it
    }
    while (n.end == errc::ok && !may_try(n)) {
        if (n.cv.wait_until(lock, deadline) == std::cv_status::timeout && n.end == errc::ok &&
            !may_try(n)) {
            n.end = errc::timed_out;
        }
    }
    const errc end = n.end;
    if (end != errc::ok) {
        unlink(n);
    } else {
        n.trying = std::this_thread::get_id();  // until leave() or the next await_try
    }
    seen = given_;  // the head's snapshot, taken before it tries
    return end;
}

std::string park_gate::ended(const char* what, errc end) {
    const char* why = end == errc::timed_out      ? "its deadline passed"
                      : end == errc::canceled     ? "it was canceled"
                      : end == errc::disconnected ? "the connection was closed"
                                                  : "it was ended";
    return std::string(what) + ": parked waiting for units; " + why + "; nothing was posted";
}

void park_gate::await_tries(std::unique_lock<std::mutex>& lock, const void* owner) const {
    const auto self = std::this_thread::get_id();
    left_.wait(lock, [&] {
        for (const node* p = head_; p != nullptr; p = p->next) {
            if ((owner == nullptr || p->owner == owner) && p->trying != std::thread::id{} &&
                p->trying != self) {
                return false;
            }
        }
        return true;
    });
}

std::size_t park_gate::wake_owner(const void* owner, errc code) {
    std::unique_lock lock(mu_);
    // A post being tried now is not counted (nor ended) before its try says whether it posted.
    await_tries(lock, owner);
    std::size_t n = 0;
    for (node* p = head_; p != nullptr; p = p->next) {
        if ((owner == nullptr || p->owner == owner) && p->end == errc::ok) {
            p->end = code;
            wake(*p);
            ++n;
        }
    }
    return n;
}

void park_gate::close_owner(const void* owner, errc code) {
    wake_owner(owner, code);
    std::unique_lock lock(mu_);
    if (worker_.joinable() && worker_.get_id() == std::this_thread::get_id()) {
        // Called from a queued post's end() (it destroyed a connection): the worker cannot wait
        // for itself; the owner's queued posts end here.
        std::vector<std::unique_ptr<node>> mine;
        for (node* p = head_; p != nullptr;) {
            node* next = p->next;
            if (p->queued && (owner == nullptr || p->owner == owner)) {
                unlink(*p);
                mine.emplace_back(p);
            }
            p = next;
        }
        lock.unlock();
        for (auto& p : mine) {
            p->queued->end(error(p->end, ended(p->queued->what, p->end)));
        }
        lock.lock();
    }
    left_.wait(lock, [&] {
        for (node* p = head_; p != nullptr; p = p->next) {
            if (owner == nullptr || p->owner == owner) {
                return false;
            }
        }
        return true;
    });
}

std::size_t park_gate::waiting(const void* owner) const {
    std::unique_lock lock(mu_);
    await_tries(lock, owner);
    std::size_t n = 0;
    for (node* p = head_; p != nullptr; p = p->next) {
        n += owner == nullptr || p->owner == owner ? 1 : 0;
    }
    return n;
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/base/park_gate.cpp — the FIFO of parked posts (see include/remora/park_gate.hpp).
#include <remora/park_gate.hpp>

namespace remora::detail {

void park_gate::notify_slow() noexcept {
    std::lock_guard lock(mu_);
    ++given_;
    if (head_ != nullptr) {
        head_->cv.notify_one();
    }
}

void park_gate::enter(node& n) {
    std::lock_guard lock(mu_);
    n.prev = tail_;
    if (tail_ != nullptr) {
        tail_->next = &n;
    } else {
        head_ = &n;
    }
    tail_ = &n;
    ++waiters_;  // before the first try: a give-back after it notifies
}

void park_gate::unlink(node& n) {
    (n.prev != nullptr ? n.prev->next : head_) = n.next;
    (n.next != nullptr ? n.next->prev : tail_) = n.prev;
    const bool was_head = n.prev == nullptr;
    n.next = n.prev = nullptr;
    --waiters_;
    if (was_head && head_ != nullptr) {
        head_->cv.notify_one();  // the next waiter's turn
    }
    left_.notify_all();
}

void park_gate::leave(node& n) {
    std::lock_guard lock(mu_);
    unlink(n);
}

errc park_gate::await_turn(node& n, clock::time_point deadline, std::uint64_t& seen) {
    std::unique_lock lock(mu_);
    while (n.end == errc::ok && head_ != &n) {
        if (n.cv.wait_until(lock, deadline) == std::cv_status::timeout && n.end == errc::ok &&
            head_ != &n) {
            n.end = errc::timed_out;
        }
    }
    const errc end = n.end;
    if (end != errc::ok) {
        unlink(n);
    }
    seen = given_;  // the head's snapshot, taken before it tries
    return end;
}

errc park_gate::await_give(node& n, clock::time_point deadline, std::uint64_t seen) {
    std::unique_lock lock(mu_);
    while (n.end == errc::ok && given_ == seen) {
        if (n.cv.wait_until(lock, deadline) == std::cv_status::timeout && n.end == errc::ok &&
            given_ == seen) {
            n.end = errc::timed_out;
        }
    }
    const errc end = n.end;
    if (end != errc::ok) {
        unlink(n);
    }
    return end;
}

std::string park_gate::ended(const char* what, errc end) {
    const char* why = end == errc::timed_out      ? "its deadline passed"
                      : end == errc::canceled     ? "it was canceled"
                      : end == errc::disconnected ? "the connection was closed"
                                                  : "it was ended";
    return std::string(what) + ": parked waiting for units; " + why + "; nothing was posted";
}

std::size_t park_gate::wake_owner(const void* owner, errc code) {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (node* p = head_; p != nullptr; p = p->next) {
        if ((owner == nullptr || p->owner == owner) && p->end == errc::ok) {
            p->end = code;
            p->cv.notify_one();
            ++n;
        }
    }
    return n;
}

void park_gate::close_owner(const void* owner, errc code) {
    wake_owner(owner, code);
    std::unique_lock lock(mu_);
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
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (node* p = head_; p != nullptr; p = p->next) {
        n += owner == nullptr || p->owner == owner ? 1 : 0;
    }
    return n;
}

}  // namespace remora::detail

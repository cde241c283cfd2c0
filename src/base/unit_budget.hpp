// SPDX-License-Identifier: BSD-3-Clause
// src/base/unit_budget.hpp — the all-or-nothing reservation of K kinds of units against
// capacities that every budget of the library is written with: slot_pool's accounting
// (src/slots/slot_pool.cpp) and a shared CQ's reserved entries (src/core/cq_impl.hpp). A
// connection's operation records count themselves in their lock-free free lists
// (src/ops/op_pool.hpp).
//
// Threading: every call may run concurrently: each takes the lock; exclusive() runs a function
// under it, which must not call back into the same unit_budget.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>

namespace remora::detail {

/// K kinds of units reserved against capacities, all or nothing, under one lock. The ledger is
/// the unlocked part: exclusive() hands it to a policy that must decide under the same lock
/// (slot_pool's FIFO of parked requests, a shared CQ's attached list).
template <std::size_t K>
class unit_budget {
  public:
    using counts = std::array<std::uint32_t, K>;

    class ledger {
      public:
        [[nodiscard]] bool fits(const counts& need) const noexcept {
            for (std::size_t i = 0; i < K; ++i) {
                if (need[i] > free_[i])
                    return false;
            }
            return true;
        }
        /// All of `need`, or nothing (false).
        [[nodiscard]] bool try_take(const counts& need) noexcept {
            if (!fits(need)) {
                return false;
            }
            for (std::size_t i = 0; i < K; ++i)
                free_[i] -= need[i];
            return true;
        }
        /// Returns units taken before; never more than the capacity.
        void give(const counts& u) noexcept {
            for (std::size_t i = 0; i < K; ++i) {
                free_[i] = cap_[i] - free_[i] > u[i] ? free_[i] + u[i] : cap_[i];
            }
        }
        void take_one(std::size_t kind) noexcept { --free_[kind]; }  // after fits / free > 0
        void give_one(std::size_t kind) noexcept {
            if (free_[kind] < cap_[kind])
                ++free_[kind];
        }
        [[nodiscard]] const counts& available() const noexcept { return free_; }
        [[nodiscard]] const counts& capacity() const noexcept { return cap_; }
        [[nodiscard]] std::uint32_t free(std::size_t kind) const noexcept { return free_[kind]; }
        /// In use of one kind: capacity minus free.
        [[nodiscard]] std::uint32_t used(std::size_t kind) const noexcept {
            return cap_[kind] - free_[kind];
        }
        /// New capacities, all free (nothing may be out).
        void reset(const counts& capacity) noexcept { cap_ = free_ = capacity; }

      private:
        counts cap_{};
        counts free_{};
    };

    unit_budget() = default;
    explicit unit_budget(const counts& capacity) { l_.reset(capacity); }

    [[nodiscard]] bool try_take(const counts& need) {
        std::lock_guard lock(mu_);
        return l_.try_take(need);
    }
    void give(const counts& u) noexcept {
        std::lock_guard lock(mu_);
        l_.give(u);
    }
    [[nodiscard]] counts available() const {
        std::lock_guard lock(mu_);
        return l_.available();
    }
    /// Runs f(ledger&) under the budget's lock and returns what it returns.
    template <class F>
    decltype(auto) exclusive(F&& f) {
        std::lock_guard lock(mu_);
        return std::forward<F>(f)(l_);
    }
    template <class F>
    decltype(auto) exclusive(F&& f) const {
        std::lock_guard lock(mu_);
        return std::forward<F>(f)(static_cast<const ledger&>(l_));
    }

  private:
    mutable std::mutex mu_;
    ledger l_;
};

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/units.hpp — units of queue resources, and budgets that lend them (the base layer).
///
/// A `units` value counts each kind of resource an operation holds from post to completion:
/// send-queue entries, completion-queue entries, posted receives, registrations, bounce buffers.
/// It is a plain value: a capacity, a demand or a holding.
///
/// A `budget` lends units: take_units() takes all of a demand or nothing, give_units() returns
/// them. It is the one interface through which a connection draws on a budget shared with other
/// connections (connection_config::slots); slot_pool (slot_pool.hpp) is the library's budget,
/// with its exhaustion policy (forbid, backpressure) on top. `held_units` holds units taken from
/// a budget and gives them back exactly once when reset or destroyed; its release() stops owning
/// them without giving them back, as std::unique_ptr::release and Seastar's
/// semaphore_units::release do (the units are then the caller's to return).
///
/// detail::unit_budget is the all-or-nothing reservation of K kinds of units against capacities
/// that every budget of the library is written with: slot_pool's accounting, a shared CQ's
/// reserved entries (a connection's operation records count themselves in their lock-free
/// free lists, src/ops/op_pool.hpp). It is in this
/// header only because slot_pool holds one by value; it is not part of the API.
///
/// Threading: `units` is a value. A budget's calls may run concurrently (slot_pool's do). A
/// held_units is a value (one thread at a time) that may be reset or destroyed on any thread.
/// unit_budget's calls may run concurrently: each takes its lock; exclusive() runs a function
/// under it, which must not call back into the same unit_budget.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <remora/park_gate.hpp>
#include <remora/result.hpp>

namespace remora {

enum class unit : std::uint8_t { sq, cq, recv, registration, buffer };
inline constexpr std::size_t unit_kinds = 5;
const char* to_string(unit u) noexcept;

/// A count of each unit kind: a pool's capacity, a demand or a holding. The library itself takes
/// {sq 1, cq 1} per operation and {recv 1, cq 1} per receive from connection_config::slots, and
/// {registration 1} for a gather_write from unregistered memory (held until it completes);
/// buffer units are for the caller's own demands.
struct units {
    std::array<std::uint32_t, unit_kinds> n{};

    constexpr units() = default;
    constexpr std::uint32_t& operator[](unit u) noexcept { return n[static_cast<std::size_t>(u)]; }
    constexpr std::uint32_t operator[](unit u) const noexcept {
        return n[static_cast<std::size_t>(u)];
    }
    constexpr units& with(unit u, std::uint32_t count) noexcept {
        (*this)[u] = count;
        return *this;
    }
    [[nodiscard]] constexpr bool fits_in(const units& other) const noexcept {
        for (std::size_t i = 0; i < unit_kinds; ++i) {
            if (n[i] > other.n[i])
                return false;
        }
        return true;
    }
    [[nodiscard]] constexpr bool empty() const noexcept {
        for (auto v : n) {
            if (v != 0)
                return false;
        }
        return true;
    }
    friend constexpr bool operator==(const units&, const units&) = default;
};
std::string to_string(const units& u);

class held_units;

/// Something that lends units: all of a demand or nothing. Implemented by slot_pool; a
/// connection reaches its connection_config::slots through this interface only, and an
/// application may implement it too. The library calls take_units() from any thread that posts
/// (before anything is posted: a refusal fails the post, which then takes nothing) and
/// give_units() from the thread that reads the operation's completion, a failed post's thread, or
/// the one destroying the connection: both must be safe to call concurrently and must not block
/// for long. give_units() runs where completion callbacks run, under the same rules (it may post,
/// as slot_pool's parked requests do when it grants them).
///
/// Parked posts (op_options::park_until) wait on the budget's gate (park_gate.hpp), shared by all
/// the connections drawing on it: held_units gives units back and then notifies it, so an
/// implementation needs to do nothing for them. A copy has a gate of its own.
class budget {
  public:
    virtual ~budget() = default;
    /// Where posts parked on this budget wait (library-internal).
    [[nodiscard]] detail::park_gate& gate() const noexcept { return *gate_; }

  protected:
    budget() = default;
    budget(const budget&) : budget() {}
    budget& operator=(const budget&) { return *this; }

  private:
    friend class held_units;
    std::unique_ptr<detail::park_gate> gate_ = std::make_unique<detail::park_gate>();
    /// All of `need` now, or nothing (nothing is taken on failure); the error says why
    /// (the implementation's policy decides the code: slot_pool gives would_block or bad_state).
    virtual result<void> take_units(const units& need) = 0;
    /// Returns units take_units() gave out. Never fails; may run the budget's waiters.
    virtual void give_units(const units& u) noexcept = 0;
};

/// Units taken from a budget, held until reset() or destruction, which give them back exactly
/// once. Holds the budget (a shared_ptr): it lives while units are out. Move-only; a moved-from,
/// reset or released holding is empty (false, holds nothing).
class held_units {
  public:
    held_units() = default;
    /// All of `need` from `from` (non-null), or the budget's error (nothing taken).
    static result<held_units> take(std::shared_ptr<budget> from, const units& need) {
        if (auto r = from->take_units(need); !r) {
            return fail(r.error());
        }
        return held_units(std::move(from), need);
    }
    held_units(held_units&& o) noexcept : from_(std::move(o.from_)), held_(o.held_) {
        o.held_ = {};
    }
    held_units& operator=(held_units&& o) noexcept {
        if (this != &o) {
            reset();
            from_ = std::move(o.from_);
            held_ = std::exchange(o.held_, units{});
        }
        return *this;
    }
    held_units(const held_units&) = delete;
    held_units& operator=(const held_units&) = delete;
    ~held_units() { reset(); }

    /// Gives the units back now and leaves the holding empty; a no-op when empty.
    void reset() noexcept {
        if (from_) {
            auto from = std::move(from_);
            from_.reset();
            const units back = std::exchange(held_, units{});
            from->give_units(back);
            // As many operations' worth as the most of any kind (a write's {sq 1, cq 1} is one).
            std::uint32_t most = 1;
            for (auto v : back.n) {
                most = v > most ? v : most;
            }
            from->gate_->notify(most);
        }
    }
    /// Stops owning the units without giving them back; returns what was held. The budget keeps
    /// them out until someone who may (the budget's owner) returns them.
    units release() noexcept {
        from_.reset();
        return std::exchange(held_, units{});
    }
    [[nodiscard]] const units& held() const noexcept { return held_; }
    explicit operator bool() const noexcept { return from_ != nullptr; }

  private:
    held_units(std::shared_ptr<budget> from, const units& need)
        : from_(std::move(from)), held_(need) {}
    std::shared_ptr<budget> from_;
    units held_;
};

namespace detail {

/// K kinds of units reserved against capacities, all or nothing, under one lock. The ledger is
/// the unlocked part: exclusive() hands it to a policy that must decide under the same lock
/// (slot_pool's FIFO of parked requests, op_pool's free lists, a shared CQ's attached list).
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

}  // namespace detail
}  // namespace remora

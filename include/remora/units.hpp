// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/units.hpp — units of queue resources (units), budgets that lend them (budget), and the
/// one holder of units taken from a budget (held_units).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <remora/result.hpp>

namespace remora {

/// A kind of resource an operation holds from post to completion.
enum class unit : std::uint8_t {
    sq,            ///< a send-queue entry (send, read, write, atomic)
    cq,            ///< a completion-queue entry
    recv,          ///< a posted receive
    registration,  ///< a memory registration
    buffer,        ///< a bounce buffer (for the caller's own demands)
};
/// How many unit kinds there are (the size of units::n).
inline constexpr std::size_t unit_kinds = 5;
/// "sq", "cq", "recv", "registration", "buffer".
const char* to_string(unit u) noexcept;

/// A count of each unit kind: a pool's capacity, a demand or a holding.
///
/// The library itself takes {sq 1, cq 1} per operation and {recv 1, cq 1} per receive from
/// connection_config::slots, and {registration 1} for a gather_write or scatter_read from or into
/// unregistered memory (held until it completes); buffer units are for the caller's own demands.
///
///     auto need = remora::units{}.with(remora::unit::sq, 1).with(remora::unit::cq, 1);
///
/// \par Threading
/// A plain value.
struct units {
    std::array<std::uint32_t, unit_kinds> n{};  ///< the count of each kind, indexed by unit

    constexpr units() = default;  ///< zero of every kind
    /// The count of kind `u`.
    constexpr std::uint32_t& operator[](unit u) noexcept { return n[static_cast<std::size_t>(u)]; }
    /// The count of kind `u`.
    constexpr std::uint32_t operator[](unit u) const noexcept {
        return n[static_cast<std::size_t>(u)];
    }
    /// Sets kind `u` to `count` and returns this value, for chaining.
    constexpr units& with(unit u, std::uint32_t count) noexcept {
        (*this)[u] = count;
        return *this;
    }
    /// True when no kind exceeds its count in `other` (a demand fits in a capacity).
    [[nodiscard]] constexpr bool fits_in(const units& other) const noexcept {
        for (std::size_t i = 0; i < unit_kinds; ++i) {
            if (n[i] > other.n[i])
                return false;
        }
        return true;
    }
    /// True when every count is zero.
    [[nodiscard]] constexpr bool empty() const noexcept {
        for (auto v : n) {
            if (v != 0)
                return false;
        }
        return true;
    }
    /// Equal when every kind's count is.
    friend constexpr bool operator==(const units&, const units&) = default;
};
/// The non-zero counts, e.g.\ "{sq 1, cq 1}" ("{}" when empty).
std::string to_string(const units& u);

class held_units;

struct budget_access;  // the library's own access to a budget's parked posts

/// Something that lends units: all of a demand or nothing.
///
/// A budget is the one interface through which a connection draws on units shared with other
/// connections (connection_config::slots). slot_pool (slot_pool.hpp) is the library's budget,
/// with its exhaustion policy (forbid, backpressure) on top; an application may implement one
/// too (override take_units and give_units). Units taken are held by a held_units, which gives
/// them back exactly once.
///
/// The library calls
/// take_units() from any thread that posts (before anything is posted: a refusal fails the
/// post, which then takes nothing) and give_units() from the thread that reads the operation's
/// completion, a failed post's thread, or the one destroying the connection: both must be safe
/// to call concurrently and must not block for long. give_units() runs where completion
/// callbacks run, under the same rules (it may post, as slot_pool's parked requests do when it
/// grants them).
///
/// Parked posts (op_options::park_until) wait in a FIFO of the budget's own, shared by all the
/// connections drawing on it: held_units gives units back and then wakes it, so an
/// implementation needs to do nothing for them. A copy has a FIFO of its own.
///
/// \par Threading
/// take_units() and give_units() may be called concurrently (slot_pool's may).
class budget {
  public:
    virtual ~budget();  ///< connections and holdings drawing on it hold it (a shared_ptr)

  protected:
    budget();  ///< a budget with an empty FIFO of parked posts
    /// Copies nothing of `other`'s state: the copy has a FIFO of its own.
    budget(const budget&);
    /// Keeps this budget's own FIFO.
    budget& operator=(const budget&) noexcept { return *this; }
    /// For an implementation that hands out units it has already taken for a caller (as
    /// slot_pool grants a parked request): the holding that gives `taken` back to `self`.
    static held_units hold(std::shared_ptr<budget> self, const units& taken) noexcept;

  private:
    friend class held_units;
    friend struct budget_access;
    struct gate;  // where posts parked on this budget wait (library-internal)
    std::unique_ptr<gate> gate_;
    /// All of `need` now, or nothing (nothing is taken on failure); the error says why
    /// (the implementation's policy decides the code: slot_pool gives would_block or bad_state).
    virtual result<void> take_units(const units& need) = 0;
    /// Returns units take_units() gave out. Never fails; may run the budget's waiters.
    virtual void give_units(const units& u) noexcept = 0;
};

/// Units taken from a budget, held until reset() or destruction, which give them back exactly
/// once.
///
/// It is the one holder of units taken from a budget, whoever took them (a connection's
/// operation, or the application through held_units::take, slot_pool::try_acquire or
/// slot_pool::acquire). Giving them back then wakes the posts parked on the budget. It holds the
/// budget (a shared_ptr): the budget lives while units are out. Move-only; a moved-from or reset
/// holding is empty (false, holds nothing).
///
/// There is no release(): in C++ release() means "stop owning without giving back"
/// (unique_ptr::release, Seastar's semaphore_units::release), and a budget has no public call to
/// take units back that way, so they would leak. Give units back with reset().
///
/// Threading: a value (one thread at a time) that may be reset or destroyed on any thread. Giving
/// units back may run, on this thread and before reset() returns, the callbacks of a
/// slot_pool's parked requests the units satisfy.
class held_units {
  public:
    held_units() = default;  ///< an empty holding (false, holds nothing)
    /// Takes all of `need` from a budget, or nothing.
    /// \param from the budget (non-null); the holding keeps it alive
    /// \param need the demand
    /// \return the holding, or the budget's error (nothing taken: slot_pool gives
    ///         errc::would_block or errc::bad_state, see slot_pool::try_acquire)
    static result<held_units> take(std::shared_ptr<budget> from, const units& need) {
        if (auto r = from->take_units(need); !r) {
            return fail(r.error());
        }
        return held_units(std::move(from), need);
    }
    /// Takes over `o`'s units; `o` is left empty.
    held_units(held_units&& o) noexcept
        : from_(std::move(o.from_)), held_(std::exchange(o.held_, units{})) {}
    /// Gives this holding's units back (as reset()), then takes over `o`'s; `o` is left empty.
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
    ~held_units() { reset(); }  ///< gives the units back (as reset())

    /// Gives the units back now (as the destructor does) and leaves the holding empty; a no-op
    /// when empty.
    void reset() noexcept {
        if (from_) {
            give_back();
        }
    }
    /// The units held (none when empty).
    [[nodiscard]] const units& held() const noexcept { return held_; }
    /// True while it holds units of a budget.
    explicit operator bool() const noexcept { return from_ != nullptr; }

  private:
    friend class budget;
    held_units(std::shared_ptr<budget> from, const units& need) noexcept
        : from_(std::move(from)), held_(need) {}
    void give_back() noexcept;  // units.cpp: give_units(), then wake the budget's parked posts
    std::shared_ptr<budget> from_;
    units held_;
};

inline held_units budget::hold(std::shared_ptr<budget> self, const units& taken) noexcept {
    return held_units(std::move(self), taken);
}

}  // namespace remora

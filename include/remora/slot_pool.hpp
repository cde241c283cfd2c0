// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/slot_pool.hpp — accounting of every queue resource an operation needs, post to
/// completion: slot_pool, the library's budget with an exhaustion policy.

#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <remora/result.hpp>
#include <remora/units.hpp>  // unit, units, budget, held_units: re-exported

namespace remora {

/// What a slot_pool does when a demand does not fit (see slot_pool).
enum class exhaustion : std::uint8_t {
    forbid,        ///< sized so it cannot happen: a failed acquisition is errc::bad_state
    backpressure,  ///< errc::would_block, or acquire() parks the request
};

/// How slot_pool::create sizes a pool.
struct slot_pool_config {
    units capacity;                                ///< what the pool lends (not empty)
    exhaustion policy = exhaustion::backpressure;  ///< what a demand that does not fit gets
    std::size_t max_waiters = 1024;                ///< parked requests at most (backpressure)
};

class slot_pool;

/// What slot_pool::acquire() did with a request it accepted.
enum class acquired : std::uint8_t {
    now,     ///< granted at once: the callback has already run on the calling thread
    parked,  ///< queued: the callback will run exactly once, later
};
/// "now" or "parked".
const char* to_string(acquired a) noexcept;

/// Accounting of every queue resource an operation needs, post to completion: the library's
/// budget, with an exhaustion policy.
///
/// An operation's *slot* is everything it reserves from its post to its completion: its queue
/// entries (its record, connection.hpp) and the units it draws from a pool shared with other
/// connections. A slot pool lends those units: send-queue entries, completion-queue entries,
/// posted receives, registrations and bounce buffers. A demand takes all the units it names at
/// once or none (try_acquire), as a move-only `held_units` (units.hpp) that gives them back when
/// it is reset or destroyed — on every path. Accounting only registrations and not queue
/// entries is the classic bug this makes impossible: a demand names every unit.
///
/// \par Exhaustion policy, per pool
///  - forbid: sized so exhaustion cannot happen (client side). A failed acquisition is a bug in
///    the sizing: try_acquire returns errc::bad_state with a message naming the demand, the
///    capacity and what was free. The same in every build of the library (no assertion), so the
///    library's build type never decides the caller's behaviour. acquire() is refused with
///    bad_state: forbid never parks.
///  - backpressure: try_acquire reports errc::would_block; acquire() parks the request in FIFO
///    order and completes it when units return (optionally capped in waiters, and with a
///    deadline). A request larger than the capacity is refused at once with errc::too_large under
///    both policies.
///
/// \par Deadlines
/// Deadlines fire on their own. A parked request whose deadline passes completes with
/// errc::timed_out at the deadline (or shortly after, never before), whether or not anyone calls
/// into the pool; the requests behind it keep their FIFO order, and any it was blocking are then
/// granted. The pool's timer thread does this: one thread per pool, started when the first
/// request with a finite deadline parks (a pool that never parks one has no thread), asleep until
/// the earliest parked deadline, stopped when the pool is destroyed. expire(now) stays as a
/// manual "now": it completes at once every request whose deadline is at or before `now`.
///
/// \par Teardown and destruction
/// Holdings (held_units) hold the pool (a shared_ptr); parked requests do
/// not, but a request is parked only while units are out on holdings, and when the last holding
/// goes every parked request is granted (its holding then holds the pool). So a pool outlives the
/// requests parked on it: to end them early, call cancel_all() — each completes once with
/// errc::canceled, and its deadline never fires afterwards. Destroying the pool stops its timer
/// thread without waiting for any deadline: it is joined, or, when the last reference goes on the
/// timer thread itself (in a callback it runs), left to exit on its own. Should anything still be
/// parked then, it completes with errc::canceled, once, like cancel_all().
///
/// Connections draw on a pool through connection_config::slots (a budget shared by several
/// connections): slot_pool is a `budget` (units.hpp), the interface the endpoint layer sees, so a
/// shared_ptr<slot_pool> converts to that field. Each connection's own queue entries are its
/// records (see connection.hpp), and a shared CQ keeps a budget of its own
/// (shared_completion_queue). Units the application holds (try_acquire, acquire) and units a
/// connection's operations hold are the same held_units and come back the same way: either wakes
/// the requests parked here and the connections' posts parked on the pool.
///
/// \par Threading
/// All calls on a pool may run concurrently; a held_units is a value (one thread at a
/// time) that may be reset or destroyed on any thread. Callbacks of parked requests run exactly
/// once each, never under the pool's lock (they may call into the pool, and may run inside a
/// held_units' destructor), on the thread that:
///  - returns the units that satisfy them (held_units::reset, destruction or assignment),
///  - calls expire() or cancel_all(), or
///  - is the pool's timer thread (timed_out at a deadline, and requests granted once a timed-out
///    head no longer blocks them).
/// A callback may drop the last reference to the pool, on any of these threads.
class slot_pool : public std::enable_shared_from_this<slot_pool>, public budget {
  public:
    using clock = std::chrono::steady_clock;  ///< of acquire()'s deadlines
    /// Completion of a request acquire() accepted: its units, or (parked requests only)
    /// errc::timed_out / errc::canceled. Runs exactly once; see Threading.
    using callback = void (*)(void* ctx, result<held_units> r);

    /// A pool lending `cfg.capacity`. Held by shared_ptr (connections and holdings hold it);
    /// converts to connection_config::slots.
    /// \return the pool; errc::invalid_argument for an empty capacity, or backpressure with
    ///         max_waiters 0
    static result<std::shared_ptr<slot_pool>> create(const slot_pool_config& cfg);

    /// All of `need` now, or nothing (nothing is taken on failure): errc::would_block
    /// (backpressure; also while requests are parked, which go first), errc::bad_state (forbid:
    /// the pool was sized wrong; the message names demand and capacity), errc::too_large if it
    /// can never fit, errc::invalid_argument for an empty demand.
    /// \return the holding (gives the units back when reset or destroyed), or one of the errors
    ///         above
    result<held_units> try_acquire(const units& need);
    /// Backpressure: like try_acquire, but a request that cannot be met now is parked in FIFO
    /// order and `done` runs later with its units, or with errc::timed_out at `deadline` (by the
    /// pool's timer thread, see Deadlines), or with errc::canceled by cancel_all(). On success
    /// `done` runs exactly once, and the value says when:
    ///   acquired::now     `done` has already run, on this thread, before acquire returned (the
    ///                     units were free and nobody was parked ahead).
    ///   acquired::parked  `done` has not run; it will run exactly once later, on another call's
    ///                     thread (see slot_pool's Threading).
    /// Refused (not parked, `done` never runs) with too_large, with would_block when
    /// max_waiters are parked (or the pool's timer thread cannot be started), with bad_state
    /// under forbid, and with invalid_argument for an empty demand or a null `done`.
    /// \param need     the demand
    /// \param done     runs exactly once with the units or the request's error
    /// \param ctx      passed to `done`
    /// \param deadline when a parked request gives up (errc::timed_out); max(): never
    /// \return when `done` runs (acquired::now or acquired::parked), or one of the refusals above
    result<acquired> acquire(const units& need, callback done, void* ctx,
                             clock::time_point deadline = clock::time_point::max());
    /// Completes now, with errc::timed_out, the parked requests whose deadline is at or before
    /// `now`, then grants those they were blocking; returns how many timed out. Not needed for
    /// deadlines to fire (the timer thread does that); a manual "now" for callers that want one.
    std::size_t expire(clock::time_point now = clock::now());
    /// Completes every parked request with errc::canceled (teardown); returns how many. Requests
    /// parked afterwards are served as usual.
    std::size_t cancel_all();

    /// Stops the timer thread; see slot_pool's Teardown and destruction.
    ~slot_pool() override;
    slot_pool(const slot_pool&) = delete;
    slot_pool& operator=(const slot_pool&) = delete;

    [[nodiscard]] units available() const;  ///< units free now
    /// What the pool lends (slot_pool_config::capacity).
    [[nodiscard]] const units& capacity() const noexcept { return cfg_.capacity; }
    [[nodiscard]] std::size_t waiting() const;  ///< requests parked now
    /// Its exhaustion policy (slot_pool_config::policy).
    [[nodiscard]] exhaustion policy() const noexcept { return cfg_.policy; }

  private:
    /// Every pool is one: the accounting, the parked requests and the timer thread, in the same
    /// object (slot_pool.cpp), so drawing units costs no indirection beyond budget's call.
    class impl;
    explicit slot_pool(const slot_pool_config& cfg) : cfg_(cfg) {}
    slot_pool_config cfg_;
};

}  // namespace remora

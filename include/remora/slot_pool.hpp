// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/slot_pool.hpp — accounting of every queue resource an operation needs, post to
/// completion.
///
/// A slot pool holds budgets of units: send-queue entries, completion-queue entries, posted
/// receives, registrations and bounce buffers. An operation takes all the units it needs at
/// once or none (try_acquire), as a move-only `lease` that gives them back when it is reset or
/// destroyed — on every path. Accounting only registrations and not queue entries is the
/// classic bug this makes impossible: a demand names every unit.
///
/// Exhaustion policy, per pool:
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
/// Deadlines fire on their own. A parked request whose deadline passes completes with
/// errc::timed_out at the deadline (or shortly after, never before), whether or not anyone calls
/// into the pool; the requests behind it keep their FIFO order, and any it was blocking are then
/// granted. The pool's timer thread does this: one thread per pool, started when the first
/// request with a finite deadline parks (a pool that never parks one has no thread), asleep until
/// the earliest parked deadline, stopped when the pool is destroyed. expire(now) stays as a
/// manual "now": it completes at once every request whose deadline is at or before `now`.
///
/// Teardown and destruction. Leases hold the pool (a shared_ptr); parked requests do not, but a
/// request is parked only while units are out on leases, and when the last lease goes every
/// parked request is granted (its lease then holds the pool). So a pool outlives the requests
/// parked on it: to end them early, call cancel_all() — each completes once with
/// errc::canceled, and its deadline never fires afterwards. Destroying the pool stops its timer
/// thread without waiting for any deadline: it is joined, or, when the last reference goes on
/// the timer thread itself (in a callback it runs), left to exit on its own. Should anything
/// still be parked then, it completes with errc::canceled, once, like cancel_all().
///
/// Connections draw on a pool through connection_config::slots (a budget shared by several
/// connections): slot_pool is a `budget` (units.hpp), the interface the endpoint layer sees, so a
/// shared_ptr<slot_pool> converts to that field. Each connection's own queue entries are its
/// records (see connection.hpp), and a shared CQ keeps a budget of its own
/// (shared_completion_queue). The counting itself is units.hpp's detail::unit_budget, the one
/// all-or-nothing reservation every budget of the library is written with; the policy
/// (forbid, backpressure, parking, deadlines) is this pool's.
///
/// Threading: all calls on a pool may run concurrently; a lease is a value (one thread at a time)
/// that may be reset or destroyed on any thread. Callbacks of parked requests run exactly once
/// each, never under the pool's lock (they may call into the pool, and may run inside a lease's
/// destructor), on the thread that:
///  - returns the units that satisfy them (lease::reset, lease destruction or assignment),
///  - calls expire() or cancel_all(), or
///  - is the pool's timer thread (timed_out at a deadline, and requests granted once a timed-out
///    head no longer blocks them).
/// A callback may drop the last reference to the pool, on any of these threads.

#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <remora/result.hpp>
#include <remora/units.hpp>  // unit, units, budget: re-exported

namespace remora {

enum class exhaustion : std::uint8_t { forbid, backpressure };

struct slot_pool_config {
    units capacity;
    exhaustion policy = exhaustion::backpressure;
    std::size_t max_waiters = 1024;  ///< parked requests at most (backpressure)
};

class slot_pool;

/// What slot_pool::acquire() did with a request it accepted.
enum class acquired : std::uint8_t {
    now,     ///< granted at once: the callback has already run on the calling thread
    parked,  ///< queued: the callback will run exactly once, later
};
const char* to_string(acquired a) noexcept;

/// Units held from acquisition until reset() or destruction, which give them back to the pool
/// exactly once. Move-only; a moved-from or reset lease is empty (false, holds nothing).
///
/// There is no release(): in C++ release() means "stop owning without giving back"
/// (unique_ptr::release, Seastar's semaphore_units::release), and the pool has no public call to
/// return units taken that way, so they would leak. Give units back with reset().
class lease {
  public:
    lease() = default;
    lease(lease&& o) noexcept : pool_(std::move(o.pool_)), held_(o.held_) { o.held_ = {}; }
    lease& operator=(lease&& o) noexcept;
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease() { reset(); }

    [[nodiscard]] const units& held() const noexcept { return held_; }
    explicit operator bool() const noexcept { return pool_ != nullptr; }
    /// Gives the units back now (as the destructor does) and leaves the lease empty; a no-op on
    /// an empty lease. Parked requests the returned units satisfy run their callbacks on this
    /// thread, before reset() returns.
    void reset() noexcept;

  private:
    friend class slot_pool;
    lease(std::shared_ptr<slot_pool> pool, const units& held)
        : pool_(std::move(pool)), held_(held) {}
    std::shared_ptr<slot_pool> pool_;
    units held_;
};

class slot_pool : public std::enable_shared_from_this<slot_pool>, public budget {
  public:
    using clock = std::chrono::steady_clock;
    /// Completion of a request acquire() accepted: its lease, or (parked requests only)
    /// errc::timed_out / errc::canceled. Runs exactly once; see Threading.
    using callback = void (*)(void* ctx, result<lease> r);

    static result<std::shared_ptr<slot_pool>> create(const slot_pool_config& cfg);

    /// All of `need` now, or nothing (nothing is taken on failure): errc::would_block
    /// (backpressure; also while requests are parked, which go first), errc::bad_state (forbid:
    /// the pool was sized wrong; the message names demand and capacity), errc::too_large if it
    /// can never fit, errc::invalid_argument for an empty demand.
    result<lease> try_acquire(const units& need);
    /// Backpressure: like try_acquire, but a request that cannot be met now is parked in FIFO
    /// order and `done` runs later with its lease, or with errc::timed_out at `deadline` (by the
    /// pool's timer thread, see Deadlines), or with errc::canceled by cancel_all(). On success
    /// `done` runs exactly once, and the value says when:
    ///   acquired::now     `done` has already run, on this thread, before acquire returned (the
    ///                     units were free and nobody was parked ahead).
    ///   acquired::parked  `done` has not run; it will run exactly once later, on another call's
    ///                     thread (see Threading above).
    /// Refused (not parked, `done` never runs) with too_large, with would_block when
    /// max_waiters are parked (or the pool's timer thread cannot be started), with bad_state
    /// under forbid, and with invalid_argument for an empty demand or a null `done`.
    result<acquired> acquire(const units& need, callback done, void* ctx,
                             clock::time_point deadline = clock::time_point::max());
    /// Completes now, with errc::timed_out, the parked requests whose deadline is at or before
    /// `now`, then grants those they were blocking; returns how many timed out. Not needed for
    /// deadlines to fire (the timer thread does that); a manual "now" for callers that want one.
    std::size_t expire(clock::time_point now = clock::now());
    /// Completes every parked request with errc::canceled (teardown); returns how many. Requests
    /// parked afterwards are served as usual.
    std::size_t cancel_all();

    /// Stops the timer thread; see Teardown and destruction above.
    ~slot_pool();
    slot_pool(const slot_pool&) = delete;
    slot_pool& operator=(const slot_pool&) = delete;

    [[nodiscard]] units available() const;
    [[nodiscard]] const units& capacity() const noexcept { return cfg_.capacity; }
    [[nodiscard]] std::size_t waiting() const;
    [[nodiscard]] exhaustion policy() const noexcept { return cfg_.policy; }

  private:
    explicit slot_pool(const slot_pool_config& cfg) : cfg_(cfg), budget_(cfg.capacity.n) {}
    friend class lease;
    void give_back(const units& u) noexcept;
    /// budget (what a connection's operations draw through connection_config::slots): the same
    /// check as try_acquire, without a lease.
    result<void> take_units(const units& need) override;
    void give_units(const units& u) noexcept override { give_back(u); }
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
    slot_pool_config cfg_;
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

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
// src/base/park_gate.hpp — where posts that found their units taken wait for them (the base
// layer; library-internal: op_options::park_until is the API).
///
/// A park_gate is a FIFO of waiting threads. Only the head tries again: it takes a snapshot of the
/// gate's give-back count, tries, and when the try still finds its units taken it sleeps on its
/// own condition variable until something is given back (notify(n), called after every give-back
/// by the code that returns units or queue entries, n saying how many operations' worth came
/// back), its deadline passes, or someone ends it (wake_owner: cancel, close, destruction). So
/// nothing spins, and a give-back that lands between a failed try and the sleep is not lost (the
/// count has moved).
///
/// Hand-off: a head that was let in by a give-back and was admitted used one of them; the next
/// waiter becomes the head owing that one, and is woken only when more came back than were used
/// (a batch, or a give-back during the admitted try), else by the next give-back. So one
/// give-back wakes one waiter, and a waiter is not woken to find nothing. A head that leaves
/// otherwise (deadline, cancel, another error, or admitted without having waited for a
/// give-back) lets the next one try at once. Counts may overstate (a wasted try, then the waiter
/// sleeps again) but must never understate what came back.
///
/// Every `budget` has one (units.hpp), shared by all the connections drawing on it; a connection
/// without a shared budget has its own. A waiter names its owner (the connection), so a
/// connection's close or destruction ends its own waiters only.
///
/// A waiter may also be a queued post (queue(): op_options::park = park_mode::queue), which has
/// no thread of its own: the gate's worker thread (started on the first queued post, joined when
/// the gate goes) tries it when it is the head and something was given back, ends it at its
/// deadline, and runs its `end` when it is ended. Queued and blocking waiters share one FIFO.
///
/// Threading: every call may run concurrently. notify() costs one atomic load when nobody waits,
/// and never blocks for long: it may run where completion callbacks run.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <remora/result.hpp>

namespace remora::detail {

class park_gate {
  public:
    using clock = std::chrono::steady_clock;

    park_gate() = default;
    park_gate(const park_gate&) = delete;
    park_gate& operator=(const park_gate&) = delete;
    ~park_gate();

    /// A post parked without a thread: attempt() posts it (errc::would_block: still waiting); if
    /// it is never posted, end() runs once with why (timed_out, canceled, disconnected) or with
    /// attempt()'s other error, on the worker thread. The owner must end its queued posts
    /// (close_owner) before whatever attempt() uses goes.
    struct queued_post {
        const void* owner = nullptr;
        clock::time_point deadline = clock::time_point::max();
        std::function<result<void>()> attempt;
        std::function<void(const error&)> end;
        const char* what = "post";
    };
    /// Queues `p` behind every waiter; returns at once. With nobody waiting it tries once first,
    /// on the calling thread: true when that posted it (nothing was queued).
    result<bool> queue(queued_post p);

    /// `n` operations' worth of units or queue entries were given back (0: nothing, no wake); the
    /// head waiter, if any, tries again. Pass `everyone` when what changed is not a count (a
    /// connection came up): every waiter in turn tries.
    static constexpr std::uint64_t everyone = std::uint64_t{1} << 32;
    void notify(std::uint64_t n = 1) noexcept {
        if (n != 0 && waiters_.load() != 0) {
            notify_slow(n);
        }
    }

    /// Calls attempt() (returning a result<T>) until it gives anything but errc::would_block,
    /// waiting in FIFO order between tries; returns what it gave. Ends with errc::timed_out at
    /// `deadline`, or with the code given to wake_owner() for `owner` (the message says `what`);
    /// either way attempt() has taken nothing.
    template <class Attempt>
    auto run(const void* owner, clock::time_point deadline, const char* what, Attempt&& attempt)
        -> decltype(attempt()) {
        node self;
        self.owner = owner;
        std::uint64_t seen = 0;
        bool refused = false;
        std::string last;  // the last refusal, for the message if the wait ends
        for (;;) {
            if (auto end = await_try(self, deadline, seen, refused); end != errc{}) {
                return fail(end, refused ? ended(what, end) + " (last refusal: " + last + ")"
                                         : ended(what, end));
            }
            auto r = attempt();
            if (r || !(r.error() == errc::would_block)) {
                leave(self, static_cast<bool>(r));
                return r;
            }
            refused = true;
            last = r.error().message();
        }
    }

    /// Ends every waiter of `owner` (all waiters when null) with `code` (canceled, disconnected):
    /// each returns it once. Returns how many were waiting. A waiter whose try runs on another
    /// thread is waited for first (its try decides: posted and gone, or refused and ended here).
    std::size_t wake_owner(const void* owner, errc code);
    /// wake_owner(owner, code), then waits until they have all left the gate (destruction).
    void close_owner(const void* owner, errc code);
    /// Waiters now (of `owner`; all when null), after any try running on another thread ends.
    [[nodiscard]] std::size_t waiting(const void* owner = nullptr) const;

  private:
    struct node {
        const void* owner = nullptr;
        std::condition_variable cv;
        node* next = nullptr;
        node* prev = nullptr;
        errc end{};  ///< set by wake_owner
        /// A queued post's (the worker owns such a node; null for a blocking waiter).
        std::unique_ptr<queued_post> queued;
        /// While `tried`: give-backs up to `seen` are accounted for (it tried after them and was
        /// refused, or its predecessor used one); as the head it tries again once given_ passes
        /// `seen`. Not `tried`: as the head it tries at once.
        std::uint64_t seen = 0;
        bool tried = false;
        /// The thread running this node's try (its own, or the worker for a queued post), while
        /// the try runs without mu_: wake_owner and waiting wait for the outcome (admitted and
        /// gone, or refused and still parked) instead of counting a post that is being posted.
        std::thread::id trying{};
    };
    void wake(node& n);   ///< its thread, or the worker for a queued post (under mu_)
    void work();          ///< the worker thread
    void start_worker();  ///< under mu_
    void notify_slow(std::uint64_t n) noexcept;
    /// `admitted`: its try succeeded (the next head may owe it a give-back: see unlink).
    void leave(node& n, bool admitted);
    /// Waits until `n` is the head and may try (under its own turn, a give-back it has not
    /// accounted for); `refused`: its last try, after give-back `seen`, found its units taken;
    /// otherwise `n` is new and enters the FIFO here (under the same lock).
    /// Sets `seen` to the snapshot the try is made after. Returns why the wait ended, if it did.
    errc await_try(node& n, clock::time_point deadline, std::uint64_t& seen, bool refused);
    bool may_try(const node& n) const noexcept {  ///< under mu_
        return head_ == &n && (!n.tried || given_ > n.seen);
    }
    static std::string ended(const char* what, errc end);
    /// Under mu_. `admitted` after waiting for a give-back (n.tried): the next head owes it one
    /// (the hand-off); otherwise the next head tries at once.
    void unlink(node& n, bool admitted = false);
    /// Under mu_: waits until no try of `owner`'s nodes (nullptr: anyone's) runs on another
    /// thread; a try on this thread (a callback inside a post) is not waited for.
    void await_tries(std::unique_lock<std::mutex>& lock, const void* owner) const;

    mutable std::mutex mu_;
    /// close_owner waits here for its waiters to leave, wake_owner/waiting for tries to end
    mutable std::condition_variable left_;
    node* head_ = nullptr;
    node* tail_ = nullptr;
    std::uint64_t given_ = 0;  ///< give-backs seen (under mu_)
    std::atomic<std::size_t> waiters_{0};
    std::condition_variable work_cv_;  ///< the worker sleeps here
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace remora::detail

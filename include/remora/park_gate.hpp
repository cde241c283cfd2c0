// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/park_gate.hpp — where posts that found their units taken wait for them (the base layer;
/// not part of the API: connection.hpp's op_options::park_until is).
///
/// A park_gate is a FIFO of waiting threads. Only the head tries again: it takes a snapshot of the
/// gate's give-back count, tries, and when the try still finds its units taken it sleeps on its
/// own condition variable until something is given back (notify(), called after every give-back
/// by the code that returns units or queue entries), its deadline passes, or someone ends it
/// (wake_owner: cancel, close, destruction). So nothing spins, and a give-back that lands between
/// a failed try and the sleep is not lost (the count has moved). When the head leaves, for any
/// reason, the next waiter becomes the head and tries at once.
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

    /// Something was given back: the head waiter, if any, tries again.
    void notify() noexcept {
        if (waiters_.load() != 0) {
            notify_slow();
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
        enter(self);
        for (;;) {
            std::uint64_t seen = 0;
            if (auto end = await_turn(self, deadline, seen); end != errc{}) {
                return fail(end, ended(what, end));
            }
            auto r = attempt();
            if (r || !(r.error() == errc::would_block)) {
                leave(self);
                return r;
            }
            if (auto end = await_give(self, deadline, seen); end != errc{}) {
                return fail(end, ended(what, end) + " (last refusal: " + r.error().message() + ")");
            }
        }
    }

    /// Ends every waiter of `owner` (all waiters when null) with `code` (canceled, disconnected):
    /// each returns it once. Returns how many were waiting.
    std::size_t wake_owner(const void* owner, errc code);
    /// wake_owner(owner, code), then waits until they have all left the gate (destruction).
    void close_owner(const void* owner, errc code);
    /// Waiters now (of `owner`; all when null).
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
        std::uint64_t seen = 0;  ///< given_ when the worker last tried it
        bool tried = false;
    };
    void wake(node& n);   ///< its thread, or the worker for a queued post (under mu_)
    void work();          ///< the worker thread
    void start_worker();  ///< under mu_
    void notify_slow() noexcept;
    void enter(node& n);
    void leave(node& n);
    errc await_turn(node& n, clock::time_point deadline, std::uint64_t& seen);
    errc await_give(node& n, clock::time_point deadline, std::uint64_t seen);
    static std::string ended(const char* what, errc end);
    void unlink(node& n);  ///< under mu_

    mutable std::mutex mu_;
    std::condition_variable left_;  ///< close_owner waits here for its waiters to leave
    node* head_ = nullptr;
    node* tail_ = nullptr;
    std::uint64_t given_ = 0;  ///< give-backs seen (under mu_)
    std::atomic<std::size_t> waiters_{0};
    std::condition_variable work_cv_;  ///< the worker sleeps here
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace remora::detail

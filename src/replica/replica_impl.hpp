// SPDX-License-Identifier: BSD-3-Clause
// src/replica/replica_impl.hpp — the state behind a replica_set (remora::detail::replica_core).
//
// One mutex guards it all but the posts: a write takes a record (one of `depth`, preallocated)
// under the lock, then posts to each member under that member's post lock, which the set's
// thread also takes to close a dropped member's connection (close must not race a post). A post
// lock is never taken while the set's lock is held: a close under a post lock waits for a
// progress thread whose completions take the set's lock. The members' completions come back through
// on_part (any CQ reader), update the record under the lock, and hand what is due (a completion,
// events) to an outbox delivered after unlocking.
//
// A record lives from its post until every member operation of it has ended (`parts_left`
// 0: "settled", when the ranges a member missed are recorded) and its completion is delivered
// (a callback called, or polled); only then does it take another write.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <remora/domain.hpp>
#include <remora/replica_set.hpp>

#include "base/internal_access.hpp"

namespace remora {

struct replica_set::impl {};

namespace detail {

struct replica_core;
REMORA_HANDLE_STATE(replica_set, replica_core);

// A member operation's context: which record and member, and which of its two operations.
struct replica_part {
    replica_core* set = nullptr;
    std::uint32_t record = 0;
    std::uint32_t member = 0;
    bool flush = false;
};

// A copy's step (rejoin): one operation at a time, waited for by the set's thread.
struct replica_copy_part {
    replica_core* set = nullptr;
    bool done = false;
    std::error_code status;
};

struct replica_record {
    bool in_use = false;
    bool reported = false;   // its completion is decided
    bool delivered = false;  // ... and called back, or polled
    bool settled = false;    // every member operation ended (missing ranges recorded)
    std::uint64_t offset = 0;
    std::size_t length = 0;
    const memory_region* src = nullptr;
    std::size_t src_offset = 0;
    void (*callback)(const replica_completion&) = nullptr;
    std::chrono::steady_clock::time_point posted{};
    std::uint32_t counted = 0;  // members counted for the quorum (live at post)
    std::uint32_t targets = 0;  // members written (live or catching up)
    std::uint32_t redo = 0;     // written while a copy of an overlapping range ran into them
    std::uint32_t missed = 0;   // dropped before it was durable there
    std::uint32_t parts_left = 0;
    std::uint32_t writes_left = 0;                  // members whose write has not given `src` back
    std::array<std::uint8_t, max_replicas> left{};  // per member: its operations not ended
    std::array<bool, max_replicas> write_done{};
    std::array<connection*, max_replicas> conn{};  // the connection each was posted on
    std::error_code first_failure;
    replica_completion out;
    std::array<replica_part, 2 * max_replicas> parts{};
};

struct replica_member {
    connection* conn = nullptr;
    remote_region region{};
    replica_state state = replica_state::live;
    bool close_due = false;   // dropped: the set's thread closes its connection (true until done)
    bool fenced = false;      // closed by the set (under post_mu)
    std::size_t pending = 0;  // its operations in flight (posted or about to be)
    std::uint32_t unsettled = 0;  // records not settled that it is owed (see owes())
    bool rejoining = false;       // a rejoin() waits for its old connection's end
    std::map<std::uint64_t, std::uint64_t> missing;  // [first, second) not on it
    std::mutex post_mu;
    // Under post_mu: records whose posts it refused (would_block), oldest first, with whether the
    // write is posted already; later records queue behind them, so a member's writes keep their
    // order. The set's thread posts them.
    std::deque<std::pair<std::uint32_t, bool>> backlog;
};

// What to hand out once the lock is released.
struct replica_outbox {
    std::vector<std::pair<void (*)(const replica_completion&), replica_completion>> done;
    std::vector<replica_event> events;
    bool empty() const noexcept { return done.empty() && events.empty(); }
    void take(replica_outbox& other) {
        done.insert(done.end(), other.done.begin(), other.done.end());
        events.insert(events.end(), other.events.begin(), other.events.end());
        other.done.clear();
        other.events.clear();
    }
};

// Set while this thread holds a member's post lock: completions read inline there (a post or a
// close may read the CQ) are delivered by the set's thread (replica_core::hand_out).
inline thread_local bool in_post = false;
struct posting {
    bool was = in_post;
    posting() noexcept { in_post = true; }
    ~posting() { in_post = was; }
    posting(const posting&) = delete;
    posting& operator=(const posting&) = delete;
};

struct replica_core : internal_access::opaque<replica_set> {
    replica_set_config cfg;
    std::uint32_t quorum = 0;
    std::uint64_t range = 0;
    std::optional<domain> dom;
    std::vector<std::unique_ptr<replica_member>> members;

    mutable std::mutex mu;
    std::condition_variable cv;  // room, ring, drain, copies, rejoin, the thread's work
    std::vector<replica_record> records;
    std::vector<std::uint32_t> free_records;
    std::vector<std::uint32_t> ring;  // records reported without a callback, oldest first
    std::size_t ring_head = 0, ring_count = 0;
    std::size_t active = 0;      // records not yet reported and settled
    std::size_t delivering = 0;  // threads running the set's callbacks
    replica_outbox deferred;     // callbacks left to the set's thread
    std::size_t live = 0;
    bool quorum_ok = true;
    bool stopping = false;

    // rejoin's copies: one at a time, by the set's thread
    std::vector<std::byte> bounce;
    std::optional<memory_region> bounce_mr;
    int copy_member = -1;
    std::uint64_t copy_lo = 0, copy_hi = 0;
    replica_copy_part copy;

    std::thread thread;

    // replica_set.cpp
    void fill_outcomes(replica_record& r);
    void evaluate(std::uint32_t rec, replica_outbox& box);
    void settle_or_free(std::uint32_t rec);
    void drop_locked(std::uint32_t m, std::error_code why, replica_outbox& box);
    void part_failed(std::uint32_t rec, std::uint32_t m, bool write_posted, std::error_code why,
                     replica_outbox& box);
    // Runs what `box` holds (unlocking meanwhile), or leaves it to the set's thread; returns
    // locked.
    void hand_out(std::unique_lock<std::mutex>& lock, replica_outbox& box);
    result<void> post_parts(std::uint32_t rec, std::uint32_t m, connection& conn,
                            bool& write_posted);
    // catch_up.cpp
    void run();
    void close_due_members(std::unique_lock<std::mutex>& lock);
    void drop_stragglers(replica_outbox& box);
    bool post_backlogs(std::unique_lock<std::mutex>& lock, replica_outbox& box);
    bool copy_step(std::uint32_t m, std::unique_lock<std::mutex>& lock, replica_outbox& box);
    bool wait_copy(std::unique_lock<std::mutex>& lock, replica_outbox& box);
};

// The member operations' callback (their context is a replica_part).
void replica_on_part(const completion& c);
// The copies' callback (context: the set's replica_copy_part).
void replica_on_copy(const completion& c);
// Whether this thread runs one of the set's callbacks (a write there never parks).
bool replica_in_callback() noexcept;
// Adds [lo, hi) to a member's missing ranges, merging.
void add_missing(std::map<std::uint64_t, std::uint64_t>& m, std::uint64_t lo, std::uint64_t hi);
// Whether the member's queues hold `depth` writes with their flushes (the error says what to
// raise), and its region takes them.
result<void> check_member(const connection& conn, const remote_region& region,
                          const replica_set_config& cfg, std::uint64_t* range);

}  // namespace detail
}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
// src/replica/catch_up.cpp — the replica set's thread: it closes dropped members' connections,
// drops members that fell behind, and brings rejoining members up to date.
//
// A rejoining member is written by every write from rejoin() on, and what it missed is copied
// into it from a live member, one chunk at a time: read into the set's buffer, written and
// flushed into the member. A chunk is copied only while no unsettled write overlaps it (so the
// source holds the latest bytes of the range), and a write posted while its chunk is being
// copied is marked to redo: its range is copied again once it settles (the copy, read before,
// may land after it). The member counts again once nothing is missing and no write that
// skipped it, or must be redone, is unsettled.
#include <algorithm>
#include <iterator>
#include <string>
#include <thread>

#include <remora/replica_set.hpp>

#include "replica/replica_impl.hpp"

namespace remora {

namespace {

constexpr std::chrono::milliseconds max_tick{20};

}  // namespace

void detail::add_missing(std::map<std::uint64_t, std::uint64_t>& m, std::uint64_t lo,
                         std::uint64_t hi) {
    if (lo >= hi) {
        return;
    }
    auto it = m.upper_bound(lo);
    if (it != m.begin() && std::prev(it)->second >= lo) {
        --it;  // the range before reaches lo: merge into it
    }
    while (it != m.end() && it->first <= hi) {
        lo = std::min(lo, it->first);
        hi = std::max(hi, it->second);
        it = m.erase(it);
    }
    m.emplace(lo, hi);
}

void detail::replica_on_copy(const completion& c) {
    auto* p = static_cast<detail::replica_copy_part*>(c.context);
    std::lock_guard lock(p->set->mu);
    p->done = true;
    p->status = c.status;
    p->set->cv.notify_all();
}

void detail::replica_core::close_due_members(std::unique_lock<std::mutex>& lock) {
    for (auto& mem : members) {
        if (!mem->close_due) {
            continue;
        }
        connection* conn = mem->conn;
        lock.unlock();
        {
            std::lock_guard post(mem->post_mu);
            const posting guard;  // close() completes what is in flight, inline
            mem->fenced = true;
            static_cast<void>(conn->close());  // closed all the same on a shutdown error
        }
        lock.lock();
        mem->close_due = false;  // only now: rejoin() waits for it
        cv.notify_all();
    }
}

void detail::replica_core::drop_stragglers(detail::replica_outbox& box) {
    const auto now = std::chrono::steady_clock::now();
    for (detail::replica_record& r : records) {
        if (!r.in_use || r.settled || now - r.posted < cfg.behind_limit) {
            continue;
        }
        for (std::uint32_t m = 0; m < r.out.replicas; ++m) {
            if (r.left[m] > 0 && members[m]->state != replica_state::dropped) {
                drop_locked(m, make_error_code(errc::timed_out), box);
            }
        }
    }
}

// Posts what members refused before, in order; a member that refuses again keeps the rest for the
// next round. Whether any backlog is left.
bool detail::replica_core::post_backlogs(std::unique_lock<std::mutex>& lock, replica_outbox& box) {
    bool left = false;
    for (std::uint32_t m = 0; m < members.size(); ++m) {
        replica_member& mem = *members[m];
        struct failure {
            std::uint32_t rec;
            bool write_posted;
            std::error_code why;
        };
        std::vector<failure> failed;
        lock.unlock();
        {
            std::lock_guard post(mem.post_mu);
            const posting guard;
            while (!mem.backlog.empty()) {
                auto& [rec, write_posted] = mem.backlog.front();
                if (mem.fenced) {
                    failed.push_back({rec, write_posted, make_error_code(errc::disconnected)});
                } else if (auto r = post_parts(rec, m, *records[rec].conn[m], write_posted); !r) {
                    if (r.error() == errc::would_block) {
                        left = true;
                        break;
                    }
                    failed.push_back({rec, write_posted, r.error().code()});
                }
                mem.backlog.pop_front();
            }
        }
        lock.lock();
        for (const failure& f : failed) {
            part_failed(f.rec, m, f.write_posted, f.why, box);
        }
    }
    return left;
}

// Waits for the copy's operation, doing the thread's other work meanwhile; false at
// behind_limit.
bool detail::replica_core::wait_copy(std::unique_lock<std::mutex>& lock, replica_outbox& box) {
    const auto deadline = std::chrono::steady_clock::now() + cfg.behind_limit;
    while (!copy.done) {
        close_due_members(lock);
        post_backlogs(lock, box);
        if (copy.done) {
            break;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            return false;
        }
        cv.wait_for(lock, std::chrono::milliseconds(1));
    }
    return true;
}

namespace {

// Posts one copy operation on member `mem` (under its post lock), again while it refuses
// (would_block: the set's writes hold its queue) up to `until`.
template <class Post>
result<void> post_copy(detail::replica_member& mem, std::chrono::steady_clock::time_point until,
                       Post&& post) {
    for (;;) {
        {
            std::lock_guard lock(mem.post_mu);
            const detail::posting guard;
            if (mem.fenced) {
                return fail(errc::disconnected, "replica_set: the member was dropped");
            }
            auto r = post(*mem.conn);
            if (r || !(r.error() == errc::would_block) ||
                std::chrono::steady_clock::now() >= until) {
                return r;
            }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

}  // namespace

// One chunk of member m's missing ranges, or its return to live once nothing is missing.
// Whether a chunk was copied.
bool detail::replica_core::copy_step(std::uint32_t m, std::unique_lock<std::mutex>& lock,
                                     detail::replica_outbox& box) {
    detail::replica_member& mem = *members[m];
    if (stopping) {
        return false;
    }
    if (mem.missing.empty()) {
        if (mem.unsettled == 0) {
            mem.state = replica_state::live;
            ++live;
            box.events.push_back({replica_event_kind::rejoined, m, {}, cfg.event_context});
            if (!quorum_ok && live >= quorum) {
                quorum_ok = true;
                box.events.push_back(
                    {replica_event_kind::quorum_regained, m, {}, cfg.event_context});
            }
            cv.notify_all();
        }
        return false;
    }
    // The first chunk no unsettled write overlaps (the source may not hold such a range's latest
    // bytes yet).
    auto overlapped = [&](std::uint64_t lo, std::uint64_t hi) {
        return std::any_of(records.begin(), records.end(), [&](const detail::replica_record& r) {
            return r.in_use && !r.settled && r.offset < hi && lo < r.offset + r.length;
        });
    };
    std::uint64_t lo = 0, hi = 0;
    bool found = false;
    for (const auto& [first, end] : mem.missing) {
        for (std::uint64_t at = first; at < end && !found; at += cfg.copy_chunk) {
            lo = at;
            hi = std::min(end, at + cfg.copy_chunk);
            found = !overlapped(lo, hi);
        }
        if (found) {
            break;
        }
    }
    if (!found) {
        return false;
    }
    std::uint32_t src = 0;
    while (src < members.size() && members[src]->state != replica_state::live) {
        ++src;
    }
    if (src == members.size()) {
        drop_locked(m, make_error_code(errc::bad_state), box);
        return false;
    }
    // Take [lo, hi) out of the missing ranges.
    auto it = std::prev(mem.missing.upper_bound(lo));
    const std::uint64_t first = it->first, end = it->second;
    mem.missing.erase(it);
    if (first < lo) {
        mem.missing.emplace(first, lo);
    }
    if (hi < end) {
        mem.missing.emplace(hi, end);
    }
    copy_member = static_cast<int>(m);
    copy_lo = lo;
    copy_hi = hi;
    const std::size_t n = static_cast<std::size_t>(hi - lo);
    detail::replica_member& from = *members[src];
    const remote_region from_region = from.region;
    const remote_region to_region = mem.region;
    const op_options copy_opts{.context = &copy, .callback = &replica_on_copy};

    // Each step: post (unlocked), wait; a failure drops the member it ran on. `who` is that
    // member. A step that was posted is always waited for: the operation uses the set's buffer.
    auto step = [&](detail::replica_member& who, std::uint32_t index, auto&& post) -> bool {
        if (stopping || who.state == replica_state::dropped) {
            return false;
        }
        copy.done = false;
        copy.status = {};
        ++who.pending;
        lock.unlock();
        result<void> r = post_copy(who, std::chrono::steady_clock::now() + cfg.behind_limit, post);
        lock.lock();
        if (!r) {
            --who.pending;
            drop_locked(index, r.error().code(), box);
            return false;
        }
        if (!wait_copy(lock, box)) {
            drop_locked(index, make_error_code(errc::timed_out), box);
            while (!copy.done) {  // its connection's close ends it
                close_due_members(lock);
                cv.wait_for(lock, max_tick);
            }
        }
        --who.pending;
        cv.notify_all();
        if (copy.status) {
            drop_locked(index, copy.status, box);
            return false;
        }
        return who.state != replica_state::dropped;
    };
    const bool ok =
        step(from, src,
             [&](connection& c) { return c.read(*bounce_mr, 0, from_region, lo, n, copy_opts); }) &&
        mem.state == replica_state::catching_up &&
        step(mem, m,
             [&](connection& c) { return c.write(to_region, lo, *bounce_mr, 0, n, copy_opts); }) &&
        step(mem, m, [&](connection& c) { return flush(c, to_region, lo, n, cfg.how, copy_opts); });
    if (!ok) {
        add_missing(mem.missing, lo, hi);
    }
    copy_member = -1;
    cv.notify_all();
    return ok;
}

void detail::replica_core::run() {
    std::unique_lock lock(mu);
    const auto tick = std::clamp<std::chrono::milliseconds>(cfg.behind_limit / 4,
                                                            std::chrono::milliseconds(1), max_tick);
    while (!stopping) {
        replica_outbox box;
        box.take(deferred);
        close_due_members(lock);
        const bool backlog = post_backlogs(lock, box);
        drop_stragglers(box);
        bool copying = false;
        for (std::uint32_t m = 0; m < members.size(); ++m) {
            if (members[m]->state == replica_state::catching_up) {
                copying = copy_step(m, lock, box);
                break;
            }
        }
        hand_out(lock, box);
        if (!copying && deferred.empty()) {
            cv.wait_for(lock, backlog ? std::chrono::milliseconds(1) : tick);
        }
    }
}

result<void> replica_set::rejoin(std::size_t index, connection& conn, const remote_region& region,
                                 rejoin_options how) {
    detail::replica_core& s = *detail::impl_of(*this);
    if (index >= s.members.size()) {
        return fail(errc::invalid_argument,
                    "replica_set::rejoin: no member " + std::to_string(index));
    }
    if (!(conn.dom() == *s.dom)) {
        return fail(errc::invalid_argument,
                    "replica_set::rejoin: the connection is not of the set's domain");
    }
    std::uint64_t range = UINT64_MAX;
    if (auto r = detail::check_member(conn, region, s.cfg, &range); !r) {
        return fail(r.error());
    }
    if (range < s.range) {
        return fail(errc::invalid_argument,
                    "replica_set::rejoin: the region's " + std::to_string(range) +
                        " bytes are fewer than the set's " + std::to_string(s.range));
    }
    detail::replica_member& mem = *s.members[index];
    std::unique_lock lock(s.mu);
    if (mem.state != replica_state::dropped || mem.rejoining) {
        return fail(errc::bad_state, std::string("replica_set::rejoin: the member is ") +
                                         (mem.rejoining ? "rejoining" : to_string(mem.state)));
    }
    // Its old connection is being closed by the set's thread: wait for that, and for what was
    // posted on it to end.
    mem.rejoining = true;
    const bool ended =
        s.cv.wait_for(lock, s.cfg.behind_limit, [&] { return !mem.close_due && mem.pending == 0; });
    if (!ended) {
        mem.rejoining = false;
        return fail(errc::bad_state, "replica_set::rejoin: " + std::to_string(mem.pending) +
                                         " operations of the member's old connection are still "
                                         "in flight (is its CQ read?)");
    }
    if (s.live == 0) {
        mem.rejoining = false;
        return fail(errc::bad_state, "replica_set::rejoin: no live replica to copy from");
    }
    mem.conn = &conn;
    mem.region = region;
    if (how.whole) {
        mem.missing.clear();
        detail::add_missing(mem.missing, 0, s.range);
    }
    // The post lock is never taken under the set's lock: a close under the post lock waits for
    // the progress thread, whose callbacks take the set's lock. The member stays dropped (nothing
    // posts to it) and rejoining (no other rejoin) meanwhile.
    lock.unlock();
    {
        std::lock_guard post(mem.post_mu);
        mem.fenced = false;
    }
    lock.lock();
    mem.rejoining = false;
    mem.state = replica_state::catching_up;
    s.cv.notify_all();
    return {};
}

}  // namespace remora

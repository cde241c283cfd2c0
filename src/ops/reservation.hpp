// SPDX-License-Identifier: BSD-3-Clause
// src/ops/reservation.hpp — reservation: what an operation takes before it is posted
// (remora::detail).
//
// An operation takes its record (its send-, service- or receive-queue entry, and so its CQ
// entry: a connection's CQs are sized for all its records) and, when the connection draws on a
// shared budget (connection_config::slots, any `budget`), the units it needs from it: all or
// nothing. Then the record is armed with its completion: the user's report or callback, or a
// library-internal hook (the `done` function, ops/done.hpp). A failed post gives everything back
// (release_failed).
//
// Data path cost: one compare-and-swap (the pool's lock-free free list) to take a record; with
// a shared budget one virtual call into it (and a shared_ptr copy for the holding). Nothing
// allocates.
#pragma once

#include <cstddef>
#include <memory>

#include <remora/completion_queue.hpp>
#include <remora/result.hpp>
#include <remora/units.hpp>

#include "ops/done.hpp"
#include "ops/op_pool.hpp"

namespace remora::detail {

// A record of queue `q` and `need` units of `shared` when it is set, or nothing. Errors:
// would_block when `q` is full (the message names `what`, the queue and its `depth`), or the
// budget's own (prefixed with `what`).
result<op_record*> reserve_op_full(op_pool& pool, queue q, const std::shared_ptr<budget>& shared,
                                   const units& need, const char* what, std::size_t depth);
// The refusal of a full queue `q` (reserve_op's message).
error queue_full(queue q, const char* what, std::size_t depth);
inline result<op_record*> reserve_op(op_pool& pool, queue q, const std::shared_ptr<budget>& shared,
                                     const units& need, const char* what, std::size_t depth) {
    if (!shared) [[likely]] {
        if (op_record* r = pool.take(q); r != nullptr) [[likely]] {
            return r;
        }
        return fail(queue_full(q, what, depth));
    }
    return reserve_op_full(pool, q, shared, need, what, depth);
}

// The application's operation: its completion is reported (report_success, or failures only)
// or goes to `callback` with `context`.
inline void arm_user(op_record& r, void* context, void (*callback)(const completion&),
                     remora::op kind, bool report_success) noexcept {
    r.user_context.store(context, std::memory_order_relaxed);
    r.callback = callback;
    r.kind = kind;
    r.report_success = report_success;
    r.done.store(callback != nullptr ? &done_callback : &done_report, std::memory_order_relaxed);
}

// A library-internal operation: its completion goes to hook(context, c).
inline void arm_internal(op_record& r, hook_fn hook, void* context, remora::op kind) noexcept {
    r.user_context.store(context, std::memory_order_relaxed);
    r.hook.store(hook, std::memory_order_relaxed);
    r.kind = kind;
    r.report_success = true;
    r.done.store(&done_internal, std::memory_order_relaxed);
}

// Whether `r` is a library-internal operation armed with `hook`, and with `context` unless that
// is null (to find one's records).
inline bool armed_with(const op_record& r, hook_fn hook, const void* context = nullptr) noexcept {
    return r.done.load(std::memory_order_relaxed) == &done_internal &&
           r.hook.load(std::memory_order_relaxed) == hook &&
           (context == nullptr || r.user_context.load(std::memory_order_relaxed) == context);
}

// A post that failed: the record and what it holds go back (give: the holdings after the
// record, outside the pool's lock).
inline void release_failed(op_record& r) noexcept {
    r.owner->give(&r);
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/ops/done.hpp — the one completion path of an operation (remora::detail).
//
// Every record carries one `done` function, chosen at reservation (ops/reservation.hpp), and
// finish() (src/core/cq_impl.cpp) calls it. The record is given back before anything of the caller
// runs (a callback may post into the freed entry): at once, or, for what the application has not
// got yet, when poll hands the completion out or just before the callback is called. Each returns
// whether the CQ's reader sees the completion:
//   done_report    completion_mode::always reports; on_error and at_post report failures only;
//                  under a callback_deferral (a CQ reader) a reported record stays taken until
//                  poll hands the completion out
//   done_callback  op_options::callback runs with the completion (co_op's coroutines resume
//                  here: their callback is the awaiter's), inside a completion scope; never seen.
//                  Under a callback_deferral it is handed to the scope's sink instead, to run
//                  once the reader's lock is released
//   done_internal  a library-internal operation (the target service's messages): its hook runs
//                  inside a completion scope and says whether the reader sees it
#pragma once

#include <remora/completion_queue.hpp>

#include <memory>

#include "ops/op_pool.hpp"

namespace remora::detail {

bool done_report(op_record& r, completion& c);
bool done_callback(op_record& r, completion& c);
bool done_internal(op_record& r, completion& c);

// True on a thread running a completion callback or internal hook (a post from there must not
// drive the CQ it is being called from).
bool in_completion() noexcept;

// Marks the calling thread as running completion code for its lifetime (in_completion()).
class completion_scope {
  public:
    completion_scope() noexcept;
    ~completion_scope();
    completion_scope(const completion_scope&) = delete;
    completion_scope& operator=(const completion_scope&) = delete;
};

// Where done_callback puts a user callback instead of running it, while a CQ's reader holds the
// CQ's lock (a callback may destroy a connection, whose teardown needs that lock, or take an
// application lock that a destroying thread holds): the reader runs it once the lock is released
// (cq_impl::deliver). Either `held` is the operation's record, kept taken until the callback is
// called (then given back), or `from` is the pool whose `undelivered` count includes it.
struct callback_sink {
    virtual void defer(void (*fn)(const completion&), const completion& c, const op_pool* from,
                       op_record* held) = 0;

  protected:
    ~callback_sink() = default;
};

// A user callback reached through a library-internal hook (the target service's flushes and
// atomics, a gather_write's last part): handed to the active callback_deferral's sink like
// done_callback's (counted in `from`'s undelivered until it runs), or run at once, inside a
// completion scope, without one.
void run_callback(void (*fn)(const completion&), const completion& c, const op_pool* from);

// The one report of a multi-part operation (gather_write, publish) whose last part is done:
// `c` gets its bytes and context, and the first failed part's status and index (failed_part).
// The operation (`m`: its status per part, callback, pool, report_success) is freed first, so its
// units are back before the application hears of it (it may post again); then its callback runs
// (run_callback) or the CQ's reader sees `c`. Returns whether the reader sees it.
template <class Op>
bool report_parts(std::unique_ptr<Op> m, completion& c) {
    c.bytes = m->bytes;
    c.context = m->context;
    for (std::size_t i = 0; i < m->status.size(); ++i) {
        if (m->status[i]) {
            c.status = m->status[i];
            c.failed_part = static_cast<std::uint32_t>(i);
            break;
        }
    }
    auto* callback = m->callback;
    const op_pool* pool = m->pool;
    const bool report = m->report_success || !c.ok();
    m.reset();
    if (callback != nullptr) {
        run_callback(callback, c, pool);  // after the reader's lock
        return false;
    }
    return report;
}

// For its lifetime, done_callback on this thread hands callbacks to `sink` (null: runs them at
// once, as without a scope).
// The active scope's sink (done.cpp; constinit: read without a TLS init call, as every poll
// sets it).
extern constinit thread_local callback_sink* deferral_sink;
class callback_deferral {
  public:
    explicit callback_deferral(callback_sink* sink) noexcept : previous_(deferral_sink) {
        deferral_sink = sink;
    }
    ~callback_deferral() { deferral_sink = previous_; }
    callback_deferral(const callback_deferral&) = delete;
    callback_deferral& operator=(const callback_deferral&) = delete;

  private:
    callback_sink* previous_;
};

}  // namespace remora::detail

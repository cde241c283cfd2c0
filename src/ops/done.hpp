// SPDX-License-Identifier: BSD-3-Clause
// src/ops/done.hpp — the one completion path of an operation (remora::detail).
//
// Every record carries one `done` function, chosen at reservation (ops/reservation.hpp), and
// finish() (src/core/cq_impl.cpp) calls it with the reading CQ as the callback sink. The record
// is given back before anything of the caller runs (a callback may post into the freed entry): at
// once, or, for what the application has not got yet, when poll hands the completion out or just
// before the callback is called. Each returns whether the CQ's reader sees the completion:
//   done_report    completion_mode::always reports; on_error and at_post report failures only;
//                  read by a CQ's reader (a sink given), a reported record stays taken until
//                  poll hands the completion out
//   done_callback  op_options::callback runs with the completion (co_op's coroutines resume
//                  here: their callback is the awaiter's), inside a completion scope; never seen.
//                  With a sink it is handed to the sink instead, to run once the reader's lock is
//                  released
//   done_internal  a library-internal operation (the target service's messages): its hook runs
//                  inside a completion scope, with the sink, and says whether the reader sees it
#pragma once

#include <remora/completion_queue.hpp>

#include <memory>

#include "ops/op_pool.hpp"

namespace remora::detail {

bool done_report(op_record& r, completion& c, callback_sink* sink);
bool done_callback(op_record& r, completion& c, callback_sink* sink);
bool done_internal(op_record& r, completion& c, callback_sink* sink);

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
// called (then given back), or `from` is the pool whose `undelivered` count includes it. The
// reading CQ is the sink: finish() passes it to `done`, and hooks pass it on.
struct callback_sink {
    virtual void defer(void (*fn)(const completion&), const completion& c, const op_pool* from,
                       op_record* held) = 0;

  protected:
    ~callback_sink() = default;
};

// A user callback reached through a library-internal hook (the target service's flushes and
// atomics, a gather_write's last part): handed to `sink` like done_callback's (counted in
// `from`'s undelivered until it runs), or run at once, inside a completion scope, without one.
void run_callback(void (*fn)(const completion&), const completion& c, const op_pool* from,
                  callback_sink* sink);

// The one report of a multi-part operation (gather_write, publish) whose last part is done:
// `c` gets its bytes and context, and the first failed part's status and index (failed_part).
// The operation (`m`: its status per part, callback, pool, report_success) is freed first, so its
// units are back before the application hears of it (it may post again); then its callback runs
// (run_callback) or the CQ's reader sees `c`. Returns whether the reader sees it.
template <class Op>
bool report_parts(std::unique_ptr<Op> m, completion& c, callback_sink* sink) {
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
        run_callback(callback, c, pool, sink);  // after the reader's lock
        return false;
    }
    return report;
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/ops/done.hpp — the one completion path of an operation (remora::detail).
//
// Every record carries one `done` function, chosen at admission (ops/admission.hpp), and finish()
// (src/core/cq.cpp) calls it last, in one line: `return rec->done(*rec, c);`. Each gives the
// record back before anything of the caller runs (a callback may post into the freed entry) and
// returns whether the CQ's reader sees the completion:
//   done_report    completion_mode::always reports; on_error and at_post report failures only
//   done_callback  op_options::callback runs with the completion (co_op's coroutines resume
//                  here: their callback is the awaiter's), inside a completion scope; never seen
//   done_internal  a library-internal operation (the target service's messages): its hook runs
//                  inside a completion scope and says whether the reader sees it
#pragma once

#include <remora/completion_queue.hpp>

#include "ops/op_pool.hpp"

namespace remora::detail {

bool done_report(op_record& r, completion& c);
bool done_callback(op_record& r, completion& c);
bool done_internal(op_record& r, completion& c);

// Runs an operation's callback with `c` inside a completion scope (as done_callback does): a
// parked post that ends without being posted reports through it.
void run_callback(void (*callback)(const completion&), completion& c);

// True on a thread running a completion callback or internal hook (a post from there must not
// drive the CQ it is being called from).
bool in_completion() noexcept;

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/ops/done.cpp — the completion functions a record's `done` points to (see done.hpp), and the
// completion scope that tells a post it runs inside one.
#include "ops/done.hpp"

namespace remora::detail {

namespace {

thread_local int completion_depth = 0;

}  // namespace

completion_scope::completion_scope() noexcept {
    ++completion_depth;
}
completion_scope::~completion_scope() {
    --completion_depth;
}

bool in_completion() noexcept {
    return completion_depth > 0;
}

void run_callback(void (*fn)(const completion&), const completion& c, const op_pool* from,
                  callback_sink* sink) {
    if (sink != nullptr) {
        from->undelivered.fetch_add(1, std::memory_order_relaxed);
        sink->defer(fn, c, from, nullptr);
        return;
    }
    completion_scope scope;
    fn(c);
}

bool done_report(op_record& r, completion& c, callback_sink* sink) {
    c.context = r.user_context.load(std::memory_order_relaxed);
    const bool report = r.report_success || !c.ok();
    if (report && sink != nullptr) {
        // Read by a CQ's reader: the record stays taken until poll hands the completion out
        // (finish() passes it on with the entry; cq_impl.cpp hand_out_batch gives it back).
        r.delivering.store(true, std::memory_order_relaxed);
        return true;
    }
    r.owner->give(&r);
    return report;
}

bool done_callback(op_record& r, completion& c, callback_sink* sink) {
    c.context = r.user_context.load(std::memory_order_relaxed);
    auto* callback = r.callback;
    op_pool* owner = r.owner;
    if (sink != nullptr) {
        // The record stays taken (its entries, in_flight()) until the sink calls the callback,
        // and gives it back just before (the callback may post into the freed entry).
        r.delivering.store(true, std::memory_order_relaxed);
        sink->defer(callback, c, owner, &r);
        return false;
    }
    owner->give(&r);
    completion_scope scope;
    callback(c);
    return false;
}

bool done_internal(op_record& r, completion& c, callback_sink* sink) {
    auto* hook = r.hook.load(std::memory_order_relaxed);
    void* context = r.user_context.load(std::memory_order_relaxed);
    r.owner->give(&r);
    completion_scope scope;
    return hook(context, c, sink);
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/ops/done.cpp — the completion functions a record's `done` points to (see done.hpp), and the
// completion scope that tells a post it runs inside one.
#include "ops/done.hpp"

namespace remora::detail {

namespace {

thread_local int completion_depth = 0;

struct in_completion_scope {
    in_completion_scope() noexcept { ++completion_depth; }
    ~in_completion_scope() { --completion_depth; }
};

}  // namespace

bool in_completion() noexcept {
    return completion_depth > 0;
}

bool done_report(op_record& r, completion& c) {
    c.context = r.user_context;
    const bool report = r.report_success || !c.ok();
    r.owner->give(&r);
    return report;
}

bool done_callback(op_record& r, completion& c) {
    c.context = r.user_context;
    auto* callback = r.callback;
    r.owner->give(&r);
    in_completion_scope scope;
    callback(c);
    return false;
}

void run_callback(void (*callback)(const completion&), completion& c) {
    in_completion_scope scope;
    callback(c);
}

bool done_internal(op_record& r, completion& c) {
    auto* hook = r.internal;
    void* context = r.user_context;
    r.owner->give(&r);
    in_completion_scope scope;
    return hook(context, c);
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/ops/admission.cpp — taking an operation's record and its budget units, all or nothing.
#include "ops/admission.hpp"

#include <string>

namespace remora::detail {

result<op_record*> admit_op(op_pool& pool, queue q, const std::shared_ptr<budget>& shared,
                            const units& need, const char* what, std::size_t depth) {
    op_record* r = pool.take(q);
    if (r == nullptr) {
        if (q == queue::service) {
            return fail(errc::would_block, std::string(what) + ": no queue entry left");
        }
        return fail(errc::would_block,
                    std::string(what) + ": " + (q == queue::recv ? "receive" : "send") +
                        " queue full (depth " + std::to_string(depth) + "); reap completions");
    }
    if (shared) {
        auto held = held_units::take(shared, need);
        if (!held) {
            pool.give_quiet(r);  // an undo, not a give-back a parked head should retry for
            return fail(held.error().code(),
                        std::string(what) + ": shared slot pool: " + held.error().message());
        }
        r->held.units = op_holding(std::move(*held));
    }
    return r;
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/ops/reservation.cpp — taking an operation's record and its budget units, all or nothing.
#include "ops/reservation.hpp"

#include <string>

namespace remora::detail {

error queue_full(queue q, const char* what, std::size_t depth) {
    if (q == queue::service) {
        return error(errc::would_block, std::string(what) + ": no queue entry left");
    }
    return error(errc::would_block,
                 std::string(what) + ": " + (q == queue::recv ? "receive" : "send") +
                     " queue full (depth " + std::to_string(depth) + "); reap completions");
}

result<op_record*> reserve_op_full(op_pool& pool, queue q, const std::shared_ptr<budget>& shared,
                                   const units& need, const char* what, std::size_t depth) {
    op_record* r = pool.take(q);
    if (r == nullptr) {
        return fail(queue_full(q, what, depth));
    }
    if (shared) {
        auto held = held_units::take(shared, need);
        if (!held) {
            pool.give(r, false);  // untouched: nobody waited for it (op_pool::give)
            return fail(held.error().code(),
                        std::string(what) + ": shared slot pool: " + held.error().message());
        }
        r->held.units = op_holding(std::move(*held));
    }
    return r;
}

}  // namespace remora::detail

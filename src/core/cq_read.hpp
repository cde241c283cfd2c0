// SPDX-License-Identifier: BSD-3-Clause
// src/core/cq_read.hpp — what the files of the completion queue share (remora::detail):
// finish(), the one place a provider entry is mapped back to its operation, and small helpers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include <remora/completion_queue.hpp>

#include "core/cq_impl.hpp"
#include "ops/op_pool.hpp"

namespace remora::detail {

using clock = std::chrono::steady_clock;
inline constexpr std::size_t read_batch = 64;  // completions one fi_cq_read takes at most

// Milliseconds left until `deadline`, at least 0.
int remaining_ms(clock::time_point deadline);

// Fills `c` from a provider completion and gives its record back. Returns true when the
// completion is for the caller to see (false: delivered to its callback, a success of an
// operation posted with completion_mode::on_error, or one of a connection being destroyed).
// A reported completion whose record stays taken until it is handed out sets *held to it.
// What the operation holds (budget units, a bounce buffer) goes back when finish() returns, or,
// with `hand_out_now` (the caller hands *held out before it returns: a poll), with the record
// then (op_pool::give_n: one wake of a parked post per operation). `sink`: where user callbacks
// go until the reader's lock is released (the reading CQ), null to run them at once.
bool finish(const cq_impl& cq, completion& c, void* op_context, std::uint64_t flags,
            callback_sink* sink, op_record** held = nullptr, bool hand_out_now = false);

// The op_pool (connection) an operation context belongs to; null for a peer's write with
// immediate data.
inline const op_pool* owner_of(void* op_context) noexcept {
    return op_context != nullptr ? static_cast<op_record*>(op_context)->owner : nullptr;
}

}  // namespace remora::detail

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

// Ends `c`'s requests past their deadline (an addon's, e.g. persistence_config::service_timeout);
// true if one had passed. Reads the clock only while a request has a deadline: an idle poller pays
// one load.
bool tick_if_due(connection_impl& c);

// Milliseconds left until `deadline`, at least 0.
int remaining_ms(clock::time_point deadline);

// Fills `c` from a provider completion and gives its record back. Returns true when the
// completion is for the caller to see (false: delivered to its callback, a success of an
// operation posted with completion_mode::on_error, or one of a connection being destroyed).
// `src` (may be null) comes in as the record's pool and no held record. A reported completion
// whose record stays taken until it is handed out sets src->held to it (read with a sink: not
// `now`); one handed out `now` goes back at once and, when nothing else counts it, clears
// src->pool (nothing to uncount when it is handed out). What the operation holds (budget units,
// a bounce buffer) goes back when finish() returns, or, unless `later`, with the record then
// (op_pool::give_n: one wake of a parked post per operation). `sink`: where user callbacks go
// until the reader's lock is released (the reading CQ), null to run them at once.
bool finish(const cq_impl& cq, completion& c, void* op_context, std::uint64_t flags,
            callback_sink* sink, entry_source* src = nullptr, hand_out when = hand_out::later);

// The op_pool (connection) an operation context belongs to; null for a peer's write with
// immediate data.
inline const op_pool* owner_of(void* op_context) noexcept {
    return op_context != nullptr ? static_cast<op_record*>(op_context)->owner : nullptr;
}

}  // namespace remora::detail

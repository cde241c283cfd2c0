// SPDX-License-Identifier: BSD-3-Clause
// src/core/cq_read.hpp — what the files of the completion queue share (remora::detail):
// finish(), the one place a provider entry is mapped back to its operation, and small helpers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include <remora/completion_queue.hpp>

#include "core/cq_impl.hpp"
#include "fabric/cq.hpp"
#include "ops/op_pool.hpp"

namespace remora::detail {

using clock = std::chrono::steady_clock;
inline constexpr std::size_t read_batch = 64;  // completions one fi_cq_read takes at most

// Ends `c`'s requests past their deadline (an addon's, e.g. persistence_config::service_timeout);
// true if one had passed. Reads the clock only while a request has a deadline: an idle poller pays
// one load.
bool tick_if_due(connection_impl& c);

// Verbs rules (cq_impl::rx_rule): verbs delivers a peer's write with immediate data into a posted
// receive (FI_RX_CQ_DATA), and a message needs one too. The providers here need none for the
// write, so the rule counts: each such write takes one of the connection's posted receives
// (connection_impl::rx_taken), and a write or a message that finds none left fails its completion
// here (errc::invalid_argument, the rule logged), where verbs would hold the sender in
// receiver-not-ready retries until a receive is posted, or fail it. `imm`: c is a peer's write,
// else a message received. Counts only: the receive a verbs NIC would have consumed stays posted
// and takes the next message. On a connection whose receives are the library's (a target
// service's, persistence_config::message_size's), verbs would hand the write to one of those and
// the application would never see it: refused whatever is posted.
[[gnu::cold]] void rx_rule(const cq_impl& cq, completion& c, bool imm);

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

// The operation a provider's entry belongs to: its op_context, but none for a peer's write
// (libfabric: NULL for completions of no posted operation). shm left a stale word of its command
// queue there (libfabric 1.17: the remote range count of an earlier command in the same slot), so
// the flag decides, never the context.
inline void* entry_context(void* op_context, std::uint64_t flags) noexcept {
    return (flags & cq_flag_remote_write) != 0 ? nullptr : op_context;
}

// The op_pool (connection) an operation context belongs to; null for a peer's write with
// immediate data.
inline const op_pool* owner_of(void* op_context) noexcept {
    return op_context != nullptr ? static_cast<op_record*>(op_context)->owner : nullptr;
}

}  // namespace remora::detail

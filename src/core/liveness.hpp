// SPDX-License-Identifier: BSD-3-Clause
// src/core/liveness.hpp — RDM peer liveness (connection_config::liveness) (remora::detail).
//
// Every RDM endpoint (open_peer) registers an 8-byte word peers may read, and its
// local_address() carries the word's key and address after the provider's name (a trailer the
// peer's attach() takes off again). A connection with liveness on reads the attached peer's
// word with one send-queue entry of its own (queue::service, reserved beside the addon's
// internal sends), every liveness / 4 while the connection is looked at; a read that fails, or
// is not answered within `liveness`, makes the peer lost: conn_event::lost on event_fd(), later
// posts fail with errc::disconnected, and a second later (or one probe interval, if longer, so
// that a post already past its checks is out of the provider) the endpoint is closed, which
// completes every outstanding operation with errc::disconnected.
//
// Where it runs: in the connection's extension tick (connection_impl::tick_extensions), called
// by the application's reads and waits on the connection's own CQs and by next_event(), and on
// the progress thread when it reads the connection's CQ (liveness_progress). The probe's
// completion is read like any other: by those reads, or by the progress thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include <remora/connection.hpp>
#include <remora/result.hpp>

namespace remora::detail {

struct connection_impl;

// Send-queue entries the liveness probe takes beside the application's and the addon's: 1
// with connection_config::liveness, else 0.
inline std::uint32_t probe_sends(const connection_config& c) noexcept {
    return c.liveness.count() > 0 ? 1 : 0;
}

// The trailer local_address() carries after the provider's name: key, address, magic.
inline constexpr std::size_t liveness_trailer = 20;

// open_peer: registers the word peers read and appends its trailer to c.local_addr. A provider
// that cannot register it leaves the address without one (peers cannot watch this endpoint).
// Fails only when this connection asks for liveness and the word cannot be offered.
result<void> offer_liveness_word(connection_impl& c);

// attach: the provider's part of `addr` (the trailer taken off, and the peer's word kept for
// the probes). errc::invalid_argument when this connection asks for liveness and the peer's
// address carries no word.
result<std::span<const std::byte>> take_liveness_word(connection_impl& c,
                                                      std::span<const std::byte> addr);

// One probe of the attached peer's word (from its address), with an application send-queue
// entry (none is in use yet: the connection is being set up), waited for until `deadline`:
// the peer's endpoint answered it. Driven here, unless the progress thread reads the CQ.
// errc::timed_out when it was not answered in time (it completes canceled when the endpoint
// closes), errc::bad_state on a connection with liveness or a peer address without a word.
result<void> prove_peer(connection_impl& c, std::chrono::steady_clock::time_point deadline);

// attach succeeded: the first probe is due one interval from now.
void start_liveness(connection_impl& c);

// Whether the connection watches its peer's liveness.
inline bool liveness_on(const connection_config& c) noexcept {
    return c.liveness.count() > 0;
}

// The progress thread's look (it reads `c`'s CQ): runs the check once due (probe, loss), but
// leaves the endpoint's close after a loss to the application's looks or close(). Returns when
// it is due next (time_point::max(): nothing more for the progress thread). Called with the
// progress engine's lock held (an unwatch waits for it).
std::chrono::steady_clock::time_point liveness_progress(connection_impl& c,
                                                        std::chrono::steady_clock::time_point now);

}  // namespace remora::detail

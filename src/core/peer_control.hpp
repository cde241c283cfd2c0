// SPDX-License-Identifier: BSD-3-Clause
// src/core/peer_control.hpp — control messages between two attached RDM peers (remora::detail).
//
// The access layer's attach handshake (admission of RDM peers) exchanges a few small messages
// with the attached peer before any operation of the application: a challenge, a token, an
// answer. They travel as library-internal sends and receives (post_internal), so they work on a
// connection with a service_depth too, are accounted like every other queue entry, and never
// reach the application's CQ reads. Receives are directed at the attached peer (caps().
// directed_receive): nobody else's message is taken.
//
// Threading: one exchange at a time per connection, from the thread setting it up; the
// connection's CQs may be read meanwhile by their owner (the progress thread, or this call).
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

#include <remora/connection.hpp>
#include <remora/result.hpp>

namespace remora::detail {

// The longest control message.
inline constexpr std::size_t control_max = 1024;

// Sends `message` (at most control_max bytes; nothing when empty) to the attached peer and,
// with `receive`, waits for one message from it (posted before the send goes out), both by
// `deadline`. Returns the message received (empty without `receive`). Errors: bad_state before
// attach or on a MSG connection, too_large for a longer message, timed_out at the deadline,
// too_large for a received message longer than control_max, the provider's failure otherwise.
// A receive still posted when this fails stays posted until the connection closes: close a
// connection whose exchange failed.
result<std::vector<std::byte>> control_exchange(connection& conn,
                                                std::span<const std::byte> message, bool receive,
                                                std::chrono::steady_clock::time_point deadline);

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/core/same_host_path.hpp — a connection to a peer on this host whose operations go over
// shared memory (remora::detail).
//
// Such a connection is set up on the user's connected (MSG) domain like any other; when both
// sides offer the same-host path and agree in the setup's private data (same_host.hpp), each
// side has an shm RDM peer of its domain's companion shm domain, attached to the other's, and
// the connection's handle holds that peer, with the connected endpoint as its `control`:
//  - operations go to the shm peer; remote ranges are reached at their same-host address
//    (remote_region::same_host_address); local regions are the user's domain's;
//  - events come from the connected endpoint: event_fd() is its event queue's fd, next_event
//    reads it, and its end (the peer's close, or its loss) closes the shm endpoint, which
//    completes every outstanding operation (canceled; errc::disconnected after a loss);
//  - the connected endpoint is also looked at while the application reads or waits on the shm
//    peer's CQs, every control_interval (a blocking wait wakes up for it), so a peer that goes
//    away with operations outstanding ends them without a next_event call;
//  - close() closes the shm endpoint, then shuts the connected one down (the peer's end).
#pragma once

#include <chrono>
#include <memory>
#include <span>

#include <remora/connection.hpp>
#include <remora/result.hpp>

#include "fabric/fabric.hpp"

namespace remora::detail {

struct connection_impl;
struct domain_impl;

// How long a target waits for the client's shm peer to answer the proof at most (and at most
// half the connection's connect_timeout): the client progresses it while it waits for the accept.
inline constexpr std::chrono::milliseconds same_host_proof_patience{500};

// How often the connected endpoint under a same-host connection is looked at.
inline constexpr std::chrono::milliseconds control_interval{10};

// The client's shm peer, opened before the connection request goes out (its address travels in
// the request), or null when the connect offers no same-host path: the domain has no same-host
// domain, the configuration turns it off, shares a CQ or receive queue of the user's domain, or
// the setup is asynchronous (the application holds the connection while it is set up), or
// `dest` (the request's fi_info) is no address of this host.
std::unique_ptr<connection_impl> same_host_client_peer(const domain_impl& dom,
                                                       const connection_config& cfg,
                                                       const fabric_info* dest, bool async);

// The target's shm peer for a client that offered the path with its shm peer's `address`,
// attached to it and proven (a probe of the client's word, answered by the client's progress,
// within `deadline`), or null when the target cannot take the path (the reason is logged at
// debug level): as for the client. A target's shm peer is always progressed by the library's
// progress thread (incoming one-sided operations land without the application, as tcp's do);
// without connection_config::progress_thread that thread only drives it, and the application
// reads its completions (and runs their callbacks) as over tcp.
std::unique_ptr<connection_impl> same_host_target_peer(
    const domain_impl& dom, const connection_config& cfg, std::span<const std::byte> address,
    bool async, std::chrono::steady_clock::time_point deadline);

// An shm address of this process (a connection between two of its own endpoints). The path is
// not taken between them unless REMORA_SAME_HOST=process: shm touches a peer's region on every
// post, and a peer destroyed in the same process unmaps it (libfabric 1.17 crashed there), where
// tcp ends such a connection cleanly.
bool from_this_process(std::span<const std::byte> address) noexcept;
bool same_host_in_process() noexcept;

// Whether the configuration can take the path at all (the checks both sides share).
bool same_host_config_ok(const domain_impl& dom, const connection_config& cfg, bool async) noexcept;

// Makes `shm` (an shm RDM peer, attached to the peer's and proven) the connection, and `ctl`
// (the established connected endpoint it was set up on) its control: ctl leaves its channel
// (a progress thread still progresses it), its private data becomes the connection's, and the
// connection's local regions are ctl's domain's.
result<void> adopt_control(connection_impl& shm, std::unique_ptr<connection_impl> ctl);

// connection::next_event of a same-host connection: the control's events; its end ends the
// shm peer too.
result<conn_event> same_host_next_event(connection_impl& c, std::chrono::milliseconds timeout);

// connection::close of a same-host connection.
result<void> same_host_close(connection_impl& c);

// A completion channel's look at a same-host connection (tick_if_due), under the channel's
// lock: what the control's end completes is delivered at the CQs' next read, not here.
void same_host_channel_tick(connection_impl& c);

// The connection is being destroyed: its control is looked at no more (a completion channel's
// wait on another thread may still reach it until the connection leaves the channel).
void same_host_forget(connection_impl& c) noexcept;

}  // namespace remora::detail

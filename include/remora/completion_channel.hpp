// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/completion_channel.hpp — one wait for many completion queues (completion_channel).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include <remora/completion_queue.hpp>
#include <remora/result.hpp>

namespace remora {

enum class conn_event : std::uint8_t;  // connection.hpp

/// What a completion_channel's wait (or connection::wait) reports: which CQ fired, or which
/// connection's asynchronous setup ended.
struct channel_event {
    completion_queue* cq = nullptr;  ///< the CQ that fired; poll it
    cq_kind kind = cq_kind::cq;      ///< whether it is its connection's CQ or receive CQ
    std::uint64_t tag = 0;           ///< connection_config::tag of its connection
    /// Completions ready on it; 0 is a no_completion wake-up: entries were reaped there that
    /// report nothing (callbacks run, successes hidden by completion_mode::on_error, unsignalled
    /// operations reclaimed: in_flight() dropped), or the provider signalled with nothing to read.
    std::size_t ready = 0;
    /// Set when the event is a connection's asynchronous setup outcome (connection::connect_async,
    /// connection_request::accept_async; `tag` names the connection, `cq` is null): reported once
    /// here, and once by the connection's next_event(). A channel wait also notices the setup
    /// deadline of the connections attached to it (it wakes up for it).
    std::optional<conn_event> setup;
};

/// One wait for many completion queues.
///
/// A completion channel gathers the CQs attached to it behind one file descriptor. A connection
/// with channel_mode::shared attaches its CQ and RCQ to one channel: its own, or the one given in
/// connection_config::shared_channel, which many connections may share so a server waits on one fd
/// and learns which connection (by tag) and which CQ fired.
///
/// wait() never loses a completion: it arms every attached CQ with fi_trywait before it blocks and
/// reports a CQ whose arming shows completions already pending. Pending CQs are reported round
/// robin so one busy connection does not starve the others. When fds fire it reads their CQs in
/// turn, a connection's receive CQ before its CQ (on tcp both watch the connection's socket, so a
/// message wakes both). When none of them had anything, the first time it arms and blocks again
/// for the rest of the timeout; the second time, or at once when the timeout is 0, it reports the
/// no_completion wake-up. It also reports the outcome of each
/// attached connection's asynchronous setup (channel_event::setup), so one thread can set up
/// many connections and serve their completions with one wait.
///
/// \par Threading
/// Attach/detach (connection create/close) may run concurrently with each other; wait()
/// runs on one thread at a time. A channel handle is shared: copies refer to the same channel.
///
/// \see shared_channel.cpp
class completion_channel {
  public:
    completion_channel() = default;  ///< empty handle
    /// A new channel with nothing attached: give it to connections in
    /// connection_config::shared_channel (with channel_mode::shared).
    /// \return the channel; errc::provider_error when its epoll instance cannot be made
    static result<completion_channel> create();

    /// True unless the handle is empty.
    explicit operator bool() const noexcept { return impl_ != nullptr; }
    /// Readable when some attached CQ may have completions; add it to your own epoll.
    int fd() const noexcept;
    /// Blocks until an attached CQ fires, or an attached connection's asynchronous setup ends.
    /// With no CQ attached it waits out the timeout. A CQ whose last poll ran callbacks is
    /// reported at once, once, with ready == 0 (see completion_queue), so a poll-then-wait loop
    /// re-checks.
    /// \param timeout the longest it blocks (0: only looks)
    /// \return the event (poll its `cq`, or read its `setup`); errc::timed_out; a provider error
    ///         as the CQs' arming or reading reports it
    result<channel_event> wait(std::chrono::milliseconds timeout);
    /// CQs attached now.
    std::size_t attached() const noexcept;

  private:
    friend struct internal_access;
    struct impl;
    explicit completion_channel(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
    std::shared_ptr<impl> impl_;
};

}  // namespace remora

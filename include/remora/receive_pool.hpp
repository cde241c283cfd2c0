// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/receive_pool.hpp — receive buffers shared by all of a target's connections, with
/// back-pressure (receive_pool), and the messages it delivers (message).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <remora/completion_queue.hpp>
#include <remora/connection.hpp>
#include <remora/domain.hpp>
#include <remora/result.hpp>

namespace remora {

/// How receive_pool::create sizes a pool.
struct receive_pool_config {
    std::uint32_t buffers = 64;        ///< buffers shared by all attached connections
    std::size_t buffer_size = 4096;    ///< bytes per buffer: the largest message accepted
    std::uint32_t per_connection = 4;  ///< most receives posted on one connection (fairness)
};

/// What a receive_pool is doing (receive_pool::stats), for monitoring.
struct receive_pool_stats {
    std::uint32_t buffers = 0;              ///< the pool's buffers (receive_pool_config)
    std::uint32_t posted = 0;               ///< receives posted on connections now
    std::uint32_t held = 0;                 ///< messages delivered and not yet released
    std::uint32_t max_held = 0;             ///< the most ever held at once
    std::uint32_t owed = 0;                 ///< receives connections are owed (back-pressure)
    std::uint32_t connections = 0;          ///< attached
    std::uint64_t received = 0;             ///< messages delivered so far
    std::uint64_t backpressure_events = 0;  ///< messages that left their connection owed a receive
    std::uint64_t reclaimed = 0;            ///< receives moved off quiet connections
};

class message;

/// Receive buffers shared by all of a target's connections, with back-pressure.
///
/// A target serving many clients cannot post a full receive queue of buffers per connection:
/// memory would grow with the number of clients. A receive_pool holds `buffers` registered
/// buffers of `buffer_size` bytes for all the connections attached to it. Each buffer is either
/// posted as a receive on one connection or held by the application as a `message` it is working
/// on. When a message is released its buffer is posted again — on the connection that has waited
/// longest for one (FIFO, round-robin), never more than `per_connection` on one connection.
///
/// Back-pressure: while every buffer is held or posted elsewhere, a connection simply has no
/// receive posted, so its peer's messages wait in the provider and the network (tcp flow
/// control; receiver-not-ready retries on verbs). The target stops taking new work and nothing
/// is dropped; its memory stays bounded by buffers × buffer_size.
///
/// libfabric's shared receive contexts are not used (shared_receive_queue is that): they do not
/// say which connection a message came from unless each has a receive CQ of its own, and a
/// target must reply on that connection. A receive_pool works on every provider, including those
/// without a shared receive context (docs/providers.md).
///
/// Usage: attach() each accepted connection (its rq_size must be at least per_connection), then
/// take messages from all of them in arrival order with next(). The pool's receives complete
/// inside the library: accept the connections with connection_config::progress_thread and the
/// library's thread delivers them while next() waits; without it, poll each connection's CQ (the
/// pool's completions do not appear there) and call next(0ms). A message says which connection
/// it came from by its tag (connection_config::tag); reply on that connection, then drop the
/// message (or release() it). A connection's buffers come back when it is destroyed or detached.
///
/// Destroying the pool (its handle) detaches every attached connection: their receives are
/// canceled, and the pool's buffers stay registered until each canceled receive has completed or
/// its connection is destroyed, so connections may outlive the pool and the pool them.
///
/// \par Threading
/// Every call may run concurrently; a message may be released on any thread. A
/// connection may be destroyed while other threads use the pool (next(), its rebalancing, the
/// pool's destruction): its destruction first takes it out of the pool and waits for the pool's
/// posts and scans on it in flight, so none touches it while it is torn down. Do not call
/// detach(conn) while another thread destroys `conn` (no call may race an object's destruction).
class receive_pool {
  public:
    /// Registers `config.buffers` x `config.buffer_size` bytes for receives on `dom`.
    /// \param dom    the domain of the connections that will attach
    /// \param config buffers, their size and the most posted on one connection
    /// \return the pool; errc::invalid_argument for a zero field; errc::too_large for a
    ///         buffer_size over the provider's message size; errc::bad_state for an empty
    ///         domain handle; memory_region::create's errors
    static result<receive_pool> create(const domain& dom, const receive_pool_config& config = {});
    receive_pool(receive_pool&&) noexcept;             ///< takes over the pool
    receive_pool& operator=(receive_pool&&) noexcept;  ///< drops its own pool, takes another's
    ~receive_pool();  ///< detaches every connection (see receive_pool)

    /// Posts up to per_connection receives on `conn` from the free buffers; what the pool
    /// cannot give now is owed and posted as buffers return. errc::invalid_argument if the
    /// connection's rq_size is smaller than per_connection or it has a service depth;
    /// errc::bad_state if it is attached already; errc::disconnected if it is not open.
    /// \return success, or one of the errors above
    result<void> attach(connection& conn);
    /// Stops posting on `conn` and cancels its receives; their buffers come back as their
    /// canceled completions are read, or when the connection is destroyed.
    void detach(connection& conn) noexcept;

    /// The next message from any attached connection, in arrival order.
    /// \param timeout the longest it waits (0: only looks)
    /// \return the message (its buffer stays out of the pool until it is released);
    ///         errc::timed_out
    result<message> next(std::chrono::milliseconds timeout);

    /// The pool's counters now.
    receive_pool_stats stats() const;

  private:
    friend struct internal_access;
    friend class message;
    struct impl;  // the pool's state, held by its messages too
    explicit receive_pool(std::shared_ptr<impl> p) noexcept;
    std::shared_ptr<impl> impl_;
};

/// A received message: its bytes stay valid, and its buffer stays out of the pool, until the
/// message is released or destroyed.
class message {
  public:
    message() = default;  ///< no message
    /// Takes over `o`'s buffer; `o` is left empty.
    message(message&& o) noexcept;
    /// Releases its own buffer, then takes over `o`'s.
    message& operator=(message&& o) noexcept;
    ~message();  ///< releases the buffer (see release())

    std::span<const std::byte> data() const noexcept;    ///< the bytes received
    std::uint64_t tag() const noexcept;                  ///< the connection's config().tag
    std::uint64_t imm() const noexcept { return imm_; }  ///< immediate data, when has_imm()
    bool has_imm() const noexcept { return has_imm_; }   ///< the message carried immediate data
    /// True while it holds a message.
    explicit operator bool() const noexcept { return pool_ != nullptr; }
    /// Gives the buffer back now (posted again on the connection waiting longest).
    void release() noexcept;

  private:
    friend class receive_pool;
    using impl = receive_pool::impl;
    std::shared_ptr<impl> pool_;  // with a message: the pool, and its buffer's index
    std::uint32_t index_ = 0;
    std::size_t bytes_ = 0;
    std::uint64_t tag_ = 0;
    std::uint64_t imm_ = 0;
    bool has_imm_ = false;
};

}  // namespace remora

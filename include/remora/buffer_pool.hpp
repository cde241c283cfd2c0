// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/buffer_pool.hpp — pre-registered bounce buffers (buffer_pool, pooled_buffer), and the
/// writes and sends from unregistered memory that use them (write_copy, send_copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <remora/connection.hpp>
#include <remora/domain.hpp>
#include <remora/memory_region.hpp>
#include <remora/op_options.hpp>
#include <remora/remote_region.hpp>
#include <remora/result.hpp>

namespace remora {

/// How buffer_pool::create cuts its memory.
struct buffer_pool_config {
    std::size_t buffers = 64;        ///< how many buffers (> 0)
    std::size_t buffer_size = 4096;  ///< bytes per buffer (> 0): the largest copy it takes
    /// What the buffers are used for: sources of writes and sends by default.
    usage uses = usage::write_source | usage::send;
};

class pooled_buffer;

/// Pre-registered bounce buffers.
///
/// A buffer pool registers one block of memory once, cut into `buffers` buffers of `buffer_size`
/// bytes, and hands them out as move-only pooled_buffer handles that return to the pool when
/// destroyed. It is the registration pool for data that does not live in registered memory:
/// write_copy and send_copy copy the caller's bytes into a pooled buffer that the
/// operation's slot holds from post to completion (the caller's memory is free at once, and
/// nothing is registered per operation). A pool may serve many connections (of its domain).
///
/// Exhaustion: try_get() fails with errc::would_block while every buffer is out; an operation
/// that needs a buffer then takes nothing (no queue entry, no unit of connection_config::slots)
/// and fails the same way. A request larger than buffer_size can never fit: errc::too_large.
///
/// \par Threading
/// Every call may run concurrently; a handle is shared (copies refer to one pool,
/// which lives while a handle or an outstanding buffer does).
///
///     auto pool = remora::buffer_pool::create(dom);
///     remora::connection_config cfg;
///     cfg.addons = {*pool};
///     auto conn = remora::connection::connect(dom, host, port, cfg);
///     remora::send_copy(*conn, std::as_bytes(std::span(text)));  // text is free at once
class buffer_pool {
  public:
    buffer_pool() = default;  ///< empty handle
    /// Maps and registers `cfg.buffers` x `cfg.buffer_size` bytes on `dom`.
    /// \param dom the domain whose connections will use it
    /// \param cfg how many buffers, their size and usages
    /// \return the pool; errc::invalid_argument for zero buffers or size; errc::too_large when
    ///         the memory cannot be mapped; memory_region::create's errors
    static result<buffer_pool> create(const domain& dom, const buffer_pool_config& cfg = {});
    /// As an entry of connection_config::addons (`cfg.addons = {pool}`): the bounce buffers of
    /// the connection's write_copy and send_copy. The connection then holds the pool. Allocates.
    operator std::shared_ptr<const connection_addon>() const;

    /// A free buffer, for the application's own use (returned when the handle goes).
    /// \return the buffer; errc::would_block while every buffer is out; errc::bad_state for an
    ///         empty handle
    result<pooled_buffer> try_get();
    std::size_t available() const noexcept;    ///< buffers free now
    std::size_t capacity() const noexcept;     ///< buffers in all
    std::size_t buffer_size() const noexcept;  ///< bytes per buffer
    /// True unless the handle is empty.
    explicit operator bool() const noexcept { return impl_ != nullptr; }

  private:
    friend struct internal_access;
    friend class pooled_buffer;
    struct impl;  // the pool's state, held by its buffers too
    std::shared_ptr<impl> impl_;
};

/// One buffer of a pool, returned to it on destruction. Move-only; it holds its pool.
class pooled_buffer {
  public:
    pooled_buffer() = default;                           ///< no buffer
    pooled_buffer(pooled_buffer&&) noexcept;             ///< takes over the buffer
    pooled_buffer& operator=(pooled_buffer&&) noexcept;  ///< returns its own, takes over another's
    pooled_buffer(const pooled_buffer&) = delete;
    pooled_buffer& operator=(const pooled_buffer&) = delete;
    ~pooled_buffer();  ///< returns the buffer to its pool

    std::span<std::byte> data() const noexcept;    ///< buffer_size bytes
    const memory_region& region() const noexcept;  ///< the pool's registration
    std::size_t offset() const noexcept;           ///< of data() in region()
    /// True while it holds a buffer.
    explicit operator bool() const noexcept { return pool_ != nullptr; }
    /// Returns the buffer to its pool now; the handle is then empty.
    void release() noexcept;

  private:
    friend class buffer_pool;
    using impl = buffer_pool::impl;
    std::shared_ptr<impl> pool_;
    std::uint32_t index_ = 0;
};

/// From unregistered memory, through a bounce buffer: copies `data` into a buffer of the pool
/// `conn` was set up with (its buffer_pool entry of connection_config::addons; the first if it
/// has several) and posts the write (or send) from it: the caller's memory is free when the call
/// returns, and the buffer is held by the operation's slot until its completion is read (an
/// operation posted unsignalled, connection_config::signal_every, gives it back at post).
/// Everything the operation needs (the buffer, the send-queue and CQ entries,
/// connection_config::slots units) is taken at once or nothing is: errc::would_block when the
/// pool or the queue is exhausted, errc::too_large when `data` exceeds the pool's buffer_size,
/// errc::bad_state without a pool. Otherwise as connection::write and connection::send (their
/// checks, errors and completions). Threading: as any post.
/// \param conn       a connection set up with a buffer_pool among its addons
/// \param dst        the peer's region (usage::write_destination)
/// \param dst_offset where in `dst` the write starts
/// \param data       the bytes (copied before the call returns)
/// \param opts       as for connection::write
/// \return success once posted; the errors above
result<void> write_copy(connection& conn, const remote_region& dst, std::uint64_t dst_offset,
                        std::span<const std::byte> data, op_options opts = {});
/// Writes the registered local segments, in order, into the peer's region as one write, chosen
/// by the connection's limits: with at most config().max_sge segments, one scatter-gather write
/// straight from them (connection::write: its checks, errors and completion); with more, each
/// segment is checked as a write's source (errc::invalid_argument for a null region or one of
/// another domain, access_denied without usage::write_source, out_of_range), then their bytes
/// are copied into one bounce buffer, as write_copy (its reservation, errors and completion; the
/// segments are free when the call returns), and written from it.
/// \param conn       the connection; with more than max_sge segments, set up with a buffer_pool
/// \param dst        the peer's region (usage::write_destination)
/// \param dst_offset where in `dst` the write starts
/// \param src        the local segments (usage::write_source); their lengths add up to the bytes
/// \param opts       as for connection::write
/// \return success once posted; the errors above
result<void> write_or_copy(connection& conn, const remote_region& dst, std::uint64_t dst_offset,
                           std::span<const local_segment> src, op_options opts = {});
/// connection::send of `data` through a bounce buffer, as write_copy: the caller's memory is
/// free when the call returns.
/// \param conn a connection set up with a buffer_pool among its addons
/// \param data the message (copied before the call returns)
/// \param opts as for connection::send
/// \return success once posted; write_copy's errors
result<void> send_copy(connection& conn, std::span<const std::byte> data, op_options opts = {});

}  // namespace remora

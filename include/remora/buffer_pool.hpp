// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/buffer_pool.hpp — pre-registered bounce buffers.
///
/// A buffer pool registers one block of memory once, cut into `buffers` buffers of `buffer_size`
/// bytes, and hands them out as move-only pooled_buffer handles that return to the pool when
/// destroyed. It is the registration pool for data that does not live in registered memory:
/// connection::write_copy and send_copy copy the caller's bytes into a pooled buffer that the
/// operation's slot holds from post to completion (the caller's memory is free at once, and
/// nothing is registered per operation). A pool may serve many connections.
///
/// Exhaustion: try_get() fails with errc::would_block while every buffer is out; an operation
/// that needs a buffer then takes nothing (no queue entry, no slot unit) and fails the same way.
/// A request larger than buffer_size can never fit: errc::too_large.
///
/// Threading: every call may run concurrently; a handle is shared (copies refer to one pool,
/// which lives while a handle or an outstanding buffer does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <remora/connection.hpp>  // bounce_buffers
#include <remora/domain.hpp>
#include <remora/memory_region.hpp>
#include <remora/result.hpp>

namespace remora {

struct buffer_pool_config {
    std::size_t buffers = 64;
    std::size_t buffer_size = 4096;
    /// What the buffers are used for: sources of writes and sends by default.
    usage uses = usage::write_source | usage::send;
};

/// One buffer of a pool, returned to it on destruction.
class pooled_buffer {
  public:
    pooled_buffer() = default;
    pooled_buffer(pooled_buffer&&) noexcept;
    pooled_buffer& operator=(pooled_buffer&&) noexcept;
    pooled_buffer(const pooled_buffer&) = delete;
    pooled_buffer& operator=(const pooled_buffer&) = delete;
    ~pooled_buffer();

    [[nodiscard]] std::span<std::byte> data() const noexcept;    ///< buffer_size bytes
    [[nodiscard]] const memory_region& region() const noexcept;  ///< the pool's registration
    [[nodiscard]] std::size_t offset() const noexcept;           ///< of data() in region()
    explicit operator bool() const noexcept { return pool_ != nullptr; }
    void release() noexcept;

  private:
    friend class buffer_pool;
    std::shared_ptr<detail::buffer_pool_impl> pool_;
    std::uint32_t index_ = 0;
};

class buffer_pool {
  public:
    buffer_pool() = default;  ///< empty handle
    /// The pool a connection's bounce handle refers to (empty if it is empty).
    explicit buffer_pool(const bounce_buffers& b) : impl_(b.pool()) {}
    /// As connection_config::bounce: the same pool.
    operator bounce_buffers() const noexcept { return bounce_buffers(impl_); }
    static result<buffer_pool> create(const domain& dom, const buffer_pool_config& cfg = {});

    result<pooled_buffer> try_get();
    [[nodiscard]] std::size_t available() const noexcept;
    [[nodiscard]] std::size_t capacity() const noexcept;
    [[nodiscard]] std::size_t buffer_size() const noexcept;
    explicit operator bool() const noexcept { return impl_ != nullptr; }

  private:
    std::shared_ptr<detail::buffer_pool_impl> impl_;
};

}  // namespace remora

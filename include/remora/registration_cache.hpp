// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/registration_cache.hpp — reuse registrations of user memory instead of registering it
/// for every operation (registration_cache), and gather_write and scatter_read from or into
/// unregistered memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include <remora/connection.hpp>
#include <remora/domain.hpp>
#include <remora/memory_region.hpp>
#include <remora/op_options.hpp>
#include <remora/result.hpp>

namespace remora {

/// A registration from the cache: the region, and where the requested range starts in it.
class cached_region {
  public:
    cached_region() = default;  ///< no registration
    /// The registration (valid while this handle is).
    const memory_region& region() const noexcept { return *mr_; }
    /// Where the requested range starts in region().
    std::size_t offset() const noexcept { return offset_; }
    /// True while it holds a registration.
    explicit operator bool() const noexcept { return mr_ != nullptr; }

  private:
    friend class registration_cache;
    std::shared_ptr<const memory_region> mr_;
    std::size_t offset_ = 0;
};

/// A registration_cache's counters (registration_cache::stats).
struct registration_cache_stats {
    std::uint64_t hits = 0;       ///< get() calls served by a cached registration
    std::uint64_t misses = 0;     ///< registrations made
    std::uint64_t evictions = 0;  ///< registrations dropped to make room
    std::size_t entries = 0;      ///< registrations cached now
};

/// Reuses registrations of user memory instead of registering it for every operation.
///
/// Registering memory (fi_mr_reg) pins pages and costs a system call or more; an application that
/// sends from or receives into the same buffers again and again should pay it once. get() returns
/// a cached registration covering the requested range with at least the requested usages, or
/// registers the range and caches it. A handle keeps its registration alive; the cache evicts
/// only registrations nobody holds, least recently used first, once it holds `capacity` of them.
///
/// Memory must not be freed or unmapped while a registration of it may be cached: call
/// invalidate() first. It drops the overlapping entries, and each is deregistered (its key closed,
/// so a peer holding its descriptor can no longer reach the memory) when its last handle goes.
///
/// \par Threading
/// Every call may run concurrently.
class registration_cache {
  public:
    /// An empty cache registering on `dom`.
    /// \param dom      the domain it registers in
    /// \param capacity registrations cached at most (> 0)
    /// \return the cache; errc::invalid_argument for capacity 0; errc::bad_state for an empty
    ///         domain handle
    static result<registration_cache> create(const domain& dom, std::size_t capacity = 64);
    registration_cache(registration_cache&&) noexcept;             ///< takes over the cache
    registration_cache& operator=(registration_cache&&) noexcept;  ///< takes over the cache
    ~registration_cache();  ///< drops its entries (each deregistered when its last handle goes)

    /// A registration covering `memory` with at least `uses`: a cached one, or a new one
    /// (cached, evicting the least recently used unheld entry when full).
    /// \param memory the caller's memory (it must stay mapped while a registration of it may
    ///               be cached: invalidate() before freeing it)
    /// \param uses   the usages needed
    /// \return the registration and the range's offset in it; errc::invalid_argument for empty
    ///         memory; memory_region::create's errors
    result<cached_region> get(std::span<std::byte> memory, usage uses);
    /// Drops every cached registration overlapping `memory` (call before freeing it).
    void invalidate(std::span<const std::byte> memory) noexcept;
    /// The cache's counters now.
    registration_cache_stats stats() const;
    const domain& dom() const noexcept;  ///< where it registers

  private:
    struct state;
    explicit registration_cache(std::unique_ptr<state> s);
    std::unique_ptr<state> s_;
};

/// connection::gather_write from memory the caller has not registered: `src` is registered
/// through `cache` (reused while cached, usage::write_source) and the registration is held by the
/// operation until it completes. With connection_config::slots the operation also draws
/// {registration 1} from the budget, in the same all-or-nothing step as its dst.size() x
/// {sq 1, cq 1} (a slot_pool whose capacity has registration units bounds how many registrations
/// operations hold at once: under backpressure a post finding none free gives errc::would_block
/// or parks, under forbid errc::bad_state), returned when its completion is read. Without slots
/// nothing is counted. A registration that fails is returned (the cache's error) with nothing
/// taken; one made for a refused post stays in the cache for the next. `src` must stay valid
/// until the completion; `cache` must be of the connection's domain (errc::invalid_argument
/// otherwise) and outlive the call. The rest as connection::gather_write.
/// \param conn  the connection
/// \param dst   the remote segments, as connection::gather_write's
/// \param src   the caller's unregistered memory (all parts' bytes, in order)
/// \param cache registers `src`
/// \param opts  as connection::gather_write's
/// \return success once every part is posted; the errors above and connection::gather_write's
result<void> gather_write(connection& conn, std::span<const remote_segment> dst,
                          std::span<std::byte> src, registration_cache& cache,
                          op_options opts = {});
/// connection::scatter_read into memory the caller has not registered, as the gather_write
/// above: `dst` is registered through `cache` (usage::read_destination) and held by the
/// operation, with the same {registration 1} and errors. The rest as connection::scatter_read.
/// \param conn  the connection
/// \param src   the remote segments, as connection::scatter_read's
/// \param dst   the caller's unregistered memory (all parts' bytes land there, in order)
/// \param cache registers `dst`
/// \param opts  as connection::scatter_read's
/// \return success once every part is posted; the errors above and connection::scatter_read's
result<void> scatter_read(connection& conn, std::span<const remote_segment> src,
                          std::span<std::byte> dst, registration_cache& cache,
                          op_options opts = {});

}  // namespace remora

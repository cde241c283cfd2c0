// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/persistent_region.hpp — target-side memory that peers write into and flush to
/// durability (persistent_region).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <remora/domain.hpp>
#include <remora/memory_region.hpp>
#include <remora/remote_region.hpp>
#include <remora/result.hpp>

namespace remora {

/// How persistent_region::open maps and registers a region.
struct persistent_region_config {
    std::string path{};    ///< backing file; empty: anonymous, volatile memory
    std::size_t size = 0;  ///< bytes; 0 with a path: the file's current size
    bool create = false;   ///< create a missing file or extend a short one (never shrinks)
    /// What peers may do (registered usages).
    usage uses =
        usage::read_source | usage::write_destination | usage::atomic_target | usage::flush_target;
    /// Declared by the operator, never guessed: writes placed into this mapping are durable
    /// (CPU caches in the persistence domain, e.g. eADR, and a DAX mapping). Refused unless the
    /// mapping is DAX.
    bool apm_durable = false;
    /// Lock the file and hold its lease (see persistent_region); false: neither.
    bool exclusive = true;
};

/// Target-side memory that peers write into and flush to durability.
///
/// A persistent_region is a registered memory_region over either
///  - a file, mapped shared: durable once persist() (msync of the page-aligned range) returns;
///    on a DAX file system the mapping is made with MAP_SYNC (write faults keep the file's block
///    metadata durable). A file created here is fsync'ed with its directory before use; or
///  - anonymous memory (no path): volatile; flushes to persistence are refused with
///    errc::not_supported, flushes for visibility work.
/// Opening never truncates a file. With `create` a missing file is created (mode 0600) and a
/// short one is extended to `size`; without it a missing or short file is an error. Every open
/// allocates all of the region's blocks (a sparse file too), so a full file system is an error
/// here and never a SIGBUS on a later write; a file this open created is removed if it fails.
///
/// A file-backed region holds its file alone (`exclusive`, the default):
///  - an exclusive lock: a second region on the same file, in this process or another, is
///    refused with errc::bad_state naming the holder's pid;
///  - a write lease: the kernel breaks it before any other open or truncate(2) of the file
///    completes (this process's own too: read the file only after the region is destroyed), and
///    makes the opener wait (/proc/sys/fs/lease-break-time, 45 s by default). revoked() then
///    turns true: stop serving and destroy the region within that time, and the opener's
///    change lands after the mapping is gone, never under it. The break
///    is signalled with SIGURG, ignored unless the application handles SIGURG. The lease needs
///    the file's owner (or CAP_LEASE) and a file nobody else has open; either missing is
///    errc::bad_state at open. Processes that already mapped the file are not covered.
/// `exclusive = false` skips both (file systems without leases, such as NFS): then a truncation
/// of the file by anyone kills this process with SIGBUS on its next access.
///
/// The region's descriptor (describe) states whether it is persistent and which flush methods
/// reach durability: read-after-write only when the operator declares that placed writes are
/// durable (apm_durable; a platform whose CPU caches are in the persistence domain and a DAX
/// mapping), and GPSPM (a flush request answered by the target's service) whenever the region is
/// persistent and exposed through a target_service (target_service::expose adds the bit).
///
/// \par Threading
/// Persist() may run from any number of threads at once; the region must outlive
/// every connection and service that uses it.
///
/// \see flush_persistent.cpp, append_log.cpp
class persistent_region {
  public:
    /// Maps (creating or extending the file if asked) and registers a region.
    /// \param dom    the domain it is registered in
    /// \param config the file (or none: volatile), size, usages and locking
    /// \return the region; errc::invalid_argument for a missing or short file without
    ///         `create`, a volatile region without a size, apm_durable without DAX, or a file
    ///         that cannot be opened, sized or mapped; errc::bad_state when another region
    ///         holds the file (naming its pid), the lease cannot be taken, or for an empty
    ///         domain handle; memory_region::create's errors
    static result<persistent_region> open(const domain& dom,
                                          const persistent_region_config& config);
    persistent_region(persistent_region&&) noexcept;  ///< takes over the mapping and registration
    /// Releases its own region, then takes over another's.
    persistent_region& operator=(persistent_region&&) noexcept;
    ~persistent_region();  ///< deregisters and unmaps (the file stays), drops lock and lease

    const memory_region& region() const noexcept;  ///< its registration
    std::span<std::byte> memory() const noexcept;  ///< the mapped bytes
    bool is_persistent() const noexcept;           ///< file-backed
    bool is_dax() const noexcept;                  ///< mapped with MAP_SYNC
    const std::string& path() const noexcept;      ///< the backing file (empty: volatile)
    /// True once another process opened or truncated the file (its lease is breaking): the
    /// region must be destroyed before the lease-break time runs out. Always false for a volatile
    /// or non-exclusive region. One fcntl; any thread.
    bool revoked() const noexcept;

    /// Makes [offset, offset + length) durable (msync of the covering pages). errc::out_of_range
    /// outside the region, errc::not_supported for a volatile region.
    result<void> persist(std::uint64_t offset, std::uint64_t length) const;

    /// The descriptor of [offset, offset + length) (length 0: to the end), stating persistence.
    result<remote_region> describe(std::size_t offset = 0, std::size_t length = 0) const;

  private:
    friend struct internal_access;
    struct impl;
    struct impl_deleter {
        void operator()(impl* p) const noexcept;
    };
    explicit persistent_region(std::unique_ptr<impl, impl_deleter> p) noexcept;
    std::unique_ptr<impl, impl_deleter> impl_;
};

}  // namespace remora

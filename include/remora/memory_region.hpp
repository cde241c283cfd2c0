// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/memory_region.hpp — local memory registered with the provider for explicit usages
/// (memory_region, usage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <remora/domain.hpp>
#include <remora/flags.hpp>
#include <remora/result.hpp>

namespace remora {

/// What a registered region may be used for: flags, combined with `|` (flags.hpp).
enum class usage : std::uint16_t {
    none = 0,                     ///< nothing (refused by memory_region::create)
    read_source = 1u << 0,        ///< peers may read from it (FI_REMOTE_READ)
    read_destination = 1u << 1,   ///< local destination of a read (FI_READ)
    write_source = 1u << 2,       ///< local source of a write (FI_WRITE)
    write_destination = 1u << 3,  ///< peers may write into it (FI_REMOTE_WRITE)
    send = 1u << 4,               ///< source of a send (FI_SEND)
    receive = 1u << 5,            ///< destination of a receive (FI_RECV)
    atomic_target = 1u << 6,      ///< peers may run atomics on it (remote read + write)
    flush_target = 1u << 7,       ///< peers may flush it (read-after-write needs remote read)
};
template <>
struct enable_flags<usage> : std::true_type {};
/// Every usage flag.
inline constexpr usage all_usages = static_cast<usage>(0xff);

class remote_region;

/// Local memory registered with the provider for explicit usages.
///
/// A region is registered only for the accesses it is created with (least privilege): a region
/// without usage::write_destination cannot be written by peers, one without usage::send cannot be
/// the source of a send, and so on. Every remora operation checks usage and bounds before posting.
/// A peer reaches the region through the descriptor describe() makes (a remote_region), which
/// the application sends it (e.g.\ as accept private data, serialised). In a domain with shm
/// beside it (provider_caps::same_host) the memory is registered there too, with the same
/// usages and key, for peers on the same host; a refusal there leaves the region without it
/// (its descriptors then carry no same-host address), never fails it.
///
///     std::vector<std::byte> buf(4096);
///     auto mr = remora::memory_region::create(dom, buf, remora::usage::write_destination);
///     auto desc = mr->describe();  // send desc->serialize() to the peer
///
/// \par Ownership and threading
/// Move-only; the registration is released on destruction. Immutable after creation; may be used
/// by many threads and connections at once. The memory must outlive the region; the region must
/// outlive every operation that uses it. A peer's read of the region is answered by this side's
/// provider, which may still be sending out of the memory after the peer saw the read complete:
/// free memory that peers read only once the connections that reach it are closed.
///
/// \see write.cpp, read.cpp
class memory_region {
  public:
    /// Registers `memory` for `uses`.
    /// \param dom    the domain whose provider registers it
    /// \param memory the caller's memory (not copied; it must outlive the region)
    /// \param uses   at least one usage
    /// \return the region; errc::invalid_argument for an empty span or no (or an unknown) usage;
    ///         errc::bad_state for an empty domain handle; errc::not_supported where the provider
    ///         has raw keys; the provider's error when registration is refused
    static result<memory_region> create(const domain& dom, std::span<std::byte> memory, usage uses);
    memory_region(memory_region&&) noexcept;             ///< takes over the registration
    memory_region& operator=(memory_region&&) noexcept;  ///< releases its own, takes over another's
    ~memory_region();                                    ///< deregisters the memory

    std::span<std::byte> memory() const noexcept;                  ///< the registered memory
    std::byte* data() const noexcept { return memory().data(); }   ///< memory().data()
    std::size_t size() const noexcept { return memory().size(); }  ///< bytes registered
    usage usages() const noexcept;                                 ///< what it was registered for
    /// True when the region is registered in `dom` (a handle of the domain it was created in).
    bool registered_in(const domain& dom) const noexcept;

    /// The descriptor a peer needs to access [offset, offset + length) of this region remotely,
    /// granting only the remote usages this region has (read_source, write_destination,
    /// atomic_target, flush_target), with the range's virtual address as its same-host address
    /// when the region is registered beside its domain in shm (else 0).
    /// \param offset where the described range starts
    /// \param length its bytes; 0 means "to the end"
    /// \return the descriptor; errc::out_of_range when the range is not inside the region;
    ///         errc::access_denied when the region has no remote usage to grant
    result<remote_region> describe(std::size_t offset = 0, std::size_t length = 0) const;

  private:
    friend struct internal_access;
    struct impl;
    struct impl_deleter {
        void operator()(impl* p) const noexcept;
    };
    explicit memory_region(std::unique_ptr<impl, impl_deleter> p) noexcept;
    std::unique_ptr<impl, impl_deleter> impl_;
};

}  // namespace remora

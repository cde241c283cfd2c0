// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/remote_region.hpp — a value type describing a range of a peer's registered memory
/// (remote_region), and what the target says of its durability (persistence).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include <remora/memory_region.hpp>
#include <remora/result.hpp>

namespace remora {

/// What a target says about the durability of a region it describes (see persistent_region.hpp).
enum class persistence : std::uint8_t {
    none = 0,              ///< volatile memory: flushes reach visibility only
    persistent = 1u << 0,  ///< the memory is durable storage: flushes to persistence are possible
    apm = 1u << 1,         ///< placed writes are durable (declared by the target's operator), so a
                           ///< read-after-write flush also persists
    gpspm = 1u << 2,       ///< the target's service persists a range on request (a flush message)
};
template <>
struct enable_flags<persistence> : std::true_type {};
/// Every persistence flag.
inline constexpr persistence all_persistence = static_cast<persistence>(0x7);

/// A range of a peer's registered memory: what an operation needs to reach it (address, length,
/// key), what it grants (usages) and what the target says of its durability (persistence).
///
/// A target makes one with memory_region::describe (or persistent_region::describe,
/// target_service::expose) and sends it serialize()d; the initiator parse()s it and names it in
/// its operations, which check every access against it before posting.
///
/// Serialised form (version 3, 40 bytes, little-endian):
///
///     u8 version (=3) | u8 addressing (0 = offset, 1 = virtual address) | u16 usage bits |
///     u64 address | u64 length | u64 key | u8 persistence bits | u8[3] zero |
///     u64 same-host address (0 = none)
///
/// The same-host address is where the range starts in the target process's virtual memory,
/// valid with the same key over libfabric's shm provider (domain_config::same_host), for a peer
/// on the same host; 0 when the target's region is not registered there. Version 2 is version
/// 3's first 32 bytes (version byte 2) with no same-host address: parse() reads it, serialize()
/// writes version 3.
///
/// parse() validates everything that came over the wire: size, version, addressing, usage bits,
/// persistence bits, reserved bytes, zero length, and address + length or same-host address +
/// length overflow each give errc::malformed_descriptor with a message.
///
/// \par Threading
/// A plain value.
class remote_region {
  public:
    static constexpr std::uint8_t version = 3;          ///< of the serialised form
    static constexpr std::size_t serialized_size = 40;  ///< bytes of the serialised form
    /// The remote usages a descriptor may carry.
    static constexpr usage remote_usages =
        usage::read_source | usage::write_destination | usage::atomic_target | usage::flush_target;

    remote_region() = default;  ///< an empty descriptor (length 0, grants nothing)
    /// Validating constructor for descriptors built by hand.
    /// \param address            where the range starts at the target (an offset unless
    ///                           virtual_addressing)
    /// \param length             bytes (non-zero)
    /// \param key                the registration's remote key
    /// \param uses               remote usages only (remote_usages), at least one
    /// \param virtual_addressing `address` is a virtual address (provider mr_mode::virt_addr)
    /// \param same_host_address  where the range starts in the target's virtual memory, over
    ///                           its same-host shm registration with `key` (0: none)
    /// \return the descriptor (stating persistence::none); errc::malformed_descriptor for a
    ///         zero length, an address + length or same_host_address + length overflow, or
    ///         usages that are empty or not remote
    static result<remote_region> make(std::uint64_t address, std::uint64_t length,
                                      std::uint64_t key, usage uses, bool virtual_addressing,
                                      std::uint64_t same_host_address = 0);

    std::uint64_t address() const noexcept { return address_; }  ///< start at the target
    std::uint64_t length() const noexcept { return length_; }    ///< bytes described
    std::uint64_t key() const noexcept { return key_; }          ///< the remote key
    usage usages() const noexcept { return usage_; }             ///< the remote usages granted
    /// True when address() is a virtual address, false when an offset into the registration.
    bool virtual_addressing() const noexcept { return virt_; }
    /// Where the range starts in the target's virtual memory for a peer on the same host, over
    /// libfabric's shm provider with key() (see domain_config::same_host); 0 when the target's
    /// region is not registered there.
    std::uint64_t same_host_address() const noexcept { return same_host_; }
    /// What the target states about the range's durability.
    remora::persistence persistence() const noexcept { return persist_; }
    /// A copy stating `p` (the target side sets this; see persistent_region::describe).
    /// \return the copy; errc::invalid_argument for unknown bits, or apm or gpspm without
    ///         persistent
    result<remote_region> with_persistence(remora::persistence p) const;

    /// A sub-range of this descriptor; grants nothing beyond it (same key, usages, persistence;
    /// the same-host address, when there is one, moves with the offset).
    /// \param offset from the start of this descriptor's range
    /// \param length bytes
    /// \return the slice; errc::out_of_range when the range is not inside,
    ///         errc::invalid_argument for an empty one
    result<remote_region> slice(std::uint64_t offset, std::uint64_t length) const;
    /// Checks that [offset, offset + length) lies inside and that `need` is granted, as every
    /// operation does before it posts.
    /// \return success; errc::out_of_range outside; errc::access_denied when `need` is not
    ///         granted
    result<void> check(std::uint64_t offset, std::uint64_t length, usage need) const;

    /// The serialised form (version 3, serialized_size bytes: see remote_region), to send to
    /// the peer.
    std::array<std::byte, serialized_size> serialize() const noexcept;
    /// A descriptor from its serialised form, validated (bytes from the wire are untrusted).
    /// \param bytes exactly serialized_size bytes (version 3), or 32 (version 2)
    /// \return the descriptor; errc::malformed_descriptor with a message for anything invalid
    static result<remote_region> parse(std::span<const std::byte> bytes);

    /// Equal when every field is.
    friend bool operator==(const remote_region&, const remote_region&) = default;

  private:
    std::uint64_t address_ = 0;
    std::uint64_t length_ = 0;
    std::uint64_t key_ = 0;
    usage usage_ = usage::none;
    bool virt_ = false;
    remora::persistence persist_ = remora::persistence::none;
    std::uint64_t same_host_ = 0;
};

}  // namespace remora

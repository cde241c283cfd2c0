// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/remote_region.hpp — a value type describing a range of a peer's registered memory.
///
/// Serialised form (version 2, 32 bytes, little-endian):
///   u8 version (=2) | u8 addressing (0 = offset, 1 = virtual address) | u16 usage bits |
///   u64 address | u64 length | u64 key | u8 persistence bits | u8[3] zero
/// parse() validates everything that came over the wire: size, version, addressing, usage bits,
/// persistence bits, reserved bytes, zero length and address + length overflow each give
/// errc::malformed_descriptor with a message.
///
/// Threading: a plain value.
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
    none = 0,
    persistent = 1u << 0,  ///< the memory is durable storage: flushes to persistence are possible
    apm = 1u << 1,         ///< placed writes are durable (declared by the target's operator), so a
                           /// read-after-write flush also persists
    gpspm = 1u << 2,       ///< the target's service persists a range on request (a flush message)
};
template <>
struct enable_flags<persistence> : std::true_type {};
inline constexpr persistence all_persistence = static_cast<persistence>(0x7);

class remote_region {
  public:
    static constexpr std::uint8_t version = 2;
    static constexpr std::size_t serialized_size = 32;
    /// The remote usages a descriptor may carry.
    static constexpr usage remote_usages =
        usage::read_source | usage::write_destination | usage::atomic_target | usage::flush_target;

    remote_region() = default;
    /// Validating constructor for descriptors built by hand.
    static result<remote_region> make(std::uint64_t address, std::uint64_t length,
                                      std::uint64_t key, usage uses, bool virtual_addressing);

    std::uint64_t address() const noexcept { return address_; }
    std::uint64_t length() const noexcept { return length_; }
    std::uint64_t key() const noexcept { return key_; }
    usage usages() const noexcept { return usage_; }
    bool virtual_addressing() const noexcept { return virt_; }
    remora::persistence persistence() const noexcept { return persist_; }
    /// A copy stating `p` (the target side sets this; see persistent_region::describe).
    result<remote_region> with_persistence(remora::persistence p) const;

    /// A sub-range of this descriptor; grants nothing beyond it. errc::out_of_range when the
    /// range is not inside, errc::invalid_argument for an empty one.
    result<remote_region> slice(std::uint64_t offset, std::uint64_t length) const;
    /// Checks that [offset, offset + length) lies inside and that `need` is granted.
    result<void> check(std::uint64_t offset, std::uint64_t length, usage need) const;

    std::array<std::byte, serialized_size> serialize() const noexcept;
    static result<remote_region> parse(std::span<const std::byte> bytes);

    friend bool operator==(const remote_region&, const remote_region&) = default;

  private:
    std::uint64_t address_ = 0;
    std::uint64_t length_ = 0;
    std::uint64_t key_ = 0;
    usage usage_ = usage::none;
    bool virt_ = false;
    remora::persistence persist_ = remora::persistence::none;
};

}  // namespace remora

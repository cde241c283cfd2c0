// remora/remote_region.hpp — a value type describing a range of a peer's registered memory.
//
// Serialised form (version 1, 28 bytes, little-endian):
//   u8 version (=1) | u8 addressing (0 = offset, 1 = virtual address) | u16 usage bits |
//   u64 address | u64 length | u64 key
// parse() validates everything that came over the wire: size, version, addressing, usage bits,
// zero length and address + length overflow each give errc::malformed_descriptor with a message.
//
// Threading: a plain value.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include <remora/memory_region.hpp>
#include <remora/result.hpp>

namespace remora {

class remote_region {
  public:
    static constexpr std::uint8_t version = 1;
    static constexpr std::size_t serialized_size = 28;
    // The remote usages a descriptor may carry.
    static constexpr usage remote_usages =
        usage::read_source | usage::write_destination | usage::atomic_target | usage::flush_target;

    remote_region() = default;
    // Validating constructor for descriptors built by hand.
    [[nodiscard]] static result<remote_region> make(std::uint64_t address, std::uint64_t length,
                                                    std::uint64_t key, usage uses,
                                                    bool virtual_addressing);

    [[nodiscard]] std::uint64_t address() const noexcept { return address_; }
    [[nodiscard]] std::uint64_t length() const noexcept { return length_; }
    [[nodiscard]] std::uint64_t key() const noexcept { return key_; }
    [[nodiscard]] usage usages() const noexcept { return usage_; }
    [[nodiscard]] bool virtual_addressing() const noexcept { return virt_; }

    // A sub-range of this descriptor; grants nothing beyond it.
    [[nodiscard]] result<remote_region> slice(std::uint64_t offset, std::uint64_t length) const;
    // Checks that [offset, offset + length) lies inside and that `need` is granted.
    [[nodiscard]] result<void> check(std::uint64_t offset, std::uint64_t length, usage need) const;

    [[nodiscard]] std::array<std::byte, serialized_size> serialize() const noexcept;
    [[nodiscard]] static result<remote_region> parse(std::span<const std::byte> bytes);

    friend bool operator==(const remote_region&, const remote_region&) = default;

  private:
    std::uint64_t address_ = 0;
    std::uint64_t length_ = 0;
    std::uint64_t key_ = 0;
    usage usage_ = usage::none;
    bool virt_ = false;
};

}  // namespace remora

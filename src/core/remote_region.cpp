// SPDX-License-Identifier: BSD-3-Clause
#include <remora/remote_region.hpp>

#include <limits>
#include <string>

#include "core/little_endian.hpp"

namespace remora {
namespace {

using detail::get_le;
using detail::put_le;

// Version 2: version 3's first 32 bytes, without the same-host address.
constexpr std::uint8_t v2_descriptor_version = 2;
constexpr std::size_t v2_descriptor_size = 32;

std::string range_text(std::uint64_t off, std::uint64_t len) {
    // Appended in order: `"[" + std::to_string(off)` inserts at the front of a temporary, which
    // GCC 12 at -O3 misreads as an overlapping copy (-Wrestrict, GCC bug 105329).
    std::string s = "[";
    s += std::to_string(off);
    s += ", +";
    s += std::to_string(len);
    s += ')';
    return s;
}

}  // namespace

result<remote_region> remote_region::make(std::uint64_t address, std::uint64_t length,
                                          std::uint64_t key, usage uses, bool virtual_addressing,
                                          std::uint64_t same_host_address) {
    if (length == 0) {
        return fail(errc::malformed_descriptor, "remote_region: zero length");
    }
    if (address > std::numeric_limits<std::uint64_t>::max() - length) {
        return fail(errc::malformed_descriptor, "remote_region: address + length overflows");
    }
    if (same_host_address > std::numeric_limits<std::uint64_t>::max() - length) {
        return fail(errc::malformed_descriptor,
                    "remote_region: same-host address + length overflows");
    }
    const auto bits = static_cast<std::uint16_t>(uses);
    if (bits == 0 || (bits & ~static_cast<std::uint16_t>(remote_usages)) != 0) {
        return fail(errc::malformed_descriptor, "remote_region: usage bits 0x" +
                                                    std::to_string(bits) +
                                                    " are empty or not remote usages");
    }
    remote_region r;
    r.address_ = address;
    r.length_ = length;
    r.key_ = key;
    r.usage_ = uses;
    r.virt_ = virtual_addressing;
    r.same_host_ = same_host_address;
    return r;
}

result<void> remote_region::check(std::uint64_t offset, std::uint64_t length, usage need) const {
    if (offset > length_ || length > length_ - offset) {
        return fail(errc::out_of_range, "remote range " + range_text(offset, length) +
                                            " outside descriptor of " + std::to_string(length_) +
                                            " bytes");
    }
    if (!has_all(usage_, need)) {
        return fail(errc::access_denied, "remote region does not grant this access");
    }
    return {};
}

result<remote_region> remote_region::slice(std::uint64_t offset, std::uint64_t length) const {
    if (length == 0) {
        return fail(errc::invalid_argument,
                    "remote_region::slice: an empty slice describes nothing");
    }
    if (auto r = check(offset, length, usage::none); !r) {
        return fail(r.error());
    }
    auto r = make(address_ + offset, length, key_, usage_, virt_,
                  same_host_ != 0 ? same_host_ + offset : 0);
    if (r) {
        r->persist_ = persist_;
    }
    return r;
}

result<remote_region> remote_region::with_persistence(remora::persistence p) const {
    if (any(p & ~all_persistence)) {
        return fail(errc::invalid_argument, "remote_region: unknown persistence bits");
    }
    if (any(p) && !has_all(p, remora::persistence::persistent)) {
        return fail(errc::invalid_argument,
                    "remote_region: apm or gpspm persistence without persistent memory");
    }
    remote_region r = *this;
    r.persist_ = p;
    return r;
}

std::array<std::byte, remote_region::serialized_size> remote_region::serialize() const noexcept {
    std::array<std::byte, serialized_size> out{};
    out[0] = static_cast<std::byte>(version);
    out[1] = static_cast<std::byte>(virt_ ? 1 : 0);
    put_le(&out[2], static_cast<std::uint16_t>(usage_), 2);
    put_le(&out[4], address_, 8);
    put_le(&out[12], length_, 8);
    put_le(&out[20], key_, 8);
    out[28] = static_cast<std::byte>(persist_);
    put_le(&out[32], same_host_, 8);
    return out;
}

result<remote_region> remote_region::parse(std::span<const std::byte> bytes) {
    // The version first: an older descriptor is told as such, not as a truncated one.
    const auto ver = bytes.empty() ? version : static_cast<std::uint8_t>(bytes[0]);
    if (ver != version && ver != v2_descriptor_version) {
        return fail(errc::malformed_descriptor, "descriptor version " + std::to_string(ver) +
                                                    " is not supported (want " +
                                                    std::to_string(version) + ", or " +
                                                    std::to_string(v2_descriptor_version) + ")");
    }
    const std::size_t size = ver == version ? serialized_size : v2_descriptor_size;
    if (bytes.size() < size) {
        return fail(errc::malformed_descriptor,
                    "descriptor truncated: " + std::to_string(bytes.size()) + " of " +
                        std::to_string(size) + " bytes");
    }
    if (bytes.size() > size) {
        return fail(errc::malformed_descriptor,
                    "descriptor oversize: " + std::to_string(bytes.size()) + " bytes for version " +
                        std::to_string(ver) + " (" + std::to_string(size) + ")");
    }
    const auto addressing = static_cast<std::uint8_t>(bytes[1]);
    if (addressing > 1) {
        return fail(errc::malformed_descriptor,
                    "descriptor addressing mode " + std::to_string(addressing) + " is unknown");
    }
    if (bytes[29] != std::byte{0} || bytes[30] != std::byte{0} || bytes[31] != std::byte{0}) {
        return fail(errc::malformed_descriptor, "descriptor reserved bytes are not zero");
    }
    const std::uint64_t same_host = ver == version ? get_le(&bytes[32], 8) : 0;
    auto r = make(get_le(&bytes[4], 8), get_le(&bytes[12], 8), get_le(&bytes[20], 8),
                  static_cast<usage>(get_le(&bytes[2], 2)), addressing == 1, same_host);
    if (!r) {
        return r;
    }
    auto p = r->with_persistence(static_cast<remora::persistence>(bytes[28]));
    if (!p) {
        return fail(errc::malformed_descriptor, "descriptor " + p.error().message());
    }
    return p;
}

}  // namespace remora

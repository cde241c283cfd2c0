// SPDX-License-Identifier: BSD-3-Clause
// src/core/little_endian.hpp — the byte order of everything remora puts on the wire.
#pragma once

#include <cstddef>
#include <cstdint>

namespace remora::detail {

inline void put_le(std::byte* p, std::uint64_t v, int n) noexcept {
    for (int i = 0; i < n; ++i) {
        p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
    }
}

inline std::uint64_t get_le(const std::byte* p, int n) noexcept {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) {
        v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    }
    return v;
}

}  // namespace remora::detail

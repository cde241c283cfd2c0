// SPDX-License-Identifier: BSD-3-Clause
// How twohost_test and twohost_peer pass endpoint addresses and descriptors to each other: as
// lower-case hex text, one line each way (see twohost_peer.cpp).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace remora::twohost {

inline std::string hex(std::span<const std::byte> b) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (std::byte x : b) {
        s += digits[static_cast<unsigned>(x) >> 4];
        s += digits[static_cast<unsigned>(x) & 15];
    }
    return s;
}

// The bytes of `s` (pairs of hex digits; a trailing odd digit is ignored).
inline std::vector<std::byte> unhex(const std::string& s) {
    std::vector<std::byte> b;
    for (std::size_t i = 0; i + 1 < s.size(); i += 2) {
        b.push_back(static_cast<std::byte>(std::stoul(s.substr(i, 2), nullptr, 16)));
    }
    return b;
}

}  // namespace remora::twohost

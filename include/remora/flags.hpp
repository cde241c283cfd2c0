// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/flags.hpp — bit operators for remora's `enum class` flag sets (mr_mode, usage,
/// persistence): `usage::read_source | usage::write_destination`, `has_all(have, want)`.
#pragma once

#include <type_traits>

namespace remora {

/// Specialise to std::true_type to give enumeration `E` the bit operators of this file.
template <class E>
struct enable_flags : std::false_type {};

/// An enumeration whose values are bit flags (enable_flags<E> is true).
template <class E>
concept flag_enum = std::is_enum_v<E> && enable_flags<E>::value;

/// The union of the flags of `a` and `b`.
template <flag_enum E>
constexpr E operator|(E a, E b) noexcept {
    using U = std::underlying_type_t<E>;
    return static_cast<E>(static_cast<U>(a) | static_cast<U>(b));
}
/// The flags set in both `a` and `b`.
template <flag_enum E>
constexpr E operator&(E a, E b) noexcept {
    using U = std::underlying_type_t<E>;
    return static_cast<E>(static_cast<U>(a) & static_cast<U>(b));
}
/// Every bit not set in `a` (combine with & to clear flags).
template <flag_enum E>
constexpr E operator~(E a) noexcept {
    using U = std::underlying_type_t<E>;
    return static_cast<E>(~static_cast<U>(a));
}
/// Adds the flags of `b` to `a`.
template <flag_enum E>
constexpr E& operator|=(E& a, E b) noexcept {
    return a = a | b;
}
/// True when every bit of `want` is set in `have`.
template <flag_enum E>
constexpr bool has_all(E have, E want) noexcept {
    return (have & want) == want;
}
/// True when any flag is set in `v`.
template <flag_enum E>
constexpr bool any(E v) noexcept {
    return static_cast<std::underlying_type_t<E>>(v) != 0;
}

}  // namespace remora

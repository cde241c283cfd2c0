// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/flags.hpp — bit operators for remora's `enum class` flag sets.
#pragma once

#include <type_traits>

namespace remora {

template <class E>
struct enable_flags : std::false_type {};

template <class E>
concept flag_enum = std::is_enum_v<E> && enable_flags<E>::value;

template <flag_enum E>
constexpr E operator|(E a, E b) noexcept {
    using U = std::underlying_type_t<E>;
    return static_cast<E>(static_cast<U>(a) | static_cast<U>(b));
}
template <flag_enum E>
constexpr E operator&(E a, E b) noexcept {
    using U = std::underlying_type_t<E>;
    return static_cast<E>(static_cast<U>(a) & static_cast<U>(b));
}
template <flag_enum E>
constexpr E operator~(E a) noexcept {
    using U = std::underlying_type_t<E>;
    return static_cast<E>(~static_cast<U>(a));
}
template <flag_enum E>
constexpr E& operator|=(E& a, E b) noexcept {
    return a = a | b;
}
/// True when every bit of `want` is set in `have`.
template <flag_enum E>
constexpr bool has_all(E have, E want) noexcept {
    return (have & want) == want;
}
template <flag_enum E>
constexpr bool any(E v) noexcept {
    return static_cast<std::underlying_type_t<E>>(v) != 0;
}

}  // namespace remora

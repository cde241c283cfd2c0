// SPDX-License-Identifier: BSD-3-Clause
// src/base/units.cpp — the base layer's units (include/remora/units.hpp): names of unit kinds and
// of unit counts, for messages. The all-or-nothing reservation itself (detail::unit_budget) is
// header-only: slot_pool holds one by value, op_pool and a shared CQ one each.
#include <remora/units.hpp>

#include <string>

namespace remora {

const char* to_string(unit u) noexcept {
    switch (u) {
        case unit::sq:
            return "sq";
        case unit::cq:
            return "cq";
        case unit::recv:
            return "recv";
        case unit::registration:
            return "registration";
        case unit::buffer:
            return "buffer";
    }
    return "?";
}

std::string to_string(const units& u) {
    std::string s = "{";
    for (std::size_t i = 0; i < unit_kinds; ++i) {
        if (u.n[i] == 0)
            continue;
        if (s.size() > 1)
            s += ", ";
        s += std::string(to_string(static_cast<unit>(i))) + " " + std::to_string(u.n[i]);
    }
    return s + "}";
}

}  // namespace remora

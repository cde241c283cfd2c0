// SPDX-License-Identifier: BSD-3-Clause
// src/base/units.cpp — the base layer's units (include/remora/units.hpp): names of unit kinds and
// of unit counts, for messages; a budget's FIFO of parked posts, and held_units' give-back, which
// wakes it. The all-or-nothing reservation budgets are written with is base/unit_budget.hpp.
#include <remora/units.hpp>

#include "base/budget_access.hpp"

#include <string>

namespace remora {

budget::budget() : gate_(std::make_unique<gate>()) {}
budget::budget(const budget&) : budget() {}
budget::~budget() = default;

void held_units::give_back() noexcept {
    auto from = std::move(from_);
    from_.reset();
    const units back = std::exchange(held_, units{});
    from->give_units(back);
    // As many operations' worth as the most of any kind (a write's {sq 1, cq 1} is one).
    std::uint32_t most = 1;
    for (auto v : back.n) {
        most = v > most ? v : most;
    }
    from->gate_->notify(most);
}

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

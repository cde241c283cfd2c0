// SPDX-License-Identifier: BSD-3-Clause
// src/base/budget_access.hpp — the library's own access to a budget's FIFO of parked posts
// (units.hpp keeps it private: an application implementing a budget never sees it).
#pragma once

#include <remora/units.hpp>
#include "base/park_gate.hpp"

namespace remora {

// The FIFO behind a budget's opaque `gate`.
struct budget::gate : detail::park_gate {};

struct budget_access {
    // Where posts parked on `b` wait: shared by every connection drawing on it.
    static detail::park_gate& gate(const budget& b) noexcept { return *b.gate_; }
};

}  // namespace remora

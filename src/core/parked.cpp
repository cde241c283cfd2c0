// SPDX-License-Identifier: BSD-3-Clause
// src/core/parked.cpp — parked posts: which gate a connection's parked posts wait on, and ending
// them (op_options::park_until; the waiting itself is reserve_parked, connection_impl.hpp, over
// park_gate, src/base/park_gate.hpp).
#include <remora/connection.hpp>

#include "base/budget_access.hpp"
#include "core/impl.hpp"

namespace remora {
namespace detail {

park_gate& parked_gate(connection_impl& c) noexcept {
    // A shared budget's gate: its units come back from every connection drawing on it.
    return c.config.slots ? budget_access::gate(*c.config.slots) : c.own_gate;
}

}  // namespace detail

std::size_t connection::cancel_parked() {
    return detail::parked_gate(*detail::impl_of(*this))
        .wake_owner(detail::impl_of(*this), errc::canceled);
}

std::size_t connection::parked() const {
    return detail::parked_gate(*detail::impl_of(*this)).waiting(detail::impl_of(*this));
}

}  // namespace remora

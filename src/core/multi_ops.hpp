// SPDX-License-Identifier: BSD-3-Clause
// src/core/multi_ops.hpp — what multi_ops.cpp tells outside itself (remora::detail).
#pragma once

#include <cstddef>

namespace remora::detail {

// Multi-key operations (connection::gather_write) whose state is allocated now, on every
// connection: 0 once each has completed or its connection is gone (tests count leaks with it).
std::size_t multi_ops_alive() noexcept;

}  // namespace remora::detail

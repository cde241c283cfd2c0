// SPDX-License-Identifier: BSD-3-Clause
// src/core/multi_ops.hpp — what multi_ops.cpp tells outside itself (remora::detail).
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include <remora/connection.hpp>
#include <remora/units.hpp>

namespace remora::detail {

// Multi-key operations (connection::gather_write, scatter_read) whose state is allocated now, on
// every connection: 0 once each has completed or its connection is gone (tests count leaks with
// it).
std::size_t multi_ops_alive() noexcept;

struct connection_impl;

// connection::gather_write, for the layers above: `extra` units of connection_config::slots are
// taken with the parts' (all or nothing) and given back when the operation completes; `keep` is
// held until then (a registration the slots layer made for the local range).
result<void> gather_write_with(connection_impl& c, std::span<const remote_segment> dst,
                               const memory_region& src, std::size_t src_offset,
                               const op_options& opts, const units& extra,
                               std::shared_ptr<const void> keep);

// connection::scatter_read, for the layers above: `extra` and `keep` as gather_write_with's.
result<void> scatter_read_with(connection_impl& c, std::span<const remote_segment> src,
                               const memory_region& dst, std::size_t dst_offset,
                               const op_options& opts, const units& extra,
                               std::shared_ptr<const void> keep);

}  // namespace remora::detail

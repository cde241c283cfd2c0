// SPDX-License-Identifier: BSD-3-Clause
// src/core/srq_impl.hpp — the state behind shared_receive_queue (remora::detail).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <remora/completion_queue.hpp>

#include <remora/shared_receive_queue.hpp>

#include "core/domain_impl.hpp"
#include "fabric/fabric.hpp"
#include "ops/op_pool.hpp"

struct remora::srq_binding::impl {};

namespace remora::detail {

struct srq_impl;
REMORA_HANDLE_STATE(srq_binding, srq_impl);
REMORA_HANDLE_STATE(shared_receive_queue, srq_impl);

// RDM: the queue's source before any peer is attached (no address vector entry is this).
inline constexpr std::uint64_t srq_no_peer = ~std::uint64_t{1};

struct srq_impl : internal_access::opaque<srq_binding> {
    std::shared_ptr<domain_impl> dom;
    op_pool ops;                 // its receives' records (the receive queue only)
    shared_completion_queue cq;  // where they complete, from whichever connection
    ep_handle srx;               // closed first: the provider then writes into nothing of ours
    std::uint32_t size = 0;
    std::atomic<std::size_t> attached{0};
    ~srq_impl() { srx.reset(); }
};

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/core/upper.hpp — what the endpoint layer offers the layers above it (src/slots,
// src/persist, src/access), in one header:
//  - the one door (door.hpp): door(), door_maybe_quiet(), cancel_op(), and the posting steps
//    before it (check_open, reserve_entries, reserve_parked, post_or_queue, post_internal, the
//    operation builders post_rma / post_send);
//  - extensions (extension.hpp): a layer's state attached to a connection;
//  - the accessors below, so that a layer above names no CQ, endpoint or registration internals.
// A connection's state is reached from the public handle with impl_of(). Besides this
// header those layers include only core/multi_ops.hpp (gather_write_with),
// core/peer_control.hpp (control messages between RDM peers) and core/little_endian.hpp: never
// core/impl.hpp, connection_impl.hpp, cq_impl.hpp, domain_impl.hpp, an ops/ or a fabric/ header
// (scripts/check-layering.sh).
// Threading: as the connection's posts (any thread), unless said otherwise.
#pragma once

#include <functional>
#include <mutex>
#include <utility>

#include <remora/domain.hpp>
#include <remora/memory_region.hpp>

#include "core/door.hpp"
#include "core/extension.hpp"

namespace remora::detail {

// What the connection's provider offers, as the application's domain says (caps()): on a
// same-host connection, the provider it was set up on.
inline const provider_caps& caps_of(const connection_impl& c) noexcept {
    return user_caps(c);
}

// Whether `mr` is registered in the domain of `c`.
inline bool same_domain(const connection_impl& c, const memory_region& mr) noexcept {
    return impl_of(mr) != nullptr && impl_of(mr)->dom.get() == c.region_dom;
}

// The local descriptor of `mr`'s registration: what a post names beside a buffer in it
// (fabric_post::desc).
inline void* local_desc(const memory_region& mr) noexcept {
    return impl_of(mr)->desc;
}

// Whether the endpoint of `c` is still open (close() and the connection's teardown close it):
// a posted operation can be canceled only then.
inline bool endpoint_open(const connection_impl& c) noexcept {
    return static_cast<bool>(c.ep);
}

// Whether `c` is closing for good: close() ran (or runs), or its endpoint is gone. A layer that
// posts its own operations again from its hooks stops at this (close() waits for the hooks that
// run in the CQs' readers, so one that saw it false may still post).
inline bool connection_closing(const connection_impl& c) noexcept {
    return c.closed.load() || !c.ep;
}

// Makes the readers of `c`'s CQs read soon: a progress thread that owns one is woken for it
// (without one, the application's next poll or wait reads). For a completion that the caller
// caused outside a post, such as a cancel's; safe inside a completion hook.
inline void kick_readers(connection_impl& c) {
    for (cq_impl* q : {c.cq.get(), c.rcq.get()}) {
        if (q != nullptr && q->progress_owned()) {
            q->progress->kick(q);
        }
    }
}

// Hooks run when `c` is destroyed: `retire` first, before anything of it is torn down (stop
// using it, and wait for the threads that still do); `destroy` once its endpoint is closed (the
// provider writes into no posted buffer any more). Either may be empty. Any thread.
using teardown_hook = std::function<void(connection_impl&)>;
inline void on_teardown(connection_impl& c, teardown_hook retire, teardown_hook destroy) {
    std::lock_guard lock(c.hooks_mu);
    if (retire) {
        c.on_retire.push_back(std::move(retire));
    }
    if (destroy) {
        c.on_destroy.push_back(std::move(destroy));
    }
}

}  // namespace remora::detail

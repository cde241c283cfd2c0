// SPDX-License-Identifier: BSD-3-Clause
// src/core/door.hpp — the one door: every operation of every layer (the native verbs, multi-key
// writes, persistence's flushes, publishes and atomics, the target service's messages) reaches
// the provider through door(), and a posted operation is canceled through cancel_op().
//
// The caller has reserved the operation (reservation.hpp: its record holds its queue and CQ
// entries and its `done`) and names the work (fabric_post: kind, segments, remote range or word,
// data, operands, flags, the record as context). door() addresses it to the connection's peer,
// posts it through the fabric layer's ep_post(), tries again while an RDM provider sets up the path
// (post_to_peer) and turns the provider's answer into the result, giving the record back when
// the post fails. Threading: as the connection's posts (any thread).
#pragma once

#include "core/connection_impl.hpp"
#include "fabric/endpoint.hpp"

namespace remora::detail {

// Addresses `p` to the connection's peer and posts it (again while an RDM provider sets up the
// path): the provider's value.
[[gnu::always_inline]] inline ssize_t door_post(connection_impl& c, fabric_post& p) {
    p.addr = p.kind == post_kind::recv ? c.recv_from : c.peer;
    return post_to_peer(
        c, [&]() __attribute__((always_inline)) { return ep_post(c.ep.get(), p); });
}

// Posts `p` (its context: a reserved op_record) on `c`. A failure names `what` and the call.
[[gnu::always_inline]] inline result<void> door(connection_impl& c, fabric_post& p,
                                                const char* what) {
    const ssize_t ret = door_post(c, p);
    return submit(c, static_cast<op_record*>(p.context), ret, what, p.kind == post_kind::recv,
                  post_call(p.kind));
}

// door() without the retries while an RDM provider sets up its path to the peer: one try, whose
// -again is errc::would_block (a library-internal probe that tries again later, and must not hold
// up the CQ reader that posts it).
inline result<void> door_once(connection_impl& c, fabric_post& p, const char* what) {
    p.addr = p.kind == post_kind::recv ? c.recv_from : c.peer;
    return submit(c, static_cast<op_record*>(p.context), ep_post(c.ep.get(), p), what,
                  p.kind == post_kind::recv, post_call(p.kind));
}

// Posts a write or send with a completion, or, with selective signalling on and the operation
// eligible (no callback, completion_mode::on_error or at_post, at most the inject size so its
// buffer is free at once, and fewer than signal_every - 1 unsignalled in a row), injected without
// one. at_post always injects.
// A bounce buffer (write_copy, send_copy) is held by the operation's slot until its completion,
// unless the operation is injected: the provider has copied it when the post returns, and it
// goes back to its pool then.
[[gnu::always_inline]] inline result<void> door_maybe_quiet(connection_impl& c, fabric_post& p,
                                                            std::size_t bytes,
                                                            const op_options& opts,
                                                            const char* what, op_holding* bounce) {
    op_record* r = static_cast<op_record*>(p.context);
    const bool at_post = opts.report == completion_mode::at_post;
    if (at_post) {
        p.flags |= post_inject;  // the bytes are the provider's when the post returns
    }
    if (c.config.signal_every <= 1) {
        if (bounce != nullptr && !at_post) {
            r->held.bounce = std::move(*bounce);
        }
        p.flags |= post_completion;
        return door(c, p, what);
    }
    std::lock_guard lock(c.signal_mu);
    const bool quiet = opts.callback == nullptr && opts.report != completion_mode::always &&
                       bytes <= c.dom->caps.inject_size &&
                       c.since_signal + 1 < c.config.signal_every;
    if (bounce != nullptr && !quiet && !at_post) {
        r->held.bounce = std::move(*bounce);
    }
    if (quiet) {
        c.ops.push_quiet(r);
    } else {
        c.ops.mark_signalled(r);
    }
    p.flags = (p.flags & ~post_completion) | (quiet ? post_inject : post_completion);
    const ssize_t ret = door_post(c, p);
    if (ret == 0) {
        c.since_signal = quiet ? c.since_signal + 1 : 0;
    } else if (quiet) {
        c.ops.unpush_quiet(r);
    }
    return submit(c, r, ret, what, false, post_call(p.kind));
}

// A receive on a shared receive context (shared_receive_queue: no connection; its records are
// the queue's own, reserved by the caller). Returns the provider's value.
inline ssize_t door_shared_rx(fid_ep* srx, const fabric_post& p) {
    return ep_post(srx, p);
}

// Asks the provider to cancel the posted operation `r` (it completes with errc::canceled);
// true when the provider found it.
inline bool cancel_op(connection_impl& c, op_record* r) {
    return ep_cancel(c.ep.as_fid(), r) == 0;
}

// Cancels the library-internal receive posted on `c` with `context` (post_internal); true when
// the provider found it (its hook then sees errc::canceled). Allocates nothing. The caller keeps
// the endpoint open meanwhile (a completion hook, or a thread that does not race close()).
inline bool cancel_internal_recv(connection_impl& c, const void* context) {
    op_record* r = c.ops.posted_recv_of(context);
    return r != nullptr && cancel_op(c, r);
}

}  // namespace remora::detail

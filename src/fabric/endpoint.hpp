// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/endpoint.hpp — endpoints: open, bind, enable; connection management (connect,
// accept, reject, shutdown, passive endpoints); cancel; and the posts (messages, RMA, atomics).
//
// The posts are inline (the data path) and build their fi_msg* struct here, once. Above this
// layer only ep_post() (at the end) is called: the ep_* posts are its cases. They take
// iovecs, descriptors, the remote range, the context (remora's op_record) and the flags
// (FI_COMPLETION, FI_INJECT, FI_MORE, FI_REMOTE_CQ_DATA), and the peer's fi_addr_t: on an RDM
// endpoint the address vector's entry for the peer (FI_ADDR_UNSPEC for a receive from anyone), on
// a connected (MSG) endpoint ignored by libfabric (remora passes 0). With nothing armed at the seam
// (fault.hpp) a post costs one relaxed atomic load beyond libfabric's own call.
//
// Every function returns libfabric's value (0 or a negative -FI_* code, -FI_EAGAIN when a queue
// is full) or the code armed for it. Threading: as libfabric's calls on the same endpoint.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "fabric/fabric.hpp"

namespace remora::detail {

int open_endpoint(fid_domain* domain, fi_info* info, ep_handle& out);
// fi_srx_context: a shared receive context of `size` receives of one segment each, every one
// completing (receives posted to it serve every endpoint bound to it), with `info`'s other
// receive attributes. Injected as fabric_call::endpoint.
int open_srx(fid_domain* domain, const fi_info* info, std::size_t size, ep_handle& out);

// What a CQ, a counter or a shared receive context is bound to an endpoint for (ep_bind's flags;
// libfabric's bits: a CQ or an EQ binds with none).
using bind_flags = std::uint64_t;
inline constexpr bind_flags bind_transmit = FI_TRANSMIT;  // completions of sends, RMA, atomics
inline constexpr bind_flags bind_recv = FI_RECV;          // completions of receives
// Only operations posted with post_completion leave an entry.
inline constexpr bind_flags bind_selective_completion = FI_SELECTIVE_COMPLETION;
inline constexpr bind_flags bind_remote_read = FI_REMOTE_READ;    // a counter: peers' reads
inline constexpr bind_flags bind_remote_write = FI_REMOTE_WRITE;  // a counter: peers' writes
int ep_bind(fid_ep* ep, fid* f, bind_flags flags);
int ep_enable(fid_ep* ep);
// Connects to the peer `info` names (its destination address).
int ep_connect(fid_ep* ep, const fi_info* info, const void* data, std::size_t len);
int ep_accept(fid_ep* ep, const void* data, std::size_t len);
int ep_shutdown(fid_ep* ep);
// Cancels the operation posted with `context` (it completes with FI_ECANCELED); 0 if found.
ssize_t ep_cancel(fid* ep, void* context);

int open_passive_ep(fid_fabric* fabric, fi_info* info, pep_handle& out);
int pep_bind(fid_pep* pep, fid* eq);
int pep_listen(fid_pep* pep);
// Rejects the connection request `request` (the info its event carried).
int pep_reject(fid_pep* pep, const fi_info* request, const void* data, std::size_t len);
// The bound address of an endpoint or a passive endpoint.
int getname(fid* f, void* addr, std::size_t* len);

// The remote side of an RMA: address (or offset), length and key.
struct remote_iov {
    std::uint64_t addr;
    std::size_t len;
    std::uint64_t key;
};

// One message over local `iov` (send or receive).
inline fi_msg msg_message(const iovec* iov, void** desc, std::size_t count, fi_addr_t addr,
                          void* context, std::uint64_t data) {
    fi_msg msg{};
    msg.addr = addr;
    msg.msg_iov = iov;
    msg.desc = desc;
    msg.iov_count = count;
    msg.context = context;
    msg.data = data;
    return msg;
}

[[gnu::always_inline]] inline ssize_t ep_send(fid_ep* ep, fi_addr_t dest, const iovec* iov,
                                              void** desc, std::size_t count, std::uint64_t data,
                                              void* context, std::uint64_t flags) {
    if (int r = injected(fabric_call::post_send)) {
        return r;
    }
    const fi_msg msg = msg_message(iov, desc, count, dest, context, data);
    return fi_sendmsg(ep, &msg, flags);
}

[[gnu::always_inline]] inline ssize_t ep_recv(fid_ep* ep, fi_addr_t src, const iovec* iov,
                                              void** desc, std::size_t count, void* context,
                                              std::uint64_t flags) {
    if (int r = injected(fabric_call::post_recv)) {
        return r;
    }
    const fi_msg msg = msg_message(iov, desc, count, src, context, 0);
    return fi_recvmsg(ep, &msg, flags);
}

// One RMA message over local `iov` and one remote range (`rma` must outlive the post call).
inline fi_msg_rma rma_message(const iovec* iov, void** desc, std::size_t count, fi_addr_t addr,
                              const fi_rma_iov& rma, void* context, std::uint64_t data) {
    fi_msg_rma msg{};
    msg.addr = addr;
    msg.msg_iov = iov;
    msg.desc = desc;
    msg.iov_count = count;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = context;
    msg.data = data;
    return msg;
}

[[gnu::always_inline]] inline ssize_t ep_write(fid_ep* ep, fi_addr_t dest, const iovec* iov,
                                               void** desc, std::size_t count, remote_iov remote,
                                               std::uint64_t data, void* context,
                                               std::uint64_t flags) {
    if (int r = injected(fabric_call::post_write)) {
        return r;
    }
    const fi_rma_iov rma{remote.addr, remote.len, remote.key};
    const fi_msg_rma msg = rma_message(iov, desc, count, dest, rma, context, data);
    return fi_writemsg(ep, &msg, flags);
}

[[gnu::always_inline]] inline ssize_t ep_read(fid_ep* ep, fi_addr_t dest, const iovec* iov,
                                              void** desc, std::size_t count, remote_iov remote,
                                              void* context, std::uint64_t flags) {
    if (int r = injected(fabric_call::post_read)) {
        return r;
    }
    const fi_rma_iov rma{remote.addr, remote.len, remote.key};
    const fi_msg_rma msg = rma_message(iov, desc, count, dest, rma, context, 0);
    return fi_readmsg(ep, &msg, flags);
}

// 64-bit atomics on one remote word at `addr` (`key`). The operands (and the result buffer) must
// stay valid until the completion.
namespace atomic_detail {
inline fi_msg_atomic message(fi_ioc& ioc, fi_addr_t addr, fi_rma_ioc& rma, fi_op op,
                             void* context) {
    fi_msg_atomic msg{};
    msg.addr = addr;
    msg.msg_iov = &ioc;
    msg.iov_count = 1;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.datatype = FI_UINT64;
    msg.op = op;
    msg.context = context;
    return msg;
}
}  // namespace atomic_detail

inline ssize_t ep_atomic(fid_ep* ep, fi_addr_t dest, fi_op op, std::uint64_t* operand,
                         std::uint64_t addr, std::uint64_t key, void* context,
                         std::uint64_t flags) {
    if (int r = injected(fabric_call::post_atomic)) {
        return r;
    }
    fi_ioc ioc{operand, 1};
    fi_rma_ioc rma{addr, 1, key};
    const fi_msg_atomic msg = atomic_detail::message(ioc, dest, rma, op, context);
    return fi_atomicmsg(ep, &msg, flags);
}

inline ssize_t ep_fetch_atomic(fid_ep* ep, fi_addr_t dest, fi_op op, std::uint64_t* operand,
                               void* result, void* result_desc, std::uint64_t addr,
                               std::uint64_t key, void* context, std::uint64_t flags) {
    if (int r = injected(fabric_call::post_fetch_atomic)) {
        return r;
    }
    fi_ioc ioc{operand, 1};
    fi_rma_ioc rma{addr, 1, key};
    const fi_msg_atomic msg = atomic_detail::message(ioc, dest, rma, op, context);
    fi_ioc out{result, 1};
    return fi_fetch_atomicmsg(ep, &msg, &out, &result_desc, 1, flags);
}

// FI_CSWAP: `swap` replaces the word when it equals `compare`; the old value goes to `result`.
inline ssize_t ep_compare_atomic(fid_ep* ep, fi_addr_t dest, std::uint64_t* swap,
                                 std::uint64_t* compare, void* result, void* result_desc,
                                 std::uint64_t addr, std::uint64_t key, void* context,
                                 std::uint64_t flags) {
    if (int r = injected(fabric_call::post_compare_atomic)) {
        return r;
    }
    fi_ioc ioc{swap, 1};
    fi_rma_ioc rma{addr, 1, key};
    const fi_msg_atomic msg = atomic_detail::message(ioc, dest, rma, FI_CSWAP, context);
    fi_ioc cmp{compare, 1};
    void* cmp_desc = nullptr;
    fi_ioc out{result, 1};
    return fi_compare_atomicmsg(ep, &msg, &cmp, &cmp_desc, 1, &out, &result_desc, 1, flags);
}

// ---- the one post ----------------------------------------------------------------------------
// Every operation of every layer reaches the provider through ep_post(): the work names its kind,
// its local segments, the remote range or word, immediate data, operands and flags, and its context
// (the op_record whose `done` its completion runs). Layers above say which flags in remora's words
// (post_flags); they are libfabric's bits underneath, so nothing is translated on the data path.

enum class post_kind : std::uint8_t {
    send,
    recv,
    write,
    read,
    atomic_write,
    fetch_add,
    compare_swap
};

using post_flags = std::uint64_t;
inline constexpr post_flags post_completion = FI_COMPLETION;       // a completion entry is wanted
inline constexpr post_flags post_inject = FI_INJECT;               // the data is copied at the post
inline constexpr post_flags post_more = FI_MORE;                   // more posts follow at once
inline constexpr post_flags post_remote_data = FI_REMOTE_CQ_DATA;  // `data` goes to the peer's CQ
inline constexpr post_flags post_delivered =
    FI_DELIVERY_COMPLETE;  // completes once applied at the peer

struct fabric_post {
    post_kind kind = post_kind::send;
    post_flags flags = post_completion;
    // The peer: on an RDM endpoint its address-vector entry (a receive: the sender it takes, or
    // fabric_addr_unspec); on a connected endpoint ignored (0).
    fabric_addr addr = 0;
    const iovec* iov = nullptr;  // local segments: sends, receives, RMA
    void** desc = nullptr;
    std::size_t count = 0;
    remote_iov remote{};                // RMA: the remote range; atomics: the word (len 1)
    std::uint64_t data = 0;             // immediate data, with post_remote_data
    std::uint64_t* operands = nullptr;  // atomics: [0] operand or swap value, [1] compare value
    void* result = nullptr;             // fetch_add, compare_swap: where the old value goes
    void* result_desc = nullptr;
    void* context = nullptr;  // the op_record
};

// The seam's name for a post of `kind` (fault.hpp).
constexpr fabric_call post_call(post_kind kind) noexcept {
    switch (kind) {
        case post_kind::send:
            return fabric_call::post_send;
        case post_kind::recv:
            return fabric_call::post_recv;
        case post_kind::write:
            return fabric_call::post_write;
        case post_kind::read:
            return fabric_call::post_read;
        case post_kind::atomic_write:
            return fabric_call::post_atomic;
        case post_kind::fetch_add:
            return fabric_call::post_fetch_atomic;
        case post_kind::compare_swap:
            break;
    }
    return fabric_call::post_compare_atomic;
}

[[gnu::always_inline]] inline ssize_t ep_post_direct(fid_ep* ep, const fabric_post& p) {
    switch (p.kind) {
        case post_kind::send:
            return ep_send(ep, p.addr, p.iov, p.desc, p.count, p.data, p.context, p.flags);
        case post_kind::recv:
            return ep_recv(ep, p.addr, p.iov, p.desc, p.count, p.context, p.flags);
        case post_kind::write:
            return ep_write(ep, p.addr, p.iov, p.desc, p.count, p.remote, p.data, p.context,
                            p.flags);
        case post_kind::read:
            return ep_read(ep, p.addr, p.iov, p.desc, p.count, p.remote, p.context, p.flags);
        case post_kind::atomic_write:
            return ep_atomic(ep, p.addr, FI_ATOMIC_WRITE, p.operands, p.remote.addr, p.remote.key,
                             p.context, p.flags);
        case post_kind::fetch_add:
            return ep_fetch_atomic(ep, p.addr, FI_SUM, p.operands, p.result, p.result_desc,
                                   p.remote.addr, p.remote.key, p.context, p.flags);
        case post_kind::compare_swap:
            break;
    }
    return ep_compare_atomic(ep, p.addr, p.operands, p.operands + 1, p.result, p.result_desc,
                             p.remote.addr, p.remote.key, p.context, p.flags);
}

// The post under verbs rules (rules.hpp): checked, its descriptors translated, then posted with
// ep_post_direct(); a broken rule returns -FI_EINVAL without posting.
ssize_t rules_post(fid_ep* ep, const fabric_post& p);

// The one post: ep_post_direct(), or rules_post() while a domain under verbs rules is open.
[[gnu::always_inline]] inline ssize_t ep_post(fid_ep* ep, const fabric_post& p) {
    if (fabric_rules::on()) [[unlikely]] {
        return rules_post(ep, p);
    }
    return ep_post_direct(ep, p);
}

}  // namespace remora::detail

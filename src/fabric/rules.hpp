// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/rules.hpp — verbs-rules mode: a domain enrolled here (domain_config::rules, or
// REMORA_RULES=verbs) is held at the fabric seam to what libfabric's verbs provider demands, on
// whatever provider it runs (tcp, sockets, shm, tcp;ofi_rxm), so code that would fail on a real
// NIC fails here too:
//
//   - every local segment of a post carries the descriptor of a live registration of the
//     endpoint's own domain that covers the whole segment; a segment the provider writes into
//     (a receive, a read's destination, a fetching atomic's result) is registered for local
//     writes (usage::receive or read_destination);
//   - the provider chooses the keys: a registration asking for a key of its own fails, and the
//     key is drawn here, as a provider would (32 bits, as verbs' rkeys);
//   - at most verbs_limits.iov_limit local segments, one remote segment per RMA (fabric_post
//     carries one), at most verbs_limits.max_msg_size bytes, at most verbs_limits.inject_size
//     bytes injected, at most verbs_limits.cq_data_size bytes of immediate data, remote keys of
//     32 bits, atomics on 8-byte aligned remote words;
//   - every post names a context (the provider may use all of fi_context2's bytes from the post
//     to the completion: the mode scribbles over them at each post);
//   - connection private data of at most verbs_limits.cm_data_size bytes (connect, accept);
//   - a peer's write with immediate data takes a posted receive (FI_RX_CQ_DATA), and one or a
//     message that finds none fails its completion: counted by the core's CQs, which see the
//     connection behind an entry (core/cq_read.hpp, rx_rule), and reported here (report()).
//
// A post or registration that breaks a rule returns -FI_EINVAL without reaching the provider;
// the message saying which rule is attached to the error fabric_error() builds on the same thread
// and logged at log_level::error (without a log function, the first ones are printed on stderr).
// Registrations of an enrolled domain hand out a descriptor of the mode's own (the entry it
// checks), translated back to the provider's at the post. What the mode cannot emulate:
// docs/providers.md, "verbs rules".
//
// Cost when no enrolled domain is open: one relaxed load and a predictable branch in ep_post,
// mr_reg, mr_desc, connect, accept and each close. Threading: any thread (a shared mutex guards
// the registry).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

struct fid;
struct fid_domain;

namespace remora::detail {

// libfabric's verbs provider on an NVIDIA/Mellanox ConnectX (mlx5) NIC, as fi_info -p verbs
// reports it with libfabric 1.17's defaults. Sources:
//   iov_limit, rx_iov_limit  prov/verbs/src/verbs_init.c: def_tx_iov_limit, def_rx_iov_limit = 4
//                            (FI_VERBS_TX_IOV_LIMIT, FI_VERBS_RX_IOV_LIMIT; mlx5 allows 30)
//   inject_size              verbs_init.c: def_inline_size = 256 (FI_VERBS_INLINE_SIZE), which
//                            vrb_getinfo caps inject_size at; mlx5 grants it (max_inline_data)
//   rma_iov_limit            verbs_info.c: rma_iov_limit = 1
//   cq_data_size             verbs_info.c: cq_data_size = sizeof(uint32_t) (a WR's imm_data)
//   cm_data_size             verbs_ofi.h: VERBS_CM_DATA_SIZE = 56 (rdma_cm's private data in an
//                            InfiniBand connect request) - 1 (libfabric's own header byte)
//   max_msg_size             mlx5's port attribute max_msg_sz, 2^30 bytes
//   mr_key_size              verbs_info.c: mr_key_size = sizeof(uint32_t) (an rkey)
//   tx_size, rx_size         verbs_init.c: def_tx_size, def_rx_size = 384 (FI_VERBS_TX_SIZE,
//                            FI_VERBS_RX_SIZE): reported, not enforced (remora asks for the
//                            sizes it uses and a NIC grants up to max_qp_wr, 32768 on mlx5)
struct verbs_profile {
    std::size_t iov_limit;
    std::size_t rx_iov_limit;
    std::size_t inject_size;
    std::size_t rma_iov_limit;
    std::size_t cq_data_size;
    std::size_t cm_data_size;
    std::size_t max_msg_size;
    std::size_t mr_key_size;
    std::size_t tx_size;
    std::size_t rx_size;
};
inline constexpr verbs_profile verbs_limits{
    .iov_limit = 4,
    .rx_iov_limit = 4,
    .inject_size = 256,
    .rma_iov_limit = 1,
    .cq_data_size = 4,
    .cm_data_size = 55,
    .max_msg_size = std::size_t{1} << 30,
    .mr_key_size = 4,
    .tx_size = 384,
    .rx_size = 384,
};

namespace fabric_rules {

// How many enrolled domains are open: the seam checks only while one is.
inline std::atomic<unsigned> enrolled{0};
inline bool on() noexcept {
    return enrolled.load(std::memory_order_relaxed) != 0;
}
// Holds `domain` (just opened) and everything opened on it to the verbs rules.
void enroll(fid_domain* domain);
// `ep` (an endpoint or shared receive context) was opened on `domain`: enrolled if it is.
void endpoint_opened(const fid_domain* domain, const fid* ep);
// 0, or -FI_EINVAL when `ep` is enrolled and `len` bytes of private data break the limit (`call`
// names the call for the message).
int check_cm_data(const fid* ep, std::size_t len, const char* call);
// `f` is closed: the registry lets go of it (a domain: with its endpoints and registrations).
void forget(const fid* f) noexcept;
// A rule broken where only the layer above can see it (a receive a peer's write with immediate
// data would have consumed, core/cq_impl.cpp): counted and logged as the seam's own violations.
void report(const std::string& what);
// How many posts, registrations, connection calls and completions broke a rule since the process
// started.
unsigned long violations() noexcept;
// This thread's last violation message, cleared ("" when none).
std::string take_message();

}  // namespace fabric_rules
}  // namespace remora::detail

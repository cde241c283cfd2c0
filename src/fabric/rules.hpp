// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/rules.hpp — provider-rules mode: a domain enrolled here (domain_config::rules, or
// REMORA_RULES=verbs or efa) is held at the fabric seam to what a profile of a real NIC's provider
// demands (verbs_limits, efa_limits below), on whatever provider it runs (tcp, sockets, shm,
// tcp;ofi_rxm), so code that would fail on a real NIC fails here too:
//
//   - every local segment of a post carries the descriptor of a live registration of the
//     endpoint's own domain that covers the whole segment; a segment the provider writes into
//     (a receive, a read's destination, a fetching atomic's result) is registered for local
//     writes (usage::receive or read_destination);
//   - the provider chooses the keys: a registration asking for a key of its own fails, and the
//     key is drawn here, as a provider would (32 bits, as verbs' rkeys and efa's keys);
//   - at most iov_limit local segments, one remote segment per RMA (fabric_post carries one), at
//     most max_msg_size bytes, at most inject_size bytes injected, at most cq_data_size bytes of
//     immediate data, remote keys of mr_key_size bytes, and (aligned_atomics) atomics on 8-byte
//     aligned remote words;
//   - every post names a context (the provider may use all of fi_context2's bytes from the post
//     to the completion: the mode scribbles over them at each post);
//   - connection private data of at most cm_data_size bytes (connect, accept); a profile without
//     MSG endpoints (msg_endpoints) refuses a MSG domain when it opens (core/domain.cpp);
//   - (rx_cq_data) a peer's write with immediate data takes a posted receive (FI_RX_CQ_DATA),
//     and one or a message that finds none fails its completion: counted by the core's CQs,
//     which see the connection behind an entry (core/cq_read.hpp, rx_rule), and reported here
//     (report()).
//
// A post or registration that breaks a rule returns -FI_EINVAL without reaching the provider;
// the message saying which rule ("verbs rules: ..." or "efa rules: ...") is attached to the error
// fabric_error() builds on the same thread and logged at log_level::error (without a log
// function, the first ones are printed on stderr). Registrations of an enrolled domain hand out a
// descriptor of the mode's own (the entry it checks), translated back to the provider's at the
// post. What the mode cannot emulate: docs/providers.md, "verbs rules".
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

// A provider's demands, as its fi_info reports them with libfabric 1.17's defaults.
struct rules_profile {
    const char* name;  // "verbs" or "efa": names the rules in each message
    std::size_t iov_limit;
    std::size_t rx_iov_limit;
    std::size_t inject_size;
    std::size_t rma_iov_limit;
    std::size_t cq_data_size;
    std::size_t cm_data_size;  // private data on connect and accept (MSG endpoints only)
    std::size_t max_msg_size;
    std::size_t mr_key_size;
    std::size_t tx_size;  // reported, not enforced (0: the device's)
    std::size_t rx_size;
    bool msg_endpoints;    // offers FI_EP_MSG: without, a MSG domain is refused at open
    bool aligned_atomics;  // atomics only on 8-byte aligned remote words (the NIC performs them)
    bool rx_cq_data;       // a write with immediate data consumes a posted receive (FI_RX_CQ_DATA)
};

// libfabric's verbs provider on an NVIDIA/Mellanox ConnectX (mlx5) NIC. Sources:
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
//   aligned_atomics          IB atomics act on naturally aligned 8-byte words (the HCA's)
//   rx_cq_data               verbs_info.c: VERBS_RX_MODE = FI_RX_CQ_DATA (an RDMA write with
//                            immediate consumes a receive WR at the target)
inline constexpr rules_profile verbs_limits{
    .name = "verbs",
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
    .msg_endpoints = true,
    .aligned_atomics = true,
    .rx_cq_data = true,
};

// libfabric's efa provider (Amazon EFA), its RDM endpoint (the rxr protocol over SRD), the only
// one remora can use: efa offers FI_EP_RDM and FI_EP_DGRAM, no FI_EP_MSG (fi_efa(7)). Sources in
// libfabric 1.17's prov/efa/src:
//   iov_limit, rx_iov_limit  efa_prov_info.c (efa_prov_info_alloc_for_rxr): RXR_IOV_LIMIT = 4
//                            (rxr/rxr_op_entry.h; FI_EFA_TX_IOV_LIMIT, FI_EFA_RX_IOV_LIMIT)
//   inject_size              efa_prov_info_alloc_for_rxr: min(the device's max_msg_sz, 4096 =
//                            FI_EFA_SHM_MAX_MEDIUM_SIZE's default, shm transfer being on by
//                            default) - rxr_pkt_max_hdr_size(), the longest request header:
//                            a runt-read RTW's 40 bytes + the raw address option's 40 + the CQ
//                            data option's 8 + 4 efa_rma_iov of 24 = 184, so 3912
//   rma_iov_limit            efa_prov_info.c: efa_rdm_tx_attr.rma_iov_limit = 1
//   cq_data_size             efa_prov_info_alloc_for_rxr: RXR_CQ_DATA_SIZE = 8 (rxr/rxr.h: the
//                            data travels in the packet header, not in a work request)
//   cm_data_size             none: no MSG endpoint (msg_endpoints false)
//   max_msg_size             efa_prov_info_alloc_for_rxr: UINT64_MAX (rxr segments messages;
//                            fi_efa(7): "does not have a maximum message size")
//   mr_key_size              efa_prov_info.c: sizeof_field(struct ibv_sge, lkey) = 4
//   tx_size, rx_size         the device's max_sq_wr and max_rq_wr (FI_EFA_TX_SIZE, FI_EFA_RX_SIZE)
//   aligned_atomics          no: rxr emulates atomics in software at the target (rxr_atomic.c)
//   rx_cq_data               no: efa_prov_info.c: EFA_RX_MODE = 0; rxr hands a write's CQ data
//                            to an rx entry of its own (rxr_pkt_alloc_rtw_rx_entry), no
//                            application receive
//   mr_mode                  efa_domain_attr: OFI_MR_BASIC_MAP (FI_MR_VIRT_ADDR, FI_MR_ALLOCATED,
//                            FI_MR_PROV_KEY) | FI_MR_LOCAL; the RDM endpoint clears FI_MR_LOCAL
//                            but honours descriptors an application passes (fi_efa(7)), and
//                            the mode keeps requiring them, as efa's device endpoints do
//   contexts                 efa 1.17's RDM endpoint asks for no FI_CONTEXT mode; later
//                            versions' efa-direct and DGRAM paths ask for FI_CONTEXT2, which the
//                            mode's context rule (shared with verbs) already holds posts to
inline constexpr rules_profile efa_limits{
    .name = "efa",
    .iov_limit = 4,
    .rx_iov_limit = 4,
    .inject_size = 4096 - 184,
    .rma_iov_limit = 1,
    .cq_data_size = 8,
    .cm_data_size = 0,
    .max_msg_size = static_cast<std::size_t>(-1),
    .mr_key_size = 4,
    .tx_size = 0,
    .rx_size = 0,
    .msg_endpoints = false,
    .aligned_atomics = false,
    .rx_cq_data = false,
};

// The most local segments any profile takes (the seam's scratch array).
inline constexpr std::size_t rules_max_iov = 4;
static_assert(verbs_limits.iov_limit <= rules_max_iov &&
              verbs_limits.rx_iov_limit <= rules_max_iov && efa_limits.iov_limit <= rules_max_iov &&
              efa_limits.rx_iov_limit <= rules_max_iov);

namespace fabric_rules {

// How many enrolled domains are open: the seam checks only while one is.
inline std::atomic<unsigned> enrolled{0};
inline bool on() noexcept {
    return enrolled.load(std::memory_order_relaxed) != 0;
}
// Holds `domain` (just opened) and everything opened on it to `profile`'s rules.
void enroll(fid_domain* domain, const rules_profile& profile);
// `ep` (an endpoint or shared receive context) was opened on `domain`: enrolled if it is.
void endpoint_opened(const fid_domain* domain, const fid* ep);
// 0, or -FI_EINVAL when `ep` is enrolled and `len` bytes of private data break the limit (`call`
// names the call for the message).
int check_cm_data(const fid* ep, std::size_t len, const char* call);
// `f` is closed: the registry lets go of it (a domain: with its endpoints and registrations).
void forget(const fid* f) noexcept;
// A rule of `profile` broken where only the layer above can see it (a receive a peer's write with
// immediate data would have consumed, core/cq_wait.cpp): counted and logged as the seam's own
// violations.
void report(const rules_profile& profile, const std::string& what);
// How many posts, registrations, connection calls and completions broke a rule since the process
// started.
unsigned long violations() noexcept;
// This thread's last violation message, cleared ("" when none).
std::string take_message();

}  // namespace fabric_rules
}  // namespace remora::detail

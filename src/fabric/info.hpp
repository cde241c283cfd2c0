// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/info.hpp — providers and their fabric and domain objects: fi_getinfo, fi_fabric,
// fi_domain, and the passive-endpoint option query the domain makes at open.
//
// Every function returns libfabric's code (0 or a negative -FI_* value), or the code armed for it
// at the failure-injection seam (fault.hpp). Threading: as libfabric's calls (FI_THREAD_SAFE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fabric/fabric.hpp"

namespace remora::detail {

// The endpoint types remora opens (libfabric's FI_EP_MSG and FI_EP_RDM).
enum class fabric_endpoint : std::uint8_t { msg, rdm };
// A provider's progress model for control or data operations.
enum class fabric_progress : std::uint8_t { unspecified, automatic, manual };

// What remora asks of a provider beyond messages, RMA and the memory-registration modes it can
// honour (local, virt_addr, allocated, prov_key) on FI_THREAD_SAFE domains.
struct provider_wants {
    bool source = false;            // each received message's source (FI_SOURCE)
    bool directed_receive = false;  // receives that take one sender's messages (FI_DIRECTED_RECV)
    bool atomics = false;           // native atomics (FI_ATOMIC)
    bool rma_events = false;        // counters of the peers' reads and writes (FI_RMA_EVENT)
};

// How a provider wants memory registered (its mr_mode bits).
struct mr_needs {
    bool local = false;      // local buffers too
    bool virt_addr = false;  // remote addresses are virtual addresses, else offsets
    bool allocated = false;  // only backed memory
    bool prov_key = false;   // the provider picks the keys
    bool endpoint = false;   // registrations are bound to an endpoint
    bool raw = false;        // keys may not fit 64 bits
};

// What a provider's description says it offers, in remora's words.
struct provider_offer {
    std::string provider;  // "tcp", "verbs;ofi_rxm", ...
    std::string fabric;    // the fabric's name
    std::string nic;       // the domain's name
    fabric_endpoint endpoint = fabric_endpoint::msg;
    provider_wants caps;  // which of remora's optional asks it grants
    bool rma_pmem = false;
    bool rx_cq_data = false;  // immediate data consumes a posted receive
    bool shared_rx = false;   // shared receive contexts are available
    mr_needs mr;
    fabric_progress control_progress = fabric_progress::unspecified;
    fabric_progress data_progress = fabric_progress::unspecified;
    std::size_t inject_size = 0;
    std::size_t max_msg_size = 0;
    std::size_t tx_size = 0;
    std::size_t rx_size = 0;
    std::size_t iov_limit = 0;  // of sends and receives both
    std::size_t rma_iov_limit = 0;
    std::size_t cq_data_size = 0;
    std::size_t mr_key_size = 0;
    std::uint32_t addr_format = 0;  // for address_plausible (av.hpp)
};
provider_offer describe(const fi_info* info);

// The provider to open a domain on: `provider` (empty: the best ranked, hardware first) offering
// `type` endpoints with `wants` on `node`. A failure whose code is errc::not_supported or
// fabric_errno::no_data means that none offers it.
result<info_ptr> pick_provider(const std::string& provider, const std::string& node,
                               provider_wants wants, fabric_endpoint type);
// The providers that offer `type` endpoints with remora's base capabilities on any local
// address, each named once in libfabric's order (for connected endpoints, core providers only).
// Empty when none does or fi_getinfo fails.
std::vector<std::string> provider_names(fabric_endpoint type);
// fi_getinfo hints for the endpoints of a domain opened on `chosen`: the same provider, NIC and
// capabilities. Empty when out of memory.
info_ptr endpoint_hints(const fi_info* chosen);

// The description an endpoint opens with: a copy of `request` (a client's getinfo answer, a
// connection request, or the domain's own for RDM) with the queue sizes given and, with
// `shared_rx`, a shared receive context. A request fi_dupinfo cannot copy (sockets' connection
// requests) is replaced by `domain_info` carrying the request's handle. Empty when out of memory.
struct endpoint_sizes {
    std::size_t tx = 0;
    std::size_t rx = 0;
    std::size_t max_sge = 0;
    bool shared_rx = false;
};
info_ptr endpoint_info(const fi_info* request, const fi_info* domain_info,
                       const endpoint_sizes& sizes);

// getinfo's flags: none, or getinfo_source (node and service name the local side: a listener).
inline constexpr std::uint64_t getinfo_source = FI_SOURCE;
// fi_getinfo at API version 1.17; on success `out` owns the list. The first call starts routing
// libfabric's own log lines to the application's log function (route_provider_log).
int getinfo(const char* node, const char* service, std::uint64_t flags, const fi_info* hints,
            info_ptr& out);
// From now on, libfabric's own log lines reach the log function while one is set
// (log_import.cpp); idempotent.
void route_provider_log() noexcept;
// The fabric and the domain `info` names.
int open_fabric(fi_info* info, fabric_handle& out);
int open_domain(fid_fabric* fabric, fi_info* info, domain_handle& out);
// The provider's private-data limit for connection requests (FI_OPT_CM_DATA_SIZE of a passive
// endpoint opened on `info`), if it tells.
std::optional<std::size_t> cm_data_size(fid_fabric* fabric, fi_info* info);
// Whether the domain runs remora's three native atomics on 64-bit words (fi_query_atomic of
// FI_ATOMIC_WRITE, fetching FI_SUM and comparing FI_CSWAP): a provider may list FI_ATOMIC and
// still refuse some of them (net).
bool has_word_atomics(fid_domain* domain);
// Replaces `info`'s source address by the string `name` (FI_ADDR_STR providers: shm names an
// endpoint after its source address, and two processes using the same one collide).
void set_source_name(fi_info* info, const char* name) noexcept;
// The connection request `info` (from getinfo for a host and port) goes to an address of this
// host in this network namespace: loopback, or an address one of its interfaces has.
bool destination_is_local(const fi_info* info) noexcept;
// A connection request (`request`: its dest_addr is the client's address) comes from a TCP socket
// of this host (this network namespace) owned by this process's user (its entry in
// /proc/net/tcp or tcp6). False when that cannot be told.
bool request_from_this_user(const fi_info* request) noexcept;

}  // namespace remora::detail

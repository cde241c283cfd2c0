// SPDX-License-Identifier: BSD-3-Clause
#include "fabric/info.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fabric/endpoint.hpp"

namespace remora::detail {

namespace {

constexpr std::uint64_t base_caps =
    FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
// The mr_mode bits remora can honour. FI_MR_ENDPOINT is not offered yet: every provider remora
// targets (verbs, tcp, sockets, shm) works without it.
constexpr int supported_mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

std::uint64_t caps_for(const provider_wants& w) {
    return base_caps | (w.source ? FI_SOURCE : 0) | (w.directed_receive ? FI_DIRECTED_RECV : 0) |
           (w.atomics ? FI_ATOMIC : 0) | (w.rma_events ? FI_RMA_EVENT : 0);
}

info_ptr make_hints(const char* provider, std::uint64_t caps, fi_ep_type type) {
    info_ptr hints = alloc_info();
    if (!hints) {
        return hints;
    }
    hints->caps = caps;
    // Every post's context is an operation record that starts with an fi_context2 area the
    // provider may use until the completion (context.hpp): providers that need one (efa) are
    // offered too.
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = type;
    hints->domain_attr->mr_mode = supported_mr_mode;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
    if (provider != nullptr && *provider != '\0') {
        hints->fabric_attr->prov_name = strdup(provider);
    }
    return hints;
}

fabric_progress to_progress(fi_progress p) {
    switch (p) {
        case FI_PROGRESS_AUTO:
            return fabric_progress::automatic;
        case FI_PROGRESS_MANUAL:
            return fabric_progress::manual;
        default:
            return fabric_progress::unspecified;
    }
}

// Provider preference when none is named: hardware first, then the software providers.
int rank(const char* prov, fabric_endpoint type) {
    static const char* const msg_order[] = {"verbs", "tcp", "sockets"};
    static const char* const rdm_order[] = {"verbs;ofi_rxm", "efa", "tcp;ofi_rxm",
                                            "net",           "shm", "sockets"};
    const std::span<const char* const> order = type == fabric_endpoint::rdm
                                                   ? std::span<const char* const>(rdm_order)
                                                   : std::span<const char* const>(msg_order);
    for (std::size_t i = 0; i < order.size(); ++i) {
        if (std::strcmp(prov, order[i]) == 0) {
            return static_cast<int>(i);
        }
    }
    return 100;
}

}  // namespace

provider_offer describe(const fi_info* info) {
    provider_offer o;
    o.provider = info->fabric_attr->prov_name != nullptr ? info->fabric_attr->prov_name : "";
    o.fabric = info->fabric_attr->name != nullptr ? info->fabric_attr->name : "";
    o.nic = info->domain_attr->name != nullptr ? info->domain_attr->name : "";
    o.endpoint = info->ep_attr->type == FI_EP_RDM ? fabric_endpoint::rdm : fabric_endpoint::msg;
    o.caps.source = (info->caps & FI_SOURCE) != 0;
    o.caps.directed_receive = (info->caps & FI_DIRECTED_RECV) != 0;
    o.caps.atomics = (info->caps & FI_ATOMIC) != 0;
    o.caps.rma_events = (info->caps & FI_RMA_EVENT) != 0;
    o.rma_pmem = (info->caps & FI_RMA_PMEM) != 0;
    o.rx_cq_data = (info->rx_attr->mode & FI_RX_CQ_DATA) != 0 || (info->mode & FI_RX_CQ_DATA) != 0;
    o.shared_rx = info->domain_attr->max_ep_srx_ctx != 0;
    const int m = info->domain_attr->mr_mode;
    o.mr = {.local = (m & FI_MR_LOCAL) != 0,
            .virt_addr = (m & FI_MR_VIRT_ADDR) != 0,
            .allocated = (m & FI_MR_ALLOCATED) != 0,
            .prov_key = (m & FI_MR_PROV_KEY) != 0,
            .endpoint = (m & FI_MR_ENDPOINT) != 0,
            .raw = (m & FI_MR_RAW) != 0};
    o.control_progress = to_progress(info->domain_attr->control_progress);
    o.data_progress = to_progress(info->domain_attr->data_progress);
    o.inject_size = info->tx_attr->inject_size;
    o.max_msg_size = info->ep_attr->max_msg_size;
    o.tx_size = info->tx_attr->size;
    o.rx_size = info->rx_attr->size;
    o.iov_limit = std::min(info->tx_attr->iov_limit, info->rx_attr->iov_limit);
    o.rma_iov_limit = info->tx_attr->rma_iov_limit;
    o.cq_data_size = info->domain_attr->cq_data_size;
    o.mr_key_size = info->domain_attr->mr_key_size;
    o.addr_format = info->addr_format;
    return o;
}

result<info_ptr> pick_provider(const std::string& provider, const std::string& node,
                               provider_wants wants, fabric_endpoint type) {
    const char* kind = type == fabric_endpoint::rdm ? "RDM" : "connected";
    info_ptr hints = make_hints(provider.c_str(), caps_for(wants),
                                type == fabric_endpoint::rdm ? FI_EP_RDM : FI_EP_MSG);
    if (!hints) {
        return fail(errc::provider_error, "fi_allocinfo failed");
    }
    info_ptr all;
    int ret = getinfo(node.c_str(), nullptr, FI_SOURCE, hints.get(), all);
    if (ret != 0) {
        return fail(
            fabric_error(ret, std::string("fi_getinfo: no provider offers ") + kind + " endpoints" +
                                  (provider.empty() ? std::string() : " for '" + provider + "'") +
                                  " on " + node));
    }
    const fi_info* best = nullptr;
    for (const fi_info* i = all.get(); i != nullptr; i = i->next) {
        const char* name = i->fabric_attr->prov_name;
        if (!provider.empty() && provider != name) {
            continue;  // "tcp" also matches "tcp;ofi_rxm" in libfabric's filter: ask exactly
        }
        // Connected endpoints come from core providers only (a utility provider layered over
        // one, "x;ofi_rxm", offers RDM).
        if (type == fabric_endpoint::msg && std::strchr(name, ';') != nullptr) {
            continue;
        }
        if (best == nullptr || rank(name, type) < rank(best->fabric_attr->prov_name, type)) {
            best = i;
        }
    }
    if (best == nullptr) {
        return fail(errc::not_supported,
                    std::string("no ") +
                        (provider.empty() ? "core provider" : "provider '" + provider + "'") +
                        " offers " + kind + " endpoints on " + node);
    }
    info_ptr chosen = dup_info(best);
    if (!chosen) {
        return fail(errc::provider_error, "fi_dupinfo failed: out of memory");
    }
    return chosen;
}

std::vector<std::string> provider_names(fabric_endpoint type) {
    info_ptr hints =
        make_hints(nullptr, caps_for({}), type == fabric_endpoint::rdm ? FI_EP_RDM : FI_EP_MSG);
    info_ptr all;
    std::vector<std::string> names;
    if (!hints || getinfo(nullptr, nullptr, 0, hints.get(), all) != 0) {
        return names;
    }
    for (const fi_info* i = all.get(); i != nullptr; i = i->next) {
        const std::string name = i->fabric_attr->prov_name;
        if (type == fabric_endpoint::msg && name.find(';') != std::string::npos) {
            continue;  // as pick_provider: connected endpoints come from core providers
        }
        if (std::find(names.begin(), names.end(), name) == names.end()) {
            names.push_back(name);
        }
    }
    return names;
}

info_ptr endpoint_hints(const fi_info* chosen) {
    info_ptr hints =
        make_hints(chosen->fabric_attr->prov_name, chosen->caps, chosen->ep_attr->type);
    if (hints) {
        hints->domain_attr->name = strdup(chosen->domain_attr->name);
    }
    return hints;
}

info_ptr endpoint_info(const fi_info* request, const fi_info* domain_info,
                       const endpoint_sizes& sizes) {
    info_ptr ep_info = dup_info(request);
    if (!ep_info || ep_info->tx_attr == nullptr || ep_info->rx_attr == nullptr) {
        // sockets hands connection requests fi_dupinfo cannot copy: start from the domain's
        // and keep the request's handle.
        ep_info = dup_info(domain_info);
        if (!ep_info) {
            return ep_info;
        }
        ep_info->handle = request->handle;
    }
    ep_info->tx_attr->size = sizes.tx;
    ep_info->rx_attr->size = sizes.rx;
    ep_info->tx_attr->iov_limit = sizes.max_sge;
    ep_info->rx_attr->iov_limit = sizes.max_sge;
    ep_info->tx_attr->rma_iov_limit = 1;
    if (sizes.shared_rx) {
        ep_info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
    }
    return ep_info;
}

int getinfo(const char* node, const char* service, std::uint64_t flags, const fi_info* hints,
            info_ptr& out) {
    route_provider_log();
    if (int r = injected(fabric_call::getinfo)) {
        return r;
    }
    fi_info* list = nullptr;
    const int ret = fi_getinfo(FI_VERSION(1, 17), node, service, flags, hints, &list);
    if (ret == 0) {
        out.reset(list);
    }
    return ret;
}

int open_fabric(fi_info* info, fabric_handle& out) {
    if (int r = injected(fabric_call::fabric)) {
        return r;
    }
    return out.opened(fi_fabric(info->fabric_attr, out.out(), nullptr));
}

int open_domain(fid_fabric* fabric, fi_info* info, domain_handle& out) {
    if (int r = injected(fabric_call::domain)) {
        return r;
    }
    return out.opened(fi_domain(fabric, info, out.out(), nullptr));
}

std::optional<std::size_t> cm_data_size(fid_fabric* fabric, fi_info* info) {
    pep_handle pep;
    if (open_passive_ep(fabric, info, pep) != 0) {
        return std::nullopt;
    }
    size_t sz = 0;
    size_t len = sizeof(sz);
    if (injected(fabric_call::getopt) != 0) {
        return std::nullopt;
    }
    if (fi_getopt(pep.as_fid(), FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &sz, &len) != 0) {
        return std::nullopt;
    }
    return sz;
}

bool has_word_atomics(fid_domain* domain) {
    struct query {
        fi_op op;
        std::uint64_t flags;
    };
    for (const query q : {query{FI_ATOMIC_WRITE, 0}, query{FI_SUM, FI_FETCH_ATOMIC},
                          query{FI_CSWAP, FI_COMPARE_ATOMIC}}) {
        fi_atomic_attr attr{};
        if (injected(fabric_call::query_atomic) != 0) {
            return false;
        }
        if (fi_query_atomic(domain, FI_UINT64, q.op, &attr, q.flags) != 0 || attr.count < 1) {
            return false;
        }
    }
    return true;
}

void set_source_name(fi_info* info, const char* name) noexcept {
    std::free(info->src_addr);
    info->src_addr = strdup(name);
    info->src_addrlen = info->src_addr != nullptr ? std::strlen(name) + 1 : 0;
}

namespace {

bool same_ip(const sockaddr* a, const sockaddr* b) noexcept {
    if (a->sa_family != b->sa_family) {
        return false;
    }
    if (a->sa_family == AF_INET) {
        return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
    }
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
}

}  // namespace

bool destination_is_local(const fi_info* info) noexcept {
    if (info == nullptr || info->dest_addr == nullptr ||
        (info->addr_format != FI_SOCKADDR_IN && info->addr_format != FI_SOCKADDR_IN6 &&
         info->addr_format != FI_SOCKADDR)) {
        return false;
    }
    const auto* dest = static_cast<const sockaddr*>(info->dest_addr);
    if (dest->sa_family == AF_INET) {
        const auto a = ntohl(reinterpret_cast<const sockaddr_in*>(dest)->sin_addr.s_addr);
        if ((a >> 24) == 127) {
            return true;
        }
    } else if (dest->sa_family == AF_INET6) {
        if (IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(dest)->sin6_addr)) {
            return true;
        }
    } else {
        return false;
    }
    ifaddrs* ifs = nullptr;
    if (::getifaddrs(&ifs) != 0) {
        return false;
    }
    bool local = false;
    for (const ifaddrs* i = ifs; i != nullptr && !local; i = i->ifa_next) {
        local = i->ifa_addr != nullptr && same_ip(i->ifa_addr, dest);
    }
    ::freeifaddrs(ifs);
    return local;
}

namespace {

// The socket `local` (a TCP endpoint of this host, in this network namespace) as /proc/net/tcp or
// tcp6 prints its local address ("0100007F:1F90"), or empty for another family.
std::string proc_net_name(const sockaddr* local) {
    char out[64];
    if (local->sa_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(local);
        std::snprintf(out, sizeof out, "%08X:%04X", a->sin_addr.s_addr, ntohs(a->sin_port));
        return out;
    }
    if (local->sa_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(local);
        std::uint32_t w[4];
        std::memcpy(w, &a->sin6_addr, sizeof w);
        std::snprintf(out, sizeof out, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2], w[3],
                      ntohs(a->sin6_port));
        return out;
    }
    return {};
}

}  // namespace

bool request_from_this_user(const fi_info* request) noexcept {
    if (request == nullptr || request->dest_addr == nullptr || !destination_is_local(request)) {
        return false;
    }
    const auto* peer = static_cast<const sockaddr*>(request->dest_addr);
    const std::string name = proc_net_name(peer);
    if (name.empty()) {
        return false;
    }
    std::FILE* f =
        std::fopen(peer->sa_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", "re");
    if (f == nullptr) {
        return false;
    }
    // "sl local_address rem_address st tx:rx tr:when retrnsmt uid ...": the peer's own socket is
    // the one whose local address is the peer's address; its uid is the connecting user's.
    bool same = false;
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
        char local[64], remote[64], st[8], queues[40], timer[40], retr[16];
        unsigned long uid = 0;
        if (std::sscanf(line, " %*s %63s %63s %7s %39s %39s %15s %lu", local, remote, st, queues,
                        timer, retr, &uid) == 7 &&
            name == local) {
            same = uid == static_cast<unsigned long>(::getuid());
            break;
        }
    }
    std::fclose(f);
    return same;
}

}  // namespace remora::detail

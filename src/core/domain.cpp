// SPDX-License-Identifier: BSD-3-Clause
#include <remora/domain.hpp>

#include <cstdlib>
#include <cstring>
#include <span>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/impl.hpp"
#include "fabric/cq.hpp"
#include "fabric/info.hpp"

namespace remora {
namespace detail {

namespace {

constexpr std::uint64_t base_caps =
    FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
// The mr_mode bits remora can honour. FI_MR_ENDPOINT is not offered yet: every provider remora
// targets (verbs, tcp, sockets, shm) works without it.
constexpr int supported_mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

info_ptr make_hints(const std::string& provider, std::uint64_t caps, endpoint_type type) {
    info_ptr hints = alloc_info();
    if (!hints) {
        return hints;
    }
    hints->caps = caps;
    hints->mode = 0;
    hints->ep_attr->type = type == endpoint_type::rdm ? FI_EP_RDM : FI_EP_MSG;
    hints->domain_attr->mr_mode = supported_mr_mode;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
    if (!provider.empty()) {
        hints->fabric_attr->prov_name = strdup(provider.c_str());
    }
    return hints;
}

progress_model to_model(fi_progress p) {
    switch (p) {
        case FI_PROGRESS_AUTO:
            return progress_model::automatic;
        case FI_PROGRESS_MANUAL:
            return progress_model::manual;
        default:
            return progress_model::unspecified;
    }
}

remora::mr_mode to_mr_mode(int m) {
    remora::mr_mode r = remora::mr_mode::none;
    if (m & FI_MR_LOCAL)
        r |= remora::mr_mode::local;
    if (m & FI_MR_VIRT_ADDR)
        r |= remora::mr_mode::virt_addr;
    if (m & FI_MR_ALLOCATED)
        r |= remora::mr_mode::allocated;
    if (m & FI_MR_PROV_KEY)
        r |= remora::mr_mode::prov_key;
    if (m & FI_MR_ENDPOINT)
        r |= remora::mr_mode::endpoint;
    return r;
}

// Provider preference when none is named: hardware first, then the software providers.
int rank(const char* prov, endpoint_type type) {
    static const char* const msg_order[] = {"verbs", "tcp", "sockets"};
    static const char* const rdm_order[] = {"verbs;ofi_rxm", "efa", "tcp;ofi_rxm",
                                            "net",           "shm", "sockets"};
    const std::span<const char* const> order = type == endpoint_type::rdm
                                                   ? std::span<const char* const>(rdm_order)
                                                   : std::span<const char* const>(msg_order);
    for (std::size_t i = 0; i < order.size(); ++i) {
        if (std::strcmp(prov, order[i]) == 0) {
            return static_cast<int>(i);
        }
    }
    return 100;
}

result<info_ptr> pick(const std::string& provider, const std::string& node, std::uint64_t caps,
                      endpoint_type type) {
    const char* kind = type == endpoint_type::rdm ? "RDM" : "connected";
    info_ptr hints = make_hints(provider, caps, type);
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
        if (type == endpoint_type::msg && std::strchr(name, ';') != nullptr) {
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

}  // namespace

domain_impl::~domain_impl() {
    progress.reset();
    rma_events.reset();  // after the thread that reads it; endpoints bound to it are closed
    domain.reset();
    fabric.reset();
}

info_ptr endpoint_hints(const domain_impl& dom) {
    info_ptr hints = make_hints(dom.caps.provider, dom.info->caps, dom.caps.endpoint);
    if (hints) {
        hints->domain_attr->name = strdup(dom.info->domain_attr->name);
    }
    return hints;
}

}  // namespace detail

const char* to_string(progress_policy p) noexcept {
    switch (p) {
        case progress_policy::busy:
            return "busy";
        case progress_policy::adaptive:
            return "adaptive";
        case progress_policy::blocking:
            return "blocking";
    }
    return "unknown";
}

result<domain> domain::open(const domain_config& config) {
    using namespace detail;
    if (config.progress != progress_policy::busy && config.progress != progress_policy::adaptive &&
        config.progress != progress_policy::blocking) {
        return fail(errc::invalid_argument,
                    "domain_config: progress is not busy, adaptive or blocking (value " +
                        std::to_string(static_cast<int>(config.progress)) + ")");
    }
    if (config.progress == progress_policy::adaptive &&
        (config.progress_spin < std::chrono::microseconds(1) ||
         config.progress_spin > std::chrono::seconds(1))) {
        return fail(errc::invalid_argument,
                    "domain_config: progress_spin must be between 1 us and 1 s for the adaptive "
                    "policy (got " +
                        std::to_string(config.progress_spin.count()) +
                        " us); use progress_policy::blocking or busy for no spin or no sleep");
    }
    auto impl = std::make_shared<domain_impl>();
    impl->node = config.node;
    impl->policy = config.progress;
    impl->spin = config.progress_spin;

    // RDM: a received message counts only from the attached peer. FI_SOURCE gives each
    // message's sender (checked as the CQ is read: cq_impl::refuse_stranger), FI_DIRECTED_RECV
    // keeps others' messages from matching a receive where the provider honours it (tcp;ofi_rxm;
    // shm, net and sockets match them anyway). A provider without FI_SOURCE opens without the
    // check and says so in caps().directed_receive.
    const std::uint64_t rdm_caps = FI_DIRECTED_RECV | FI_SOURCE;
    const std::uint64_t first_caps =
        base_caps | (config.endpoint == endpoint_type::rdm ? rdm_caps : 0);
    auto base = pick(config.provider, config.node, first_caps, config.endpoint);
    if (!base && first_caps != base_caps) {
        base = pick(config.provider, config.node, base_caps, config.endpoint);
    }
    if (!base) {
        return fail(base.error());
    }
    std::string prov = (*base)->fabric_attr->prov_name;
    const std::uint64_t want_caps = base_caps | ((*base)->caps & rdm_caps);
    // Native atomics: ask again with FI_ATOMIC. Providers without them (tcp) don't answer.
    bool atomics = false;
    {
        auto with_atomics = pick(prov, config.node, want_caps | FI_ATOMIC, config.endpoint);
        if (with_atomics && prov == (*with_atomics)->fabric_attr->prov_name) {
            atomics = true;
            *base = std::move(*with_atomics);
        } else if (!with_atomics && !(with_atomics.error() == errc::not_supported) &&
                   with_atomics.error().code() != std::error_code(FI_ENODATA, fabric_category())) {
            // "None offers atomics" is an answer; any other failure (out of memory) is not: a
            // domain opened without atomics then would not match its peers'.
            return fail(error(with_atomics.error().code(),
                              "asking for native atomics: " + with_atomics.error().message()));
        }
    }
    // adaptive on shm: ask again with FI_RMA_EVENT, for a counter of the peers' one-sided
    // accesses (domain_impl::rma_events); shm's CQs have no fd, so nothing else shows a peer's
    // reads. Not elsewhere: tcp 1.17 offers FI_RMA_EVENT but its remote counter stays 0
    // (measured: 101 reads and a write into a bound endpoint) and its CQ fd, checked each
    // polling round, is readable for about half of a read stream's requests (0 to 3 sleeps in
    // 5,000 reads, measured); sockets and net serve one-sided operations on their own threads
    // (remora's thread slept through a stream), and with the counter bound sockets crashed in
    // the fault sweep's setup (fault_sweep_test sockets_setup); tcp;ofi_rxm does not offer it.
    bool rma_events = false;
    if (config.progress == progress_policy::adaptive && prov == "shm") {
        const std::uint64_t caps = want_caps | (atomics ? FI_ATOMIC : 0) | FI_RMA_EVENT;
        auto with_events = pick(prov, config.node, caps, config.endpoint);
        if (with_events && prov == (*with_events)->fabric_attr->prov_name &&
            ((*with_events)->caps & FI_RMA_EVENT) != 0) {
            rma_events = true;
            *base = std::move(*with_events);
        }
    }
    impl->info = std::move(*base);
    fi_info* info = impl->info.get();

    int ret = open_fabric(info->fabric_attr, impl->fabric);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_fabric for " + prov));
    }
    ret = open_domain(impl->fabric.get(), info, impl->domain);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_domain for " + prov));
    }

    if (rma_events && cntr_open(impl->domain.get(), impl->rma_events) != 0) {
        impl->rma_events.reset();  // no counter: CQ traffic only, as without FI_RMA_EVENT
    }

    // Whether the provider's CQs have a wait fd: open one and see (shm has none).
    {
        cq_handle probe;
        ret = cq_open(impl->domain.get(), 1, probe, true);
        if (ret == -FI_ENOSYS || ret == -FI_EINVAL || ret == -FI_EOPNOTSUPP) {
            ret = cq_open(impl->domain.get(), 1, probe, false);
            impl->cq_polled = ret == 0;
        }
        if (ret != 0) {
            return fail(fabric_error(ret, "fi_cq_open for a probe CQ on " + prov));
        }
    }

    provider_caps& c = impl->caps;
    c.provider = prov;
    c.endpoint = config.endpoint;
    c.fabric = info->fabric_attr->name ? info->fabric_attr->name : "";
    c.nic = info->domain_attr->name ? info->domain_attr->name : "";
    c.native_atomics =
        atomics && (info->caps & FI_ATOMIC) != 0 && has_word_atomics(impl->domain.get());
    c.inject_size = info->tx_attr->inject_size;
    c.max_msg_size = info->ep_attr->max_msg_size;
    c.tx_size = info->tx_attr->size;
    c.rx_size = info->rx_attr->size;
    // fi_info reports no CQ depth limit; a CQ serving one full send and receive queue is the
    // depth remora asks for at most.
    c.cq_size = info->tx_attr->size + info->rx_attr->size;
    c.iov_limit = std::min(info->tx_attr->iov_limit, info->rx_attr->iov_limit);
    c.rma_iov_limit = info->tx_attr->rma_iov_limit;
    c.cq_data_size = info->domain_attr->cq_data_size;
    c.rx_cq_data = (info->rx_attr->mode & FI_RX_CQ_DATA) != 0 || (info->mode & FI_RX_CQ_DATA) != 0;
    c.shared_rx = info->domain_attr->max_ep_srx_ctx != 0;
    c.rma_pmem = (info->caps & FI_RMA_PMEM) != 0;
    impl->source_checked = config.endpoint == endpoint_type::rdm && (info->caps & FI_SOURCE) != 0;
    c.directed_receive = impl->source_checked;
    c.control_progress = to_model(info->domain_attr->control_progress);
    c.data_progress = to_model(info->domain_attr->data_progress);
    c.mr_mode = to_mr_mode(info->domain_attr->mr_mode);
    c.mr_key_size = info->domain_attr->mr_key_size;
    c.cq_wait_fd = !impl->cq_polled;
    // Software providers over sockets: tcp progresses only inside fi_cq_read/fi_eq_read calls,
    // whatever it reports; sockets runs its own progress threads.
    c.target_needs_progress =
        prov == "tcp" || prov == "net" || c.data_progress == progress_model::manual;
    impl->cq_sread_waits = prov == "tcp" || prov == "net";

    if (prov == "sockets" && config.endpoint == endpoint_type::msg) {
        impl->liveness_interval = std::chrono::milliseconds(100);
        impl->watch_disconnects = true;
    }

    // The private-data limit is an endpoint option: ask a passive endpoint (MSG only).
    if (config.endpoint == endpoint_type::msg) {
        if (auto sz = cm_data_size(impl->fabric.get(), info)) {
            c.cm_data_size = *sz;
        }
    }
    return domain(std::move(impl));
}

namespace {
const provider_caps no_caps{};
const std::string no_node;
}  // namespace

const char* to_string(endpoint_type t) noexcept {
    return t == endpoint_type::rdm ? "rdm" : "msg";
}

const provider_caps& domain::caps() const noexcept {
    return impl_ ? impl_->caps : no_caps;
}
const std::string& domain::node() const noexcept {
    return impl_ ? impl_->node : no_node;
}

result<void> domain::close() {
    if (!impl_) {
        return {};  // closed already (or moved from): nothing to do
    }
    if (const long others = impl_.use_count() - 1; others > 0) {
        return fail(errc::bad_state,
                    "domain close: still held by " + std::to_string(others) +
                        " other domain handle(s) or object(s) made from it (regions, listeners, "
                        "connections, shared CQs, pools): destroy them first; the domain stays "
                        "open");
    }
    detail::domain_impl& d = *impl_;
    {
        std::lock_guard lock(d.progress_mu);
        d.progress.reset();  // nothing uses it any more; it would start again on first use
    }
    // The remote-access counter is the domain's last child (its endpoints are gone): closed
    // first, opened again if the domain stays open, for the endpoints still to come.
    const bool had_counter = static_cast<bool>(d.rma_events);
    d.rma_events.reset();
    if (int ret = d.domain.close(); ret != 0) {
        if (had_counter && detail::cntr_open(d.domain.get(), d.rma_events) != 0) {
            d.rma_events.reset();  // CQ traffic only from here, as without FI_RMA_EVENT
        }
        return fail(detail::fabric_error(ret, "domain close: fi_close for the " + d.caps.provider +
                                                  " domain failed; the domain stays open"));
    }
    const int ret = d.fabric.close();
    impl_.reset();
    if (ret != 0) {
        return fail(detail::fabric_error(ret,
                                         "domain close: the domain is closed, but fi_close "
                                         "for its fabric failed"));
    }
    return {};
}
progress_policy domain::progress() const noexcept {
    return impl_->policy;
}
std::chrono::microseconds domain::progress_spin() const noexcept {
    return impl_->spin;
}

}  // namespace remora

namespace remora::detail {

unique_fd& unique_fd::operator=(unique_fd&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
}
unique_fd::~unique_fd() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
    // A year is forever here; it keeps now() + timeout from overflowing.
    constexpr std::chrono::milliseconds cap = std::chrono::hours(24 * 365);
    return std::chrono::steady_clock::now() +
           std::clamp(timeout, std::chrono::milliseconds(0), cap);
}

}  // namespace remora::detail

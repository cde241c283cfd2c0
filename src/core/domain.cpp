// SPDX-License-Identifier: BSD-3-Clause
#include <remora/domain.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "base/log.hpp"
#include "core/impl.hpp"
#include "fabric/cq.hpp"
#include "fabric/info.hpp"

namespace remora {
namespace detail {

namespace {

progress_model to_model(fabric_progress p) {
    switch (p) {
        case fabric_progress::automatic:
            return progress_model::automatic;
        case fabric_progress::manual:
            return progress_model::manual;
        case fabric_progress::unspecified:
            break;
    }
    return progress_model::unspecified;
}

remora::mr_mode to_mr_mode(const mr_needs& m) {
    remora::mr_mode r = remora::mr_mode::none;
    if (m.local)
        r |= remora::mr_mode::local;
    if (m.virt_addr)
        r |= remora::mr_mode::virt_addr;
    if (m.allocated)
        r |= remora::mr_mode::allocated;
    if (m.prov_key)
        r |= remora::mr_mode::prov_key;
    if (m.endpoint)
        r |= remora::mr_mode::endpoint;
    return r;
}

// The rules `asked` resolves to (environment: REMORA_RULES), or an error for an unknown value.
result<provider_rules> resolve_rules(provider_rules asked) {
    if (asked == provider_rules::native || asked == provider_rules::verbs ||
        asked == provider_rules::efa) {
        return asked;
    }
    if (asked != provider_rules::environment) {
        return fail(errc::invalid_argument,
                    "domain_config: rules is not environment, native, verbs or efa (value " +
                        std::to_string(static_cast<int>(asked)) + ")");
    }
    const char* env = std::getenv("REMORA_RULES");
    if (env == nullptr || *env == '\0' || std::string_view(env) == "native") {
        return provider_rules::native;
    }
    if (std::string_view(env) == "verbs") {
        return provider_rules::verbs;
    }
    if (std::string_view(env) == "efa") {
        return provider_rules::efa;
    }
    return fail(errc::invalid_argument, std::string("REMORA_RULES=") + env +
                                            ": unknown rules (verbs, efa, native, or unset)");
}

// The profile `rules` holds a domain to (rules.hpp), or null for the provider's own.
const rules_profile* profile_of(provider_rules rules) {
    switch (rules) {
        case provider_rules::verbs:
            return &verbs_limits;
        case provider_rules::efa:
            return &efa_limits;
        case provider_rules::environment:
        case provider_rules::native:
            break;
    }
    return nullptr;
}

// What caps() reports under a profile's rules: its limits where they are smaller, and its
// registration modes (local descriptors, provider keys; rules.hpp lists the figures).
void apply_limits(provider_caps& c, const rules_profile& p, provider_rules rules) {
    c.inject_size = std::min(c.inject_size, p.inject_size);
    c.iov_limit = std::min(c.iov_limit, p.iov_limit);
    c.rma_iov_limit = std::min(c.rma_iov_limit, p.rma_iov_limit);
    c.cq_data_size = std::min(c.cq_data_size, p.cq_data_size);
    c.max_msg_size = std::min(c.max_msg_size, p.max_msg_size);
    c.mr_key_size = std::min(c.mr_key_size, p.mr_key_size);
    if (c.endpoint == endpoint_type::msg) {
        c.cm_data_size = std::min(c.cm_data_size, p.cm_data_size);
    }
    c.mr_mode |= remora::mr_mode::local | remora::mr_mode::prov_key | remora::mr_mode::allocated;
    if (p.rx_cq_data) {
        c.rx_cq_data = true;  // counted by the CQs (cq_read.hpp, rx_rule)
    }
    c.rules = rules;
}

fabric_endpoint to_fabric(endpoint_type t) {
    return t == endpoint_type::rdm ? fabric_endpoint::rdm : fabric_endpoint::msg;
}

// REMORA_SAME_HOST=off (or 0, no, false) turns the same-host path off for every domain of the
// process, on (or 1, yes, true, process) on, whatever domain_config::same_host says.
bool same_host_wanted(const domain_config& config) {
    const char* env = std::getenv("REMORA_SAME_HOST");
    if (env == nullptr) {
        return config.same_host;
    }
    const std::string v = env;
    if (v == "off" || v == "0" || v == "no" || v == "false") {
        return false;
    }
    if (v == "on" || v == "1" || v == "yes" || v == "true" || v == "process") {
        return true;
    }
    return config.same_host;
}

// The shm RDM domain a tcp or sockets MSG domain opens beside itself (domain_impl::same_host),
// opened as any shm domain is, with `config`'s node and progress; null when shm is not there or
// fails to open (logged at debug: the domain works without it).
std::shared_ptr<domain_impl> open_same_host(const domain_config& config, const std::string& prov) {
    domain_config shm = config;
    shm.provider = "shm";
    shm.endpoint = endpoint_type::rdm;
    shm.rules = provider_rules::native;
    shm.same_host = false;
    auto d = domain::open(shm);
    if (!d) {
        if (log_enabled(log_level::debug)) {
            log_line(log_level::debug, "domain::open: no same-host shm domain beside the " + prov +
                                           " domain on " + config.node + ": " + d.error().what());
        }
        return nullptr;
    }
    // Regions are registered there under their own domain's key, at their virtual address.
    const remora::mr_mode m = d->caps().mr_mode;
    if (!has_all(m, remora::mr_mode::virt_addr) || any(m & remora::mr_mode::prov_key)) {
        if (log_enabled(log_level::debug)) {
            log_line(log_level::debug,
                     "domain::open: no same-host shm domain beside the " + prov + " domain on " +
                         config.node +
                         ": shm does not take the keys asked for at virtual addresses");
        }
        return nullptr;
    }
    return shared_impl_of(*d);
}

// Closes a same-host shm domain's objects in domain_impl's order; 0 or the first failure
// (what failed to close stays owned and closes silently with the state).
int close_same_host(domain_impl& s) {
    {
        std::lock_guard lock(s.progress_mu);
        s.progress.reset();
    }
    s.rma_events.reset();
    if (int ret = s.domain.close(); ret != 0) {
        return ret;
    }
    return s.fabric.close();
}

}  // namespace

domain_impl::~domain_impl() {
    progress.reset();
    same_host.reset();
    rma_events.reset();  // after the thread that reads it; endpoints bound to it are closed
    domain.reset();
    fabric.reset();
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
    const auto rules = resolve_rules(config.rules);
    if (!rules) {
        return fail(rules.error());
    }
    const rules_profile* profile = profile_of(*rules);
    if (profile != nullptr && !profile->msg_endpoints && config.endpoint == endpoint_type::msg) {
        return fail(errc::not_supported,
                    std::string(profile->name) + " rules: " + profile->name +
                        " offers no connected (MSG) endpoints, only reliable datagrams: open "
                        "the domain with endpoint_type::rdm and reach peers with "
                        "connection::open_peer");
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
    const fabric_endpoint type = to_fabric(config.endpoint);
    const bool rdm = config.endpoint == endpoint_type::rdm;
    auto base =
        pick_provider(config.provider, config.node, {.source = rdm, .directed_receive = rdm}, type);
    if (!base && rdm) {
        base = pick_provider(config.provider, config.node, {}, type);
    }
    if (!base) {
        return fail(base.error());
    }
    const provider_offer first = describe(base->get());
    std::string prov = first.provider;
    provider_wants wants{.source = first.caps.source,
                         .directed_receive = first.caps.directed_receive};
    // Native atomics: ask again with FI_ATOMIC. Providers without them (tcp) don't answer.
    bool atomics = false;
    {
        provider_wants with = wants;
        with.atomics = true;
        auto with_atomics = pick_provider(prov, config.node, with, type);
        if (with_atomics && prov == describe(with_atomics->get()).provider) {
            atomics = true;
            *base = std::move(*with_atomics);
        } else if (!with_atomics && !(with_atomics.error() == errc::not_supported) &&
                   with_atomics.error().code() !=
                       std::error_code(fabric_errno::no_data, fabric_category())) {
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
        provider_wants with = wants;
        with.atomics = atomics;
        with.rma_events = true;
        auto with_events = pick_provider(prov, config.node, with, type);
        if (with_events) {
            const provider_offer o = describe(with_events->get());
            if (prov == o.provider && o.caps.rma_events) {
                rma_events = true;
                *base = std::move(*with_events);
            }
        }
    }
    impl->info = std::move(*base);
    fabric_info* info = impl->info.get();
    const provider_offer offer = describe(info);

    int ret = open_fabric(info, impl->fabric);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_fabric for " + prov));
    }
    ret = open_domain(impl->fabric.get(), info, impl->domain);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_domain for " + prov));
    }

    if (profile != nullptr) {
        fabric_rules::enroll(impl->domain.get(), *profile);  // before any endpoint or registration
        impl->rules = profile;
    }

    if (rma_events && cntr_open(impl->domain.get(), impl->rma_events) != 0) {
        impl->rma_events.reset();  // no counter: CQ traffic only, as without FI_RMA_EVENT
    }

    // Whether the provider's CQs have a wait fd: open one and see (shm has none).
    {
        cq_handle probe;
        ret = cq_open(impl->domain.get(), 1, probe, true);
        if (ret == -fabric_errno::not_implemented || ret == -fabric_errno::invalid ||
            ret == -fabric_errno::not_supported) {
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
    c.fabric = offer.fabric;
    c.nic = offer.nic;
    c.native_atomics = atomics && offer.caps.atomics && has_word_atomics(impl->domain.get());
    c.inject_size = offer.inject_size;
    c.max_msg_size = offer.max_msg_size;
    c.tx_size = offer.tx_size;
    c.rx_size = offer.rx_size;
    // The provider reports no CQ depth limit; a CQ serving one full send and receive queue is
    // the depth remora asks for at most.
    c.cq_size = offer.tx_size + offer.rx_size;
    c.iov_limit = offer.iov_limit;
    c.rma_iov_limit = offer.rma_iov_limit;
    c.cq_data_size = offer.cq_data_size;
    c.rx_cq_data = offer.rx_cq_data;
    c.shared_rx = offer.shared_rx;
    c.rma_pmem = offer.rma_pmem;
    impl->source_checked = rdm && offer.caps.source;
    c.directed_receive = impl->source_checked;
    c.control_progress = to_model(offer.control_progress);
    c.data_progress = to_model(offer.data_progress);
    c.mr_mode = to_mr_mode(offer.mr);
    c.mr_key_size = offer.mr_key_size;
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
    if (profile != nullptr) {
        apply_limits(c, *profile, *rules);
    }
    if (same_host_wanted(config) && config.endpoint == endpoint_type::msg && profile == nullptr &&
        (prov == "tcp" || prov == "sockets")) {
        impl->same_host = open_same_host(config, prov);
        c.same_host = impl->same_host != nullptr;
    }
    return internal_access::wrap<domain>(std::move(impl));
}

namespace {
const provider_caps no_caps{};
const std::string no_node;
}  // namespace

std::vector<std::string> domain::providers(endpoint_type type) {
    return detail::provider_names(type == endpoint_type::rdm ? detail::fabric_endpoint::rdm
                                                             : detail::fabric_endpoint::msg);
}

const char* to_string(provider_rules r) noexcept {
    switch (r) {
        case provider_rules::environment:
            return "environment";
        case provider_rules::native:
            return "native";
        case provider_rules::verbs:
            return "verbs";
        case provider_rules::efa:
            return "efa";
    }
    return "unknown";
}

const char* to_string(endpoint_type t) noexcept {
    return t == endpoint_type::rdm ? "rdm" : "msg";
}

const provider_caps& domain::caps() const noexcept {
    return impl_ ? detail::impl_of(*this)->caps : no_caps;
}
const std::string& domain::node() const noexcept {
    return impl_ ? detail::impl_of(*this)->node : no_node;
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
    detail::domain_impl& d = *detail::impl_of(*this);
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
    // The same-host shm domain: its regions went with this domain's (each holds both).
    const int shm_ret = d.same_host ? detail::close_same_host(*d.same_host) : 0;
    d.same_host.reset();
    const int ret = d.fabric.close();
    impl_.reset();
    if (ret != 0) {
        return fail(detail::fabric_error(ret,
                                         "domain close: the domain is closed, but fi_close "
                                         "for its fabric failed"));
    }
    if (shm_ret != 0) {
        return fail(detail::fabric_error(shm_ret,
                                         "domain close: the domain is closed, but fi_close for "
                                         "its same-host shm domain failed"));
    }
    return {};
}
progress_policy domain::progress() const noexcept {
    return detail::impl_of(*this)->policy;
}
std::chrono::microseconds domain::progress_spin() const noexcept {
    return detail::impl_of(*this)->spin;
}

}  // namespace remora

namespace remora::detail {

std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
    // A year is forever here; it keeps now() + timeout from overflowing.
    constexpr std::chrono::milliseconds cap = std::chrono::hours(24 * 365);
    return std::chrono::steady_clock::now() +
           std::clamp(timeout, std::chrono::milliseconds(0), cap);
}

}  // namespace remora::detail

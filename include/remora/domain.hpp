// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/domain.hpp — the local peer (domain): a libfabric provider and NIC opened for one local
/// address, its configuration (domain_config) and what the provider can do (provider_caps).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <remora/flags.hpp>
#include <remora/result.hpp>

namespace remora {

/// libfabric's memory-registration requirements (mr_mode bits, see the fi_mr man page) that the
/// provider imposes.
enum class mr_mode : std::uint32_t {
    none = 0,
    local = 1u << 0,  ///< local buffers must be registered too (FI_MR_LOCAL)
    virt_addr =
        1u << 1,  ///< remote addresses are virtual addresses, else offsets (FI_MR_VIRT_ADDR)
    allocated = 1u << 2,  ///< only allocated (backed) memory can be registered (FI_MR_ALLOCATED)
    prov_key = 1u << 3,   ///< the provider picks the keys (FI_MR_PROV_KEY)
    endpoint = 1u << 4,   ///< registrations must be bound to an endpoint (FI_MR_ENDPOINT)
};
template <>
struct enable_flags<mr_mode> : std::true_type {};

/// Who moves a provider's operations along (libfabric's progress models, fi_domain(3)).
enum class progress_model {
    automatic,    ///< the provider progresses on its own (FI_PROGRESS_AUTO)
    manual,       ///< only while the application calls into libfabric (FI_PROGRESS_MANUAL)
    unspecified,  ///< the provider did not say
};

/// The kind of endpoint a domain opens (domain_config::endpoint; see domain).
enum class endpoint_type : std::uint8_t {
    msg,  ///< connected endpoints (FI_EP_MSG, like an RC queue pair): listener, connection::connect
    rdm,  ///< reliable datagram endpoints (FI_EP_RDM): connection::open_peer and attach
};
/// "msg" or "rdm".
const char* to_string(endpoint_type t) noexcept;

/// Which provider's rules a domain is held to (domain_config::rules).
///
/// Under provider_rules::verbs the domain behaves as it must on libfabric's verbs provider
/// (InfiniBand, RoCE, iWARP) whatever provider it runs on: every post names the local
/// descriptor of a registration of the same domain covering the whole buffer (a destination's
/// registration allowing local writes), the provider chooses the remote keys (32 bits), and
/// caps() reports verbs' limits where they are smaller than the provider's (local and remote
/// segments, inject size, immediate data, private data, message size, mr_mode local and
/// prov_key). A post or registration that breaks a rule fails with errc::invalid_argument,
/// whose message names the rule, and nothing reaches the provider; the rule is also logged at
/// log_level::error (remora/log.hpp) or, with no log function set, printed on stderr (the first
/// twenty), so a failure a caller ignores still shows.
///
/// provider_rules::efa holds the domain to libfabric's efa provider (its RDM endpoint) the
/// same way, with efa's limits: 4 local segments, one remote segment per RMA, 8 bytes of
/// immediate data that take no receive, 32-bit provider keys, its inject size; efa has no
/// connected endpoints, so a domain opened for endpoint_type::msg under efa rules fails with
/// errc::not_supported naming the rule.
///
/// What the mode cannot emulate is listed in docs/providers.md ("verbs rules"). The checks cost
/// nothing while no domain under rules is open.
enum class provider_rules : std::uint8_t {
    environment,  ///< the REMORA_RULES environment variable decides: "verbs", "efa", or native
                  ///< when unset
    native,       ///< the opened provider's own rules only
    verbs,        ///< libfabric's verbs provider's rules, on any provider
    efa,          ///< libfabric's efa provider's rules (RDM only), on any provider
};
/// "environment", "native", "verbs" or "efa".
const char* to_string(provider_rules r) noexcept;

/// What the opened provider can do (asked of fi_getinfo/fi_getopt, never assumed).
struct provider_caps {
    std::string provider;                         ///< "tcp", "sockets", "verbs", ...
    std::string fabric;                           ///< fabric name, e.g. "127.0.0.1/32"
    std::string nic;                              ///< domain name, e.g. "lo"
    endpoint_type endpoint = endpoint_type::msg;  ///< the endpoint type the domain was opened for
    bool native_atomics = false;                  ///< the provider runs atomics itself (FI_ATOMIC)
    /// Largest write or send whose bytes are copied at post (completion_mode::at_post).
    std::size_t inject_size = 0;
    std::size_t cm_data_size = 0;  ///< private data limit on connect/accept/reject (0 on rdm)
    std::size_t max_msg_size = 0;  ///< largest single transfer
    std::size_t tx_size = 0;       ///< max send-queue depth
    std::size_t rx_size = 0;       ///< max receive-queue depth
    std::size_t cq_size = 0;       ///< max completion-queue depth
    /// Local segments per operation at most (connection_config::max_sge).
    std::size_t iov_limit = 0;
    std::size_t rma_iov_limit = 0;  ///< remote segments per one-sided operation at most
    std::size_t cq_data_size = 0;   ///< bytes of immediate data
    bool rx_cq_data = false;        ///< immediate data consumes a posted receive (FI_RX_CQ_DATA)
    bool shared_rx = false;         ///< shared receive contexts are available
    bool rma_pmem = false;          ///< provider advertises FI_RMA_PMEM
    /// RDM: a received message counts only from the attached peer (the provider reports each
    /// message's source, FI_SOURCE). A message from any other sender is held by the provider or
    /// completes the receive it took with errc::access_denied and nothing received (post the
    /// receive again); which, per provider: docs/providers.md. False on MSG (one peer per
    /// endpoint anyway).
    bool directed_receive = false;
    progress_model control_progress = progress_model::unspecified;  ///< of connection setup
    progress_model data_progress = progress_model::unspecified;     ///< of data transfers
    remora::mr_mode mr_mode = remora::mr_mode::none;  ///< its registration requirements
    std::size_t mr_key_size = 0;                      ///< bytes of a remote key
    /// True when the target side must call into libfabric for one-sided traffic to land (every
    /// provider reporting manual data progress, and those that progress only inside libfabric
    /// calls whatever they report: docs/providers.md); then run a progress thread on the target
    /// (connection_config::progress_thread).
    bool target_needs_progress = false;
    /// The provider's CQs can be blocked on through an fd. When false, the CQs are polled:
    /// completion_queue::wait, next and channels look again after a back-off growing to 1 ms
    /// between looks; the progress thread, while it sleeps, looks every 100 us (every 1 ms on
    /// kernels without epoll_pwait2, before Linux 5.11); completion_queue::fd() is -1 unless the
    /// progress thread owns the CQ (then it is the thread's eventfd).
    bool cq_wait_fd = true;
    /// The rules the domain is held to: native, verbs or efa (domain_config::rules).
    provider_rules rules = provider_rules::native;
    /// libfabric's shm provider is open beside the domain (domain_config::same_host): every
    /// region registered in the domain is registered there too, and its descriptors carry the
    /// address a peer on the same host reaches it at (remote_region::same_host_address).
    bool same_host = false;
};

/// How the domain's library progress thread waits for work (see domain_config::progress). The
/// thread exists only once a connection or shared CQ asks for it (connection_config::
/// progress_thread, shared_cq_config::progress_thread); one thread serves the whole domain.
///
///   busy      The thread polls its CQs (which drives the provider) in a loop and never sleeps
///             or yields, as a plain libfabric target that busy-polls its CQ. Lowest latency for
///             one-sided operations on providers that need the target to call in (no wake-up),
///             at the price of one core for as long as the thread runs, traffic or not. For a
///             dedicated core: with more runnable threads than cores it competes with the
///             application for the CPU, and latency becomes the scheduler's time slice.
///   adaptive  Sleeps like `blocking`; after each sign of traffic (it read entries, or its
///             reads made a readable CQ fd quiet) it polls like `busy` for progress_spin
///             more. A burst is served at `busy` latency after its first operation, which pays
///             the wake-up. A peer's one-sided reads and writes produce no entry on the
///             target; other signs show them: a CQ fd the reads made quiet (checked each round),
///             and, where CQs have no fd (shm), a remote-access counter (FI_RMA_EVENT) the domain
///             binds to its endpoints, whose change is traffic. A CQ fd that stays readable
///             however often it is read (a dead peer's hang-up, a message waiting for a receive
///             not yet posted) is not traffic: it is looked at again every 1 to 8 ms. Where neither
///             shows them, a stream of only one-sided operations may let the thread sleep between
///             them (per provider: docs/providers.md). While polling, a round that found nothing
///             yields the CPU (sched_yield) to other runnable threads; a yield that outlasts the
///             spin puts the thread to sleep at once (adaptive backs off when other threads want
///             the core). CPU: polling for at most progress_spin after the last sign of traffic; an
///             idle domain uses none.
///   blocking  The thread sleeps between events: no CPU while idle, but every one-sided
///             operation that needs the target's progress pays a thread wake-up
///             (docs/performance.md). Serving a single CQ on tcp or net it sleeps in the
///             provider's own wait (fi_cq_sread), as a plain libfabric target that
///             sleeps does; otherwise (several CQs, sockets, a shared CQ) it arms its CQs and
///             sleeps in epoll on their fds. A new connection, a closing one and a stop wake
///             it with fi_cq_signal.
///
/// The policy is the domain's, not a connection's: one thread serves every connection of the
/// domain, and it either sleeps or it does not. Connections that need another policy go in a
/// domain of their own (open a second domain with it).
///
/// The policy applies to the progress thread only. Waits the application makes itself
/// (completion_queue::wait and next, connection::wait, completion_channel) do not spin: the
/// progress thread already reads those CQs under busy and adaptive, and a second poller would
/// take a second core for nothing. A caller that wants to spin polls instead.
///
/// Threading: the thread is named "remora-progress" (top -H, /proc/self/task/*/comm).
enum class progress_policy : std::uint8_t {
    busy,      ///< polls without sleeping or yielding (one core while it runs)
    adaptive,  ///< sleeps; polls for progress_spin after each sign of traffic (the default)
    blocking,  ///< sleeps between events: no CPU while idle, a wake-up per event
};
/// "busy", "adaptive" or "blocking".
const char* to_string(progress_policy p) noexcept;

/// How domain::open opens a domain.
struct domain_config {
    std::string provider;            ///< empty: FI_PROVIDER, else automatic (see domain)
    std::string node = "127.0.0.1";  ///< local address selecting the NIC
    /// How the library progress thread waits (see progress_policy). The default, adaptive: no
    /// CPU when idle, and a stream of requests served without wake-ups (docs/performance.md has
    /// the figures and when to pick the others).
    progress_policy progress = progress_policy::adaptive;
    /// adaptive: how long the thread keeps polling after the last sign of traffic. Between 1 us
    /// and 1 s, else domain::open fails with errc::invalid_argument. Ignored by the other
    /// policies.
    std::chrono::microseconds progress_spin{100};
    endpoint_type endpoint = endpoint_type::msg;  ///< the kind of endpoint it serves
    /// The rules the domain is held to (see provider_rules); by default REMORA_RULES decides,
    /// so a whole program or test suite runs under verbs' or efa's rules without a change. An
    /// unknown REMORA_RULES value makes domain::open fail with errc::invalid_argument.
    provider_rules rules = provider_rules::environment;
    /// MSG domains (tcp, sockets): also open libfabric's shm provider beside the domain and
    /// register every region there too, so connections to a peer in another process of this
    /// host and user can move their operations over shared memory (the same-host path,
    /// connection_config::same_host). On by default; false: never (the domain does not open shm,
    /// its descriptors carry no same-host address, and its connections stay on its provider).
    /// Not under verbs or efa rules, and not for RDM domains. When shm is not available or fails
    /// to open, the domain opens without it (the reason is logged at log_level::debug);
    /// caps().same_host says whether it is open. The environment variable REMORA_SAME_HOST (off,
    /// on; process: on, and between two connections of one process too) decides for every
    /// domain of the process instead.
    ///
    /// What a peer on the path can do that it cannot over tcp: shm checks no memory key, so it
    /// reaches all of this process's memory, not only what its descriptors name; and a region
    /// destroyed, or a connection closed, stops its writes only once it notices the end (at its
    /// next look at the connection: within about 10 ms while it reads or waits on its CQs).
    /// The path is taken only with a peer that could reach this memory anyway: another process
    /// of the same user on this host (which reaches shm's segments, files of that user, too)
    /// whose connection came from a socket of that user, and never by a process its user's other
    /// processes may not reach through ptrace (Yama, not dumpable, set-id, capabilities: see
    /// connection_config::same_host). So with the defaults a listener offers the path to local
    /// clients of its own user: set this to false (or connection_config::same_host to false per
    /// connection) where such a client must not reach more than its descriptors grant.
    bool same_host = true;
};

/// The local peer: a libfabric provider and NIC opened for one local address.
///
/// A domain is a shared handle: copies refer to the same open provider domain, and every object
/// created from it (regions, listeners, connections) keeps it alive. It reports what the provider
/// can do (caps()) so the rest of the library adapts instead of assuming.
///
/// Endpoint type: a domain serves one kind of endpoint, chosen at open (domain_config::endpoint).
///   - endpoint_type::msg: connected endpoints (FI_EP_MSG, like an RC queue pair): listener and
///     connection::connect.
///   - endpoint_type::rdm: reliable datagram endpoints (FI_EP_RDM) with an address vector:
///     connection::open_peer + connection::attach.
///
/// Either way the operations, completion queues, channels and accounting are the same.
///
/// Provider choice: domain_config::provider if set (matched exactly: "tcp", "shm",
/// "tcp;ofi_rxm", ...); else, for msg, the first of verbs, tcp, sockets that offers connected
/// endpoints on the address, and for rdm the first of verbs;ofi_rxm, efa, tcp;ofi_rxm, net, shm,
/// sockets that offers RDM endpoints there (name shm to get same-host shared memory). The
/// FI_PROVIDER environment variable is libfabric's own filter, applied first: it narrows the
/// automatic choice, and a configured provider it excludes is not found.
///
/// \par Threading
/// A domain may be used from any number of threads at once (libfabric FI_THREAD_SAFE); close()
/// is the exception.
///
/// \see info.cpp
class domain {
  public:
    /// Opens a provider domain (and its fabric) for `config.node`.
    /// \param config provider, local address, endpoint type and progress thread policy
    /// \return the open domain; errc::invalid_argument for a progress_spin out of bounds
    ///         or an unknown REMORA_RULES value (rules: environment);
    ///         errc::not_supported (or the provider's error) when no provider offers the
    ///         endpoint type on that address, or for endpoint_type::msg under efa rules
    static result<domain> open(const domain_config& config = {});
    /// The providers this machine has that offer `type` endpoints with what remora needs
    /// (messages and RMA), on any local address, each named once: the names
    /// domain_config::provider accepts ("tcp", "shm", "tcp;ofi_rxm", ...). FI_PROVIDER narrows
    /// the list as it narrows open(). Empty when there are none. For an error message that says
    /// what there is; open() decides whether one of them serves a given address.
    static std::vector<std::string> providers(endpoint_type type);

    /// What the provider can do. Empty handles (closed, or moved from) report empty caps.
    const provider_caps& caps() const noexcept;
    /// The local address the domain was opened for (empty for an empty handle).
    const std::string& node() const noexcept;
    /// The progress policy the domain was opened with.
    progress_policy progress() const noexcept;
    /// The adaptive policy's spin bound the domain was opened with.
    std::chrono::microseconds progress_spin() const noexcept;

    /// True unless the handle is empty (closed, or moved from).
    explicit operator bool() const noexcept { return impl_ != nullptr; }
    /// True when both are handles of one open domain (copies of one handle).
    friend bool operator==(const domain& a, const domain& b) noexcept {
        return a.impl_ == b.impl_ && a.impl_ != nullptr;
    }

    /// Closes the provider domain (and its fabric) now, and says whether libfabric closed it.
    /// Only the last holder closes: while other copies of this handle or objects made from it
    /// (memory regions, persistent regions, listeners, connections, shared CQs, pools, caches)
    /// still hold the domain, errc::bad_state with their count, and nothing changes: nothing is
    /// torn down under them; destroy them, then close. Otherwise this handle is empty afterwards
    /// and objects made from it fail with errc::bad_state. A provider's refusal to close its
    /// domain is reported (a fabric error; the domain stays open, this handle keeps it, and
    /// close() may be called again); a failure to close the fabric after the domain closed is
    /// reported with the handle emptied. On an empty handle it does nothing and succeeds.
    /// Without close(), the domain closes silently when its last holder goes.
    /// Threading: not concurrently with other calls on this handle object (copies are separate
    /// holders and make it bad_state).
    result<void> close();

  private:
    friend struct internal_access;
    struct impl;
    explicit domain(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
    std::shared_ptr<impl> impl_;
};

}  // namespace remora

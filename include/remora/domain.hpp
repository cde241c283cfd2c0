// remora/domain.hpp — the local peer: a libfabric provider and NIC opened for one local address.
//
// A domain is a shared handle: copies refer to the same open provider domain, and every object
// created from it (regions, listeners, connections) keeps it alive. It reports what the provider
// can do so the rest of the library adapts instead of assuming.
//
// Endpoint type: a domain serves one kind of endpoint, chosen at open (domain_config::endpoint).
//   endpoint_type::msg  connected endpoints (FI_EP_MSG, like an RC queue pair): listener and
//                       connection::connect.
//   endpoint_type::rdm  reliable datagram endpoints (FI_EP_RDM) with an address vector:
//                       connection::open_peer + attach (see connection.hpp). Same-host peers over
//                       shm, tcp;ofi_rxm and net over IP, efa, verbs;ofi_rxm.
// Either way the operations, completion queues, channels and accounting are the same.
//
// Provider choice: domain_config::provider if set (matched exactly: "tcp", "shm",
// "tcp;ofi_rxm", ...); else, for msg, the first of verbs, tcp, sockets that offers connected
// endpoints on the address, and for rdm the first of verbs;ofi_rxm, efa, tcp;ofi_rxm, net, shm,
// sockets that offers RDM endpoints there (name shm to get same-host shared memory). The
// FI_PROVIDER environment variable is libfabric's own filter, applied first: it narrows the
// automatic choice, and a configured provider it excludes is not found.
//
// Threading: a domain may be used from any number of threads at once (libfabric FI_THREAD_SAFE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <remora/flags.hpp>
#include <remora/result.hpp>

namespace remora {

namespace detail {
struct domain_impl;
}

// libfabric's memory-registration requirements (fi_mr(3) mr_mode bits) the provider imposes.
enum class mr_mode : std::uint32_t {
    none = 0,
    local = 1u << 0,      // local buffers must be registered too (FI_MR_LOCAL)
    virt_addr = 1u << 1,  // remote addresses are virtual addresses, else offsets (FI_MR_VIRT_ADDR)
    allocated = 1u << 2,  // only allocated (backed) memory can be registered (FI_MR_ALLOCATED)
    prov_key = 1u << 3,   // the provider picks the keys (FI_MR_PROV_KEY)
    endpoint = 1u << 4,   // registrations must be bound to an endpoint (FI_MR_ENDPOINT)
};
template <>
struct enable_flags<mr_mode> : std::true_type {};

enum class progress_model { automatic, manual, unspecified };

// The kind of endpoint a domain opens (see the head of this file).
enum class endpoint_type : std::uint8_t { msg, rdm };
const char* to_string(endpoint_type t) noexcept;

// What the opened provider can do (measured through fi_getinfo/fi_getopt, never assumed).
struct provider_caps {
    std::string provider;                         // "tcp", "sockets", "verbs", ...
    std::string fabric;                           // fabric name, e.g. "127.0.0.1/32"
    std::string nic;                              // domain name, e.g. "lo"
    endpoint_type endpoint = endpoint_type::msg;  // the endpoint type the domain was opened for
    bool native_atomics = false;
    std::size_t inject_size = 0;
    std::size_t cm_data_size = 0;  // private data limit on connect/accept/reject (0 on rdm)
    std::size_t max_msg_size = 0;
    std::size_t tx_size = 0;  // max send-queue depth
    std::size_t rx_size = 0;  // max receive-queue depth
    std::size_t cq_size = 0;  // max completion-queue depth
    std::size_t iov_limit = 0;
    std::size_t rma_iov_limit = 0;
    std::size_t cq_data_size = 0;  // bytes of immediate data (4 on verbs, 8 on tcp)
    bool rx_cq_data = false;       // immediate data consumes a posted receive (FI_RX_CQ_DATA)
    bool shared_rx = false;        // shared receive contexts are available
    bool rma_pmem = false;         // provider advertises FI_RMA_PMEM
    progress_model control_progress = progress_model::unspecified;
    progress_model data_progress = progress_model::unspecified;
    remora::mr_mode mr_mode = remora::mr_mode::none;
    std::size_t mr_key_size = 0;
    // True when the target side must call into libfabric for one-sided traffic to land
    // (tcp, net and every provider reporting manual data progress: shm and tcp;ofi_rxm on rdm);
    // then run a progress thread on the target (connection_config::progress_thread).
    bool target_needs_progress = false;
    // The provider's CQs can be blocked on through an fd. False on shm: its CQs are polled
    // (completion_queue::wait and channels look again after a short back-off, up to 1 ms; the
    // progress thread looks every millisecond), and completion_queue::fd() is -1 unless the
    // progress thread owns the CQ (then it is the thread's eventfd).
    bool cq_wait_fd = true;
};

struct domain_config {
    std::string provider;            // empty: FI_PROVIDER, else automatic (see the file head)
    std::string node = "127.0.0.1";  // local address selecting the NIC
    endpoint_type endpoint = endpoint_type::msg;
};

class domain {
  public:
    [[nodiscard]] static result<domain> open(const domain_config& config = {});

    [[nodiscard]] const provider_caps& caps() const noexcept;
    [[nodiscard]] const std::string& node() const noexcept;

    // Internal: other remora objects reach the provider through these.
    explicit domain(std::shared_ptr<detail::domain_impl> impl) : impl_(std::move(impl)) {}
    [[nodiscard]] const std::shared_ptr<detail::domain_impl>& impl() const noexcept {
        return impl_;
    }

  private:
    std::shared_ptr<detail::domain_impl> impl_;
};

}  // namespace remora

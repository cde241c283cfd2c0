// SPDX-License-Identifier: BSD-3-Clause
// src/core/domain_impl.hpp — the state behind domain and memory_region, and small helpers every
// endpoint file uses (remora::detail; unique_fd is the base layer's, base/unique_fd.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include <remora/domain.hpp>
#include <remora/memory_region.hpp>

#include "base/internal_access.hpp"
#include "base/unique_fd.hpp"
#include "fabric/cntr.hpp"
#include "fabric/fabric.hpp"

struct remora::domain::impl {};
struct remora::memory_region::impl {};

namespace remora::detail {

class progress_engine;
struct domain_impl;
struct region_impl;
REMORA_HANDLE_STATE(domain, domain_impl);
REMORA_HANDLE_STATE(memory_region, region_impl);

struct domain_impl : internal_access::opaque<domain> {
    info_ptr info;  // the provider/NIC chosen; template for endpoints
    fabric_handle fabric;
    domain_handle domain;
    provider_caps caps;
    std::string node;
    std::mutex progress_mu;
    std::unique_ptr<progress_engine> progress;           // started on first use
    progress_policy policy = progress_policy::adaptive;  // how `progress` waits
    std::chrono::microseconds spin{100};                 // adaptive: polling after traffic
    // sockets notices a dead peer only when the application calls into it: blocking waits then
    // wake at this interval to look (0: block for the whole timeout).
    std::chrono::milliseconds liveness_interval{0};
    // The provider keeps posted receives when a connection goes away (sockets): waits then also
    // watch the connection's event queue, so remora can cancel them. tcp flushes everything
    // itself, and watching its event queue in every wait cost 3 ms tail latency (measured).
    bool watch_disconnects = false;
    // The provider's CQs have no wait fd (shm): they are opened without a wait object and
    // polled (waits back off between looks; the progress thread looks every tick).
    bool cq_polled = false;
    // RDM opened with FI_SOURCE: CQs read each message's source (cq_impl::check_source).
    bool source_checked = false;
    // fi_cq_sread asking for no entry waits for one without reading it (the util CQ: tcp, net):
    // a blocking progress thread with one CQ waits in the provider that way (progress.cpp).
    bool cq_sread_waits = false;
    // The provider rules the domain is held to (fabric/rules.hpp), or null (native).
    const rules_profile* rules = nullptr;
    // adaptive on shm (domain.cpp says why there only): counts the peers' reads and writes of every
    // endpoint of the domain (bind_remote_read | bind_remote_write), which leave no CQ entry on
    // this side. The progress thread reads it while polling: a change is traffic and extends the
    // spin. Empty elsewhere.
    cntr_handle rma_events;
    // MSG domains on tcp or sockets with domain_config::same_host: an shm RDM domain opened
    // beside this one (its own fabric), in which every region is registered too (region_impl::
    // same_host_mr), for connections to a peer on the same host. Null when off or unavailable.
    std::shared_ptr<domain_impl> same_host;

    ~domain_impl();
};

struct region_impl : internal_access::opaque<memory_region> {
    std::shared_ptr<domain_impl> dom;
    std::span<std::byte> memory;
    usage uses = usage::none;
    mr_handle mr;
    void* desc = nullptr;  // mr_desc, for mr_mode::local providers
    std::uint64_t key = 0;
    // The same memory registered in the domain's same-host shm domain (domain_impl::same_host)
    // with the same access and key `key`, at its virtual address; empty when the domain has
    // none or shm refused it. Closed before `dom` (declared after it), so before that domain.
    mr_handle same_host_mr;
};

// now() + timeout, with the timeout clamped to [0, one year] (no overflow, no negative waits).
std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout);

}  // namespace remora::detail

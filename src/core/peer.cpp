// SPDX-License-Identifier: BSD-3-Clause
#include <remora/connection.hpp>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/impl.hpp"
#include "core/liveness.hpp"
#include "core/srq_impl.hpp"
#include "fabric/av.hpp"
#include "fabric/cq.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/info.hpp"

// RDM peers: an RDM endpoint with an address vector of its own behind the connection API
// (open_peer, local_address, attach), and what differs from a connected endpoint: no event
// queue (event_fd is an eventfd close() signals), and close(), which closes the endpoint and
// completes every outstanding operation itself.

namespace remora {
namespace detail {

void rdm_nudge(connection_impl& c) {
    bool drove = false;
    if (!in_completion()) {  // inside a completion the CQ is being read: do not re-enter it
        for (cq_impl* q : {c.cq.get(), c.rcq.get()}) {
            if (q != nullptr && !q->progress_owned()) {
                q->drive();
                drove = true;
            }
        }
    }
    if (!drove) {
        std::this_thread::yield();  // the CQs' owner drives them
    }
}

bool rdm_retry::again(connection_impl& c) {
    // The clock is read on the first round and then every 8th: a round is well under a
    // microsecond while the pauses are short, and the patience is 50 ms.
    if (rounds_ == 0) {
        deadline_ = std::chrono::steady_clock::now() + rdm_setup_patience;
    } else if (rounds_ % 8 == 0 && std::chrono::steady_clock::now() >= deadline_) {
        return false;
    }
    ++rounds_;
    rdm_nudge(c);  // yields by itself when the CQs are someone else's to drive
    if (rounds_ <= 16) {
        // 2, 4, ... 64 pauses, then 64 per round: a few hundred nanoseconds at most.
        const unsigned pauses = 1U << std::min(rounds_, 6U);
        for (unsigned i = 0; i < pauses; ++i) {
            cpu_relax();
        }
    } else {
        std::this_thread::yield();  // the peer is slow (or shares this CPU): let it run
    }
    return true;
}

result<void> connection_impl::setup_rdm() {
    const int ret = av_open(dom->domain.get(), preferred_av_type(dom->info.get()), 1, av);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_av_open for an RDM endpoint on " + dom->caps.provider));
    }
    return {};
}

void connection_impl::close_endpoint(bool deliver) {
    if (closed.exchange(true)) {
        return;
    }
    open = false;
    // The progress thread lets go of the CQs first (as teardown does): tcp;ofi_rxm crashed in
    // fi_trywait on a CQ whose endpoint had been closed (found by the fault sweep). The CQs
    // stay progress-owned: the pump below and the application's reads still go through the
    // ring. (Before the reader locks: the progress thread pumps under its own lock.)
    unwatch_progress();
    // The CQs' readers step aside while the endpoint goes: a progress thread (or a shared CQ's
    // reader) may be running a completion hook that posts on it.
    cq_impl* qs[2] = {cq.get(), rcq.get() != cq.get() ? rcq.get() : nullptr};
    std::unique_lock<std::mutex> locks[2];
    for (int i = 0; i < 2; ++i) {
        if (qs[i] != nullptr) {
            locks[i] = qs[i]->reader_lock();
        }
    }
    // After fi_close the provider neither touches the operations' memory nor reports them:
    // each record still taken completes here, canceled, through its CQ's reader (the backlog
    // is read before the provider; a provider entry for a record finished this way is dropped).
    // A connected endpoint keeps the statuses its shutdown gave (tcp flushes everything it
    // holds; sockets ends some operations disconnected): what the provider has read so far goes
    // to the backlog first, then what closing the endpoint writes (tcp: canceled). The canceled
    // entries below come after them, so an operation the provider reported keeps its status and
    // the later duplicate is dropped (finish).
    if (!rdm) {
        for (cq_impl* q : qs) {
            if (q != nullptr) {
                q->drain_to_backlog();
            }
        }
    }
    ep.reset();
    av.reset();
    if (!rdm) {
        for (cq_impl* q : qs) {
            if (q != nullptr) {
                q->drain_to_backlog();
            }
        }
    }
    // A lost RDM peer's operations end disconnected (as on a connection that failed), the rest
    // canceled.
    const int status = lost.load() ? fabric_errno::not_connected : fabric_errno::canceled;
    for (auto [rec, is_recv] : ops.taken()) {
        cq_impl* q = is_recv && rcq ? rcq.get() : cq.get();
        q->backlog.push_back({rec, is_recv ? cq_flag_recv : 0, 0, 0, status});
    }
    for (auto& l : locks) {
        if (l.owns_lock()) {
            l.unlock();
        }
    }
    for (cq_impl* q : qs) {
        if (q == nullptr) {
            continue;
        }
        if (q->progress_owned()) {
            q->pump(nullptr, deliver);  // into the ring, and wakes its waiters
        } else if (q->backlog_head < q->backlog.size()) {
            if (!q->polled) {
                cq_signal(q->cq.get());  // a reader blocked on the CQ's fd looks at the backlog
            } else if (q->drive_signals.load()) {
                q->signal_notify();  // fd() is the eventfd (cq_impl::user_fd)
            }
        }
    }
    parked_gate(*this).wake_owner(this, errc::disconnected);  // parked posts end (parked.cpp)
    signal_end();
}

void connection_impl::signal_end() noexcept {
    if (rdm_event.get() >= 0 && !rdm_signalled.exchange(true)) {
        std::uint64_t one = 1;
        [[maybe_unused]] ssize_t w = ::write(rdm_event.get(), &one, sizeof(one));
    }
}

}  // namespace detail

namespace detail {

result<std::unique_ptr<connection_impl>> open_rdm_peer(const std::shared_ptr<domain_impl>& dom,
                                                       const connection_config& config) {
    auto impl = std::make_unique<connection_impl>(dom);
    impl->rdm = true;
    impl->recv_from = fabric_addr_unspec;
    impl->rdm_event = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (impl->rdm_event.get() < 0) {
        return fail(errc::provider_error,
                    std::string("open_peer: eventfd: ") + std::strerror(errno));
    }
    if (auto r = impl->setup(dom->info.get(), config); !r) {
        return fail(r.error());
    }
    std::vector<std::byte> name(256);
    std::size_t len = name.size();
    int ret = getname(impl->ep.as_fid(), name.data(), &len);
    if (ret == -fabric_errno::too_small) {
        name.resize(len);
        ret = getname(impl->ep.as_fid(), name.data(), &len);
    }
    if (ret != 0) {
        return fail(fabric_error(ret, "open_peer: fi_getname for the endpoint's address"));
    }
    name.resize(len);
    impl->local_addr = std::move(name);
    if (auto r = offer_liveness_word(*impl); !r) {  // peers' liveness probes read its word
        return fail(r.error());
    }
    return impl;
}

}  // namespace detail

result<connection> connection::open_peer(const domain& dom, const connection_config& config) {
    using namespace detail;
    const auto& caps = dom.caps();
    if (caps.endpoint != endpoint_type::rdm) {
        return fail(errc::not_supported,
                    "open_peer: the domain was opened for connected (MSG) endpoints (" +
                        caps.provider +
                        "); open one with domain_config::endpoint = endpoint_type::rdm, or use "
                        "listener and connection::connect");
    }
    auto impl = open_rdm_peer(detail::shared_impl_of(dom), config);
    if (!impl) {
        return fail(impl.error());
    }
    return internal_access::wrap<connection>(std::move(*impl));
}

std::span<const std::byte> connection::local_address() const noexcept {
    return detail::impl_of(*this)->local_addr;
}

namespace detail {

result<void> attach_peer(connection_impl& c, std::span<const std::byte> peer_address) {
    if (!c.rdm) {
        return fail(errc::not_supported,
                    "attach: a connected (MSG) connection has its peer already; attach is for RDM "
                    "endpoints from open_peer");
    }
    if (c.closed.load()) {
        return fail(errc::bad_state, "attach: the endpoint is closed");
    }
    if (c.attached.load()) {
        return fail(errc::bad_state,
                    "attach: a peer is already attached (one RDM endpoint serves one peer; open "
                    "another with open_peer)");
    }
    const std::uint32_t format = describe(c.dom->info.get()).addr_format;
    const std::span<const std::byte> own =
        std::span<const std::byte>(c.local_addr).first(c.local_addr.size() - c.local_trailer);
    auto provider_part = take_liveness_word(c, peer_address);
    if (!provider_part) {
        return fail(provider_part.error());
    }
    peer_address = *provider_part;
    if (!address_plausible(format, peer_address, own)) {
        return fail(errc::invalid_argument,
                    "attach: " + std::to_string(peer_address.size()) + " bytes are not a " +
                        address_format_name(format) + " address of " + c.dom->caps.provider +
                        " (its addresses are " + std::to_string(own.size()) +
                        " bytes long here; pass the peer's local_address)");
    }
    if (c.dom->source_checked) {
        // Entry 0 is this endpoint's own address: shm reports a sender that is in no entry as
        // entry 0, which must not be the peer's.
        fabric_addr self = fabric_addr_notavail;
        if (const int r = av_insert(c.av.get(), own.data(), &self); r != 1) {
            return fail(fabric_error(r < 0 ? r : -fabric_errno::invalid,
                                     "attach: fi_av_insert of the endpoint's own address"));
        }
    }
    fabric_addr addr = fabric_addr_notavail;
    const int ret = av_insert(c.av.get(), peer_address.data(), &addr);
    if (ret != 1) {
        if (ret == 0 || ret == -fabric_errno::invalid) {
            return fail(errc::invalid_argument,
                        "attach: " + c.dom->caps.provider + " refused the peer's address");
        }
        return fail(fabric_error(ret, "attach: fi_av_insert of the peer's address"));
    }
    if (c.srq && c.dom->source_checked) {
        // The queue's receives serve every peer attached to it and are read with the source as
        // each endpoint's address vector names it: this peer must have the entry every other
        // one has (an address vector of tables gives each peer entry 1, after the endpoint's
        // own).
        std::uint64_t first = srq_no_peer;
        auto& source = c.srq->ops.source;
        if (!source.compare_exchange_strong(first, addr, std::memory_order_relaxed) &&
            first != addr) {
            return fail(errc::not_supported,
                        "attach: " + c.dom->caps.provider +
                            " numbers this peer's address differently from the other peers of "
                            "its shared_receive_queue (an address vector of type map); use a "
                            "receive_pool");
        }
    }
    c.peer = addr;
    // Receives take the attached peer's messages only (FI_DIRECTED_RECV where the provider
    // honours it), and a message from anyone else fails its receive as the CQ is read
    // (cq_impl::refuse_stranger). Receives are refused before attach, so all of them check.
    c.recv_from = c.dom->source_checked ? addr : fabric_addr_unspec;
    c.ops.source.store(addr, std::memory_order_relaxed);
    c.ops.check_source.store(c.dom->source_checked, std::memory_order_relaxed);
    c.attached = true;
    c.open = true;
    start_liveness(c);
    return {};
}

}  // namespace detail

result<void> connection::attach(std::span<const std::byte> peer_address) {
    return detail::attach_peer(*detail::impl_of(*this), peer_address);
}

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
#include <remora/connection.hpp>

#include <cstdio>
#include <cstring>
#include <random>

#include <unistd.h>

#include "core/impl.hpp"
#include "core/liveness.hpp"
#include "core/same_host_path.hpp"
#include "core/srq_impl.hpp"
#include "fabric/cq.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/eq.hpp"
#include "fabric/info.hpp"

namespace remora {

const char* to_string(conn_event e) noexcept {
    switch (e) {
        case conn_event::established:
            return "established";
        case conn_event::closed:
            return "closed";
        case conn_event::lost:
            return "lost";
        case conn_event::rejected:
            return "rejected";
        case conn_event::refused:
            return "refused";
        case conn_event::unreachable:
            return "unreachable";
    }
    return "unknown";
}

namespace detail {

namespace {

using namespace std::chrono;

}  // namespace

std::string shm_process_prefix() {
    static const std::uint64_t nonce = [] {
        std::random_device rd;
        return (std::uint64_t{rd()} << 32) | rd();
    }();
    char prefix[64];
    std::snprintf(prefix, sizeof prefix, "remora_%ld_%016llx_", static_cast<long>(::getpid()),
                  static_cast<unsigned long long>(nonce));
    return prefix;
}

domain connection_impl::make_domain_handle(const std::shared_ptr<domain_impl>& d) {
    return internal_access::wrap<domain>(d);
}

namespace {

// The domain's progress thread, started on first use (caller holds dom.progress_mu).
result<void> start_progress(domain_impl& dom) {
    if (!dom.progress) {
        auto engine = progress_engine::start(dom.policy, dom.spin, dom.rma_events.get());
        if (!engine) {
            return fail(engine.error());
        }
        dom.progress = std::move(*engine);
    }
    return {};
}

}  // namespace

result<void> connection_impl::setup(const fabric_info* info, const connection_config& cfg) {
    auto eff = effective_config(cfg, dom->caps);
    if (!eff) {
        return fail(eff.error());
    }
    config = *eff;
    if (!rdm && config.liveness.count() > 0) {
        return fail(errc::not_supported,
                    "connection_config: liveness watches RDM peers (open_peer); a connected (MSG) "
                    "endpoint learns of its peer's end from the provider (docs/providers.md)");
    }
    internal_sends = addon_sends(config);
    router = router_of(config);

    int ret = 0;
    if (rdm) {
        // Its address vector first: tcp;ofi_rxm crashes closing an endpoint that has none.
        if (auto r = setup_rdm(); !r) {
            return r;
        }
    } else {  // an RDM endpoint has no connection events
        ret = eq_open(dom->fabric.get(), 16, eq);
        if (ret != 0) {
            return fail(fabric_error(ret, "fi_eq_open"));
        }
        ret = wait_fd(eq.as_fid(), &eq_fd);
        if (ret != 0) {
            return fail(fabric_error(ret, "fi_control FI_GETWAIT on an EQ"));
        }
    }

    ops.tag = config.tag;
    // A shared CQ takes a reservation for every entry that completes there; a private one is
    // sized for them all.
    auto attach = [&](const shared_completion_queue& shared, cq_kind kind, std::size_t need,
                      std::shared_ptr<cq_impl>& q, std::size_t& reserved) -> result<void> {
        if (!shared) {
            auto r =
                cq_impl::open(dom, kind, kind == cq_kind::cq ? config.cq_size : config.rcq_size,
                              config.tag, config.channel == channel_mode::none);
            if (!r) {
                return fail(r.error());
            }
            q = std::move(*r);
            q->conn = this;
            return {};
        }
        if (detail::impl_of(shared)->dom != dom) {
            return fail(errc::invalid_argument, std::string("connection_config: shared_") +
                                                    (kind == cq_kind::cq ? "cq" : "rcq") +
                                                    " belongs to another domain");
        }
        const std::string what =
            kind == cq_kind::cq
                ? "connection_config::shared_cq: send queue " + std::to_string(config.sq_size) +
                      (internal_sends != 0 ? " + internal sends " + std::to_string(internal_sends)
                                           : std::string()) +
                      (config.rcq ? "" : " + receive queue " + std::to_string(config.rq_size))
                : "connection_config::shared_rcq: receive queue " + std::to_string(config.rq_size);
        if (auto r = detail::impl_of(shared)->attach_connection(this, need, what); !r) {
            return r;
        }
        q = detail::shared_impl_of(shared);
        reserved = need;
        return {};
    };
    if (auto r =
            attach(config.shared_cq, cq_kind::cq, cq_entries(config, cq_kind::cq), cq, cq_reserved);
        !r) {
        return r;
    }
    if (config.srq) {
        srq = detail::shared_impl_of(config.srq);
        if (srq->dom != dom) {
            srq.reset();
            return fail(errc::invalid_argument, "connection_config: srq belongs to another domain");
        }
        // A receive CQ of the connection's own when asked for (cfg.rcq: it tells which
        // connection a message came from), else the queue's CQ.
        if (auto r = attach(cfg.rcq ? shared_completion_queue{} : srq->cq, cq_kind::rcq, 0, rcq,
                            rcq_reserved);
            !r) {
            srq.reset();
            return r;
        }
        ++srq->attached;
    } else if (config.rcq) {
        if (auto r = attach(config.shared_rcq, cq_kind::rcq, cq_entries(config, cq_kind::rcq), rcq,
                            rcq_reserved);
            !r) {
            return r;
        }
    }
    // Verbs rules: peers' writes with immediate data take posted receives, counted where the
    // connection's receives complete on a CQ of its own (a shared CQ cannot tell whose write an
    // entry without context is; a shared receive queue's receives are not the connection's).
    if (dom->rules != nullptr && dom->rules->rx_cq_data && !srq) {
        cq_impl* q = rcq ? rcq.get() : cq.get();
        q->rx_rule = !q->shared;
    }
    // The progress thread takes its CQs before anything waits on them (their wait fd changes).
    // It also answers the target service's requests and fills receive pools, which arrive as
    // completions, so it runs on every provider when asked for.
    if (config.progress_thread) {
        std::lock_guard lock(dom->progress_mu);
        if (auto r = start_progress(*dom); !r) {
            return r;
        }
        progress_watched = true;  // before watching: teardown unwatches whatever got watched
        for (cq_impl* q : {cq.get(), rcq.get()}) {
            if (q != nullptr && !q->shared) {  // a shared CQ's mode is its own
                if (auto r = dom->progress->watch(q); !r) {
                    return r;
                }
            }
        }
    }
    if (config.channel == channel_mode::shared) {
        if (config.shared_channel) {
            channel = detail::shared_impl_of(config.shared_channel);
        } else {
            auto ch = completion_channel::create();
            if (!ch) {
                return fail(ch.error());
            }
            channel = detail::shared_impl_of(*ch);
        }
        for (cq_impl* q : {cq.get(), rcq.get()}) {
            if (q != nullptr) {
                if (auto r = channel->attach(q); !r) {
                    return r;
                }
                q->channel = channel;
            }
        }
    }
    // The liveness probe's entry sits beside the addon's internal sends (queue::service).
    ops.reset(config.sq_size, internal_sends + probe_sends(config), config.rq_size);

    info_ptr ep_info = endpoint_info(info, dom->info.get(),
                                     {.tx = config.sq_size + internal_sends + probe_sends(config),
                                      .rx = config.rq_size,
                                      // A routed send's mark takes one segment more.
                                      .max_sge = config.max_sge + (router != nullptr ? 1u : 0u),
                                      .shared_rx = srq != nullptr});
    if (!ep_info) {
        return fail(errc::provider_error, "fi_dupinfo failed: out of memory");
    }
    shm = rdm && dom->caps.provider == "shm";
    if (shm) {
        // From the domain's source address shm names every process's endpoints alike
        // ("fi_shm://127.0.0.1:0:N"), and two processes then collide (fi_enable: EBUSY). The
        // process id alone is not enough either: a process that dies without closing leaves
        // its region in /dev/shm, and once the id is reused shm sees a live owner in it and
        // refuses the name (EBUSY, seen in CI). So: process id (to find a dead process's
        // regions), a random word drawn once per process, and a counter.
        static std::atomic<std::uint64_t> shm_endpoints{0};
        const std::string name =
            "fi_shm://" + shm_process_prefix() + std::to_string(shm_endpoints.fetch_add(1));
        set_source_name(ep_info.get(), name.c_str());
    }
    this->ep_info = std::move(ep_info);
    ret = open_endpoint(dom->domain.get(), this->ep_info.get(), ep);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_endpoint"));
    }
    endpoint_opened = true;
    // An RDM endpoint is bound to its address vector, a connected one to its event queue.
    // RDM: no reader may drive the CQs while the endpoint is bound to them but not enabled
    // (shm progresses every endpoint bound to a CQ it reads, and one not enabled yet has no
    // shared-memory region: it crashed in libfabric when a progress thread's tick fell there).
    std::unique_lock<std::mutex> readers[2];
    if (rdm) {
        readers[0] = cq->reader_lock();
        if (rcq && rcq != cq) {
            readers[1] = rcq->reader_lock();
        }
    }
    auto failed = [&](int r, const char* what) {
        ep.reset();  // unbound again before the readers go on
        return fail(fabric_error(r, what));
    };
    ret = ep_bind(ep.get(), rdm ? av.as_fid() : eq.as_fid(), 0);
    if (ret != 0 && rdm) {
        // tcp;ofi_rxm and net crash closing an RDM endpoint that has no address vector: the
        // bind is tried again (a transient failure), and an endpoint that still has none is
        // abandoned to libfabric rather than closed (a leak, not a crash).
        ret = ep_bind(ep.get(), av.as_fid(), 0);
        if (ret != 0) {
            ep.abandon();
            return fail(fabric_error(ret, "fi_ep_bind of the address vector"));
        }
    }
    if (ret == 0) {
        ret = ep_bind(ep.get(), cq->cq.as_fid(),
                      bind_transmit | bind_selective_completion | (rcq ? 0 : bind_recv));
    }
    if (ret == 0 && rcq) {
        // Receives always complete; with a shared receive context tcp (1.17) reports nothing
        // for them under bind_selective_completion, whatever the post's flags.
        ret =
            ep_bind(ep.get(), rcq->cq.as_fid(), bind_recv | (srq ? 0 : bind_selective_completion));
    }
    if (ret == 0 && srq) {
        ret = ep_bind(ep.get(), &srq->srx.get()->fid, 0);
    }
    if (ret != 0) {
        return failed(ret, "fi_ep_bind");
    }
    ret = ep_enable(ep.get());
    if (ret != 0) {
        return failed(ret, "fi_enable");
    }
    if (dom->rma_events) {
        // The peers' reads and writes count there (domain_impl::rma_events). Bound once the
        // endpoint is enabled: the progress thread reads the counter, and a read drives every
        // endpoint bound to it; shm crashed driving one not enabled yet. Best effort: an
        // endpoint the provider refuses it to keeps working, its one-sided traffic unseen.
        [[maybe_unused]] const int counted =
            ep_bind(ep.get(), dom->rma_events.as_fid(), bind_remote_read | bind_remote_write);
    }
    return {};
}

result<void> connection_impl::drive_by_thread() {
    std::lock_guard lock(dom->progress_mu);
    if (auto r = start_progress(*dom); !r) {
        return r;
    }
    progress_watched = true;  // teardown unwatches them
    for (cq_impl* q : {cq.get(), rcq.get()}) {
        if (q != nullptr && !q->shared) {
            dom->progress->drive(q);
        }
    }
    return {};
}

void connection_impl::unwatch_progress() {
    if (progress_watched) {
        std::lock_guard lock(dom->progress_mu);
        for (cq_impl* q : {cq.get(), rcq.get()}) {
            if (q != nullptr && !q->shared && dom->progress) {
                dom->progress->unwatch(q);
            }
        }
        progress_watched = false;
    }
}

void connection_impl::teardown() {
    unwatch_progress();
    if (channel) {
        for (cq_impl* q : {cq.get(), rcq.get()}) {
            if (q != nullptr) {
                channel->detach(q);
            }
        }
        channel->detach_events(this);
    }
    if ((cq && cq->shared) || (rcq && rcq->shared)) {
        ops.retired = true;  // what of ours is still in a shared CQ is dropped from now on
    }
    ep.reset();  // tcp writes every operation still queued to the CQs (canceled) right here
    av.reset();  // after the endpoint bound to it
    if (cq && cq->shared) {
        cq->detach_connection(std::exchange(cq_reserved, 0));
    }
    if (rcq && rcq->shared) {
        rcq->detach_connection(std::exchange(rcq_reserved, 0));
    }
    rcq.reset();
    cq.reset();
    eq.reset();
    channel.reset();
    if (srq) {
        --srq->attached;
        srq.reset();
    }
}

connection_extension& connection_impl::extension(const void* key,
                                                 std::unique_ptr<connection_extension> (*make)()) {
    std::lock_guard lock(ext_mu);
    for (auto& [k, e] : extensions) {
        if (k == key) {
            return *e;
        }
    }
    extensions.emplace_back(key, make());
    return *extensions.back().second;
}

std::chrono::steady_clock::time_point connection_impl::tick_extensions(
    std::chrono::steady_clock::time_point now) {
    ext_deadline.store(std::numeric_limits<std::int64_t>::max());  // before: posts lower it again
    auto next = std::chrono::steady_clock::time_point::max();
    for (std::size_t i = 0; connection_extension* e = extension_at(i); ++i) {
        next = std::min(next, e->tick(now));
    }
    expect_deadline(next);
    return next;
}

std::size_t connection_impl::extensions_busy() const noexcept {
    std::size_t n = 0;
    for (std::size_t i = 0; connection_extension* e = extension_at(i); ++i) {
        n += e->busy();
    }
    return n;
}

connection_extension* connection_impl::extension_at(std::size_t i) const noexcept {
    // Extensions are only added, and live as long as the connection: the one found stays valid
    // once ext_mu is released. Calling into it without ext_mu keeps the lock order one way (an
    // extension's own locks may be held while it looks up another extension).
    std::lock_guard lock(ext_mu);
    return i < extensions.size() ? extensions[i].second.get() : nullptr;
}

connection_impl::connection_impl(std::shared_ptr<domain_impl> d)
    : dom(std::move(d)), dom_handle(make_domain_handle(dom)), region_dom(dom.get()) {}

connection_impl::~connection_impl() {
    if (same_host) {
        same_host_forget(*this);
    }
    {
        std::vector<std::function<void(connection_impl&)>> retire;
        {
            std::lock_guard lock(hooks_mu);
            retire.swap(on_retire);
        }
        for (auto& h : retire) {
            h(*this);
        }
    }
    parked_gate(*this).close_owner(this, errc::disconnected);  // parked posts end (parked.cpp)
    if ((cq && cq->shared) || (rcq && rcq->shared)) {
        // From here on, what of ours is read from a shared CQ is dropped: its contexts,
        // callbacks and hooks may be gone. The canceled receives below are among them. Once
        // retired, no reader runs a hook of ours (which could post on the endpoint) and no
        // shared CQ's wait drives us.
        ops.retired = true;
        for (cq_impl* q : {cq.get(), rcq.get()}) {
            if (q != nullptr && q->shared) {
                q->retire_connection(this);
            }
        }
    }
    // Callbacks of ours read but not yet run are dropped with us; one running on another thread
    // finishes first (one running on this thread is the caller: a callback destroying its own
    // connection). No reader lock is held while callbacks run (cq_impl::deliver).
    for (cq_impl* q : {cq.get(), rcq.get()}) {
        if (q != nullptr) {
            q->drop_deliveries(&ops);
        }
    }
    if (open.exchange(false) && ep && !rdm) {
        ep_shutdown(ep.get());
    }
    // sockets keeps (and on close leaks) receives still posted: cancel them first.
    cancel_receives();
    teardown();
    std::vector<std::function<void(connection_impl&)>> hooks;
    {
        std::lock_guard lock(hooks_mu);
        hooks.swap(on_destroy);
    }
    for (auto& h : hooks) {
        h(*this);
    }
}
}  // namespace detail

std::uint32_t cq_entries(const connection_config& c, cq_kind kind) noexcept {
    const bool rcq = c.rcq || static_cast<bool>(c.shared_rcq);
    if (kind == cq_kind::rcq) {
        return rcq ? c.rq_size : 0;
    }
    return c.sq_size + detail::addon_sends(c) + detail::probe_sends(c) + (rcq ? 0 : c.rq_size);
}

// ---------------------------------------------------------------- public API: lifecycle

// Every handle that takes a state over tells it where it is now (completion_queue::connection).
connection::connection(std::unique_ptr<impl, impl_deleter> p) noexcept : impl_(std::move(p)) {
    if (impl_) {
        detail::impl_of(*this)->handle = this;
    }
}
void connection::impl_deleter::operator()(impl* p) const noexcept {
    internal_access::cast<connection>(p)->handle = nullptr;
    internal_access::destroy<connection>(p);
}
connection::connection(connection&& other) noexcept : impl_(std::move(other.impl_)) {
    if (impl_) {
        detail::impl_of(*this)->handle = this;
    }
}
connection& connection::operator=(connection&& other) noexcept {
    if (this != &other) {
        impl_ = std::move(other.impl_);
        if (impl_) {
            detail::impl_of(*this)->handle = this;
        }
    }
    return *this;
}
connection::~connection() = default;

completion_queue& connection::cq() noexcept {
    return detail::impl_of(*this)->cq->handle;
}
completion_queue* connection::rcq() noexcept {
    return detail::impl_of(*this)->rcq ? &detail::impl_of(*this)->rcq->handle : nullptr;
}

namespace detail {

result<void> connection_impl::close_msg() {
    auto& c = *this;
    {
        std::lock_guard lock(c.event_mu);
        if (c.connecting.load()) {
            // Ends the setup: its outcome is conn_event::closed, errc::canceled.
            c.fail_setup_locked(error(errc::canceled,
                                      "the connection was closed while it was "
                                      "being set up"),
                                conn_event::closed);
            return {};  // the endpoint goes with the connection (see poll_setup_locked)
        }
    }
    int ret = 0;
    if (c.open.exchange(false) && c.ep) {
        ret = ep_shutdown(c.ep.get());
        c.cancel_receives();
    }
    // fi_shutdown does not end everything (sockets keeps a write that waits for the peer's
    // acknowledgement until the link returns): the endpoint goes now, and what it still held
    // completes canceled (close_endpoint). Also after the peer's close or loss (open is false
    // then, the endpoint still there).
    if (c.ep) {
        c.close_endpoint();
    }
    {
        // This side's conn_event::closed: the provider's own shutdown event may have gone with
        // the endpoint, so close() queues one (once) unless the end is known already.
        std::lock_guard lock(c.event_mu);
        if (c.established && !c.ended && c.eq) {
            c.ended = true;
            c.own_close_event = eq_write_shutdown(c.eq.get());
            if (!c.own_close_event) {
                c.pending_event = conn_event::closed;  // next_event still reports it
            }
        }
    }
    if (ret != 0 && ret != -fabric_errno::not_connected) {
        return fail(fabric_error(ret, "fi_shutdown"));
    }
    return {};
}

}  // namespace detail

result<void> connection::close() {
    auto& c = *detail::impl_of(*this);
    if (c.control) {
        return detail::same_host_close(c);
    }
    if (c.rdm) {
        c.close_endpoint();
        return {};
    }
    return c.close_msg();
}
bool connection::is_open() const noexcept {
    return impl_ && detail::impl_of(*this)->open.load();
}
bool connection::same_host() const noexcept {
    return impl_ && detail::impl_of(*this)->same_host;
}
const connection_config& connection::config() const noexcept {
    return detail::impl_of(*this)->config;
}
std::size_t connection::in_flight() const noexcept {
    if (detail::impl_of(*this)->internal_sends != 0) {
        // The receives are the extension's own, always posted; count its requests instead.
        return detail::impl_of(*this)->ops.in_use(detail::queue::send) +
               detail::impl_of(*this)->extensions_busy() +
               detail::impl_of(*this)->ops.undelivered.load(std::memory_order_relaxed);
    }
    // Not the liveness probe's entry (queue::service without an addon's internal sends).
    return detail::impl_of(*this)->ops.in_use(detail::queue::send) +
           detail::impl_of(*this)->ops.in_use(detail::queue::recv) +
           detail::impl_of(*this)->ops.undelivered.load(std::memory_order_relaxed);
}
const domain& connection::dom() const noexcept {
    return detail::impl_of(*this)->dom_handle;
}

}  // namespace remora

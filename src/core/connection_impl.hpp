// SPDX-License-Identifier: BSD-3-Clause
// src/core/connection_impl.hpp — the state behind connection, and the posting steps its operations
// share (remora::detail).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <remora/connection.hpp>
#include <remora/domain.hpp>
#include "base/park_gate.hpp"

#include "core/cq_impl.hpp"
#include "core/domain_impl.hpp"
#include "core/extension.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/eq.hpp"
#include "fabric/fabric.hpp"
#include "ops/holding.hpp"
#include "ops/op_pool.hpp"
#include "ops/reservation.hpp"

struct remora::connection::impl {};

namespace remora::detail {

struct connection_impl;
REMORA_HANDLE_STATE(connection, connection_impl);

inline constexpr std::size_t max_segments = 16;  // scatter-gather entries gathered on the stack
struct eq_event;
struct srq_impl;

struct connection_impl : internal_access::opaque<connection> {
    std::shared_ptr<domain_impl> dom;
    domain dom_handle;
    // The domain whose regions this connection's operations take as local buffers: dom, or for
    // a same-host connection the user's domain (its regions are registered for shm too).
    const domain_impl* region_dom = nullptr;
    // A same-host connection (same_host_path.hpp): this is the shm RDM peer that carries the
    // operations, `control` the connected endpoint the connection was set up on, which carries
    // its events (the peer's close, its loss) and is shut down by close(). Remote ranges are
    // reached at their same-host address (remote_region::same_host_address). Null otherwise.
    std::unique_ptr<connection_impl> control;
    bool same_host = false;
    // The public handle holding this state now (completion_queue::connection): set when a handle
    // is made or moved into, null once the handle's destruction began.
    connection* handle = nullptr;
    connection_config config;
    // Send entries of the addon that asked for them (connection_addon::internal_sends,
    // queue::service); with any, the connection's receives are the addon's too.
    std::uint32_t internal_sends = 0;
    // The addon that routes the application's messages beside its own (message_router), or
    // null: with internal sends, the application's send and recv are then refused.
    const message_router* router = nullptr;
    eq_handle eq;
    int eq_fd = -1;
    std::shared_ptr<cq_impl> cq;   // private, or a shared_completion_queue's
    std::shared_ptr<cq_impl> rcq;  // likewise
    std::size_t cq_reserved = 0;   // entries reserved on a shared CQ / RCQ
    std::size_t rcq_reserved = 0;
    std::shared_ptr<channel_impl> channel;  // shared mode only
    std::shared_ptr<srq_impl> srq;          // connection_config::srq: receives come from it
    // Verbs rules (cq_impl::rx_rule): posted receives that peers' writes with immediate data
    // would have consumed on verbs. They stay posted here, so they are counted apart.
    std::atomic<std::size_t> rx_taken{0};
    info_ptr ep_info;  // outlives ep: sockets keeps a shallow copy of it
    // RDM peers (open_peer): the endpoint's address vector (closed after it), the peer's entry
    // there (the destination of every post), and the endpoint's own address. On MSG: no AV,
    // peer 0 (libfabric ignores it on a connected endpoint).
    bool rdm = false;
    bool shm = false;  // an RDM peer over shm (a same-host connection's too)
    av_handle av;
    ep_handle ep;
    fabric_addr peer = 0;
    fabric_addr recv_from = 0;  // fabric_addr_unspec on RDM: a receive takes anyone's message
    std::atomic<bool> attached{false};
    std::atomic<bool> closed{false};    // close() ran (RDM: the endpoint is gone)
    std::vector<std::byte> local_addr;  // RDM: the provider's name, then the liveness trailer
    std::size_t local_trailer = 0;      // the trailer's bytes (liveness.hpp), 0 without one
    unique_fd rdm_event;  // RDM: event_fd(), an eventfd signalled once by close() or a loss
    // RDM: the event next_event reports once rdm_event fires (closed, or lost), and whether it
    // was signalled (once: a close() after a loss adds no event).
    std::atomic<conn_event> rdm_end{conn_event::closed};
    std::atomic<bool> rdm_signalled{false};
    // RDM, connection_config::liveness (liveness.cpp): the peer did not answer; the reason later
    // posts give (set under event_mu before `lost`).
    std::atomic<bool> lost{false};
    std::string lost_reason;
    void signal_end() noexcept;  // writes rdm_event, once
    // When the liveness check is due next (steady_clock ticks; max: not running): the progress
    // thread's look (liveness_progress).
    std::atomic<std::int64_t> live_due{std::numeric_limits<std::int64_t>::max()};
    std::vector<std::byte> peer_data;
    // The same-host offer of the setup (core/same_host.hpp): offered (client: it sent one; target:
    // it was sent one), agreed by both sides, and the client's nonce (zero without an offer). Set
    // while the connection is set up (a client's `agreed` once FI_CONNECTED is read), then fixed.
    bool same_host_offered = false;
    bool same_host_agreed = false;
    // Client, while a blocking connect offers the path: its shm peer (progressed while it waits
    // for the accept: the target proves the path on it), and the target's shm address from the
    // accept data.
    std::unique_ptr<connection_impl> same_host_peer;
    std::vector<std::byte> same_host_address;
    std::array<std::byte, 16> setup_nonce{};
    std::atomic<bool> open{false};
    std::atomic<bool> progress_watched{false};
    op_pool ops;
    park_gate own_gate;  // parked posts wait here without a shared budget (see parked_gate)
    channel_source source{nullptr, this};
    mutable std::mutex event_mu;
    std::optional<conn_event> pending_event;  // read by a CQ or channel wait, for next_event
    bool established = false;                 // connected: later events are poll_events'
    // The connection's end (closed or lost) was taken from the event queue: it is reported once,
    // and later shutdown events are dropped. close() closes the endpoint, which may take the
    // provider's own shutdown event with it: it queues one of its own instead (own_close_event).
    bool ended = false;
    bool own_close_event = false;
    // Asynchronous setup (connect_async, accept_async): true from the call until the outcome is
    // known (FI_CONNECTED, an error event, the deadline, close()). Receives may be posted
    // meanwhile; other operations are refused (check_open). Under event_mu, but read unlocked.
    std::atomic<bool> connecting{false};
    bool client = false;
    std::chrono::steady_clock::time_point setup_deadline{};
    std::optional<error> setup_err;           // the failed setup's error (set once, under event_mu)
    std::optional<conn_event> setup_outcome;  // the outcome, once known
    std::optional<conn_event> setup_event;    // the outcome, until next_event reports it
    bool setup_news = false;                  // the outcome, until a channel wait reports it
    // Extensions of the layers above (persistence), one per key, created on first use; destroyed
    // after the destructor's body (the endpoint is closed by then). See extension.hpp.
    mutable std::mutex ext_mu;
    std::vector<std::pair<const void*, std::unique_ptr<connection_extension>>> extensions;
    // Run once the endpoint is closed, when the connection is destroyed: a receive_pool takes
    // back the slots still posted here (the provider no longer writes into them).
    std::mutex hooks_mu;
    std::vector<std::function<void(connection_impl&)>> on_destroy;
    // Run first when the connection is destroyed, before anything of it is torn down: a
    // receive_pool stops posting on it and waits until no other thread does (its rebalance or
    // dispatch could otherwise use the endpoint while teardown closes it).
    std::vector<std::function<void(connection_impl&)>> on_retire;
    std::mutex signal_mu;  // selective signalling: decision, post and ring in one order
    std::uint32_t since_signal = 0;

    // Reads the event queue without blocking. A close or loss marks the connection closed,
    // cancels receives the provider did not flush, and is kept for next_event().
    void poll_events();
    // Calls into the provider for this connection (a zero-length CQ read) and reads events.
    void drive();
    // Arms the event queue's fd (fi_trywait) so it may be blocked on; when events are pending
    // it reads them (poll_events) and returns false: do not block on the fd this time.
    bool arm_events();
    void cancel_receives();
    // The extension registered under `key` (the address of something of its layer's own),
    // created with make() on first use.
    connection_extension& extension(const void* key,
                                    std::unique_ptr<connection_extension> (*make)());
    // The sum of the extensions' busy().
    std::size_t extensions_busy() const noexcept;
    // The i-th extension, or null past the last; extensions_busy and tick_extensions call each
    // one without ext_mu held.
    connection_extension* extension_at(std::size_t i) const noexcept;
    // The earliest deadline of an extension's request (steady_clock ticks; max: none). Readers
    // of the connection's CQ call tick_extensions once it has passed; an extension that posts
    // a request with a deadline lowers it (expect_deadline).
    std::atomic<std::int64_t> ext_deadline{std::numeric_limits<std::int64_t>::max()};
    void expect_deadline(std::chrono::steady_clock::time_point t) noexcept {
        const std::int64_t v = t.time_since_epoch().count();
        std::int64_t cur = ext_deadline.load(std::memory_order_relaxed);
        while (v < cur && !ext_deadline.compare_exchange_weak(cur, v)) {
        }
    }
    bool deadline_passed(std::chrono::steady_clock::time_point now) const noexcept {
        return now.time_since_epoch().count() >= ext_deadline.load(std::memory_order_relaxed);
    }
    // Runs every extension's tick(now) and keeps the earliest deadline they return.
    std::chrono::steady_clock::time_point tick_extensions(
        std::chrono::steady_clock::time_point now);

    explicit connection_impl(std::shared_ptr<domain_impl> d);
    ~connection_impl();
    static domain make_domain_handle(const std::shared_ptr<domain_impl>& d);

    // Creates CQs, channel and endpoint for `info` (client: from fi_getinfo; server: from the
    // connection request) and enables it.
    result<void> setup(const fabric_info* info, const connection_config& cfg);
    // RDM: opens the endpoint's address vector (setup calls it before opening the endpoint,
    // and binds the two before enabling it).
    result<void> setup_rdm();
    // close(), once a connected endpoint is shut down (RDM: at once): no more posts; the
    // endpoint (and an RDM one's AV) is closed (the provider writes nothing into the operations'
    // memory from then on), and every operation still holding a record completes through its
    // CQ's reader, giving its entries back: with the status the provider gave it (connected
    // endpoints: the shutdown's flush), else errc::canceled. Idempotent. `deliver` false: a
    // progress-owned CQ's callbacks for them run at its next read, not here (the caller may hold
    // a lock a callback could need: a completion channel's).
    void close_endpoint(bool deliver = true);
    // setup opened the endpoint (fi_endpoint succeeded), even if a later step failed and closed
    // it again: an accepting side's endpoint took the connection request's handle then.
    bool endpoint_opened = false;
    // The domain's progress thread drives this connection's own (unshared) CQs without reading
    // them (progress_engine::drive): the application reads them as without one.
    result<void> drive_by_thread();
    // The progress thread lets go of this connection's own (unshared) CQs, if it watched them;
    // teardown and close_endpoint call it before closing the endpoint. Takes dom->progress_mu.
    void unwatch_progress();
    // Waits on the EQ for FI_CONNECTED; returns the event data (peer private data).
    result<void> await_connected(std::chrono::milliseconds timeout, bool client);
    // Marks an asynchronous setup under way (deadline: now + connect_timeout) and lets the
    // channel, if any, watch the event queue. Called before the request is sent or accepted.
    result<void> start_async();
    // Asynchronous setup: looks at the event queue (and the deadline) without blocking; once
    // the outcome is known, keeps it for next_event and the channel. Caller holds event_mu.
    void poll_setup_locked();
    // Ends an asynchronous setup with `e` (conn_event `what`). Caller holds event_mu.
    void fail_setup_locked(error e, conn_event what);
    void teardown();
    // connection::next_event and close() of a connected (MSG) endpoint.
    result<conn_event> next_event_msg(std::chrono::milliseconds timeout);
    result<void> close_msg();
};

// What every shm endpoint name of this process starts with (after "fi_shm://"): the process id
// (to find a dead process's regions in /dev/shm), a random word drawn once per process, and then
// a counter (connection.cpp).
std::string shm_process_prefix();

// connection::open_peer and attach on a domain's state (peer.cpp): an RDM endpoint of `dom`,
// and attaching it to the peer at `peer_address` (a local_address).
result<std::unique_ptr<connection_impl>> open_rdm_peer(const std::shared_ptr<domain_impl>& dom,
                                                       const connection_config& config);
result<void> attach_peer(connection_impl& c, std::span<const std::byte> peer_address);

// Validates and completes a connection_config against the provider's limits
// (connection_config.cpp).
result<connection_config> effective_config(const connection_config& in, const provider_caps& caps);
// The configuration a same-host connection's shm peer is opened with: the application's `app`,
// with the queue depths its connected endpoint was given (`eff`: effective_config for the user's
// provider), so the connection has and reports the depths its provider grants, not shm's. An
// addon's receives are sized from the application's rq_size again (connection_config.cpp).
connection_config same_host_sizes(const connection_config& app, const connection_config& eff);
// The internal sends the configuration's addons ask for (connection_config.cpp).
std::uint32_t addon_sends(const connection_config& c) noexcept;
// Checks an atomic's target word (open connection, range, usage, 8-byte alignment) and, when
// given, its result destination (atomics.cpp): what every path of an atomic checks first.
result<void> check_atomic(const connection_impl& c, const char* what, const remote_region& dst,
                          std::uint64_t dst_offset, const memory_region* result,
                          std::size_t result_offset);

// Posts a library-internal send or receive of [buf, buf + len) (registered with `desc`) on `c`
// with an entry from `q`; its completion goes to hook(context, c). A receive posted here does
// not drive the provider (it may run inside a completion hook).
result<void> post_internal(connection_impl& c, queue q, void* buf, std::size_t len, void* desc,
                           hook_fn hook, void* context);

// RDM providers answer a post with -fabric_errno::again while they set up the path to a new peer
// (tcp;ofi_rxm connects on the first post, shm exchanges a connection request) or while the
// peer's incoming queue is full (shm: its command queue, until the peer's progress drains it):
// the queue entry is remora's already, so drive the provider and post again, for up to
// rdm_setup_patience; a peer that does not progress meanwhile leaves it would_block.
// Between tries it backs off (rdm_retry): each round drives this endpoint's CQs, then pauses
// the CPU a growing number of times and, after a few rounds, yields, so a spinning poster does
// not keep the peer's queue lock (which the peer's progress needs to drain it) or the clock busy.
inline constexpr std::chrono::milliseconds rdm_setup_patience{50};
void rdm_nudge(connection_impl& c);
class rdm_retry {
  public:
    // Drives, then waits before the next try; false once rdm_setup_patience has passed since the
    // first call.
    bool again(connection_impl& c);

  private:
    unsigned rounds_ = 0;
    std::chrono::steady_clock::time_point deadline_{};
};
template <class Post>
[[gnu::always_inline]] inline ssize_t post_to_peer(connection_impl& c, Post&& post) {
    ssize_t ret = post();
    if (ret != -fabric_errno::again || !c.rdm) [[likely]] {
        return ret;
    }
    rdm_retry retry;
    while (ret == -fabric_errno::again && retry.again(c)) {
        ret = post();
    }
    return ret;
}

// Posting steps shared by every operation: the connection is open; reservation
// (ops/reservation.hpp) takes the operation's record (its queue and CQ entries) and its
// connection_config::slots units, all or nothing, and arms its `done`; submit turns the provider's
// return into the result and gives the record back on failure. `receive`: a receive may also be
// posted while an asynchronous setup is under way (it is kept and takes the first messages); every
// other operation is refused then (errc::bad_state).
result<void> check_open(const connection_impl& c, const char* what, bool receive = false);
// check_open for an operation that offers parking: a parked post (opts.park_until set, blocking
// or park_mode::queue) also passes while an asynchronous setup is under way, and waits for its
// outcome in reserve_parked / post_or_queue (establishment: it proceeds; failure: it ends with the
// setup's error). Without park_until it is check_open.
result<void> check_open_for(const connection_impl& c, const op_options& opts, const char* what);
// Where a post on `c` reaches `r` at `offset`: the descriptor's address, or on a same-host
// connection the address the target's shm registration has (same_host_path.hpp).
inline std::uint64_t remote_start(const connection_impl& c, const remote_region& r,
                                  std::uint64_t offset) noexcept {
    return (c.same_host ? r.same_host_address() : r.address()) + offset;
}
// A same-host connection reaches only descriptors with a same-host address: errc::not_supported
// for one without (the target registered it without its same-host domain). Checked with the
// descriptor's range, before anything is posted.
result<void> check_same_host(const connection_impl& c, const remote_region& r, const char* what);
inline bool lacks_same_host(const connection_impl& c, const remote_region& r) noexcept {
    return c.same_host && r.same_host_address() == 0;
}
// What the application's domain offers (its caps()). A same-host connection keeps the
// capabilities and limits of the provider it was set up on: its posts are checked against
// these and against shm's (c.dom->caps), whichever is stricter.
inline const provider_caps& user_caps(const connection_impl& c) noexcept {
    return c.region_dom->caps;
}
// The flags of a read that must come back only after everything posted before it on the
// connection was placed (a read-after-write flush). shm (an RDM peer over it, a same-host
// connection) serves a plain read at once but queues a write with immediate data for the peer:
// such a read is posted delivery-complete, which puts it in the same queue, behind them.
inline post_flags ordered_read_flags(const connection_impl& c) noexcept {
    return post_completion | (c.shm ? post_delivered : 0);
}
// The flags of a native atomic write. shm (an RDM peer over it, a same-host connection) queues it
// for the target and would complete it at once, before the word changed (a read behind it,
// served from the target's memory directly, could still find the old value; a publish would
// complete before its flag): it completes once the target applied it, as the provider's own
// atomics do (compare_swap and fetch_add wait for their result).
inline post_flags atomic_write_flags(const connection_impl& c) noexcept {
    return post_completion | (c.shm ? post_delivered : 0);
}
// Whether the connection's atomics are the provider's own: its endpoint's provider has them and,
// on a same-host connection, the provider it was set up on too (else they go through a service).
inline bool native_atomics(const connection_impl& c) noexcept {
    return c.dom->caps.native_atomics && user_caps(c).native_atomics;
}

// While an asynchronous setup is under way: errc::would_block for a parked post's try (it waits
// for the setup's outcome, which notifies the gate or ends its waiters), else nothing.
inline result<void> not_while_setting_up(const connection_impl& c, const char* what) {
    if (!c.open.load() && c.connecting.load()) {
        return fail(errc::would_block,
                    std::string(what) + ": the connection is being set up (waiting for it)");
    }
    return {};
}
result<op_record*> reserve_full(connection_impl& c, const op_options& opts, remora::op kind,
                                bool recv, const char* what);
// Reservation of an application's operation (reserve_full: what refuses it, parking, a shared
// budget). Inline fast path: without at_post, parking or connection_config::slots nothing but a
// full queue refuses, so a record taken is the outcome.
[[gnu::always_inline]] inline result<op_record*> reserve_entries(connection_impl& c,
                                                                 const op_options& opts,
                                                                 remora::op kind, bool recv,
                                                                 const char* what) {
    if (opts.report != completion_mode::at_post && opts.park != park_mode::queue &&
        opts.park_until == std::chrono::steady_clock::time_point{} && !c.config.slots) [[likely]] {
        if (op_record* r = c.ops.take(recv ? queue::recv : queue::send); r != nullptr) [[likely]] {
            arm_user(*r, opts.context, opts.callback, kind, opts.report == completion_mode::always);
            return r;
        }
    }
    return reserve_full(c, opts, kind, recv, what);
}
// `call` is the libfabric call that posted (its failure names it). A failed post gives its
// record back (submit_failed, out of line: the posting fast path is the test of `ret`).
result<void> submit_failed(connection_impl& c, op_record* r, ssize_t ret, const char* what,
                           bool recv, fabric_call call);
inline result<void> submit(connection_impl& c, op_record* r, ssize_t ret, const char* what,
                           bool recv, fabric_call call) {
    if (ret == 0) [[likely]] {
        return {};
    }
    return submit_failed(c, r, ret, what, recv, call);
}
// Parked posts (src/core/parked.cpp): the gate this connection's parked posts wait on (its
// budget's, or its own), and reservation that waits there when opts.park_until is set.
park_gate& parked_gate(connection_impl& c) noexcept;
// attempt() is the reservation (a result: the record or records); it runs once without
// opts.park_until, and inside a completion callback (which must not wait: a refusal stays
// would_block, saying why); otherwise it runs as the gate's head until it gives anything but
// would_block, the connection closes (disconnected), the deadline passes (timed_out) or
// connection::cancel_parked() ends it (canceled).
template <class Attempt>
auto reserve_parked(connection_impl& c, const op_options& opts, const char* what, Attempt&& attempt,
                    bool receive = false) -> decltype(attempt()) {
    if (opts.park == park_mode::queue) {
        // The operations that offer it run post_or_queue, which clears it before reservation.
        return fail(errc::invalid_argument,
                    std::string(what) +
                        ": park_mode::queue is offered on read, write, write_with_imm, send, "
                        "send_with_imm, recv, gather_write and publish");
    }
    if (opts.park_until == std::chrono::steady_clock::time_point{}) {
        return attempt();
    }
    if (in_completion()) {
        if (auto r = check_open(c, what, receive); !r) {
            return fail(r.error());  // a callback does not wait for a setup either
        }
        auto r = attempt();
        if (!r && r.error() == errc::would_block) {
            return fail(errc::would_block,
                        r.error().message() +
                            " (a post from inside a completion callback does not park: it would "
                            "hold up the thread that gives units back)");
        }
        return r;
    }
    park_gate& g = parked_gate(c);
    c.ops.gate.store(&g);
    return g.run(&c, opts.park_until, what, [&]() -> decltype(attempt()) {
        if (auto r = receive ? result<void>{} : not_while_setting_up(c, what); !r) {
            return fail(r.error());
        }
        if (auto r = check_open(c, what, receive); !r) {
            return fail(r.error());
        }
        return attempt();
    });
}
// op_options::park == park_mode::queue (connection.hpp): `again(opts)` is the whole post without
// parking (it validates, reserves and posts, or gives would_block); it is tried at once when
// nobody waits, else queued on the connection's gate, whose worker tries it again after
// give-backs. An operation never posted reports through its callback (`kind`, the context).
template <class Again>
result<void> post_or_queue(connection_impl& c, const op_options& opts, remora::op kind,
                           const char* what, Again again) {
    if (opts.callback == nullptr || opts.park_until == std::chrono::steady_clock::time_point{}) {
        return fail(
            errc::invalid_argument,
            std::string(what) +
                ": park_mode::queue needs a callback (it reports the operation, posted "
                "later or never) and park_until (its deadline; time_point::max() for none)");
    }
    if (auto r = check_open_for(c, opts, what); !r) {
        return r;
    }
    op_options now = opts;
    now.park_until = {};
    now.park = park_mode::block;
    park_gate& g = parked_gate(c);
    c.ops.gate.store(&g);  // give-backs notify it from now on
    park_gate::queued_post q;
    q.owner = &c;
    q.deadline = opts.park_until;
    q.what = what;
    q.attempt = [again = std::move(again), now, conn = &c, what]() -> result<void> {
        if (auto r = not_while_setting_up(*conn, what); !r) {
            return r;  // queued until the setup's outcome (it notifies the gate or ends us)
        }
        return again(now);
    };
    // A queued post that is never posted reports like an internal hook's callback (the
    // connection outlives it: close_owner ends its queued posts first).
    q.end = [callback = opts.callback, context = opts.context, kind,
             pool = &c.ops](const error& e) {
        completion done;
        done.op = kind;
        done.status = e.code();
        done.context = context;
        run_callback(callback, done, pool, nullptr);  // on the gate's thread: no reader's lock
    };
    auto r = g.queue(std::move(q));
    if (!r) {
        return fail(r.error());
    }
    return {};
}

// The operation builders behind the public posts. `bounce`, when given, is the buffer the
// local segments point into (write_copy, send_copy): see post_maybe_quiet.
enum class rma_kind { read, write, write_imm };
result<void> post_rma(connection_impl& c, rma_kind kind, std::span<const local_segment> local,
                      const remote_region& remote, std::uint64_t remote_offset, std::uint64_t imm,
                      const op_options& opts, op_holding* bounce = nullptr);
// `routed`: posted by the connection's message_router (its mark first: one segment more than
// max_sge may be given).
result<void> post_send(connection_impl& c, std::span<const local_segment> local, bool with_imm,
                       std::uint64_t imm, const op_options& opts, op_holding* bounce = nullptr,
                       bool routed = false);
// op_options::more: post_more on this post (connection.hpp says what ends the burst).
inline post_flags more_flag(const op_options& opts) noexcept {
    return opts.more ? post_more : 0;
}

// First byte of the private data of every reject() remora sends.
inline constexpr std::byte reject_marker{0x52};

// Reads one event from an EQ with a timeout. Returns the event number and fills `buf`; an error
// event is returned as the error (with its err_data copied into `err_data`).
struct eq_event {
    cm_event event{};
    fabric_info* info = nullptr;  // a connection request's only; owner must free
    std::vector<std::byte> data;
};
result<eq_event> read_eq(fid_eq* eq, std::chrono::milliseconds timeout, std::size_t max_data,
                         std::vector<std::byte>* err_data);

}  // namespace remora::detail

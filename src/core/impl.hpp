// src/core/impl.hpp — the state behind remora's public handles (remora::detail).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <remora/completion_channel.hpp>
#include <remora/completion_queue.hpp>
#include <remora/connection.hpp>
#include <remora/domain.hpp>
#include <remora/memory_region.hpp>

#include "core/extension.hpp"
#include "core/holding.hpp"
#include "fabric/fabric.hpp"

namespace remora::detail {

class progress_engine;

struct domain_impl {
    info_ptr info;  // the provider/NIC chosen; template for endpoints
    fabric_handle fabric;
    domain_handle domain;
    provider_caps caps;
    std::string node;
    std::mutex progress_mu;
    std::unique_ptr<progress_engine> progress;  // started on first use
    std::atomic<std::uint64_t> next_key{1};     // requested keys when the provider wants ours
    // sockets notices a dead peer only when the application calls into it: blocking waits then
    // wake at this interval to look (0: block for the whole timeout).
    std::chrono::milliseconds liveness_interval{0};
    // The provider keeps posted receives when a connection goes away (sockets): waits then also
    // watch the connection's event queue, so remora can cancel them. tcp flushes everything
    // itself, and watching its event queue in every wait cost 3 ms tail latency (measured).
    bool watch_disconnects = false;

    ~domain_impl();
};

struct region_impl {
    std::shared_ptr<domain_impl> dom;
    std::span<std::byte> memory;
    usage uses = usage::none;
    mr_handle mr;
    void* desc = nullptr;  // fi_mr_desc, for FI_MR_LOCAL providers
    std::uint64_t key = 0;
};

// A file descriptor closed on destruction.
class unique_fd {
  public:
    unique_fd() = default;
    explicit unique_fd(int fd) noexcept : fd_(fd) {}
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    unique_fd& operator=(unique_fd&& o) noexcept;
    ~unique_fd();
    int get() const noexcept { return fd_; }

  private:
    int fd_ = -1;
};

struct channel_impl;
struct connection_impl;

class op_pool;

// The libfabric context of every operation remora posts: it lives from post to completion and
// stands for the operation's send-queue or receive-queue entry, and so for its completion-queue
// entry (a connection's CQs are sized for all its records). Completions map back through it to
// the user's context and callback; a disconnect cancels the receives still holding one.
struct op_record {
    fi_context2 fi{};  // first: the provider's context area
    op_pool* owner = nullptr;
    void* user_context = nullptr;
    void (*callback)(const completion&) = nullptr;
    // Library-internal operations (the target service's messages): the completion goes here with
    // user_context; it may rewrite it and returns whether the application sees it.
    bool (*internal)(void* context, completion& c) = nullptr;
    // Operands of a native compare-and-swap or fetch-add: they must live until completion.
    std::uint64_t operands[2]{};
    remora::op kind = op::unknown;
    bool report_success = true;
    bool in_use = false;
    // Selective signalling (connection_config::signal_every): an operation posted without a
    // completion keeps its record (and so its queue and CQ entries: an error still completes)
    // until a later signalled operation's completion reclaims it. `mark` orders them.
    bool unsignaled = false;
    bool reclaims = false;  // signalled while selective signalling is on: reclaims older ones
    std::uint64_t mark = 0;
    op_holdings held;  // returned when the completion is read (or the post fails)
};

// Which queue entries an operation takes: the application's sends (sq_size), those reserved for
// the target service's messages (service_depth), or receives (rq_size).
enum class queue : std::uint8_t { send, service, recv };

// A connection's records, one per queue entry. Taking one is the admission check; none free
// means that queue is full (would_block). Fixed at setup: posting allocates nothing.
class op_pool {
  public:
    void reset(std::size_t sends, std::size_t service, std::size_t recvs);
    op_record* take(queue q);
    void give(op_record* r) noexcept;
    // Records of receives still posted (to cancel them on disconnect).
    std::vector<op_record*> posted_recvs();
    // Selective signalling, under connection_impl::signal_mu: an unsignalled post's record
    // joins the ring (undo with unpush_quiet if the post fails); a signalled one is marked to
    // reclaim everything before it when its completion is read (reclaim).
    void push_quiet(op_record* r);
    void unpush_quiet(op_record* r);
    void mark_signalled(op_record* r);
    void reclaim(std::uint64_t mark);
    std::size_t in_use() const;
    std::size_t in_use(queue q) const;

    // The connection's tag, reported in every completion of its records.
    std::uint64_t tag = 0;
    // Set while a connection on a shared CQ is destroyed: completions of its records still in
    // that CQ are discarded (their contexts, callbacks and hooks may be gone) and their records
    // and units given back.
    std::atomic<bool> retired{false};

  private:
    mutable std::mutex mu_;
    std::vector<op_record> records_;  // sends, service sends, receives; never reallocated
    std::vector<std::uint32_t> free_[3];
    std::size_t sends_ = 0;
    std::size_t service_ = 0;
    queue queue_of(std::size_t index) const noexcept;
    struct quiet_entry {
        op_record* rec;
        std::uint64_t mark;
    };
    std::vector<quiet_entry> quiet_;  // ring, capacity 2 x sends (stale entries included)
    std::size_t quiet_head_ = 0;
    std::size_t quiet_count_ = 0;
    std::uint64_t quiet_next_ = 0;
    bool quiet_valid(const quiet_entry& e) const noexcept {
        return e.rec->in_use && e.rec->unsignaled && e.rec->mark == e.mark;
    }
};

// What an epoll entry of a completion channel stands for: a CQ, or a connection's event queue.
struct channel_source {
    cq_impl* cq = nullptr;
    connection_impl* conn = nullptr;
};

struct cq_impl {
    std::shared_ptr<domain_impl> dom;
    cq_handle cq;
    int fd = -1;  // the CQ's wait fd (owned by libfabric)
    cq_kind kind = cq_kind::cq;
    std::size_t size = 0;
    std::uint64_t tag = 0;
    std::shared_ptr<channel_impl> channel;  // set when the channel is shared
    completion_queue handle{this};
    connection_impl* conn = nullptr;  // the owning connection: its events also wake waits
    channel_source source{this, nullptr};

    // Completions read while waiting (so a wait can tell a real wake-up from a no_completion
    // one) and handed out by the next poll: a ring sized at creation (no allocation on the data
    // path). A shared CQ's ring also holds what a detaching connection's drain read for others.
    static constexpr std::size_t stash_capacity = 16;
    std::vector<completion> stash = std::vector<completion>(stash_capacity);
    std::size_t stash_head = 0;
    std::size_t stash_count = 0;
    bool reaped = false;  // the last fill_stash read entries (reported or not)
    void stash_push(const completion& c) noexcept {
        stash[(stash_head + stash_count) % stash.size()] = c;
        ++stash_count;
    }
    completion stash_pop() noexcept {
        completion c = stash[stash_head];
        stash_head = (stash_head + 1) % stash.size();
        --stash_count;
        return c;
    }

    // Provider entries that a detaching connection's drain read for other connections: the
    // CQ's reader finishes them (their callbacks and hooks run on its thread) before it reads
    // the provider again. Filled on teardown only.
    struct raw_entry {
        void* context;
        std::uint64_t flags;
        std::size_t len;
        std::uint64_t data;
        int err;  // 0, or the error of an error entry
    };
    std::vector<raw_entry> backlog;
    std::size_t backlog_head = 0;
    // Shared CQs: the connection (its op_pool) each stash / owned entry came from, so a
    // destroyed connection's completions read but not yet handed out are purged.
    std::vector<const op_pool*> stash_from;
    std::vector<const op_pool*> owned_from;

    // A CQ shared by several connections (shared_completion_queue): one budget of entries,
    // reserved by each attached connection for all its queue entries that complete here, so
    // attaching one that could overflow it fails. Reads take read_mu (a detaching connection
    // drains the CQ from its own thread).
    bool shared = false;
    std::mutex read_mu;
    // Connections retiring or draining now: readers step aside (a busy poller re-taking
    // read_mu in a loop would starve them; std::mutex is not fair).
    std::atomic<int> detaching{0};
    std::mutex budget_mu;
    std::size_t reserved = 0;
    std::vector<connection_impl*> attached;
    // Reserves `need` entries for `c`, or fails with errc::too_large naming the shortfall.
    result<void> attach_connection(connection_impl* c, std::size_t need, const std::string& what);
    // First step of destroying `c` (its op_pool already retired): no wait drives it any more,
    // and a reader finishing one of its completions is done before this returns.
    void retire_connection(connection_impl* c);
    // Once `c`'s endpoint is closed (tcp then has written everything it held to the CQ): drops
    // `c`'s completions wherever they are (provider, backlog, stash or ring), moves the others'
    // provider entries to the backlog for the CQ's reader, and returns `need` entries.
    void detach_connection(std::size_t need);

    // With a library progress thread the thread is this CQ's only reader (one progress owner:
    // a second thread in fi_cq_read/fi_trywait resets the CQ's wait signal under a blocked
    // waiter). It moves completions into `owned`, a ring sized to the CQ, and signals `notify`;
    // the application polls the ring and waits on the eventfd.
    progress_engine* progress = nullptr;
    std::mutex owned_mu;
    std::vector<completion> owned;  // ring; capacity == size
    std::size_t owned_head = 0;
    std::size_t owned_count = 0;
    unique_fd notify;  // eventfd, readable while `owned` is not empty

    bool progress_owned() const noexcept { return progress != nullptr; }
    // The fd a waiter blocks on: the provider's, or the eventfd of a progress-owned CQ.
    int wait_fd() const noexcept { return progress_owned() ? notify.get() : fd; }
    // Progress thread: reads the provider's CQ into the ring; true if anything was added.
    bool pump(bool* reaped = nullptr);  // *reaped: entries were read (reported or not)
    std::size_t owned_ready();
    // Calls into the provider (a zero-length read) unless the progress thread owns this CQ.
    void drive();

    cq_impl() = default;
    cq_impl(const cq_impl&) = delete;
    cq_impl& operator=(const cq_impl&) = delete;
    ~cq_impl();  // a shared CQ leaves the progress thread here
    static result<std::shared_ptr<cq_impl>> open(const std::shared_ptr<domain_impl>& dom,
                                                 cq_kind kind, std::size_t size, std::uint64_t tag);
    // Reads up to n completions from the provider (errors included) into out; returns how many
    // are for the caller (callbacks and dropped ones are not), and how many were read in
    // `consumed`.
    result<std::size_t> read_provider(completion* out, std::size_t n,
                                      std::size_t* consumed = nullptr,
                                      const op_pool** from = nullptr);
    // Calls into the provider for the connections attached to a shared CQ: their events
    // (a disconnect cancels receives the provider does not flush).
    void drive_attached();
    // Fills the stash if empty; returns the number stashed.
    result<std::size_t> fill_stash();
    // fi_trywait on this CQ alone: true when it is safe to block on fd.
    result<bool> trywait();
    result<std::size_t> poll(std::span<completion> out);
    result<std::size_t> wait(std::chrono::milliseconds timeout);
};

struct channel_impl {
    unique_fd epfd;
    mutable std::mutex mu;
    std::vector<cq_impl*> cqs;
    std::vector<connection_impl*> conns;  // whose event queues also wake the channel
    std::size_t next = 0;                 // round-robin start

    result<void> attach(cq_impl* cq);
    void detach(cq_impl* cq);
    result<void> attach_events(connection_impl* conn);
    void detach_events(connection_impl* conn);
    result<channel_event> wait(std::chrono::milliseconds timeout);
};

// A library-owned thread that drives progress for connections whose target side must call into
// libfabric (tcp): it blocks on their CQ fds (no spin when idle) and is the owner of those CQs:
// it reads them into each CQ's ring and signals the ring's eventfd.
class progress_engine {
  public:
    static result<std::unique_ptr<progress_engine>> start();
    ~progress_engine();
    // Takes ownership of reading `cq` (see cq_impl::progress).
    result<void> watch(cq_impl* cq);
    void unwatch(cq_impl* cq);
    // Asks the thread to drive `cq` soon: for a receive posted from inside a completion hook,
    // where driving it on the spot could deadlock (tcp delivers a message that waited for a
    // receive only when the provider is called after the post).
    void kick(cq_impl* cq);

  private:
    progress_engine() = default;
    void run();
    unique_fd epfd_;
    unique_fd wake_;  // eventfd to stop the thread
    std::mutex mu_;
    std::vector<cq_impl*> watched_;
    std::mutex kick_mu_;
    std::vector<cq_impl*> kicked_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

struct connection_impl {
    std::shared_ptr<domain_impl> dom;
    domain dom_handle;
    connection_config config;
    eq_handle eq;
    int eq_fd = -1;
    std::shared_ptr<cq_impl> cq;   // private, or a shared_completion_queue's
    std::shared_ptr<cq_impl> rcq;  // likewise
    std::size_t cq_reserved = 0;   // entries reserved on a shared CQ / RCQ
    std::size_t rcq_reserved = 0;
    std::shared_ptr<channel_impl> channel;  // shared mode only
    info_ptr ep_info;                       // outlives ep: sockets keeps a shallow copy of it
    ep_handle ep;
    std::vector<std::byte> peer_data;
    std::atomic<bool> open{false};
    bool progress_watched = false;
    op_pool ops;
    channel_source source{nullptr, this};
    std::mutex event_mu;
    std::optional<conn_event> pending_event;  // read by a CQ or channel wait, for next_event
    bool established = false;                 // FI_CONNECTED seen: later events are poll_events'
    // Extensions of the layers above (persistence), one per key, created on first use; destroyed
    // after the destructor's body (the endpoint is closed by then). See extension.hpp.
    mutable std::mutex ext_mu;
    std::vector<std::pair<const void*, std::unique_ptr<connection_extension>>> extensions;
    // Run once the endpoint is closed, when the connection is destroyed: a receive_pool takes
    // back the slots still posted here (the provider no longer writes into them).
    std::mutex hooks_mu;
    std::vector<std::function<void(connection_impl&)>> on_destroy;
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

    explicit connection_impl(std::shared_ptr<domain_impl> d);
    ~connection_impl();
    static domain make_domain_handle(const std::shared_ptr<domain_impl>& d);

    // Creates CQs, channel and endpoint for `info` (client: from fi_getinfo; server: from the
    // connection request) and enables it.
    result<void> setup(const fi_info* info, const connection_config& cfg);
    // Waits on the EQ for FI_CONNECTED; returns the event data (peer private data).
    result<void> await_connected(std::chrono::milliseconds timeout, bool client);
    void teardown();
};

// True on a thread that is running completion hooks or callbacks (inside a CQ read): code there
// must not drive that CQ again.
bool in_completion() noexcept;

// Posts a library-internal send or receive of [buf, buf + len) (registered with `desc`) on `c`
// with an entry from `q`; its completion goes to hook(context, c). A receive posted here does
// not drive the provider (it may run inside a completion hook).
result<void> post_internal(connection_impl& c, queue q, void* buf, std::size_t len, void* desc,
                           bool (*hook)(void*, completion&), void* context);

// Posting steps shared by every operation: the connection is open; admission takes the
// operation's record (its queue and CQ entries) or fails with would_block; submit turns the
// provider's return into the result and gives the record back on failure.
result<void> check_open(const connection_impl& c, const char* what);
result<op_record*> admit(connection_impl& c, const op_options& opts, remora::op kind, bool recv,
                         const char* what);
result<void> submit(connection_impl& c, op_record* r, ssize_t ret, const char* what, bool recv);
// Takes {sq 1, cq 1} (or {recv 1, cq 1}) from connection_config::slots into `out`, or fails
// with the pool's error. Defined by the slots layer (src/slots/connection_resources.cpp): the one
// call the endpoint layer makes into a layer above it, because the budget is the connection's own
// configuration; see the note there.
result<void> take_slot_units(const connection_config& cfg, bool recv, const char* what,
                             op_holding& out);

// The operation builders behind the public posts. `bounce`, when given, is the buffer the
// local segments point into (write_copy, send_copy): see post_maybe_quiet.
enum class rma_kind { read, write, write_imm };
result<void> post_rma(connection_impl& c, rma_kind kind, std::span<const local_segment> local,
                      const remote_region& remote, std::uint64_t remote_offset, std::uint64_t imm,
                      const op_options& opts, op_holding* bounce = nullptr);
result<void> post_send(connection_impl& c, std::span<const local_segment> local, bool with_imm,
                       std::uint64_t imm, const op_options& opts, op_holding* bounce = nullptr);
// Posts a write or send through `post(flags)`, adding FI_COMPLETION, or with selective
// signalling on and the operation eligible (no callback, completion_mode::on_error or at_post,
// at most the inject size so its buffer is free at once, and fewer than signal_every - 1
// unsignalled in a row) FI_INJECT without a completion. at_post always injects.
// A bounce buffer (write_copy, send_copy) is held by the operation's slot until its completion,
// unless the operation is injected: the provider has copied it when the post returns, and it
// goes back to its pool then.
template <class Post>
result<void> post_maybe_quiet(connection_impl& c, op_record* r, std::size_t bytes,
                              const op_options& opts, std::uint64_t flags, const char* what,
                              op_holding* bounce, Post&& post) {
    const bool at_post = opts.completion == completion_mode::at_post;
    if (at_post) {
        flags |= FI_INJECT;  // the bytes are the provider's when the post returns
    }
    if (c.config.signal_every <= 1) {
        if (bounce != nullptr && !at_post) {
            r->held.bounce = std::move(*bounce);
        }
        return submit(c, r, post(flags | FI_COMPLETION), what, false);
    }
    std::lock_guard lock(c.signal_mu);
    const bool quiet = opts.callback == nullptr && opts.completion != completion_mode::always &&
                       bytes <= c.dom->caps.inject_size &&
                       c.since_signal + 1 < c.config.signal_every;
    if (bounce != nullptr && !quiet && !at_post) {
        r->held.bounce = std::move(*bounce);
    }
    if (quiet) {
        c.ops.push_quiet(r);
    } else {
        c.ops.mark_signalled(r);
    }
    const ssize_t ret = post(quiet ? (flags | FI_INJECT) : (flags | FI_COMPLETION));
    if (ret == 0) {
        c.since_signal = quiet ? c.since_signal + 1 : 0;
    } else if (quiet) {
        c.ops.unpush_quiet(r);
    }
    return submit(c, r, ret, what, false);
}

// now() + timeout, with the timeout clamped to [0, one year] (no overflow, no negative waits).
std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout);

// First byte of the private data of every reject() remora sends.
inline constexpr std::byte reject_marker{0x52};

// Reads one event from an EQ with a timeout. Returns the event number and fills `buf`; an error
// event is returned as the error (with its err_data copied into `err_data`).
struct eq_event {
    std::uint32_t event = 0;
    fi_info* info = nullptr;  // FI_CONNREQ only; owner must free
    std::vector<std::byte> data;
};
result<eq_event> read_eq(fid_eq* eq, std::chrono::milliseconds timeout, std::size_t max_data,
                         std::vector<std::byte>* err_data);

// Builds fi_getinfo hints for remora's endpoints on `dom` (same provider and NIC).
info_ptr endpoint_hints(const domain_impl& dom);

}  // namespace remora::detail

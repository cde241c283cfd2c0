// SPDX-License-Identifier: BSD-3-Clause
// src/core/cq_impl.hpp — the state behind completion_queue, completion_channel and the progress
// thread (remora::detail).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

#include <remora/completion_channel.hpp>
#include <remora/completion_queue.hpp>

#include <remora/units.hpp>

#include "base/unit_budget.hpp"
#include "core/domain_impl.hpp"
#include "ops/done.hpp"  // in_completion

struct remora::completion_queue::impl {};
struct remora::completion_channel::impl {};

namespace remora::detail {

struct channel_impl;
struct connection_impl;
struct cq_impl;
REMORA_HANDLE_STATE(completion_queue, cq_impl);
REMORA_HANDLE_STATE(shared_completion_queue, cq_impl);
REMORA_HANDLE_STATE(completion_channel, channel_impl);
class op_pool;

// What an epoll entry of a completion channel stands for: a CQ, or a connection's event queue.
struct channel_source {
    cq_impl* cq = nullptr;
    connection_impl* conn = nullptr;
};

// One CPU pause (spin-wait hint): the sibling hyperthread, and a peer's progress spinning on a
// lock this thread just released, get the core's resources meanwhile.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

// Between looks at a polled CQ (no wait fd): spins (a CPU pause between looks) for spin_time,
// then sleeps 20 us doubling up to 1 ms, never past `deadline`.
struct poll_backoff {
    static constexpr std::chrono::microseconds spin_time{50};
    bool spinning = true;
    int rounds = 0;
    std::chrono::steady_clock::time_point spin_end{};
    void pause(std::chrono::steady_clock::time_point deadline);
};

// Where a completion read from the provider and not yet handed out came from: its connection's
// pool, and the record it keeps taken until poll hands it out (null: the pool's `undelivered`
// counts it instead, or it has no operation).
struct entry_source {
    const op_pool* pool = nullptr;
    op_record* held = nullptr;
};

// When the caller hands a reported completion out: `later` (a read into a progress-owned CQ's
// ready ring, by the thread or the application's wait: kept until the application polls),
// `next` (a wait's read on another CQ: the same reader hands it out on its next poll) or `now` (a
// poll reading the provider straight into its output, before it returns).
enum class hand_out : std::uint8_t { later, next, now };

// What a poll hands out as it returns (cq_impl::poll_locked): the records of reported operations
// go back to their pools under one pool lock per run of the same pool, when flushed (by the
// destructor at the latest, which the poll runs under its reader lock: a detaching connection's
// pool is alive until then); the pools' `undelivered` counts drop at once.
class hand_out_batch {
  public:
    void add(const entry_source& s) noexcept {
        if (s.held != nullptr) {
            if (n_ == sizeof(held_) / sizeof(held_[0])) {
                flush();
            }
            held_[n_++] = s.held;
        } else if (s.pool != nullptr) {
            s.pool->undelivered.fetch_sub(1, std::memory_order_relaxed);
        }
    }
    void flush() noexcept;
    hand_out_batch() = default;
    hand_out_batch(const hand_out_batch&) = delete;
    hand_out_batch& operator=(const hand_out_batch&) = delete;
    ~hand_out_batch() {
        if (n_ == 0) {
            return;  // a poll that found nothing pays no call
        }
        if (n_ == 1) {
            held_[0]->owner->give(held_[0]);  // one handed out: no runs to find
        } else {
            flush();
        }
    }

  private:
    op_record* held_[16];  // not initialised: [0, n_) is set (a poll that finds nothing pays none)
    std::size_t n_ = 0;
};

struct cq_impl final : callback_sink, internal_access::opaque<completion_queue> {
    std::shared_ptr<domain_impl> dom;
    cq_handle cq;
    int fd = -1;          // the CQ's wait fd (owned by libfabric); -1 when polled
    bool polled = false;  // no wait object (domain_impl::cq_polled): look again, never block
    // RDM with FI_SOURCE: entries are read with their source, and a received message from anyone
    // but its connection's attached peer fails its receive (op_pool::check_source).
    bool check_source = false;
    std::atomic<std::uint64_t> strangers{0};  // such messages refused
    cq_kind kind = cq_kind::cq;
    std::size_t size = 0;
    std::uint64_t tag = 0;
    std::shared_ptr<channel_impl> channel;  // set when the channel is shared
    completion_queue handle = internal_access::wrap<completion_queue>(this);
    connection_impl* conn = nullptr;  // the owning connection: its events also wake waits
    // Verbs rules on the connection's own receive CQ: a peer's write with immediate data takes a
    // posted receive, as on verbs (FI_RX_CQ_DATA); see rx_rule in cq_read.hpp.
    bool rx_rule = false;
    channel_source source{this, nullptr};

    // Completions read and not yet handed out, oldest first, with where each came from
    // (ready_from: its pool, whose `undelivered` count drops, or the record it keeps taken, when
    // poll hands it out): one ring per CQ, sized at creation (no allocation on the data path),
    // guarded by reader_lock(). Without a progress thread it holds what a wait read (so a wait
    // can tell a real wake-up from a no_completion one) until the same reader's next poll:
    // ready_capacity entries, filled only when empty. With one (progress_owned) the thread fills
    // it and the application drains it: sized to the CQ (progress_engine::watch).
    static constexpr std::size_t ready_capacity = 16;
    std::vector<completion> ready = std::vector<completion>(ready_capacity);
    std::vector<entry_source> ready_from = std::vector<entry_source>(ready_capacity);
    std::size_t ready_head = 0;
    std::size_t ready_count = 0;
    bool reaped = false;  // the last fill_ready read entries (reported or not)
    // The last fill_ready read fewer entries than it asked for: the provider was dry a moment
    // ago, so the poll that follows a wait hands out only what is ready (the guarded reader's).
    bool read_dry = false;
    // The application's poll consumed entries that reported nothing (callbacks, hidden
    // successes, a progress thread's silent reap it cleared): the next arming (wait, arm, a
    // channel's wait) says "not armed" once, so `if (poll() == 0) wait()` re-checks at once.
    std::atomic<bool> unreported{false};
    // Moves up to out.size() completions from the ring's head to `out`, their origins to `handed`.
    std::size_t take_ready(std::span<completion> out, hand_out_batch& handed) noexcept {
        std::size_t n = 0;
        while (n < out.size() && ready_count != 0) {
            out[n++] = ready[ready_head];
            handed.add(ready_from[ready_head]);
            if (++ready_head == ready.size()) {
                ready_head = 0;
            }
            --ready_count;
        }
        return n;
    }

    // Provider entries that a detaching connection's drain read for other connections: the
    // CQ's reader finishes them (their callbacks and hooks run on its thread) before it reads
    // the provider again. Filled on teardown only; emptied (cleared) once its last entry is read,
    // so a non-empty backlog always has entries to read.
    struct raw_entry {
        void* context;
        std::uint64_t flags;
        std::size_t len;
        std::uint64_t data;
        int err;  // 0, or the error of an error entry
    };
    std::vector<raw_entry> backlog;
    std::size_t backlog_head = 0;
    // User callbacks never run under read_mu or owned_mu (a callback may destroy a connection,
    // whose teardown takes them, or wait for an application lock that a destroying thread holds
    // while it takes them). read_provider hands them to defer() (finish()'s sink), and the
    // reader runs them with deliver() once its lock is released: one thread at a time (the
    // `deliverer`), in the order read, FIFO. A reader that finds another thread delivering leaves
    // its callbacks to it; that thread then wakes the CQ's waiters.
    struct pending_callback {
        void (*fn)(const completion&);
        completion c;
        const op_pool* from;
        op_record* held;  // given back as the callback is called; else `from` counts it
    };
    std::mutex deliver_mu;
    std::condition_variable delivered_cv;  // a callback returned, or delivering stopped
    std::vector<pending_callback> deliveries;
    std::size_t deliveries_head = 0;
    std::atomic<bool> deliveries_pending{false};
    std::thread::id deliverer{};               // the thread running callbacks now, if any
    const op_pool* delivering_from = nullptr;  // whose callback runs now
    bool deferred_by_others = false;           // queued while another thread delivered
    std::weak_ptr<cq_impl> self;               // kept alive while callbacks run
    void defer(void (*fn)(const completion&), const completion& c, const op_pool* from,
               op_record* held) override;
    // Runs the callbacks queued by defer(), unless a thread is doing so already. Call with no
    // reader lock held.
    void deliver();
    // Teardown of the connection owning `pool`: drops its queued callbacks and waits until none
    // of its callbacks runs on another thread (one running on this thread is the caller's own).
    void drop_deliveries(const op_pool* pool);
    // Provider entries without an operation that are not a peer's write with immediate data (an
    // error entry without context, seen on sockets when a peer goes away): dropped and counted
    // here, never reported.
    mutable std::atomic<std::uint64_t> strays{0};

    // A CQ shared by several connections (shared_completion_queue): one budget of entries,
    // reserved by each attached connection for all its queue entries that complete here, so
    // attaching one that could overflow it fails. Reads take read_mu (a detaching connection
    // drains the CQ from its own thread).
    bool shared = false;
    std::mutex read_mu;
    // Connections retiring or draining now: readers step aside (a busy poller re-taking
    // read_mu in a loop would starve them; std::mutex is not fair).
    std::atomic<int> detaching{0};
    // The entries not reserved (one kind of unit: CQ entries, capacity `size`); its lock guards
    // `attached` too.
    unit_budget<1> budget;
    std::vector<connection_impl*> attached;
    // Reserves `need` entries for `c`, or fails with errc::too_large naming the shortfall.
    result<void> attach_connection(connection_impl* c, std::size_t need, const std::string& what);
    // First step of destroying `c` (its op_pool already retired): no wait drives it any more,
    // and a reader finishing one of its completions is done before this returns.
    void retire_connection(connection_impl* c);
    // Once `c`'s endpoint is closed (tcp then has written everything it held to the CQ): drops
    // `c`'s completions wherever they are (provider, backlog or ready ring), moves the others'
    // provider entries to the backlog for the CQ's reader, and returns `need` entries.
    void detach_connection(std::size_t need);

    // With a library progress thread the thread owns this CQ's wait: it alone arms the
    // provider's CQ (fi_trywait) and sleeps on it (a second thread in fi_trywait resets the
    // CQ's wait signal under a blocked waiter). It moves completions into `ready`, sized to the
    // CQ, and signals `notify`; the application waits on the eventfd, and its poll, wait and arm
    // read the provider too, into the same ring or straight out, under owned_mu.
    progress_engine* progress = nullptr;
    // A progress thread calls into the provider for this CQ but reads none of its entries
    // (progress_engine::drive): the CQ stays the application's to read.
    std::atomic<bool> driven{false};
    // A driven CQ without a wait fd of its own (shm) whose fd() was asked for: `notify` is that
    // fd, and the thread signals it when it finds entries after an arm (fd_armed).
    std::atomic<bool> drive_signals{false};
    std::atomic<bool> fd_armed{false};
    std::mutex fd_mu;  // user_fd's setup
    // The driving thread's look (progress_engine::drive).
    void driven_look() noexcept;
    // completion_queue::fd(): wait_fd(), or on a same-host connection's CQ without a wait fd
    // (shm) an eventfd a progress thread signals (the thread drives the CQ from the first call);
    // -1 if that cannot be set up.
    int user_fd();
    std::mutex owned_mu;
    unique_fd notify;  // eventfd, readable while `ready` is not empty
    // Makes `notify` readable (a waiter on it, or on fd(), looks again).
    void signal_notify() noexcept {
        const std::uint64_t one = 1;
        [[maybe_unused]] ssize_t w = ::write(notify.get(), &one, sizeof(one));
    }

    bool progress_owned() const noexcept { return progress != nullptr; }
    // Keeps this CQ's readers out (the progress thread's and a shared CQ's take these locks
    // around every provider read; a private CQ's application reader is the caller's own
    // business): owned_mu when progress-owned, read_mu when shared, else nothing.
    std::unique_lock<std::mutex> reader_lock() {
        if (progress_owned()) {
            return std::unique_lock(owned_mu);
        }
        if (shared) {
            return std::unique_lock(read_mu);
        }
        return {};
    }
    // The fd a waiter blocks on: the provider's, or the eventfd of a progress-owned CQ.
    int wait_fd() const noexcept { return progress_owned() ? notify.get() : fd; }
    // Progress thread: reads the provider's CQ into the ring; true if anything was added.
    // *reaped: entries were read (reported or not). Runs the callbacks read (deliver) unless
    // `deliver_now` is false: then the caller must call deliver() once its locks are released.
    // `drain` false (a loop that looks again at once): stops after a read that returned fewer
    // entries than asked for instead of reading until one returns none.
    bool pump(bool* reaped = nullptr, bool deliver_now = true, bool drain = true);
    // The ring's count, under owned_mu (a progress-owned CQ).
    std::size_t ready_now();
    // Calls into the provider (a zero-length read) unless the progress thread owns this CQ.
    void drive();

    cq_impl() = default;
    cq_impl(const cq_impl&) = delete;
    cq_impl& operator=(const cq_impl&) = delete;
    ~cq_impl();  // a shared CQ leaves the progress thread here
    // `no_wait`: without a wait object even where the provider offers one (channel_mode::none).
    static result<std::shared_ptr<cq_impl>> open(const std::shared_ptr<domain_impl>& dom,
                                                 cq_kind kind, std::size_t size, std::uint64_t tag,
                                                 bool no_wait = false);
    // Reads up to n completions from the provider (errors included) into out; returns how many
    // are for the caller (callbacks and dropped ones are not), and how many were read in
    // `consumed`. Where each reported one came from goes to from[i] (kept with the entry until
    // it is handed out), or, with `from` null, into `now`: the caller hands them out at once.
    // Callbacks read are deferred to deliver() (this CQ is finish()'s callback sink).
    // What a reported operation holds (budget units) goes back with its record when it is handed
    // out (with `now`, or `units_with_record`: the ready ring the same reader hands out next), else
    // as it is read (finish()).
    // A receive's entry from `source`: when it is not the receiving connection's attached peer,
    // the completion becomes errc::access_denied with nothing received (counted in strangers).
    void refuse_stranger(completion& c, void* op_context, std::uint64_t source);
    // An error entry whose error says the transport is gone marks its connection's pool
    // (op_pool::transport_lost).
    static void note_transport_loss(void* op_context, int fi_errno);
    // The one translation of a provider entry (data or error; `source`: the sender of a
    // receive on a CQ that checks it, else null) into `c`, then finish(): true when `c` is
    // reported, its origin in `src`.
    bool take_entry(completion& c, const raw_entry& e, const std::uint64_t* source,
                    entry_source& src, hand_out when);
    // A negative return is the provider's -FI_* code: read_failure() makes it the error.
    ssize_t read_provider(completion* out, std::size_t n, std::size_t* consumed, entry_source* from,
                          hand_out_batch* now = nullptr, bool units_with_record = false);
    // read_provider's body, inlined into poll and fill_ready (the pollers' and waiters' loops).
    inline ssize_t read_entries(completion* out, std::size_t n, std::size_t* consumed,
                                entry_source* from, hand_out_batch* now, bool units_with_record);
    // The error of a failed read (a negative return of read_provider or fill_ready), naming the
    // call that failed.
    [[gnu::cold]] tl::unexpected<error> read_failure(ssize_t code) const;
    const char* read_failed_in = "fi_cq_read";
    // Moves every entry the provider holds now (error entries included) to the end of the
    // backlog, in order, for the CQ's reader; the caller holds reader_lock(). connection::close()
    // on a connected endpoint keeps the statuses the shutdown gave this way before it closes the
    // endpoint.
    void drain_to_backlog();
    // Reads every entry the provider holds now (error entries included), in order, into `each`;
    // the caller holds reader_lock(). drain_to_backlog and a shared CQ's detach use it.
    void read_all(const std::function<void(const raw_entry&)>& each);
    // Calls into the provider for the connections attached to a shared CQ: their events
    // (a disconnect cancels receives the provider does not flush).
    void drive_attached();
    // Fills the ready ring: a progress-owned CQ's from the provider, another's only when empty.
    // Returns the number ready, or a negative -FI_* code (read_failure).
    ssize_t fill_ready();
    // fi_trywait on this CQ alone: true when it is safe to block on fd.
    result<bool> trywait(bool* notified = nullptr);
    result<std::size_t> poll(std::span<completion> out);
    // poll() before deliver(); inlined into poll() (its only caller: a busy poller's loop)
    [[gnu::always_inline]] inline ssize_t poll_locked(std::span<completion> out);
    result<std::size_t> wait(std::chrono::milliseconds timeout);
    // wait()'s one look: fill_ready, then the callbacks it read. True when the wait is over (an
    // error, completions ready, or entries reaped that report nothing), with the result in `ready`.
    bool look(ssize_t& ready);
    // The rest of a wait whose first look found nothing: arm, sleep, look again.
    [[gnu::noinline]] result<std::size_t> sleep_until_ready(std::chrono::milliseconds timeout);
};

struct channel_impl : internal_access::opaque<completion_channel> {
    unique_fd epfd;
    mutable std::mutex mu;
    std::vector<cq_impl*> cqs;
    std::vector<connection_impl*> conns;  // whose event queues also wake the channel
    std::size_t next = 0;                 // round-robin start
    std::size_t turn = 0;                 // the same for a batch of fired fds

    result<void> attach(cq_impl* cq);
    void detach(cq_impl* cq);
    result<void> attach_events(connection_impl* conn);
    void detach_events(connection_impl* conn);
    result<channel_event> wait(std::chrono::milliseconds timeout);
};

// A library-owned thread that drives progress for connections whose target side must call into
// libfabric (tcp), and the owner of those CQs: it reads them into each CQ's ring and signals the
// ring's eventfd. How it waits is the domain's progress_policy: `blocking` arms the CQs and
// sleeps on their fds between events; `busy` reads them in a loop; `adaptive` arms them as
// `blocking` does but polls their fds without sleeping for `spin` after the last event.
class progress_engine {
  public:
    // `rma_events` (may be null): the domain's counter of the peers' one-sided accesses
    // (domain_impl::rma_events); adaptive reads it while polling, a change being traffic.
    static result<std::unique_ptr<progress_engine>> start(progress_policy policy,
                                                          std::chrono::microseconds spin,
                                                          fid_cntr* rma_events = nullptr);
    ~progress_engine();
    // Takes ownership of reading `cq` (see cq_impl::progress).
    result<void> watch(cq_impl* cq);
    // Calls into the provider for `cq` (a read of no entries) as often as it reads a watched
    // CQ, and reads none of its entries: the application keeps reading `cq` itself, on its own
    // threads, callbacks included (cq_impl::driven). A same-host target's shm CQ, so a peer's
    // queued one-sided operations land while the application does not read.
    void drive(cq_impl* cq);
    void unwatch(cq_impl* cq);
    // Asks the thread to drive `cq` soon: for a receive posted from inside a completion hook,
    // where driving it on the spot could deadlock (tcp delivers a message that waited for a
    // receive only when the provider is called after the post).
    void kick(cq_impl* cq);
    // For tests and diagnostics: how many times the thread went to sleep, in epoll or in the
    // provider's wait (adaptive: once each time a spin ran out), and how many polling rounds saw
    // the domain's remote-access counter move (a peer's read or write kept the spin going).
    std::uint64_t sleeps() const noexcept { return sleeps_.load(std::memory_order_relaxed); }
    std::uint64_t remote_signs() const noexcept {
        return remote_signs_.load(std::memory_order_relaxed);
    }
    // blocking with one CQ: the waits made in the provider (fi_cq_sread), those that ran out
    // their safety timeout (provider_wait_ms: nothing woke them), and whether the thread gave
    // that wait up for epoll after it failed.
    std::uint64_t provider_waits() const noexcept {
        return provider_waits_.load(std::memory_order_relaxed);
    }
    std::uint64_t provider_wait_timeouts() const noexcept {
        return provider_wait_timeouts_.load(std::memory_order_relaxed);
    }
    bool provider_wait_off() const noexcept { return provider_wait_off_.load(); }
    // Timed looks at CQs whose fd stayed readable with nothing read (a readable fd with
    // nothing the provider will take): each one a step of the 1 to 8 ms back-off.
    std::uint64_t lingering_looks() const noexcept {
        return lingering_looks_.load(std::memory_order_relaxed);
    }
    // How many more reads a CQ whose fd stays readable after its drive gets: on a wake-up by its
    // fd (something new arrived), and on the timer's look at what lingers.
    static constexpr int settle_rounds_new = 256;
    static constexpr int settle_rounds_timer = 16;
    // A wait in the provider ends on an entry or on interrupt_wait's signal; the timeout is a
    // safety net only (a control that forgot to interrupt costs this long, and shows in
    // provider_wait_timeouts).
    static constexpr int provider_wait_ms = 1000;

  private:
    progress_engine() = default;
    void run();
    // busy: reads every watched CQ in a loop until stopped.
    void run_busy();
    // Returns once the thread is out of the provider's wait on `cq` (signalled again every
    // millisecond: libfabric 1.17's sread can miss a signal that lands as it goes to sleep).
    void interrupt_wait(cq_impl* cq);
    // RDM peer liveness of the watched connections that have it (live_watch_ of them), under
    // mu_: runs each one's check when due; returns the earliest next one (max: none).
    std::chrono::steady_clock::time_point tick_liveness();
    std::atomic<int> live_watch_{0};
    progress_policy policy_ = progress_policy::blocking;
    std::chrono::microseconds spin_{0};
    fid_cntr* rma_events_ = nullptr;
    std::atomic<std::uint64_t> sleeps_{0};
    std::atomic<std::uint64_t> remote_signs_{0};
    std::atomic<std::uint64_t> provider_waits_{0};
    std::atomic<std::uint64_t> provider_wait_timeouts_{0};
    std::atomic<bool> provider_wait_off_{false};
    std::atomic<std::uint64_t> lingering_looks_{0};
    unique_fd epfd_;
    unique_fd wake_;  // eventfd to stop the thread
    std::mutex mu_;
    // Threads waiting for mu_ (watch, unwatch): a polling thread yields to them.
    std::atomic<int> waiting_{0};
    std::vector<cq_impl*> watched_;
    std::vector<cq_impl*> polled_;  // watched CQs without a wait fd: looked at every tick
    std::vector<cq_impl*> driven_;  // CQs only driven (drive()): on every round and tick
    std::mutex kick_mu_;
    std::vector<cq_impl*> kicked_;
    std::atomic<bool> kicks_{false};  // kicked_ may be non-empty
    std::atomic<bool> stop_{false};
    // blocking, one CQ watched: the CQ the thread waits for inside the provider (fi_cq_sread),
    // set before and cleared after it holds provider_wait_ across that wait.
    std::atomic<cq_impl*> in_provider_{nullptr};
    std::mutex provider_wait_;
    std::thread thread_;
};

}  // namespace remora::detail

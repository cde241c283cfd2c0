// SPDX-License-Identifier: BSD-3-Clause
// src/ops/op_pool.hpp — the operations layer: the operation record (the slot) and a
// connection's records (op_pool), with reservation and selective signalling (remora::detail).
//
// Note — one completion object per operation, one path (the Linux RDMA core's ib_cqe lesson,
// DESIGN.md): reservation (ops/reservation.hpp) takes a record and, all or nothing, the units it
// needs, and chooses the record's `done` function: report to the CQ's reader, run the user's
// callback (a coroutine resumes through co_op's callback), or run a library-internal hook.
// finish() (src/core/cq_impl.cpp) does what every completion needs (tag, holdings, a retired pool,
// reclaiming unsignalled records) and then calls rec->done in one line.
//
// Capacity: a queue's free records are a lock-free list (op_pool::free_list), whose head also
// counts them: taking a record is the queue's reservation check and its accounting in one atomic
// compare-and-swap, and giving it back is one more (plus the exchange that makes a second give
// of the same record a no-op). Posts take from any thread and completions give back from the
// progress thread or a poller, so the list is multi-producer, multi-consumer. Only selective
// signalling's ring and the close-time scans take the pool's mutex.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <remora/completion_queue.hpp>
#include <remora/units.hpp>

#include "base/park_gate.hpp"
#include "fabric/fabric.hpp"
#include "ops/holding.hpp"

namespace remora::detail {

class op_pool;
struct op_record;
struct callback_sink;

// What happens to an operation's completion, chosen at reservation (ops/done.hpp): called by
// finish() once the record is no longer needed but for its fields; gives the record back and
// returns whether the CQ's reader sees the completion. `sink`: where a user callback goes while
// the CQ's reader holds its lock (the reading CQ), or null to run it at once.
using done_fn = bool (*)(op_record& r, completion& c, callback_sink* sink);
// A library-internal operation's completion (the target service's messages, a multi-part
// operation's parts): it may rewrite `c` and returns whether the CQ's reader sees it; a user
// callback it reaches goes to `sink` as done_fn's does (run_callback).
using hook_fn = bool (*)(void* context, completion& c, callback_sink* sink);

// The libfabric context of every operation remora posts: it lives from post to completion and
// stands for the operation's send-queue or receive-queue entry, and so for its completion-queue
// entry (a connection's CQs are sized for all its records). Completions map back through it to
// the user's context and callback; a disconnect cancels the receives still holding one.
struct op_record {
    provider_context fi{};  // first: the provider's context area
    op_pool* owner = nullptr;
    // Set at reservation (see ops/done.hpp), with the context `done` reports and, for a
    // library-internal operation, its hook (done_internal). Atomic (relaxed): the cancel and close
    // scans (op_pool::posted_recv_of, posted_recvs, taken) read them while another thread re-arms
    // the record; a scan that meets a record being armed finds it not yet posted, so its cancel
    // misses, as it does for a record that has just completed.
    std::atomic<done_fn> done{nullptr};
    std::atomic<void*> user_context{nullptr};
    std::atomic<hook_fn> hook{nullptr};
    void (*callback)(const completion&) = nullptr;  // the user's callback (done_callback)
    // Operands of a native compare-and-swap or fetch-add: they must live until completion.
    std::uint64_t operands[2]{};
    remora::op kind = op::unknown;
    bool report_success = true;
    // Taken (op_pool::take) and not yet given back. Atomic: a completion (finish), close's scans
    // and selective signalling's ring read it while another thread takes or gives the record;
    // relaxed, since the free list's head orders the record's other fields (op_pool::free_list).
    std::atomic<bool> in_use{false};
    // Selective signalling (connection_config::signal_every): an operation posted without a
    // completion keeps its record (and so its queue and CQ entries: an error still completes)
    // until a later signalled operation's completion reclaims it. `mark` orders them.
    // Atomic (relaxed) because the ring's stale entries read it while the record is retaken.
    std::atomic<bool> unsignaled{false};
    bool reclaims = false;  // signalled while selective signalling is on: reclaims older ones
    std::uint64_t mark = 0;
    op_holdings held;  // returned when the completion is read (or the post fails)
    // Complete, and waiting for the application: its completion in a CQ's ready ring (given
    // back when poll hands it out) or its callback in the CQ's deliveries (given back as it is
    // called). The record, and so its queue entries, stay taken; close and cancel paths skip it.
    // Cleared by give().
    std::atomic<bool> delivering{false};
};

// Which queue entries an operation takes: the application's sends (sq_size), those reserved for
// the target service's messages (service_depth), or receives (rq_size).
enum class queue : std::uint8_t { send, service, recv };

// A connection's records, one per queue entry. Taking one is the reservation check; none free
// means that queue is full (would_block). Fixed at setup: posting allocates nothing. take, give
// and the counts are lock-free (free_list); the ring of unsignalled operations and the scans
// run under the pool's mutex.
class op_pool {
  public:
    // The most records of one queue (the free list's index and count fields): connection and
    // shared-receive-queue depths are clamped to it, as to the provider's.
    static constexpr std::uint32_t max_queue = std::uint32_t{1} << 18;
    // Not concurrent with anything else on the pool (setup).
    void reset(std::size_t sends, std::size_t service, std::size_t recvs);
    // Inline: every post's path.
    [[gnu::always_inline]] op_record* take(queue q) noexcept {
        free_list& f = free_[static_cast<std::size_t>(q)];
        std::uint64_t h = f.head.load(std::memory_order_acquire);
        for (;;) {
            const std::uint32_t top = top_in(h);
            if (top == none) {
                return nullptr;  // that queue is full
            }
            const std::uint32_t below = next_[top].load(std::memory_order_relaxed);
            if (f.head.compare_exchange_weak(h, pack(below, free_in(h) - 1, tag_in(h) + 1),
                                             std::memory_order_acquire,
                                             std::memory_order_acquire)) {
                op_record* r = &records_[top];
                arm_taken(r);
                return r;
            }
        }
    }
    // `n` records of queue `q` into out[0..n), all or nothing (false: none taken). A multi-key
    // operation's parts (src/core/multi_ops.cpp).
    bool take_n(queue q, std::size_t n, op_record** out);
    // `wake` false: a record taken and returned untouched by a post that failed its reservation
    // (its budget refused). Waking the parked head for it would make the head retry at once,
    // refuse itself the same way, wake itself again, and spin past its deadline.
    // What a record still holds (op_holdings: budget units, a bounce buffer) goes back after it
    // (outside any lock); the gate is notified once per operation (by its units' give-back when it
    // held some, else here).
    // Inline: every completion's path; what holds more than the record goes out of line.
    void give(op_record* r, bool wake = true) noexcept {
        // The exchange makes a second give of the same record (an RDM close and the provider's
        // own completion) a no-op, whichever thread makes it.
        if (!r->in_use.exchange(false, std::memory_order_relaxed)) {
            return;
        }
        r->delivering.store(false, std::memory_order_relaxed);
        if (r->held || gate.load() != nullptr) [[unlikely]] {
            give_rest(r, wake);
            return;
        }
        const auto i = static_cast<std::uint32_t>(r - records_.data());
        push_chain(static_cast<std::size_t>(queue_of(i)), i, i, 1);
    }
    // Gives back rs[0..n), all of this pool (a poll handing out a batch): one CAS a queue.
    void give_n(op_record* const* rs, std::size_t n, bool wake = true) noexcept {
        if (n == 1) {
            give(rs[0], wake);  // a poll that handed out one completion
        } else {
            give_batch(rs, n, wake);
        }
    }
    // Records of receives still posted (to cancel them on disconnect).
    std::vector<op_record*> posted_recvs();
    // Every record taken and not given back, with whether it is a receive's (RDM close).
    std::vector<std::pair<op_record*, bool>> taken();
    // The record of a receive still posted whose user_context is `context`, or null. Allocates
    // nothing (a layer's own receives, canceled on its data path).
    op_record* posted_recv_of(const void* context);
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
    // RDM: a received message counts only from this source (the attached peer's address vector
    // entry); one from anyone else completes its receive with errc::access_denied. Set at attach,
    // before any receive is posted.
    std::atomic<bool> check_source{false};
    std::atomic<std::uint64_t> source{0};
    // An operation of this pool failed because the transport to the peer is gone (set as the
    // CQ is read): the connection reports conn_event::lost even if the provider never posts
    // its shutdown event (tcp does not while a message it cannot place blocks the socket).
    std::atomic<bool> transport_lost{false};
    // A shared receive queue's records: their receives complete on the CQ of whichever
    // connection a message arrived on; a private CQ's tag (that connection's) is reported then.
    bool shared_rx = false;
    // Set while a connection on a shared CQ is destroyed: completions of its records still in
    // that CQ are discarded (their contexts, callbacks and hooks may be gone) and their records
    // and units given back.
    std::atomic<bool> retired{false};
    // Where this connection's parked posts wait (its budget's or its own; park_gate.hpp), set by
    // the first parked post: notified after every record given back.
    std::atomic<park_gate*> gate{nullptr};
    // Completions of this pool's operations whose records are given back and that the
    // application has not been handed yet: what internal hooks (the target service, gather_write)
    // report or defer to a callback (a plain operation keeps its record taken instead until it
    // is handed out or its callback called: op_record::delivering). connection::in_flight()
    // counts them, so an operation counts until the application has its completion, whichever
    // call read it. Mutable: CQs refer to pools through const pointers.
    mutable std::atomic<std::size_t> undelivered{0};

  private:
    static constexpr std::size_t queues = 3;
    // A queue's free records: a Treiber stack of record indices whose links are next_ and whose
    // head is one 64-bit word {index of the top record (20 bits; `none` when empty), how many
    // are free (20 bits), a tag (24 bits)}. Every successful push or pop adds one to the tag, so
    // a compare-and-swap against a head read before another thread popped and pushed the same
    // record fails (ABA) unless 2^24 operations on this queue passed between its load and its
    // CAS while the index and count came back too.
    // Memory ordering: a give writes the record (in_use, delivering, holdings moved out) and its
    // link next_[i], then publishes them with a release CAS of the head; a take reads the head
    // with acquire, so the link it reads for the top record (and the record's fields, once its
    // CAS succeeds) are those its last giver wrote. The head is only ever changed by RMWs after
    // reset, so each CAS continues the release sequence of every earlier give: a take
    // synchronises with all of them, not only the latest. A link read for a record another
    // thread popped meanwhile may be stale (a relaxed atomic: no data race); the tag then differs
    // and the CAS fails and retries. Records are never freed, so a stale index is always safe to
    // read.
    struct free_list {
        std::atomic<std::uint64_t> head{0};
        std::uint32_t capacity = 0;
    };
    // A record just taken: in use, nothing of its last operation left on it.
    [[gnu::always_inline]] static void arm_taken(op_record* r) noexcept {
        r->in_use.store(true, std::memory_order_relaxed);
        r->hook.store(nullptr, std::memory_order_relaxed);
        r->unsignaled.store(false, std::memory_order_relaxed);
        r->reclaims = false;
    }
    static constexpr std::uint32_t none = (1u << 20) - 1;
    static constexpr std::uint64_t pack(std::uint32_t top, std::uint32_t count,
                                        std::uint64_t tag) noexcept {
        return std::uint64_t{top} | (std::uint64_t{count} << 20) | (tag << 40);
    }
    static constexpr std::uint32_t top_in(std::uint64_t h) noexcept {
        return static_cast<std::uint32_t>(h & none);
    }
    static constexpr std::uint32_t free_in(std::uint64_t h) noexcept {
        return static_cast<std::uint32_t>((h >> 20) & none);
    }
    static constexpr std::uint64_t tag_in(std::uint64_t h) noexcept { return h >> 40; }
    // Pushes the chain first..last (linked through next_) of `n` records of queue k.
    void push_chain(std::size_t k, std::uint32_t first, std::uint32_t last,
                    std::uint32_t n) noexcept {
        free_list& f = free_[k];
        std::uint64_t h = f.head.load(std::memory_order_relaxed);
        for (;;) {
            next_[last].store(top_in(h), std::memory_order_relaxed);
            if (f.head.compare_exchange_weak(h, pack(first, free_in(h) + n, tag_in(h) + 1),
                                             std::memory_order_release,
                                             std::memory_order_relaxed)) {
                return;
            }
        }
    }
    void give_batch(op_record* const* rs, std::size_t n, bool wake) noexcept;
    // give() of a record that holds something or whose connection has a gate to notify.
    void give_rest(op_record* r, bool wake) noexcept;
    free_list free_[queues];
    std::unique_ptr<std::atomic<std::uint32_t>[]> next_;  // one link a record
    std::vector<op_record> records_;  // sends, service sends, receives; never reallocated
    mutable std::mutex mu_;           // the quiet ring and the scans
    std::size_t sends_ = 0;
    std::size_t service_ = 0;
    queue queue_of(std::size_t index) const noexcept {
        return index < sends_              ? queue::send
               : index < sends_ + service_ ? queue::service
                                           : queue::recv;
    }
    struct quiet_entry {
        op_record* rec;
        std::uint64_t mark;
    };
    std::vector<quiet_entry> quiet_;  // ring, capacity 2 x sends (stale entries included)
    std::size_t quiet_head_ = 0;
    std::size_t quiet_count_ = 0;
    std::uint64_t quiet_next_ = 0;
    bool quiet_valid(const quiet_entry& e) const noexcept {
        return e.rec->in_use.load(std::memory_order_relaxed) &&
               e.rec->unsignaled.load(std::memory_order_relaxed) && e.rec->mark == e.mark;
    }
};

}  // namespace remora::detail

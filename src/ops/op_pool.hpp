// SPDX-License-Identifier: BSD-3-Clause
// src/ops/op_pool.hpp — the operations layer: the operation record (the slot) and a
// connection's records (op_pool), with admission and selective signalling (remora::detail).
//
// Note — one completion object per operation, one path (the Linux RDMA core's ib_cqe lesson,
// DESIGN.md): admission (ops/admission.hpp) takes a record and, all or nothing, the units it
// needs, and chooses the record's `done` function: report to the CQ's reader, run the user's
// callback (a coroutine resumes through co_op's callback), or run a library-internal hook.
// finish() (src/core/cq.cpp) does what every completion needs (tag, holdings, a retired pool,
// reclaiming unsignalled records) and then calls rec->done in one line.
//
// Capacity: the record free lists are the identity of the entries; how many of each queue are
// free is counted by a detail::unit_budget<3> (include/remora/units.hpp), whose lock is the
// pool's lock, so the one all-or-nothing type accounts records too, at no extra lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include <remora/completion_queue.hpp>
#include <remora/units.hpp>

#include "fabric/fabric.hpp"
#include "ops/holding.hpp"

namespace remora::detail {

class op_pool;
struct op_record;

// What happens to an operation's completion, chosen at admission (ops/done.hpp): called by
// finish() once the record is no longer needed but for its fields; gives the record back and
// returns whether the CQ's reader sees the completion.
using done_fn = bool (*)(op_record& r, completion& c);

// The libfabric context of every operation remora posts: it lives from post to completion and
// stands for the operation's send-queue or receive-queue entry, and so for its completion-queue
// entry (a connection's CQs are sized for all its records). Completions map back through it to
// the user's context and callback; a disconnect cancels the receives still holding one.
struct op_record {
    fi_context2 fi{};  // first: the provider's context area
    op_pool* owner = nullptr;
    done_fn done = nullptr;  // set at admission: see ops/done.hpp
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
    // Complete, and waiting for the application: its completion in a CQ's stash or ring (given
    // back when poll hands it out) or its callback in the CQ's deliveries (given back as it is
    // called). The record, and so its queue entries, stay taken; close and cancel paths skip it.
    // Cleared by give().
    std::atomic<bool> delivering{false};
};

// Which queue entries an operation takes: the application's sends (sq_size), those reserved for
// the target service's messages (service_depth), or receives (rq_size).
enum class queue : std::uint8_t { send, service, recv };

// A connection's records, one per queue entry. Taking one is the admission check; none free
// means that queue is full (would_block). Fixed at setup: posting allocates nothing. The counts
// are a unit_budget of the three queues; its lock guards the free lists and the ring too.
class op_pool {
  public:
    void reset(std::size_t sends, std::size_t service, std::size_t recvs);
    op_record* take(queue q);
    // `n` records of queue `q` into out[0..n), all or nothing (false: none taken). A multi-key
    // operation's parts (src/core/multi_ops.cpp).
    bool take_n(queue q, std::size_t n, op_record** out);
    // `wake` false: a record taken and returned untouched by a post that failed its admission
    // (its budget refused). Waking the parked head for it would make the head retry at once,
    // refuse itself the same way, wake itself again, and spin past its deadline.
    // What a record still holds (op_holdings: budget units, a bounce buffer) goes back after it,
    // outside the lock; the gate is notified once per operation (by its units' give-back when it
    // held some, else here).
    void give(op_record* r, bool wake = true) noexcept;
    // Gives back rs[0..n), all of this pool, under one lock per 16 (a poll handing out a batch).
    void give_n(op_record* const* rs, std::size_t n, bool wake = true) noexcept;
    // Records of receives still posted (to cancel them on disconnect).
    std::vector<op_record*> posted_recvs();
    // Every record taken and not given back, with whether it is a receive's (RDM close).
    std::vector<std::pair<op_record*, bool>> taken();
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
    unit_budget<queues> budget_;               // free records of each queue; its lock is the pool's
    std::vector<op_record> records_;           // sends, service sends, receives; never reallocated
    std::vector<std::uint32_t> free_[queues];  // which records are free (identity)
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

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
#include <remora/completion_channel.hpp>
#include <remora/completion_queue.hpp>
#include <remora/domain.hpp>

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include "core/impl.hpp"
#include "fabric/cq.hpp"

#include "core/cq_read.hpp"

// Completion queues: open, read the provider (one translation of an entry, then finish() maps it
// back to its operation), poll (which inlines that read), deliveries and the backlog. Waiting:
// cq_wait.cpp; the public handle: completion_queue.cpp.

namespace remora::detail {

namespace {

remora::op op_from_flags(std::uint64_t f) {
    if (f & cq_flag_remote_write)
        return op::remote_write;
    if (f & cq_flag_recv)
        return op::recv;
    if (f & cq_flag_atomic)
        return op::atomic;
    if (f & cq_flag_read)
        return op::read;
    if (f & cq_flag_write)
        return op::write;
    if (f & cq_flag_send)
        return op::send;
    return op::unknown;
}

}  // namespace

result<std::shared_ptr<cq_impl>> cq_impl::open(const std::shared_ptr<domain_impl>& dom,
                                               cq_kind kind, std::size_t size, std::uint64_t tag,
                                               bool no_wait) {
    auto cq = std::make_shared<cq_impl>();
    cq->dom = dom;
    cq->kind = kind;
    cq->size = size;
    cq->tag = tag;
    cq->polled = dom->cq_polled || no_wait;
    cq->check_source = dom->source_checked;
    cq->self = cq;
    int ret = cq_open(dom->domain.get(), size, cq->cq, !cq->polled);
    if (ret != 0) {
        return fail(fabric_error(ret, std::string("fi_cq_open for the ") + to_string(kind) +
                                          " of size " + std::to_string(size)));
    }
    if (cq->polled) {
        return cq;
    }
    ret = detail::wait_fd(cq->cq.as_fid(), &cq->fd);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_control FI_GETWAIT on a CQ"));
    }
    return cq;
}

namespace {

// finish(), inlined into the CQ's read loop (take_entry).
[[gnu::always_inline]] inline bool finish_entry(const cq_impl& cq, completion& c, void* op_context,
                                                std::uint64_t flags, callback_sink* sink,
                                                entry_source* src, hand_out when) {
    auto* rec = static_cast<op_record*>(op_context);
    if (rec == nullptr) [[unlikely]] {
        c.op = (flags & cq_flag_remote_write) != 0 ? op::remote_write : op_from_flags(flags);
        if (!c.ok() || (flags & (cq_flag_remote_data | cq_flag_remote_write)) == 0) {
            // No operation of ours and not a peer's write with immediate data: an error entry
            // without context (sockets writes one when a peer goes away with operations in
            // flight). The application posted nothing it could belong to: never reported.
            cq.strays.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        c.tag = cq.tag;
        if (cq.rx_rule && (flags & cq_flag_remote_data) != 0) [[unlikely]] {
            rx_rule(cq, c, true);
        }
        return true;  // a peer's write with immediate data: no local operation
    }
    c.op = (flags & cq_flag_remote_write) != 0 ? op::remote_write : rec->kind;
    if (!rec->in_use.load(std::memory_order_relaxed) ||
        rec->delivering.load(std::memory_order_relaxed)) [[unlikely]] {
        // Already finished: an RDM close() completed it (errc::canceled) before the provider's
        // own entry, read now, came through.
        return false;
    }
    op_pool* const pool = rec->owner;
    c.tag = pool->shared_rx && !cq.shared ? cq.tag : pool->tag;
    const done_fn done = rec->done.load(std::memory_order_relaxed);
    if (done == &done_report && !rec->held && !rec->reclaims && !cq.rx_rule &&
        !pool->retired.load(std::memory_order_relaxed)) [[likely]] {
        // The plain reported operation (done_report, inline): the common completion.
        c.context = rec->user_context.load(std::memory_order_relaxed);
        const bool report = rec->report_success || !c.ok();
        if (report && when != hand_out::now && sink != nullptr) {
            rec->delivering.store(true, std::memory_order_relaxed);  // until it is handed out
            if (src != nullptr) {
                src->held = rec;
            }
            return true;
        }
        pool->give(rec);
        if (!report) {
            return false;
        }
        if (when == hand_out::now) {
            // The caller hands it out before it returns: nothing stays to count.
            if (src != nullptr) {
                src->pool = nullptr;
            }
        } else {
            pool->undelivered.fetch_add(1, std::memory_order_relaxed);  // given back already
        }
        return true;
    }
    const bool hand_out_now = when != hand_out::later;
    // What the operation holds (shared budget units, a bounce buffer) goes back once this
    // function is done, outside the record lock, or with a record handed out now (below).
    op_holdings units_back;
    if (rec->held) [[unlikely]] {
        units_back = std::move(rec->held);
    }
    if (pool->retired.load(std::memory_order_relaxed)) {
        pool->give(rec);
        return false;
    }
    if (rec->reclaims) {
        pool->reclaim(rec->mark);
    }
    if (cq.rx_rule && c.ok() && (flags & cq_flag_recv) != 0 && rec->kind == op::recv) {
        rx_rule(cq, c, false);
    }
    // Counted (connection::in_flight) until the application has the completion: a reported one
    // keeps its record taken until poll hands it out (done_report, read with a sink),
    // a callback its record until it is called (done_callback); an internal hook gives its record
    // back first, so the pool's `undelivered` counts what it reports or defers.
    const bool internal = done == &done_internal;
    if (internal) {
        pool->undelivered.fetch_add(1, std::memory_order_relaxed);
    }
    const bool seen = done(*rec, c, sink);  // the one dispatch: report, callback or hook
    if (internal) {
        if (!seen) {
            pool->undelivered.fetch_sub(1, std::memory_order_relaxed);
        }
    } else if (seen) {
        if (rec->delivering.load(std::memory_order_relaxed)) {
            if (src != nullptr) {
                src->held = rec;
                if (hand_out_now && units_back) {
                    // Still ours until this poll hands it out (done_report kept it): its
                    // holdings go back with it.
                    rec->held = std::move(units_back);
                }
            }
        } else {
            pool->undelivered.fetch_add(1, std::memory_order_relaxed);  // given back already
        }
    }
    return seen;
}

}  // namespace

bool finish(const cq_impl& cq, completion& c, void* op_context, std::uint64_t flags,
            callback_sink* sink, entry_source* src, hand_out when) {
    return finish_entry(cq, c, op_context, flags, sink, src, when);
}

void cq_impl::defer(void (*fn)(const completion&), const completion& c, const op_pool* from,
                    op_record* held) {
    std::lock_guard lock(deliver_mu);
    deliveries.push_back({fn, c, from, held});  // grows to the largest batch once, then reuses
    if (deliverer != std::thread::id{} && deliverer != std::this_thread::get_id()) {
        deferred_by_others = true;  // that thread runs it: it must wake this reader's waits
    }
    deliveries_pending.store(true, std::memory_order_release);
}

void cq_impl::deliver() {
    if (!deliveries_pending.load(std::memory_order_acquire)) {
        return;
    }
    const std::shared_ptr<cq_impl> keep = self.lock();  // a callback may destroy our owner
    const auto me = std::this_thread::get_id();
    std::unique_lock lock(deliver_mu);
    if (deliverer != std::thread::id{}) {
        return;  // another thread runs them (or this one, further up: a callback polled)
    }
    deliverer = me;
    while (deliveries_head < deliveries.size()) {
        const pending_callback p = deliveries[deliveries_head++];
        delivering_from = p.from;
        // The pool is alive here: its teardown drops its callbacks under this lock.
        if (p.held != nullptr) {
            p.held->owner->give(p.held);
        } else {
            p.from->undelivered.fetch_sub(1, std::memory_order_relaxed);
        }
        lock.unlock();
        {
            completion_scope scope;
            p.fn(p.c);
        }
        lock.lock();
        delivering_from = nullptr;
        delivered_cv.notify_all();
    }
    deliveries.clear();
    deliveries_head = 0;
    deliveries_pending.store(false, std::memory_order_relaxed);
    deliverer = std::thread::id{};
    const bool wake = std::exchange(deferred_by_others, false);
    lock.unlock();
    delivered_cv.notify_all();
    if (wake) {
        // Callbacks another reader queued ran here: its wait must not sleep through them.
        if (progress_owned() || drive_signals.load()) {
            signal_notify();
        } else if (!polled) {
            cq_signal(cq.get());
        }
    }
}

void cq_impl::drop_deliveries(const op_pool* pool) {
    const auto me = std::this_thread::get_id();
    std::unique_lock lock(deliver_mu);
    auto first = deliveries.begin() + static_cast<std::ptrdiff_t>(deliveries_head);
    deliveries.erase(std::remove_if(first, deliveries.end(),
                                    [&](const pending_callback& p) {
                                        if (p.from != pool) {
                                            return false;
                                        }
                                        if (p.held != nullptr) {
                                            p.held->owner->give(p.held);
                                        }
                                        return true;
                                    }),
                     deliveries.end());
    if (deliverer == std::thread::id{} && deliveries_head == deliveries.size()) {
        deliveries.clear();
        deliveries_head = 0;
        deliveries_pending.store(false, std::memory_order_relaxed);
    }
    // A callback of `pool` running on another thread finishes first; one on this thread is the
    // caller's own (a callback destroying its connection). Other pools' callbacks are not
    // waited for: they may wait for a lock the caller holds.
    delivered_cv.wait(lock, [&] { return delivering_from != pool || deliverer == me; });
}

void hand_out_batch::flush() noexcept {
    std::size_t i = 0;
    while (i < n_) {
        // One lock per run of one pool's records (a private CQ's are all one connection's).
        std::size_t j = i + 1;
        while (j < n_ && held_[j]->owner == held_[i]->owner) {
            ++j;
        }
        held_[i]->owner->give_n(held_ + i, j - i);
        i = j;
    }
    n_ = 0;
}

void cq_impl::note_transport_loss(void* op_context, int fi_errno) {
    auto* rec = static_cast<op_record*>(op_context);
    if (rec != nullptr && rec->owner != nullptr && transport_lost(fi_errno)) {
        rec->owner->transport_lost.store(true, std::memory_order_relaxed);
    }
}

void cq_impl::refuse_stranger(completion& c, void* op_context, std::uint64_t source) {
    const auto* rec = static_cast<const op_record*>(op_context);
    if (rec == nullptr || rec->owner == nullptr ||
        !rec->owner->check_source.load(std::memory_order_relaxed) ||
        rec->owner->source.load(std::memory_order_relaxed) == source) {
        return;
    }
    c.status = make_error_code(errc::access_denied);
    c.bytes = 0;
    c.has_imm = false;
    c.imm = 0;
    strangers.fetch_add(1, std::memory_order_relaxed);
}

[[gnu::always_inline]] inline bool cq_impl::take_entry(completion& c, const raw_entry& e,
                                                       const std::uint64_t* source,
                                                       entry_source& src, hand_out when) {
    c = completion{};
    c.bytes = e.len;
    if (e.err != 0) [[unlikely]] {
        c.status = status_from_fi(e.err);
        note_transport_loss(e.context, e.err);
    } else {
        c.has_imm = (e.flags & cq_flag_remote_data) != 0;
        c.imm = c.has_imm ? e.data : 0;
        if (source != nullptr && (e.flags & cq_flag_recv) != 0) [[unlikely]] {
            refuse_stranger(c, e.context, *source);
        }
    }
    src = {owner_of(e.context), nullptr};
    // Callbacks read go to this CQ's deliveries: they run in deliver(), after the caller's lock.
    return finish_entry(*this, c, e.context, e.flags, this, &src, when);
}

ssize_t cq_impl::read_provider(completion* out, std::size_t n, std::size_t* consumed,
                               entry_source* from, hand_out_batch* now, bool units_with_record) {
    return read_entries(out, n, consumed, from, now, units_with_record);
}

tl::unexpected<error> cq_impl::read_failure(ssize_t code) const {
    return fail(fabric_error(static_cast<int>(code), read_failed_in));
}

[[gnu::always_inline]] inline ssize_t cq_impl::read_entries(completion* out, std::size_t n,
                                                            std::size_t* consumed,
                                                            entry_source* from, hand_out_batch* now,
                                                            bool units_with_record) {
    n = std::min(n, read_batch);
    const hand_out when = from == nullptr     ? hand_out::now
                          : units_with_record ? hand_out::next
                                              : hand_out::later;
    // Where a reported completion came from goes with it, or is handed out now (a poll).
    auto keep = [&](std::size_t at, const entry_source& src) {
        if (from != nullptr) {
            from[at] = src;
        } else {
            now->add(src);
        }
    };
    if (!backlog.empty()) [[unlikely]] {
        // What a detaching connection's drain read for the others comes first (it is older).
        std::size_t taken = 0;
        std::size_t emitted = 0;
        while (backlog_head < backlog.size() && taken < n) {
            const raw_entry e = backlog[backlog_head++];
            ++taken;
            entry_source src;
            if (take_entry(out[emitted], e, nullptr, src, when)) {
                keep(emitted, src);
                ++emitted;
            }
        }
        if (backlog_head == backlog.size()) {
            backlog.clear();
            backlog_head = 0;
        }
        if (consumed != nullptr) {
            *consumed = taken;
        }
        return static_cast<ssize_t>(emitted);
    }
    cq_entry entries[read_batch];
    fabric_addr sources[read_batch];
    ssize_t got =
        check_source ? cq_readfrom(cq.get(), entries, n, sources) : cq_read(cq.get(), entries, n);
    if (consumed != nullptr) {
        *consumed = got > 0 ? static_cast<std::size_t>(got) : 0;
    }
    if (got > 0) {
        std::size_t emitted = 0;
        for (ssize_t i = 0; i < got; ++i) {
            const cq_entry& e = entries[i];
            entry_source src;
            if (take_entry(out[emitted],
                           {entry_context(e.op_context, e.flags), e.flags, e.len, e.data, 0},
                           check_source ? &sources[i] : nullptr, src, when)) {
                keep(emitted, src);
                ++emitted;
            }
        }
        return static_cast<ssize_t>(emitted);
    }
    if (got == -fabric_errno::again) {
        return 0;
    }
    if (got == -fabric_errno::avail) {
        cq_error_entry err{};
        ssize_t r = cq_readerr(cq.get(), &err);
        if (r == -fabric_errno::again) {
            return 0;
        }
        if (r < 0) [[unlikely]] {
            read_failed_in = "fi_cq_readerr";
            return r;
        }
        if (consumed != nullptr) {
            *consumed = 1;
        }
        // An error entry without a code is still an error (fabric/cq.hpp gives it FI_EOTHER).
        entry_source src;
        if (!take_entry(out[0],
                        {entry_context(err.op_context, err.flags), err.flags, err.len, 0,
                         err.err != 0 ? err.err : fabric_errno::other},
                        nullptr, src, when)) {
            return 0;
        }
        keep(0, src);
        return 1;
    }
    read_failed_in = "fi_cq_read";
    return got;
}

inline ssize_t cq_impl::poll_locked(std::span<completion> out) {
    if (shared && detaching.load() != 0) {
        return 0;  // see fill_ready
    }
    auto lock = reader_lock();
    hand_out_batch handed;  // gives back before the lock goes (a pool may be detaching)
    // What is ready first (older; a wait or the progress thread read it), else the provider
    // directly: a busy-polling application makes progress itself instead of waiting for a
    // progress thread to be scheduled. A poll that hands out ready completions does not read the
    // provider too, nor does one right after a wait that read it dry (librpma's wait-then-poll
    // loop): the next one does, and the next wait reads before it arms.
    std::size_t n = take_ready(out, handed);
    const bool dry = std::exchange(read_dry, false);
    if (progress_owned() && ready_count == 0) {
        std::uint64_t v;
        if (::read(notify.get(), &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v)) && n == 0) {
            unreported = true;  // the thread reaped entries that reported nothing
        }
    }
    if (n != 0 || dry) {
        return static_cast<ssize_t>(n);
    }
    while (n < out.size()) {
        const std::size_t want = std::min<std::size_t>(out.size() - n, read_batch);
        std::size_t consumed = 0;
        const ssize_t r = read_entries(out.data() + n, want, &consumed, nullptr, &handed, false);
        if (r < 0) [[unlikely]] {
            return n != 0 ? static_cast<ssize_t>(n) : r;
        }
        const auto got = static_cast<std::size_t>(r);
        n += got;
        if (consumed > got) {
            unreported = true;  // callbacks ran: a wait after this poll must not sleep
        }
        if (got < want) {
            break;  // drained: another fi_cq_read would only cost a progress call
        }
    }
    return static_cast<ssize_t>(n);
}

result<std::size_t> cq_impl::poll(std::span<completion> out) {
    const ssize_t r = poll_locked(out);
    // What it ends comes with a later read. A same-host connection looks at its control on every
    // read: the peer's end must stop its posts even while completions keep coming.
    if (conn != nullptr && (r == 0 || conn->same_host)) {
        tick_if_due(*conn);
    }
    deliver();  // last: a callback may destroy the connection owning this CQ
    if (r < 0) [[unlikely]] {
        return read_failure(r);
    }
    return static_cast<std::size_t>(r);
}

ssize_t cq_impl::fill_ready() {
    reaped = false;
    if (progress_owned()) [[unlikely]] {
        // Drain the provider into the ring from this thread: safe, since waiters sleep on the
        // eventfd, and it saves the owner thread a wake-up on the way.
        bool r = false;
        pump(&r, false);  // the caller delivers, outside its own locks (a channel's)
        reaped = r;
        return static_cast<ssize_t>(ready_now());
    }
    std::unique_lock lock(read_mu, std::defer_lock);
    if (shared) {
        if (detaching.load() != 0) {
            return 0;  // a connection is being destroyed: nothing is lost, ask again
        }
        lock.lock();
    }
    if (ready_count == 0) {
        ready_head = 0;
        std::size_t consumed = 0;
        const ssize_t r =
            read_entries(ready.data(), ready.size(), &consumed, ready_from.data(), nullptr,
                         true);  // poll hands them out next (units with them)
        if (r < 0) [[unlikely]] {
            return r;
        }
        ready_count = static_cast<std::size_t>(r);
        reaped = consumed != 0;
        read_dry = consumed < ready.size();
    }
    return static_cast<ssize_t>(ready_count);
}

std::size_t cq_impl::ready_now() {
    std::lock_guard lock(owned_mu);
    return ready_count;
}

bool cq_impl::pump(bool* reaped_out, bool deliver_now, bool drain) {
    if (shared && detaching.load() != 0) {
        return false;  // a connection is being destroyed: see retire_connection
    }
    // The ring lock is held across the provider read so completions keep their order when the
    // application's poll reads the provider directly too.
    bool added = false;
    bool reaped_here = false;
    bool silent = false;  // entries that report nothing (callbacks): news only once delivered
    {
        std::lock_guard lock(owned_mu);
        for (;;) {
            if (ready_count == ready.size()) {
                break;  // the application holds a full CQ's worth: the provider's CQ is empty
            }
            // Read straight into the ring's free run after its tail (no batch to construct and
            // copy on every look): slots past ready_count are not the ring's until counted.
            const std::size_t end = ready_head + ready_count;  // < 2 * size: no division
            const std::size_t tail = end >= ready.size() ? end - ready.size() : end;
            const std::size_t run = tail >= ready_head ? ready.size() - tail : ready_head - tail;
            const std::size_t want = std::min<std::size_t>(run, 16);
            std::size_t consumed = 0;
            const ssize_t r = read_provider(&ready[tail], want, &consumed, &ready_from[tail]);
            if (r < 0 || consumed == 0) {
                break;
            }
            reaped_here = true;
            silent = silent || consumed > static_cast<std::size_t>(r);
            ready_count += static_cast<std::size_t>(r);
            added = added || r != 0;
            if (!drain && consumed < want) {
                // The provider (or the backlog) had no more than this, or an error entry comes
                // next: a looping reader finds the rest on its next look, sooner than another
                // read here would.
                break;
            }
        }
        if (reaped_here && !silent) {
            // Only completions for the ring: signalled under the ring's lock, so a poll that
            // takes them also clears their signal (else a later wait would wake to an empty ring).
            signal_notify();
        }
    }
    if (deliver_now) {
        deliver();  // the callbacks read, outside owned_mu, before waiters wake
    }
    if (silent) {  // a reaped entry without a report wakes waiters too, once its callback ran
        signal_notify();
    }
    if (reaped_out != nullptr) {
        *reaped_out = reaped_here;
    }
    return added;
}

void cq_impl::drive() {
    if (!progress_owned()) {
        cq_drive(cq.get());
    }
}

}  // namespace remora::detail

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

#include "core/impl.hpp"
#include "fabric/cq.hpp"

#include "core/cq_read.hpp"

// Completion queues: open, read the provider (one translation of an entry, then finish() maps it
// back to its operation), deliveries, the stash and the backlog. Waiting and polling:
// cq_wait.cpp; the public handle: completion_queue.cpp.

namespace remora::detail {

namespace {

remora::op op_from_flags(std::uint64_t f) {
    if (f & FI_REMOTE_WRITE)
        return op::remote_write;
    if (f & FI_RECV)
        return op::recv;
    if (f & FI_ATOMIC)
        return op::atomic;
    if (f & FI_READ)
        return op::read;
    if (f & FI_WRITE)
        return op::write;
    if (f & FI_SEND)
        return op::send;
    return op::unknown;
}

// Ends `c`'s requests past their deadline (an addon's, e.g. persistence_config::service_timeout);
// true if one had

}  // namespace

result<std::shared_ptr<cq_impl>> cq_impl::open(const std::shared_ptr<domain_impl>& dom,
                                               cq_kind kind, std::size_t size, std::uint64_t tag) {
    auto cq = std::make_shared<cq_impl>();
    cq->dom = dom;
    cq->kind = kind;
    cq->size = size;
    cq->tag = tag;
    cq->polled = dom->cq_polled;
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

bool finish(const cq_impl& cq, completion& c, void* op_context, std::uint64_t flags,
            op_record** held, bool hand_out_now) {
    auto* rec = static_cast<op_record*>(op_context);
    c.op = (flags & FI_REMOTE_WRITE) != 0 ? op::remote_write
           : rec != nullptr               ? rec->kind
                                          : op_from_flags(flags);
    if (rec == nullptr) {
        if (!c.ok() || (flags & (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) == 0) {
            // No operation of ours and not a peer's write with immediate data: an error entry
            // without context (sockets writes one when a peer goes away with operations in
            // flight). The application posted nothing it could belong to: never reported.
            cq.strays.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        c.tag = cq.tag;
        return true;  // a peer's write with immediate data: no local operation
    }
    if (!rec->in_use.load(std::memory_order_relaxed) ||
        rec->delivering.load(std::memory_order_relaxed)) {
        // Already finished: an RDM close() completed it (errc::canceled) before the provider's
        // own entry, read now, came through.
        return false;
    }
    c.tag = rec->owner->shared_rx && !cq.shared ? cq.tag : rec->owner->tag;
    // What the operation holds (shared budget units, a bounce buffer) goes back once this
    // function is done, outside the record lock, or with a record handed out now (below).
    op_holdings units_back;
    if (rec->held) [[unlikely]] {
        units_back = std::move(rec->held);
    }
    if (rec->owner->retired.load(std::memory_order_relaxed)) {
        rec->owner->give(rec);
        return false;
    }
    if (rec->reclaims) {
        rec->owner->reclaim(rec->mark);
    }
    // Counted (connection::in_flight) until the application has the completion: a reported one
    // keeps its record taken until poll hands it out (done_report under a callback_deferral),
    // a callback its record until it is called (done_callback); an internal hook gives its record
    // back first, so the pool's `undelivered` counts what it reports or defers.
    const op_pool* owner = rec->owner;
    const bool internal = rec->done == &done_internal;
    if (internal) {
        owner->undelivered.fetch_add(1, std::memory_order_relaxed);
    }
    const bool seen = rec->done(*rec, c);  // the one dispatch: report, callback or hook
    if (internal) {
        if (!seen) {
            owner->undelivered.fetch_sub(1, std::memory_order_relaxed);
        }
    } else if (seen) {
        if (rec->delivering.load(std::memory_order_relaxed)) {
            if (held != nullptr) {
                *held = rec;
                if (hand_out_now && units_back) {
                    // Still ours until this poll hands it out (done_report kept it): its
                    // holdings go back with it.
                    rec->held = std::move(units_back);
                }
            }
        } else {
            owner->undelivered.fetch_add(1, std::memory_order_relaxed);  // given back already
        }
    }
    return seen;
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
        if (progress_owned()) {
            std::uint64_t one = 1;
            [[maybe_unused]] ssize_t w = ::write(notify.get(), &one, sizeof(one));
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

inline bool cq_impl::take_entry(completion& c, const raw_entry& e, const std::uint64_t* source,
                                entry_source& src, bool with_record) {
    c = completion{};
    c.bytes = e.len;
    if (e.err != 0) [[unlikely]] {
        c.status = status_from_fi(e.err);
        note_transport_loss(e.context, e.err);
    } else {
        c.has_imm = (e.flags & FI_REMOTE_CQ_DATA) != 0;
        c.imm = c.has_imm ? e.data : 0;
        if (source != nullptr && (e.flags & FI_RECV) != 0) [[unlikely]] {
            refuse_stranger(c, e.context, *source);
        }
    }
    src = {owner_of(e.context), nullptr};
    return finish(*this, c, e.context, e.flags, &src.held, with_record);
}

result<std::size_t> cq_impl::read_provider(completion* out, std::size_t n, std::size_t* consumed,
                                           entry_source* from, hand_out_batch* now,
                                           bool units_with_record) {
    n = std::min(n, read_batch);
    const bool with_record = from == nullptr || units_with_record;
    // Where a reported completion came from goes with it, or is handed out now (a poll).
    auto keep = [&](std::size_t at, const entry_source& src) {
        if (from != nullptr) {
            from[at] = src;
        } else {
            now->add(src);
        }
    };
    if (backlog_head < backlog.size()) {
        // What a detaching connection's drain read for the others comes first (it is older).
        callback_deferral defer_callbacks(this);  // they run in deliver(), after the caller's lock
        std::size_t taken = 0;
        std::size_t emitted = 0;
        while (backlog_head < backlog.size() && taken < n) {
            const raw_entry e = backlog[backlog_head++];
            ++taken;
            entry_source src;
            if (take_entry(out[emitted], e, nullptr, src, with_record)) {
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
        return emitted;
    }
    fi_cq_data_entry entries[read_batch];
    fi_addr_t sources[read_batch];
    ssize_t got =
        check_source ? cq_readfrom(cq.get(), entries, n, sources) : cq_read(cq.get(), entries, n);
    if (consumed != nullptr) {
        *consumed = got > 0 ? static_cast<std::size_t>(got) : 0;
    }
    if (got > 0) {
        callback_deferral defer_callbacks(this);  // they run in deliver(), after the caller's lock
        std::size_t emitted = 0;
        for (ssize_t i = 0; i < got; ++i) {
            const fi_cq_data_entry& e = entries[i];
            entry_source src;
            if (take_entry(out[emitted], {e.op_context, e.flags, e.len, e.data, 0},
                           check_source ? &sources[i] : nullptr, src, with_record)) {
                keep(emitted, src);
                ++emitted;
            }
        }
        return emitted;
    }
    if (got == -FI_EAGAIN) {
        return 0;
    }
    if (got == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        ssize_t r = cq_readerr(cq.get(), &err);
        if (r == -FI_EAGAIN) {
            return 0;
        }
        if (r < 0) {
            return fail(fabric_error(static_cast<int>(r), "fi_cq_readerr"));
        }
        if (consumed != nullptr) {
            *consumed = 1;
        }
        callback_deferral defer_callbacks(this);
        // An error entry without a code is still an error (fabric/cq.hpp gives it FI_EOTHER).
        entry_source src;
        if (!take_entry(out[0],
                        {err.op_context, err.flags, err.len, 0, err.err != 0 ? err.err : FI_EOTHER},
                        nullptr, src, with_record)) {
            return 0;
        }
        keep(0, src);
        return 1;
    }
    return fail(fabric_error(static_cast<int>(got), "fi_cq_read"));
}

std::size_t cq_impl::owned_ready() {
    std::lock_guard lock(owned_mu);
    return owned_count;
}

bool cq_impl::pump(bool* reaped_out, bool deliver_now, bool drain) {
    if (shared && detaching.load() != 0) {
        return false;  // a connection is being destroyed: see retire_connection
    }
    // The ring lock is held across the provider read so completions keep their order when the
    // application's poll reads the provider directly too.
    bool added = false;
    bool reaped_here = false;
    {
        std::lock_guard lock(owned_mu);
        for (;;) {
            if (owned_count == owned.size()) {
                break;  // the application holds a full CQ's worth: the provider's CQ is empty
            }
            // Read straight into the ring's free run after its tail (no batch to construct and
            // copy on every look): slots past owned_count are not the ring's until counted.
            const std::size_t end = owned_head + owned_count;  // < 2 * size: no division
            const std::size_t tail = end >= owned.size() ? end - owned.size() : end;
            const std::size_t run = tail >= owned_head ? owned.size() - tail : owned_head - tail;
            const std::size_t want = std::min<std::size_t>(run, 16);
            std::size_t consumed = 0;
            auto r = read_provider(&owned[tail], want, &consumed, &owned_from[tail]);
            if (!r || consumed == 0) {
                break;
            }
            reaped_here = true;
            owned_count += *r;
            added = added || *r != 0;
            if (!drain && consumed < want) {
                // The provider (or the backlog) had no more than this, or an error entry comes
                // next: a looping reader finds the rest on its next look, sooner than another
                // read here would.
                break;
            }
        }
    }
    if (deliver_now) {
        deliver();  // the callbacks read, outside owned_mu, before waiters wake
    }
    if (added || reaped_here) {  // a reaped entry without a report wakes waiters too
        std::uint64_t one = 1;
        [[maybe_unused]] ssize_t w = ::write(notify.get(), &one, sizeof(one));
    }
    if (reaped_out != nullptr) {
        *reaped_out = reaped_here;
    }
    return added;
}

void cq_impl::read_all(const std::function<void(const raw_entry&)>& each) {
    for (;;) {
        fi_cq_data_entry entries[read_batch];
        const ssize_t got = cq_read(cq.get(), entries, read_batch);
        if (got > 0) {
            for (ssize_t i = 0; i < got; ++i) {
                const fi_cq_data_entry& d = entries[i];
                each({d.op_context, d.flags, d.len, d.data, 0});
            }
            continue;
        }
        if (got == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            if (cq_readerr(cq.get(), &err) == 1) {
                each({err.op_context, err.flags, err.len, err.data, err.err});
                continue;
            }
        }
        return;  // dry, or nothing more can be read now
    }
}

void cq_impl::drain_to_backlog() {
    read_all([&](const raw_entry& e) { backlog.push_back(e); });
}

void cq_impl::drive() {
    if (!progress_owned()) {
        cq_drive(cq.get());
    }
}

result<std::size_t> cq_impl::fill_stash() {
    reaped = false;
    if (progress_owned()) {
        // Drain the provider into the ring from this thread: safe, since waiters sleep on the
        // eventfd, and it saves the owner thread a wake-up on the way.
        bool r = false;
        pump(&r, false);  // the caller delivers, outside its own locks (a channel's)
        reaped = r;
        return owned_ready();
    }
    std::unique_lock lock(read_mu, std::defer_lock);
    if (shared) {
        if (detaching.load() != 0) {
            return 0;  // a connection is being destroyed: nothing is lost, ask again
        }
        lock.lock();
    }
    if (stash_count == 0) {
        stash_head = 0;
        std::size_t consumed = 0;
        auto r = read_provider(stash.data(), stash_capacity, &consumed, stash_from.data(), nullptr,
                               true);  // poll hands them out next (units with them)
        if (!r) {
            return r;
        }
        stash_count = *r;
        reaped = consumed != 0;
    }
    return stash_count;
}

}  // namespace remora::detail

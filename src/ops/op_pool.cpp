// SPDX-License-Identifier: BSD-3-Clause
// src/ops/op_pool.cpp — a connection's operation records: taking and giving them (the record
// side of reservation), the receives still posted, and the ring of unsignalled operations
// (selective signalling). Taking and giving are lock-free (op_pool::free_list says how); the
// ring and the scans run under the pool's mutex.
#include <algorithm>
#include <vector>

#include "ops/op_pool.hpp"

namespace remora::detail {

void op_pool::reset(std::size_t sends, std::size_t service, std::size_t recvs) {
    std::lock_guard lock(mu_);
    records_ = std::vector<op_record>(sends + service + recvs);
    next_ = std::make_unique<std::atomic<std::uint32_t>[]>(records_.size());
    sends_ = sends;
    service_ = service;
    const std::size_t sizes[queues] = {sends, service, recvs};
    std::size_t first = 0;
    for (std::size_t k = 0; k < queues; ++k) {
        // Records first..first+n-1 in index order: the lowest is taken first.
        const auto n = static_cast<std::uint32_t>(sizes[k]);
        for (std::uint32_t j = 0; j < n; ++j) {
            next_[first + j].store(j + 1 < n ? static_cast<std::uint32_t>(first + j + 1) : none,
                                   std::memory_order_relaxed);
        }
        free_[k].capacity = n;
        free_[k].head.store(pack(n != 0 ? static_cast<std::uint32_t>(first) : none, n, 0),
                            std::memory_order_release);
        first += n;
    }
    for (auto& r : records_) {
        r.owner = this;
    }
}

bool op_pool::take_n(queue q, std::size_t n, op_record** out) {
    free_list& f = free_[static_cast<std::size_t>(q)];
    std::uint64_t h = f.head.load(std::memory_order_acquire);
    for (;;) {
        if (free_in(h) < n) {
            return false;
        }
        // Walk n links from the top; a link changed under us shows as a changed head (the CAS
        // fails) or, before that, as an index out of range: read the head again.
        std::uint32_t at = top_in(h);
        bool torn = false;
        for (std::size_t i = 0; i < n; ++i) {
            if (at >= records_.size()) {
                torn = true;
                break;
            }
            out[i] = &records_[at];
            at = next_[at].load(std::memory_order_relaxed);
        }
        if (torn) {
            h = f.head.load(std::memory_order_acquire);
            continue;
        }
        if (f.head.compare_exchange_weak(
                h, pack(at, free_in(h) - static_cast<std::uint32_t>(n), tag_in(h) + 1),
                std::memory_order_acquire, std::memory_order_acquire)) {
            for (std::size_t i = 0; i < n; ++i) {
                arm_taken(out[i]);
            }
            return true;
        }
    }
}

void op_pool::push_quiet(op_record* r) {
    std::lock_guard lock(mu_);
    if (quiet_.empty()) {
        quiet_.resize(std::max<std::size_t>(2 * sends_, 2));
    }
    if (quiet_count_ == quiet_.size()) {
        // Full of stale entries (records that completed with an error): keep the valid ones.
        std::size_t kept = 0;
        for (std::size_t i = 0; i < quiet_count_; ++i) {
            const quiet_entry e = quiet_[(quiet_head_ + i) % quiet_.size()];
            if (quiet_valid(e)) {
                quiet_[(quiet_head_ + kept++) % quiet_.size()] = e;
            }
        }
        quiet_count_ = kept;
    }
    r->unsignaled.store(true, std::memory_order_relaxed);
    r->mark = quiet_next_++;
    quiet_[(quiet_head_ + quiet_count_) % quiet_.size()] = {r, r->mark};
    ++quiet_count_;
}

void op_pool::unpush_quiet(op_record* r) {
    std::lock_guard lock(mu_);
    // The newest entry: posts and pushes are serialised, and reclaim takes older ones only.
    if (quiet_count_ != 0 && quiet_[(quiet_head_ + quiet_count_ - 1) % quiet_.size()].rec == r) {
        --quiet_count_;
        --quiet_next_;
    }
    r->unsignaled.store(false, std::memory_order_relaxed);
}

void op_pool::mark_signalled(op_record* r) {
    std::lock_guard lock(mu_);
    r->reclaims = true;
    r->mark = quiet_next_;
}

void op_pool::reclaim(std::uint64_t mark) {
    // Every unsignalled operation posted before the signalled one whose completion is being read
    // is done (a connection's sends, writes and their completions are ordered): give their
    // records back (give_n returns what they hold and wakes, outside the lock).
    for (;;) {
        op_record* done[16];
        std::size_t n = 0;
        bool more = false;
        {
            std::lock_guard lock(mu_);
            while (quiet_count_ != 0 && n < 16) {
                const quiet_entry e = quiet_[quiet_head_];
                if (e.mark >= mark) {
                    break;
                }
                quiet_head_ = (quiet_head_ + 1) % quiet_.size();
                --quiet_count_;
                if (quiet_valid(e)) {
                    e.rec->unsignaled.store(false, std::memory_order_relaxed);
                    done[n++] = e.rec;
                }
            }
            more = n == 16;
        }
        give_n(done, n);
        if (!more) {
            return;
        }
    }
}

// What a record still holds (budget units, a bounce buffer) is moved out before the record is
// pushed (once pushed, another thread may take it) and released after, outside the CAS. A
// record holding budget units is announced by their give-back (held_units notifies the
// budget's gate, which is this pool's parked gate): one wake per operation, not two; `announce`
// counts the records that held none.
void op_pool::give_rest(op_record* r, bool wake) noexcept {
    // give_n for one record, without its batching; give() took it (in_use cleared).
    const auto i = static_cast<std::uint32_t>(r - records_.data());
    const auto q = static_cast<std::size_t>(queue_of(i));
    std::uint64_t announce = 1;
    if (!r->held) [[likely]] {
        push_chain(q, i, i, 1);  // holds nothing beside the record
    } else {
        op_holdings back = std::move(r->held);
        announce = back.units ? 0 : 1;
        push_chain(q, i, i, 1);
        back.units.reset();
        back.bounce.reset();
    }
    if (park_gate* g = gate.load(); wake && g != nullptr) {
        g->notify(announce);
    }
}

void op_pool::give_batch(op_record* const* rs, std::size_t n, bool wake) noexcept {
    // One chain a queue per 16 records, pushed with one CAS each (a batch is usually all one
    // queue's).
    constexpr std::size_t chunk = 16;
    for (std::size_t at = 0; at < n; at += chunk) {
        const std::size_t end = std::min(n, at + chunk);
        op_holdings back[chunk];
        std::size_t held = 0;
        std::uint64_t announce = 0;
        std::uint32_t first[queues];
        std::uint32_t last[queues];
        std::uint32_t count[queues] = {0, 0, 0};
        for (std::size_t j = at; j < end; ++j) {
            op_record* r = rs[j];
            // The exchange makes a second give of the same record (an RDM close and the
            // provider's own completion) a no-op, whichever thread makes it.
            if (!r->in_use.exchange(false, std::memory_order_relaxed)) {
                continue;
            }
            r->delivering.store(false, std::memory_order_relaxed);
            back[held] = std::move(r->held);
            announce += back[held++].units ? 0 : 1;
            const auto i = static_cast<std::uint32_t>(r - records_.data());
            const auto k = static_cast<std::size_t>(queue_of(i));
            if (count[k]++ == 0) {
                last[k] = i;
            } else {
                next_[i].store(first[k], std::memory_order_relaxed);
            }
            first[k] = i;
        }
        for (std::size_t k = 0; k < queues; ++k) {
            if (count[k] != 0) {
                push_chain(k, first[k], last[k], count[k]);
            }
        }
        for (std::size_t j = 0; j < held; ++j) {
            back[j].units.reset();
            back[j].bounce.reset();
        }
        if (park_gate* g = gate.load(); wake && g != nullptr) {
            g->notify(announce);
        }
    }
}

std::vector<op_record*> op_pool::posted_recvs() {
    std::lock_guard lock(mu_);
    std::vector<op_record*> out;
    for (std::size_t i = sends_ + service_; i < records_.size(); ++i) {
        if (records_[i].in_use.load(std::memory_order_relaxed) &&
            !records_[i].delivering.load(std::memory_order_relaxed)) {
            out.push_back(&records_[i]);
        }
    }
    return out;
}

op_record* op_pool::posted_recv_of(const void* context) {
    std::lock_guard lock(mu_);
    for (std::size_t i = sends_ + service_; i < records_.size(); ++i) {
        if (records_[i].in_use.load(std::memory_order_relaxed) &&
            !records_[i].delivering.load(std::memory_order_relaxed) &&
            records_[i].user_context.load(std::memory_order_relaxed) == context) {
            return &records_[i];
        }
    }
    return nullptr;
}

std::vector<std::pair<op_record*, bool>> op_pool::taken() {
    std::lock_guard lock(mu_);
    std::vector<std::pair<op_record*, bool>> out;
    for (std::size_t i = 0; i < records_.size(); ++i) {
        if (records_[i].in_use.load(std::memory_order_relaxed) &&
            !records_[i].delivering.load(std::memory_order_relaxed)) {
            out.emplace_back(&records_[i], i >= sends_ + service_);
        }
    }
    return out;
}

std::size_t op_pool::in_use(queue q) const {
    const free_list& f = free_[static_cast<std::size_t>(q)];
    return f.capacity - free_in(f.head.load(std::memory_order_relaxed));
}

std::size_t op_pool::in_use() const {
    return in_use(queue::send) + in_use(queue::service) + in_use(queue::recv);
}

}  // namespace remora::detail

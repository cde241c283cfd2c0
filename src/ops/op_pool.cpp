// SPDX-License-Identifier: BSD-3-Clause
// src/ops/op_pool.cpp — a connection's operation records: taking and giving them (the record
// side of admission), the receives still posted, and the ring of unsignalled operations
// (selective signalling). Everything runs under the budget's lock (budget_.exclusive).
#include <algorithm>
#include <vector>

#include "ops/op_pool.hpp"

namespace remora::detail {

void op_pool::reset(std::size_t sends, std::size_t service, std::size_t recvs) {
    budget_.exclusive([&](auto& l) {
        records_ = std::vector<op_record>(sends + service + recvs);
        sends_ = sends;
        service_ = service;
        l.reset({static_cast<std::uint32_t>(sends), static_cast<std::uint32_t>(service),
                 static_cast<std::uint32_t>(recvs)});
        for (auto& f : free_) {
            f.clear();
        }
        for (std::size_t i = records_.size(); i-- > 0;) {
            records_[i].owner = this;
            free_[static_cast<std::size_t>(queue_of(i))].push_back(static_cast<std::uint32_t>(i));
        }
    });
}

queue op_pool::queue_of(std::size_t index) const noexcept {
    return index < sends_ ? queue::send : index < sends_ + service_ ? queue::service : queue::recv;
}

op_record* op_pool::take(queue q) {
    const auto k = static_cast<std::size_t>(q);
    return budget_.exclusive([&](auto& l) -> op_record* {
        if (l.free(k) == 0) {
            return nullptr;  // that queue is full
        }
        l.take_one(k);
        op_record* r = &records_[free_[k].back()];
        free_[k].pop_back();
        r->in_use = true;
        r->internal = nullptr;
        r->unsignaled = false;
        r->reclaims = false;
        return r;
    });
}

bool op_pool::take_n(queue q, std::size_t n, op_record** out) {
    const auto k = static_cast<std::size_t>(q);
    return budget_.exclusive([&](auto& l) {
        if (l.free(k) < n) {
            return false;
        }
        for (std::size_t i = 0; i < n; ++i) {
            l.take_one(k);
            op_record* r = &records_[free_[k].back()];
            free_[k].pop_back();
            r->in_use = true;
            r->internal = nullptr;
            r->unsignaled = false;
            r->reclaims = false;
            out[i] = r;
        }
        return true;
    });
}

void op_pool::push_quiet(op_record* r) {
    budget_.exclusive([&](auto&) {
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
        r->unsignaled = true;
        r->mark = quiet_next_++;
        quiet_[(quiet_head_ + quiet_count_) % quiet_.size()] = {r, r->mark};
        ++quiet_count_;
    });
}

void op_pool::unpush_quiet(op_record* r) {
    budget_.exclusive([&](auto&) {
        // The newest entry: posts and pushes are serialised, and reclaim takes older ones only.
        if (quiet_count_ != 0 &&
            quiet_[(quiet_head_ + quiet_count_ - 1) % quiet_.size()].rec == r) {
            --quiet_count_;
            --quiet_next_;
        }
        r->unsignaled = false;
    });
}

void op_pool::mark_signalled(op_record* r) {
    budget_.exclusive([&](auto&) {
        r->reclaims = true;
        r->mark = quiet_next_;
    });
}

void op_pool::reclaim(std::uint64_t mark) {
    // Every unsignalled operation posted before the signalled one whose completion is being read
    // is done (a connection's sends, writes and their completions are ordered): give their
    // records back, and their units outside the lock (a parked acquirer may run), then wake.
    for (;;) {
        op_holdings back[16];
        std::size_t n = 0;
        std::uint64_t announce = 0;  // records without budget units (give_n says why)
        const bool more = budget_.exclusive([&](auto& l) {
            while (quiet_count_ != 0 && n < 16) {
                const quiet_entry e = quiet_[quiet_head_];
                if (e.mark >= mark) {
                    break;
                }
                quiet_head_ = (quiet_head_ + 1) % quiet_.size();
                --quiet_count_;
                if (quiet_valid(e)) {
                    e.rec->in_use = false;
                    e.rec->unsignaled = false;
                    announce += e.rec->held.units ? 0 : 1;
                    back[n++] = std::move(e.rec->held);
                    const auto i = static_cast<std::size_t>(e.rec - records_.data());
                    const auto k = static_cast<std::size_t>(queue_of(i));
                    free_[k].push_back(static_cast<std::uint32_t>(i));
                    l.give_one(k);
                }
            }
            return n == 16;
        });
        for (std::size_t j = 0; j < n; ++j) {
            back[j].units.reset();  // outside the lock; each notifies for its operation
            back[j].bounce.reset();
        }
        if (park_gate* g = gate.load(); g != nullptr) {
            g->notify(announce);
        }
        if (!more) {
            return;
        }
    }
}

void op_pool::give(op_record* r, bool wake) noexcept {
    give_n(&r, 1, wake);
}

void op_pool::give_n(op_record* const* rs, std::size_t n, bool wake) noexcept {
    constexpr std::size_t chunk = 16;
    for (std::size_t at = 0; at < n; at += chunk) {
        const std::size_t end = std::min(n, at + chunk);
        // What the records still hold goes back after them, outside the lock. A record holding
        // budget units is announced by their give-back (held_units notifies the budget's gate,
        // which is this pool's: parked_gate): one wake per operation, not two.
        op_holdings back[chunk];
        std::uint64_t announce = 0;
        budget_.exclusive([&](auto& l) {
            for (std::size_t j = at; j < end; ++j) {
                op_record* r = rs[j];
                if (!r->in_use) {
                    continue;
                }
                r->in_use = false;
                r->delivering.store(false, std::memory_order_relaxed);
                back[j - at] = std::move(r->held);
                announce += back[j - at].units ? 0 : 1;
                const auto i = static_cast<std::size_t>(r - records_.data());
                const auto k = static_cast<std::size_t>(queue_of(i));
                free_[k].push_back(static_cast<std::uint32_t>(i));
                l.give_one(k);
            }
        });
        for (std::size_t j = 0; j < end - at; ++j) {
            back[j].units.reset();
            back[j].bounce.reset();
        }
        if (park_gate* g = gate.load(); wake && g != nullptr) {
            g->notify(announce);
        }
    }
}

std::vector<op_record*> op_pool::posted_recvs() {
    return budget_.exclusive([&](auto&) {
        std::vector<op_record*> out;
        for (std::size_t i = sends_ + service_; i < records_.size(); ++i) {
            if (records_[i].in_use && !records_[i].delivering.load(std::memory_order_relaxed)) {
                out.push_back(&records_[i]);
            }
        }
        return out;
    });
}

std::vector<std::pair<op_record*, bool>> op_pool::taken() {
    return budget_.exclusive([&](auto&) {
        std::vector<std::pair<op_record*, bool>> out;
        for (std::size_t i = 0; i < records_.size(); ++i) {
            if (records_[i].in_use && !records_[i].delivering.load(std::memory_order_relaxed)) {
                out.emplace_back(&records_[i], i >= sends_ + service_);
            }
        }
        return out;
    });
}

std::size_t op_pool::in_use(queue q) const {
    return budget_.exclusive(
        [&](const auto& l) { return std::size_t{l.used(static_cast<std::size_t>(q))}; });
}

std::size_t op_pool::in_use() const {
    return budget_.exclusive(
        [&](const auto& l) { return std::size_t{l.used(0)} + l.used(1) + l.used(2); });
}
}  // namespace remora::detail

#include <mutex>
#include <vector>

#include "core/op_pool.hpp"

// A connection's operation records: taking and giving them (admission), the receives still
// posted, and the ring of unsignalled operations (selective signalling).

namespace remora::detail {

void op_pool::reset(std::size_t sends, std::size_t service, std::size_t recvs) {
    std::lock_guard lock(mu_);
    records_ = std::vector<op_record>(sends + service + recvs);
    sends_ = sends;
    service_ = service;
    for (auto& f : free_) {
        f.clear();
    }
    for (std::size_t i = records_.size(); i-- > 0;) {
        records_[i].owner = this;
        free_[static_cast<std::size_t>(queue_of(i))].push_back(static_cast<std::uint32_t>(i));
    }
}

queue op_pool::queue_of(std::size_t index) const noexcept {
    return index < sends_ ? queue::send : index < sends_ + service_ ? queue::service : queue::recv;
}

op_record* op_pool::take(queue q) {
    std::lock_guard lock(mu_);
    auto& free = free_[static_cast<std::size_t>(q)];
    if (free.empty()) {
        return nullptr;
    }
    op_record* r = &records_[free.back()];
    free.pop_back();
    r->in_use = true;
    r->internal = nullptr;
    r->unsignaled = false;
    r->reclaims = false;
    return r;
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
    r->unsignaled = true;
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
    r->unsignaled = false;
}

void op_pool::mark_signalled(op_record* r) {
    std::lock_guard lock(mu_);
    r->reclaims = true;
    r->mark = quiet_next_;
}

void op_pool::reclaim(std::uint64_t mark) {
    // Every unsignalled operation posted before the signalled one whose completion is being read
    // is done (a connection's sends, writes and their completions are ordered): give their
    // records back, and their units outside the lock (a parked acquirer may run).
    for (;;) {
        op_holdings back[16];
        std::size_t n = 0;
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
                    e.rec->in_use = false;
                    e.rec->unsignaled = false;
                    back[n++] = std::move(e.rec->held);
                    const auto i = static_cast<std::size_t>(e.rec - records_.data());
                    free_[static_cast<std::size_t>(queue_of(i))].push_back(
                        static_cast<std::uint32_t>(i));
                }
            }
            if (n < 16) {
                return;  // `back` releases on the way out
            }
        }
    }
}

void op_pool::give(op_record* r) noexcept {
    std::lock_guard lock(mu_);
    if (!r->in_use) {
        return;
    }
    r->in_use = false;
    const auto i = static_cast<std::size_t>(r - records_.data());
    free_[static_cast<std::size_t>(queue_of(i))].push_back(static_cast<std::uint32_t>(i));
}

std::vector<op_record*> op_pool::posted_recvs() {
    std::lock_guard lock(mu_);
    std::vector<op_record*> out;
    for (std::size_t i = sends_ + service_; i < records_.size(); ++i) {
        if (records_[i].in_use) {
            out.push_back(&records_[i]);
        }
    }
    return out;
}

std::vector<std::pair<op_record*, bool>> op_pool::taken() {
    std::lock_guard lock(mu_);
    std::vector<std::pair<op_record*, bool>> out;
    for (std::size_t i = 0; i < records_.size(); ++i) {
        if (records_[i].in_use) {
            out.emplace_back(&records_[i], queue_of(i) == queue::recv);
        }
    }
    return out;
}

std::size_t op_pool::in_use(queue q) const {
    std::lock_guard lock(mu_);
    const std::size_t total = q == queue::send      ? sends_
                              : q == queue::service ? service_
                                                    : records_.size() - sends_ - service_;
    return total - free_[static_cast<std::size_t>(q)].size();
}

std::size_t op_pool::in_use() const {
    std::lock_guard lock(mu_);
    return records_.size() - free_[0].size() - free_[1].size() - free_[2].size();
}
}  // namespace remora::detail

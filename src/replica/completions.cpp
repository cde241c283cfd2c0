// SPDX-License-Identifier: BSD-3-Clause
// src/replica/completions.cpp — what the application asks of a replica set besides writing:
// its completions (poll, wait, drain), drop(), and the observers.
#include <string>

#include <remora/replica_set.hpp>

#include "replica/replica_impl.hpp"

namespace remora {

std::size_t replica_set::poll(std::span<replica_completion> out) {
    detail::replica_core& s = *detail::impl_of(*this);
    std::lock_guard lock(s.mu);
    std::size_t n = 0;
    while (n < out.size() && s.ring_count > 0) {
        const std::uint32_t rec = s.ring[s.ring_head];
        s.ring_head = (s.ring_head + 1) % s.ring.size();
        --s.ring_count;
        out[n++] = s.records[rec].out;
        s.records[rec].delivered = true;
        s.settle_or_free(rec);
    }
    return n;
}

bool replica_set::wait(std::chrono::milliseconds timeout) {
    detail::replica_core& s = *detail::impl_of(*this);
    std::unique_lock lock(s.mu);
    return s.cv.wait_for(lock, timeout, [&] { return s.ring_count > 0; });
}

result<void> replica_set::drain(std::chrono::milliseconds timeout) {
    detail::replica_core& s = *detail::impl_of(*this);
    std::unique_lock lock(s.mu);
    if (!s.cv.wait_for(lock, timeout,
                       [&] { return s.active == 0 && s.delivering == 0 && s.deferred.empty(); })) {
        return fail(errc::timed_out,
                    "replica_set::drain: " + std::to_string(s.active) + " writes still in flight");
    }
    return {};
}

result<void> replica_set::drop(std::size_t index) {
    detail::replica_core& s = *detail::impl_of(*this);
    detail::replica_outbox box;
    {
        std::unique_lock lock(s.mu);
        if (index >= s.members.size()) {
            return fail(errc::invalid_argument,
                        "replica_set::drop: no member " + std::to_string(index));
        }
        if (s.members[index]->state == replica_state::dropped) {
            return fail(errc::bad_state, "replica_set::drop: the member is dropped already");
        }
        s.drop_locked(static_cast<std::uint32_t>(index), make_error_code(errc::bad_state), box);
        s.hand_out(lock, box);
    }
    return {};
}

std::size_t replica_set::size() const noexcept {
    const auto& s = *detail::impl_of(*this);
    return s.members.size();
}

std::uint32_t replica_set::quorum() const noexcept {
    const auto& s = *detail::impl_of(*this);
    return s.quorum;
}

std::uint64_t replica_set::range() const noexcept {
    const auto& s = *detail::impl_of(*this);
    return s.range;
}

std::size_t replica_set::live() const noexcept {
    const auto& s = *detail::impl_of(*this);
    std::lock_guard lock(s.mu);
    return s.live;
}

replica_state replica_set::state(std::size_t index) const {
    const auto& s = *detail::impl_of(*this);
    std::lock_guard lock(s.mu);
    return index < s.members.size() ? s.members[index]->state : replica_state::dropped;
}

std::size_t replica_set::in_flight() const noexcept {
    const auto& s = *detail::impl_of(*this);
    std::lock_guard lock(s.mu);
    return s.active;
}

std::size_t replica_set::pending(std::size_t index) const {
    const auto& s = *detail::impl_of(*this);
    std::lock_guard lock(s.mu);
    return index < s.members.size() ? s.members[index]->pending : 0;
}

std::uint64_t replica_set::missing(std::size_t index) const {
    const auto& s = *detail::impl_of(*this);
    std::lock_guard lock(s.mu);
    if (index >= s.members.size()) {
        return 0;
    }
    std::uint64_t bytes = 0;
    for (const auto& [lo, hi] : s.members[index]->missing) {
        bytes += hi - lo;
    }
    if (s.copy_member == static_cast<int>(index)) {
        bytes += s.copy_hi - s.copy_lo;
    }
    return bytes;
}

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
#include <remora/registration_cache.hpp>

#include <algorithm>

namespace remora {

struct registration_cache::state {
    domain dom;
    std::size_t capacity = 0;
    struct entry {
        const std::byte* base;
        std::size_t length;
        std::shared_ptr<const memory_region> mr;
        std::uint64_t last_use;
    };
    mutable std::mutex mu;
    std::vector<entry> entries;
    std::uint64_t clock = 0;
    registration_cache_stats st;

    explicit state(domain d) : dom(std::move(d)) {}
};

registration_cache::registration_cache(std::unique_ptr<state> s) : s_(std::move(s)) {}
registration_cache::registration_cache(registration_cache&&) noexcept = default;
registration_cache& registration_cache::operator=(registration_cache&&) noexcept = default;
registration_cache::~registration_cache() = default;

result<registration_cache> registration_cache::create(const domain& dom, std::size_t capacity) {
    if (!dom) {
        return fail(errc::bad_state,
                    "registration_cache: the domain handle is empty (closed or moved from)");
    }
    if (capacity == 0) {
        return fail(errc::invalid_argument, "registration_cache: capacity must be > 0");
    }
    auto s = std::make_unique<state>(dom);
    s->capacity = capacity;
    return registration_cache(std::move(s));
}

result<cached_region> registration_cache::get(std::span<std::byte> memory, usage uses) {
    if (memory.empty()) {
        return fail(errc::invalid_argument, "registration_cache: empty memory");
    }
    state& s = *s_;
    {
        std::lock_guard lock(s.mu);
        for (auto& e : s.entries) {
            if (e.base <= memory.data() && memory.data() + memory.size() <= e.base + e.length &&
                has_all(e.mr->usages(), uses)) {
                e.last_use = ++s.clock;
                ++s.st.hits;
                cached_region out;
                out.mr_ = e.mr;
                out.offset_ = static_cast<std::size_t>(memory.data() - e.base);
                return out;
            }
        }
    }
    // Register outside the lock: it is the slow part.
    auto mr = memory_region::create(s.dom, memory, uses);
    if (!mr) {
        return fail(mr.error());
    }
    auto shared = std::make_shared<const memory_region>(std::move(*mr));
    std::vector<std::shared_ptr<const memory_region>> dropped;  // deregistered outside the lock
    {
        std::lock_guard lock(s.mu);
        ++s.st.misses;
        s.entries.push_back({memory.data(), memory.size(), shared, ++s.clock});
        while (s.entries.size() > s.capacity) {
            // The least recently used registration nobody holds.
            auto victim = s.entries.end();
            for (auto it = s.entries.begin(); it != s.entries.end(); ++it) {
                if (it->mr.use_count() == 1 && it->mr != shared &&
                    (victim == s.entries.end() || it->last_use < victim->last_use)) {
                    victim = it;
                }
            }
            if (victim == s.entries.end()) {
                break;  // everything is in use: over capacity until handles go
            }
            dropped.push_back(std::move(victim->mr));
            s.entries.erase(victim);
            ++s.st.evictions;
        }
    }
    cached_region out;
    out.mr_ = std::move(shared);
    out.offset_ = 0;
    return out;
}

void registration_cache::invalidate(std::span<const std::byte> memory) noexcept {
    std::vector<std::shared_ptr<const memory_region>> dropped;
    std::lock_guard lock(s_->mu);
    auto& es = s_->entries;
    for (auto it = es.begin(); it != es.end();) {
        const bool overlaps =
            it->base < memory.data() + memory.size() && memory.data() < it->base + it->length;
        if (overlaps) {
            dropped.push_back(std::move(it->mr));
            it = es.erase(it);
        } else {
            ++it;
        }
    }
}

registration_cache_stats registration_cache::stats() const {
    std::lock_guard lock(s_->mu);
    registration_cache_stats st = s_->st;
    st.entries = s_->entries.size();
    return st;
}

const domain& registration_cache::dom() const noexcept {
    return s_->dom;
}

}  // namespace remora

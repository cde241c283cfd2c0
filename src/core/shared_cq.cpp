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

#include "core/impl.hpp"
#include "fabric/cq.hpp"

#include "core/cq_read.hpp"

// A CQ shared by several connections: its budget, attaching and detaching connections (with
// the teardown drain, also an RDM peer's close), and the public shared_completion_queue handle.

namespace remora {
namespace detail {

// ---------------------------------------------------------------- shared CQ budget

cq_impl::~cq_impl() {
    if (shared && progress != nullptr) {
        std::lock_guard lock(dom->progress_mu);
        progress->unwatch(this);
    }
}

result<void> cq_impl::attach_connection(connection_impl* c, std::size_t need,
                                        const std::string& what) {
    return budget.exclusive([&](auto& l) -> result<void> {
        if (!l.try_take({static_cast<std::uint32_t>(need)})) {
            return fail(errc::too_large,
                        what + " needs " + std::to_string(need) + " entries of the shared CQ of " +
                            std::to_string(size) + ", which has " + std::to_string(l.free(0)) +
                            " free (" + std::to_string(attached.size()) +
                            " connections attached): it could overflow");
        }
        if (std::find(attached.begin(), attached.end(), c) == attached.end()) {
            attached.push_back(c);  // once, also when it is both the connection's CQ and RCQ
        }
        return {};
    });
}

void cq_impl::retire_connection(connection_impl* c) {
    budget.exclusive([&](auto&) {
        attached.erase(std::remove(attached.begin(), attached.end(), c), attached.end());
    });
    // A reader inside finish() for one of c's records holds this lock: once we have had it,
    // every later completion of c is dropped (its pool is retired), so no hook of c runs.
    // Readers step aside until detach_connection is done: none calls into the provider's CQ
    // while the endpoint closes (sockets could deadlock on that) or holds the lock the drain
    // needs.
    ++detaching;
    { std::lock_guard lock(progress_owned() ? owned_mu : read_mu); }
}

// The teardown drain: every entry the provider's CQ holds now, read raw (detach_connection, an
// RDM peer's close).
void cq_impl::read_all(const std::function<void(const raw_entry&)>& each) {
    for (;;) {
        cq_entry entries[read_batch];
        const ssize_t got = cq_read(cq.get(), entries, read_batch);
        if (got > 0) {
            for (ssize_t i = 0; i < got; ++i) {
                const cq_entry& d = entries[i];
                each({entry_context(d.op_context, d.flags), d.flags, d.len, d.data, 0});
            }
            continue;
        }
        if (got == -fabric_errno::avail) {
            cq_error_entry err{};
            if (cq_readerr(cq.get(), &err) == 1) {
                each({entry_context(err.op_context, err.flags), err.flags, err.len, err.data,
                      err.err});
                continue;
            }
        }
        return;  // dry, or nothing more can be read now
    }
}

void cq_impl::drain_to_backlog() {
    read_all([&](const raw_entry& e) { backlog.push_back(e); });
}

void cq_impl::detach_connection(std::size_t need) {
    const bool owned_here = progress_owned();
    bool pending = false;
    {
        std::lock_guard lock(owned_here ? owned_mu : read_mu);
        // Completions already read and not yet handed out: purge the retired connections'.
        std::size_t kept = 0;
        for (std::size_t i = 0; i < ready_count; ++i) {
            const std::size_t at = (ready_head + i) % ready.size();
            const entry_source& from = ready_from[at];
            if (from.pool == nullptr || !from.pool->retired.load()) {
                const std::size_t to = (ready_head + kept++) % ready.size();
                ready[to] = ready[at];
                ready_from[to] = from;
            } else if (from.held != nullptr) {
                from.held->owner->give(from.held);  // its pool is alive until detached
            }
        }
        ready_count = kept;
        // The backlog's and the provider's entries of retired connections are dropped (their
        // records given back); the others' wait in the backlog for the CQ's reader.
        auto keep_or_drop = [&](const raw_entry& e) {
            const op_pool* src = owner_of(e.context);
            if (src != nullptr && src->retired.load()) {
                completion ignored;
                finish(*this, ignored, e.context, e.flags, nullptr);  // retired: no callback
                return false;
            }
            return true;
        };
        std::vector<raw_entry> kept_backlog;
        for (std::size_t i = backlog_head; i < backlog.size(); ++i) {
            if (keep_or_drop(backlog[i])) {
                kept_backlog.push_back(backlog[i]);
            }
        }
        read_all([&](const raw_entry& e) {
            if (keep_or_drop(e)) {
                kept_backlog.push_back(e);
            }
        });
        backlog = std::move(kept_backlog);
        backlog_head = 0;
        pending = !backlog.empty();
    }
    if (pending) {
        // Wake the CQ's reader: its provider CQ may be dry now while the backlog waits.
        if (owned_here) {
            progress->kick(this);
        } else {
            cq_signal(cq.get());
        }
    }
    budget.give({static_cast<std::uint32_t>(need)});
    --detaching;  // raised by retire_connection
}

void cq_impl::drive_attached() {
    budget.exclusive([&](auto&) {
        for (connection_impl* c : attached) {
            c->poll_events();
        }
    });
    drive();
}
}  // namespace detail

result<shared_completion_queue> shared_completion_queue::create(const domain& dom,
                                                                const shared_cq_config& cfg) {
    const auto d = detail::shared_impl_of(dom);
    if (!d) {
        return fail(errc::bad_state, "shared_completion_queue: empty domain handle");
    }
    if (cfg.size == 0) {
        return fail(errc::invalid_argument, "shared_completion_queue: size must be > 0");
    }
    std::size_t size = cfg.size;
    if (d->caps.cq_size != 0) {
        size = std::min(size, d->caps.cq_size);  // what the provider grants
    }
    auto q = detail::cq_impl::open(d, cq_kind::cq, size, cfg.tag);
    if (!q) {
        return fail(q.error());
    }
    auto& impl = *q;
    impl->shared = true;
    impl->budget.exclusive([&](auto& l) { l.reset({static_cast<std::uint32_t>(size)}); });
    if (cfg.progress_thread) {
        std::lock_guard lock(d->progress_mu);
        if (!d->progress) {
            auto engine = detail::progress_engine::start(d->policy, d->spin);
            if (!engine) {
                return fail(engine.error());
            }
            d->progress = std::move(*engine);
        }
        if (auto r = d->progress->watch(impl.get()); !r) {
            return fail(r.error());
        }
    }
    shared_completion_queue out;
    out.impl_ = std::move(impl);
    return out;
}

completion_queue& shared_completion_queue::queue() const noexcept {
    return detail::impl_of(*this)->handle;
}
std::size_t shared_completion_queue::size() const noexcept {
    return impl_ ? detail::impl_of(*this)->size : 0;
}
std::size_t shared_completion_queue::reserved() const noexcept {
    if (!impl_) {
        return 0;
    }
    return detail::impl_of(*this)->budget.exclusive(
        [](const auto& l) { return std::size_t{l.used(0)}; });
}
std::size_t shared_completion_queue::connections() const noexcept {
    if (!impl_) {
        return 0;
    }
    return detail::impl_of(*this)->budget.exclusive(
        [&](const auto&) { return detail::impl_of(*this)->attached.size(); });
}
}  // namespace remora

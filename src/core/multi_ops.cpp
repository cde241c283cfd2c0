// SPDX-License-Identifier: BSD-3-Clause
// src/core/multi_ops.cpp — multi-key operations: one operation whose parts address several remote
// regions (connection::gather_write, and its read-side twin connection::scatter_read, which share
// everything here but the direction: multi_kind). Its parts are reserved in one all-or-nothing step
// (the records: op_pool::take_n; the shared budget's units: one held_units for all of them), posted
// one by one, and complete once: each part's record is armed with an internal hook that counts it
// down, and the last one reports the whole operation (ops/done.hpp: done_internal).
//
// The connection owns each operation's state (a connection extension, multi_registry) until its
// last part is done: a connection destroyed with one in flight frees it, for then no part may
// ever complete (a shared CQ drops a retired connection's completions; a private CQ goes with it).
#include <remora/connection.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/extension.hpp"
#include "core/impl.hpp"
#include "core/multi_ops.hpp"
#include "fabric/endpoint.hpp"

namespace remora {
namespace detail {

namespace {

struct multi_op;

// A part's completion context: its operation and its index.
struct multi_part {
    multi_op* op = nullptr;
    std::uint32_t index = 0;
};

std::atomic<std::size_t> multi_alive{0};  // multi_ops_alive()

// A connection's multi-key operations in flight, owned here until their last part is done (or
// the connection goes).
using multi_registry = owned_operations<multi_op>;

// The parts' shared state, from reservation until the last part's completion.
struct multi_op {
    multi_op(std::size_t n, multi_registry& r) : parts(n), status(n), registry(&r) {
        for (std::size_t i = 0; i < n; ++i) {
            parts[i] = {this, static_cast<std::uint32_t>(i)};
        }
        multi_alive.fetch_add(1);
    }
    ~multi_op() { multi_alive.fetch_sub(1); }
    multi_op(const multi_op&) = delete;
    multi_op& operator=(const multi_op&) = delete;
    std::vector<multi_part> parts;
    std::vector<std::error_code> status;  // each written once, by its part, before `left` drops
    std::atomic<std::size_t> left{0};
    std::atomic<bool> abandoned{false};  // a part's post failed: the call reported it
    held_units units;                    // connection_config::slots units of every part
    std::shared_ptr<const void> keep;    // what the caller's layer holds until completion
    void* context = nullptr;
    void (*callback)(const completion&) = nullptr;
    const op_pool* pool = nullptr;  // the connection's: its callback counts there until it runs
    bool report_success = true;
    op kind = op::write;  // how the operation completes
    std::size_t bytes = 0;
    multi_registry* registry;
};

const char multi_registry_key = 0;

multi_registry& multi_registry_of(connection_impl& c) {
    return static_cast<multi_registry&>(c.extension(&multi_registry_key, [] {
        return std::unique_ptr<connection_extension>(new multi_registry());
    }));
}

// The operation's outcome, once every part is done. Returns whether the CQ's reader sees it.
bool finish_multi(std::unique_ptr<multi_op> m, completion& c, callback_sink* sink) {
    if (m->abandoned.load()) {
        return false;  // the post already returned the error
    }
    c.op = m->kind;
    c.status = {};
    c.failed_part = 0;
    return report_parts(std::move(m), c, sink);
}

bool multi_part_done(void* context, completion& c, callback_sink* sink) {
    auto* part = static_cast<multi_part*>(context);
    multi_op* m = part->op;
    m->status[part->index] = c.status;
    if (m->left.fetch_sub(1) != 1) {
        return false;  // not the last part
    }
    return finish_multi(m->registry->release(m), c, sink);
}

}  // namespace

std::size_t multi_ops_alive() noexcept {
    return multi_alive.load();
}

}  // namespace detail

namespace detail {

namespace {

enum class multi_dir { write, read };

// What a multi-key operation's parts do, and what each side must allow: a gather_write's parts
// write local pieces into the remote segments, a scatter_read's read the segments into them.
struct multi_kind {
    const char* what;  // the call, in errors
    op kind;           // how it completes
    post_kind post;
    usage local_need;
    usage remote_need;
};

constexpr multi_kind kind_of(multi_dir d) {
    return d == multi_dir::write ? multi_kind{"gather_write", op::write, post_kind::write,
                                              usage::write_source, usage::write_destination}
                                 : multi_kind{"scatter_read", op::read, post_kind::read,
                                              usage::read_destination, usage::read_source};
}

// A multi-key operation without park_mode::queue: `segs` are the remote segments, [local_offset,
// + their total) of `local` the local range they are written from or read into.
result<void> multi_rma_now(connection_impl& c, const multi_kind& k,
                           std::span<const remote_segment> segs, const memory_region& local,
                           std::size_t local_offset, const op_options& opts, const units& extra,
                           const std::shared_ptr<const void>& keep) {
    const char* what = k.what;
    if (auto r = check_open_for(c, opts, what); !r) {
        return r;
    }
    if (segs.empty()) {
        return fail(errc::invalid_argument, std::string(what) + ": no remote segment");
    }
    if (segs.size() > connection::max_gather_parts || segs.size() > c.config.sq_size) {
        return fail(errc::too_large,
                    std::string(what) + ": " + std::to_string(segs.size()) + " parts exceed " +
                        std::to_string(connection::max_gather_parts) +
                        " or the send queue's depth " + std::to_string(c.config.sq_size));
    }
    if (opts.report == completion_mode::at_post) {
        return fail(
            errc::invalid_argument,
            std::string(what) + ": completion_mode::at_post is for single writes and sends");
    }
    if (detail::impl_of(local) == nullptr) {
        return fail(errc::invalid_argument, std::string(what) + ": the local region is empty");
    }
    const region_impl& lr = *detail::impl_of(local);
    if (lr.dom.get() != c.region_dom) {
        return fail(errc::invalid_argument,
                    std::string(what) + ": local region registered in another domain");
    }
    if (!has_all(lr.uses, k.local_need)) {
        return fail(errc::access_denied,
                    std::string(what) + ": local region not registered for this use");
    }
    std::size_t total = 0;
    for (std::size_t i = 0; i < segs.size(); ++i) {
        const remote_segment& s = segs[i];
        // The part's name only for an error: built per part, it cost each call N allocations.
        auto part = [i, what] { return std::string(what) + ": part " + std::to_string(i) + ": "; };
        if (s.region == nullptr || s.length == 0) {
            return fail(errc::invalid_argument,
                        part() + (s.region == nullptr ? "no remote region" : "zero length"));
        }
        if (auto r = s.region->check(s.offset, s.length, k.remote_need); !r) {
            return fail(r.error().code(), part() + r.error().message());
        }
        if (auto r = check_same_host(c, *s.region, what); !r) {
            return fail(r.error().code(), part() + r.error().message());
        }
        total += s.length;
    }
    if (local_offset > lr.memory.size() || total > lr.memory.size() - local_offset) {
        return fail(errc::out_of_range, std::string(what) + ": local range [" +
                                            std::to_string(local_offset) + ", +" +
                                            std::to_string(total) + ") outside region of " +
                                            std::to_string(lr.memory.size()) + " bytes");
    }

    // Reservation: every part's record and every part's units, or nothing.
    const std::size_t n = segs.size();
    op_record* recs[connection::max_gather_parts];
    units need;
    need[unit::sq] = static_cast<std::uint32_t>(n);
    need[unit::cq] = static_cast<std::uint32_t>(n);
    for (std::size_t k = 0; k < unit_kinds; ++k) {
        need.n[k] += extra.n[k];
    }
    auto reserved = reserve_parked(c, opts, what, [&]() -> result<held_units> {
        if (!c.ops.take_n(queue::send, n, recs)) {
            return fail(errc::would_block, std::string(what) + ": " + std::to_string(n) +
                                               " send-queue entries are not free (depth " +
                                               std::to_string(c.config.sq_size) +
                                               "); reap completions");
        }
        if (!c.config.slots) {
            return held_units{};
        }
        auto h = held_units::take(c.config.slots, need);
        if (!h) {
            for (std::size_t i = 0; i < n; ++i) {
                c.ops.give(recs[i], false);  // untouched (op_pool::give)
            }
            return fail(h.error().code(),
                        std::string(what) + ": shared slot pool: " + h.error().message());
        }
        return h;
    });
    if (!reserved) {
        return fail(reserved.error());
    }
    multi_registry& registry = multi_registry_of(c);
    auto m = std::make_unique<multi_op>(n, registry);
    m->units = std::move(*reserved);
    m->keep = keep;
    m->context = opts.context;
    m->callback = opts.callback;
    m->pool = &c.ops;
    m->report_success = opts.report == completion_mode::always;
    m->kind = k.kind;
    m->bytes = total;
    m->left.store(n);
    for (std::size_t i = 0; i < n; ++i) {
        arm_internal(*recs[i], &multi_part_done, &m->parts[i], k.kind);
    }

    // Post the parts. From here on the connection owns `m`, and the last part to complete frees
    // it.
    multi_op* mp = registry.adopt(std::move(m));
    std::size_t at = local_offset;
    for (std::size_t i = 0; i < n; ++i) {
        const remote_segment& s = segs[i];
        iovec iov{lr.memory.data() + at, s.length};
        void* desc = lr.desc;
        fabric_post p{.kind = k.post,
                      .iov = &iov,
                      .desc = &desc,
                      .count = 1,
                      .remote = {remote_start(c, *s.region, s.offset), s.length, s.region->key()},
                      .context = recs[i]};
        if (auto err = door(c, p, what); !err) {
            // Parts i.. are not posted: their records go back; the operation is reported here,
            // by this return, and its posted parts complete silently.
            for (std::size_t j = i + 1; j < n; ++j) {
                release_failed(*recs[j]);
            }
            mp->abandoned.store(true);
            if (mp->left.fetch_sub(n - i) == n - i) {
                registry.release(mp);  // every posted part has completed already: freed here
            }
            return fail(err.error().code(),
                        std::string(what) + ": part " + std::to_string(i) + " of " +
                            std::to_string(n) + ": " + err.error().message() +
                            (i == 0 ? "; nothing was posted" : "; earlier parts were posted"));
        }
        at += s.length;
    }
    return {};
}

}  // namespace

}  // namespace detail

namespace detail {

namespace {

result<void> multi_rma_with(connection_impl& c, multi_dir d, std::span<const remote_segment> segs,
                            const memory_region& local, std::size_t local_offset,
                            const op_options& opts, const units& extra,
                            std::shared_ptr<const void> keep) {
    const multi_kind k = kind_of(d);
    if (opts.park == park_mode::queue) {
        std::vector<remote_segment> copies(segs.begin(), segs.end());
        std::vector<remote_region> regions;
        regions.reserve(copies.size());
        for (const remote_segment& s : copies) {
            if (s.region == nullptr) {
                return fail(errc::invalid_argument,
                            std::string(k.what) + ": a part has no remote region");
            }
            regions.push_back(*s.region);
        }
        // The queued call owns copies of the descriptors; its segments point at them.
        struct parts {
            std::vector<remote_segment> segs;
            std::vector<remote_region> regions;
        };
        auto owned = std::make_shared<parts>(parts{std::move(copies), std::move(regions)});
        for (std::size_t i = 0; i < owned->segs.size(); ++i) {
            owned->segs[i].region = &owned->regions[i];
        }
        return post_or_queue(
            c, opts, k.kind, k.what,
            [impl = &c, k, owned, local = &local, local_offset, extra, keep](const op_options& o) {
                return multi_rma_now(*impl, k, owned->segs, *local, local_offset, o, extra, keep);
            });
    }
    return multi_rma_now(c, k, segs, local, local_offset, opts, extra, keep);
}

}  // namespace

result<void> gather_write_with(connection_impl& c, std::span<const remote_segment> dst,
                               const memory_region& src, std::size_t src_offset,
                               const op_options& opts, const units& extra,
                               std::shared_ptr<const void> keep) {
    return multi_rma_with(c, multi_dir::write, dst, src, src_offset, opts, extra, std::move(keep));
}

result<void> scatter_read_with(connection_impl& c, std::span<const remote_segment> src,
                               const memory_region& dst, std::size_t dst_offset,
                               const op_options& opts, const units& extra,
                               std::shared_ptr<const void> keep) {
    return multi_rma_with(c, multi_dir::read, src, dst, dst_offset, opts, extra, std::move(keep));
}

}  // namespace detail

result<void> connection::gather_write(std::span<const remote_segment> dst, const memory_region& src,
                                      std::size_t src_offset, op_options opts) {
    return detail::gather_write_with(*detail::impl_of(*this), dst, src, src_offset, opts, units{},
                                     nullptr);
}

result<void> connection::scatter_read(std::span<const remote_segment> src, const memory_region& dst,
                                      std::size_t dst_offset, op_options opts) {
    return detail::scatter_read_with(*detail::impl_of(*this), src, dst, dst_offset, opts, units{},
                                     nullptr);
}

}  // namespace remora

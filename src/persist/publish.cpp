// SPDX-License-Identifier: BSD-3-Clause
// src/persist/publish.cpp — remora::publish: data writes, their flush and the 8-byte atomic
// write that publishes them, reserved together and completing once.
//
// Reservation takes everything at once (ops/reservation.hpp): the send-queue records of the writes,
// of a read-after-write flush and of a native atomic (op_pool::take_n) with their units of the
// shared budget (one held_units), and the target service's request entries of a GPSPM flush and
// of a service atomic (reserve_request). Phase 1 posts the writes and the flush; each part's
// completion counts down (a record's internal hook, or the service request's hook). The last one
// starts phase 2: when every part succeeded it posts the atomic on the entry it reserved,
// otherwise it gives that entry back and reports. The atomic's completion reports the whole.
//
// The connection owns each operation's state (a connection extension) until it is done, so a
// connection destroyed with one in flight frees it (no part of it can complete after that).
#include <remora/persistence.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/upper.hpp"
#include "persist/service.hpp"

namespace remora {
namespace detail {
namespace {

struct publish_op;

struct publish_part {
    publish_op* op = nullptr;
    std::uint32_t index = 0;
};

using publish_registry = owned_operations<publish_op>;

std::atomic<std::size_t> publish_alive{0};  // publish_ops_alive()

// The atomic's reserved entry: not yet posted, posted, or ended before it was posted (an RDM
// close() completes every taken record, canceled).
enum : int { atomic_reserved = 0, atomic_posted = 1, atomic_dropped = 2 };

struct publish_op {
    publish_op(std::size_t writes, publish_registry& r)
        : parts(writes + 2), status(writes + 2), registry(&r) {
        for (std::size_t i = 0; i < parts.size(); ++i) {
            parts[i] = {this, static_cast<std::uint32_t>(i)};
        }
        publish_alive.fetch_add(1);
    }
    ~publish_op() { publish_alive.fetch_sub(1); }
    publish_op(const publish_op&) = delete;
    publish_op& operator=(const publish_op&) = delete;

    std::vector<publish_part> parts;      // writes, flush, atomic
    std::vector<std::error_code> status;  // each written once, by its part
    std::atomic<std::size_t> left{0};     // phase-1 parts (writes and flush) not yet completed
    std::atomic<bool> abandoned{false};   // a phase-1 post failed: the call reported it
    held_units units;
    connection_impl* conn = nullptr;
    void* context = nullptr;
    void (*callback)(const completion&) = nullptr;
    const op_pool* pool = nullptr;
    bool report_success = true;
    std::size_t bytes = 0;
    // The atomic, posted in phase 2: on its record (native) or its service slot.
    bool native = false;
    op_record* atomic_rec = nullptr;
    std::uint32_t atomic_slot = 0;
    std::atomic<int> atomic_state{atomic_reserved};
    std::uint64_t address = 0;       // the flag word, as its descriptor names it (the service's)
    std::uint64_t post_address = 0;  // where a native atomic reaches it (detail::remote_start)
    std::uint64_t key = 0;
    std::uint64_t value = 0;
    publish_registry* registry;

    std::size_t writes() const noexcept { return parts.size() - 2; }
    std::uint32_t atomic_index() const noexcept {
        return static_cast<std::uint32_t>(parts.size() - 1);
    }
};

const char publish_registry_key = 0;

publish_registry& publish_registry_of(connection_impl& c) {
    return static_cast<publish_registry&>(c.extension(&publish_registry_key, [] {
        return std::unique_ptr<connection_extension>(new publish_registry());
    }));
}

// The operation's one report. Returns whether the CQ's reader sees `c`.
bool finish(publish_op* mp, completion& c, callback_sink* sink) {
    std::unique_ptr<publish_op> m = mp->registry->release(mp);
    c.op = op::publish;
    c.status = {};
    c.failed_part = 0;
    c.has_imm = false;
    c.imm = 0;
    return report_parts(std::move(m), c, sink);
}

// Gives back the atomic's reserved entry (never posted).
void drop_atomic(publish_op& m) {
    if (m.native) {
        int expected = atomic_reserved;
        if (m.atomic_state.compare_exchange_strong(expected, atomic_dropped)) {
            release_failed(*m.atomic_rec);
        }
    } else {
        release_request(*m.conn, m.atomic_slot);
    }
}

bool atomic_done(void* context, completion& c, callback_sink* sink) {
    auto* part = static_cast<publish_part*>(context);
    publish_op* m = part->op;
    int expected = atomic_reserved;
    if (m->native && m->atomic_state.compare_exchange_strong(expected, atomic_dropped)) {
        return false;  // completed before it was posted (RDM close): phase 1 sees it dropped
    }
    m->status[part->index] = c.status;
    return finish(m, c, sink);
}

// Phase 2: every write and the flush are done.
bool start_atomic(publish_op* m, completion& c, callback_sink* sink) {
    if (m->abandoned.load()) {
        m->registry->release(m);  // the call reported it and gave the atomic's entry back
        return false;
    }
    const bool failed = std::any_of(m->status.begin(), m->status.end() - 1,
                                    [](const std::error_code& e) { return bool(e); });
    connection_impl& conn = *m->conn;
    if (failed) {
        drop_atomic(*m);
        return finish(m, c, sink);
    }
    if (!conn.open.load() || conn.closed.load()) {
        drop_atomic(*m);
        m->status[m->atomic_index()] = make_error_code(errc::disconnected);
        return finish(m, c, sink);
    }
    if (m->native) {
        int expected = atomic_reserved;
        if (!m->atomic_state.compare_exchange_strong(expected, atomic_posted)) {
            m->status[m->atomic_index()] = make_error_code(errc::canceled);
            return finish(m, c, sink);
        }
        op_record* r = m->atomic_rec;
        r->operands[0] = m->value;
        fabric_post p{.kind = post_kind::atomic_write,
                      .flags = atomic_write_flags(conn),
                      .remote = {m->post_address, 1, m->key},
                      .operands = r->operands,
                      .context = r};
        auto err = door(conn, p, "publish");
        if (err) {
            return false;  // the atomic's completion reports (m may be gone already)
        }
        m->status[m->atomic_index()] = err.error().code();
        return finish(m, c, sink);
    }
    service_request rq;
    rq.op = service_op::atomic_write;
    rq.key = m->key;
    rq.address = m->address;
    rq.arg0 = m->value;
    auto r = hook_request(conn, m->atomic_slot, rq, &atomic_done, &m->parts[m->atomic_index()]);
    if (r) {
        return false;
    }
    m->status[m->atomic_index()] = r.error().code();
    return finish(m, c, sink);
}

bool publish_part_done(void* context, completion& c, callback_sink* sink) {
    auto* part = static_cast<publish_part*>(context);
    publish_op* m = part->op;
    m->status[part->index] = c.status;
    if (m->left.fetch_sub(1) != 1) {
        return false;
    }
    return start_atomic(m, c, sink);
}

// What reservation took.
struct taken {
    op_record* recs[connection::max_gather_parts + 2] = {};
    std::size_t nrecs = 0;
    held_units units;
    std::uint32_t flush_slot = 0;
    std::uint32_t atomic_slot = 0;
};

result<void> publish_now(connection_impl& c, std::span<const remote_segment> data,
                         const memory_region& src, std::size_t src_offset,
                         const remote_region& flag, std::uint64_t flag_offset, std::uint64_t value,
                         flush_options how, const op_options& opts,
                         const result<flush_method>& method, atomic_path path) {
    const char* what = "publish";
    if (auto r = check_open_for(c, opts, what); !r) {
        return r;
    }
    if (data.empty()) {
        return fail(errc::invalid_argument, "publish: no remote segment");
    }
    if (opts.report == completion_mode::at_post) {
        return fail(errc::invalid_argument,
                    "publish: completion_mode::at_post is for single writes and sends");
    }
    if (detail::impl_of(src) == nullptr) {
        return fail(errc::invalid_argument, "publish: the local region is empty");
    }
    if (!same_domain(c, src)) {
        return fail(errc::invalid_argument, "publish: local region registered in another domain");
    }
    if (!has_all(src.usages(), usage::write_source)) {
        return fail(errc::access_denied, "publish: local region not registered for this use");
    }
    const std::span<std::byte> local = src.memory();
    const std::size_t n = data.size();
    std::size_t total = 0;
    std::uint64_t lo = UINT64_MAX, hi = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const remote_segment& s = data[i];
        const std::string part = "publish: part " + std::to_string(i) + " (write): ";
        if (s.region == nullptr || s.length == 0) {
            return fail(errc::invalid_argument,
                        part + (s.region == nullptr ? "no remote region" : "zero length"));
        }
        if (auto r = s.region->check(s.offset, s.length, usage::write_destination); !r) {
            return fail(r.error().code(), part + r.error().message());
        }
        if (auto r = check_same_host(c, *s.region, "publish"); !r) {
            return fail(r.error().code(), part + r.error().message());
        }
        if (s.region->key() != data[0].region->key() ||
            s.region->address() != data[0].region->address()) {
            return fail(errc::invalid_argument,
                        part + "not in part 0's remote region (the flush names one region)");
        }
        lo = std::min<std::uint64_t>(lo, s.offset);
        hi = std::max<std::uint64_t>(hi, s.offset + s.length);
        total += s.length;
    }
    if (src_offset > local.size() || total > local.size() - src_offset) {
        return fail(errc::out_of_range, "publish: local range [" + std::to_string(src_offset) +
                                            ", +" + std::to_string(total) + ") outside region of " +
                                            std::to_string(local.size()) + " bytes");
    }
    const remote_region& dr = *data[0].region;
    const std::string flush_part = "publish: part " + std::to_string(n) + " (flush): ";
    if (auto r = dr.check(lo, hi - lo, usage::flush_target); !r) {
        return fail(r.error().code(), flush_part + r.error().message());
    }
    if (!method) {
        return fail(method.error().code(), flush_part + method.error().message());
    }
    const bool gpspm = *method == flush_method::gpspm;
    const bool persist_flush =
        has_all(dr.persistence(), persistence::persistent) && how.type != flush_type::visibility;
    const std::string atomic_part = "publish: part " + std::to_string(n + 1) + " (atomic): ";
    if (auto r = flag.check(flag_offset, 8, usage::atomic_target); !r) {
        return fail(r.error().code(), atomic_part + r.error().message());
    }
    // A native atomic reaches the flag itself (on a same-host connection at its same-host
    // address); the service's atomic names it as the target registered it.
    const bool native = path == atomic_path::native;
    if (native) {
        if (auto r = check_same_host(c, flag, "publish"); !r) {
            return fail(r.error().code(), atomic_part + r.error().message());
        }
    }
    if ((native ? remote_start(c, flag, flag_offset) : flag.address() + flag_offset) % 8 != 0) {
        return fail(errc::invalid_argument, atomic_part + "target word is not 8-byte aligned");
    }
    if (path == atomic_path::none) {
        return fail(errc::not_supported,
                    atomic_part + "provider " + caps_of(c).provider +
                        " has no native atomics; give the connection a persistence_config with a "
                        "service_depth to use the "
                        "target's service");
    }
    const std::size_t nrecs = n + (gpspm ? 0 : 1) + (native ? 1 : 0);
    if (n > connection::max_gather_parts || nrecs > c.config.sq_size) {
        return fail(errc::too_large, "publish: " + std::to_string(n) + " writes exceed " +
                                         std::to_string(connection::max_gather_parts) + ", or " +
                                         std::to_string(nrecs) +
                                         " send-queue entries exceed its depth " +
                                         std::to_string(c.config.sq_size));
    }
    const memory_region* scratch = nullptr;
    if (!gpspm) {
        auto s = flush_scratch(c);
        if (!s) {
            return fail(s.error());
        }
        scratch = *s;
    }

    // Reservation: every record, every unit and every service slot, or nothing.
    units need;
    need[unit::sq] = static_cast<std::uint32_t>(nrecs);
    need[unit::cq] = static_cast<std::uint32_t>(nrecs);
    const std::size_t slots_needed = (gpspm ? 1 : 0) + (native ? 0 : 1);
    auto reserved = reserve_parked(c, opts, what, [&]() -> result<std::unique_ptr<taken>> {
        auto t = std::make_unique<taken>();
        if (!c.ops.take_n(queue::send, nrecs, t->recs)) {
            return fail(errc::would_block, "publish: " + std::to_string(nrecs) +
                                               " send-queue entries are not free (depth " +
                                               std::to_string(c.config.sq_size) +
                                               "); reap completions");
        }
        t->nrecs = nrecs;
        // Undoing a step does not notify the gate (op_pool::give with wake false): units come last,
        // as their undo would.
        auto give_recs = [&] {
            for (std::size_t i = 0; i < nrecs; ++i) {
                c.ops.give(t->recs[i], false);
            }
        };
        std::uint32_t got[2];
        auto release_slots = [&](std::size_t k) {
            for (std::size_t j = 0; j < k; ++j) {
                release_request(c, got[j], false);
            }
        };
        for (std::size_t k = 0; k < slots_needed; ++k) {
            auto s = reserve_request(c);
            if (!s) {
                release_slots(k);
                give_recs();
                return fail(s.error().code(),
                            "publish: the target's service: " + s.error().message());
            }
            got[k] = *s;
        }
        if (c.config.slots) {
            auto h = held_units::take(c.config.slots, need);
            if (!h) {
                release_slots(slots_needed);
                give_recs();
                return fail(h.error().code(), "publish: shared slot pool: " + h.error().message());
            }
            t->units = std::move(*h);
        }
        std::size_t k = 0;
        if (gpspm) {
            t->flush_slot = got[k++];
        }
        if (!native) {
            t->atomic_slot = got[k++];
        }
        return t;
    });
    if (!reserved) {
        return fail(reserved.error());
    }
    taken& t = **reserved;
    publish_registry& registry = publish_registry_of(c);
    auto m = std::make_unique<publish_op>(n, registry);
    m->units = std::move(t.units);
    m->conn = &c;
    m->context = opts.context;
    m->callback = opts.callback;
    m->pool = &c.ops;
    m->report_success = opts.report == completion_mode::always;
    m->bytes = total;
    m->native = native;
    m->address = flag.address() + flag_offset;
    m->post_address = remote_start(c, flag, flag_offset);
    m->key = flag.key();
    m->value = value;
    m->left.store(n + 1);
    for (std::size_t i = 0; i < n; ++i) {
        arm_internal(*t.recs[i], &publish_part_done, &m->parts[i], op::write);
    }
    op_record* flush_rec = gpspm ? nullptr : t.recs[n];
    if (flush_rec != nullptr) {
        arm_internal(*flush_rec, &publish_part_done, &m->parts[n], op::flush);
    }
    if (native) {
        m->atomic_rec = t.recs[nrecs - 1];
        arm_internal(*m->atomic_rec, &atomic_done, &m->parts[n + 1], op::atomic);
    } else {
        m->atomic_slot = t.atomic_slot;
    }

    // Phase 1. From here on the connection owns the operation; the last part frees it.
    publish_op* mp = registry.adopt(std::move(m));
    auto abandon = [&](std::size_t i, const error& e) -> result<void> {
        // Parts i.. of phase 1 are not posted: their entries go back, with the atomic's; the
        // call reports the operation, and its posted parts complete silently.
        for (std::size_t j = i + 1; j < n; ++j) {
            release_failed(*t.recs[j]);
        }
        if (i < n) {
            if (flush_rec != nullptr) {
                release_failed(*flush_rec);
            } else {
                release_request(c, t.flush_slot);
            }
        }
        drop_atomic(*mp);
        mp->abandoned.store(true);
        if (mp->left.fetch_sub(n + 1 - i) == n + 1 - i) {
            registry.release(mp);
        }
        return fail(e.code(),
                    "publish: part " + std::to_string(i) + " of " + std::to_string(n + 2) + " (" +
                        (i < n ? "write" : "flush") + "): " + e.message() +
                        (i == 0 ? "; nothing was posted" : "; earlier parts were posted"));
    };
    std::size_t at = src_offset;
    for (std::size_t i = 0; i < n; ++i) {
        const remote_segment& s = data[i];
        iovec iov{local.data() + at, s.length};
        void* desc = local_desc(src);
        fabric_post p{.kind = post_kind::write,
                      .iov = &iov,
                      .desc = &desc,
                      .count = 1,
                      .remote = {remote_start(c, *s.region, s.offset), s.length, s.region->key()},
                      .context = t.recs[i]};
        if (auto err = door(c, p, what); !err) {
            return abandon(i, err.error());
        }
        at += s.length;
    }
    if (flush_rec != nullptr) {
        // Read-after-write: an 8-byte read behind the writes on the same connection.
        const std::uint64_t from = std::min<std::uint64_t>(lo, dr.length() - 1);
        const std::size_t len =
            static_cast<std::size_t>(std::min<std::uint64_t>(8, dr.length() - from));
        iovec iov{persist_of(c).scratch_bytes.data(), len};
        void* desc = local_desc(*scratch);
        fabric_post p{.kind = post_kind::read,
                      .flags = ordered_read_flags(c),
                      .iov = &iov,
                      .desc = &desc,
                      .count = 1,
                      .remote = {remote_start(c, dr, from), len, dr.key()},
                      .context = flush_rec};
        if (auto err = door(c, p, what); !err) {
            flush_rec = nullptr;  // given back by the door
            return abandon(n, err.error());
        }
    } else {
        service_request rq;
        rq.op = service_op::flush;
        rq.flags = persist_flush ? flush_persistent : 0;
        rq.key = dr.key();
        rq.address = dr.address() + lo;
        rq.arg0 = hi - lo;
        auto r = hook_request(c, t.flush_slot, rq, &publish_part_done, &mp->parts[n]);
        if (!r) {
            flush_rec = nullptr;
            t.flush_slot = 0;
            // hook_request gave the slot back.
            drop_atomic(*mp);
            mp->abandoned.store(true);
            if (mp->left.fetch_sub(1) == 1) {
                registry.release(mp);
            }
            return fail(r.error().code(),
                        "publish: part " + std::to_string(n) + " of " + std::to_string(n + 2) +
                            " (flush): " + r.error().message() + "; earlier parts were posted");
        }
    }
    return {};
}

}  // namespace

std::size_t publish_ops_alive() noexcept {
    return publish_alive.load();
}

}  // namespace detail

result<void> publish(connection& conn, std::span<const remote_segment> data,
                     const memory_region& src, std::size_t src_offset, const remote_region& flag,
                     std::uint64_t flag_offset, std::uint64_t value, flush_options how,
                     op_options opts) {
    using namespace detail;
    auto& c = *detail::impl_of(conn);
    // The flush's method and the atomic's path depend only on the configuration and the
    // descriptor (an empty or bad one: publish_now reports the segment's own error first).
    result<flush_method> method =
        !data.empty() && data[0].region != nullptr
            ? flush_method_for(conn, *data[0].region, how)
            : result<flush_method>(fail(errc::invalid_argument, "publish: no remote segment"));
    const atomic_path path = atomics(conn);
    if (opts.park == park_mode::queue) {
        struct owned_parts {
            std::vector<remote_segment> segs;
            std::vector<remote_region> regions;
            remote_region flag;
        };
        auto owned = std::make_shared<owned_parts>();
        for (const remote_segment& s : data) {
            if (s.region == nullptr) {
                return fail(errc::invalid_argument, "publish: a part has no remote region");
            }
            owned->segs.push_back(s);
            owned->regions.push_back(*s.region);
        }
        owned->flag = flag;
        for (std::size_t i = 0; i < owned->segs.size(); ++i) {
            owned->segs[i].region = &owned->regions[i];
        }
        return post_or_queue(c, opts, op::publish, "publish",
                             [impl = &c, owned, src = &src, src_offset, flag_offset, value, how,
                              method, path](const op_options& o) {
                                 return publish_now(*impl, owned->segs, *src, src_offset,
                                                    owned->flag, flag_offset, value, how, o, method,
                                                    path);
                             });
    }
    return publish_now(c, data, src, src_offset, flag, flag_offset, value, how, opts, method, path);
}

}  // namespace remora

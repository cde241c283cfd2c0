// SPDX-License-Identifier: BSD-3-Clause
// src/replica/replica_set.cpp — forming a replica set, its writes and their completions
// (remora::replica_set). The set's thread and rejoin's copies: catch_up.cpp.
#include <algorithm>
#include <bit>
#include <string>

#include <remora/replica_set.hpp>

#include "base/log.hpp"
#include "replica/replica_impl.hpp"

namespace remora {

namespace {

thread_local bool in_callback = false;

bool bit(std::uint32_t mask, std::uint32_t m) noexcept {
    return (mask >> m) & 1u;
}

}  // namespace

bool detail::replica_in_callback() noexcept {
    return in_callback;
}

const char* to_string(replica_state s) noexcept {
    switch (s) {
        case replica_state::live:
            return "live";
        case replica_state::dropped:
            return "dropped";
        case replica_state::catching_up:
            return "catching_up";
    }
    return "unknown";
}

const char* to_string(replica_event_kind k) noexcept {
    switch (k) {
        case replica_event_kind::dropped:
            return "dropped";
        case replica_event_kind::rejoined:
            return "rejoined";
        case replica_event_kind::quorum_lost:
            return "quorum_lost";
        case replica_event_kind::quorum_regained:
            return "quorum_regained";
    }
    return "unknown";
}

result<void> detail::check_member(const connection& conn, const remote_region& region,
                                  const replica_set_config& cfg, std::uint64_t* range) {
    if (!conn.is_open()) {
        return fail(errc::invalid_argument, "replica_set: a member's connection is not open");
    }
    if (!has_all(region.usages(), usage::write_destination | usage::flush_target)) {
        return fail(errc::invalid_argument,
                    "replica_set: a member's region must grant write_destination and flush_target");
    }
    auto method = flush_method_for(conn, region, cfg.how);
    if (!method) {
        return fail(method.error());
    }
    const std::uint32_t sq = conn.config().sq_size;
    if (*method == flush_method::gpspm) {
        const std::uint32_t service = persistence_config_of(conn).service_depth;
        if (sq < cfg.depth || service < cfg.depth) {
            return fail(
                errc::too_large,
                "replica_set: a member flushing by GPSPM needs sq_size and service_depth of "
                "at least the set's depth " +
                    std::to_string(cfg.depth) + " (it has " + std::to_string(sq) + " and " +
                    std::to_string(service) + ")");
        }
    } else if (sq < 2 * cfg.depth) {
        return fail(errc::too_large,
                    "replica_set: a member needs sq_size of at least 2 x the set's "
                    "depth (a write and a flush each): " +
                        std::to_string(2 * cfg.depth) + ", it has " + std::to_string(sq));
    }
    *range = std::min(*range, region.length());
    return {};
}

result<replica_set> replica_set::create(std::span<const replica> members,
                                        const replica_set_config& config) {
    if (members.empty() || members.size() > max_replicas) {
        return fail(errc::invalid_argument, "replica_set: 1 to " + std::to_string(max_replicas) +
                                                " members, not " + std::to_string(members.size()));
    }
    const auto n = static_cast<std::uint32_t>(members.size());
    const std::uint32_t quorum = config.quorum == 0 ? n : config.quorum;
    if (quorum > n) {
        return fail(errc::invalid_argument, "replica_set: a quorum of " + std::to_string(quorum) +
                                                " with " + std::to_string(n) + " members");
    }
    if (config.depth == 0 || config.depth > 4096) {
        return fail(errc::invalid_argument, "replica_set: depth must be 1 to 4096");
    }
    if (config.behind_limit <= std::chrono::milliseconds(0) || config.copy_chunk == 0) {
        return fail(errc::invalid_argument, "replica_set: behind_limit and copy_chunk must be > 0");
    }
    std::uint64_t range = UINT64_MAX;
    for (const replica& m : members) {
        if (m.conn == nullptr) {
            return fail(errc::invalid_argument, "replica_set: a member without a connection");
        }
        if (!(m.conn->dom() == members[0].conn->dom())) {
            return fail(errc::invalid_argument,
                        "replica_set: every member's connection must be of one domain");
        }
        if (auto r = detail::check_member(*m.conn, m.region, config, &range); !r) {
            return fail(r.error());
        }
    }
    auto s = std::make_unique<detail::replica_core>();
    s->cfg = config;
    s->quorum = quorum;
    s->range = range;
    s->dom.emplace(members[0].conn->dom());
    s->live = n;
    s->copy.set = s.get();
    s->bounce.resize(config.copy_chunk);
    auto mr =
        memory_region::create(*s->dom, s->bounce, usage::read_destination | usage::write_source);
    if (!mr) {
        return fail(mr.error());
    }
    s->bounce_mr.emplace(std::move(*mr));
    for (const replica& m : members) {
        auto mem = std::make_unique<detail::replica_member>();
        mem->conn = m.conn;
        mem->region = m.region;
        s->members.push_back(std::move(mem));
    }
    s->records.resize(config.depth);
    for (std::uint32_t i = config.depth; i-- > 0;) {
        s->free_records.push_back(i);
        for (std::uint32_t m = 0; m < n; ++m) {
            s->records[i].parts[2 * m] = {s.get(), i, m, false};
            s->records[i].parts[2 * m + 1] = {s.get(), i, m, true};
        }
    }
    s->ring.resize(config.depth);
    s->thread = std::thread([p = s.get()] { p->run(); });
    return internal_access::wrap<replica_set>(std::move(s));
}

replica_set::replica_set(std::unique_ptr<impl, impl_deleter> p) noexcept : impl_(std::move(p)) {}
void replica_set::impl_deleter::operator()(impl* p) const noexcept {
    internal_access::destroy<replica_set>(p);
}
replica_set::replica_set(replica_set&&) noexcept = default;

replica_set& replica_set::operator=(replica_set&& other) noexcept {
    if (this != &other) {
        replica_set gone(std::move(*this));
        impl_ = std::move(other.impl_);
    }
    return *this;
}

replica_set::~replica_set() {
    if (!impl_) {
        return;
    }
    detail::replica_core& s = *detail::impl_of(*this);
    std::unique_lock lock(s.mu);
    // The members' operations hold contexts in the records: wait for them to end (stragglers are
    // dropped, so closed, at behind_limit), bounded.
    const auto deadline =
        std::chrono::steady_clock::now() + s.cfg.behind_limit + std::chrono::seconds(10);
    const bool ended = s.cv.wait_until(lock, deadline, [&] {
        return s.delivering == 0 && s.deferred.empty() &&
               std::all_of(s.members.begin(), s.members.end(),
                           [](const auto& m) { return m->pending == 0; });
    });
    s.stopping = true;
    s.cv.notify_all();
    lock.unlock();
    s.thread.join();
    if (!ended) {
        detail::log_line(log_level::warning,
                         "replica_set: operations of its members did not end (are their CQs "
                         "read?); the set's memory is left to them");
        static_cast<void>(impl_.release());
    }
}

void detail::replica_core::fill_outcomes(detail::replica_record& r) {
    std::uint32_t durable = 0;
    for (std::uint32_t m = 0; m < r.out.replicas; ++m) {
        durable += r.out.outcome[m] == replica_outcome::durable;
    }
    r.out.durable = durable;
}

// Decides the record's completion once every member's write gave the source memory back: a
// success at `quorum` durable counted members, a failure when the counted members still pending
// cannot reach it.
void detail::replica_core::evaluate(std::uint32_t rec, detail::replica_outbox& box) {
    detail::replica_record& r = records[rec];
    if (r.reported || r.writes_left > 0) {
        return;
    }
    std::uint32_t acks = 0, open = 0;
    for (std::uint32_t m = 0; m < r.out.replicas; ++m) {
        if (bit(r.counted, m)) {
            acks += r.out.outcome[m] == replica_outcome::durable;
            open += r.out.outcome[m] == replica_outcome::pending;
        }
    }
    if (acks >= quorum) {
        r.out.status = {};
    } else if (acks + open < quorum) {
        r.out.status = r.first_failure ? r.first_failure : make_error_code(errc::bad_state);
    } else {
        return;
    }
    r.reported = true;
    if (r.settled) {
        --active;
    }
    fill_outcomes(r);
    if (r.callback != nullptr) {
        box.done.emplace_back(r.callback, r.out);
        r.delivered = true;
    } else {
        ring[(ring_head + ring_count) % ring.size()] = rec;
        ++ring_count;
    }
    settle_or_free(rec);
    cv.notify_all();
}

// A record's member m is to be copied into (or re-copied) once the record settles: it was not
// written there (dropped at post), a copy may land after its write (redo), or it failed there.
static bool owes(const detail::replica_record& r, std::uint32_t m) noexcept {
    return !bit(r.targets, m) || bit(r.redo, m) || bit(r.missed, m);
}

// Once every member operation of the record ended: records what members missed; once also
// delivered: frees it.
void detail::replica_core::settle_or_free(std::uint32_t rec) {
    detail::replica_record& r = records[rec];
    if (!r.in_use) {
        return;  // freed already (a caller settles after evaluate() did)
    }
    if (r.parts_left == 0 && !r.settled) {
        r.settled = true;
        for (std::uint32_t m = 0; m < r.out.replicas; ++m) {
            if (owes(r, m)) {
                add_missing(members[m]->missing, r.offset, r.offset + r.length);
                --members[m]->unsettled;
            }
        }
        if (r.reported) {
            --active;
        }
        cv.notify_all();
    }
    if (r.settled && r.reported && r.delivered) {
        r.in_use = false;
        free_records.push_back(rec);
        cv.notify_all();
    }
}

void detail::replica_core::drop_locked(std::uint32_t m, std::error_code why,
                                       detail::replica_outbox& box) {
    detail::replica_member& mem = *members[m];
    if (mem.state == replica_state::dropped) {
        return;
    }
    const bool was_live = mem.state == replica_state::live;
    mem.state = replica_state::dropped;
    mem.close_due = true;
    box.events.push_back({replica_event_kind::dropped, m, why, cfg.event_context});
    if (was_live) {
        --live;
        if (live < quorum && quorum_ok) {
            quorum_ok = false;
            box.events.push_back({replica_event_kind::quorum_lost, m, why, cfg.event_context});
        }
    }
    for (std::uint32_t i = 0; i < records.size(); ++i) {
        detail::replica_record& r = records[i];
        if (!r.in_use || r.settled || !bit(r.targets, m) ||
            r.out.outcome[m] == replica_outcome::durable) {
            continue;
        }
        if (!bit(r.missed, m)) {
            r.missed |= 1u << m;  // it may hold part of the write: copied into on rejoin
            if (!bit(r.redo, m)) {
                ++mem.unsettled;
            }
        }
        if (r.out.outcome[m] == replica_outcome::pending) {
            r.out.outcome[m] = replica_outcome::failed;
            if (!r.first_failure) {
                r.first_failure = why;
            }
            evaluate(i, box);
        }
    }
    cv.notify_all();
}

// Member m's part of record `rec` could not be posted: what was not posted ends here.
void detail::replica_core::part_failed(std::uint32_t rec, std::uint32_t m, bool write_posted,
                                       std::error_code why, detail::replica_outbox& box) {
    detail::replica_record& r = records[rec];
    const std::uint32_t unposted = write_posted ? 1 : 2;
    r.left[m] = static_cast<std::uint8_t>(r.left[m] - unposted);
    r.parts_left -= unposted;
    members[m]->pending -= unposted;
    if (!write_posted) {
        r.write_done[m] = true;
        --r.writes_left;
    }
    if (r.out.outcome[m] == replica_outcome::pending) {
        r.out.outcome[m] = replica_outcome::failed;
    }
    if (!r.first_failure) {
        r.first_failure = why;
    }
    drop_locked(m, why, box);
    evaluate(rec, box);
    settle_or_free(rec);
}

void detail::replica_core::hand_out(std::unique_lock<std::mutex>& lock, replica_outbox& box) {
    if (box.empty()) {
        return;
    }
    if (detail::in_post) {
        // This thread holds a member's post lock (a post or close read completions inline):
        // a callback here could post on that member again. The set's thread delivers them.
        deferred.take(box);
        cv.notify_all();
        return;
    }
    ++delivering;
    lock.unlock();
    const bool was = in_callback;
    in_callback = true;
    for (const replica_event& e : box.events) {
        if (cfg.on_event != nullptr) {
            cfg.on_event(e);
        }
    }
    for (const auto& [fn, c] : box.done) {
        fn(c);
    }
    in_callback = was;
    box.done.clear();
    box.events.clear();
    lock.lock();
    --delivering;
    cv.notify_all();
}

void detail::replica_on_part(const completion& c) {
    auto* p = static_cast<detail::replica_part*>(c.context);
    detail::replica_core& s = *p->set;
    detail::replica_outbox box;
    {
        std::unique_lock lock(s.mu);
        detail::replica_record& r = s.records[p->record];
        const std::uint32_t m = p->member;
        --r.left[m];
        --r.parts_left;
        --s.members[m]->pending;
        if (!p->flush && !r.write_done[m]) {
            r.write_done[m] = true;
            --r.writes_left;
        }
        if (c.ok()) {
            if (p->flush && r.out.outcome[m] == replica_outcome::pending) {
                r.out.outcome[m] = replica_outcome::durable;
            }
        } else {
            // A failed write fails the member's part even if its flush came back first.
            if (!p->flush || r.out.outcome[m] == replica_outcome::pending) {
                r.out.outcome[m] = replica_outcome::failed;
            }
            if (!r.first_failure) {
                r.first_failure = c.status;
            }
            s.drop_locked(m, c.status, box);
        }
        s.evaluate(p->record, box);
        s.settle_or_free(p->record);
        s.cv.notify_all();
        s.hand_out(lock, box);
    }
}

// Posts member m's write of the record (unless posted already) and its flush, under the member's
// post lock.
result<void> detail::replica_core::post_parts(std::uint32_t rec, std::uint32_t m, connection& conn,
                                              bool& write_posted) {
    replica_record& r = records[rec];
    const remote_region& region = members[m]->region;
    if (!write_posted) {
        if (auto w = conn.write(region, r.offset, *r.src, r.src_offset, r.length,
                                {.context = &r.parts[2 * m], .callback = &replica_on_part});
            !w) {
            return w;
        }
        write_posted = true;
    }
    return flush(conn, region, r.offset, r.length, cfg.how,
                 {.context = &r.parts[2 * m + 1], .callback = &replica_on_part});
}

result<void> replica_set::write(std::uint64_t offset, const memory_region& src,
                                std::size_t src_offset, std::size_t length, replica_options opts) {
    detail::replica_core& s = *detail::impl_of(*this);
    if (length == 0) {
        return fail(errc::invalid_argument, "replica_set::write: the length must be > 0");
    }
    if (offset > s.range || length > s.range - offset) {
        return fail(errc::out_of_range, "replica_set::write: [" + std::to_string(offset) + ", +" +
                                            std::to_string(length) + ") is past the set's " +
                                            std::to_string(s.range) + " bytes");
    }
    if (src_offset > src.size() || length > src.size() - src_offset) {
        return fail(errc::out_of_range, "replica_set::write: the source range is past `src`");
    }
    if (!src.registered_in(*s.dom)) {
        return fail(errc::invalid_argument,
                    "replica_set::write: `src` is not registered in the members' domain");
    }
    if (!has_all(src.usages(), usage::write_source)) {
        return fail(errc::access_denied, "replica_set::write: `src` is not a write_source");
    }
    std::unique_lock lock(s.mu);
    const bool park = opts.park_until != std::chrono::steady_clock::time_point{} && !in_callback;
    for (;;) {
        if (!s.quorum_ok) {
            return fail(errc::bad_state, "replica_set::write: " + std::to_string(s.live) +
                                             " live replicas, fewer than the quorum " +
                                             std::to_string(s.quorum));
        }
        if (!s.free_records.empty()) {
            break;
        }
        if (!park) {
            return fail(errc::would_block, "replica_set::write: " + std::to_string(s.cfg.depth) +
                                               " writes in flight (the set's depth)");
        }
        if (s.cv.wait_until(lock, opts.park_until) == std::cv_status::timeout &&
            s.free_records.empty()) {
            return fail(errc::timed_out, "replica_set::write: no room before park_until");
        }
    }
    const std::uint32_t rec = s.free_records.back();
    s.free_records.pop_back();
    detail::replica_record& r = s.records[rec];
    const auto n = static_cast<std::uint32_t>(s.members.size());
    r.in_use = true;
    r.reported = r.delivered = r.settled = false;
    r.offset = offset;
    r.length = length;
    r.src = &src;
    r.src_offset = src_offset;
    r.callback = opts.callback;
    r.posted = std::chrono::steady_clock::now();
    r.counted = r.targets = r.redo = r.missed = 0;
    r.parts_left = r.writes_left = 0;
    r.first_failure = {};
    r.out = replica_completion{};
    r.out.context = opts.context;
    r.out.offset = offset;
    r.out.length = length;
    r.out.replicas = n;
    for (std::uint32_t m = 0; m < n; ++m) {
        detail::replica_member& mem = *s.members[m];
        r.left[m] = 0;
        r.write_done[m] = true;
        r.conn[m] = mem.conn;
        if (mem.state == replica_state::dropped) {
            r.out.outcome[m] = replica_outcome::not_written;
            ++mem.unsettled;
            continue;
        }
        r.targets |= 1u << m;
        if (mem.state == replica_state::live) {
            r.counted |= 1u << m;
        } else if (s.copy_member == static_cast<int>(m) && offset < s.copy_hi &&
                   s.copy_lo < offset + length) {
            r.redo |= 1u << m;  // a copy into it of an older state may land after this write
            ++mem.unsettled;
        }
        r.out.outcome[m] = replica_outcome::pending;
        r.left[m] = 2;
        r.write_done[m] = false;
        r.parts_left += 2;
        ++r.writes_left;
        mem.pending += 2;
    }
    ++s.active;
    // Once its last part is posted the record may end and take another write: read only these.
    const std::uint32_t targets = r.targets;
    const std::array<connection*, max_replicas> conns = r.conn;
    lock.unlock();

    detail::replica_outbox box;
    bool first = true;
    for (std::uint32_t m = 0; m < n; ++m) {
        if (!bit(targets, m)) {
            continue;
        }
        detail::replica_member& mem = *s.members[m];
        result<void> w = {};
        bool write_posted = false;
        bool mem_fenced = false;
        {
            std::lock_guard post(mem.post_mu);
            const detail::posting guard;
            mem_fenced = mem.fenced;
            if (mem_fenced) {
                w = fail(errc::disconnected, "replica_set: the member was dropped");
            } else if (!mem.backlog.empty()) {
                mem.backlog.emplace_back(rec, false);  // behind the member's refused posts
            } else {
                w = s.post_parts(rec, m, *conns[m], write_posted);
                if (!w && w.error() == errc::would_block) {
                    mem.backlog.emplace_back(rec, write_posted);  // the set's thread retries
                    w = {};
                    s.cv.notify_all();
                }
            }
        }
        const bool attempted = !mem_fenced;
        const bool refused_input =
            !w && !write_posted &&
            (w.error() == errc::invalid_argument || w.error() == errc::out_of_range ||
             w.error() == errc::access_denied || w.error() == errc::too_large);
        if (first && refused_input) {
            // Nothing is posted yet: the write's own arguments are wrong (a source of another
            // domain, ...); undo the record and say so.
            lock.lock();
            for (std::uint32_t k = 0; k < n; ++k) {
                s.members[k]->pending -= r.left[k];  // 2 each, 0 for one that failed above
                if (owes(r, k)) {
                    --s.members[k]->unsettled;
                }
            }
            r.in_use = false;
            s.free_records.push_back(rec);
            --s.active;
            s.cv.notify_all();
            s.hand_out(lock, box);
            return fail(w.error());
        }
        first = first && !attempted;
        if (!w) {
            lock.lock();
            s.part_failed(rec, m, write_posted, w.error().code(), box);
            s.hand_out(lock, box);
            lock.unlock();
        }
    }
    return {};
}

}  // namespace remora

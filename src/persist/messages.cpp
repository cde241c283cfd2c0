// SPDX-License-Identifier: BSD-3-Clause
// The application's messages beside the target service's on one connection
// (persistence_config::message_size): the library's receives (carriers) take every message in
// the order the provider fills them, the mark of the application's messages tells the two
// apart, and each message is copied to the receive of its consumer: the service's (its receive
// slots, posted here instead of to the provider) or the application's (its recv, queued here).
// A carrier whose message cannot be reported (a service message, one kept for a later receive)
// frees its completion entry for what is waiting for one: a message kept for a receive posted
// since, a service receive the client ends early (service_timeout). When nothing brings such an
// entry, a carrier is canceled for it: its completion is the entry.
#include <algorithm>
#include <cstring>
#include <deque>
#include <string>

#include "core/little_endian.hpp"
#include "core/upper.hpp"
#include "persist/service.hpp"

namespace remora::detail {

namespace {

// The first 8 bytes of every message of the application: "RMAP", version 1, three zero bytes.
// A service message starts with service_magic instead (persist_impl.hpp).
constexpr std::uint32_t app_magic = 0x50414d52;  // "RMAP"
constexpr std::size_t mark_size = 8;

}  // namespace

struct message_mux {
    connection_impl* conn = nullptr;
    std::uint32_t app_depth = 0;  // receives of the application's at once (rq_size)
    std::size_t room = 0;         // bytes of a carrier
    struct carrier {
        message_mux* owner = nullptr;
        std::uint32_t index = 0;
        bool posted = false;    // with the provider
        bool canceled = false;  // canceled here for its entry
        std::size_t bytes = 0;  // a kept message's length (mark included) and immediate data
        bool has_imm = false;
        std::uint64_t imm = 0;
    };
    std::vector<carrier> carriers;
    std::vector<std::byte> storage;  // the mark, then one room per carrier
    std::optional<memory_region> mr;
    std::mutex mu;
    struct app_recv {
        void* context = nullptr;
        void (*callback)(const completion&) = nullptr;
        std::array<std::pair<std::byte*, std::size_t>, max_segments> segs{};
        std::size_t count = 0;
    };
    std::deque<app_recv> app_recvs;      // the application's receives waiting, oldest first
    std::deque<std::uint32_t> app_kept;  // carriers holding its messages, oldest first
    struct svc_recv {
        std::byte* buf = nullptr;
        std::size_t len = 0;
        hook_fn hook = nullptr;
        void* context = nullptr;
    };
    std::deque<svc_recv> svc_recvs;      // the service's receives waiting, oldest first
    std::deque<std::uint32_t> svc_kept;  // target side: requests before a receive was free
    std::deque<svc_recv> svc_ending;     // service receives to complete canceled (client tick)
    std::size_t cancels = 0;             // carriers canceled here, their entries to come
    bool target = false;

    std::byte* buf(std::uint32_t k) { return storage.data() + mark_size + k * room; }
};

namespace {

bool carrier_done(void* context, completion& c, callback_sink* sink);

// Posts carrier k (not under mux.mu: a post may read the CQ outside a completion).
void post_carrier(message_mux& m, std::uint32_t k) {
    message_mux::carrier& ca = m.carriers[k];
    {
        std::lock_guard lock(m.mu);
        ca.posted = true;
    }
    if (!post_internal(*m.conn, queue::recv, m.buf(k), m.room, local_desc(*m.mr), carrier_done,
                       &ca)) {
        std::lock_guard lock(m.mu);
        ca.posted = false;  // the connection is going away
    }
}

// Copies carrier k's message (its mark stripped) into receive r; fills c as r's completion.
void fill_app(message_mux& m, std::uint32_t k, std::size_t bytes, const message_mux::app_recv& r,
              completion& c) {
    const std::byte* from = m.buf(k) + mark_size;
    std::size_t left = bytes - mark_size;
    std::size_t copied = 0;
    for (std::size_t i = 0; i < r.count && left != 0; ++i) {
        const std::size_t n = std::min(left, r.segs[i].second);
        std::memcpy(r.segs[i].first, from + copied, n);
        copied += n;
        left -= n;
    }
    c.op = op::recv;
    c.context = r.context;
    c.bytes = copied;
    if (left != 0) {
        c.status = make_error_code(errc::too_large);
    }
}

// Hands `c`, an application receive's completion, to its callback or the CQ's reader.
bool report_app(message_mux& m, const message_mux::app_recv& r, completion& c,
                callback_sink* sink) {
    if (r.callback != nullptr) {
        run_callback(r.callback, c, &m.conn->ops, sink);
        return false;
    }
    return true;
}

// Carriers to cancel for an entry: what waits for one, less the cancels on their way.
void request_entries(message_mux& m, std::unique_lock<std::mutex>& lock) {
    const std::size_t want = std::min(m.app_kept.size(), m.app_recvs.size()) + m.svc_ending.size();
    if (want <= m.cancels || !endpoint_open(*m.conn)) {
        return;
    }
    std::size_t more = want - m.cancels;
    std::vector<std::uint32_t> picked;
    for (std::uint32_t k = static_cast<std::uint32_t>(m.carriers.size()); k-- > 0 && more != 0;) {
        message_mux::carrier& ca = m.carriers[k];
        if (ca.posted && !ca.canceled) {
            ca.canceled = true;
            ++m.cancels;
            picked.push_back(k);
            --more;
        }
    }
    lock.unlock();
    bool any = false;
    auto taken = m.conn->ops.taken();
    for (std::uint32_t k : picked) {
        bool done = false;
        for (auto [rec, is_recv] : taken) {
            if (is_recv && rec->user_context == &m.carriers[k]) {
                done = cancel_op(*m.conn, rec);
                break;
            }
        }
        if (!done) {
            // Completed meanwhile (its entry is on its way) or gone: no cancel of ours.
            std::lock_guard g(m.mu);
            if (m.carriers[k].canceled) {
                m.carriers[k].canceled = false;
                --m.cancels;
            }
        }
        any = any || done;
    }
    if (any) {
        kick_readers(*m.conn);
    }
    lock.lock();
}

// An entry nothing else reports: it carries what waits for one, if anything. Caller holds
// m.mu through `lock`; it may be released.
bool use_entry(message_mux& m, completion& c, std::unique_lock<std::mutex>& lock,
               callback_sink* sink) {
    if (!m.app_kept.empty() && !m.app_recvs.empty()) {
        const std::uint32_t k = m.app_kept.front();
        m.app_kept.pop_front();
        const message_mux::app_recv r = m.app_recvs.front();
        m.app_recvs.pop_front();
        completion out = c;
        out.status = {};
        out.has_imm = m.carriers[k].has_imm;
        out.imm = m.carriers[k].imm;
        fill_app(m, k, m.carriers[k].bytes, r, out);
        request_entries(m, lock);
        lock.unlock();
        post_carrier(m, k);
        c = out;
        return report_app(m, r, c, sink);
    }
    if (!m.svc_ending.empty()) {
        const message_mux::svc_recv s = m.svc_ending.front();
        m.svc_ending.pop_front();
        lock.unlock();
        c.status = make_error_code(errc::canceled);
        c.bytes = 0;
        return s.hook(s.context, c, sink);
    }
    request_entries(m, lock);
    return false;
}

bool carrier_done(void* context, completion& c, callback_sink* sink) {
    auto& ca = *static_cast<message_mux::carrier*>(context);
    message_mux& m = *ca.owner;
    const std::uint32_t k = ca.index;
    std::unique_lock lock(m.mu);
    ca.posted = false;
    const bool ours = ca.canceled;
    if (ours) {
        ca.canceled = false;
        --m.cancels;
    }
    const bool going = !endpoint_open(*m.conn) || !m.conn->open.load();
    if (!c.ok() && (c.status == errc::access_denied || (ours && !going))) {
        // A stranger's RDM message, or canceled here for its entry: the carrier goes back, and
        // its entry carries what waits for one.
        lock.unlock();
        post_carrier(m, k);
        lock.lock();
        return use_entry(m, c, lock, sink);
    }
    if (!c.ok()) {
        // The connection is going away (or the provider failed the receive): the entry fails a
        // receive still waiting, the application's first, then the service's.
        if (!m.app_recvs.empty()) {
            const message_mux::app_recv r = m.app_recvs.front();
            m.app_recvs.pop_front();
            lock.unlock();
            c.op = op::recv;
            c.context = r.context;
            c.bytes = 0;
            return report_app(m, r, c, sink);
        }
        if (!m.svc_recvs.empty()) {
            const message_mux::svc_recv s = m.svc_recvs.front();
            m.svc_recvs.pop_front();
            lock.unlock();
            return s.hook(s.context, c, sink);
        }
        return false;
    }
    const std::size_t bytes = c.bytes;
    const bool app =
        bytes >= mark_size && get_le(m.buf(k), 4) == app_magic && get_le(m.buf(k) + 4, 4) == 1;
    if (app) {
        if (m.app_kept.empty() && !m.app_recvs.empty()) {
            const message_mux::app_recv r = m.app_recvs.front();
            m.app_recvs.pop_front();
            fill_app(m, k, bytes, r, c);
            lock.unlock();
            post_carrier(m, k);
            return report_app(m, r, c, sink);
        }
        // Kept until the application posts a receive (and behind those kept before it).
        ca.bytes = bytes;
        ca.has_imm = c.has_imm;
        ca.imm = c.imm;
        m.app_kept.push_back(k);
        return use_entry(m, c, lock, sink);
    }
    // The service's (anything without the mark: the service's own checks judge it).
    if (m.svc_recvs.empty()) {
        if (m.target) {
            ca.bytes = bytes;
            m.svc_kept.push_back(k);  // answered once a request slot is free (service_recv)
        } else {
            lock.unlock();  // a reply nobody waits for: not an answer to anything asked
            post_carrier(m, k);
            lock.lock();
        }
        return use_entry(m, c, lock, sink);
    }
    const message_mux::svc_recv s = m.svc_recvs.front();
    m.svc_recvs.pop_front();
    std::memcpy(s.buf, m.buf(k), std::min(bytes, s.len));
    lock.unlock();
    post_carrier(m, k);
    // A longer message than the slot holds keeps its length: the service refuses it by size.
    if (s.hook(s.context, c, sink)) {
        return true;  // the service reports on this entry (a request's completion)
    }
    lock.lock();
    return use_entry(m, c, lock, sink);
}

}  // namespace

namespace {

// The connection's message mux, created (its carriers registered and posted) on first use.
result<message_mux*> mux_of(connection_impl& c) {
    persist_conn& p = persist_of(c);
    std::unique_lock lock(p.mux_mu);
    if (p.mux) {
        return p.mux.get();
    }
    const persistence_config& cfg = persistence_of(c);
    auto m = std::make_unique<message_mux>();
    m->conn = &c;
    const std::uint32_t service = message_slots(cfg.service_depth);
    m->app_depth = (c.config.rq_size - service) / 2;
    m->room = std::max<std::size_t>(cfg.message_size + mark_size, request_room);
    const std::uint32_t count = c.config.rq_size;
    m->storage.assign(mark_size + count * m->room, std::byte{0});
    put_le(m->storage.data(), app_magic, 4);
    put_le(m->storage.data() + 4, 1, 4);
    auto mr = memory_region::create(c.dom_handle, m->storage, usage::send | usage::receive);
    if (!mr) {
        return fail(mr.error());
    }
    m->mr.emplace(std::move(*mr));
    m->carriers.resize(count);
    for (std::uint32_t k = 0; k < count; ++k) {
        m->carriers[k].owner = m.get();
        m->carriers[k].index = k;
    }
    p.mux = std::move(m);
    message_mux& mx = *p.mux;
    {
        std::lock_guard g(mx.mu);
        for (auto& ca : mx.carriers) {
            ca.posted = true;
        }
    }
    // Posted outside the lock: a post may read the CQ, whose hooks come back here.
    lock.unlock();
    for (std::uint32_t k = 0; k < count; ++k) {
        if (auto r = post_internal(c, queue::recv, mx.buf(k), mx.room, local_desc(*mx.mr),
                                   carrier_done, &mx.carriers[k]);
            !r) {
            std::lock_guard g(mx.mu);
            for (std::uint32_t j = k; j < count; ++j) {
                mx.carriers[j].posted = false;
            }
            return fail(r.error());
        }
    }
    return &mx;
}

}  // namespace

result<void> service_recv(service_conn& s, void* buf, std::size_t len, hook_fn hook,
                          void* context) {
    connection_impl& c = *s.conn;
    if (c.router == nullptr) {
        return post_internal(c, queue::recv, buf, len, desc_of(s), hook, context);
    }
    if (auto r = check_open(c, "service receive", true); !r) {
        return r;
    }
    auto mp = mux_of(c);
    if (!mp) {
        return fail(mp.error());
    }
    message_mux& m = **mp;
    std::unique_lock lock(m.mu);
    m.target = s.target;
    if (m.svc_kept.empty()) {
        m.svc_recvs.push_back({static_cast<std::byte*>(buf), len, hook, context});
        return {};
    }
    // A request that came before this slot was free: answered now.
    const std::uint32_t k = m.svc_kept.front();
    m.svc_kept.pop_front();
    const std::size_t bytes = m.carriers[k].bytes;
    std::memcpy(buf, m.buf(k), std::min(bytes, len));
    lock.unlock();
    post_carrier(m, k);
    completion done{};
    done.op = op::recv;
    done.bytes = bytes;
    done.tag = c.config.tag;
    (void)hook(context, done, nullptr);  // the target's hooks report nothing
    return {};
}

bool cancel_service_recv(persist_conn& p, void* context) {
    message_mux* m = nullptr;
    {
        std::lock_guard lock(p.mux_mu);
        m = p.mux.get();
    }
    if (m == nullptr) {
        return false;
    }
    std::unique_lock lock(m->mu);
    const auto it =
        std::find_if(m->svc_recvs.begin(), m->svc_recvs.end(),
                     [&](const message_mux::svc_recv& r) { return r.context == context; });
    if (it == m->svc_recvs.end()) {
        return false;
    }
    m->svc_ending.push_back(*it);
    m->svc_recvs.erase(it);
    request_entries(*m, lock);
    return true;
}

result<void> mux_send(connection_impl& c, std::span<const local_segment> src, bool with_imm,
                      std::uint64_t imm, const op_options& opts) {
    const char* what = with_imm ? "send_with_imm" : "send";
    std::size_t bytes = 0;
    for (const local_segment& s : src) {
        bytes += s.length;
    }
    const std::uint32_t limit = persistence_of(c).message_size;
    if (bytes > limit) {
        return fail(errc::too_large, std::string(what) + ": " + std::to_string(bytes) +
                                         " bytes exceed persistence_config::message_size " +
                                         std::to_string(limit));
    }
    if (src.size() > c.config.max_sge) {
        return fail(errc::too_large, std::string(what) + ": " + std::to_string(src.size()) +
                                         " segments exceed max_sge " +
                                         std::to_string(c.config.max_sge));
    }
    auto mp = mux_of(c);
    if (!mp) {
        return fail(mp.error());
    }
    std::array<local_segment, max_segments> segs;
    segs[0] = local_segment{&*(*mp)->mr, 0, mark_size};
    std::copy(src.begin(), src.end(), segs.begin() + 1);
    return post_send(c, {segs.data(), src.size() + 1}, with_imm, imm, opts, nullptr, true);
}

result<void> mux_recv(connection_impl& c, std::span<const local_segment> dst,
                      const op_options& opts) {
    if (dst.size() > c.config.max_sge || dst.size() > max_segments) {
        return fail(errc::too_large, "recv: " + std::to_string(dst.size()) +
                                         " segments exceed max_sge " +
                                         std::to_string(c.config.max_sge));
    }
    message_mux::app_recv r;
    r.context = opts.context;
    r.callback = opts.callback;
    for (const local_segment& s : dst) {
        if (s.region == nullptr) {
            return fail(errc::invalid_argument, "recv: segment without a region");
        }
        if (!same_domain(c, *s.region)) {
            return fail(errc::invalid_argument, "recv: region registered in another domain");
        }
        const std::span<std::byte> mem = s.region->memory();
        if (s.offset > mem.size() || s.length > mem.size() - s.offset) {
            return fail(errc::out_of_range, "recv: local range outside its region");
        }
        if (!has_all(s.region->usages(), usage::receive)) {
            return fail(errc::access_denied, "recv: local region not registered for this use");
        }
        r.segs[r.count++] = {mem.data() + s.offset, s.length};
    }
    auto mp = mux_of(c);
    if (!mp) {
        return fail(mp.error());
    }
    message_mux& m = **mp;
    std::unique_lock lock(m.mu);
    if (m.app_recvs.size() >= m.app_depth) {
        return fail(errc::would_block, "recv: receive queue full (depth " +
                                           std::to_string(m.app_depth) + "); reap completions");
    }
    m.app_recvs.push_back(r);
    if (!m.app_kept.empty()) {
        request_entries(m, lock);  // a message waits for it: an entry brings it
    }
    return {};
}

persist_conn::persist_conn() = default;
persist_conn::~persist_conn() = default;

std::size_t mux_waiting(persist_conn& p) noexcept {
    std::lock_guard lock(p.mux_mu);
    if (!p.mux) {
        return 0;
    }
    std::lock_guard g(p.mux->mu);
    return p.mux->app_recvs.size();
}

}  // namespace remora::detail

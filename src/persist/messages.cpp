// SPDX-License-Identifier: BSD-3-Clause
// The application's messages beside the target service's on one connection
// (persistence_config::message_size).
//
// Every receive the provider holds on the connection is the library's (a carrier): carriers take
// the messages in the order they come, the mark of the application's messages tells the two kinds
// apart, and each message is copied to the receive of its consumer: the service's (its receive
// slots, queued here instead of posted) or the application's (its recv, queued here). The queues
// are fixed rings sized when the carriers are set up; nothing is allocated per message.
//
// Early messages: at most rq_size messages of the application's wait in carriers for receives,
// so the carriers still posted (service_depth + 1 + rq_size at least) always outnumber the
// receives that wait, and a carrier can always be canceled for an entry. A message of the
// application's that comes when rq_size of its messages wait already is dropped (its carrier is
// posted again at once, so the service's messages go on): the receive that would have taken it
// completes with errc::would_block in its place, in the order the messages came.
//
// Entries: a carrier's completion is a CQ entry. One whose message is not reported at once (a
// service message, an application message kept until a receive is posted) carries what waits for
// an entry: a kept message whose receive has been posted since, or a service receive the client
// ends early (service_timeout). When nothing brings such an entry, a posted carrier is canceled:
// its completion is the entry, and the carrier is posted again.
//
// Closing: once the connection is closing (close(), the peer's end, or its destruction, which
// marks the mux before anything is torn down), nothing is posted or canceled here again, and each
// carrier still posted completes once more. A message that came first may be reported after the
// close's cancels (sockets reads error entries ahead), so the receives still waiting end on the
// last of those completions, the service's, then the application's newest first. Posts run
// outside the mux's lock (a receive's post may read the CQ, whose hooks come back here); cancels
// run under it, so a carrier's record is the one posted for it.
#include <algorithm>
#include <cstring>
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

// A FIFO of at most the capacity given to reserve(), allocated there once.
template <class T>
class ring {
  public:
    void reserve(std::size_t capacity) { items_.resize(capacity); }
    T& front() noexcept { return at(0); }
    T& back() noexcept { return at(count_ - 1); }
    [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
    [[nodiscard]] std::size_t size() const noexcept { return count_; }
    [[nodiscard]] bool full() const noexcept { return count_ == items_.size(); }
    // False (and nothing queued) when full: the callers' bounds keep it from happening.
    bool push(const T& v) noexcept {
        if (full()) {
            return false;
        }
        at(count_++) = v;
        return true;
    }
    T pop() noexcept {
        T v = items_[head_];
        head_ = (head_ + 1) % items_.size();
        --count_;
        return v;
    }
    T pop_back() noexcept { return at(--count_); }
    // Takes out the oldest entry `pred` accepts, the others keeping their order.
    template <class P>
    bool take_if(P pred, T& out) {
        for (std::size_t i = 0; i < count_; ++i) {
            if (pred(at(i))) {
                out = at(i);
                for (std::size_t j = i; j + 1 < count_; ++j) {
                    at(j) = at(j + 1);
                }
                --count_;
                return true;
            }
        }
        return false;
    }

  private:
    T& at(std::size_t i) noexcept { return items_[(head_ + i) % items_.size()]; }
    std::vector<T> items_;
    std::size_t head_ = 0;
    std::size_t count_ = 0;
};

}  // namespace

struct message_mux {
    connection_impl* conn = nullptr;
    std::uint32_t app_depth = 0;  // receives of the application's at once (rq_size)
    std::size_t room = 0;         // bytes of a carrier
    struct carrier {
        message_mux* owner = nullptr;
        std::uint32_t index = 0;
        bool posted = false;    // with the provider (or being posted)
        bool canceled = false;  // canceled here for its entry
        std::size_t bytes = 0;  // a kept message's length (mark included) and immediate data
        bool has_imm = false;
        std::uint64_t imm = 0;
    };
    std::vector<carrier> carriers;
    std::vector<std::byte> storage;  // the mark, then one room per carrier
    std::optional<memory_region> mr;
    std::mutex mu;  // guards what follows
    struct app_recv {
        void* context = nullptr;
        void (*callback)(const completion&) = nullptr;
        std::array<std::pair<std::byte*, std::size_t>, max_segments> segs{};
        std::size_t count = 0;
    };
    ring<app_recv> app_recvs;  // the application's receives waiting, oldest first
    // Its messages waiting for a receive, oldest first: a carrier holding one, or (carrier
    // `dropped`) that many dropped in a row, each to complete a receive errc::would_block.
    static constexpr std::uint32_t dropped = ~std::uint32_t{0};
    struct early {
        std::uint32_t carrier = dropped;
        std::uint32_t drops = 0;
    };
    ring<early> app_kept;
    std::uint32_t app_rooms = 0;  // carriers in app_kept (at most app_depth)
    std::size_t app_pending = 0;  // messages in app_kept, dropped ones included
    struct svc_recv {
        std::byte* buf = nullptr;
        std::size_t len = 0;
        hook_fn hook = nullptr;
        void* context = nullptr;
    };
    ring<svc_recv> svc_recvs;      // the service's receives waiting, oldest first
    ring<std::uint32_t> svc_kept;  // requests that came before a service receive was waiting
    ring<svc_recv> svc_ending;     // service receives to complete canceled (client tick)
    std::size_t cancels = 0;       // carriers canceled here, their entries to come
    // This side sends the service's requests (a client's reply receives came): a service message
    // nobody waits for is then a late reply, dropped. Otherwise it is a request that came before
    // the service posted its receives (the carriers may be posted first, by the application's
    // receive or by the mux's setup), kept for them.
    bool client = false;
    bool closing = false;  // nothing is posted or canceled any more

    std::byte* buf(std::uint32_t k) { return storage.data() + mark_size + k * room; }
    // Whether carriers may still be posted or canceled; marks the mux closing when not. Under mu.
    bool live() {
        closing = closing || connection_closing(*conn);
        return !closing;
    }
};

namespace {

using lock_t = std::unique_lock<std::mutex>;

bool carrier_done(void* context, completion& c, callback_sink* sink);
void request_entries(message_mux& m);

// Posts carrier k again, unless the connection is closing. Called without m.mu.
void post_carrier(message_mux& m, std::uint32_t k) {
    message_mux::carrier& ca = m.carriers[k];
    {
        std::lock_guard lock(m.mu);
        if (!m.live()) {
            return;
        }
        ca.posted = true;
    }
    const bool ok = static_cast<bool>(post_internal(*m.conn, queue::recv, m.buf(k), m.room,
                                                    local_desc(*m.mr), carrier_done, &ca));
    std::lock_guard lock(m.mu);
    if (!ok) {
        ca.posted = false;
        m.closing = true;  // refused: the connection is going away
        return;
    }
    request_entries(m);  // a cancel that found this carrier still being posted
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

// Cancels posted carriers for what waits for an entry, less the cancels on their way. Under
// m.mu (the canceled carrier's record is then the one posted for it).
void request_entries(message_mux& m) {
    const std::size_t want = std::min(m.app_pending, m.app_recvs.size()) + m.svc_ending.size();
    if (want <= m.cancels || !m.live()) {
        return;
    }
    bool any = false;
    for (auto k = static_cast<std::uint32_t>(m.carriers.size()); k-- > 0 && m.cancels < want;) {
        message_mux::carrier& ca = m.carriers[k];
        // A carrier being posted has no record yet, one completed has none any more: skipped.
        if (ca.posted && !ca.canceled && cancel_internal_recv(*m.conn, &ca)) {
            ca.canceled = true;
            ++m.cancels;
            any = true;
        }
    }
    if (any) {
        kick_readers(*m.conn);  // the canceled completions come through the CQ's reader
    }
}

// An entry nothing else reports carries what waits for one, if anything. Takes over `lock`
// (released on return).
bool use_entry(message_mux& m, completion& c, lock_t& lock, callback_sink* sink) {
    if (m.app_pending != 0 && !m.app_recvs.empty()) {
        const message_mux::app_recv r = m.app_recvs.pop();
        message_mux::early& e = m.app_kept.front();
        const std::uint32_t k = e.carrier;
        --m.app_pending;
        if (k == message_mux::dropped) {
            if (--e.drops == 0) {
                (void)m.app_kept.pop();
            }
            request_entries(m);
            lock.unlock();
            c.op = op::recv;
            c.context = r.context;
            c.bytes = 0;
            c.has_imm = false;
            c.status = make_error_code(errc::would_block);
            return report_app(m, r, c, sink);
        }
        (void)m.app_kept.pop();
        --m.app_rooms;
        c.status = {};
        c.has_imm = m.carriers[k].has_imm;
        c.imm = m.carriers[k].imm;
        fill_app(m, k, m.carriers[k].bytes, r, c);
        request_entries(m);
        lock.unlock();
        post_carrier(m, k);
        return report_app(m, r, c, sink);
    }
    if (!m.svc_ending.empty()) {
        const message_mux::svc_recv s = m.svc_ending.pop();
        lock.unlock();
        c.status = make_error_code(errc::canceled);
        c.bytes = 0;
        return s.hook(s.context, c, sink);
    }
    request_entries(m);
    lock.unlock();
    return false;
}

// A carrier's failed completion ends one receive still waiting, the application's oldest before
// the service's (`closing`: the service's, then the application's newest), else reports nothing.
bool end_waiting(message_mux& m, completion& c, lock_t& lock, callback_sink* sink,
                 bool closing = false) {
    message_mux::svc_recv s;
    if (!m.app_recvs.empty() && (!closing || (m.svc_recvs.empty() && m.svc_ending.empty()))) {
        const message_mux::app_recv r = closing ? m.app_recvs.pop_back() : m.app_recvs.pop();
        lock.unlock();
        c.op = op::recv;
        c.context = r.context;
        c.bytes = 0;
        return report_app(m, r, c, sink);
    }
    if (!m.svc_recvs.empty()) {
        s = m.svc_recvs.pop();
    } else if (!m.svc_ending.empty()) {
        s = m.svc_ending.pop();
    } else {
        return false;
    }
    lock.unlock();
    return s.hook(s.context, c, sink);
}

bool carrier_done(void* context, completion& c, callback_sink* sink) {
    auto& ca = *static_cast<message_mux::carrier*>(context);
    message_mux& m = *ca.owner;
    const std::uint32_t k = ca.index;
    lock_t lock(m.mu);
    ca.posted = false;
    const bool ours = std::exchange(ca.canceled, false);
    m.cancels -= ours ? 1 : 0;
    if (!c.ok()) {
        if (!m.live() || !m.conn->open.load()) {
            m.closing = true;
            if (m.app_pending != 0 && !m.app_recvs.empty()) {
                return use_entry(m, c, lock, sink);  // a kept message for a receive posted since
            }
            // The waiting receives end on the last completions (see the head of this file).
            std::size_t posted = 0;
            for (const message_mux::carrier& other : m.carriers) {
                posted += other.posted ? 1 : 0;
            }
            if (posted >= m.app_recvs.size() + m.svc_recvs.size() + m.svc_ending.size()) {
                return false;
            }
            return end_waiting(m, c, lock, sink, true);
        }
        // Canceled here for its entry, or a stranger's RDM message: the carrier goes back, and its
        // entry carries what waits for one. Any other failure (a message longer than the carrier,
        // where the provider goes on): the first receive of the application's waiting sees it.
        const bool again = ours || c.status == errc::access_denied;
        lock.unlock();
        post_carrier(m, k);
        lock.lock();
        if (again || m.app_recvs.empty()) {
            return use_entry(m, c, lock, sink);
        }
        return end_waiting(m, c, lock, sink);
    }
    const std::size_t bytes = c.bytes;
    const bool app =
        bytes >= mark_size && get_le(m.buf(k), 4) == app_magic && get_le(m.buf(k) + 4, 4) == 1;
    if (app) {
        if (m.app_pending == 0 && !m.app_recvs.empty()) {
            const message_mux::app_recv r = m.app_recvs.pop();
            fill_app(m, k, bytes, r, c);
            lock.unlock();
            post_carrier(m, k);
            return report_app(m, r, c, sink);
        }
        ++m.app_pending;
        if (m.app_rooms < m.app_depth) {
            // Kept until the application posts a receive (and behind those kept before it).
            ca.bytes = bytes;
            ca.has_imm = c.has_imm;
            ca.imm = c.imm;
            ++m.app_rooms;
            (void)m.app_kept.push({k, 0});
            return use_entry(m, c, lock, sink);
        }
        // rq_size of its messages wait already: this one is dropped, its receive fails in its
        // place, and the carrier goes back for the messages behind it.
        if (!m.app_kept.empty() && m.app_kept.back().carrier == message_mux::dropped) {
            ++m.app_kept.back().drops;
        } else {
            (void)m.app_kept.push({message_mux::dropped, 1});
        }
        lock.unlock();
        post_carrier(m, k);
        lock.lock();
        return use_entry(m, c, lock, sink);
    }
    // The service's (anything without the mark: the service's own checks judge it).
    if (m.svc_recvs.empty()) {
        if (!m.client) {
            ca.bytes = bytes;
            (void)m.svc_kept.push(k);  // answered once a request slot is free (service_recv)
        } else {
            lock.unlock();  // a reply nobody waits for: not an answer to anything asked
            post_carrier(m, k);
            lock.lock();
        }
        return use_entry(m, c, lock, sink);
    }
    const message_mux::svc_recv s = m.svc_recvs.pop();
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

// The connection's message mux, created (its carriers registered and posted) on first use.
result<message_mux*> mux_of(connection_impl& c) {
    persist_conn& p = persist_of(c);
    lock_t lock(p.mux_mu);
    if (p.mux) {
        return p.mux.get();
    }
    const persistence_config& cfg = persistence_of(c);
    auto m = std::make_unique<message_mux>();
    m->conn = &c;
    const std::uint32_t service = message_slots(cfg.service_depth);
    const std::uint32_t count = c.config.rq_size;
    m->app_depth = (count - service) / 2;
    m->room = std::max<std::size_t>(cfg.message_size + mark_size, request_room);
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
    m->app_recvs.reserve(m->app_depth);
    m->app_kept.reserve(2 * std::size_t{m->app_depth} + 1);  // kept and runs of drops alternate
    m->svc_recvs.reserve(service);
    m->svc_kept.reserve(count);
    m->svc_ending.reserve(service);
    message_mux& mx = *m;
    // Before anything of the connection is torn down: nothing is posted or canceled here again.
    on_teardown(
        c,
        [&mx](connection_impl&) {
            std::lock_guard g(mx.mu);
            mx.closing = true;
        },
        nullptr);
    p.mux = std::move(m);
    lock.unlock();
    for (std::uint32_t k = 0; k < count; ++k) {
        post_carrier(mx, k);
    }
    std::lock_guard g(mx.mu);
    if (mx.closing) {
        return fail(errc::disconnected,
                    "the connection's receives could not be posted: it is "
                    "closing");
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
    lock_t lock(m.mu);
    m.client = m.client || !s.target;
    if (m.svc_kept.empty()) {
        (void)m.svc_recvs.push({static_cast<std::byte*>(buf), len, hook, context});  // one a slot
        return {};
    }
    // A request that came before this slot was free: answered now.
    const std::uint32_t k = m.svc_kept.pop();
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
    std::lock_guard lock(m->mu);
    message_mux::svc_recv r;
    if (!m->svc_recvs.take_if([&](const message_mux::svc_recv& s) { return s.context == context; },
                              r)) {
        return false;
    }
    (void)m->svc_ending.push(r);  // one a slot, as svc_recvs
    request_entries(*m);
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
    if (!c.open.load() && c.connecting.load()) {
        return fail(errc::bad_state,
                    "recv: with persistence_config::message_size, receives are taken once the "
                    "connection is established (wait for conn_event::established)");
    }
    if (auto ok = check_open(c, "recv"); !ok) {
        return ok;
    }
    auto mp = mux_of(c);
    if (!mp) {
        return fail(mp.error());
    }
    message_mux& m = **mp;
    std::lock_guard lock(m.mu);
    if (!m.live()) {
        return fail(errc::disconnected, "recv: connection is not open");
    }
    if (!m.app_recvs.push(r)) {
        return fail(errc::would_block, "recv: receive queue full (depth " +
                                           std::to_string(m.app_depth) + "); reap completions");
    }
    request_entries(m);  // a message kept for it: an entry brings it
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

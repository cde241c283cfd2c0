// SPDX-License-Identifier: BSD-3-Clause
// src/slots/receive_pool.cpp — receive_pool: registered receive buffers shared by a target's
// connections, posted where they are owed (FIFO), with back-pressure.
#include <remora/receive_pool.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "core/upper.hpp"

namespace remora {

struct receive_pool::impl {};

namespace detail {

struct receive_pool_impl;
REMORA_HANDLE_STATE(receive_pool, receive_pool_impl);

struct receive_buffer {
    receive_pool_impl* pool = nullptr;
    std::byte* buf = nullptr;
    connection_impl* conn = nullptr;  // where it is posted, or where its message came from
    enum class state : std::uint8_t { free, posted, held } st = state::free;
    std::chrono::steady_clock::time_point posted_at{};
    bool reclaiming = false;  // canceled by the pool to move it to a connection that waits
};

struct receive_pool_impl : internal_access::opaque<receive_pool>,
                           std::enable_shared_from_this<receive_pool_impl> {
    receive_pool_config cfg;
    std::vector<std::byte> memory;
    std::optional<memory_region> mr;
    std::vector<receive_buffer> buffers;

    struct attached {
        connection_impl* conn = nullptr;
        std::uint32_t posted = 0;
        std::uint32_t owed = 0;
        bool queued = false;  // in `wanting`
    };
    struct ready_msg {
        receive_buffer* buffer;
        std::uint64_t tag;
        std::size_t bytes;
        std::uint64_t imm;
        bool has_imm;
    };
    mutable std::mutex mu;
    std::condition_variable cv;
    // The records of the pool's receives are written by post_internal outside `mu` (posting
    // under it would invert with the CQ's lock: posting may read the CQ, whose hooks take
    // `mu`). rebalance and detach read those records to cancel them: they wait until no post
    // is in flight and keep new ones out while they look (`scanning`). Both under `mu`.
    std::condition_variable post_cv;
    std::uint32_t posting = 0;  // post_internal calls of dispatch in flight
    bool scanning = false;      // a rebalance or detach reads the connections' records
    std::vector<std::uint32_t> free_buffers;
    std::vector<attached> conns;
    std::deque<connection_impl*> wanting;  // connections owed receives, longest waiting first
    std::deque<ready_msg> ready;
    receive_pool_stats st;
    // The pool itself while any of its receives is posted (st.posted > 0): their completions
    // reach on_receive through the buffers, and the provider writes into `memory`, after the last
    // receive_pool handle may be gone. Under `mu`; dropped (outside it) when st.posted falls to 0.
    std::shared_ptr<receive_pool_impl> self;
    // Called under `mu` after st.posted was lowered: the reference to drop once `mu` is released.
    std::shared_ptr<receive_pool_impl> unpin() {
        return st.posted == 0 ? std::move(self) : nullptr;
    }
    // Detaches `c` (no new posts, its receives canceled); false if it was not attached.
    bool detach(connection_impl* c);

    attached* find(connection_impl* c) {
        auto it = std::find_if(conns.begin(), conns.end(),
                               [&](const attached& a) { return a.conn == c; });
        return it == conns.end() ? nullptr : &*it;
    }
    void want(attached& a) {
        if (a.owed > 0 && !a.queued) {
            a.queued = true;
            wanting.push_back(a.conn);
        }
    }
    void free_buffer(receive_buffer* s) {
        s->st = receive_buffer::state::free;
        s->conn = nullptr;
        free_buffers.push_back(static_cast<std::uint32_t>(s - buffers.data()));
    }

    // Pairs free buffers with connections owed receives and posts them (outside the lock).
    void dispatch();
    static bool on_receive(void* context, completion& c, callback_sink* /*sink*/);
    void give_back(receive_buffer* s);
    void forget(connection_impl& c);  // the connection is being destroyed
    // First step of destroying `c` (before its endpoint closes): no post, rebalance or detach
    // touches it any more; waits for those in flight. forget() takes its buffers back later.
    void retire(connection_impl& c);
    // While connections wait and no buffer is free, cancels receives parked longest on quiet
    // connections so their buffers move to the waiting ones (those go to the back of the line).
    void rebalance();
    // Reads the records of `c`'s posted receives and cancels the pool's among them: every one
    // (`only` null) or the one of buffer `only`. Returns whether one was canceled. Caller set
    // `scanning` (so no pool post writes a record meanwhile).
    static bool cancel_posted(connection_impl& c, const receive_buffer* only);
    // Ends a scan: lets dispatch post again, and posts what waited meanwhile.
    void end_scan();
};

// A receive parked this long without a message counts as idle when others wait for a buffer.
constexpr std::chrono::milliseconds idle_receive{2};

void receive_pool_impl::rebalance() {
    std::vector<std::pair<receive_buffer*, connection_impl*>> victims;
    {
        std::lock_guard lock(mu);
        if (!free_buffers.empty() || wanting.empty() || posting != 0 || scanning) {
            return;  // nothing to move, or posts in flight: the next idle slice tries again
        }
        const auto now = std::chrono::steady_clock::now();
        std::vector<receive_buffer*> idle;
        for (auto& sl : buffers) {
            if (sl.st == receive_buffer::state::posted && !sl.reclaiming &&
                now - sl.posted_at >= idle_receive && find(sl.conn) != nullptr) {
                idle.push_back(&sl);
            }
        }
        std::sort(idle.begin(), idle.end(), [](const receive_buffer* a, const receive_buffer* b) {
            return a->posted_at < b->posted_at;
        });
        std::size_t n = 0;
        for (const connection_impl* w : wanting) {
            (void)w;
            if (n == idle.size()) {
                break;
            }
            idle[n]->reclaiming = true;
            victims.emplace_back(idle[n], idle[n]->conn);
            ++n;
        }
        if (victims.empty()) {
            return;
        }
        scanning = true;
    }
    for (auto& [s, c] : victims) {
        const bool canceled = cancel_posted(*c, s);
        if (!canceled) {
            std::lock_guard lock(mu);
            s->reclaiming = false;  // it completed meanwhile, or could not be canceled
        } else {
            // The canceled completion comes through the CQ's reader; make sure it reads.
            kick_readers(*c);
        }
    }
    end_scan();
}

bool receive_pool_impl::cancel_posted(connection_impl& c, const receive_buffer* only) {
    bool canceled = false;
    if (endpoint_open(c)) {
        for (op_record* r : c.ops.posted_recvs()) {
            if (armed_with(*r, &receive_pool_impl::on_receive, only)) {
                canceled = cancel_op(c, r) || canceled;
                if (only != nullptr) {
                    break;
                }
            }
        }
    }
    return canceled;
}

void receive_pool_impl::end_scan() {
    {
        std::lock_guard lock(mu);
        scanning = false;
    }
    post_cv.notify_all();
    dispatch();
}

void receive_pool_impl::dispatch() {
    for (;;) {
        std::vector<std::pair<receive_buffer*, connection_impl*>> todo;
        {
            std::lock_guard lock(mu);
            if (scanning) {
                return;  // the scan's end dispatches
            }
            while (!free_buffers.empty() && !wanting.empty()) {
                connection_impl* c = wanting.front();
                wanting.pop_front();
                attached* a = find(c);
                if (a == nullptr) {
                    continue;  // detached meanwhile
                }
                a->queued = false;
                receive_buffer* s = &buffers[free_buffers.back()];
                free_buffers.pop_back();
                s->st = receive_buffer::state::posted;
                s->conn = c;
                s->posted_at = std::chrono::steady_clock::now();
                s->reclaiming = false;
                ++a->posted;
                --a->owed;
                ++st.posted;
                want(*a);  // still owed: to the back of the line
                todo.emplace_back(s, c);
            }
            posting += static_cast<std::uint32_t>(todo.size());
            if (st.posted > 0 && !self) {
                self = shared_from_this();
            }
        }
        if (todo.empty()) {
            return;
        }
        bool failed = false;
        std::shared_ptr<receive_pool_impl> last;  // dropped at return: `this` may go with it
        for (auto& [s, c] : todo) {
            auto r = post_internal(*c, queue::recv, s->buf, cfg.buffer_size, local_desc(*mr),
                                   &receive_pool_impl::on_receive, s);
            std::lock_guard lock(mu);
            --posting;  // this record is written: a scan may read it from now on
            if (!r) {
                // The connection is going away: take the buffer back and stop posting there.
                --st.posted;
                free_buffer(s);
                if (attached* a = find(c)) {
                    --a->posted;
                    a->owed = 0;
                }
                if (auto u = unpin()) {
                    last = std::move(u);
                }
                failed = true;
            }
        }
        post_cv.notify_all();
        if (!failed) {
            return;  // else: give the buffers that failed to the next connections in line
        }
    }
}

bool receive_pool_impl::on_receive(void* context, completion& c, callback_sink* /*sink*/) {
    auto* s = static_cast<receive_buffer*>(context);
    receive_pool_impl& p = *s->pool;
    std::shared_ptr<receive_pool_impl> last;  // dropped at return: the pool may go with it
    {
        std::lock_guard lock(p.mu);
        attached* a = p.find(s->conn);
        --p.st.posted;
        last = p.unpin();
        if (a != nullptr) {
            --a->posted;
        }
        if (!c.ok() && s->reclaiming && c.status == errc::canceled) {
            // Moved away from a quiet connection: it is owed a receive again.
            s->reclaiming = false;
            ++p.st.reclaimed;
            p.free_buffer(s);
            if (a != nullptr) {
                ++a->owed;
                p.want(*a);
            }
        } else if (!c.ok()) {
            // Flushed or canceled: the connection is going away; stop posting there.
            if (a != nullptr) {
                a->owed = 0;
            }
            p.free_buffer(s);
        } else {
            s->st = receive_buffer::state::held;
            p.ready.push_back({s, s->conn->config.tag, c.bytes, c.imm, c.has_imm});
            ++p.st.held;
            ++p.st.received;
            p.st.max_held = std::max(p.st.max_held, p.st.held);
            if (a != nullptr) {
                ++a->owed;
                p.want(*a);
                if (p.free_buffers.empty()) {
                    ++p.st.backpressure_events;
                }
            }
        }
    }
    p.cv.notify_one();
    p.dispatch();
    return false;  // delivered through next(), not the connection's CQ
}

void receive_pool_impl::give_back(receive_buffer* s) {
    {
        std::lock_guard lock(mu);
        --st.held;
        free_buffer(s);
    }
    dispatch();
}

void receive_pool_impl::retire(connection_impl& c) {
    std::unique_lock lock(mu);
    conns.erase(
        std::remove_if(conns.begin(), conns.end(), [&](const attached& a) { return a.conn == &c; }),
        conns.end());
    wanting.erase(std::remove(wanting.begin(), wanting.end(), &c), wanting.end());
    // dispatch posts only on attached connections and rebalance picks only their buffers: once
    // the posts and scans in flight are done, none reaches `c`.
    post_cv.wait(lock, [&] { return posting == 0 && !scanning; });
}

void receive_pool_impl::forget(connection_impl& c) {
    std::shared_ptr<receive_pool_impl> last;  // dropped at return
    {
        std::unique_lock lock(mu);
        // A post in flight on `c` settles its buffer first (a failed one frees it itself).
        post_cv.wait(lock, [&] { return posting == 0; });
        // The endpoint is closed: receives still posted there are free again.
        for (auto& s : buffers) {
            if (s.conn != &c) {
                continue;
            }
            if (s.st == receive_buffer::state::posted) {
                --st.posted;
                free_buffer(&s);
            } else {
                s.conn = nullptr;  // a message from it is still held
            }
        }
        last = unpin();
        conns.erase(std::remove_if(conns.begin(), conns.end(),
                                   [&](const attached& a) { return a.conn == &c; }),
                    conns.end());
        wanting.erase(std::remove(wanting.begin(), wanting.end(), &c), wanting.end());
    }
    dispatch();
}

// The pool behind a message's pool_.
template <class P>
receive_pool_impl* receive_pool_of(const P& p) noexcept {
    return internal_access::cast<receive_pool>(p.get());
}

}  // namespace detail

// ---------------------------------------------------------------- message

message::message(message&& o) noexcept
    : pool_(std::move(o.pool_)),
      index_(o.index_),
      bytes_(o.bytes_),
      tag_(o.tag_),
      imm_(o.imm_),
      has_imm_(o.has_imm_) {}

message& message::operator=(message&& o) noexcept {
    if (this != &o) {
        release();
        pool_ = std::move(o.pool_);
        index_ = o.index_;
        bytes_ = o.bytes_;
        tag_ = o.tag_;
        imm_ = o.imm_;
        has_imm_ = o.has_imm_;
    }
    return *this;
}

message::~message() {
    release();
}

std::span<const std::byte> message::data() const noexcept {
    return pool_ ? std::span<const std::byte>(detail::receive_pool_of(pool_)->buffers[index_].buf,
                                              bytes_)
                 : std::span<const std::byte>();
}

std::uint64_t message::tag() const noexcept {
    return tag_;
}

void message::release() noexcept {
    if (pool_) {
        detail::receive_pool_impl* p = detail::receive_pool_of(pool_);
        p->give_back(&p->buffers[index_]);
        pool_.reset();
    }
}

namespace detail {

bool receive_pool_impl::detach(connection_impl* c) {
    {
        std::unique_lock lock(mu);
        attached* a = find(c);
        if (a == nullptr) {
            return false;
        }
        conns.erase(conns.begin() + (a - conns.data()));
        wanting.erase(std::remove(wanting.begin(), wanting.end(), c), wanting.end());
        // Nothing new is posted on `c` from here; a post already in flight there must land
        // (and its record be written) before the scan, or its receive would stay posted.
        post_cv.wait(lock, [&] { return posting == 0 && !scanning; });
        scanning = true;
    }
    // The canceled receives complete through on_receive and free their buffers.
    (void)cancel_posted(*c, nullptr);
    end_scan();
    return true;
}

}  // namespace detail

// ---------------------------------------------------------------- receive_pool

receive_pool::receive_pool(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
receive_pool::receive_pool(receive_pool&&) noexcept = default;
receive_pool& receive_pool::operator=(receive_pool&& o) noexcept {
    receive_pool old(std::move(o));
    std::swap(impl_, old.impl_);
    return *this;  // the pool this handle held is detached as `old` goes
}
// The last handle detaches every connection: their receives are canceled, and the pool lives on
// (self) until each canceled receive has completed or its connection is destroyed.
receive_pool::~receive_pool() {
    if (!impl_) {
        return;  // moved from
    }
    std::vector<detail::connection_impl*> attached;
    {
        std::lock_guard lock(detail::impl_of(*this)->mu);
        for (const auto& a : detail::impl_of(*this)->conns) {
            attached.push_back(a.conn);
        }
    }
    for (auto* c : attached) {
        (void)detail::impl_of(*this)->detach(c);
    }
}

result<receive_pool> receive_pool::create(const domain& dom, const receive_pool_config& config) {
    if (!dom) {
        return fail(errc::bad_state,
                    "receive_pool: the domain handle is empty (closed or moved from)");
    }
    if (config.buffers == 0 || config.buffer_size == 0 || config.per_connection == 0) {
        return fail(errc::invalid_argument,
                    "receive_pool: buffers, buffer_size and per_connection must be > 0");
    }
    if (config.buffer_size > dom.caps().max_msg_size) {
        return fail(errc::too_large, "receive_pool: buffer_size " +
                                         std::to_string(config.buffer_size) +
                                         " exceeds the provider's message size");
    }
    auto p = std::make_shared<detail::receive_pool_impl>();
    p->cfg = config;
    p->memory.assign(static_cast<std::size_t>(config.buffers) * config.buffer_size, std::byte{0});
    auto mr = memory_region::create(dom, p->memory, usage::receive);
    if (!mr) {
        return fail(mr.error());
    }
    p->mr.emplace(std::move(*mr));
    p->buffers.resize(config.buffers);
    for (std::uint32_t i = 0; i < config.buffers; ++i) {
        p->buffers[i].pool = p.get();
        p->buffers[i].buf = p->memory.data() + static_cast<std::size_t>(i) * config.buffer_size;
        p->free_buffers.push_back(config.buffers - 1 - i);
    }
    p->st.buffers = config.buffers;
    return internal_access::wrap<receive_pool>(std::move(p));
}

result<void> receive_pool::attach(connection& conn) {
    detail::connection_impl* c = detail::impl_of(conn);
    if (!conn.is_open()) {
        return fail(errc::disconnected, "receive_pool::attach: the connection is not open");
    }
    if (c->internal_sends != 0) {
        return fail(errc::invalid_argument,
                    "receive_pool::attach: the connection carries only its addon's internal "
                    "messages (the target service's)");
    }
    if (c->config.rq_size < detail::impl_of(*this)->cfg.per_connection) {
        return fail(errc::invalid_argument,
                    "receive_pool::attach: the connection's rq_size " +
                        std::to_string(c->config.rq_size) + " is below per_connection " +
                        std::to_string(detail::impl_of(*this)->cfg.per_connection));
    }
    {
        std::lock_guard lock(detail::impl_of(*this)->mu);
        if (detail::impl_of(*this)->find(c) != nullptr) {
            return fail(errc::bad_state, "receive_pool::attach: already attached");
        }
        detail::impl_of(*this)->conns.push_back(
            {c, 0, detail::impl_of(*this)->cfg.per_connection, false});
        detail::impl_of(*this)->want(detail::impl_of(*this)->conns.back());
    }
    std::weak_ptr<detail::receive_pool_impl> weak = detail::shared_impl_of(*this);
    detail::on_teardown(
        *c,
        [weak](detail::connection_impl& dying) {
            if (auto p = weak.lock()) {
                p->retire(dying);
            }
        },
        [weak](detail::connection_impl& dying) {
            if (auto p = weak.lock()) {
                p->forget(dying);
            }
        });
    detail::impl_of(*this)->dispatch();
    return {};
}

void receive_pool::detach(connection& conn) noexcept {
    (void)detail::impl_of(*this)->detach(detail::impl_of(conn));
}

result<message> receive_pool::next(std::chrono::milliseconds timeout) {
    const auto deadline = detail::deadline_after(timeout);
    std::unique_lock lock(detail::impl_of(*this)->mu);
    for (;;) {
        const auto slice =
            std::min(deadline, std::chrono::steady_clock::now() + detail::idle_receive);
        if (detail::impl_of(*this)->cv.wait_until(
                lock, slice, [&] { return !detail::impl_of(*this)->ready.empty(); })) {
            break;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            return fail(errc::timed_out, "receive_pool: no message within " +
                                             std::to_string(timeout.count()) + " ms");
        }
        // Nothing arrived for a while: buffers may be parked on quiet connections while others
        // wait. Move them.
        lock.unlock();
        detail::impl_of(*this)->rebalance();
        lock.lock();
    }
    const auto r = detail::impl_of(*this)->ready.front();
    detail::impl_of(*this)->ready.pop_front();
    message m;
    m.pool_ = impl_;
    m.index_ = static_cast<std::uint32_t>(r.buffer - detail::impl_of(*this)->buffers.data());
    m.bytes_ = r.bytes;
    m.tag_ = r.tag;
    m.imm_ = r.imm;
    m.has_imm_ = r.has_imm;
    return m;
}

receive_pool_stats receive_pool::stats() const {
    std::lock_guard lock(detail::impl_of(*this)->mu);
    receive_pool_stats s = detail::impl_of(*this)->st;
    s.owed = 0;
    s.connections = static_cast<std::uint32_t>(detail::impl_of(*this)->conns.size());
    for (const auto& a : detail::impl_of(*this)->conns) {
        s.owed += a.owed;
    }
    return s;
}

}  // namespace remora

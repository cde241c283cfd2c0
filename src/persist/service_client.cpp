// SPDX-License-Identifier: BSD-3-Clause
// The client side of a connection's service messages: request slots and their ids, sending a
// request, matching its reply (only from the peer asked, only with an id in flight), expiry.
#include "persist/service.hpp"

#include <remora/target_service.hpp>

#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <optional>
#include <string>

#include "base/log.hpp"
#include "core/little_endian.hpp"
#include "core/upper.hpp"

namespace remora::detail {

namespace {

// ---- client side

// Frees a slot whose send completion and delivery are both done. Caller holds s.mu.
void settle(service_conn& s, std::uint32_t i, bool notify = true) {
    service_conn::slot& sl = s.slots[i];
    if (--sl.pending == 0) {
        sl.busy = false;
        sl.hook = nullptr;
        sl.hook_context = nullptr;
        --s.busy;
        s.free_slots.push_back(i);
        // A post parked for a request slot (connection::publish) may go now.
        if (park_gate* g = s.conn->ops.gate.load(); notify && g != nullptr) {
            g->notify();
        }
    }
}

// Turns `c` into slot i's completion for the application. Returns whether poll() reports it
// (false: its callback ran, or a success with completion_mode::on_error). Caller holds s.mu;
// the lock is released around the callback.
bool deliver(service_conn& s, std::uint32_t i, completion& c, std::unique_lock<std::mutex>& lock,
             callback_sink* sink) {
    service_conn::slot& sl = s.slots[i];
    sl.delivered = true;
    c.op = sl.kind == service_op::flush ? op::flush : op::atomic;
    c.context = sl.user_context;
    c.bytes = 0;
    c.has_imm = false;
    c.imm = 0;
    auto* callback = sl.callback;
    auto* hook = sl.hook;
    void* hook_context = sl.hook_context;
    const bool report = sl.report_success || !c.ok();
    settle(s, i);
    if (hook != nullptr) {
        lock.unlock();  // the hook may send the operation's next request
        const bool seen = hook(hook_context, c, sink);
        lock.lock();
        return seen;
    }
    if (callback != nullptr) {
        lock.unlock();
        run_callback(callback, c, &s.conn->ops, sink);  // after the CQ reader's lock (done.hpp)
        lock.lock();
        return false;
    }
    return report;
}

bool client_reply(void* context, completion& c, callback_sink* sink);

// The hello's send or reply is done (the hello is no request: nothing is delivered).
void settle_hello(service_conn& s) {
    service_conn::slot& h = s.slots[s.depth];
    if (--h.pending == 0) {
        h.busy = false;
    }
}

// What an expired request ends with: bad_state when the target never showed it serves.
std::error_code expiry_status(const service_conn::slot& sl) {
    return make_error_code(sl.unserved ? errc::bad_state : errc::timed_out);
}

bool client_sent(void* context, completion& c, callback_sink* sink) {
    auto& ref = *static_cast<service_conn::ref*>(context);
    service_conn& s = *ref.owner;
    std::unique_lock lock(s.mu);
    if (ref.index == s.depth) {
        if (!c.ok() && s.served == service_conn::serving::waiting) {
            // The hello was lost: no check on this connection (service_timeout still holds).
            s.served = service_conn::serving::yes;
        }
        settle_hello(s);
        return false;
    }
    service_conn::slot& sl = s.slots[ref.index];
    if (!sl.delivered && (!c.ok() || s.dead)) {
        // Failed, or sent into a connection that is gone: no reply will come.
        if (c.ok()) {
            c.status = make_error_code(errc::disconnected);
        } else if (sl.expired) {
            c.status = expiry_status(sl);  // tick() canceled it
        }
        const bool report = deliver(s, ref.index, c, lock, sink);
        settle(s, ref.index);
        return report;
    }
    settle(s, ref.index);
    return false;
}

// Posts reply receive `j` again, tried twice (a transient refusal); a second failure means the
// connection is gone. Caller holds s.mu (post_internal never takes it).
void repost_reply(service_conn& s, std::uint32_t j) {
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (service_recv(s, s.reply_buf(j), reply_size, client_reply, &s.recv_refs[j])) {
            return;
        }
    }
    s.dead = true;
}

bool client_reply(void* context, completion& c, callback_sink* sink) {
    auto& ref = *static_cast<service_conn::ref*>(context);
    service_conn& s = *ref.owner;
    std::unique_lock lock(s.mu);
    if (s.recv_canceled[ref.index]) {
        s.recv_canceled[ref.index] = false;
        --s.recv_cancels;
        if (!c.ok()) {
            // tick() canceled this receive to end the oldest expired request whose send is done.
            repost_reply(s, ref.index);
            std::uint32_t oldest = s.depth;
            for (std::uint32_t k = 0; k < s.depth; ++k) {
                const service_conn::slot& sl = s.slots[k];
                if (sl.busy && sl.expired && !sl.delivered && sl.pending == 1 &&
                    (oldest == s.depth || sl.sequence < s.slots[oldest].sequence)) {
                    oldest = k;
                }
            }
            if (oldest == s.depth) {
                return false;  // its reply came meanwhile
            }
            c.status = expiry_status(s.slots[oldest]);
            return deliver(s, oldest, c, lock, sink);
        }
    }
    if (c.status == errc::access_denied) {
        // An RDM message from someone but the target asked: not a reply, dropped.
        ++s.bad_replies;
        repost_reply(s, ref.index);
        return false;
    }
    if (!c.ok() && teardown_status(c)) {
        // The connection is going away: the receive fails one request still waiting for its
        // reply (every posted receive fails, and there are at least as many as such requests;
        // requests whose send completes later fail then, see client_sent).
        s.dead = true;
        for (std::uint32_t i = 0; i < s.depth; ++i) {
            if (s.slots[i].busy && s.slots[i].posted && !s.slots[i].delivered) {
                return deliver(s, i, c, lock, sink);
            }
        }
        return false;
    }
    std::optional<service_reply> rp;
    if (c.ok()) {
        if (auto d = decode_reply({s.reply_buf(ref.index), c.bytes})) {
            rp = *d;
        }
    }
    std::uint32_t i = 0;
    bool ok = rp.has_value();
    if (ok) {
        i = static_cast<std::uint32_t>(rp->id & ((std::uint64_t{1} << s.index_bits) - 1));
        // The hello's (slot depth) may carry any op: a target that could not read it answers
        // with the op clamped, and still answers.
        ok = i <= s.depth && s.slots[i].busy && !s.slots[i].delivered && s.slots[i].id == rp->id &&
             (i == s.depth ||
              (s.slots[i].kind == service_op::flush) == (rp->op == service_op::flush));
    }
    // Repost before the slot can be reused, so a new request always finds a receive.
    repost_reply(s, ref.index);
    if (!c.ok()) {
        // The provider failed a reply's receive: its bytes cannot be read, but a reply was
        // lost. The target answers in order, so it was the oldest request still waiting: that
        // one fails with the receive's status rather than wait for a reply that will not come.
        std::uint32_t oldest = s.depth;
        for (std::uint32_t k = 0; k < s.depth; ++k) {
            const service_conn::slot& sl = s.slots[k];
            if (sl.busy && sl.posted && !sl.delivered &&
                (oldest == s.depth || sl.sequence < s.slots[oldest].sequence)) {
                oldest = k;
            }
        }
        if (oldest != s.depth) {
            return deliver(s, oldest, c, lock, sink);
        }
    }
    if (!ok) {
        ++s.bad_replies;  // malformed, oversize or not an answer to anything we asked: ignored
        return false;
    }
    service_conn::slot& sl = s.slots[i];
    s.replied = true;
    // Any answer shows the target serves the connection (a late one: requests work again).
    s.served = service_conn::serving::yes;
    if (i == s.depth) {
        sl.delivered = true;
        settle_hello(s);
        return false;
    }
    if (rp->status != 0) {
        c.status = make_error_code(static_cast<errc>(rp->status));
    } else if (sl.result != nullptr) {
        std::memcpy(sl.result, &rp->value, 8);  // both sides are little-endian here
    }
    return deliver(s, i, c, lock, sink);
}

}  // namespace

persist_conn& persist_of(connection_impl& c) {
    static constexpr char key = 0;  // its address names the extension
    return static_cast<persist_conn&>(
        c.extension(&key, [] { return std::unique_ptr<connection_extension>(new persist_conn); }));
}

result<service_conn*> client_side(connection_impl& c) {
    persist_conn& p = persist_of(c);
    std::lock_guard lock(p.svc_mu);
    if (p.svc) {
        if (p.svc->target) {
            return fail(errc::bad_state,
                        "this connection serves the target service; it cannot also call it");
        }
        return p.svc.get();
    }
    auto s = make_service_conn(c, false);
    if (!s) {
        return fail(s.error());
    }
    service_conn& sc = **s;
    if (sodium_init() < 0) {
        return fail(errc::not_supported, "libsodium failed to initialise (request ids)");
    }
    static_assert(crypto_shorthash_KEYBYTES == 16);
    randombytes_buf(sc.id_key.data(), sc.id_key.size());
    sc.index_bits = static_cast<unsigned>(std::bit_width(sc.depth));  // slots 0 .. depth
    sc.slots.resize(sc.count);  // the requests' and the hello's
    sc.recv_canceled.assign(sc.count, false);
    sc.served = persistence_of(c).serve_wait.count() > 0 ? service_conn::serving::unknown
                                                         : service_conn::serving::yes;
    for (std::uint32_t i = sc.depth; i-- > 0;) {
        sc.free_slots.push_back(i);
    }
    // Installed before anything is posted: the receives' records point into it.
    p.svc = std::move(*s);
    for (std::uint32_t j = 0; j < sc.count;
         ++j) {  // a reply receive for each request, and the hello's
        if (auto r = service_recv(sc, sc.reply_buf(j), reply_size, client_reply, &sc.recv_refs[j]);
            !r) {
            return fail(r.error());
        }
    }
    return &sc;
}

namespace {

// Takes a free request slot (caller holds s.mu). `hello`: set when the caller must send the
// hello (send_hello) before the request: the connection's first.
result<std::uint32_t> take_slot(service_conn& s, bool& hello) {
    if (s.dead) {
        return fail(errc::disconnected, "the connection to the target's service is lost");
    }
    if (s.served == service_conn::serving::no) [[unlikely]] {
        return fail(errc::bad_state, unserved_message(*s.conn));
    }
    if (s.free_slots.empty()) {
        return fail(errc::would_block, "service requests in flight reach service_depth " +
                                           std::to_string(s.depth) + "; reap completions");
    }
    const std::uint32_t i = s.free_slots.back();
    s.free_slots.pop_back();
    ++s.busy;
    s.slots[i].busy = true;
    hello = s.served == service_conn::serving::unknown;
    if (hello) {
        s.served = service_conn::serving::waiting;  // until send_hello says otherwise
    }
    return i;
}

// Request `sequence`'s id for slot i (service_conn::id_key).
std::uint64_t make_request_id(const service_conn& s, std::uint64_t sequence, std::uint32_t i) {
    unsigned char in[8];
    for (int b = 0; b < 8; ++b) {
        in[b] = static_cast<unsigned char>(sequence >> (8 * b));
    }
    unsigned char out[crypto_shorthash_BYTES];
    crypto_shorthash(out, in, sizeof in, s.id_key.data());
    std::uint64_t h = 0;
    std::memcpy(&h, out, sizeof h);
    const std::uint64_t mask = (std::uint64_t{1} << s.index_bits) - 1;
    return (h & ~mask) | i;
}

// Sends slot i's request (taken, filled in but for its id and sequence).
result<void> send_slot(connection_impl& c, service_conn& s, std::uint32_t i, service_request rq) {
    {
        std::lock_guard lock(s.mu);
        service_conn::slot& sl = s.slots[i];
        sl.reserved = false;
        sl.sequence = s.next_sequence++;
        sl.deadline = std::chrono::steady_clock::now() + persistence_of(c).service_timeout;
        sl.expired = false;
        sl.unserved = false;
        c.expect_deadline(sl.deadline);
        sl.posted = false;
        sl.delivered = false;
        sl.pending = 2;
        sl.id = make_request_id(s, sl.sequence, i);
        rq.id = sl.id;
    }
    encode(rq, std::span<std::byte, request_size>(s.request_buf(i), request_size));
    auto r = post_internal(c, queue::service, s.request_buf(i), request_size, desc_of(s),
                           client_sent, &s.send_refs[i]);
    std::lock_guard lock(s.mu);
    service_conn::slot& sl = s.slots[i];
    if (!r) {
        sl.pending = 1;
        settle(s, i);
    } else {
        sl.posted = true;
        if (s.served == service_conn::serving::no) [[unlikely]] {
            // serve_wait passed while it was being posted: it ends as the others did (tick).
            sl.unserved = true;
            sl.deadline = std::chrono::steady_clock::now();
            c.expect_deadline(sl.deadline);
        }
    }
    return r;
}

// Sends the connection's hello (slot depth) before its first request: the target's answer, or
// its lack within serve_wait, says whether it serves the connection (tick). A refused post
// refuses the request with it (`request`, taken, is given back); the next request tries again.
result<void> send_hello(connection_impl& c, service_conn& s, std::uint32_t request) {
    const persistence_config& cfg = persistence_of(c);
    const std::uint32_t h = s.depth;
    {
        std::lock_guard lock(s.mu);
        service_conn::slot& sl = s.slots[h];
        sl = {};
        sl.busy = true;
        sl.kind = service_op::hello;
        sl.pending = 2;  // its send's completion and its reply
        sl.sequence = s.next_sequence++;
        sl.id = make_request_id(s, sl.sequence, h);
        s.hello_deadline =
            std::chrono::steady_clock::now() + std::min(cfg.serve_wait, cfg.service_timeout);
        c.expect_deadline(s.hello_deadline);
    }
    service_request rq;
    rq.op = service_op::hello;
    rq.id = s.slots[h].id;
    encode(rq, std::span<std::byte, request_size>(s.request_buf(h), request_size));
    auto r = post_internal(c, queue::service, s.request_buf(h), request_size, desc_of(s),
                           client_sent, &s.send_refs[h]);
    std::lock_guard lock(s.mu);
    service_conn::slot& sl = s.slots[h];
    if (!r) {
        sl = {};
        if (s.served == service_conn::serving::waiting) {
            s.served = service_conn::serving::unknown;
        }
        s.slots[request].pending = 1;
        settle(s, request);
        return r;
    }
    sl.posted = true;
    return {};
}

}  // namespace

result<void> client_request(connection_impl& c, service_request rq, std::byte* result,
                            const op_options& opts) {
    if (opts.report == completion_mode::at_post) {
        return fail(errc::invalid_argument,
                    "completion_mode::at_post is for writes and sends, not service requests");
    }
    auto sp = client_side(c);
    if (!sp) {
        return fail(sp.error());
    }
    service_conn& s = **sp;
    std::uint32_t i;
    bool hello = false;
    {
        std::lock_guard lock(s.mu);
        auto t = take_slot(s, hello);
        if (!t) {
            return fail(t.error());
        }
        i = *t;
        service_conn::slot& sl = s.slots[i];
        sl.user_context = opts.context;
        sl.callback = opts.callback;
        sl.report_success = opts.report == completion_mode::always;
        sl.kind = rq.op;
        sl.result = result;
    }
    if (hello) [[unlikely]] {
        if (auto r = send_hello(c, s, i); !r) {
            return r;
        }
    }
    return send_slot(c, s, i, rq);
}

result<std::uint32_t> reserve_request(connection_impl& c) {
    auto sp = client_side(c);
    if (!sp) {
        return fail(sp.error());
    }
    service_conn& s = **sp;
    bool hello = false;
    std::uint32_t i;
    {
        std::lock_guard lock(s.mu);
        auto t = take_slot(s, hello);
        if (!t) {
            return t;
        }
        i = *t;
        s.slots[i].reserved = true;
        s.slots[i].pending = 1;  // release_request settles it
    }
    if (hello) [[unlikely]] {
        if (auto r = send_hello(c, s, i); !r) {
            return fail(r.error());
        }
    }
    return i;
}

result<void> hook_request(connection_impl& c, std::uint32_t slot, service_request rq, hook_fn hook,
                          void* context) {
    service_conn& s = *persist_of(c).svc;  // reserve_request created it
    {
        std::lock_guard lock(s.mu);
        service_conn::slot& sl = s.slots[slot];
        sl.user_context = nullptr;
        sl.callback = nullptr;
        sl.hook = hook;
        sl.hook_context = context;
        sl.report_success = true;
        sl.kind = rq.op;
        sl.result = nullptr;
        if (s.dead) {
            settle(s, slot);
            return fail(errc::disconnected, "the connection to the target's service is lost");
        }
    }
    return send_slot(c, s, slot, rq);
}

void release_request(connection_impl& c, std::uint32_t slot, bool notify) noexcept {
    service_conn& s = *persist_of(c).svc;
    std::lock_guard lock(s.mu);
    s.slots[slot].reserved = false;
    settle(s, slot, notify);
}

std::chrono::steady_clock::time_point persist_conn::tick(
    std::chrono::steady_clock::time_point now) {
    using tp = std::chrono::steady_clock::time_point;
    std::lock_guard lock(svc_mu);
    if (!svc || svc->target) {
        return tp::max();
    }
    service_conn& s = *svc;
    connection_impl& c = *s.conn;
    std::lock_guard slots(s.mu);
    tp next = tp::max();
    std::size_t awaiting_reply = 0;  // expired requests whose send is done
    std::size_t newly_expired = 0;   // reached service_timeout in this pass
    bool canceled = false;
    std::vector<std::pair<op_record*, bool>> taken;
    if (s.served == service_conn::serving::waiting) {
        if (s.hello_deadline > now) {
            next = std::min(next, s.hello_deadline);
        } else {
            // No answer to the hello nor to any request within serve_wait: the target does not
            // serve this connection. Its requests end now, with bad_state (below).
            s.served = service_conn::serving::no;
            for (std::uint32_t i = 0; i < s.depth; ++i) {
                service_conn::slot& sl = s.slots[i];
                if (sl.busy && sl.posted && !sl.delivered && !sl.expired) {
                    sl.unserved = true;
                    sl.deadline = now;
                }
            }
            if (log_enabled(log_level::warning)) {
                log_line(log_level::warning, unserved_message(c));
            }
        }
    }
    for (std::uint32_t i = 0; i < s.depth; ++i) {
        service_conn::slot& sl = s.slots[i];
        if (!sl.busy || !sl.posted || sl.delivered) {
            continue;
        }
        if (sl.deadline > now) {
            next = std::min(next, sl.deadline);
            continue;
        }
        newly_expired += sl.expired || sl.unserved ? 0 : 1;
        sl.expired = true;
        next =
            std::min(next, now + std::chrono::milliseconds(100));  // looked at again until it ends
        if (!endpoint_open(c)) {
            continue;  // closed: the close completes it
        }
        if (sl.pending == 2) {
            // Its send is still with the provider: cancel it (client_sent ends the request).
            if (taken.empty()) {
                taken = c.ops.taken();
            }
            for (auto [rec, is_recv] : taken) {
                if (!is_recv && armed_with(*rec, &client_sent, &s.send_refs[i])) {
                    canceled = cancel_op(c, rec) || canceled;
                }
            }
        } else {
            ++awaiting_reply;
        }
    }
    // One reply receive canceled per expired request waiting for its reply: the receive's
    // completion ends the oldest of them (client_reply).
    for (std::uint32_t j = 0; j < s.count && s.recv_cancels < awaiting_reply; ++j) {
        if (s.recv_canceled[j] || !endpoint_open(c)) {
            continue;
        }
        // With message_size the service's receives are the library's: ended there.
        if (c.router != nullptr ? cancel_service_recv(*this, &s.recv_refs[j])
                                : cancel_internal_recv(c, &s.recv_refs[j])) {
            s.recv_canceled[j] = true;
            ++s.recv_cancels;
            canceled = canceled || c.router == nullptr;
        }
    }
    if (canceled) {
        // The canceled completions come through the CQ's reader: make sure it reads.
        kick_readers(c);
    }
    if (newly_expired != 0 && log_enabled(log_level::warning)) {
        log_line(log_level::warning,
                 std::to_string(newly_expired) + " service request(s) on connection tag " +
                     std::to_string(c.config.tag) + " got no reply within service_timeout (" +
                     std::to_string(persistence_of(c).service_timeout.count()) +
                     " ms) and end timed_out" +
                     (s.replied ? ""
                                : "; the target has never answered on this connection: does it "
                                  "call target_service::serve on it?"));
    }
    return next;
}

std::size_t persist_conn::busy() const noexcept {
    const std::size_t waiting = mux_waiting(const_cast<persist_conn&>(*this));
    std::lock_guard lock(svc_mu);
    if (!svc || svc->target) {
        return waiting;
    }
    std::lock_guard slots(svc->mu);
    return svc->busy + waiting;
}

}  // namespace remora::detail

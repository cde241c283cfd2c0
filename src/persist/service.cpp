// SPDX-License-Identifier: BSD-3-Clause
#include "persist/service.hpp"

#include <remora/target_service.hpp>

#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <optional>
#include <string>

#include "core/little_endian.hpp"

#include "core/impl.hpp"

namespace remora {
namespace detail {

// ---------------------------------------------------------------- wire format

namespace {

result<void> check_header(std::span<const std::byte> in, std::size_t size, const char* what) {
    if (in.size() != size) {
        return fail(errc::invalid_argument, std::string(what) + ": " + std::to_string(in.size()) +
                                                " bytes, want " + std::to_string(size));
    }
    if (get_le(in.data(), 4) != service_magic) {
        return fail(errc::invalid_argument, std::string(what) + ": bad magic");
    }
    if (static_cast<std::uint8_t>(in[4]) != service_version) {
        return fail(errc::invalid_argument, std::string(what) + ": version " +
                                                std::to_string(static_cast<unsigned>(in[4])) +
                                                " is not supported");
    }
    const auto op = static_cast<std::uint8_t>(in[5]);
    if (op < static_cast<std::uint8_t>(service_op::flush) ||
        op > static_cast<std::uint8_t>(service_op::fetch_add)) {
        return fail(errc::invalid_argument,
                    std::string(what) + ": unknown operation " + std::to_string(op));
    }
    return {};
}

}  // namespace

namespace {

// The first 16 bytes of both messages: magic, version, op, a 16-bit field (request flags or
// reply status) and the request id.
void put_header(std::byte* p, service_op op, std::uint16_t field, std::uint64_t id) noexcept {
    put_le(p, service_magic, 4);
    p[4] = static_cast<std::byte>(service_version);
    p[5] = static_cast<std::byte>(op);
    put_le(p + 6, field, 2);
    put_le(p + 8, id, 8);
}

}  // namespace

void encode(const service_request& r, std::span<std::byte, request_size> out) noexcept {
    std::byte* p = out.data();
    put_header(p, r.op, r.flags, r.id);
    put_le(p + 16, r.key, 8);
    put_le(p + 24, r.address, 8);
    put_le(p + 32, r.arg0, 8);
    put_le(p + 40, r.arg1, 8);
}

void encode(const service_reply& r, std::span<std::byte, reply_size> out) noexcept {
    std::byte* p = out.data();
    put_header(p, r.op, r.status, r.id);
    put_le(p + 16, r.value, 8);
    put_le(p + 24, 0, 8);
}

result<service_request> decode_request(std::span<const std::byte> in) {
    if (auto r = check_header(in, request_size, "service request"); !r) {
        return fail(r.error());
    }
    service_request rq;
    rq.op = static_cast<service_op>(in[5]);
    rq.flags = static_cast<std::uint16_t>(get_le(&in[6], 2));
    if ((rq.flags & ~flush_persistent) != 0 || (rq.flags != 0 && rq.op != service_op::flush)) {
        return fail(errc::invalid_argument, "service request: unknown flags");
    }
    rq.id = get_le(&in[8], 8);
    rq.key = get_le(&in[16], 8);
    rq.address = get_le(&in[24], 8);
    rq.arg0 = get_le(&in[32], 8);
    rq.arg1 = get_le(&in[40], 8);
    if (rq.op != service_op::compare_swap && rq.arg1 != 0) {
        return fail(errc::invalid_argument, "service request: unused operand is not zero");
    }
    return rq;
}

result<service_reply> decode_reply(std::span<const std::byte> in) {
    if (auto r = check_header(in, reply_size, "service reply"); !r) {
        return fail(r.error());
    }
    service_reply rp;
    rp.op = static_cast<service_op>(in[5]);
    rp.status = static_cast<std::uint16_t>(get_le(&in[6], 2));
    if (rp.status > static_cast<std::uint16_t>(errc::provider_error)) {
        return fail(errc::invalid_argument, "service reply: unknown status");
    }
    rp.id = get_le(&in[8], 8);
    rp.value = get_le(&in[16], 8);
    if (get_le(&in[24], 8) != 0) {
        return fail(errc::invalid_argument, "service reply: reserved field is not zero");
    }
    return rp;
}

// ---------------------------------------------------------------- target: executing requests

service_reply service_core::execute(const service_request& rq,
                                    const std::vector<std::uint64_t>* granted) const {
    service_reply rp;
    rp.op = rq.op;
    rp.id = rq.id;
    auto refuse = [&](errc e) {
        rp.status = static_cast<std::uint16_t>(e);
        return rp;
    };
    if (granted != nullptr &&
        std::find(granted->begin(), granted->end(), rq.key) == granted->end()) {
        return refuse(errc::access_denied);  // exposed, but not to this connection
    }
    std::shared_lock lock(mu);
    const auto it = std::find_if(regions.begin(), regions.end(),
                                 [&](const exposed& e) { return e.key == rq.key; });
    if (it == regions.end()) {
        return refuse(errc::access_denied);  // no such region here
    }
    const exposed& reg = *it;
    if (rq.address < reg.base || rq.address - reg.base > reg.memory.size()) {
        return refuse(errc::out_of_range);
    }
    const std::uint64_t offset = rq.address - reg.base;
    if (rq.op == service_op::flush) {
        const std::uint64_t length = rq.arg0;
        if (length > reg.memory.size() - offset) {
            return refuse(errc::out_of_range);
        }
        if (!has_all(reg.uses, usage::flush_target)) {
            return refuse(errc::access_denied);
        }
        if ((rq.flags & flush_persistent) != 0) {
            if (reg.persist == nullptr || !reg.persist->persistent) {
                return refuse(errc::not_supported);  // volatile memory cannot be persisted
            }
            if (auto r = reg.persist->persist(offset, length); !r) {
                return refuse(errc::provider_error);
            }
        }
        // Visibility: the request arrived after the connection's earlier writes were placed.
        return rp;
    }
    if (reg.memory.size() - offset < 8) {
        return refuse(errc::out_of_range);
    }
    if (!has_all(reg.uses, usage::atomic_target)) {
        return refuse(errc::access_denied);
    }
    std::byte* p = reg.memory.data() + offset;
    if (reinterpret_cast<std::uintptr_t>(p) % 8 != 0) {
        return refuse(errc::invalid_argument);
    }
    std::atomic_ref<std::uint64_t> word(*reinterpret_cast<std::uint64_t*>(p));
    switch (rq.op) {
        case service_op::atomic_write:
            word.store(rq.arg0, std::memory_order_release);
            break;
        case service_op::compare_swap: {
            std::uint64_t expected = rq.arg0;
            word.compare_exchange_strong(expected, rq.arg1, std::memory_order_acq_rel);
            rp.value = expected;  // the old value, whether or not it was swapped
            break;
        }
        case service_op::fetch_add:
            rp.value = word.fetch_add(rq.arg0, std::memory_order_acq_rel);
            break;
        case service_op::flush:
            break;
    }
    return rp;
}

namespace {

result<std::unique_ptr<service_conn>> make_service_conn(connection_impl& c, bool target) {
    const std::uint32_t depth = c.config.service_depth;
    if (depth == 0) {
        return fail(errc::not_supported,
                    "the connection has no service_depth: set connection_config::service_depth "
                    "on both sides to use the target's service");
    }
    auto s = std::make_unique<service_conn>();
    s->conn = &c;
    s->target = target;
    s->depth = depth;
    s->storage.assign(depth * (request_room + reply_size), std::byte{0});
    auto mr = memory_region::create(c.dom_handle, s->storage, usage::send | usage::receive);
    if (!mr) {
        return fail(mr.error());
    }
    s->mr.emplace(std::move(*mr));
    for (std::uint32_t i = 0; i < depth; ++i) {
        s->recv_refs.push_back({s.get(), i});
        s->send_refs.push_back({s.get(), i});
    }
    return s;
}

void* desc_of(service_conn& s) {
    return s.mr->impl()->desc;
}

// ---- target side

// A receive that failed because the connection is going away (as opposed to one message
// that did not fit, after which the connection still works).
bool teardown_status(const completion& c) {
    return c.status == errc::canceled || c.status == errc::disconnected;
}

bool target_reply_sent(void* context, completion& c);
bool target_request(void* context, completion& c);

// Posts request receive `i` again (the slot is free: its reply was sent or is lost). The slot's
// receive-queue entry was given back, so only the provider can refuse: the post is tried twice
// (a transient refusal), and after that the connection is taken to be going away.
void repost_request(service_conn& s, std::uint32_t i) {
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (post_internal(*s.conn, queue::recv, s.request_buf(i), request_room, desc_of(s),
                          target_request, &s.recv_refs[i])) {
            return;
        }
    }
}

bool target_request(void* context, completion& c) {
    auto& ref = *static_cast<service_conn::ref*>(context);
    service_conn& s = *ref.owner;
    if (!c.ok() && teardown_status(c)) {
        return false;  // flushed: the connection is going away
    }
    if (c.status == errc::access_denied) {
        // An RDM message from someone but the attached peer: not a request, never answered.
        repost_request(s, ref.index);
        return false;
    }
    service_reply rp;
    // A message that did not fit the receive (c fails with a size error) is refused too.
    auto rq = c.ok() ? decode_request({s.request_buf(ref.index), c.bytes})
                     : result<service_request>(fail(errc::too_large, "oversize request"));
    if (!rq) {
        // A receive that failed for another reason than its size (the provider's error) is
        // answered as such: the request's bytes cannot be trusted.
        const bool provider = !c.ok() && !(c.status == errc::too_large);
        rp.status =
            static_cast<std::uint16_t>(provider ? errc::provider_error : errc::invalid_argument);
        if (c.bytes >= 16) {
            rp.id = get_le(s.request_buf(ref.index) + 8, 8);
            rp.op = static_cast<service_op>(
                std::clamp<int>(static_cast<int>(s.request_buf(ref.index)[5]), 1, 4));
        }
    } else {
        rp = s.core->execute(*rq, s.granted ? &*s.granted : nullptr);
    }
    s.core->requests.fetch_add(1, std::memory_order_relaxed);
    s.answered.fetch_add(1, std::memory_order_relaxed);
    if (rp.status != 0) {
        s.core->refused.fetch_add(1, std::memory_order_relaxed);
    }
    encode(rp, std::span<std::byte, reply_size>(s.reply_buf(ref.index), reply_size));
    // The receive is reposted once the reply is sent (target_reply_sent): the reply buffer is
    // the slot's, and a client never has more than service_depth requests out. A reply that
    // cannot be posted is lost (the client's request completes when the connection ends), but
    // the receive is posted again at once: the service keeps its depth.
    // The post is tried twice (a transient refusal); its record was given back on failure.
    bool sent = false;
    for (int attempt = 0; attempt < 2 && !sent; ++attempt) {
        sent = post_internal(*s.conn, queue::service, s.reply_buf(ref.index), reply_size,
                             desc_of(s), target_reply_sent, &s.send_refs[ref.index])
                   .has_value();
    }
    if (!sent) {
        s.core->refused.fetch_add(rp.status == 0 ? 1 : 0, std::memory_order_relaxed);
        repost_request(s, ref.index);
    } else {
        const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
        s.reply_since[ref.index].store(now == 0 ? 1 : now, std::memory_order_relaxed);
    }
    return false;
}

bool target_reply_sent(void* context, completion& c) {
    auto& ref = *static_cast<service_conn::ref*>(context);
    service_conn& s = *ref.owner;
    s.reply_since[ref.index].store(0, std::memory_order_relaxed);
    // A reply that failed (other than by the connection going away) gives its slot back too.
    if (c.ok() || !teardown_status(c)) {
        repost_request(s, ref.index);
    }
    return false;
}

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
bool deliver(service_conn& s, std::uint32_t i, completion& c, std::unique_lock<std::mutex>& lock) {
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
        const bool seen = hook(hook_context, c);
        lock.lock();
        return seen;
    }
    if (callback != nullptr) {
        lock.unlock();
        run_callback(callback, c, &s.conn->ops);  // after the CQ reader's lock (ops/done.hpp)
        lock.lock();
        return false;
    }
    return report;
}

bool client_reply(void* context, completion& c);

bool client_sent(void* context, completion& c) {
    auto& ref = *static_cast<service_conn::ref*>(context);
    service_conn& s = *ref.owner;
    std::unique_lock lock(s.mu);
    service_conn::slot& sl = s.slots[ref.index];
    if (!sl.delivered && (!c.ok() || s.dead)) {
        // Failed, or sent into a connection that is gone: no reply will come.
        if (c.ok()) {
            c.status = make_error_code(errc::disconnected);
        } else if (sl.expired) {
            c.status = make_error_code(errc::timed_out);  // tick() canceled it
        }
        const bool report = deliver(s, ref.index, c, lock);
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
        if (post_internal(*s.conn, queue::recv, s.reply_buf(j), reply_size, desc_of(s),
                          client_reply, &s.recv_refs[j])) {
            return;
        }
    }
    s.dead = true;
}

bool client_reply(void* context, completion& c) {
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
            c.status = make_error_code(errc::timed_out);
            return deliver(s, oldest, c, lock);
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
                return deliver(s, i, c, lock);
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
        ok = i < s.depth && s.slots[i].busy && !s.slots[i].delivered && s.slots[i].id == rp->id &&
             (s.slots[i].kind == service_op::flush) == (rp->op == service_op::flush);
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
            return deliver(s, oldest, c, lock);
        }
    }
    if (!ok) {
        ++s.bad_replies;  // malformed, oversize or not an answer to anything we asked: ignored
        return false;
    }
    service_conn::slot& sl = s.slots[i];
    if (rp->status != 0) {
        c.status = make_error_code(static_cast<errc>(rp->status));
    } else if (sl.result != nullptr) {
        std::memcpy(sl.result, &rp->value, 8);  // both sides are little-endian here
    }
    return deliver(s, i, c, lock);
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
    sc.index_bits = static_cast<unsigned>(std::bit_width(sc.depth));
    sc.slots.resize(sc.depth);
    sc.recv_canceled.assign(sc.depth, false);
    for (std::uint32_t i = sc.depth; i-- > 0;) {
        sc.free_slots.push_back(i);
    }
    // Installed before anything is posted: the receives' records point into it.
    p.svc = std::move(*s);
    for (std::uint32_t j = 0; j < sc.depth; ++j) {
        if (auto r = post_internal(c, queue::recv, sc.reply_buf(j), reply_size, desc_of(sc),
                                   client_reply, &sc.recv_refs[j]);
            !r) {
            return fail(r.error());
        }
    }
    return &sc;
}

namespace {

// Takes a free request slot (caller holds s.mu).
result<std::uint32_t> take_slot(service_conn& s) {
    if (s.dead) {
        return fail(errc::disconnected, "the connection to the target's service is lost");
    }
    if (s.free_slots.empty()) {
        return fail(errc::would_block, "service requests in flight reach service_depth " +
                                           std::to_string(s.depth) + "; reap completions");
    }
    const std::uint32_t i = s.free_slots.back();
    s.free_slots.pop_back();
    ++s.busy;
    s.slots[i].busy = true;
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
        sl.deadline = std::chrono::steady_clock::now() + c.config.service_timeout;
        sl.expired = false;
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
    }
    return r;
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
    {
        std::lock_guard lock(s.mu);
        auto t = take_slot(s);
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
    return send_slot(c, s, i, rq);
}

result<std::uint32_t> reserve_request(connection_impl& c) {
    auto sp = client_side(c);
    if (!sp) {
        return fail(sp.error());
    }
    service_conn& s = **sp;
    std::lock_guard lock(s.mu);
    auto t = take_slot(s);
    if (t) {
        s.slots[*t].reserved = true;
        s.slots[*t].pending = 1;  // release_request settles it
    }
    return t;
}

result<void> hook_request(connection_impl& c, std::uint32_t slot, service_request rq,
                          bool (*hook)(void*, completion&), void* context) {
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
    bool canceled = false;
    std::vector<std::pair<op_record*, bool>> taken;
    for (std::uint32_t i = 0; i < s.depth; ++i) {
        service_conn::slot& sl = s.slots[i];
        if (!sl.busy || !sl.posted || sl.delivered) {
            continue;
        }
        if (sl.deadline > now) {
            next = std::min(next, sl.deadline);
            continue;
        }
        sl.expired = true;
        next =
            std::min(next, now + std::chrono::milliseconds(100));  // looked at again until it ends
        if (!c.ep) {
            continue;  // closed: the close completes it
        }
        if (sl.pending == 2) {
            // Its send is still with the provider: cancel it (client_sent ends the request).
            if (taken.empty()) {
                taken = c.ops.taken();
            }
            for (auto [rec, is_recv] : taken) {
                if (!is_recv && rec->internal == &client_sent &&
                    rec->user_context == &s.send_refs[i]) {
                    canceled = cancel_op(c, rec) || canceled;
                }
            }
        } else {
            ++awaiting_reply;
        }
    }
    // One reply receive canceled per expired request waiting for its reply: the receive's
    // completion ends the oldest of them (client_reply).
    for (std::uint32_t j = 0; j < s.depth && s.recv_cancels < awaiting_reply; ++j) {
        if (s.recv_canceled[j] || !c.ep) {
            continue;
        }
        if (taken.empty()) {
            taken = c.ops.taken();
        }
        for (auto [rec, is_recv] : taken) {
            if (is_recv && rec->user_context == &s.recv_refs[j]) {
                if (cancel_op(c, rec)) {
                    s.recv_canceled[j] = true;
                    ++s.recv_cancels;
                    canceled = true;
                }
                break;
            }
        }
    }
    if (canceled) {
        // The canceled completions come through the CQ's reader: make sure it reads.
        for (cq_impl* q : {c.cq.get(), c.rcq.get()}) {
            if (q != nullptr && q->progress_owned()) {
                q->progress->kick(q);
            }
        }
    }
    return next;
}

std::size_t persist_conn::busy() const noexcept {
    std::lock_guard lock(svc_mu);
    if (!svc || svc->target) {
        return 0;
    }
    std::lock_guard slots(svc->mu);
    return svc->busy;
}

}  // namespace detail

// ---------------------------------------------------------------- public API

target_service::target_service(std::shared_ptr<detail::service_core> core)
    : core_(std::move(core)) {}
target_service::target_service(target_service&&) noexcept = default;
target_service& target_service::operator=(target_service&& o) noexcept {
    if (this != &o) {
        withdraw();
        core_ = std::move(o.core_);
    }
    return *this;
}
target_service::~target_service() {
    withdraw();
}

void target_service::withdraw() noexcept {
    if (!core_) {
        return;
    }
    // Descriptors described from now on no longer claim GPSPM for these regions.
    std::unique_lock lock(core_->mu);
    for (auto& e : core_->regions) {
        if (e.persist != nullptr) {
            const_cast<detail::persistent_impl*>(e.persist)->served.fetch_sub(1);
        }
    }
    core_->regions.clear();  // connections still served refuse requests from now on
}

result<target_service> target_service::create() {
    return target_service(std::make_shared<detail::service_core>());
}

namespace {

result<remote_region> add_region(detail::service_core& core, const memory_region& region,
                                 const detail::persistent_impl* persist) {
    auto whole = region.describe();
    if (!whole) {
        return fail(whole.error());
    }
    std::unique_lock lock(core.mu);
    for (const auto& e : core.regions) {
        if (e.key == whole->key()) {
            return fail(errc::bad_state, "target_service: region already exposed");
        }
    }
    core.regions.push_back(
        {whole->key(), whole->address(), region.memory(), region.usages(), persist});
    return *whole;
}

}  // namespace

result<remote_region> target_service::expose(const persistent_region& region) {
    auto r = add_region(*core_, region.region(), region.impl());
    if (!r) {
        return r;
    }
    region.impl()->served.fetch_add(1);
    return region.describe();
}

result<remote_region> target_service::expose(const memory_region& region) {
    return add_region(*core_, region, nullptr);
}

result<void> target_service::serve(connection& conn) {
    return serve_impl(conn, nullptr);
}

result<void> target_service::serve(connection& conn, std::span<const remote_region> grants) {
    return serve_impl(conn, &grants);
}

result<void> target_service::serve_impl(connection& conn,
                                        const std::span<const remote_region>* grants) {
    if (grants != nullptr) {
        std::shared_lock lock(core_->mu);
        for (const remote_region& g : *grants) {
            if (std::none_of(core_->regions.begin(), core_->regions.end(),
                             [&](const auto& e) { return e.key == g.key(); })) {
                return fail(errc::invalid_argument,
                            "target_service: a granted region is not exposed by this service");
            }
        }
    }
    auto& c = *conn.impl();
    detail::persist_conn& p = detail::persist_of(c);
    std::lock_guard lock(p.svc_mu);
    if (p.svc) {
        return fail(errc::bad_state, p.svc->target
                                         ? "target_service: the connection is already served"
                                         : "target_service: the connection calls a service");
    }
    if (c.config.service_depth == 0) {
        return fail(errc::invalid_argument,
                    "target_service: accept the connection with connection_config::service_depth");
    }
    auto s = detail::make_service_conn(c, true);
    if (!s) {
        return fail(s.error());
    }
    detail::service_conn& sc = **s;
    sc.core = core_;
    sc.reply_since = std::make_unique<std::atomic<std::int64_t>[]>(sc.depth);
    if (grants != nullptr) {
        sc.granted.emplace();
        for (const remote_region& g : *grants) {
            sc.granted->push_back(g.key());
        }
    }
    p.svc = std::move(*s);  // before posting: the receives' records point into it
    for (std::uint32_t j = 0; j < sc.depth; ++j) {
        if (auto r = detail::post_internal(c, detail::queue::recv, sc.request_buf(j),
                                           detail::request_room, detail::desc_of(sc),
                                           detail::target_request, &sc.recv_refs[j]);
            !r) {
            return r;
        }
    }
    return {};
}

std::uint64_t target_service::requests() const noexcept {
    return core_ ? core_->requests.load() : 0;
}
std::uint64_t target_service::requests(const connection& conn) const {
    if (conn.impl() == nullptr) {
        return 0;
    }
    detail::persist_conn& p = detail::persist_of(*conn.impl());
    std::lock_guard lock(p.svc_mu);
    return p.svc && p.svc->target ? p.svc->answered.load(std::memory_order_relaxed) : 0;
}

std::chrono::milliseconds target_service::reply_wait(const connection& conn) const {
    if (conn.impl() == nullptr) {
        return {};
    }
    detail::persist_conn& p = detail::persist_of(*conn.impl());
    std::lock_guard lock(p.svc_mu);
    if (!p.svc || !p.svc->target) {
        return {};
    }
    std::int64_t oldest = 0;
    for (std::uint32_t i = 0; i < p.svc->depth; ++i) {
        const std::int64_t t = p.svc->reply_since[i].load(std::memory_order_relaxed);
        if (t != 0 && (oldest == 0 || t < oldest)) {
            oldest = t;
        }
    }
    if (oldest == 0) {
        return {};
    }
    const auto since =
        std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(oldest));
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 since);
}

std::uint64_t target_service::refused() const noexcept {
    return core_ ? core_->refused.load() : 0;
}

}  // namespace remora

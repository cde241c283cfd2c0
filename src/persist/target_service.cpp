// SPDX-License-Identifier: BSD-3-Clause
// The target service: executing requests against the exposed regions, the target side of a
// connection's service messages (receive a request, answer it), and target_service's API.
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
#include "core/upper.hpp"

namespace remora {
namespace detail {

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
        case service_op::hello:  // answered by target_request, never executed
            break;
    }
    return rp;
}

result<std::unique_ptr<service_conn>> make_service_conn(connection_impl& c, bool target) {
    const std::uint32_t depth = persistence_of(c).service_depth;
    if (depth == 0) {
        return fail(errc::not_supported,
                    "the connection has no service_depth: set persistence_config::service_depth "
                    "on both sides to use the target's service");
    }
    auto s = std::make_unique<service_conn>();
    s->conn = &c;
    s->target = target;
    s->depth = depth;
    s->count = message_slots(depth);
    s->storage.assign(s->count * (request_room + reply_size), std::byte{0});
    auto mr = memory_region::create(c.dom_handle, s->storage, usage::send | usage::receive);
    if (!mr) {
        return fail(mr.error());
    }
    s->mr.emplace(std::move(*mr));
    for (std::uint32_t i = 0; i < s->count; ++i) {
        s->recv_refs.push_back({s.get(), i});
        s->send_refs.push_back({s.get(), i});
    }
    return s;
}

void* desc_of(service_conn& s) {
    return local_desc(*s.mr);
}

// ---- target side

// A receive that failed because the connection is going away (as opposed to one message
// that did not fit, after which the connection still works).
bool teardown_status(const completion& c) {
    return c.status == errc::canceled || c.status == errc::disconnected;
}

namespace {

bool target_reply_sent(void* context, completion& c, callback_sink* /*sink*/);
bool target_request(void* context, completion& c, callback_sink* /*sink*/);

// Posts request receive `i` again (the slot is free: its reply was sent or is lost). The slot's
// receive-queue entry was given back, so only the provider can refuse: the post is tried twice
// (a transient refusal), and after that the connection is taken to be going away.
void repost_request(service_conn& s, std::uint32_t i) {
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (service_recv(s, s.request_buf(i), request_room, target_request, &s.recv_refs[i])) {
            return;
        }
    }
}

bool target_request(void* context, completion& c, callback_sink* /*sink*/) {
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
                std::clamp<int>(static_cast<int>(s.request_buf(ref.index)[5]), 1, 5));
        }
    } else if (rq->op == service_op::hello) {
        // The client asks whether this connection is served: it is (no request of the counts).
        rp.op = service_op::hello;
        rp.id = rq->id;
    } else {
        rp = s.core->execute(*rq, s.granted ? &*s.granted : nullptr);
    }
    if (!rq || rq->op != service_op::hello) {
        s.core->requests.fetch_add(1, std::memory_order_relaxed);
        s.answered.fetch_add(1, std::memory_order_relaxed);
        if (rp.status != 0) {
            s.core->refused.fetch_add(1, std::memory_order_relaxed);
        }
    }
    encode(rp, std::span<std::byte, reply_size>(s.reply_buf(ref.index), reply_size));
    // The receive is reposted once the reply is sent (target_reply_sent): the reply buffer is
    // the slot's, and a client never has more than service_depth requests and its hello out. A
    // reply that cannot be posted is lost (the client's request completes when the connection
    // ends), but the receive is posted again at once: the service keeps its depth.
    // The post is tried twice (a transient refusal); its record was given back on failure.
    bool sent = false;
    for (int attempt = 0; attempt < 2 && !sent; ++attempt) {
        sent = post_internal(*s.conn, queue::service, s.reply_buf(ref.index), reply_size,
                             desc_of(s), target_reply_sent, &s.send_refs[ref.index])
                   .has_value();
    }
    if (!sent) {
        const bool hello = rq && rq->op == service_op::hello;
        s.core->refused.fetch_add(rp.status == 0 && !hello ? 1 : 0, std::memory_order_relaxed);
        repost_request(s, ref.index);
    } else {
        const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
        s.reply_since[ref.index].store(now == 0 ? 1 : now, std::memory_order_relaxed);
    }
    return false;
}

bool target_reply_sent(void* context, completion& c, callback_sink* /*sink*/) {
    auto& ref = *static_cast<service_conn::ref*>(context);
    service_conn& s = *ref.owner;
    s.reply_since[ref.index].store(0, std::memory_order_relaxed);
    // A reply that failed (other than by the connection going away) gives its slot back too.
    if (c.ok() || !teardown_status(c)) {
        repost_request(s, ref.index);
    }
    return false;
}

}  // namespace

}  // namespace detail

// ---------------------------------------------------------------- public API

target_service::target_service(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
target_service::target_service(target_service&&) noexcept = default;
target_service& target_service::operator=(target_service&& o) noexcept {
    if (this != &o) {
        withdraw();
        impl_ = std::move(o.impl_);
    }
    return *this;
}
target_service::~target_service() {
    withdraw();
}

void target_service::withdraw() noexcept {
    if (!impl_) {
        return;
    }
    detail::service_core& core = *detail::impl_of(*this);
    // Descriptors described from now on no longer claim GPSPM for these regions.
    std::unique_lock lock(core.mu);
    for (auto& e : core.regions) {
        if (e.persist != nullptr) {
            const_cast<detail::persistent_impl*>(e.persist)->served.fetch_sub(1);
        }
    }
    core.regions.clear();  // connections still served refuse requests from now on
}

result<target_service> target_service::create() {
    return internal_access::wrap<target_service>(std::make_shared<detail::service_core>());
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
    auto r = add_region(*detail::impl_of(*this), region.region(), detail::impl_of(region));
    if (!r) {
        return r;
    }
    detail::impl_of(region)->served.fetch_add(1);
    return region.describe();
}

result<remote_region> target_service::expose(const memory_region& region) {
    return add_region(*detail::impl_of(*this), region, nullptr);
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
        const detail::service_core& core = *detail::impl_of(*this);
        std::shared_lock lock(core.mu);
        for (const remote_region& g : *grants) {
            if (std::none_of(core.regions.begin(), core.regions.end(),
                             [&](const auto& e) { return e.key == g.key(); })) {
                return fail(errc::invalid_argument,
                            "target_service: a granted region is not exposed by this service");
            }
        }
    }
    auto& c = *detail::impl_of(conn);
    detail::persist_conn& p = detail::persist_of(c);
    std::lock_guard lock(p.svc_mu);
    if (p.svc) {
        return fail(errc::bad_state, p.svc->target
                                         ? "target_service: the connection is already served"
                                         : "target_service: the connection calls a service");
    }
    if (detail::persistence_of(c).service_depth == 0) {
        return fail(errc::invalid_argument,
                    "target_service: accept the connection with persistence_config::service_depth");
    }
    auto s = detail::make_service_conn(c, true);
    if (!s) {
        return fail(s.error());
    }
    detail::service_conn& sc = **s;
    sc.core = detail::shared_impl_of(*this);
    sc.reply_since = std::make_unique<std::atomic<std::int64_t>[]>(sc.count);
    if (grants != nullptr) {
        sc.granted.emplace();
        for (const remote_region& g : *grants) {
            sc.granted->push_back(g.key());
        }
    }
    p.svc = std::move(*s);  // before posting: the receives' records point into it
    for (std::uint32_t j = 0; j < sc.count; ++j) {  // the requests' and the client's hello
        if (auto r = detail::service_recv(sc, sc.request_buf(j), detail::request_room,
                                          detail::target_request, &sc.recv_refs[j]);
            !r) {
            return r;
        }
    }
    return {};
}

std::uint64_t target_service::requests() const noexcept {
    return impl_ ? detail::impl_of(*this)->requests.load() : 0;
}
std::uint64_t target_service::requests(const connection& conn) const {
    if (detail::impl_of(conn) == nullptr) {
        return 0;
    }
    detail::persist_conn& p = detail::persist_of(*detail::impl_of(conn));
    std::lock_guard lock(p.svc_mu);
    return p.svc && p.svc->target ? p.svc->answered.load(std::memory_order_relaxed) : 0;
}

std::chrono::milliseconds target_service::reply_wait(const connection& conn) const {
    if (detail::impl_of(conn) == nullptr) {
        return {};
    }
    detail::persist_conn& p = detail::persist_of(*detail::impl_of(conn));
    std::lock_guard lock(p.svc_mu);
    if (!p.svc || !p.svc->target) {
        return {};
    }
    std::int64_t oldest = 0;
    for (std::uint32_t i = 0; i < p.svc->count; ++i) {
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
    return impl_ ? detail::impl_of(*this)->refused.load() : 0;
}

}  // namespace remora

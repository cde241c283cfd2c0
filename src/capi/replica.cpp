// SPDX-License-Identifier: BSD-3-Clause
// src/capi/replica.cpp — the C API's replica set (remora_replica.h) over remora::replica_set.
//
// A write's C callback and context travel in a record allocated at the post and carried as the
// C++ context; the record is freed by the trampoline that calls the callback (the set runs each
// callback of a posted write exactly once, its destructor included), or at once when the post is
// refused. The set's events reach the C function through the handle (remora_replica_set in
// capi.hpp).
#include <array>
#include <vector>

#include <remora/replica_set.hpp>

#include "capi.hpp"

using namespace remora::capi;

static_assert(REMORA_MAX_REPLICAS == remora::max_replicas);
static_assert(REMORA_REPLICA_CATCHING_UP == static_cast<int>(remora::replica_state::catching_up));
static_assert(REMORA_REPLICA_DROPPED == static_cast<int>(remora::replica_state::dropped));
static_assert(REMORA_REPLICA_FAILED == static_cast<int>(remora::replica_outcome::failed));
static_assert(REMORA_REPLICA_DURABLE == static_cast<int>(remora::replica_outcome::durable));
static_assert(REMORA_REPLICA_PENDING == static_cast<int>(remora::replica_outcome::pending));
static_assert(REMORA_REPLICA_EVENT_QUORUM_REGAINED ==
              static_cast<int>(remora::replica_event_kind::quorum_regained));
static_assert(REMORA_REPLICA_EVENT_QUORUM_LOST ==
              static_cast<int>(remora::replica_event_kind::quorum_lost));
static_assert(REMORA_REPLICA_EVENT_REJOINED ==
              static_cast<int>(remora::replica_event_kind::rejoined));

namespace {

// A write's C callback and the write's context.
struct replica_callback_record {
    remora_replica_completion_cb fn;
    void* ctx;
};

void replica_completion_to_c(const remora::replica_completion& in,
                             remora_replica_completion& out) noexcept {
    out.status = code_of(in.status);
    out.context = in.context;
    out.offset = in.offset;
    out.length = in.length;
    out.durable = in.durable;
    out.replicas = in.replicas;
    for (std::size_t m = 0; m < remora::max_replicas; ++m) {
        out.outcome[m] = static_cast<int>(in.outcome[m]);
    }
}

void replica_completion_trampoline(const remora::replica_completion& c) noexcept {
    auto* rec = static_cast<replica_callback_record*>(c.context);
    remora_replica_completion out{};
    replica_completion_to_c(c, out);
    out.context = rec->ctx;
    const remora_replica_completion_cb fn = rec->fn;
    delete rec;
    fn(&out);
}

void replica_event_trampoline(const remora::replica_event& e) noexcept {
    auto* h = static_cast<remora_replica_set*>(e.context);
    const remora_replica_event out{static_cast<int>(e.kind), e.index, code_of(e.status),
                                   h->event_context};
    h->on_event(&out);
}

// The C configuration as the C++ one (0 fields keep the defaults); the event function goes to
// the handle `h`.
int replica_set_config_of(const char* fn, const remora_replica_set_config* cfg,
                          remora_replica_set& h, remora::replica_set_config& out) {
    remora_replica_set_config c;
    if (int rc = load_cfg(fn, "remora_replica_set_config", cfg, c)) {
        return rc;
    }
    out = {};
    out.quorum = c.quorum;
    if (c.depth != 0) {
        out.depth = c.depth;
    }
    if (int rc = flush_options_of(fn, c.flush_type, c.flush_method, out.how)) {
        return rc;
    }
    if (c.behind_limit_ms != 0) {
        out.behind_limit = std::chrono::milliseconds(c.behind_limit_ms);
    }
    if (c.copy_chunk != 0) {
        out.copy_chunk = c.copy_chunk;
    }
    if (c.on_event != nullptr) {
        h.on_event = c.on_event;
        h.event_context = c.event_context;
        out.on_event = replica_event_trampoline;
        out.event_context = &h;
    }
    return 0;
}

// REMORA_E_INVALID for an index that names no member.
int replica_member_index(const char* fn, const remora_replica_set& h, size_t index) {
    const std::size_t n = h.s->size();
    if (index >= n) {
        return fail(
            REMORA_E_INVALID, fn,
            "no member " + std::to_string(index) + " (the set has " + std::to_string(n) + ")");
    }
    return 0;
}

}  // namespace

extern "C" {

REMORA_API int remora_replica_set_create(const struct remora_replica* members, size_t n,
                                         const struct remora_replica_set_config* cfg,
                                         remora_replica_set** set) {
    static constexpr const char* fn = "remora_replica_set_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, set);
        if (n != 0) {
            REMORA_CAPI_NOT_NULL(fn, members);
        }
        if (n > REMORA_MAX_REPLICAS) {
            return fail(REMORA_E_INVALID, fn,
                        std::to_string(n) + " members, more than REMORA_MAX_REPLICAS (" +
                            std::to_string(REMORA_MAX_REPLICAS) + ")");
        }
        std::vector<remora::replica> m(n);
        for (size_t i = 0; i < n; ++i) {
            if (members[i].conn == nullptr || members[i].region == nullptr) {
                return fail(REMORA_E_INVALID, fn,
                            "members[" + std::to_string(i) + "]." +
                                (members[i].conn == nullptr ? "conn" : "region") + " is NULL");
            }
            m[i] = {&members[i].conn->c, members[i].region->r};
        }
        auto h = std::make_unique<remora_replica_set>();
        remora::replica_set_config rc;
        if (int r = replica_set_config_of(fn, cfg, *h, rc)) {
            return r;
        }
        auto r = remora::replica_set::create(m, rc);
        if (!r) {
            return fail(r.error(), fn);
        }
        h->s.emplace(std::move(*r));
        *set = h.release();
        return 0;
    });
}

REMORA_API void remora_replica_set_delete(remora_replica_set* set) {
    guarded_void([&] { delete set; });
}

REMORA_API int remora_replica_set_write(remora_replica_set* set, uint64_t offset,
                                        const remora_memory_region* src, size_t src_offset,
                                        size_t len, void* context,
                                        remora_replica_completion_cb callback, int park_ms) {
    static constexpr const char* fn = "remora_replica_set_write";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, set);
        REMORA_CAPI_NOT_NULL(fn, src);
        if (park_ms < 0) {
            return fail(REMORA_E_INVALID, fn,
                        "park_ms " + std::to_string(park_ms) + " is negative (0: do not park)");
        }
        remora::replica_options o;
        o.context = context;
        if (park_ms == REMORA_NO_DEADLINE) {
            o.park_until = std::chrono::steady_clock::time_point::max();
        } else if (park_ms > 0) {
            o.park_until = std::chrono::steady_clock::now() + ms(park_ms);
        }
        std::unique_ptr<replica_callback_record> rec;
        if (callback != nullptr) {
            rec.reset(new replica_callback_record{callback, context});
            o.context = rec.get();
            o.callback = replica_completion_trampoline;
        }
        auto r = set->s->write(offset, *mr_of(src), src_offset, len, o);
        if (!r) {
            return fail(r.error(), fn);  // refused: the callback never runs, `rec` goes
        }
        static_cast<void>(rec.release());  // the trampoline frees it
        return 0;
    });
}

REMORA_API int remora_replica_set_poll(remora_replica_set* set,
                                       struct remora_replica_completion* out, size_t max,
                                       size_t* n) {
    static constexpr const char* fn = "remora_replica_set_poll";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, set);
        REMORA_CAPI_NOT_NULL(fn, out);
        REMORA_CAPI_NOT_NULL(fn, n);
        std::array<remora::replica_completion, 16> buf;
        std::size_t got = 0;
        while (got < max) {
            const std::size_t want = std::min(buf.size(), max - got);
            const std::size_t k = set->s->poll(std::span(buf.data(), want));
            for (std::size_t i = 0; i < k; ++i) {
                replica_completion_to_c(buf[i], out[got + i]);
            }
            got += k;
            if (k < want) {
                break;
            }
        }
        *n = got;
        return 0;
    });
}

REMORA_API int remora_replica_set_wait(remora_replica_set* set, int timeout_ms) {
    static constexpr const char* fn = "remora_replica_set_wait";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, set);
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        if (!set->s->wait(ms(timeout_ms))) {
            return fail(REMORA_E_TIMED_OUT, fn,
                        "no completion to poll within " + std::to_string(timeout_ms) + " ms");
        }
        return 0;
    });
}

REMORA_API int remora_replica_set_drain(remora_replica_set* set, int timeout_ms) {
    static constexpr const char* fn = "remora_replica_set_drain";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, set);
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        return done(fn, set->s->drain(ms(timeout_ms)));
    });
}

REMORA_API int remora_replica_set_drop(remora_replica_set* set, size_t index) {
    static constexpr const char* fn = "remora_replica_set_drop";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, set);
        return done(fn, set->s->drop(index));
    });
}

REMORA_API int remora_replica_set_rejoin(remora_replica_set* set, size_t index,
                                         remora_connection* conn,
                                         const remora_remote_region* region, bool whole) {
    static constexpr const char* fn = "remora_replica_set_rejoin";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, set);
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, region);
        return done(fn, set->s->rejoin(index, conn->c, region->r, {.whole = whole}));
    });
}

REMORA_API int remora_replica_set_state(const remora_replica_set* set, size_t index, int* state) {
    static constexpr const char* fn = "remora_replica_set_state";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, set);
        REMORA_CAPI_NOT_NULL(fn, state);
        if (int rc = replica_member_index(fn, *set, index)) {
            return rc;
        }
        *state = static_cast<int>(set->s->state(index));
        return 0;
    });
}

REMORA_API int remora_replica_set_size(const remora_replica_set* set, size_t* n) {
    return REMORA_CAPI_GET("remora_replica_set_size", set, n, set->s->size());
}

REMORA_API int remora_replica_set_live(const remora_replica_set* set, size_t* n) {
    return REMORA_CAPI_GET("remora_replica_set_live", set, n, set->s->live());
}

REMORA_API int remora_replica_set_quorum(const remora_replica_set* set, uint32_t* quorum) {
    return REMORA_CAPI_GET("remora_replica_set_quorum", set, quorum, set->s->quorum());
}

REMORA_API int remora_replica_set_range(const remora_replica_set* set, uint64_t* bytes) {
    return REMORA_CAPI_GET("remora_replica_set_range", set, bytes, set->s->range());
}

REMORA_API int remora_replica_set_in_flight(const remora_replica_set* set, size_t* n) {
    return REMORA_CAPI_GET("remora_replica_set_in_flight", set, n, set->s->in_flight());
}

REMORA_API int remora_replica_set_pending(const remora_replica_set* set, size_t index, size_t* n) {
    static constexpr const char* fn = "remora_replica_set_pending";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, set);
        REMORA_CAPI_NOT_NULL(fn, n);
        if (int rc = replica_member_index(fn, *set, index)) {
            return rc;
        }
        *n = set->s->pending(index);
        return 0;
    });
}

REMORA_API int remora_replica_set_missing(const remora_replica_set* set, size_t index,
                                          uint64_t* bytes) {
    static constexpr const char* fn = "remora_replica_set_missing";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, set);
        REMORA_CAPI_NOT_NULL(fn, bytes);
        if (int rc = replica_member_index(fn, *set, index)) {
            return rc;
        }
        *bytes = set->s->missing(index);
        return 0;
    });
}

}  // extern "C"

// SPDX-License-Identifier: BSD-3-Clause
// src/capi/receive.cpp — the C API's receive pools and messages, and the registration cache.
#include <vector>

#include "capi.hpp"

using namespace remora::capi;

extern "C" {

// ---- receive pools

REMORA_API int remora_receive_pool_create(remora_domain* dom,
                                          const struct remora_receive_pool_config* cfg,
                                          remora_receive_pool** pool) {
    static constexpr const char* fn = "remora_receive_pool_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, pool);
        remora_receive_pool_config c;
        if (int rc = load_cfg(fn, "remora_receive_pool_config", cfg, c)) {
            return rc;
        }
        remora::receive_pool_config rc;
        if (c.buffers != 0) {
            rc.buffers = c.buffers;
        }
        if (c.buffer_size != 0) {
            rc.buffer_size = c.buffer_size;
        }
        if (c.per_connection != 0) {
            rc.per_connection = c.per_connection;
        }
        return give(fn, remora::receive_pool::create(dom->d, rc), pool);
    });
}

REMORA_API void remora_receive_pool_delete(remora_receive_pool* pool) {
    guarded_void([&] { delete pool; });
}

REMORA_API int remora_receive_pool_attach(remora_receive_pool* pool, remora_connection* conn) {
    static constexpr const char* fn = "remora_receive_pool_attach";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, pool);
        REMORA_CAPI_NOT_NULL(fn, conn);
        auto r = pool->p.attach(conn->c);
        return r ? 0 : fail(r.error(), fn);
    });
}

REMORA_API int remora_receive_pool_detach(remora_receive_pool* pool, remora_connection* conn) {
    static constexpr const char* fn = "remora_receive_pool_detach";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, pool);
        REMORA_CAPI_NOT_NULL(fn, conn);
        pool->p.detach(conn->c);
        return 0;
    });
}

REMORA_API int remora_receive_pool_next(remora_receive_pool* pool, int timeout_ms,
                                        remora_message** msg) {
    static constexpr const char* fn = "remora_receive_pool_next";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, pool);
        REMORA_CAPI_NOT_NULL(fn, msg);
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        auto handle = std::make_unique<remora_message>();  // before taking: NOMEM takes nothing
        auto m = pool->p.next(ms(timeout_ms));
        if (!m) {
            return fail(m.error(), fn);
        }
        handle->m = std::move(*m);
        *msg = handle.release();
        return 0;
    });
}

REMORA_API int remora_receive_pool_stats(const remora_receive_pool* pool,
                                         struct remora_receive_pool_stats* stats) {
    static constexpr const char* fn = "remora_receive_pool_stats";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, pool);
        REMORA_CAPI_NOT_NULL(fn, stats);
        const remora::receive_pool_stats s = pool->p.stats();
        *stats = {s.buffers,  s.posted,      s.held,     s.max_held,
                  s.owed,     s.connections, s.received, s.backpressure_events,
                  s.reclaimed};
        return 0;
    });
}

REMORA_API int remora_message_data(const remora_message* msg, const void** data, size_t* len) {
    static constexpr const char* fn = "remora_message_data";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, msg);
        REMORA_CAPI_NOT_NULL(fn, data);
        REMORA_CAPI_NOT_NULL(fn, len);
        const auto d = msg->m.data();
        *data = d.data();
        *len = d.size();
        return 0;
    });
}

REMORA_API int remora_message_info(const remora_message* msg, uint64_t* tag, uint64_t* imm,
                                   bool* has_imm) {
    static constexpr const char* fn = "remora_message_info";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, msg);
        if (tag != nullptr) {
            *tag = msg->m.tag();
        }
        if (imm != nullptr) {
            *imm = msg->m.imm();
        }
        if (has_imm != nullptr) {
            *has_imm = msg->m.has_imm();
        }
        return 0;
    });
}

REMORA_API void remora_message_delete(remora_message* msg) {
    guarded_void([&] { delete msg; });
}

// ---- registration cache

REMORA_API int remora_registration_cache_create(remora_domain* dom, size_t capacity,
                                                remora_registration_cache** cache) {
    static constexpr const char* fn = "remora_registration_cache_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, cache);
        return give(fn, remora::registration_cache::create(dom->d, capacity == 0 ? 64 : capacity),
                    cache);
    });
}

REMORA_API void remora_registration_cache_delete(remora_registration_cache* cache) {
    guarded_void([&] { delete cache; });
}

REMORA_API int remora_registration_cache_get(remora_registration_cache* cache, void* addr,
                                             size_t len, unsigned usage,
                                             remora_cached_region** region) {
    static constexpr const char* fn = "remora_registration_cache_get";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, cache);
        REMORA_CAPI_NOT_NULL(fn, addr);
        REMORA_CAPI_NOT_NULL(fn, region);
        if (usage == 0 || (usage & ~static_cast<unsigned>(REMORA_USAGE_ALL)) != 0) {
            return fail(REMORA_E_INVALID, fn,
                        "usage " + std::to_string(usage) +
                            " must be a nonzero combination of REMORA_USAGE_* bits");
        }
        if (len == 0) {
            return fail(REMORA_E_INVALID, fn, "len is 0");
        }
        return give(fn,
                    cache->c.get(std::span<std::byte>(static_cast<std::byte*>(addr), len),
                                 static_cast<remora::usage>(usage)),
                    region);
    });
}

REMORA_API int remora_registration_cache_invalidate(remora_registration_cache* cache,
                                                    const void* addr, size_t len) {
    static constexpr const char* fn = "remora_registration_cache_invalidate";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, cache);
        if (int rc = check_bytes(fn, "addr", addr, len)) {
            return rc;
        }
        cache->c.invalidate(bytes(addr, len));
        return 0;
    });
}

REMORA_API int remora_registration_cache_stats(const remora_registration_cache* cache,
                                               struct remora_registration_cache_stats* stats) {
    static constexpr const char* fn = "remora_registration_cache_stats";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, cache);
        REMORA_CAPI_NOT_NULL(fn, stats);
        const remora::registration_cache_stats s = cache->c.stats();
        *stats = {s.hits, s.misses, s.evictions, s.entries};
        return 0;
    });
}

REMORA_API int remora_cached_region_region(const remora_cached_region* cached,
                                           const remora_memory_region** region, size_t* offset) {
    static constexpr const char* fn = "remora_cached_region_region";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, cached);
        REMORA_CAPI_NOT_NULL(fn, region);
        REMORA_CAPI_NOT_NULL(fn, offset);
        *region = reinterpret_cast<const remora_memory_region*>(&cached->r.region());
        *offset = cached->r.offset();
        return 0;
    });
}

REMORA_API void remora_cached_region_delete(remora_cached_region* cached) {
    guarded_void([&] { delete cached; });
}

}  // extern "C"

namespace {

// remora_gather_write_cached (`read` false: [local, + len) is the source) and
// remora_scatter_read_cached (`read` true: it is the destination).
int cached_multi(const char* fn, remora_connection* conn, const struct remora_remote_segment* segs,
                 size_t n, void* local, size_t len, remora_registration_cache* cache,
                 const struct remora_op_options* opts, bool read) {
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        if (local == nullptr) {
            return fail(REMORA_E_INVALID, fn, read ? "dst is NULL" : "src is NULL");
        }
        REMORA_CAPI_NOT_NULL(fn, cache);
        if (n != 0 && segs == nullptr) {
            return fail(REMORA_E_INVALID, fn, read ? "src is NULL" : "dst is NULL");
        }
        const auto parts = segments_of(segs, n);
        remora::op_options o;
        if (int rc = op_options_of(fn, opts, *conn, o)) {
            return rc;
        }
        const std::span<std::byte> memory(static_cast<std::byte*>(local), len);
        auto r = read ? remora::scatter_read(conn->c, parts, memory, cache->c, o)
                      : remora::gather_write(conn->c, parts, memory, cache->c, o);
        if (!r) {
            release_op_callback(o);
            return fail(r.error(), fn);
        }
        return 0;
    });
}

}  // namespace

extern "C" {

REMORA_API int remora_gather_write_cached(remora_connection* conn,
                                          const struct remora_remote_segment* dst, size_t n,
                                          void* src, size_t len, remora_registration_cache* cache,
                                          const struct remora_op_options* opts) {
    return cached_multi("remora_gather_write_cached", conn, dst, n, src, len, cache, opts, false);
}

REMORA_API int remora_scatter_read_cached(remora_connection* conn,
                                          const struct remora_remote_segment* src, size_t n,
                                          void* dst, size_t len, remora_registration_cache* cache,
                                          const struct remora_op_options* opts) {
    return cached_multi("remora_scatter_read_cached", conn, src, n, dst, len, cache, opts, true);
}

}  // extern "C"

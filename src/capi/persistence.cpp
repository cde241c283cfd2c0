// SPDX-License-Identifier: BSD-3-Clause
// src/capi/persistence.cpp — the C API's persistence verbs over a connection (remora_persist.h):
// its configuration, flush, and atomics native or through the target's service.
#include <vector>

#include "capi.hpp"

using namespace remora::capi;

namespace remora::capi {

int persistence_config_of(const char* fn, const remora_persistence_config* cfg,
                          remora::persistence_config& out) {
    remora_persistence_config c;
    if (int rc = load_cfg(fn, "remora_persistence_config", cfg, c)) {
        return rc;
    }
    out = {};
    out.service_depth = c.service_depth;
    out.message_size = c.message_size;
    if (c.service_timeout_ms != 0) {
        out.service_timeout = std::chrono::milliseconds(c.service_timeout_ms);
    }
    if (c.serve_wait_ms == REMORA_SERVE_WAIT_NONE) {
        out.serve_wait = std::chrono::milliseconds(0);
    } else if (c.serve_wait_ms != 0) {
        out.serve_wait = std::chrono::milliseconds(c.serve_wait_ms);
    }
    return 0;
}

}  // namespace remora::capi

extern "C" {

REMORA_API int remora_atomic_write(remora_connection* conn, const remora_remote_region* dst,
                                   uint64_t dst_offset, uint64_t value, unsigned flags,
                                   void* context) {
    static constexpr const char* fn = "remora_atomic_write";
    return guarded(fn, [&] {
        REMORA_CAPI_OP_PROLOGUE(fn);
        REMORA_CAPI_NOT_NULL(fn, dst);
        return done(fn, remora::atomic_write(conn->c, dst->r, dst_offset, value, opts));
    });
}

REMORA_API int remora_compare_swap(remora_connection* conn, const remora_remote_region* dst,
                                   uint64_t dst_offset, uint64_t expected, uint64_t desired,
                                   const remora_memory_region* result, size_t result_offset,
                                   unsigned flags, void* context) {
    static constexpr const char* fn = "remora_compare_swap";
    return guarded(fn, [&] {
        REMORA_CAPI_OP_PROLOGUE(fn);
        REMORA_CAPI_NOT_NULL(fn, dst);
        REMORA_CAPI_NOT_NULL(fn, result);
        return done(fn, remora::compare_swap(conn->c, dst->r, dst_offset, expected, desired,
                                             *mr_of(result), result_offset, opts));
    });
}

REMORA_API int remora_fetch_add(remora_connection* conn, const remora_remote_region* dst,
                                uint64_t dst_offset, uint64_t addend,
                                const remora_memory_region* result, size_t result_offset,
                                unsigned flags, void* context) {
    static constexpr const char* fn = "remora_fetch_add";
    return guarded(fn, [&] {
        REMORA_CAPI_OP_PROLOGUE(fn);
        REMORA_CAPI_NOT_NULL(fn, dst);
        REMORA_CAPI_NOT_NULL(fn, result);
        return done(fn, remora::fetch_add(conn->c, dst->r, dst_offset, addend, *mr_of(result),
                                          result_offset, opts));
    });
}

}  // extern "C"

namespace remora::capi {

int flush_options_of(const char* fn, int type, int method, remora::flush_options& out) {
    switch (type) {
        case REMORA_FLUSH_STRONGEST:
            out.type = remora::flush_type::strongest;
            break;
        case REMORA_FLUSH_VISIBILITY:
            out.type = remora::flush_type::visibility;
            break;
        case REMORA_FLUSH_PERSISTENCE:
            out.type = remora::flush_type::persistence;
            break;
        default:
            return fail(REMORA_E_INVALID, fn,
                        "flush type " + std::to_string(type) + " is not a REMORA_FLUSH_* type");
    }
    switch (method) {
        case REMORA_FLUSH_AUTOMATIC:
            out.method = remora::flush_method::automatic;
            break;
        case REMORA_FLUSH_READ_AFTER_WRITE:
            out.method = remora::flush_method::read_after_write;
            break;
        case REMORA_FLUSH_GPSPM:
            out.method = remora::flush_method::gpspm;
            break;
        default:
            return fail(
                REMORA_E_INVALID, fn,
                "flush method " + std::to_string(method) + " is not a REMORA_FLUSH_* method");
    }
    return 0;
}

}  // namespace remora::capi

extern "C" {

REMORA_API int remora_flush(remora_connection* conn, const remora_remote_region* dst,
                            uint64_t offset, uint64_t len, int type, int method, unsigned flags,
                            void* context) {
    static constexpr const char* fn = "remora_flush";
    return guarded(fn, [&] {
        REMORA_CAPI_OP_PROLOGUE(fn);
        REMORA_CAPI_NOT_NULL(fn, dst);
        remora::flush_options how;
        if (int rc = flush_options_of(fn, type, method, how)) {
            return rc;
        }
        return done(fn, remora::flush(conn->c, dst->r, offset, len, how, opts));
    });
}

REMORA_API int remora_flush_method_for(const remora_connection* conn,
                                       const remora_remote_region* dst, int type, int method,
                                       int* chosen) {
    static constexpr const char* fn = "remora_flush_method_for";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, dst);
        REMORA_CAPI_NOT_NULL(fn, chosen);
        remora::flush_options how;
        if (int rc = flush_options_of(fn, type, method, how)) {
            return rc;
        }
        auto m = remora::flush_method_for(conn->c, dst->r, how);
        if (!m) {
            return fail(m.error(), fn);
        }
        *chosen =
            *m == remora::flush_method::gpspm ? REMORA_FLUSH_GPSPM : REMORA_FLUSH_READ_AFTER_WRITE;
        return 0;
    });
}

}  // extern "C"

extern "C" {

REMORA_API int remora_publish(remora_connection* conn, const struct remora_remote_segment* data,
                              size_t n, const remora_memory_region* src, size_t src_offset,
                              const remora_remote_region* flag, uint64_t flag_offset,
                              uint64_t value, int type, int method,
                              const struct remora_op_options* opts) {
    static constexpr const char* fn = "remora_publish";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, src);
        REMORA_CAPI_NOT_NULL(fn, flag);
        if (n != 0) {
            REMORA_CAPI_NOT_NULL(fn, data);
        }
        remora::flush_options how;
        if (int rc = flush_options_of(fn, type, method, how)) {
            return rc;
        }
        std::vector<remora::remote_segment> segs(n);
        for (size_t i = 0; i < n; ++i) {
            segs[i] = {data[i].region == nullptr ? nullptr : &data[i].region->r, data[i].offset,
                       data[i].length};
        }
        remora::op_options o;
        if (int rc = op_options_of(fn, opts, *conn, o)) {
            return rc;
        }
        auto r = remora::publish(conn->c, segs, *mr_of(src), src_offset, flag->r, flag_offset,
                                 value, how, o);
        if (!r) {
            release_op_callback(o);
            return fail(r.error(), fn);
        }
        return 0;
    });
}

}  // extern "C"

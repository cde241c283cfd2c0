// SPDX-License-Identifier: BSD-3-Clause
// src/capi/completions.cpp — the C API's completion queues, shared CQs and channels.
#include <array>
#include <memory>
#include <type_traits>

#include "capi.hpp"

using namespace remora::capi;

extern "C" {

REMORA_API int remora_completion_queue_poll(remora_completion_queue* cq,
                                            struct remora_completion* out, size_t max, size_t* n) {
    static constexpr const char* fn = "remora_completion_queue_poll";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, cq);
        REMORA_CAPI_NOT_NULL(fn, out);
        REMORA_CAPI_NOT_NULL(fn, n);
        // Constructs only the `want` entries asked for: value-initialising all 32 on every poll
        // (2 KiB) was most of an empty poll's cost in a busy-polling loop (the fio engine's).
        alignas(remora::completion) std::byte raw[32 * sizeof(remora::completion)];
        const std::size_t want = std::min<std::size_t>(max, 32);
        auto* buf = reinterpret_cast<remora::completion*>(raw);
        std::uninitialized_value_construct_n(buf, want);
        static_assert(std::is_trivially_destructible_v<remora::completion>);
        auto r = cq_of(cq)->poll(std::span(buf, want));
        if (!r) {
            return fail(r.error(), fn);
        }
        for (std::size_t i = 0; i < *r; ++i) {
            to_c(buf[i], out[i]);
        }
        *n = *r;
        return 0;
    });
}

REMORA_API int remora_completion_queue_wait(remora_completion_queue* cq, int timeout_ms,
                                            size_t* ready) {
    static constexpr const char* fn = "remora_completion_queue_wait";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, cq);
        REMORA_CAPI_NOT_NULL(fn, ready);
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        auto r = cq_of(cq)->wait(ms(timeout_ms));
        if (!r) {
            return fail(r.error(), fn);
        }
        *ready = *r;
        return 0;
    });
}

REMORA_API int remora_completion_queue_next(remora_completion_queue* cq, int timeout_ms,
                                            struct remora_completion* out) {
    static constexpr const char* fn = "remora_completion_queue_next";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, cq);
        REMORA_CAPI_NOT_NULL(fn, out);
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        auto r = cq_of(cq)->next(ms(timeout_ms));
        if (!r) {
            return fail(r.error(), fn);
        }
        to_c(*r, *out);
        return 0;
    });
}

REMORA_API int remora_completion_queue_fd(const remora_completion_queue* cq, int* fd) {
    return REMORA_CAPI_GET("remora_completion_queue_fd", cq, fd, cq_of(cq)->fd());
}

REMORA_API int remora_completion_queue_arm(remora_completion_queue* cq, bool* armed) {
    static constexpr const char* fn = "remora_completion_queue_arm";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, cq);
        REMORA_CAPI_NOT_NULL(fn, armed);
        auto r = cq_of(cq)->arm();
        if (!r) {
            return fail(r.error(), fn);
        }
        *armed = *r;
        return 0;
    });
}

REMORA_API int remora_completion_queue_info(const remora_completion_queue* cq, int* kind,
                                            uint64_t* tag) {
    static constexpr const char* fn = "remora_completion_queue_info";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, cq);
        if (kind != nullptr) {
            *kind = static_cast<int>(cq_of(cq)->kind());
        }
        if (tag != nullptr) {
            *tag = cq_of(cq)->tag();
        }
        return 0;
    });
}

REMORA_API int remora_completion_queue_connection(const remora_completion_queue* cq,
                                                  remora_connection** conn) {
    return REMORA_CAPI_GET("remora_completion_queue_connection", cq, conn,
                           conn_of(cq_of(cq)->connection()));
}

// ---- shared CQs

REMORA_API int remora_shared_completion_queue_create(remora_domain* dom,
                                                     const struct remora_shared_cq_config* cfg,
                                                     remora_shared_completion_queue** scq) {
    static constexpr const char* fn = "remora_shared_completion_queue_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, scq);
        remora_shared_cq_config c;
        if (int rc = load_cfg(fn, "remora_shared_cq_config", cfg, c)) {
            return rc;
        }
        remora::shared_cq_config sc;
        if (c.entries != 0) {
            sc.size = c.entries;
        }
        sc.progress_thread = c.progress_thread;
        sc.tag = c.tag;
        return give(fn, remora::shared_completion_queue::create(dom->d, sc), scq);
    });
}

REMORA_API void remora_shared_completion_queue_delete(remora_shared_completion_queue* scq) {
    guarded_void([&] { delete scq; });
}

REMORA_API int remora_shared_completion_queue_queue(const remora_shared_completion_queue* scq,
                                                    remora_completion_queue** cq) {
    return REMORA_CAPI_GET("remora_shared_completion_queue_queue", scq, cq, c_cq(&scq->q.queue()));
}

// ---- channels

REMORA_API int remora_completion_channel_create(remora_completion_channel** ch) {
    static constexpr const char* fn = "remora_completion_channel_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, ch);
        return give(fn, remora::completion_channel::create(), ch);
    });
}

REMORA_API void remora_completion_channel_delete(remora_completion_channel* ch) {
    guarded_void([&] { delete ch; });
}

REMORA_API int remora_completion_channel_fd(const remora_completion_channel* ch, int* fd) {
    return REMORA_CAPI_GET("remora_completion_channel_fd", ch, fd, ch->ch.fd());
}

REMORA_API int remora_completion_channel_wait(remora_completion_channel* ch, int timeout_ms,
                                              struct remora_channel_event* ev) {
    static constexpr const char* fn = "remora_completion_channel_wait";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, ch);
        return wait_event(fn, ch->ch, timeout_ms, ev);
    });
}

}  // extern "C"

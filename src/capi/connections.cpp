// SPDX-License-Identifier: BSD-3-Clause
// src/capi/connections.cpp — the C API's listeners, requests, connections, RDM peers and
// operations.
#include "capi.hpp"

using namespace remora::capi;

namespace remora::capi {

// A C connection configuration as the C++ one (0 fields keep the C++ defaults).
int connection_config_of(const char* fn, const remora_connection_config* cfg,
                         remora::connection_config& out) {
    remora_connection_config c;
    if (int rc = load_cfg(fn, "remora_connection_config", cfg, c)) {
        return rc;
    }
    out = {};
    if (c.sq_size != 0) {
        out.sq_size = c.sq_size;
    }
    if (c.rq_size != 0) {
        out.rq_size = c.rq_size;
    }
    out.cq_size = c.cq_size;
    out.rcq = c.rcq;
    out.rcq_size = c.rcq_size;
    if (c.no_channel && c.channel_shared) {
        return fail(REMORA_E_INVALID, fn, "no_channel and channel_shared contradict each other");
    }
    out.channel = c.channel_shared ? remora::channel_mode::shared
                  : c.no_channel   ? remora::channel_mode::none
                                   : remora::channel_mode::separate;
    if (c.shared_channel != nullptr) {
        if (!c.channel_shared) {
            return fail(REMORA_E_INVALID, fn, "shared_channel is set without channel_shared");
        }
        out.shared_channel = c.shared_channel->ch;
    }
    if (c.max_sge != 0) {
        out.max_sge = c.max_sge;
    }
    if (c.connect_timeout_ms != 0) {
        out.connect_timeout = std::chrono::milliseconds(c.connect_timeout_ms);
    }
    out.liveness = std::chrono::milliseconds(c.liveness_ms);
    out.progress_thread = c.progress_thread;
    out.same_host = !c.no_same_host;
    out.tag = c.tag;
    if (c.shared_cq != nullptr) {
        out.shared_cq = c.shared_cq->q;
    }
    if (c.shared_rcq != nullptr) {
        out.shared_rcq = c.shared_rcq->q;
    }
    if (c.signal_every != 0) {
        out.signal_every = c.signal_every;
    }
    if (c.slots != nullptr) {
        out.slots = c.slots->p;
    }
    if (c.bounce != nullptr) {
        out.addons.emplace_back(c.bounce->b);
    }
    if (c.srq != nullptr) {
        out.srq = c.srq->q;
    }
    if (c.persist != nullptr) {
        remora::persistence_config p;
        if (int rc = persistence_config_of(fn, c.persist, p)) {
            return rc;
        }
        out.addons.emplace_back(p);
    }
    return 0;
}

}  // namespace remora::capi

namespace {

int give_span(std::span<const std::byte> s, const void** data, size_t* len) {
    *data = s.empty() ? nullptr : s.data();
    *len = s.size();
    return 0;
}

}  // namespace

extern "C" {

// ---- listener and requests

REMORA_API int remora_listener_create(remora_domain* dom, const char* host, uint16_t port,
                                      remora_listener** lst) {
    static constexpr const char* fn = "remora_listener_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, host);
        REMORA_CAPI_NOT_NULL(fn, lst);
        return give(fn, remora::listener::create(dom->d, host, port), lst);
    });
}

REMORA_API void remora_listener_delete(remora_listener* lst) {
    guarded_void([&] { delete lst; });
}

REMORA_API int remora_listener_port(const remora_listener* lst, uint16_t* port) {
    return REMORA_CAPI_GET("remora_listener_port", lst, port, lst->l.port());
}

REMORA_API int remora_listener_fd(const remora_listener* lst, int* fd) {
    return REMORA_CAPI_GET("remora_listener_fd", lst, fd, lst->l.fd());
}

REMORA_API int remora_listener_get_request(remora_listener* lst, int timeout_ms,
                                           remora_connection_request** req) {
    static constexpr const char* fn = "remora_listener_get_request";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, lst);
        REMORA_CAPI_NOT_NULL(fn, req);
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        return give(fn, lst->l.get_request(ms(timeout_ms)), req);
    });
}

REMORA_API int remora_connection_request_private_data(const remora_connection_request* req,
                                                      const void** data, size_t* len) {
    static constexpr const char* fn = "remora_connection_request_private_data";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, req);
        REMORA_CAPI_NOT_NULL(fn, data);
        REMORA_CAPI_NOT_NULL(fn, len);
        return give_span(req->q.private_data(), data, len);
    });
}

REMORA_API int remora_connection_request_accept(remora_connection_request* req,
                                                const struct remora_connection_config* cfg,
                                                const void* pdata, size_t pdata_len,
                                                remora_connection** conn) {
    static constexpr const char* fn = "remora_connection_request_accept";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, req);
        REMORA_CAPI_NOT_NULL(fn, conn);
        if (int rc = check_bytes(fn, "pdata", pdata, pdata_len)) {
            return rc;
        }
        remora::connection_config cc;
        if (int rc = connection_config_of(fn, cfg, cc)) {
            return rc;
        }
        return give(fn, req->q.accept(cc, bytes(pdata, pdata_len)), conn);
    });
}

REMORA_API int remora_connection_request_accept_async(remora_connection_request* req,
                                                      const struct remora_connection_config* cfg,
                                                      const void* pdata, size_t pdata_len,
                                                      remora_connection** conn) {
    static constexpr const char* fn = "remora_connection_request_accept_async";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, req);
        REMORA_CAPI_NOT_NULL(fn, conn);
        if (int rc = check_bytes(fn, "pdata", pdata, pdata_len)) {
            return rc;
        }
        remora::connection_config cc;
        if (int rc = connection_config_of(fn, cfg, cc)) {
            return rc;
        }
        return give(fn, req->q.accept_async(cc, bytes(pdata, pdata_len)), conn);
    });
}

REMORA_API int remora_connection_request_reject(remora_connection_request* req, const void* pdata,
                                                size_t pdata_len) {
    static constexpr const char* fn = "remora_connection_request_reject";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, req);
        if (int rc = check_bytes(fn, "pdata", pdata, pdata_len)) {
            return rc;
        }
        return done(fn, req->q.reject(bytes(pdata, pdata_len)));
    });
}

REMORA_API void remora_connection_request_delete(remora_connection_request* req) {
    guarded_void([&] { delete req; });
}

// ---- connections

REMORA_API int remora_connect(remora_domain* dom, const char* host, uint16_t port,
                              const struct remora_connection_config* cfg, const void* pdata,
                              size_t pdata_len, remora_connection** conn) {
    static constexpr const char* fn = "remora_connect";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, host);
        REMORA_CAPI_NOT_NULL(fn, conn);
        if (int rc = check_bytes(fn, "pdata", pdata, pdata_len)) {
            return rc;
        }
        remora::connection_config cc;
        if (int rc = connection_config_of(fn, cfg, cc)) {
            return rc;
        }
        return give(
            fn, remora::connection::connect(dom->d, host, port, cc, bytes(pdata, pdata_len)), conn);
    });
}

REMORA_API int remora_connect_async(remora_domain* dom, const char* host, uint16_t port,
                                    const struct remora_connection_config* cfg, const void* pdata,
                                    size_t pdata_len, remora_connection** conn) {
    static constexpr const char* fn = "remora_connect_async";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, host);
        REMORA_CAPI_NOT_NULL(fn, conn);
        if (int rc = check_bytes(fn, "pdata", pdata, pdata_len)) {
            return rc;
        }
        remora::connection_config cc;
        if (int rc = connection_config_of(fn, cfg, cc)) {
            return rc;
        }
        return give(
            fn, remora::connection::connect_async(dom->d, host, port, cc, bytes(pdata, pdata_len)),
            conn);
    });
}

REMORA_API int remora_connection_setup_status(const remora_connection* conn) {
    static constexpr const char* fn = "remora_connection_setup_status";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        return done(fn, conn->c.setup_status());
    });
}

REMORA_API int remora_open_peer(remora_domain* dom, const struct remora_connection_config* cfg,
                                remora_connection** conn) {
    static constexpr const char* fn = "remora_open_peer";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, conn);
        remora::connection_config cc;
        if (int rc = connection_config_of(fn, cfg, cc)) {
            return rc;
        }
        return give(fn, remora::connection::open_peer(dom->d, cc), conn);
    });
}

REMORA_API int remora_connection_local_address(const remora_connection* conn, const void** addr,
                                               size_t* len) {
    static constexpr const char* fn = "remora_connection_local_address";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, addr);
        REMORA_CAPI_NOT_NULL(fn, len);
        return give_span(conn->c.local_address(), addr, len);
    });
}

REMORA_API int remora_connection_attach(remora_connection* conn, const void* addr, size_t len) {
    static constexpr const char* fn = "remora_connection_attach";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, addr);
        return done(fn, conn->c.attach(bytes(addr, len)));
    });
}

REMORA_API int remora_connection_close(remora_connection* conn) {
    static constexpr const char* fn = "remora_connection_close";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        return done(fn, conn->c.close());
    });
}

REMORA_API void remora_connection_delete(remora_connection* conn) {
    guarded_void([&] { delete conn; });
}

REMORA_API int remora_connection_peer_private_data(const remora_connection* conn, const void** data,
                                                   size_t* len) {
    static constexpr const char* fn = "remora_connection_peer_private_data";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, data);
        REMORA_CAPI_NOT_NULL(fn, len);
        return give_span(conn->c.peer_private_data(), data, len);
    });
}

REMORA_API int remora_connection_cq(remora_connection* conn, remora_completion_queue** cq) {
    return REMORA_CAPI_GET("remora_connection_cq", conn, cq, c_cq(&conn->c.cq()));
}

REMORA_API int remora_connection_rcq(remora_connection* conn, remora_completion_queue** rcq) {
    return REMORA_CAPI_GET("remora_connection_rcq", conn, rcq, c_cq(conn->c.rcq()));
}

REMORA_API int remora_connection_wait(remora_connection* conn, int timeout_ms,
                                      struct remora_channel_event* ev) {
    static constexpr const char* fn = "remora_connection_wait";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        return wait_event(fn, conn->c, timeout_ms, ev);
    });
}

REMORA_API int remora_connection_next_event(remora_connection* conn, int timeout_ms, int* event) {
    static constexpr const char* fn = "remora_connection_next_event";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, event);
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        auto e = conn->c.next_event(ms(timeout_ms));
        if (!e) {
            return fail(e.error(), fn);
        }
        *event = static_cast<int>(*e);
        return 0;
    });
}

REMORA_API int remora_connection_event_fd(const remora_connection* conn, int* fd) {
    return REMORA_CAPI_GET("remora_connection_event_fd", conn, fd, conn->c.event_fd());
}

REMORA_API int remora_connection_in_flight(const remora_connection* conn, size_t* n) {
    return REMORA_CAPI_GET("remora_connection_in_flight", conn, n, conn->c.in_flight());
}

REMORA_API int remora_connection_same_host(const remora_connection* conn, bool* on) {
    return REMORA_CAPI_GET("remora_connection_same_host", conn, on, conn->c.same_host());
}

// ---- operations

REMORA_API int remora_write(remora_connection* conn, const remora_remote_region* dst,
                            uint64_t dst_offset, const remora_memory_region* src, size_t src_offset,
                            size_t len, unsigned flags, void* context) {
    static constexpr const char* fn = "remora_write";
    return guarded(fn, [&] {
        REMORA_CAPI_OP_PROLOGUE(fn);
        REMORA_CAPI_NOT_NULL(fn, dst);
        REMORA_CAPI_NOT_NULL(fn, src);
        return done(fn, conn->c.write(dst->r, dst_offset, *mr_of(src), src_offset, len, opts));
    });
}

REMORA_API int remora_write_with_imm(remora_connection* conn, const remora_remote_region* dst,
                                     uint64_t dst_offset, const remora_memory_region* src,
                                     size_t src_offset, size_t len, uint64_t imm, unsigned flags,
                                     void* context) {
    static constexpr const char* fn = "remora_write_with_imm";
    return guarded(fn, [&] {
        REMORA_CAPI_OP_PROLOGUE(fn);
        REMORA_CAPI_NOT_NULL(fn, dst);
        REMORA_CAPI_NOT_NULL(fn, src);
        return done(fn, conn->c.write_with_imm(dst->r, dst_offset, *mr_of(src), src_offset, len,
                                               imm, opts));
    });
}

REMORA_API int remora_read(remora_connection* conn, const remora_memory_region* dst,
                           size_t dst_offset, const remora_remote_region* src, uint64_t src_offset,
                           size_t len, unsigned flags, void* context) {
    static constexpr const char* fn = "remora_read";
    return guarded(fn, [&] {
        REMORA_CAPI_OP_PROLOGUE(fn);
        REMORA_CAPI_NOT_NULL(fn, dst);
        REMORA_CAPI_NOT_NULL(fn, src);
        return done(fn, conn->c.read(*mr_of(dst), dst_offset, src->r, src_offset, len, opts));
    });
}

REMORA_API int remora_send(remora_connection* conn, const remora_memory_region* src, size_t offset,
                           size_t len, unsigned flags, void* context) {
    static constexpr const char* fn = "remora_send";
    return guarded(fn, [&] {
        REMORA_CAPI_OP_PROLOGUE(fn);
        REMORA_CAPI_NOT_NULL(fn, src);
        return done(fn, conn->c.send(*mr_of(src), offset, len, opts));
    });
}

REMORA_API int remora_send_with_imm(remora_connection* conn, const remora_memory_region* src,
                                    size_t offset, size_t len, uint64_t imm, unsigned flags,
                                    void* context) {
    static constexpr const char* fn = "remora_send_with_imm";
    return guarded(fn, [&] {
        REMORA_CAPI_OP_PROLOGUE(fn);
        REMORA_CAPI_NOT_NULL(fn, src);
        return done(fn, conn->c.send_with_imm(*mr_of(src), offset, len, imm, opts));
    });
}

REMORA_API int remora_recv(remora_connection* conn, const remora_memory_region* dst, size_t offset,
                           size_t len, unsigned flags, void* context) {
    static constexpr const char* fn = "remora_recv";
    return guarded(fn, [&] {
        REMORA_CAPI_OP_PROLOGUE(fn);
        REMORA_CAPI_NOT_NULL(fn, dst);
        return done(fn, conn->c.recv(*mr_of(dst), offset, len, opts));
    });
}

}  // extern "C"

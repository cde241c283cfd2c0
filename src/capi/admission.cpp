// SPDX-License-Identifier: BSD-3-Clause
// src/capi/admission.cpp — the C API's admission keys, gates, admitted connects and the RDM
// attach handshake (remora_admission.h over remora/admission.hpp).
#include "capi.hpp"

using namespace remora::capi;

static_assert(REMORA_ADMISSION_OVERLOADED ==
              static_cast<int>(remora::admission_refusal::overloaded));
static_assert(REMORA_ADMISSION_KEY_SIZE == remora::admission_key::size);
static_assert(REMORA_ADMISSION_MAX_ACCEPT_DATA == remora::admission_max_accept_data);
static_assert(REMORA_ADMISSION_TOKEN_OVERHEAD == remora::admission_token_overhead);

namespace {

// Hands an admitted peer to the caller when wanted.
int give_peer(const char* fn, remora::result<remora::admitted_peer>&& r,
              remora_admitted_peer** peer) {
    if (!r) {
        return fail(r.error(), fn);
    }
    if (peer != nullptr) {
        *peer = new remora_admitted_peer{std::move(*r)};
    }
    return 0;
}

}  // namespace

extern "C" {

REMORA_API int remora_admission_key_generate(remora_admission_key** key) {
    static constexpr const char* fn = "remora_admission_key_generate";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, key);
        return give(fn, remora::admission_key::generate(), key);
    });
}

REMORA_API int remora_admission_key_from_bytes(const void* key_bytes, size_t len,
                                               remora_admission_key** key) {
    static constexpr const char* fn = "remora_admission_key_from_bytes";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, key_bytes);
        REMORA_CAPI_NOT_NULL(fn, key);
        return give(fn, remora::admission_key::from_bytes(bytes(key_bytes, len)), key);
    });
}

REMORA_API int remora_admission_key_load(const char* path, remora_admission_key** key) {
    static constexpr const char* fn = "remora_admission_key_load";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, path);
        REMORA_CAPI_NOT_NULL(fn, key);
        return give(fn, remora::admission_key::load(path), key);
    });
}

REMORA_API int remora_admission_key_save(const remora_admission_key* key, const char* path) {
    static constexpr const char* fn = "remora_admission_key_save";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, key);
        REMORA_CAPI_NOT_NULL(fn, path);
        auto r = key->k.save(path);
        return r ? 0 : fail(r.error(), fn);
    });
}

REMORA_API void remora_admission_key_delete(remora_admission_key* key) {
    guarded_void([&] { delete key; });
}

REMORA_API int remora_admission_gate_create(const remora_admission_key* key,
                                            const struct remora_admission_config* cfg,
                                            remora_admission_gate** gate) {
    static constexpr const char* fn = "remora_admission_gate_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, key);
        REMORA_CAPI_NOT_NULL(fn, gate);
        remora_admission_config c;
        if (int rc = load_cfg(fn, "remora_admission_config", cfg, c)) {
            return rc;
        }
        remora::admission_config ac;
        if (c.window_ms != 0) {
            ac.window = std::chrono::milliseconds(c.window_ms);
        }
        if (c.replay_cache != 0) {
            ac.replay_cache = c.replay_cache;
        }
        // The gate owns a key of its own: a copy, so the caller's handle stays theirs.
        auto copy = remora::admission_key::from_bytes(std::span<const std::byte>(
            reinterpret_cast<const std::byte*>(key->k.bytes()), remora::admission_key::size));
        if (!copy) {
            return fail(copy.error(), fn);
        }
        return give(fn, remora::admission_gate::create(std::move(*copy), ac), gate);
    });
}

REMORA_API void remora_admission_gate_delete(remora_admission_gate* gate) {
    guarded_void([&] { delete gate; });
}

REMORA_API int remora_admission_gate_admit(remora_admission_gate* gate,
                                           remora_connection_request* req,
                                           remora_admitted_peer** peer) {
    static constexpr const char* fn = "remora_admission_gate_admit";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, gate);
        REMORA_CAPI_NOT_NULL(fn, req);
        return give_peer(fn, gate->g.admit(req->q), peer);
    });
}

REMORA_API int remora_admission_gate_check(remora_admission_gate* gate, const void* token,
                                           size_t len, remora_admitted_peer** peer) {
    static constexpr const char* fn = "remora_admission_gate_check";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, gate);
        if (int rc = check_bytes(fn, "token", token, len)) {
            return rc;
        }
        return give_peer(fn, gate->g.check(bytes(token, len)), peer);
    });
}

REMORA_API int remora_admitted_peer_identity(const remora_admitted_peer* peer,
                                             const char** identity) {
    return REMORA_CAPI_GET("remora_admitted_peer_identity", peer, identity,
                           peer->p.identity.c_str());
}

REMORA_API int remora_admitted_peer_payload(const remora_admitted_peer* peer, const void** payload,
                                            size_t* len) {
    static constexpr const char* fn = "remora_admitted_peer_payload";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, peer);
        REMORA_CAPI_NOT_NULL(fn, payload);
        REMORA_CAPI_NOT_NULL(fn, len);
        *payload = peer->p.payload.empty() ? nullptr : peer->p.payload.data();
        *len = peer->p.payload.size();
        return 0;
    });
}

REMORA_API void remora_admitted_peer_delete(remora_admitted_peer* peer) {
    guarded_void([&] { delete peer; });
}

REMORA_API int remora_admission_connect_room(const remora_domain* dom, size_t* room) {
    return REMORA_CAPI_GET("remora_admission_connect_room", dom, room,
                           remora::admission_connect_room(dom->d));
}

REMORA_API int remora_connect_admitted(remora_domain* dom, const char* host, uint16_t port,
                                       const remora_admission_key* key, const char* identity,
                                       const struct remora_connection_config* cfg,
                                       const void* payload, size_t payload_len,
                                       remora_connection** conn) {
    static constexpr const char* fn = "remora_connect_admitted";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, host);
        REMORA_CAPI_NOT_NULL(fn, key);
        REMORA_CAPI_NOT_NULL(fn, identity);
        REMORA_CAPI_NOT_NULL(fn, conn);
        if (int rc = check_bytes(fn, "payload", payload, payload_len)) {
            return rc;
        }
        remora::connection_config cc;
        if (int rc = connection_config_of(fn, cfg, cc)) {
            return rc;
        }
        return give(fn,
                    remora::connect_admitted(dom->d, host, port, key->k, identity, cc,
                                             bytes(payload, payload_len)),
                    conn);
    });
}

// ---- the RDM attach handshake

REMORA_API int remora_prove_admission(remora_connection* conn, const remora_admission_key* key,
                                      const char* identity, const void* payload, size_t payload_len,
                                      int timeout_ms, void* accept_data, size_t accept_cap,
                                      size_t* accept_len) {
    static constexpr const char* fn = "remora_prove_admission";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, key);
        REMORA_CAPI_NOT_NULL(fn, identity);
        if (int rc = check_bytes(fn, "payload", payload, payload_len)) {
            return rc;
        }
        if (int rc = check_bytes(fn, "accept_data", accept_data, accept_cap)) {
            return rc;
        }
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        auto r = remora::prove_admission(conn->c, key->k, identity, bytes(payload, payload_len),
                                         ms(timeout_ms));
        if (!r) {
            return fail(r.error(), fn);
        }
        if (r->size() > accept_cap) {
            if (accept_len != nullptr) {
                *accept_len = r->size();
            }
            return fail(REMORA_E_TOO_LARGE, fn,
                        "the target admitted this peer, but its accept data (" +
                            std::to_string(r->size()) + " bytes) does not fit accept_cap (" +
                            std::to_string(accept_cap) +
                            "; REMORA_ADMISSION_MAX_ACCEPT_DATA always does)");
        }
        if (!r->empty()) {
            std::memcpy(accept_data, r->data(), r->size());
        }
        if (accept_len != nullptr) {
            *accept_len = r->size();
        }
        return 0;
    });
}

REMORA_API int remora_admit_peer(remora_connection* conn, remora_admission_gate* gate,
                                 const void* accept_data, size_t accept_len, int timeout_ms,
                                 remora_admitted_peer** peer) {
    static constexpr const char* fn = "remora_admit_peer";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, gate);
        if (int rc = check_bytes(fn, "accept_data", accept_data, accept_len)) {
            return rc;
        }
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        // Checked before the handshake starts: a client told nothing waits out its timeout.
        if (accept_len > remora::admission_max_accept_data) {
            return fail(REMORA_E_TOO_LARGE, fn,
                        std::to_string(accept_len) + " bytes of accept data (at most " +
                            std::to_string(remora::admission_max_accept_data) +
                            "); nothing was sent");
        }
        return give_peer(
            fn,
            remora::admit_peer(conn->c, gate->g, bytes(accept_data, accept_len), ms(timeout_ms)),
            peer);
    });
}

REMORA_API int remora_attach_request_receive(remora_connection* conn, int timeout_ms,
                                             remora_attach_request** req) {
    static constexpr const char* fn = "remora_attach_request_receive";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, req);
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        return give(fn, remora::attach_request::receive(conn->c, ms(timeout_ms)), req);
    });
}

REMORA_API int remora_attach_request_check(const remora_attach_request* req,
                                           remora_admission_gate* gate,
                                           remora_admitted_peer** peer) {
    static constexpr const char* fn = "remora_attach_request_check";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, req);
        REMORA_CAPI_NOT_NULL(fn, gate);
        return give_peer(fn, req->r.check(gate->g), peer);
    });
}

REMORA_API int remora_attach_request_accept(remora_attach_request* req, const void* data,
                                            size_t len) {
    static constexpr const char* fn = "remora_attach_request_accept";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, req);
        if (int rc = check_bytes(fn, "data", data, len)) {
            return rc;
        }
        auto r = req->r.accept(bytes(data, len));
        return r ? 0 : fail(r.error(), fn);
    });
}

REMORA_API int remora_attach_request_reject(remora_attach_request* req, int reason) {
    static constexpr const char* fn = "remora_attach_request_reject";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, req);
        if (reason < REMORA_ADMISSION_MALFORMED || reason > REMORA_ADMISSION_OVERLOADED) {
            return fail(REMORA_E_INVALID, fn,
                        "reason " + std::to_string(reason) +
                            " is not a REMORA_ADMISSION_* refusal (MALFORMED .. OVERLOADED)");
        }
        auto r = req->r.reject(static_cast<remora::admission_refusal>(reason));
        return r ? 0 : fail(r.error(), fn);
    });
}

REMORA_API void remora_attach_request_delete(remora_attach_request* req) {
    guarded_void([&] { delete req; });
}

}  // extern "C"

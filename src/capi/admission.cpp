// SPDX-License-Identifier: BSD-3-Clause
// src/capi/admission.cpp — the C API's admission keys, gates and admitted connects
// (remora_admission.h over remora/admission.hpp).
#include "capi.hpp"

using namespace remora::capi;

static_assert(REMORA_ADMISSION_OVERLOADED ==
              static_cast<int>(remora::admission_refusal::overloaded));
static_assert(REMORA_ADMISSION_KEY_SIZE == remora::admission_key::size);

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

}  // extern "C"

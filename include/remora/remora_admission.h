// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file remora/remora_admission.h
 * @brief remora's C API: admission, a pre-shared key proven in the connection request.
 *
 * Part of remora's C API (C11), included by remora/remora.h: include that. The conventions
 * stated at the head of remora.h hold here; remora/admission.hpp states the token, what is
 * checked and what this does not protect. A client connects with remora_connect_admitted; the
 * target checks each request with remora_admission_gate_admit before it accepts, which rejects
 * a request that does not prove the key (the client's connect then fails with
 * REMORA_E_REJECTED, and remora_last_admission_refusal() names why).
 */
#ifndef REMORA_REMORA_ADMISSION_H
#define REMORA_REMORA_ADMISSION_H

#include <remora/remora.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Admission (remora/admission.hpp) */
/** @{ */

typedef struct remora_admission_key remora_admission_key;   /**< a 32-byte pre-shared key */
typedef struct remora_admission_gate remora_admission_gate; /**< checks tokens for one key */
typedef struct remora_admitted_peer remora_admitted_peer;   /**< what an admitted peer said */

/** Bytes of an admission key (remora::admission_key::size). */
#define REMORA_ADMISSION_KEY_SIZE 32

/** Why a target refused a peer (remora::admission_refusal). */
enum remora_admission_refusal {
    REMORA_ADMISSION_NONE = 0,       /**< not an admission refusal */
    REMORA_ADMISSION_MALFORMED = 1,  /**< no token, or a short, long or unknown one */
    REMORA_ADMISSION_BAD_PROOF = 2,  /**< a wrong key, or a tampered token */
    REMORA_ADMISSION_STALE = 3,      /**< the timestamp is outside the window */
    REMORA_ADMISSION_REPLAYED = 4,   /**< the token was admitted before */
    REMORA_ADMISSION_OVERLOADED = 5, /**< the target refuses for load */
};

/**
 * A fresh random key (held in guarded memory, zeroed when deleted).
 * @param key receives the key
 * @return 0, or REMORA_E_NOT_SUPPORTED when the random source fails.
 */
REMORA_API int remora_admission_key_generate(remora_admission_key** key);
/**
 * A key from exactly REMORA_ADMISSION_KEY_SIZE bytes (the caller zeroes its own copy).
 * @param bytes the key's bytes
 * @param len   REMORA_ADMISSION_KEY_SIZE
 * @param key   receives the key
 * @return 0, or REMORA_E_INVALID for another length.
 */
REMORA_API int remora_admission_key_from_bytes(const void* bytes, size_t len,
                                               remora_admission_key** key);
/**
 * A key file: exactly 32 raw bytes, a regular file not readable or writable by group or others.
 * @param path the file
 * @param key  receives the key
 * @return 0, REMORA_E_INVALID (missing, unreadable, another size), REMORA_E_ACCESS_DENIED (its
 *         mode is too open).
 */
REMORA_API int remora_admission_key_load(const char* path, remora_admission_key** key);
/**
 * Writes the key to a new file with mode 0600; never overwrites.
 * @param key  the key
 * @param path the new file
 * @return 0, or REMORA_E_INVALID when the path exists or cannot be written.
 */
REMORA_API int remora_admission_key_save(const remora_admission_key* key, const char* path);
/**
 * Zeroes and frees the key. NULL: nothing.
 * @param key the key, or NULL
 */
REMORA_API void remora_admission_key_delete(remora_admission_key* key);

/** Admission gate configuration (remora::admission_config). 0 fields take the defaults. */
struct remora_admission_config {
    size_t size;         /**< sizeof(struct remora_admission_config) */
    uint32_t window_ms;  /**< |now - timestamp| allowed; 0: 30000 */
    size_t replay_cache; /**< nonces remembered at most; 0: 4096 */
};

/**
 * A gate that admits tokens proving `key` (copied: delete the key whenever). Threading: its
 * calls may run concurrently.
 * @param key  the key
 * @param cfg  configuration (NULL: defaults)
 * @param gate receives the gate
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_admission_gate_create(const remora_admission_key* key,
                                            const struct remora_admission_config* cfg,
                                            remora_admission_gate** gate);
/**
 * Frees the gate. NULL: nothing.
 * @param gate the gate, or NULL
 */
REMORA_API void remora_admission_gate_delete(remora_admission_gate* gate);
/**
 * Checks the request's token; on a refusal also rejects the request with the reason (delete it
 * then). On success accept the request as usual.
 * @param gate the gate
 * @param req  the connection request
 * @param peer receives what the admitted peer said (NULL: not wanted)
 * @return 0 when admitted; REMORA_E_ACCESS_DENIED when refused
 *         (remora_last_admission_refusal() says why).
 */
REMORA_API int remora_admission_gate_admit(remora_admission_gate* gate,
                                           remora_connection_request* req,
                                           remora_admitted_peer** peer);
/**
 * Checks a token received some other way, and remembers it when admitted.
 * @param gate  the gate
 * @param token the token's bytes
 * @param len   its length
 * @param peer  receives what the admitted peer said (NULL: not wanted)
 * @return 0 when admitted; REMORA_E_ACCESS_DENIED when refused
 *         (remora_last_admission_refusal() says why).
 */
REMORA_API int remora_admission_gate_check(remora_admission_gate* gate, const void* token,
                                           size_t len, remora_admitted_peer** peer);
/**
 * The identity an admitted peer named (NUL-terminated; valid while the handle lives).
 * @param peer     the admitted peer
 * @param identity receives the string
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_admitted_peer_identity(const remora_admitted_peer* peer,
                                             const char** identity);
/**
 * The payload an admitted peer sent with its token (valid while the handle lives).
 * @param peer    the admitted peer
 * @param payload receives the bytes (NULL when empty)
 * @param len     receives the length
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_admitted_peer_payload(const remora_admitted_peer* peer, const void** payload,
                                            size_t* len);
/**
 * Frees the handle. NULL: nothing.
 * @param peer the handle, or NULL
 */
REMORA_API void remora_admitted_peer_delete(remora_admitted_peer* peer);

/**
 * remora_connect with a token for `key` naming `identity` and carrying `payload` (covered by
 * the key: nobody without it can change it) as the request's private data.
 * @param dom         the domain
 * @param host        the target's address
 * @param port        its port
 * @param key         the key the target admits
 * @param identity    who connects (at most 64 bytes; "" for none)
 * @param cfg         connection configuration (NULL: defaults)
 * @param payload     application data for the target (may be NULL with length 0)
 * @param payload_len its length
 * @param conn        receives the connection
 * @return 0; REMORA_E_REJECTED when the target refuses admission (the reason:
 *         remora_last_admission_refusal()); REMORA_E_TOO_LARGE when the token does not fit the
 *         provider's private data; REMORA_E_INVALID for a long identity; else remora_connect's.
 */
REMORA_API int remora_connect_admitted(remora_domain* dom, const char* host, uint16_t port,
                                       const remora_admission_key* key, const char* identity,
                                       const struct remora_connection_config* cfg,
                                       const void* payload, size_t payload_len,
                                       remora_connection** conn);

/**
 * Why the last call that failed on this thread was an admission refusal (a gate's, or a
 * target's reject of remora_connect_admitted): enum remora_admission_refusal, or
 * REMORA_ADMISSION_NONE for any other failure.
 * @return the reason.
 */
REMORA_API int remora_last_admission_refusal(void);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_ADMISSION_H */

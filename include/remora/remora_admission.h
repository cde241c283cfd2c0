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
 * REMORA_E_REJECTED, and remora_last_admission_refusal() names why). RDM peers, which have no
 * connection request, run the attach handshake instead: remora_prove_admission on the client,
 * remora_admit_peer (or remora_attach_request_*) on the target.
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
/** Bytes of an admission token besides identity and payload (remora::admission_token_overhead). */
#define REMORA_ADMISSION_TOKEN_OVERHEAD 38

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
 * Bytes a token leaves for identity + payload in a remora_connect_admitted on `dom`: its
 * caps.cm_data_size (55 under verbs rules, 256 on tcp and sockets) less
 * REMORA_ADMISSION_TOKEN_OVERHEAD; 0 for an RDM domain.
 * @param dom  the domain
 * @param room receives the bytes
 * @return 0; REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_admission_connect_room(const remora_domain* dom, size_t* room);

/**
 * remora_connect with a token for `key` naming `identity` and carrying `payload` (covered by
 * the key: nobody without it can change it) as the request's private data.
 * @param dom         the domain
 * @param host        the target's address
 * @param port        its port
 * @param key         the key the target admits
 * @param identity    who connects (at most 64 bytes; "" for none); identity and payload
 *                    together at most remora_admission_connect_room()
 * @param cfg         connection configuration (NULL: defaults)
 * @param payload     application data for the target (may be NULL with length 0)
 * @param payload_len its length
 * @param conn        receives the connection
 * @return 0; REMORA_E_REJECTED when the target refuses admission (the reason:
 *         remora_last_admission_refusal()); REMORA_E_INVALID for a long identity, or when the
 *         token does not fit the provider's private data (nothing is sent); else
 *         remora_connect's.
 */
REMORA_API int remora_connect_admitted(remora_domain* dom, const char* host, uint16_t port,
                                       const remora_admission_key* key, const char* identity,
                                       const struct remora_connection_config* cfg,
                                       const void* payload, size_t payload_len,
                                       remora_connection** conn);

/* ---- RDM peers: the attach handshake (remora/admission.hpp) ---- */

/** The target's side of one RDM attach handshake (remora::attach_request). */
typedef struct remora_attach_request remora_attach_request;

/** The longest accept data an RDM target may send (remora::admission_max_accept_data): a buffer
 * this long always holds what remora_prove_admission receives. */
#define REMORA_ADMISSION_MAX_ACCEPT_DATA 512
/** The longest payload a client may send in the RDM handshake. */
#define REMORA_ADMISSION_MAX_PEER_PAYLOAD 256

/**
 * The client's side of the attach handshake (remora::prove_admission): `conn` (an RDM peer from
 * remora_open_peer) is attached to the target already, and the target has attached (or will
 * attach, within the timeout) this endpoint's remora_connection_local_address. Waits for the
 * target's challenge, answers with a token for `key` naming `identity` and carrying `payload`,
 * and receives the target's accept data. The handshake's messages are the library's own: they
 * take queue entries as every operation does, and never show on the connection's CQs.
 * Threading: not concurrent with other operations on `conn`. After a failure, delete `conn`.
 * @param conn        the client's RDM peer, attached to the target
 * @param key         the key the target admits
 * @param identity    who connects (at most 64 bytes; "" for none)
 * @param payload     application data for the target (may be NULL with length 0)
 * @param payload_len its length (at most REMORA_ADMISSION_MAX_PEER_PAYLOAD)
 * @param timeout_ms  how long the whole handshake may take, in milliseconds
 * @param accept_data receives the target's accept data (may be NULL when accept_cap is 0)
 * @param accept_cap  its size in bytes (REMORA_ADMISSION_MAX_ACCEPT_DATA always suffices)
 * @param accept_len  receives the accept data's length (may be NULL)
 * @return 0 when admitted; REMORA_E_REJECTED when the target refused (the reason:
 *         remora_last_admission_refusal()); REMORA_E_TIMED_OUT when the target did not answer in
 *         time; REMORA_E_INVALID for a NULL argument, a negative timeout, an identity over 64
 *         bytes or a payload over REMORA_ADMISSION_MAX_PEER_PAYLOAD;
 *         REMORA_E_MALFORMED_DESCRIPTOR for an answer that is not a handshake message;
 *         REMORA_E_TOO_LARGE when the accept data does not fit accept_cap (the target did admit
 *         this peer: *accept_len is the length needed, nothing is copied); REMORA_E_BAD_STATE
 *         when `conn` is not an attached RDM peer.
 */
REMORA_API int remora_prove_admission(remora_connection* conn, const remora_admission_key* key,
                                      const char* identity, const void* payload, size_t payload_len,
                                      int timeout_ms, void* accept_data, size_t accept_cap,
                                      size_t* accept_len);

/**
 * The target's side for one key (remora::admit_peer): remora_attach_request_receive, the check
 * by `gate`, then the accept with `accept_data` or a reject with the reason.
 * Threading: not concurrent with other operations on `conn`. After a failure, delete `conn`.
 * @param conn        the target's RDM peer, attached to the client
 * @param gate        the gate of the key it admits
 * @param accept_data what the client receives when admitted (e.g. a region's descriptor; may be
 *                    NULL with length 0)
 * @param accept_len  its length (at most REMORA_ADMISSION_MAX_ACCEPT_DATA)
 * @param timeout_ms  how long to wait for the client's token, in milliseconds
 * @param peer        receives what the admitted peer said (NULL: not wanted)
 * @return 0 when admitted; REMORA_E_ACCESS_DENIED when refused, the client told why
 *         (remora_last_admission_refusal() names it); REMORA_E_TIMED_OUT when no token came;
 *         REMORA_E_TOO_LARGE for accept data over REMORA_ADMISSION_MAX_ACCEPT_DATA (nothing is
 *         sent); REMORA_E_INVALID for a NULL argument or a negative timeout;
 *         REMORA_E_BAD_STATE when `conn` is not an attached RDM peer.
 */
REMORA_API int remora_admit_peer(remora_connection* conn, remora_admission_gate* gate,
                                 const void* accept_data, size_t accept_len, int timeout_ms,
                                 remora_admitted_peer** peer);

/**
 * The target's side step by step (remora::attach_request), for a target that tries several
 * keys (one gate per role): sends a fresh challenge to the peer `conn` is attached to and waits
 * for its token. Then remora_attach_request_check with each gate in turn, and
 * remora_attach_request_accept or _reject once.
 * Threading: the request and `conn` are used from one thread; `conn` must outlive the request.
 * @param conn       the target's RDM peer, attached to the client
 * @param timeout_ms how long the request may take from now (its answer included), in
 *                   milliseconds
 * @param req        receives the request, holding the client's token
 * @return 0; REMORA_E_TIMED_OUT when no token came (the client did not call
 *         remora_prove_admission, or attached the target only after the challenge was sent);
 *         REMORA_E_BAD_STATE when `conn` is not an attached RDM peer; REMORA_E_INVALID for a
 *         NULL argument or a negative timeout; the provider's error otherwise.
 */
REMORA_API int remora_attach_request_receive(remora_connection* conn, int timeout_ms,
                                             remora_attach_request** req);
/**
 * Checks the request's token with `gate` (remora_admission_gate_check), and that it answers this
 * request's challenge (else refused as REMORA_ADMISSION_REPLAYED). The admitted peer's payload is
 * the client's own. Nothing is sent to the client.
 * @param req  the request
 * @param gate the gate of one key
 * @param peer receives what the admitted peer said (NULL: not wanted)
 * @return 0 when admitted; REMORA_E_ACCESS_DENIED when refused (remora_last_admission_refusal()
 *         says why); REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_attach_request_check(const remora_attach_request* req,
                                           remora_admission_gate* gate,
                                           remora_admitted_peer** peer);
/**
 * Tells the client it is admitted, with `data` (what its remora_prove_admission receives).
 * @param req  the request
 * @param data the accept data (may be NULL with length 0)
 * @param len  its length (at most REMORA_ADMISSION_MAX_ACCEPT_DATA)
 * @return 0 once sent; REMORA_E_TOO_LARGE for longer data (nothing is sent); REMORA_E_BAD_STATE
 *         when the request was answered already; REMORA_E_INVALID for a NULL argument; the
 *         connection's error sending the answer.
 */
REMORA_API int remora_attach_request_accept(remora_attach_request* req, const void* data,
                                            size_t len);
/**
 * Tells the client it is refused, and why (its remora_prove_admission fails with
 * REMORA_E_REJECTED and this reason). Delete the connection afterwards.
 * @param req    the request
 * @param reason enum remora_admission_refusal, not REMORA_ADMISSION_NONE
 * @return 0 once sent; REMORA_E_INVALID for a NULL request or a reason out of range;
 *         REMORA_E_BAD_STATE when the request was answered already; the connection's error
 *         sending the answer.
 */
REMORA_API int remora_attach_request_reject(remora_attach_request* req, int reason);
/**
 * Frees the request (an unanswered one sends nothing: the client's wait times out). NULL:
 * nothing.
 * @param req the request, or NULL
 */
REMORA_API void remora_attach_request_delete(remora_attach_request* req);

/**
 * Why the last call that failed on this thread was an admission refusal (a gate's, an
 * attach request's check, or a target's reject of remora_connect_admitted or
 * remora_prove_admission): enum remora_admission_refusal, or
 * REMORA_ADMISSION_NONE for any other failure.
 * @return the reason.
 */
REMORA_API int remora_last_admission_refusal(void);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_ADMISSION_H */

// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file remora/remora_persist.h
 * @brief remora's C API: persistent regions, the target service, flush and atomics over a
 * connection.
 *
 * Part of remora's C API (C11), included by remora/remora.h: include that. The conventions
 * stated at the head of remora.h (return codes, messages, handles, sized configuration structs,
 * threading) hold here.
 */
#ifndef REMORA_REMORA_PERSIST_H
#define REMORA_REMORA_PERSIST_H

#include <remora/remora.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Persistent regions and the target service (persistent_region.hpp, target_service.hpp) */
/** @{ */

/** Persistent region configuration (remora::persistent_region_config). */
struct remora_persistent_region_config {
    size_t size;      /**< sizeof(struct remora_persistent_region_config) */
    const char* path; /**< backing file; NULL or "": anonymous, volatile memory */
    size_t len;       /**< bytes; 0 with a path: the file's size */
    bool create;      /**< create a missing file or extend a short one */
    unsigned usage;   /**< enum remora_usage; 0: READ_SRC | WRITE_DST | ATOMIC | FLUSH */
    bool apm_durable; /**< the operator declares placed writes durable (DAX only) */
    bool unguarded;   /**< no lock or lease on the file (persistent_region_config::exclusive) */
};

/**
 * Opens a persistent (file-backed) or volatile region, registered on `dom`.
 * @param dom the domain
 * @param cfg its configuration (NULL: an anonymous volatile region of the default usage needs len:
 * give cfg)
 * @param region receives the region
 * @return 0; REMORA_E_INVALID (bad path or size), REMORA_E_BAD_STATE (the file is served by another
 * region), REMORA_E_ACCESS_DENIED, or the registration's error.
 */
REMORA_API int remora_persistent_region_open(remora_domain* dom,
                                             const struct remora_persistent_region_config* cfg,
                                             remora_persistent_region** region);
/**
 * Unmaps, deregisters and frees. NULL: nothing.
 * @param region the region, or NULL
 */
REMORA_API void remora_persistent_region_delete(remora_persistent_region* region);
/**
 * Its registered memory region (borrowed: lives as long as the persistent region).
 * @param region the persistent region
 * @param mr receives the memory region
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_persistent_region_region(const remora_persistent_region* region,
                                               const remora_memory_region** mr);
/**
 * Makes [offset, offset + len) durable (msync); NOT_SUPPORTED for a volatile region.
 * @param region the persistent region
 * @param offset the start of the range, in bytes
 * @param len the length in bytes
 * @return 0; REMORA_E_NOT_SUPPORTED for a volatile region; REMORA_E_OUT_OF_RANGE outside it; the
 * msync error.
 */
REMORA_API int remora_persistent_region_persist(const remora_persistent_region* region,
                                                uint64_t offset, uint64_t len);
/**
 * Sets `*revoked` once another process opened or truncated the region's file (its lease is
 * breaking): delete the region before the lease-break time runs out (persistent_region::revoked).
 * @param region the persistent region
 * @param revoked receives whether the lease is breaking
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_persistent_region_revoked(const remora_persistent_region* region,
                                                bool* revoked);
/**
 * The descriptor of [offset, offset + len) (len 0: to the end), stating persistence.
 * @param region the persistent region
 * @param offset the start of the range
 * @param len its length (0: to the end)
 * @param remote receives the descriptor
 * @return 0; REMORA_E_OUT_OF_RANGE outside the region.
 */
REMORA_API int remora_persistent_region_describe(const remora_persistent_region* region,
                                                 size_t offset, size_t len,
                                                 remora_remote_region** remote);

/**
 * Creates a target service (answers GPSPM flushes and service atomics).
 * @param svc receives the service
 * @return 0, or REMORA_E_NOMEM.
 */
REMORA_API int remora_target_service_create(remora_target_service** svc);
/**
 * Frees the service (after the connections it serves). NULL: nothing.
 * @param svc the service, or NULL
 */
REMORA_API void remora_target_service_delete(remora_target_service* svc);
/**
 * Exposes a region to the service's peers and returns its descriptor: a persistent region's
 * states REMORA_PERSISTENCE_GPSPM. Exactly one of `mr` and `region` must be given.
 * @param svc the target service
 * @param mr plain registered memory, or NULL
 * @param region a persistent region, or NULL
 * @param remote receives its descriptor
 * @return 0; REMORA_E_INVALID unless exactly one of mr and region is given; REMORA_E_BAD_STATE when
 * exposed already.
 */
REMORA_API int remora_target_service_expose(remora_target_service* svc,
                                            const remora_memory_region* mr,
                                            const remora_persistent_region* region,
                                            remora_remote_region** remote);
/**
 * Answers `conn`'s service messages from now on. REMORA_E_INVALID when the connection has no
 * service depth (remora_persistence_config), REMORA_E_BAD_STATE when it already serves or calls a
 * service.
 * @param svc the target service
 * @param conn an accepted connection with a service depth
 * @return 0; REMORA_E_INVALID (no service depth), REMORA_E_BAD_STATE (already serves or calls a
 * service), or the provider's error posting.
 */
REMORA_API int remora_target_service_serve(remora_target_service* svc, remora_connection* conn);
/**
 * Requests answered so far, and how many of them were refused.
 * @param svc the target service
 * @param requests receives the requests answered, or NULL
 * @param refused receives how many were refused, or NULL
 * @return 0, or REMORA_E_INVALID for a NULL service.
 */
REMORA_API int remora_target_service_stats(const remora_target_service* svc, uint64_t* requests,
                                           uint64_t* refused);

/** @} */

/** @name Persistence over a connection (remora/persistence.hpp) */
/** @{ */

/**
 * The persistence layer's part of a connection's setup (remora::persistence_config), given
 * through remora_connection_config.persist. 0 fields take the defaults.
 */
struct remora_persistence_config {
    size_t size; /**< sizeof(struct remora_persistence_config) */
    /** Target-service requests in flight (GPSPM flushes, service atomics); set on both sides,
     *  the target's at least the client's. Without message_size, such a connection carries
     *  only the service's messages: remora_send and remora_recv are refused
     *  (REMORA_E_BAD_STATE). 0: none. */
    uint32_t service_depth;
    /** A GPSPM flush or service atomic whose reply has not come this long after its post
     *  completes with REMORA_E_TIMED_OUT (the target may or may not have executed it).
     *  0: 30000. */
    uint32_t service_timeout_ms;
    /* (Such timeouts are also a REMORA_LOG_WARNING line, with a hint when the target never
     * answered on the connection: a target that never called remora_target_service_serve.) */
    /** Client side: how long the target has to show it serves the connection
     *  (remora::persistence_config::serve_wait). The first service request also sends a hello,
     *  which a serving target answers at once; when nothing has been answered this long after
     *  it, the requests in flight complete with REMORA_E_BAD_STATE and new ones are refused with
     *  REMORA_E_BAD_STATE and a message saying the target accepted the service but does not
     *  serve it (remora_target_service_serve), until an answer comes. 0: 1000;
     *  REMORA_SERVE_WAIT_NONE: no hello and no check (such requests end at service_timeout_ms).
     *  A caller built against an older header (a smaller size) gets the default. */
    uint32_t serve_wait_ms;
    /** With a service_depth: the longest message of the application's own (remora_send,
     *  remora_recv) that the connection also carries beside the service's
     *  (remora::persistence_config::message_size, where the contract is stated in full). Set the
     *  same value on both sides. The application's receives are then taken by the library
     *  (up to rq_size at once, REMORA_E_WOULD_BLOCK past them) and complete with
     *  REMORA_OP_RECV once a message of the application's is copied into them (one that came
     *  when rq_size of them waited for receives already: status REMORA_E_WOULD_BLOCK, no
     *  bytes, in its place); a longer send
     *  than message_size gives REMORA_E_TOO_LARGE, a copied send REMORA_E_NOT_SUPPORTED, a
     *  message_size without a service_depth REMORA_E_INVALID at setup. 0: none. A caller built
     *  against an older header (a smaller size) gets 0. */
    uint32_t message_size;
};

/** remora_persistence_config.serve_wait_ms: no check that the target serves the connection. */
#define REMORA_SERVE_WAIT_NONE UINT32_MAX

/**
 * Atomics on an 8-byte aligned word (REMORA_USAGE_ATOMIC_TARGET; remora/persistence.hpp): native,
 * or through the target service with a service depth, else REMORA_E_NOT_SUPPORTED. compare_swap and
 * fetch_add write the word's previous value into 8 bytes of `result` at result_offset
 * (REMORA_USAGE_READ_DESTINATION).
 * @param conn the connection
 * @param dst the peer's region (REMORA_USAGE_ATOMIC_TARGET)
 * @param dst_offset the word's offset (8-byte aligned)
 * @param value the value to write
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted; REMORA_E_NOT_SUPPORTED without an atomic path, and the checks of every
 * operation.
 */
REMORA_API int remora_atomic_write(remora_connection* conn, const remora_remote_region* dst,
                                   uint64_t dst_offset, uint64_t value, unsigned flags,
                                   void* context);
/**
 * Compare-and-swap: the word becomes `desired` if it was `expected`.
 * @param conn the connection
 * @param dst the peer's region (REMORA_USAGE_ATOMIC_TARGET)
 * @param dst_offset the word's offset (8-byte aligned)
 * @param expected the value the word must hold
 * @param desired what the word becomes if it held expected
 * @param result registered memory (REMORA_USAGE_READ_DESTINATION) that receives the old value
 * @param result_offset where the 8 bytes go in result
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted; the errors of remora_atomic_write.
 */
REMORA_API int remora_compare_swap(remora_connection* conn, const remora_remote_region* dst,
                                   uint64_t dst_offset, uint64_t expected, uint64_t desired,
                                   const remora_memory_region* result, size_t result_offset,
                                   unsigned flags, void* context);
/**
 * Fetch-and-add.
 * @param conn the connection
 * @param dst the peer's region (REMORA_USAGE_ATOMIC_TARGET)
 * @param dst_offset the word's offset (8-byte aligned)
 * @param addend what is added to the word
 * @param result registered memory (REMORA_USAGE_READ_DESTINATION) that receives the old value
 * @param result_offset where the 8 bytes go in result
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted; the errors of remora_atomic_write.
 */
REMORA_API int remora_fetch_add(remora_connection* conn, const remora_remote_region* dst,
                                uint64_t dst_offset, uint64_t addend,
                                const remora_memory_region* result, size_t result_offset,
                                unsigned flags, void* context);

/** What a flush guarantees (remora::flush_type). */
enum remora_flush_type {
    REMORA_FLUSH_STRONGEST = 0,   /**< persistence for a persistent region, else visibility */
    REMORA_FLUSH_VISIBILITY = 1,  /**< the target's memory holds the bytes */
    REMORA_FLUSH_PERSISTENCE = 2, /**< ... and they are durable */
};
/** How a flush reaches its guarantee (remora::flush_method). */
enum remora_flush_method {
    REMORA_FLUSH_AUTOMATIC = 0,        /**< the cheapest the descriptor offers */
    REMORA_FLUSH_READ_AFTER_WRITE = 1, /**< an 8-byte read after the writes */
    REMORA_FLUSH_GPSPM = 2,            /**< a request the target's service answers */
};
/**
 * Completes (REMORA_OP_FLUSH) once the connection's earlier writes to [offset, offset + len)
 * are visible or durable. The descriptor must grant REMORA_USAGE_FLUSH_TARGET; persistence needs a
 * persistent region (REMORA_E_NOT_SUPPORTED names what is missing). GPSPM needs a service depth;
 * its reply completes on the RCQ when there is one.
 * @param conn the connection
 * @param dst the peer's region (REMORA_USAGE_FLUSH_TARGET)
 * @param offset the start of the range
 * @param len its length
 * @param type enum remora_flush_type
 * @param method enum remora_flush_method
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted; REMORA_E_NOT_SUPPORTED naming what is missing, REMORA_E_INVALID (type,
 * method), and the checks of every operation.
 */
REMORA_API int remora_flush(remora_connection* conn, const remora_remote_region* dst,
                            uint64_t offset, uint64_t len, int type, int method, unsigned flags,
                            void* context);
/**
 * Write + flush + atomic publish, reserved together (remora::publish, persistence.hpp): writes
 * consecutive pieces of src from src_offset into the `n` segments of `data` (as
 * remora_gather_write), flushes them (`type`, `method` as remora_flush, over the smallest range
 * covering every segment), and only once the writes and the flush have all succeeded writes
 * `value` into the 8-byte aligned word at flag_offset of `flag` (remora_atomic_write: native or
 * through the target's service). A reader that sees `value` there sees the data as flushed.
 * Every segment must lie in one remote region granting REMORA_USAGE_WRITE_DESTINATION and
 * REMORA_USAGE_FLUSH_TARGET; `flag` must grant REMORA_USAGE_ATOMIC_TARGET.
 *
 * Everything is checked before anything is taken; all queue entries (and service requests)
 * are taken at once or none (REMORA_E_WOULD_BLOCK, or park with opts). Completes once, as
 * REMORA_OP_PUBLISH with bytes the data's total: status 0, or the first failing part's status
 * and its index in failed_part (parts 0 .. n-1 the writes, n the flush, n + 1 the atomic).
 * @param conn        the connection
 * @param data        the remote segments, n of them (1 .. REMORA_MAX_GATHER_PARTS)
 * @param n           how many segments
 * @param src         registered local memory holding the data (REMORA_USAGE_WRITE_SOURCE)
 * @param src_offset  where the data starts in src
 * @param flag        the region of the publishing word
 * @param flag_offset the word's offset in flag (8-byte aligned)
 * @param value       what the word becomes
 * @param type        enum remora_flush_type
 * @param method      enum remora_flush_method
 * @param opts        options (NULL: defaults); REMORA_F_AT_POST is refused
 * @return 0; REMORA_E_INVALID (segments in different regions, a bad type or method, NULL
 *         handles), OUT_OF_RANGE, ACCESS_DENIED, NOT_SUPPORTED (no flush method or atomic path),
 *         TOO_LARGE, WOULD_BLOCK, or a post's error naming its part.
 */
REMORA_API int remora_publish(remora_connection* conn, const struct remora_remote_segment* data,
                              size_t n, const remora_memory_region* src, size_t src_offset,
                              const remora_remote_region* flag, uint64_t flag_offset,
                              uint64_t value, int type, int method,
                              const struct remora_op_options* opts);

/**
 * The method remora_flush would use (enum remora_flush_method), or why none can.
 * @param conn the connection
 * @param dst the peer's region
 * @param type enum remora_flush_type
 * @param method enum remora_flush_method
 * @param chosen receives the method (enum remora_flush_method)
 * @return 0; REMORA_E_NOT_SUPPORTED naming what is missing; REMORA_E_INVALID (type, method).
 */
REMORA_API int remora_flush_method_for(const remora_connection* conn,
                                       const remora_remote_region* dst, int type, int method,
                                       int* chosen);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_PERSIST_H */

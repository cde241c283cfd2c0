// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file remora/remora_receive.h
 * @brief remora's C API: receiving for many connections: shared receive queues and receive
 * pools.
 *
 * Part of remora's C API (C11), included by remora/remora.h: include that. The conventions
 * stated at the head of remora.h (return codes, messages, handles, sized configuration structs,
 * threading) hold here.
 */
#ifndef REMORA_REMORA_RECEIVE_H
#define REMORA_REMORA_RECEIVE_H

#include <remora/remora.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Shared receive queues (remora/shared_receive_queue.hpp) */
/** @{ */

/** Shared receive queue configuration (remora::shared_receive_queue_config). */
struct remora_shared_receive_queue_config {
    size_t size;    /**< sizeof(struct remora_shared_receive_queue_config) */
    uint32_t depth; /**< receives posted at once; 0: 64 (clamped to the provider's) */
    uint64_t tag;   /**< the tag of its receives' completions */
};
/**
 * One receive queue for many connections (remora_connection_config.srq). REMORA_E_NOT_SUPPORTED
 * where the provider has none (shm, tcp;ofi_rxm and net RDM domains; tcp and sockets msg domains
 * and sockets RDM domains have one; docs/providers.md). Threading:
 * remora_shared_receive_queue_recv may run on several threads; its CQ has one reader at a time.
 * @param dom the domain
 * @param cfg its configuration (NULL: the defaults)
 * @param srq receives the queue
 * @return 0; REMORA_E_NOT_SUPPORTED where the provider has none.
 */
REMORA_API int remora_shared_receive_queue_create(
    remora_domain* dom, const struct remora_shared_receive_queue_config* cfg,
    remora_shared_receive_queue** srq);
/**
 * Frees this handle (connections using the queue keep it). NULL: nothing.
 * @param srq the queue, or NULL
 */
REMORA_API void remora_shared_receive_queue_delete(remora_shared_receive_queue* srq);
/**
 * Posts a receive into [offset, offset + len) of dst (REMORA_USAGE_RECEIVE): checked like
 * remora_recv; REMORA_E_WOULD_BLOCK when `depth` receives are posted.
 * @param srq the shared receive queue
 * @param dst registered memory (REMORA_USAGE_RECEIVE)
 * @param offset where the message goes in dst
 * @param len the room for it
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted; REMORA_E_WOULD_BLOCK at depth; the checks of remora_recv.
 */
REMORA_API int remora_shared_receive_queue_recv(remora_shared_receive_queue* srq,
                                                const remora_memory_region* dst, size_t offset,
                                                size_t len, unsigned flags, void* context);
/**
 * The queue's CQ (borrowed: lives as long as the handle), where its receives complete.
 * @param srq the shared receive queue
 * @param cq receives its CQ
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_shared_receive_queue_cq(const remora_shared_receive_queue* srq,
                                              remora_completion_queue** cq);
/**
 * Effective depth, receives posted and not reaped, connections attached (each may be NULL).
 * @param srq the shared receive queue
 * @param depth receives the effective depth, or NULL
 * @param posted receives the receives posted and not reaped, or NULL
 * @param connections receives the connections attached, or NULL
 * @return 0, or REMORA_E_INVALID for a NULL queue.
 */
REMORA_API int remora_shared_receive_queue_info(const remora_shared_receive_queue* srq,
                                                size_t* depth, size_t* posted, size_t* connections);

/** @} */

/** @name Receive pools (remora/receive_pool.hpp) */
/** @{ */

typedef struct remora_receive_pool remora_receive_pool; /**< receive buffers shared by many
                                                             connections (remora::receive_pool) */
typedef struct remora_message remora_message;           /**< a received message (remora::message) */

/** Receive pool configuration (remora::receive_pool_config). 0 fields take the defaults. */
struct remora_receive_pool_config {
    size_t size;             /**< sizeof(struct remora_receive_pool_config) */
    uint32_t buffers;        /**< buffers shared by all attached connections; 0: 64 */
    size_t buffer_size;      /**< bytes per buffer, the largest message accepted; 0: 4096 */
    uint32_t per_connection; /**< most receives posted on one connection; 0: 4 */
};

/** What a receive pool holds and has done (remora::receive_pool_stats). */
struct remora_receive_pool_stats {
    uint32_t buffers;             /**< the pool's buffers */
    uint32_t posted;              /**< receives posted on connections now */
    uint32_t held;                /**< messages delivered and not yet deleted */
    uint32_t max_held;            /**< the most ever held at once */
    uint32_t owed;                /**< receives connections are owed (back-pressure) */
    uint32_t connections;         /**< attached */
    uint64_t received;            /**< messages delivered so far */
    uint64_t backpressure_events; /**< messages that left their connection owed a receive */
    uint64_t reclaimed;           /**< receives moved off quiet connections */
};

/**
 * Creates a pool of `buffers` registered buffers shared by the connections attached to it: a
 * target's receive memory stays bounded by buffers x buffer_size however many clients it has.
 * While every buffer is held or posted elsewhere a connection has no receive posted, and its
 * peer's messages wait (back-pressure; nothing is dropped). Threading: every call may run
 * concurrently; a message may be deleted on any thread.
 * @param dom  the domain whose connections attach
 * @param cfg  configuration (NULL: defaults)
 * @param pool receives the new pool
 * @return 0, REMORA_E_INVALID (a zero count or size after the defaults), or the provider's error.
 */
REMORA_API int remora_receive_pool_create(remora_domain* dom,
                                          const struct remora_receive_pool_config* cfg,
                                          remora_receive_pool** pool);
/**
 * Frees the handle and detaches every attached connection (their receives are canceled).
 * Messages still held stay valid until deleted. NULL: nothing.
 * @param pool the pool, or NULL
 */
REMORA_API void remora_receive_pool_delete(remora_receive_pool* pool);
/**
 * Posts up to per_connection receives on `conn` from the free buffers (what the pool cannot give
 * now is owed and posted as buffers return). Accept such connections with progress_thread so
 * the library delivers their messages while remora_receive_pool_next waits; otherwise read each
 * connection's CQ (the pool's completions do not appear there) and call next with timeout 0.
 * @param pool the pool
 * @param conn an accepted connection (rq_size at least per_connection, no service depth)
 * @return 0, REMORA_E_INVALID (rq_size too small, a service depth), REMORA_E_BAD_STATE
 *         (attached already).
 */
REMORA_API int remora_receive_pool_attach(remora_receive_pool* pool, remora_connection* conn);
/**
 * Stops posting on `conn` and cancels its receives; their buffers come back as their canceled
 * completions are read, or when the connection is deleted.
 * @param pool the pool
 * @param conn an attached connection (not being deleted by another thread)
 * @return 0, or REMORA_E_INVALID for a NULL handle.
 */
REMORA_API int remora_receive_pool_detach(remora_receive_pool* pool, remora_connection* conn);
/**
 * The next message from any attached connection, in arrival order. Reply on its connection
 * (remora_message_info gives its tag), then delete the message: its buffer is posted again.
 * @param pool       the pool
 * @param timeout_ms how long to wait (0: only look)
 * @param msg        receives the message
 * @return 0, REMORA_E_TIMED_OUT when none came, REMORA_E_INVALID for a negative timeout.
 */
REMORA_API int remora_receive_pool_next(remora_receive_pool* pool, int timeout_ms,
                                        remora_message** msg);
/**
 * The pool's counters.
 * @param pool  the pool
 * @param stats receives them
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_receive_pool_stats(const remora_receive_pool* pool,
                                         struct remora_receive_pool_stats* stats);
/**
 * The message's bytes (valid until the message is deleted).
 * @param msg  the message
 * @param data receives the first byte
 * @param len  receives the length
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_message_data(const remora_message* msg, const void** data, size_t* len);
/**
 * Where the message came from and its immediate data; any out-parameter may be NULL.
 * @param msg     the message
 * @param tag     receives its connection's remora_connection_config.tag
 * @param imm     receives the immediate data (when has_imm)
 * @param has_imm receives whether it carried immediate data
 * @return 0, or REMORA_E_INVALID for a NULL message.
 */
REMORA_API int remora_message_info(const remora_message* msg, uint64_t* tag, uint64_t* imm,
                                   bool* has_imm);
/**
 * Gives the message's buffer back (posted again on the connection waiting longest) and frees
 * the handle (remora::message::release). NULL: nothing.
 * @param msg the message, or NULL
 */
REMORA_API void remora_message_delete(remora_message* msg);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_RECEIVE_H */

// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file remora/remora_cq.h
 * @brief remora's C API: completion queues, shared CQs and completion channels.
 *
 * Part of remora's C API (C11), included by remora/remora.h: include that. The conventions
 * stated at the head of remora.h (return codes, messages, handles, sized configuration structs,
 * threading) hold here.
 */
#ifndef REMORA_REMORA_CQ_H
#define REMORA_REMORA_CQ_H

#include <remora/remora.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Completions (remora/completion_queue.hpp, completion_channel.hpp) */
/** @{ */

/** What completed (remora::op). */
enum remora_op {
    REMORA_OP_UNKNOWN = 0,
    REMORA_OP_READ = 1,
    REMORA_OP_WRITE = 2,
    REMORA_OP_SEND = 3,
    REMORA_OP_RECV = 4,         /**< a send arrived (may carry immediate data) */
    REMORA_OP_REMOTE_WRITE = 5, /**< a peer's write with immediate data arrived */
    REMORA_OP_ATOMIC = 6,       /**< atomic write, compare-and-swap or fetch-add */
    REMORA_OP_FLUSH = 7,        /**< a flush: the range is visible / durable */
    REMORA_OP_PUBLISH = 8,      /**< remora_publish: its writes, flush and publishing atomic */
};

/** One completion (remora::completion). */
struct remora_completion {
    int op;        /**< enum remora_op */
    int status;    /**< 0, or REMORA_E_* (CANCELED, DISCONNECTED, ...) */
    void* context; /**< the context the operation was posted with */
    size_t bytes;  /**< bytes received (recv); otherwise the provider's report, often 0 */
    uint64_t imm;  /**< immediate data when has_imm */
    bool has_imm;  /**< imm is valid */
    uint64_t tag;  /**< remora_connection_config.tag of the connection (tells them apart on a shared
                      CQ) */
    uint32_t failed_part; /**< remora_gather_write, _scatter_read: the first part that failed */
};

/** Which CQ of a connection (remora::cq_kind). */
enum remora_cq_kind {
    REMORA_CQ = 0,  /**< sends, one-sided operations (and receives without an RCQ) */
    REMORA_RCQ = 1, /**< the separate receive CQ */
};

/**
 * Writes up to `max` completions (at most 32 a call) to `out`; *n is how many (0: none ready).
 * Completions the library consumed itself (its own messages, reclaimed unsignalled operations)
 * are not counted; after such a poll the next wait or arm returns at once (see
 * completion_queue.hpp).
 * Threading: one thread at a time polls or waits on a CQ.
 * @param cq the completion queue
 * @param out receives up to max completions
 * @param max the most completions to write (at most 32 a call)
 * @param n receives the count
 * @return 0 with *n the count written; a provider error reading the queue.
 */
REMORA_API int remora_completion_queue_poll(remora_completion_queue* cq,
                                            struct remora_completion* out, size_t max, size_t* n);
/**
 * Blocks until completions are ready or the CQ's channel fires; *ready is the count (0 is the
 * no_completion wake-up: poll and wait again). REMORA_E_TIMED_OUT after the timeout;
 * REMORA_E_BAD_STATE when the CQ's channel is shared (wait on the connection or channel).
 * No completion is lost between a poll that found nothing and this wait.
 * @param cq the completion queue
 * @param timeout_ms how long to wait, in milliseconds (0: only look)
 * @param ready receives the count of completions ready (0: a wake-up without one)
 * @return 0; REMORA_E_TIMED_OUT after the timeout; REMORA_E_BAD_STATE when the CQ's channel is
 * shared.
 */
REMORA_API int remora_completion_queue_wait(remora_completion_queue* cq, int timeout_ms,
                                            size_t* ready);
/**
 * The next completion within the timeout (polls, and waits between polls).
 * @param cq the completion queue
 * @param timeout_ms how long to wait, in milliseconds (0: only look)
 * @param out receives the completion
 * @return 0; REMORA_E_TIMED_OUT when none came; REMORA_E_BAD_STATE when the CQ's channel is shared.
 */
REMORA_API int remora_completion_queue_next(remora_completion_queue* cq, int timeout_ms,
                                            struct remora_completion* out);
/**
 * The fd for the caller's own epoll (readable when completions may be ready; -1 when the
 * caps' cq_wait_fd is false, unless a progress thread owns the CQ). Call
 * remora_completion_queue_arm() before blocking on it.
 * @param cq the completion queue
 * @param fd receives the file descriptor
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_completion_queue_fd(const remora_completion_queue* cq, int* fd);
/**
 * Arms the CQ's fd: *armed true means it is safe to block on the fd; false means completions
 * may already be ready (poll first).
 * @param cq the completion queue
 * @param armed receives whether blocking on the fd is safe
 * @return 0, or the provider's error.
 */
REMORA_API int remora_completion_queue_arm(remora_completion_queue* cq, bool* armed);
/**
 * The CQ's kind (enum remora_cq_kind) and its connection's tag.
 * @param cq the completion queue
 * @param kind receives the CQ kind (enum remora_cq_kind), or NULL
 * @param tag receives its connection's tag, or NULL
 * @return 0, or REMORA_E_INVALID for a NULL CQ.
 */
REMORA_API int remora_completion_queue_info(const remora_completion_queue* cq, int* kind,
                                            uint64_t* tag);
/**
 * The connection a CQ belongs to (remora::completion_queue::connection): for a connection's own
 * CQ or receive CQ, that connection (the caller's own handle, not a new one: do not delete it
 * here). NULL for a CQ several connections may share (remora_shared_completion_queue_queue, and a
 * connection's CQ or RCQ set up with shared_cq, shared_rcq, or srq without rcq): there each
 * completion's tag (remora_connection_config.tag) names its connection. A connection's own CQ is
 * deleted with the connection, so the answer is valid as long as the CQ is; a shared CQ reports
 * nothing of a deleted connection. Handy after remora_completion_channel_wait: the event's cq
 * names its connection.
 * Threading: not concurrent with deleting the connection.
 * @param cq the completion queue
 * @param conn receives the connection, or NULL for a shared CQ
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_completion_queue_connection(const remora_completion_queue* cq,
                                                  remora_connection** conn);

/** Shared CQ configuration (remora::shared_cq_config). */
struct remora_shared_cq_config {
    size_t size;          /**< sizeof(struct remora_shared_cq_config) */
    uint32_t entries;     /**< 0: 1024; clamped to the provider's CQ size */
    bool progress_thread; /**< read by the domain's progress thread */
    uint64_t tag;         /**< reported for a peer's write with immediate data */
};

/**
 * A CQ shared by several connections (remora_connection_config.shared_cq / shared_rcq). Attaching a
 * connection whose queue entries would overflow it fails with REMORA_E_TOO_LARGE.
 * @param dom the domain
 * @param cfg its configuration (NULL: the defaults)
 * @param scq receives the shared CQ
 * @return 0, or the provider's error.
 */
REMORA_API int remora_shared_completion_queue_create(remora_domain* dom,
                                                     const struct remora_shared_cq_config* cfg,
                                                     remora_shared_completion_queue** scq);
/**
 * Frees this handle; the CQ lives on while attached connections use it. NULL: nothing.
 * @param scq the shared CQ, or NULL
 */
REMORA_API void remora_shared_completion_queue_delete(remora_shared_completion_queue* scq);
/**
 * The shared CQ's queue (borrowed, lives as long as the handle): poll, wait, fd, arm.
 * @param scq the shared completion queue
 * @param cq receives its queue
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_shared_completion_queue_queue(const remora_shared_completion_queue* scq,
                                                    remora_completion_queue** cq);

/** What a channel wait reports (remora::channel_event). */
struct remora_channel_event {
    remora_completion_queue* cq; /**< the CQ that fired: poll it */
    int kind;                    /**< enum remora_cq_kind */
    uint64_t tag;                /**< its connection's tag */
    size_t ready;                /**< completions ready on it; 0 is a no_completion wake-up */
};

/**
 * A completion channel that connections with channel_shared may share.
 * @param ch receives the channel
 * @return 0, or the system's error (REMORA_E_PROVIDER, REMORA_E_UNKNOWN).
 */
REMORA_API int remora_completion_channel_create(remora_completion_channel** ch);
/**
 * Frees this handle (the channel lives while attached connections do). NULL: nothing.
 * @param ch the channel, or NULL
 */
REMORA_API void remora_completion_channel_delete(remora_completion_channel* ch);
/**
 * The channel's fd for the caller's epoll.
 * @param ch the completion channel
 * @param fd receives the file descriptor
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_completion_channel_fd(const remora_completion_channel* ch, int* fd);
/**
 * Blocks until an attached CQ fires and says which (REMORA_E_TIMED_OUT after the timeout).
 * Threading: one waiter at a time.
 * @param ch the completion channel
 * @param timeout_ms how long to wait, in milliseconds (0: only look)
 * @param ev receives the event
 * @return 0; REMORA_E_TIMED_OUT after the timeout.
 */
REMORA_API int remora_completion_channel_wait(remora_completion_channel* ch, int timeout_ms,
                                              struct remora_channel_event* ev);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_CQ_H */

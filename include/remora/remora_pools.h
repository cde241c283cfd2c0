// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file remora/remora_pools.h
 * @brief remora's C API: slot pools and the units held from them, bounce buffers and the copies
 * through them.
 *
 * Part of remora's C API (C11), included by remora/remora.h: include that. The conventions
 * stated at the head of remora.h (return codes, messages, handles, sized configuration structs,
 * threading) hold here.
 */
#ifndef REMORA_REMORA_POOLS_H
#define REMORA_REMORA_POOLS_H

#include <remora/remora.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Slot pools (remora/slot_pool.hpp) */
/** @{ */

/** Counts of each queue resource (remora::units). */
struct remora_units {
    uint32_t sq;           /**< send-queue entries */
    uint32_t cq;           /**< completion-queue entries */
    uint32_t recv;         /**< posted receives */
    uint32_t registration; /**< memory registrations (the caller's own demands) */
    uint32_t buffer;       /**< bounce buffers (the caller's own demands) */
};

/** What a pool does when a demand does not fit now (remora::exhaustion). */
enum remora_exhaustion {
    REMORA_EXHAUSTION_BACKPRESSURE =
        0, /**< REMORA_E_WOULD_BLOCK, or park (remora_slot_pool_acquire) */
    REMORA_EXHAUSTION_FORBID =
        1, /**< sized so it cannot happen: REMORA_E_BAD_STATE names the sizing bug */
};

/** Slot pool configuration (remora::slot_pool_config). */
struct remora_slot_pool_config {
    size_t size;                  /**< sizeof(struct remora_slot_pool_config) */
    struct remora_units capacity; /**< at least one unit */
    int policy;                   /**< enum remora_exhaustion; default back-pressure */
    size_t max_waiters;           /**< parked requests at most; 0: 1024 */
};

/**
 * Creates a pool (REMORA_E_INVALID for an empty capacity or an unknown policy; cfg is
 * required). Give it to connections through remora_connection_config.slots, or take units from it
 * yourself. Threading: every pool call may run concurrently; a lease is one thread's at a time.
 */
REMORA_API int remora_slot_pool_create(const struct remora_slot_pool_config* cfg,
                                       remora_slot_pool** pool);
/**
 * Frees this handle. The pool lives on while leases or connections hold it; parked requests
 * then still complete (cancel them first with remora_slot_pool_cancel_all). NULL: nothing.
 */
REMORA_API void remora_slot_pool_delete(remora_slot_pool* pool);
/**
 * All of `need` now, or nothing: REMORA_E_WOULD_BLOCK (back-pressure, also while requests are
 * parked: they go first), REMORA_E_BAD_STATE (forbid: the message names demand and capacity),
 * REMORA_E_TOO_LARGE (more than the capacity), REMORA_E_INVALID (empty demand).
 */
REMORA_API int remora_slot_pool_try_acquire(remora_slot_pool* pool, const struct remora_units* need,
                                            remora_held_units** lease);
/**
 * What a parked acquisition reports, exactly once: status 0 with the lease (the callee owns it:
 * remora_held_units_delete), or REMORA_E_TIMED_OUT / REMORA_E_CANCELED with lease NULL. Runs on the
 * thread that gave units back, the pool's timer thread, or remora_slot_pool_cancel_all's; it
 * must not block, and may call into the pool.
 */
typedef void (*remora_acquire_cb)(void* ctx, int status, remora_held_units* lease);
/**
 * Back-pressure: like try_acquire, but a demand that does not fit now parks in FIFO order until
 * units come back, for up to timeout_ms (REMORA_NO_DEADLINE: no deadline). On success `done`
 * runs exactly once: *parked false means it already ran on this thread, true that it runs later.
 * Refused (`done` never runs) with REMORA_E_TOO_LARGE, REMORA_E_WOULD_BLOCK (max_waiters are
 * parked), REMORA_E_BAD_STATE (forbid never parks), REMORA_E_INVALID (empty demand, NULL done,
 * negative timeout).
 */
REMORA_API int remora_slot_pool_acquire(remora_slot_pool* pool, const struct remora_units* need,
                                        int timeout_ms, remora_acquire_cb done, void* ctx,
                                        bool* parked);
/** Ends every parked request with REMORA_E_CANCELED (their callbacks run here); *n how many. */
REMORA_API int remora_slot_pool_cancel_all(remora_slot_pool* pool, size_t* n);
/** Units free now and requests parked now (either out-parameter may be NULL). */
REMORA_API int remora_slot_pool_available(const remora_slot_pool* pool, struct remora_units* free,
                                          size_t* waiting);
/** The units a lease holds. */
REMORA_API int remora_held_units_held(const remora_held_units* lease, struct remora_units* held);
/**
 * Gives the lease's units back and frees the handle (NULL: nothing). Parked requests the units
 * satisfy run their callbacks on this thread before it returns.
 */
REMORA_API void remora_held_units_delete(remora_held_units* lease);

/** @} */

/** @name Bounce buffers (remora/buffer_pool.hpp) */
/** @{ */

/** Buffer pool configuration (remora::buffer_pool_config). */
struct remora_buffer_pool_config {
    size_t size;        /**< sizeof(struct remora_buffer_pool_config) */
    size_t buffers;     /**< 0: 64 */
    size_t buffer_size; /**< bytes each; 0: 4096 */
    unsigned usage;     /**< enum remora_usage; 0: WRITE_SRC | SEND */
};
/** Registers `buffers` x `buffer_size` bytes on dom for remora_connection_config.bounce. */
REMORA_API int remora_buffer_pool_create(remora_domain* dom,
                                         const struct remora_buffer_pool_config* cfg,
                                         remora_buffer_pool** pool);
/** Frees this handle (connections using the pool keep it). NULL: nothing. */
REMORA_API void remora_buffer_pool_delete(remora_buffer_pool* pool);
/** Buffers free now, of `capacity`, each `buffer_size` bytes (out-parameters may be NULL). */
REMORA_API int remora_buffer_pool_info(const remora_buffer_pool* pool, size_t* available,
                                       size_t* capacity, size_t* buffer_size);

/**
 * Copies [data, data + len) into a bounce buffer of remora_connection_config.bounce and writes it
 * from there: `data` is free when the call returns. REMORA_E_WOULD_BLOCK when the pool or the queue
 * is exhausted, TOO_LARGE past the pool's buffer_size, BAD_STATE without a pool.
 */
REMORA_API int remora_write_copy(remora_connection* conn, const remora_remote_region* dst,
                                 uint64_t dst_offset, const void* data, size_t len,
                                 const struct remora_op_options* opts);
/** remora_write_copy's send. */
REMORA_API int remora_send_copy(remora_connection* conn, const void* data, size_t len,
                                const struct remora_op_options* opts);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_POOLS_H */

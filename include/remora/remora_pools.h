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

/** @name Registration cache (remora/registration_cache.hpp) */
/** @{ */

typedef struct remora_registration_cache remora_registration_cache; /**< reused registrations */
typedef struct remora_cached_region remora_cached_region; /**< a registration from the cache */

/** What a registration cache has done (remora::registration_cache_stats). */
struct remora_registration_cache_stats {
    uint64_t hits;      /**< get() served from the cache */
    uint64_t misses;    /**< registrations made */
    uint64_t evictions; /**< registrations dropped to stay within capacity */
    size_t entries;     /**< cached now */
};

/**
 * Creates a cache of registrations of user memory on `dom`, so memory used again and again is
 * registered once. It evicts registrations nobody holds, least recently used first, past
 * `capacity`. Threading: every call may run concurrently.
 * @param dom      where it registers
 * @param capacity registrations kept at most (0: 64)
 * @param cache    receives the new cache
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_registration_cache_create(remora_domain* dom, size_t capacity,
                                                remora_registration_cache** cache);
/**
 * Frees the cache; registrations still held by remora_cached_region handles live until those are
 * deleted. NULL: nothing.
 * @param cache the cache, or NULL
 */
REMORA_API void remora_registration_cache_delete(remora_registration_cache* cache);
/**
 * A registration covering [addr, addr + len) with at least `usage`: cached, or made and cached.
 * The handle keeps it alive: use remora_cached_region_region for the region and the range's
 * offset in it.
 * @param cache  the cache
 * @param addr   the memory
 * @param len    its length (> 0)
 * @param usage  enum remora_usage bits (at least one)
 * @param region receives the handle
 * @return 0, REMORA_E_INVALID (NULL addr, len 0, no or unknown usage), or the provider's error.
 */
REMORA_API int remora_registration_cache_get(remora_registration_cache* cache, void* addr,
                                             size_t len, unsigned usage,
                                             remora_cached_region** region);
/**
 * Drops every cached registration overlapping [addr, addr + len): call it before freeing or
 * unmapping that memory. Each is deregistered when its last handle goes.
 * @param cache the cache
 * @param addr  the memory
 * @param len   its length
 * @return 0, or REMORA_E_INVALID for a NULL cache, or a NULL addr with a length.
 */
REMORA_API int remora_registration_cache_invalidate(remora_registration_cache* cache,
                                                    const void* addr, size_t len);
/**
 * The cache's counters.
 * @param cache the cache
 * @param stats receives them
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_registration_cache_stats(const remora_registration_cache* cache,
                                               struct remora_registration_cache_stats* stats);
/**
 * The registered region (borrowed: lives as long as the handle) and where the requested range
 * starts in it: use (region, offset) as the local side of an operation.
 * @param cached the handle from remora_registration_cache_get
 * @param region receives the region
 * @param offset receives the range's offset in it
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_cached_region_region(const remora_cached_region* cached,
                                           const remora_memory_region** region, size_t* offset);
/**
 * Lets go of the registration (the cache may keep it). NULL: nothing.
 * @param cached the handle, or NULL
 */
REMORA_API void remora_cached_region_delete(remora_cached_region* cached);
/**
 * remora_gather_write from memory the caller has not registered: [src, src + len) is registered
 * through `cache` (reused while cached) and held by the operation until it completes; len must
 * be the segments' total. With remora_connection_config.slots the operation also draws one
 * registration unit. The rest as remora_gather_write.
 * @param conn  the connection
 * @param dst   the remote segments
 * @param n     how many
 * @param src   the data (valid until the completion)
 * @param len   its length
 * @param cache a cache of the connection's domain
 * @param opts  options (NULL: defaults)
 * @return 0, remora_gather_write's errors, REMORA_E_INVALID for a cache of another domain, or
 *         the registration's error.
 */
REMORA_API int remora_gather_write_cached(remora_connection* conn,
                                          const struct remora_remote_segment* dst, size_t n,
                                          void* src, size_t len, remora_registration_cache* cache,
                                          const struct remora_op_options* opts);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_POOLS_H */

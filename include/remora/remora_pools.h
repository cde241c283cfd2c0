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
 * @param cfg its configuration (required)
 * @param pool receives the pool
 * @return 0; REMORA_E_INVALID for an empty capacity or an unknown policy.
 */
REMORA_API int remora_slot_pool_create(const struct remora_slot_pool_config* cfg,
                                       remora_slot_pool** pool);
/**
 * Frees this handle. The pool lives on while leases or connections hold it; parked requests
 * then still complete (cancel them first with remora_slot_pool_cancel_all). NULL: nothing.
 * @param pool the pool, or NULL
 */
REMORA_API void remora_slot_pool_delete(remora_slot_pool* pool);
/**
 * All of `need` now, or nothing: REMORA_E_WOULD_BLOCK (back-pressure, also while requests are
 * parked: they go first), REMORA_E_BAD_STATE (forbid: the message names demand and capacity),
 * REMORA_E_TOO_LARGE (more than the capacity), REMORA_E_INVALID (empty demand).
 * @param pool the pool
 * @param need the units asked for
 * @param lease receives the held units
 * @return 0; REMORA_E_WOULD_BLOCK, REMORA_E_BAD_STATE (forbid), REMORA_E_TOO_LARGE,
 * REMORA_E_INVALID, as stated above.
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
 * @param pool the pool
 * @param need the units asked for
 * @param timeout_ms how long it may park, in ms (REMORA_NO_DEADLINE: without a deadline)
 * @param done called exactly once with the outcome
 * @param ctx passed to done
 * @param parked receives whether the request parked (done runs later)
 * @return 0 (done runs exactly once); REMORA_E_TOO_LARGE, REMORA_E_WOULD_BLOCK, REMORA_E_BAD_STATE,
 * REMORA_E_INVALID (done never runs).
 */
REMORA_API int remora_slot_pool_acquire(remora_slot_pool* pool, const struct remora_units* need,
                                        int timeout_ms, remora_acquire_cb done, void* ctx,
                                        bool* parked);
/**
 * Ends every parked request with REMORA_E_CANCELED (their callbacks run here); *n how many.
 * @param pool the pool
 * @param n receives how many ended, or NULL
 * @return 0, or REMORA_E_INVALID for a NULL pool.
 */
REMORA_API int remora_slot_pool_cancel_all(remora_slot_pool* pool, size_t* n);
/**
 * Units free now and requests parked now (either out-parameter may be NULL).
 * @param pool the pool
 * @param free receives the units free now, or NULL
 * @param waiting receives the requests parked now, or NULL
 * @return 0, or REMORA_E_INVALID for a NULL pool.
 */
REMORA_API int remora_slot_pool_available(const remora_slot_pool* pool, struct remora_units* free,
                                          size_t* waiting);
/**
 * The units a lease holds.
 * @param lease the held units
 * @param held receives the units
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_held_units_held(const remora_held_units* lease, struct remora_units* held);
/**
 * Gives the lease's units back and frees the handle (NULL: nothing). Parked requests the units
 * satisfy run their callbacks on this thread before it returns.
 * @param lease the held units, or NULL
 */
REMORA_API void remora_held_units_delete(remora_held_units* lease);

/** @} */

/** @name Parked posts of a connection */
/** @{ */

/**
 * Ends every parked post of conn with REMORA_E_CANCELED; *n how many (may be NULL). A post
 * whose try is under way is waited for and counted only if it parks again.
 * @param conn the connection
 * @param n receives how many ended, or NULL
 * @return 0, or REMORA_E_INVALID for a NULL connection.
 */
REMORA_API int remora_connection_cancel_parked(remora_connection* conn, size_t* n);
/**
 * Posts of conn parked now.
 * @param conn the connection
 * @param n receives the count
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_connection_parked(const remora_connection* conn, size_t* n);

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
/**
 * Registers `buffers` x `buffer_size` bytes on dom for remora_connection_config.bounce.
 * @param dom the domain
 * @param cfg its configuration (NULL: the defaults)
 * @param pool receives the pool
 * @return 0; REMORA_E_INVALID (unknown usage bits), or the registration's error.
 */
REMORA_API int remora_buffer_pool_create(remora_domain* dom,
                                         const struct remora_buffer_pool_config* cfg,
                                         remora_buffer_pool** pool);
/**
 * Frees this handle (connections using the pool keep it). NULL: nothing.
 * @param pool the pool, or NULL
 */
REMORA_API void remora_buffer_pool_delete(remora_buffer_pool* pool);
/**
 * Buffers free now, of `capacity`, each `buffer_size` bytes (out-parameters may be NULL).
 * @param pool the pool
 * @param available receives the buffers free now, or NULL
 * @param capacity receives the pool's buffers, or NULL
 * @param buffer_size receives each buffer's size, or NULL
 * @return 0, or REMORA_E_INVALID for a NULL pool.
 */
REMORA_API int remora_buffer_pool_info(const remora_buffer_pool* pool, size_t* available,
                                       size_t* capacity, size_t* buffer_size);

/**
 * Copies [data, data + len) into a bounce buffer of remora_connection_config.bounce and writes it
 * from there: `data` is free when the call returns. REMORA_E_WOULD_BLOCK when the pool or the queue
 * is exhausted, TOO_LARGE past the pool's buffer_size, BAD_STATE without a pool.
 * @param conn the connection
 * @param dst the peer's region
 * @param dst_offset where the operation starts in dst
 * @param data the bytes to write (free when the call returns)
 * @param len their length
 * @param opts the options (NULL: the defaults)
 * @return 0 once posted; REMORA_E_WOULD_BLOCK, REMORA_E_TOO_LARGE, REMORA_E_BAD_STATE (no pool),
 * and the checks of remora_write.
 */
REMORA_API int remora_write_copy(remora_connection* conn, const remora_remote_region* dst,
                                 uint64_t dst_offset, const void* data, size_t len,
                                 const struct remora_op_options* opts);
/**
 * remora_write_copy's send.
 * @param conn the connection
 * @param data the bytes to send (free when the call returns)
 * @param len their length
 * @param opts the options (NULL: the defaults)
 * @return 0 once posted; the errors of remora_write_copy.
 */
REMORA_API int remora_send_copy(remora_connection* conn, const void* data, size_t len,
                                const struct remora_op_options* opts);

/** A piece of registered local memory: [offset, offset + length) of `region`
 *  (remora::local_segment). */
struct remora_local_segment {
    const remora_memory_region* region; /**< registered; it must outlive the operation */
    size_t offset;                      /**< where the piece starts in it */
    size_t length;                      /**< bytes of the piece */
};
/**
 * Writes the `n` registered local segments, in order, into dst from dst_offset as one write
 * chosen by the connection's limits (remora::write_or_copy): with at most
 * remora_connection_config.max_sge segments, one scatter-gather write straight from them (the
 * segments must stay untouched until its completion); with more, each segment is checked as a
 * write's source, then their bytes are copied into one bounce buffer of
 * remora_connection_config.bounce and written from it (the segments are free when the call
 * returns). Completes once, as REMORA_OP_WRITE.
 * @param conn the connection; with more than max_sge segments, set up with a bounce pool
 * @param dst the peer's region (REMORA_USAGE_WRITE_DESTINATION)
 * @param dst_offset where the write starts in dst
 * @param src the local segments (REMORA_USAGE_WRITE_SOURCE)
 * @param n how many
 * @param opts the options (NULL: the defaults)
 * @return 0 once posted; REMORA_E_INVALID (src NULL with n > 0, a segment without a region or of
 * another domain), REMORA_E_ACCESS_DENIED, REMORA_E_OUT_OF_RANGE (a segment), and the errors of
 * remora_write_ex (at most max_sge segments) or remora_write_copy (more).
 */
REMORA_API int remora_write_or_copy(remora_connection* conn, const remora_remote_region* dst,
                                    uint64_t dst_offset, const struct remora_local_segment* src,
                                    size_t n, const struct remora_op_options* opts);

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
/**
 * remora_scatter_read into memory the caller has not registered, as remora_gather_write_cached:
 * [dst, dst + len) is registered through `cache` (REMORA_USAGE_READ_DESTINATION) and held by
 * the operation, with the same registration unit and errors. Parameters as
 * remora_gather_write_cached's, src (the remote segments) and dst (the memory) swapped.
 */
REMORA_API int remora_scatter_read_cached(remora_connection* conn,
                                          const struct remora_remote_segment* src, size_t n,
                                          void* dst, size_t len, remora_registration_cache* cache,
                                          const struct remora_op_options* opts);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_POOLS_H */

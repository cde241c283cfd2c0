// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file remora/remora_replica.h
 * @brief remora's C API: the replica set, one write made durable on k of N targets.
 *
 * Part of remora's C API (C11), included by remora/remora.h: include that. The conventions
 * stated at the head of remora.h (return codes, messages, handles, sized configuration structs,
 * threading) hold here; remora/replica_set.hpp states the set's contract in full, and it holds
 * here too. In short: each write goes to every live member as a write followed by a flush (as
 * remora_flush), and completes once, when `quorum` of the members live at its post have
 * completed the flush. A member whose write or flush fails, or whose oldest operation waits past
 * behind_limit_ms, is dropped (or the application drops it: remora_replica_set_drop): the set
 * closes its connection, reports REMORA_REPLICA_EVENT_DROPPED once and records the ranges written
 * since. With fewer live members than the quorum, every write that can no longer reach it fails
 * and later writes are refused with REMORA_E_BAD_STATE. remora_replica_set_rejoin brings a
 * dropped member back over a new connection: what it missed (or its whole range) is copied into
 * it from a live member while writes go on, and then it counts again.
 *
 * Members: every member's connection is opened on one domain (the source memory of a write is
 * registered there) and is read by someone: remora_connection_config.progress_thread, or the
 * application's polling of its CQs (the set's operations complete through callbacks, which run
 * where the CQs are read). Each member's send queue must hold 2 x depth operations (a write and a
 * read-after-write flush per write in flight; with GPSPM: depth, and a
 * remora_persistence_config.service_depth of at least depth): remora_replica_set_create checks.
 * A member's connection handle must outlive its membership: delete it only once the member is
 * dropped and remora_replica_set_pending says 0, or after the set.
 *
 * Threading: remora_replica_set_write, _drop, _rejoin and the observers may run from any number
 * of threads at once; _poll and _wait from one thread at a time. The set runs one thread of its
 * own (it closes dropped members' connections, watches behind_limit_ms and copies for rejoin).
 * Callbacks (a write's remora_replica_completion_cb, the configuration's on_event) run on a
 * member CQ's reading thread or on the set's thread, one completion each, and must not block;
 * from them the application may call remora_replica_set_write (never parking: a full set is
 * REMORA_E_WOULD_BLOCK there), but must not delete the set.
 */
#ifndef REMORA_REMORA_REPLICA_H
#define REMORA_REMORA_REPLICA_H

#include <remora/remora.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Replica sets (remora/replica_set.hpp) */
/** @{ */

typedef struct remora_replica_set remora_replica_set; /**< writes made durable on k of N */

/** The most members a set has (remora::max_replicas). */
#define REMORA_MAX_REPLICAS 16

/** A member of a replica set: a connection to a target and the target's region it writes. */
struct remora_replica {
    /** Established, open, in the set's domain; not owned (see the members' rule above). */
    remora_connection* conn;
    /** The target's region (REMORA_USAGE_WRITE_DESTINATION and REMORA_USAGE_FLUSH_TARGET, and
     *  REMORA_USAGE_READ_SOURCE to be a source for rejoin); copied: delete it whenever. */
    const remora_remote_region* region;
};

/** Where a member stands (remora::replica_state). */
enum remora_replica_state {
    REMORA_REPLICA_LIVE = 0,        /**< written, and counted for the quorum */
    REMORA_REPLICA_DROPPED = 1,     /**< out of the set: written no more, its connection closed */
    REMORA_REPLICA_CATCHING_UP = 2, /**< rejoining: written and copied into, not counted yet */
};

/** What a write did on one member (remora::replica_outcome). */
enum remora_replica_outcome {
    REMORA_REPLICA_NOT_WRITTEN = 0, /**< the member was dropped when the write was posted */
    REMORA_REPLICA_PENDING = 1,     /**< still in flight when the write completed */
    REMORA_REPLICA_DURABLE = 2,     /**< its flush completed: durable (or visible) there */
    REMORA_REPLICA_FAILED = 3,      /**< its write or flush failed, or it was dropped meanwhile */
};

/** A write's completion (remora::replica_completion). */
struct remora_replica_completion {
    /** 0: durable on at least the quorum. Otherwise the quorum became unreachable: the REMORA_E_*
     *  code of the member failure that made it so (DISCONNECTED, CANCELED, TIMED_OUT for a member
     *  dropped behind, ...), or REMORA_E_BAD_STATE when members were dropped without an error of
     *  an operation (remora_replica_set_drop). */
    int status;
    void* context;    /**< the write's context */
    uint64_t offset;  /**< where the write went in the members' regions */
    size_t length;    /**< its bytes */
    uint32_t durable; /**< members whose outcome is REMORA_REPLICA_DURABLE (counted or not) */
    /** Members of the set: the entries of outcome in use. */
    uint32_t replicas;
    /** Per member, by index: enum remora_replica_outcome. */
    int outcome[REMORA_MAX_REPLICAS];
};

/**
 * Gets a write's completion instead of remora_replica_set_poll (see Threading above): runs
 * exactly once, with c->context the write's context; `c` is valid during the call.
 */
typedef void (*remora_replica_completion_cb)(const struct remora_replica_completion* c);

/** What happened to the set (remora::replica_event_kind). */
enum remora_replica_event_kind {
    REMORA_REPLICA_EVENT_DROPPED = 0,         /**< a member left the set (status: why) */
    REMORA_REPLICA_EVENT_REJOINED = 1,        /**< a member caught up and counts again */
    REMORA_REPLICA_EVENT_QUORUM_LOST = 2,     /**< fewer than the quorum are live: writes fail */
    REMORA_REPLICA_EVENT_QUORUM_REGAINED = 3, /**< the quorum is live again: writes are taken */
};

/** An event of the set, reported once each (remora::replica_event). */
struct remora_replica_event {
    int kind;       /**< enum remora_replica_event_kind */
    uint32_t index; /**< the member (DROPPED, REJOINED) */
    /** Why the member was dropped (DROPPED, and QUORUM_LOST: the drop that lost it): a
     *  REMORA_E_* code (REMORA_E_BAD_STATE for remora_replica_set_drop); 0 for REJOINED and
     *  QUORUM_REGAINED. */
    int status;
    void* context; /**< remora_replica_set_config.event_context */
};

/**
 * Gets the set's events (see Threading above): runs once per event; `e` is valid during the
 * call.
 */
typedef void (*remora_replica_event_cb)(const struct remora_replica_event* e);

/** How a set is formed (remora::replica_set_config). 0 / NULL fields take the defaults. */
struct remora_replica_set_config {
    size_t size; /**< sizeof(struct remora_replica_set_config) */
    /** Durable members a write needs: 0 (default) all members; 1 any; members / 2 + 1 a
     *  majority. At most the members. */
    uint32_t quorum;
    /** Writes in flight at most (posted and not yet completed, or completed and not yet
     *  polled): a further write is REMORA_E_WOULD_BLOCK, or parks (park_ms). 1 to 4096; 0: 16. */
    uint32_t depth;
    /** What each member's flush guarantees: enum remora_flush_type (remora_persist.h);
     *  0: REMORA_FLUSH_STRONGEST, the strongest its region offers. */
    int flush_type;
    /** How: enum remora_flush_method (remora_persist.h); 0: REMORA_FLUSH_AUTOMATIC, the cheapest
     *  the member's region offers (GPSPM needs a service depth on its connection). */
    int flush_method;
    /** A member whose write or flush has waited this long is dropped (REMORA_E_TIMED_OUT);
     *  0: 5000. */
    uint32_t behind_limit_ms;
    /** Rejoining copies in pieces of this many bytes through a buffer of the set's; 0: 1 MiB. */
    size_t copy_chunk;
    /** Called once per event (see Threading above); NULL: events are not reported. */
    remora_replica_event_cb on_event;
    void* event_context; /**< remora_replica_event.context */
};

/**
 * Forms a set of every member, all live. The set spans the shortest member region
 * (remora_replica_set_range).
 * @param members the members: conn and region each, in the set's index order
 * @param n       how many (1 .. REMORA_MAX_REPLICAS)
 * @param cfg     its configuration (NULL: the defaults)
 * @param set     receives the set
 * @return 0; REMORA_E_INVALID for no or too many members, a NULL conn or region, a closed
 *         connection, members of several domains, a quorum above the members, a depth out of
 *         range, a bad flush type or method, a region without WRITE_DESTINATION or FLUSH_TARGET,
 *         a bad cfg->size; REMORA_E_TOO_LARGE when a member's queues cannot hold `depth` writes
 *         (the message says what to raise); REMORA_E_NOT_SUPPORTED (as remora_flush_method_for)
 *         for a member whose region cannot be flushed as asked.
 */
REMORA_API int remora_replica_set_create(const struct remora_replica* members, size_t n,
                                         const struct remora_replica_set_config* cfg,
                                         remora_replica_set** set);
/**
 * Waits for every operation of the set to end (the members' CQs must still be read), stops its
 * thread and frees the set. Completions not polled are dropped; callbacks still due run first.
 * Not from one of the set's callbacks. NULL: nothing.
 * @param set the set, or NULL
 */
REMORA_API void remora_replica_set_delete(remora_replica_set* set);

/**
 * Writes `len` bytes of `src` from src_offset to [offset, offset + len) of every live and
 * catching-up member, each followed by its flush; completes once, to `callback` or, without one,
 * to remora_replica_set_poll. The bytes of `src` must stay unchanged and registered until then.
 * @param set        the set
 * @param offset     where the bytes go in the members' regions
 * @param src        registered memory of the set's domain (REMORA_USAGE_WRITE_SOURCE)
 * @param src_offset where the bytes start in src
 * @param len        how many (> 0)
 * @param context    returned in the completion
 * @param callback   gets the completion (runs exactly once when this returns 0); NULL: poll it
 * @param park_ms    0: a full set is REMORA_E_WOULD_BLOCK at once; else wait up to this many ms
 *                   (REMORA_NO_DEADLINE: without a deadline) for room, never from a callback
 * @return 0 once posted to every member it goes to (a member whose post fails is dropped, and
 *         counts as failed); otherwise nothing is posted and the callback never runs:
 *         REMORA_E_INVALID (a zero length, `src` of another domain, a negative park_ms),
 *         REMORA_E_ACCESS_DENIED (`src` without WRITE_SOURCE), REMORA_E_OUT_OF_RANGE (past the
 *         set's range or `src`), REMORA_E_BAD_STATE (fewer live members than the quorum),
 *         REMORA_E_WOULD_BLOCK (`depth` writes in flight), REMORA_E_TIMED_OUT (parked).
 */
REMORA_API int remora_replica_set_write(remora_replica_set* set, uint64_t offset,
                                        const remora_memory_region* src, size_t src_offset,
                                        size_t len, void* context,
                                        remora_replica_completion_cb callback, int park_ms);
/**
 * Writes up to `max` completions of writes posted without a callback to `out`, oldest first; *n
 * is how many (0: none ready). Each frees its place in the set's depth.
 * @param set the set
 * @param out receives up to max completions
 * @param max the most completions to write
 * @param n   receives the count
 * @return 0 with *n the count written; REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_replica_set_poll(remora_replica_set* set,
                                       struct remora_replica_completion* out, size_t max,
                                       size_t* n);
/**
 * Waits until a completion can be polled.
 * @param set        the set
 * @param timeout_ms how long to wait, in milliseconds (0: only look)
 * @return 0 once one can be polled; REMORA_E_TIMED_OUT when none came.
 */
REMORA_API int remora_replica_set_wait(remora_replica_set* set, int timeout_ms);
/**
 * Waits until no write is in flight: every one completed, its member operations ended and its
 * callback returned (a completion left to poll counts as delivered).
 * @param set        the set
 * @param timeout_ms how long to wait, in milliseconds (0: only look)
 * @return 0; REMORA_E_TIMED_OUT with writes still in flight.
 */
REMORA_API int remora_replica_set_drain(remora_replica_set* set, int timeout_ms);

/**
 * Drops member `index` as for a failure (its event's status REMORA_E_BAD_STATE): for maintenance,
 * or a target the application knows is gone. The set closes the member's connection.
 * @param set   the set
 * @param index the member
 * @return 0; REMORA_E_INVALID for no such member; REMORA_E_BAD_STATE when it is dropped already.
 */
REMORA_API int remora_replica_set_drop(remora_replica_set* set, size_t index);
/**
 * Brings dropped member `index` back over `conn` (a new connection to the same target, or to one
 * in its place, in the set's domain) and `region`: it is written from now on, the ranges it
 * missed (or, with `whole`, its whole range) are copied into it from a live member by the set's
 * thread while writes go on, and once nothing is left to copy it is live again
 * (REMORA_REPLICA_EVENT_REJOINED). A failure while copying drops it again. Waits, up to
 * behind_limit_ms, for the operations on its old connection to end. Once this returns 0 the set
 * no longer uses the old connection: its handle is the application's to delete. `conn` follows
 * the members' rule above.
 * @param set    the set
 * @param index  the member
 * @param conn   its new connection
 * @param region its target's region (copied)
 * @param whole  copy the whole range rather than what the set recorded since the member left:
 *               for a target that lost its memory, or another target in its place
 * @return 0 once it is catching up; REMORA_E_INVALID for no such member, a NULL conn or region,
 *         or `conn` or `region` as remora_replica_set_create refuses them; REMORA_E_BAD_STATE
 *         when the member is not dropped, its old connection still has operations in flight, or
 *         no member is live to copy from.
 */
REMORA_API int remora_replica_set_rejoin(remora_replica_set* set, size_t index,
                                         remora_connection* conn,
                                         const remora_remote_region* region, bool whole);

/**
 * Where member `index` stands.
 * @param set   the set
 * @param index the member
 * @param state receives enum remora_replica_state
 * @return 0; REMORA_E_INVALID for a NULL argument or no such member.
 */
REMORA_API int remora_replica_set_state(const remora_replica_set* set, size_t index, int* state);
/**
 * Members of the set.
 * @param set the set
 * @param n   receives the count
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_replica_set_size(const remora_replica_set* set, size_t* n);
/**
 * Members live now (counted for the quorum).
 * @param set the set
 * @param n   receives the count
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_replica_set_live(const remora_replica_set* set, size_t* n);
/**
 * Durable members a write needs (the configuration's quorum, 0 resolved to the members).
 * @param set    the set
 * @param quorum receives it
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_replica_set_quorum(const remora_replica_set* set, uint32_t* quorum);
/**
 * Bytes writable: the shortest member region at create.
 * @param set   the set
 * @param bytes receives the range
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_replica_set_range(const remora_replica_set* set, uint64_t* bytes);
/**
 * Writes not yet completed and delivered (to their callback, or to the poll queue).
 * @param set the set
 * @param n   receives the count
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_replica_set_in_flight(const remora_replica_set* set, size_t* n);
/**
 * Operations of member `index` still in flight (its writes, flushes and copies).
 * @param set   the set
 * @param index the member
 * @param n     receives the count
 * @return 0; REMORA_E_INVALID for a NULL argument or no such member.
 */
REMORA_API int remora_replica_set_pending(const remora_replica_set* set, size_t index, size_t* n);
/**
 * Bytes member `index` is known to miss (recorded while dropped, or left to copy).
 * @param set   the set
 * @param index the member
 * @param bytes receives the count
 * @return 0; REMORA_E_INVALID for a NULL argument or no such member.
 */
REMORA_API int remora_replica_set_missing(const remora_replica_set* set, size_t index,
                                          uint64_t* bytes);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_REPLICA_H */

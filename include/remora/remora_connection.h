// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file remora/remora_connection.h
 * @brief remora's C API: listeners, connection requests, connections, RDM peers and their
 * operations.
 *
 * Part of remora's C API (C11), included by remora/remora.h: include that. The conventions
 * stated at the head of remora.h (return codes, messages, handles, sized configuration structs,
 * threading) hold here.
 */
#ifndef REMORA_REMORA_CONNECTION_H
#define REMORA_REMORA_CONNECTION_H

#include <remora/remora.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Connections (remora/connection.hpp, listener.hpp) */
/** @{ */

struct remora_persistence_config; /* remora_persist.h */

/** Connection configuration (remora::connection_config). 0 / NULL fields take the defaults. */
struct remora_connection_config {
    size_t size;         /**< sizeof(struct remora_connection_config) */
    uint32_t sq_size;    /**< send-queue depth; 0: 64 */
    uint32_t rq_size;    /**< receive-queue depth; 0: 64 */
    uint32_t cq_size;    /**< 0: sq_size (+ rq_size without an RCQ) */
    bool rcq;            /**< receives complete on a separate receive CQ */
    uint32_t rcq_size;   /**< 0: rq_size */
    bool channel_shared; /**< CQ and RCQ share one channel: remora_connection_wait */
    remora_completion_channel*
        shared_channel;          /**< with channel_shared: this channel (else its own) */
    uint32_t max_sge;            /**< 0: 1 */
    uint32_t connect_timeout_ms; /**< 0: 5000 */
    bool progress_thread;        /**< the domain's progress thread drives this connection */
    uint64_t tag;                /**< reported in completions and channel events */
    remora_shared_completion_queue*
        shared_cq; /**< complete on this shared CQ instead of one's own */
    remora_shared_completion_queue* shared_rcq; /**< receives on this shared CQ (implies rcq) */
    uint32_t signal_every;                      /**< selective signalling; 0: 1 (every operation) */
    /** A budget shared with other connections: every operation also takes {sq 1, cq 1} (a
     *  receive {recv 1, cq 1}) from this pool at post and gives them back when its completion
     *  is read. Exhaustion follows the pool's policy: REMORA_E_WOULD_BLOCK under back-pressure
     *  (or a parked post, see remora_op_options), REMORA_E_BAD_STATE under forbid. Refused with
     *  signal_every > 1. The connection holds the pool: delete the handle whenever. */
    remora_slot_pool* slots;
    /** Bounce buffers for remora_write_copy and remora_send_copy (remora_pools.h; may be
     *  shared). The connection holds the pool: delete the handle whenever. */
    remora_buffer_pool* bounce;
    /** Take incoming messages from this shared receive queue (remora_shared_receive_queue_create)
     * instead of receives of the connection's own: remora_recv is refused (REMORA_E_BAD_STATE).
     * With rcq, they complete on the connection's own receive CQ, else on the queue's. Refused
     *  (REMORA_E_INVALID) with a service depth (persist), channel_shared or progress_thread. */
    remora_shared_receive_queue* srq;
    /** The persistence layer's setup (remora_persist.h: GPSPM flushes, service atomics);
     *  NULL: none. Read during the call that takes this configuration. */
    const struct remora_persistence_config* persist;
    /** No channel (remora::channel_mode::none): the CQs have no wait object, the cheapest to
     *  busy-poll; waits poll and the CQs' fds are -1. Refused (REMORA_E_INVALID) with
     *  channel_shared. */
    bool no_channel;
    /** RDM peers: lost (REMORA_CONN_LOST, then REMORA_E_DISCONNECTED) after this many ms
     *  without a liveness probe answered; 0: off; REMORA_E_NOT_SUPPORTED on MSG (see
     *  remora::connection_config::liveness). */
    uint32_t liveness_ms;
    /** Never move this connection to the same-host path (remora::connection_config::same_host
     *  false); false (the default): it moves when both domains allow it (neither was opened with
     *  remora_domain_config::no_same_host) and the peer is another process of this host and
     *  user. */
    bool no_same_host;
};

/** Connection events (remora::conn_event). */
enum remora_conn_event {
    REMORA_CONN_ESTABLISHED = 0,
    REMORA_CONN_CLOSED = 1,
    REMORA_CONN_LOST = 2,
    REMORA_CONN_REJECTED = 3,
    REMORA_CONN_REFUSED = 4,
    REMORA_CONN_UNREACHABLE = 5,
};

/**
 * Listens on host:port (port 0 picks a free one: remora_listener_port()).
 * Threading: one thread at a time gets requests; requests may be answered on any thread.
 * @param dom the domain
 * @param host the address (name or numeric)
 * @param port the port (0: a free one)
 * @param lst receives the listener
 * @return 0; the provider's error (address in use, unreachable address).
 */
REMORA_API int remora_listener_create(remora_domain* dom, const char* host, uint16_t port,
                                      remora_listener** lst);
/**
 * Stops listening and frees. NULL: nothing.
 * @param lst the listener, or NULL
 */
REMORA_API void remora_listener_delete(remora_listener* lst);
/**
 * The bound port.
 * @param lst the listener
 * @param port receives the bound port
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_listener_port(const remora_listener* lst, uint16_t* port);
/**
 * An fd readable when a request may be waiting.
 * @param lst the listener
 * @param fd receives the file descriptor
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_listener_fd(const remora_listener* lst, int* fd);
/**
 * The next connection request, or REMORA_E_TIMED_OUT.
 * @param lst the listener
 * @param timeout_ms how long to wait, in milliseconds (0: only look)
 * @param req receives the request
 * @return 0; REMORA_E_TIMED_OUT when none came.
 */
REMORA_API int remora_listener_get_request(remora_listener* lst, int timeout_ms,
                                           remora_connection_request** req);
/**
 * The private data the client sent with its request (valid while the request lives).
 * @param req the connection request
 * @param data receives the bytes (NULL when there are none)
 * @param len receives their length
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_connection_request_private_data(const remora_connection_request* req,
                                                      const void** data, size_t* len);
/**
 * Accepts with `pdata` (at most caps.cm_data_size bytes) and waits until the connection is
 * established. Oversize private data is REMORA_E_TOO_LARGE and leaves the request answerable,
 * as do the C layer's own refusals (a bad cfg->size, NULL pdata with a length); a configuration
 * the connection refuses rejects the request (the client sees REMORA_E_REJECTED). Free the
 * request afterwards either way.
 * @param req the connection request
 * @param cfg its configuration (NULL: the defaults)
 * @param pdata private data to send (may be NULL when pdata_len is 0)
 * @param pdata_len its length in bytes
 * @param conn receives the connection
 * @return 0; REMORA_E_TOO_LARGE (oversize private data), REMORA_E_INVALID (a bad configuration), or
 * the setup's error.
 */
REMORA_API int remora_connection_request_accept(remora_connection_request* req,
                                                const struct remora_connection_config* cfg,
                                                const void* pdata, size_t pdata_len,
                                                remora_connection** conn);
/**
 * Rejects with private data (at most caps.cm_data_size - 1 bytes).
 * @param req the connection request
 * @param pdata private data to send (may be NULL when pdata_len is 0)
 * @param pdata_len its length in bytes
 * @return 0; REMORA_E_TOO_LARGE for oversize private data; REMORA_E_BAD_STATE when answered
 * already.
 */
REMORA_API int remora_connection_request_reject(remora_connection_request* req, const void* pdata,
                                                size_t pdata_len);
/**
 * Frees a request; one neither accepted nor rejected is rejected. NULL: nothing.
 * @param req the request, or NULL
 */
REMORA_API void remora_connection_request_delete(remora_connection_request* req);

/**
 * Connects to host:port with private data (at most caps.cm_data_size bytes, else
 * REMORA_E_TOO_LARGE). REMORA_E_CONNECTION_REFUSED when nobody listens, REMORA_E_REJECTED when
 * the peer rejects (its private data: remora_last_error_data()), REMORA_E_TIMED_OUT after
 * connect_timeout_ms.
 * @param dom the domain
 * @param host the address (name or numeric)
 * @param port the port
 * @param cfg the connection's configuration (NULL: the defaults)
 * @param pdata private data to send (may be NULL when pdata_len is 0)
 * @param pdata_len its length in bytes
 * @param conn receives the connection
 * @return 0; REMORA_E_CONNECTION_REFUSED, REMORA_E_REJECTED, REMORA_E_TIMED_OUT,
 * REMORA_E_UNREACHABLE, REMORA_E_TOO_LARGE (private data), REMORA_E_INVALID (configuration).
 */
REMORA_API int remora_connect(remora_domain* dom, const char* host, uint16_t port,
                              const struct remora_connection_config* cfg, const void* pdata,
                              size_t pdata_len, remora_connection** conn);

/**
 * The private data the peer sent with the failure of the last call that failed on this thread
 * (a rejected connect's reject data); len 0 when none. Valid until the next failing call.
 * @param data receives the bytes (NULL when none; may be NULL)
 * @param len receives their length (0 when none; may be NULL)
 */
REMORA_API void remora_last_error_data(const void** data, size_t* len);

/**
 * Opens an RDM endpoint (domain opened with REMORA_ENDPOINT_RDM) with no peer yet.
 * @param dom the domain
 * @param cfg the connection's configuration (NULL: the defaults)
 * @param conn receives the RDM endpoint
 * @return 0; REMORA_E_INVALID (configuration, or a domain not opened with REMORA_ENDPOINT_RDM), or
 * the provider's error.
 */
REMORA_API int remora_open_peer(remora_domain* dom, const struct remora_connection_config* cfg,
                                remora_connection** conn);
/**
 * This RDM endpoint's address, to give to the peer (valid while the connection lives).
 * @param conn the connection
 * @param addr receives the address bytes
 * @param len receives their length
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_connection_local_address(const remora_connection* conn, const void** addr,
                                               size_t* len);
/**
 * Makes the peer's address the destination of every operation (REMORA_E_INVALID for junk).
 * @param conn the connection
 * @param addr the peer's address bytes (remora_connection_local_address on its side)
 * @param len their length
 * @return 0; REMORA_E_INVALID for junk; REMORA_E_BAD_STATE when attached already or not an RDM
 * endpoint.
 */
REMORA_API int remora_connection_attach(remora_connection* conn, const void* addr, size_t len);

/**
 * Disconnects; outstanding operations complete with errors. Idempotent.
 * @param conn the connection
 * @return 0, or the provider's error closing the endpoint.
 */
REMORA_API int remora_connection_close(remora_connection* conn);
/**
 * Closes (if open) and frees. NULL: nothing.
 * @param conn the connection, or NULL
 */
REMORA_API void remora_connection_delete(remora_connection* conn);
/**
 * The private data the peer sent when connecting or accepting (valid while conn lives).
 * @param conn the connection
 * @param data receives the bytes (NULL when there are none)
 * @param len receives their length
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_connection_peer_private_data(const remora_connection* conn, const void** data,
                                                   size_t* len);
/**
 * The connection's CQ (borrowed: lives as long as the connection).
 * @param conn the connection
 * @param cq receives the CQ
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_connection_cq(remora_connection* conn, remora_completion_queue** cq);
/**
 * Its receive CQ; *rcq is NULL when it has none (rcq false).
 * @param conn the connection
 * @param rcq receives the receive CQ, or NULL when it has none
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_connection_rcq(remora_connection* conn, remora_completion_queue** rcq);
/**
 * With channel_shared: blocks until the CQ or RCQ fires and says which (with a channel shared
 * by several connections, possibly another connection's: dispatch by ev->tag).
 * REMORA_E_BAD_STATE for separate channels.
 * @param conn the connection
 * @param timeout_ms how long to wait, in milliseconds (0: only look)
 * @param ev receives the event
 * @return 0; REMORA_E_TIMED_OUT; REMORA_E_BAD_STATE for separate channels.
 */
REMORA_API int remora_connection_wait(remora_connection* conn, int timeout_ms,
                                      struct remora_channel_event* ev);
/**
 * Next connection event (enum remora_conn_event) or REMORA_E_TIMED_OUT.
 * @param conn the connection
 * @param timeout_ms how long to wait, in milliseconds (0: only look)
 * @param event receives the event (enum remora_conn_event)
 * @return 0; REMORA_E_TIMED_OUT when none came.
 */
REMORA_API int remora_connection_next_event(remora_connection* conn, int timeout_ms, int* event);
/**
 * An fd readable while a connection event is pending.
 * @param conn the connection
 * @param fd receives the file descriptor
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_connection_event_fd(const remora_connection* conn, int* fd);
/**
 * Operations posted and not yet reaped.
 * @param conn the connection
 * @param n receives the count
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_connection_in_flight(const remora_connection* conn, size_t* n);
/** Whether the connection's operations go over shared memory (the same-host path,
 *  remora::connection::same_host) rather than its provider. */
REMORA_API int remora_connection_same_host(const remora_connection* conn, bool* on);

/** @} */

/** @name Operations (remora/connection.hpp; atomics and flush: remora_persist.h) */
/** @{ */

/** Operation flags (remora::completion_mode); 0: a completion on success and on error. */
enum remora_op_flags {
    REMORA_F_ON_ERROR = 1u << 0, /**< report only an error */
    REMORA_F_AT_POST = 1u << 1,  /**< writes/sends up to inject_size: complete at post */
    /** Batching hint (libfabric's FI_MORE; op_options::more): another post on this connection
     *  follows at once, so the provider may hold this one and hand the burst over together. Set
     *  it on every post of a burst but the last (the burst ends with the connection's next post
     *  without it). Honoured by remora_write, remora_write_with_imm, remora_read, remora_send and
     *  remora_send_with_imm (and their _ex forms); the other operations post without it. It
     *  changes no outcome. */
    REMORA_F_MORE = 1u << 2,
};

/**
 * Writes [src_offset, src_offset + len) of src into [dst_offset, dst_offset + len) of the peer's
 * region dst; completes as REMORA_OP_WRITE.
 *
 * Every operation checks its arguments before anything is posted: REMORA_E_OUT_OF_RANGE for a
 * range outside a region or descriptor, REMORA_E_ACCESS_DENIED for a usage not granted,
 * REMORA_E_WOULD_BLOCK for a full queue (reap completions and retry), REMORA_E_INVALID for
 * unknown flags. Each completes later on the connection's CQ (receives on the RCQ if it has one)
 * with `context`. Memory must stay registered until the operation completes.
 * @param conn the connection
 * @param dst the peer's region (REMORA_USAGE_WRITE_DESTINATION)
 * @param dst_offset where the operation starts in dst
 * @param src registered local memory (REMORA_USAGE_WRITE_SOURCE)
 * @param src_offset where the operation starts in src
 * @param len bytes to write
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted (the outcome is its completion); otherwise nothing is posted:
 * REMORA_E_OUT_OF_RANGE, REMORA_E_ACCESS_DENIED, REMORA_E_WOULD_BLOCK, REMORA_E_INVALID,
 * REMORA_E_BAD_STATE, as stated above.
 */
REMORA_API int remora_write(remora_connection* conn, const remora_remote_region* dst,
                            uint64_t dst_offset, const remora_memory_region* src, size_t src_offset,
                            size_t len, unsigned flags, void* context);
/**
 * A write whose arrival the peer sees as REMORA_OP_REMOTE_WRITE carrying `imm` (on its RCQ if
 * it has one); `imm` must fit caps.cq_data_size bytes.
 * @param conn the connection
 * @param dst the peer's region (REMORA_USAGE_WRITE_DESTINATION)
 * @param dst_offset where the operation starts in dst
 * @param src registered local memory (REMORA_USAGE_WRITE_SOURCE)
 * @param src_offset where the operation starts in src
 * @param len bytes to write
 * @param imm immediate data (fits caps.cq_data_size bytes)
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted (the outcome is its completion); otherwise nothing is posted:
 * REMORA_E_OUT_OF_RANGE, REMORA_E_ACCESS_DENIED, REMORA_E_WOULD_BLOCK, REMORA_E_INVALID,
 * REMORA_E_BAD_STATE, as stated above.
 */
REMORA_API int remora_write_with_imm(remora_connection* conn, const remora_remote_region* dst,
                                     uint64_t dst_offset, const remora_memory_region* src,
                                     size_t src_offset, size_t len, uint64_t imm, unsigned flags,
                                     void* context);
/**
 * Reads [src_offset, +len) of the peer's region into [dst_offset, +len) of dst.
 * @param conn the connection
 * @param dst registered local memory (REMORA_USAGE_READ_DESTINATION)
 * @param dst_offset where the operation starts in dst
 * @param src the peer's region (REMORA_USAGE_READ_SOURCE)
 * @param src_offset where the operation starts in src
 * @param len bytes to read
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted (the outcome is its completion); otherwise nothing is posted:
 * REMORA_E_OUT_OF_RANGE, REMORA_E_ACCESS_DENIED, REMORA_E_WOULD_BLOCK, REMORA_E_INVALID,
 * REMORA_E_BAD_STATE, as stated above.
 */
REMORA_API int remora_read(remora_connection* conn, const remora_memory_region* dst,
                           size_t dst_offset, const remora_remote_region* src, uint64_t src_offset,
                           size_t len, unsigned flags, void* context);
/**
 * Sends [offset, offset + len) of src.
 * @param conn the connection
 * @param src registered local memory (REMORA_USAGE_SEND)
 * @param offset where the message starts in src
 * @param len its length
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted (the outcome is its completion); otherwise nothing is posted:
 * REMORA_E_OUT_OF_RANGE, REMORA_E_ACCESS_DENIED, REMORA_E_WOULD_BLOCK, REMORA_E_INVALID,
 * REMORA_E_BAD_STATE, as stated above.
 */
REMORA_API int remora_send(remora_connection* conn, const remora_memory_region* src, size_t offset,
                           size_t len, unsigned flags, void* context);
/**
 * Sends with immediate data (the peer's receive completes with has_imm).
 * @param conn the connection
 * @param src registered local memory (REMORA_USAGE_SEND)
 * @param offset where the message starts in src
 * @param len its length
 * @param imm immediate data
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted (the outcome is its completion); otherwise nothing is posted:
 * REMORA_E_OUT_OF_RANGE, REMORA_E_ACCESS_DENIED, REMORA_E_WOULD_BLOCK, REMORA_E_INVALID,
 * REMORA_E_BAD_STATE, as stated above.
 */
REMORA_API int remora_send_with_imm(remora_connection* conn, const remora_memory_region* src,
                                    size_t offset, size_t len, uint64_t imm, unsigned flags,
                                    void* context);
/**
 * Posts a receive into [offset, offset + len) of dst.
 * @param conn the connection
 * @param dst registered local memory (REMORA_USAGE_RECEIVE)
 * @param offset where the message goes in dst
 * @param len the room for it
 * @param flags enum remora_op_flags bits (0: a completion on success and on error)
 * @param context returned in the operation's completion
 * @return 0 once posted (the outcome is its completion); otherwise nothing is posted:
 * REMORA_E_OUT_OF_RANGE, REMORA_E_ACCESS_DENIED, REMORA_E_WOULD_BLOCK, REMORA_E_INVALID,
 * REMORA_E_BAD_STATE, as stated above.
 */
REMORA_API int remora_recv(remora_connection* conn, const remora_memory_region* dst, size_t offset,
                           size_t len, unsigned flags, void* context);

/** @} */

/** Timeout value that waits without a deadline (remora_op_options, remora_slot_pool_acquire). */
#define REMORA_NO_DEADLINE 0x7fffffff

/** @name Operations with options: parked posts, callbacks (remora/connection.hpp op_options) */
/** @{ */

/** How a parked post waits (remora::park_mode). */
enum remora_park_mode {
    REMORA_PARK_BLOCK = 0, /**< the calling thread waits */
    REMORA_PARK_QUEUE = 1, /**< returns at once; the library posts it later (needs callback) */
};

/**
 * A completion delivered to a function instead of remora_completion_queue_poll: runs exactly once,
 * on the thread that reads the CQ (or the library's thread of a queued post), after the CQ's lock
 * is released; must not block. c->context is the operation's context. The library allocates a small
 * record per such operation, freed when the callback runs; a connection deleted while such
 * operations are unreaped drops their callbacks (they never run) and frees their records.
 */
typedef void (*remora_completion_cb)(const struct remora_completion* c);

/** Options of the `_ex` operations, remora_gather_write and the copies. NULL: all defaults. */
struct remora_op_options {
    size_t size;    /**< sizeof(struct remora_op_options) */
    unsigned flags; /**< enum remora_op_flags */
    void* context;  /**< returned in the completion */
    /**
     * 0: no parking (a full queue or pool is REMORA_E_WOULD_BLOCK at once). Else the post waits
     * up to this many ms (REMORA_NO_DEADLINE: without a deadline) for its queue entries and
     * units of remora_connection_config.slots, in FIFO order, then posts; or ends having taken
     * nothing with REMORA_E_TIMED_OUT, REMORA_E_CANCELED (remora_connection_cancel_parked) or
     * REMORA_E_DISCONNECTED (closed). Somebody else must read the CQ meanwhile.
     */
    int park_ms;
    int park_mode; /**< enum remora_park_mode; REMORA_PARK_QUEUE needs park_ms and callback */
    /** NULL: the completion goes to the CQ. Else to this function (see remora_completion_cb);
     *  a queued post never posted still gets it once, with the reason as its status. */
    remora_completion_cb callback;
};

/**
 * remora_write with options.
 * @param conn the connection
 * @param dst the peer's region (REMORA_USAGE_WRITE_DESTINATION)
 * @param dst_offset where the operation starts in dst
 * @param src registered local memory (REMORA_USAGE_WRITE_SOURCE)
 * @param src_offset where the operation starts in src
 * @param len bytes to write
 * @param opts the options (NULL: the defaults)
 * @return 0 once posted (or queued); the errors of the call without options, and
 * REMORA_E_TIMED_OUT, REMORA_E_CANCELED, REMORA_E_DISCONNECTED for a parked post.
 */
REMORA_API int remora_write_ex(remora_connection* conn, const remora_remote_region* dst,
                               uint64_t dst_offset, const remora_memory_region* src,
                               size_t src_offset, size_t len, const struct remora_op_options* opts);
/**
 * remora_read with options.
 * @param conn the connection
 * @param dst registered local memory (REMORA_USAGE_READ_DESTINATION)
 * @param dst_offset where the operation starts in dst
 * @param src the peer's region (REMORA_USAGE_READ_SOURCE)
 * @param src_offset where the operation starts in src
 * @param len bytes to read
 * @param opts the options (NULL: the defaults)
 * @return 0 once posted (or queued); the errors of the call without options, and
 * REMORA_E_TIMED_OUT, REMORA_E_CANCELED, REMORA_E_DISCONNECTED for a parked post.
 */
REMORA_API int remora_read_ex(remora_connection* conn, const remora_memory_region* dst,
                              size_t dst_offset, const remora_remote_region* src,
                              uint64_t src_offset, size_t len,
                              const struct remora_op_options* opts);
/**
 * remora_send with options.
 * @param conn the connection
 * @param src registered local memory (REMORA_USAGE_SEND)
 * @param offset where the message starts in src
 * @param len its length
 * @param opts the options (NULL: the defaults)
 * @return 0 once posted (or queued); the errors of the call without options, and
 * REMORA_E_TIMED_OUT, REMORA_E_CANCELED, REMORA_E_DISCONNECTED for a parked post.
 */
REMORA_API int remora_send_ex(remora_connection* conn, const remora_memory_region* src,
                              size_t offset, size_t len, const struct remora_op_options* opts);
/**
 * remora_recv with options.
 * @param conn the connection
 * @param dst registered local memory (REMORA_USAGE_RECEIVE)
 * @param offset where the message goes in dst
 * @param len the room for it
 * @param opts the options (NULL: the defaults)
 * @return 0 once posted (or queued); the errors of the call without options, and
 * REMORA_E_TIMED_OUT, REMORA_E_CANCELED, REMORA_E_DISCONNECTED for a parked post.
 */
REMORA_API int remora_recv_ex(remora_connection* conn, const remora_memory_region* dst,
                              size_t offset, size_t len, const struct remora_op_options* opts);

/** A piece of a peer's memory: [offset, offset + len) of `remote` (remora::remote_segment). */
struct remora_remote_segment {
    const remora_remote_region* region; /**< the peer's region */
    uint64_t offset;                    /**< where the piece starts in it */
    size_t length;                      /**< bytes of the piece */
};
/** Parts one multi-key operation may have (remora::connection::max_gather_parts). */
#define REMORA_MAX_GATHER_PARTS 64
/**
 * Writes consecutive pieces of src from src_offset into the `n` remote segments in order (part i
 * carries dst[i].length bytes). Every segment is checked before anything is taken; the n entries
 * (and units of remora_connection_config.slots) are taken all at once or not at all. Completes
 * once, as REMORA_OP_WRITE with len the total; a failure reports the first failing part's status
 * and index (failed_part).
 * @param conn the connection
 * @param dst the remote segments
 * @param n how many (1 .. REMORA_MAX_GATHER_PARTS)
 * @param src registered local memory (REMORA_USAGE_WRITE_SOURCE)
 * @param src_offset where the operation starts in src
 * @param opts the options (NULL: the defaults)
 * @return 0 once every part is posted (or queued); the outcome is its completion. With nothing
 * taken: INVALID (n 0, a NULL pointer or region, an empty segment, REMORA_F_AT_POST), OUT_OF_RANGE,
 * ACCESS_DENIED, TOO_LARGE (past REMORA_MAX_GATHER_PARTS or the send-queue depth), WOULD_BLOCK, a
 * parked post's errors, remora_write_ex's for a connection that cannot post. A part whose post
 * fails returns its error naming the part; parts posted before it complete silently, unreported.
 */
REMORA_API int remora_gather_write(remora_connection* conn, const struct remora_remote_segment* dst,
                                   size_t n, const remora_memory_region* src, size_t src_offset,
                                   const struct remora_op_options* opts);
/**
 * remora_gather_write's read-side twin, with its contract: reads the `n` remote segments of src
 * (REMORA_USAGE_READ_SOURCE) in order into consecutive pieces of dst from dst_offset
 * (REMORA_USAGE_READ_DESTINATION: the provider writes it); completes once as REMORA_OP_READ.
 * Parameters and errors as remora_gather_write's, src and dst swapped.
 */
REMORA_API int remora_scatter_read(remora_connection* conn, const struct remora_remote_segment* src,
                                   size_t n, const remora_memory_region* dst, size_t dst_offset,
                                   const struct remora_op_options* opts);
/** @} */

/** @name Asynchronous setup (connection.hpp connect_async, listener.hpp accept_async) */
/** @{ */

/**
 * Sends the connection request like remora_connect and returns at once (its argument errors
 * too; sockets refuses a port nobody listens on here, REMORA_E_CONNECTION_REFUSED). The outcome
 * is reported once as a connection event (remora_connection_next_event,
 * remora_connection_event_fd): REMORA_CONN_ESTABLISHED, or REMORA_CONN_REJECTED / REFUSED /
 * UNREACHABLE / LOST / CLOSED with its error in remora_connection_setup_status(). tcp progresses
 * the setup only while the connection is looked at (next_event, a channel wait). Receives may be
 * posted meanwhile; every other operation is REMORA_E_BAD_STATE until established.
 * @param dom the domain
 * @param host the address (name or numeric)
 * @param port the port
 * @param cfg the connection's configuration (NULL: the defaults)
 * @param pdata private data to send (may be NULL when pdata_len is 0)
 * @param pdata_len its length in bytes
 * @param conn receives the connection (its setup under way)
 * @return 0; the argument errors of remora_connect (sockets: REMORA_E_CONNECTION_REFUSED).
 */
REMORA_API int remora_connect_async(remora_domain* dom, const char* host, uint16_t port,
                                    const struct remora_connection_config* cfg, const void* pdata,
                                    size_t pdata_len, remora_connection** conn);
/**
 * Accepts and returns at once; the outcome is a connection event as for remora_connect_async.
 * @param req the connection request
 * @param cfg its configuration (NULL: the defaults)
 * @param pdata private data to send (may be NULL when pdata_len is 0)
 * @param pdata_len its length in bytes
 * @param conn receives the connection (its setup under way)
 * @return 0; the argument errors of remora_connection_request_accept.
 */
REMORA_API int remora_connection_request_accept_async(remora_connection_request* req,
                                                      const struct remora_connection_config* cfg,
                                                      const void* pdata, size_t pdata_len,
                                                      remora_connection** conn);
/**
 * 0 once established (and for a connection set up synchronously), REMORA_E_WOULD_BLOCK while
 * the setup is under way, else the setup's error (REMORA_E_REJECTED with the peer's data in
 * remora_last_error_data(), CONNECTION_REFUSED, TIMED_OUT, CANCELED after a close).
 * @param conn the connection
 * @return 0 once established; REMORA_E_WOULD_BLOCK while under way; else the setup's error.
 */
REMORA_API int remora_connection_setup_status(const remora_connection* conn);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_CONNECTION_H */

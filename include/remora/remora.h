// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file remora/remora.h
 * @brief remora's C API (C11): remote memory access over fabrics for C programs.
 *
 * A thin layer over the C++ API (remora.hpp) with the same semantics; where this header is
 * short, the C++ header named in each section states the details, and they hold here too.
 * Link with libremora.so (pkg-config remora-c, or the CMake target remora::shared).
 *
 * Conventions:
 * - Every fallible function returns 0 on success or a negative REMORA_E_* code (one per
 *   remora::errc, plus REMORA_E_NOMEM and REMORA_E_UNKNOWN), and writes its results through
 *   out-parameters, which it touches only on success. A failure changes nothing.
 * - remora_last_error_message() gives the failing call's one-line message, per thread; it is
 *   left as it was by calls that succeed (read it right after the failure, as errno).
 *   remora_strerror() names a code.
 * - Handles are opaque. A handle made by `remora_X_new`/`_open`/`_connect`/... is freed by
 *   `remora_X_delete` (NULL is accepted and ignored). Some handles are borrowed from another
 *   (remora_completion_queue from a connection or shared CQ, the remora_memory_region of a
 * persistent region): those live as long as their owner and are never deleted.
 * - A NULL handle or NULL out-parameter where one is required is REMORA_E_INVALID.
 * - Configuration structs start with `size`: set it to sizeof the struct you compiled with.
 *   A smaller size from an older header is accepted (the fields past it take their defaults);
 *   a size larger than this library knows, or smaller than the `size` field itself, is refused
 *   with REMORA_E_INVALID. A field left 0 takes its documented default, so
 *   `struct remora_connection_config cfg = {.size = sizeof cfg};` is the default configuration, and
 * a NULL configuration pointer means the same.
 * - Timeouts are milliseconds, 0 or more (0 only looks); a negative timeout is REMORA_E_INVALID.
 * - No C++ exception ever leaves a function of this header: an allocation failure is
 *   REMORA_E_NOMEM, anything else unexpected REMORA_E_UNKNOWN, each with its message.
 *
 * Threading: as the C++ objects they wrap (each section says). The error message is
 * thread-local. Deleting a handle must not race with other calls on it.
 */
#ifndef REMORA_REMORA_H
#define REMORA_REMORA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define REMORA_API __attribute__((visibility("default")))
#else
#define REMORA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** @name Errors */
/** @{ */

/** Return codes: 0, or one of these (negative). The first fifteen are remora::errc, negated. */
enum remora_error {
    REMORA_OK = 0,
    REMORA_E_INVALID = -1,               /**< a parameter is malformed or inconsistent */
    REMORA_E_OUT_OF_RANGE = -2,          /**< an access falls outside a region */
    REMORA_E_ACCESS_DENIED = -3,         /**< a region is used for an access it does not grant */
    REMORA_E_NOT_SUPPORTED = -4,         /**< the provider (or the region) cannot do this */
    REMORA_E_TOO_LARGE = -5,             /**< larger than the provider or configuration allows */
    REMORA_E_WOULD_BLOCK = -6,           /**< a queue is full: reap completions and retry */
    REMORA_E_TIMED_OUT = -7,             /**< a wait or connect reached its timeout */
    REMORA_E_CONNECTION_REFUSED = -8,    /**< nobody listens at the address */
    REMORA_E_REJECTED = -9,              /**< the peer rejected the connection request */
    REMORA_E_UNREACHABLE = -10,          /**< the address cannot be resolved or reached */
    REMORA_E_DISCONNECTED = -11,         /**< the connection is closed or lost */
    REMORA_E_CANCELED = -12,             /**< the operation was flushed or canceled */
    REMORA_E_MALFORMED_DESCRIPTOR = -13, /**< serialised descriptor bytes failed validation */
    REMORA_E_BAD_STATE = -14,            /**< not valid in the object's current state */
    REMORA_E_PROVIDER = -15,             /**< libfabric reported an error not covered above */
    REMORA_E_NOMEM = -16,                /**< an allocation failed */
    REMORA_E_UNKNOWN = -17,              /**< an unexpected failure (the message says what) */
};

/**
 * A static, human-readable name for a return code ("invalid argument", ...); never NULL.
 * Unknown codes give "unknown error code".
 */
REMORA_API const char* remora_strerror(int code);

/**
 * The message of the last call that failed on this thread ("" when none has): one line naming
 * what was refused and why. Valid until the next failing call on this thread.
 */
REMORA_API const char* remora_last_error_message(void);

/** @} */

/** @name Log lines (remora/log.hpp) */
/** @{ */

/** How much a log line matters, most severe first (remora::log_level). */
enum remora_log_level {
    REMORA_LOG_ERROR = 0,   /**< a failure the library could not report to a caller */
    REMORA_LOG_WARNING = 1, /**< a likely misuse or a misbehaving peer (a service never served) */
    REMORA_LOG_NOTICE = 2,  /**< a normal but significant event */
    REMORA_LOG_INFO = 3,    /**< informational */
    REMORA_LOG_DEBUG = 4,   /**< details for debugging */
};

/**
 * Receives one log line: its level (enum remora_log_level), the text (one line, no newline;
 * valid during the call) and the context given to remora_set_log_function. Called from any
 * thread, the library's own included, possibly from several at once; it must not block for long
 * nor call into the library.
 */
typedef void (*remora_log_function)(int level, const char* line, void* context);

/**
 * Sends the library's log lines at or above the threshold to `fn` with `context`; NULL stops
 * logging (the default: the library writes nothing to stdout or stderr). One function for the
 * process, shared with the C++ API's remora::set_log_function: the last set wins.
 * @param fn      the function, or NULL
 * @param context passed to every call of fn
 */
REMORA_API void remora_set_log_function(remora_log_function fn, void* context);

/**
 * Lines less severe than `level` are not delivered. Default: REMORA_LOG_NOTICE.
 * @param level enum remora_log_level
 * @return 0, or REMORA_E_INVALID for a level that is not a REMORA_LOG_* value.
 */
REMORA_API int remora_set_log_threshold(int level);

/** @} */

/** @name Opaque handles */
/** @{ */
typedef struct remora_domain remora_domain; /**< an opened provider (remora::domain) */
typedef struct remora_memory_region remora_memory_region; /**< registered local memory */
typedef struct remora_remote_region remora_remote_region; /**< a peer's region descriptor */
typedef struct remora_persistent_region
    remora_persistent_region; /**< a persistent (or volatile) region */
typedef struct remora_target_service
    remora_target_service;                      /**< target side of GPSPM / service atomics */
typedef struct remora_listener remora_listener; /**< accepts connections */
typedef struct remora_connection_request
    remora_connection_request;                      /**< an incoming connection request */
typedef struct remora_connection remora_connection; /**< a connection (or an RDM peer) */
typedef struct remora_completion_queue
    remora_completion_queue; /**< a completion queue (borrowed) */
typedef struct remora_shared_completion_queue
    remora_shared_completion_queue; /**< a CQ shared by connections */
typedef struct remora_completion_channel remora_completion_channel; /**< one wait for many CQs */
typedef struct remora_slot_pool remora_slot_pool;     /**< a budget of queue units (slot_pool) */
typedef struct remora_held_units remora_held_units;   /**< units held from a pool (held_units) */
typedef struct remora_buffer_pool remora_buffer_pool; /**< registered bounce buffers */
typedef struct remora_shared_receive_queue
    remora_shared_receive_queue; /**< a receive queue shared by connections */
/** @} */

/** @name Domain (remora/domain.hpp) */
/** @{ */

/** Endpoint type of a domain. */
enum remora_endpoint_type {
    REMORA_ENDPOINT_MSG = 0, /**< connected endpoints: listener and connect */
    REMORA_ENDPOINT_RDM = 1, /**< reliable datagram endpoints: remora_open_peer and attach */
};

/** How the domain's progress thread waits (remora::progress_policy). */
enum remora_progress_policy {
    REMORA_PROGRESS_DEFAULT = 0,  /**< adaptive */
    REMORA_PROGRESS_BUSY = 1,     /**< polls without sleeping: lowest latency, one core */
    REMORA_PROGRESS_ADAPTIVE = 2, /**< sleeps; polls for progress_spin_us after traffic */
    REMORA_PROGRESS_BLOCKING = 3, /**< sleeps in epoll between events */
};

/** Domain configuration (remora::domain_config). 0 / NULL fields take the defaults. */
struct remora_domain_config {
    size_t size;               /**< sizeof(struct remora_domain_config) */
    const char* provider;      /**< "tcp", "sockets", "shm", "tcp;ofi_rxm"...; NULL: automatic */
    const char* node;          /**< local address selecting the NIC; NULL: "127.0.0.1" */
    int endpoint;              /**< enum remora_endpoint_type; default REMORA_ENDPOINT_MSG */
    int progress;              /**< enum remora_progress_policy; default adaptive */
    uint32_t progress_spin_us; /**< adaptive spin, 1 us .. 1 s; 0: 100 us */
};

/**
 * Opens a domain. Fails with REMORA_E_NOT_SUPPORTED (no such provider on the node), or
 * REMORA_E_INVALID for a bad endpoint, progress or spin value.
 * Threading: a domain may be used from any number of threads at once.
 */
REMORA_API int remora_domain_open(const struct remora_domain_config* cfg, remora_domain** dom);

/**
 * Closes the domain and frees the handle, saying whether the provider closed. While objects
 * made from it (regions, listeners, connections, shared CQs, services' regions) still exist:
 * REMORA_E_BAD_STATE with their count, and the handle stays valid (delete them, then close).
 * On success *dom is set to NULL. NULL or *dom NULL: nothing to do, 0.
 */
REMORA_API int remora_domain_close(remora_domain** dom);

/** Frees the handle without reporting; the provider closes when its last user goes. */
REMORA_API void remora_domain_delete(remora_domain* dom);

/** What the opened provider can do (remora::provider_caps), filled up to caps->size bytes. */
struct remora_provider_caps {
    size_t size;                /**< set by the caller: sizeof(struct remora_provider_caps) */
    char provider[32];          /**< provider name, NUL-terminated */
    int endpoint;               /**< enum remora_endpoint_type */
    bool native_atomics;        /**< the provider has atomics (else the target service does them) */
    bool target_needs_progress; /**< one-sided access needs the target to progress */
    bool cq_wait_fd;            /**< CQs can be blocked on through an fd */
    size_t inject_size;         /**< bytes a write or send may inject */
    size_t cm_data_size;        /**< private data limit of connect and accept */
    size_t max_msg_size;        /**< largest message */
    size_t cq_data_size;        /**< bytes of immediate data */
};

/** Fills *caps (caps->size set by the caller, same size rules as configurations). */
REMORA_API int remora_domain_caps(const remora_domain* dom, struct remora_provider_caps* caps);

/** @} */

/** @name Memory registration (remora/memory_region.hpp) */
/** @{ */

/** What a region may be used for (remora::usage): combine with |. */
enum remora_usage {
    REMORA_USAGE_READ_SOURCE = 1u << 0, /**< peers may read from it */
    REMORA_USAGE_READ_DESTINATION =
        1u << 1, /**< local destination of a read (and of CAS/fetch-add results) */
    REMORA_USAGE_WRITE_SOURCE = 1u << 2,      /**< local source of a write */
    REMORA_USAGE_WRITE_DESTINATION = 1u << 3, /**< peers may write into it */
    REMORA_USAGE_SEND = 1u << 4,              /**< source of a send */
    REMORA_USAGE_RECEIVE = 1u << 5,           /**< destination of a receive */
    REMORA_USAGE_ATOMIC_TARGET = 1u << 6,     /**< peers may run atomics on it */
    REMORA_USAGE_FLUSH_TARGET = 1u << 7,      /**< peers may flush it */
    REMORA_USAGE_ALL = 0xffu,                 /**< every usage above */
};

/**
 * Registers [addr, addr + len) for `usage` (at least one bit, none unknown): REMORA_E_INVALID
 * for NULL addr, len 0, no or unknown usage bits; the provider's error when it refuses.
 * The memory must outlive the region, and the region every operation that uses it.
 * Threading: immutable; usable by many threads and connections at once.
 */
REMORA_API int remora_memory_region_create(remora_domain* dom, void* addr, size_t len,
                                           unsigned usage, remora_memory_region** mr);

/** Deregisters and frees (no operation may still use it). NULL: nothing. */
REMORA_API void remora_memory_region_delete(remora_memory_region* mr);

/** The registered memory. */
REMORA_API int remora_memory_region_data(const remora_memory_region* mr, void** addr, size_t* len);

/**
 * The descriptor a peer needs for [offset, offset + len) (len 0: to the end), granting only
 * the region's remote usages. REMORA_E_OUT_OF_RANGE when the range is not inside.
 */
REMORA_API int remora_memory_region_describe(const remora_memory_region* mr, size_t offset,
                                             size_t len, remora_remote_region** remote);

/** @} */

/** @name Remote region descriptors (remora/remote_region.hpp) */
/** @{ */

/** Bytes of a serialised descriptor (version 2, little-endian; see remote_region.hpp). */
#define REMORA_DESCRIPTOR_SIZE 32

/** What a target states about a region's durability (remora::persistence). */
enum remora_persistence {
    REMORA_PERSISTENCE_NONE = 0,
    REMORA_PERSISTENCE_PERSISTENT = 1u << 0, /**< durable storage */
    REMORA_PERSISTENCE_APM = 1u << 1, /**< placed writes are durable (read-after-write persists) */
    REMORA_PERSISTENCE_GPSPM = 1u << 2, /**< the target's service persists on request */
};

/**
 * Parses `len` bytes that came from a peer. Every field is validated: wrong size, version,
 * addressing, usage or persistence bits, reserved bytes, zero length or overflow give
 * REMORA_E_MALFORMED_DESCRIPTOR with a message saying which.
 */
REMORA_API int remora_remote_region_parse(const void* bytes, size_t len,
                                          remora_remote_region** remote);

/** Writes the REMORA_DESCRIPTOR_SIZE bytes to send; REMORA_E_TOO_LARGE when len is smaller. */
REMORA_API int remora_remote_region_serialize(const remora_remote_region* remote, void* buf,
                                              size_t len);

/** A sub-range [offset, offset + len): REMORA_E_OUT_OF_RANGE outside, INVALID when empty. */
REMORA_API int remora_remote_region_slice(const remora_remote_region* remote, uint64_t offset,
                                          uint64_t len, remora_remote_region** slice);

/** Length in bytes, usage bits (enum remora_usage) and persistence bits of a descriptor. */
REMORA_API int remora_remote_region_info(const remora_remote_region* remote, uint64_t* len,
                                         unsigned* usage, unsigned* persistence);

/** Frees a descriptor. NULL: nothing. */
REMORA_API void remora_remote_region_delete(remora_remote_region* remote);

/** @} */

/* Completion queues, shared CQs and channels. */
#include <remora/remora_cq.h>
struct remora_completion;    /* remora_cq.h (declared here too: it may be included first) */
struct remora_channel_event; /* remora_cq.h */

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
 */
REMORA_API int remora_listener_create(remora_domain* dom, const char* host, uint16_t port,
                                      remora_listener** lst);
/** Stops listening and frees. NULL: nothing. */
REMORA_API void remora_listener_delete(remora_listener* lst);
/** The bound port. */
REMORA_API int remora_listener_port(const remora_listener* lst, uint16_t* port);
/** An fd readable when a request may be waiting. */
REMORA_API int remora_listener_fd(const remora_listener* lst, int* fd);
/** The next connection request, or REMORA_E_TIMED_OUT. */
REMORA_API int remora_listener_get_request(remora_listener* lst, int timeout_ms,
                                           remora_connection_request** req);
/** The private data the client sent with its request (valid while the request lives). */
REMORA_API int remora_connection_request_private_data(const remora_connection_request* req,
                                                      const void** data, size_t* len);
/**
 * Accepts with `pdata` (at most caps.cm_data_size bytes) and waits until the connection is
 * established. Oversize private data is REMORA_E_TOO_LARGE and leaves the request answerable,
 * as do the C layer's own refusals (a bad cfg->size, NULL pdata with a length); a configuration
 * the connection refuses rejects the request (the client sees REMORA_E_REJECTED). Free the
 * request afterwards either way.
 */
REMORA_API int remora_connection_request_accept(remora_connection_request* req,
                                                const struct remora_connection_config* cfg,
                                                const void* pdata, size_t pdata_len,
                                                remora_connection** conn);
/** Rejects with private data (at most caps.cm_data_size - 1 bytes). */
REMORA_API int remora_connection_request_reject(remora_connection_request* req, const void* pdata,
                                                size_t pdata_len);
/** Frees a request; one neither accepted nor rejected is rejected. NULL: nothing. */
REMORA_API void remora_connection_request_delete(remora_connection_request* req);

/**
 * Connects to host:port with private data (at most caps.cm_data_size bytes, else
 * REMORA_E_TOO_LARGE). REMORA_E_CONNECTION_REFUSED when nobody listens, REMORA_E_REJECTED when
 * the peer rejects (its private data: remora_last_error_data()), REMORA_E_TIMED_OUT after
 * connect_timeout_ms.
 */
REMORA_API int remora_connect(remora_domain* dom, const char* host, uint16_t port,
                              const struct remora_connection_config* cfg, const void* pdata,
                              size_t pdata_len, remora_connection** conn);

/**
 * The private data the peer sent with the failure of the last call that failed on this thread
 * (a rejected connect's reject data); len 0 when none. Valid until the next failing call.
 */
REMORA_API void remora_last_error_data(const void** data, size_t* len);

/** Opens an RDM endpoint (domain opened with REMORA_ENDPOINT_RDM) with no peer yet. */
REMORA_API int remora_open_peer(remora_domain* dom, const struct remora_connection_config* cfg,
                                remora_connection** conn);
/** This RDM endpoint's address, to give to the peer (valid while the connection lives). */
REMORA_API int remora_connection_local_address(const remora_connection* conn, const void** addr,
                                               size_t* len);
/** Makes the peer's address the destination of every operation (REMORA_E_INVALID for junk). */
REMORA_API int remora_connection_attach(remora_connection* conn, const void* addr, size_t len);

/** Disconnects; outstanding operations complete with errors. Idempotent. */
REMORA_API int remora_connection_close(remora_connection* conn);
/** Closes (if open) and frees. NULL: nothing. */
REMORA_API void remora_connection_delete(remora_connection* conn);
/** The private data the peer sent when connecting or accepting (valid while conn lives). */
REMORA_API int remora_connection_peer_private_data(const remora_connection* conn, const void** data,
                                                   size_t* len);
/** The connection's CQ (borrowed: lives as long as the connection). */
REMORA_API int remora_connection_cq(remora_connection* conn, remora_completion_queue** cq);
/** Its receive CQ; *rcq is NULL when it has none (rcq false). */
REMORA_API int remora_connection_rcq(remora_connection* conn, remora_completion_queue** rcq);
/**
 * With channel_shared: blocks until the CQ or RCQ fires and says which (with a channel shared
 * by several connections, possibly another connection's: dispatch by ev->tag).
 * REMORA_E_BAD_STATE for separate channels.
 */
REMORA_API int remora_connection_wait(remora_connection* conn, int timeout_ms,
                                      struct remora_channel_event* ev);
/** Next connection event (enum remora_conn_event) or REMORA_E_TIMED_OUT. */
REMORA_API int remora_connection_next_event(remora_connection* conn, int timeout_ms, int* event);
/** An fd readable while a connection event is pending. */
REMORA_API int remora_connection_event_fd(const remora_connection* conn, int* fd);
/** Operations posted and not yet reaped. */
REMORA_API int remora_connection_in_flight(const remora_connection* conn, size_t* n);

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
 * Every operation checks its arguments before anything is posted: REMORA_E_OUT_OF_RANGE for a
 * range outside a region or descriptor, REMORA_E_ACCESS_DENIED for a usage not granted,
 * REMORA_E_WOULD_BLOCK for a full queue (reap completions and retry), REMORA_E_INVALID for
 * unknown flags. Each completes later on the connection's CQ (receives on the RCQ if it has one)
 * with `context`. Memory must stay registered until the operation completes.
 */
REMORA_API int remora_write(remora_connection* conn, const remora_remote_region* dst,
                            uint64_t dst_offset, const remora_memory_region* src, size_t src_offset,
                            size_t len, unsigned flags, void* context);
/**
 * A write whose arrival the peer sees as REMORA_OP_REMOTE_WRITE carrying `imm` (on its RCQ if
 * it has one); `imm` must fit caps.cq_data_size bytes.
 */
REMORA_API int remora_write_with_imm(remora_connection* conn, const remora_remote_region* dst,
                                     uint64_t dst_offset, const remora_memory_region* src,
                                     size_t src_offset, size_t len, uint64_t imm, unsigned flags,
                                     void* context);
/** Reads [src_offset, +len) of the peer's region into [dst_offset, +len) of dst. */
REMORA_API int remora_read(remora_connection* conn, const remora_memory_region* dst,
                           size_t dst_offset, const remora_remote_region* src, uint64_t src_offset,
                           size_t len, unsigned flags, void* context);
/** Sends [offset, offset + len) of src. */
REMORA_API int remora_send(remora_connection* conn, const remora_memory_region* src, size_t offset,
                           size_t len, unsigned flags, void* context);
/** Sends with immediate data (the peer's receive completes with has_imm). */
REMORA_API int remora_send_with_imm(remora_connection* conn, const remora_memory_region* src,
                                    size_t offset, size_t len, uint64_t imm, unsigned flags,
                                    void* context);
/** Posts a receive into [offset, offset + len) of dst. */
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

/** remora_write with options. */
REMORA_API int remora_write_ex(remora_connection* conn, const remora_remote_region* dst,
                               uint64_t dst_offset, const remora_memory_region* src,
                               size_t src_offset, size_t len, const struct remora_op_options* opts);
/** remora_read with options. */
REMORA_API int remora_read_ex(remora_connection* conn, const remora_memory_region* dst,
                              size_t dst_offset, const remora_remote_region* src,
                              uint64_t src_offset, size_t len,
                              const struct remora_op_options* opts);
/** remora_send with options. */
REMORA_API int remora_send_ex(remora_connection* conn, const remora_memory_region* src,
                              size_t offset, size_t len, const struct remora_op_options* opts);
/** remora_recv with options. */
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
 * carries dst[i].len bytes). Every segment is checked before anything is posted
 * (REMORA_E_OUT_OF_RANGE, ACCESS_DENIED; INVALID for n 0, a NULL remote or an empty segment;
 * TOO_LARGE past REMORA_MAX_GATHER_PARTS or the send-queue depth); the n entries (and units
 * of remora_connection_config.slots) are taken all at once or not at all. Completes once, as
 * REMORA_OP_WRITE with len the total; a failure reports the first failing part's status and
 * index (failed_part).
 * REMORA_F_AT_POST is refused.
 */
REMORA_API int remora_gather_write(remora_connection* conn, const struct remora_remote_segment* dst,
                                   size_t n, const remora_memory_region* src, size_t src_offset,
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
 */
REMORA_API int remora_connect_async(remora_domain* dom, const char* host, uint16_t port,
                                    const struct remora_connection_config* cfg, const void* pdata,
                                    size_t pdata_len, remora_connection** conn);
/** Accepts and returns at once; the outcome is a connection event as for remora_connect_async. */
REMORA_API int remora_connection_request_accept_async(remora_connection_request* req,
                                                      const struct remora_connection_config* cfg,
                                                      const void* pdata, size_t pdata_len,
                                                      remora_connection** conn);
/**
 * 0 once established (and for a connection set up synchronously), REMORA_E_WOULD_BLOCK while
 * the setup is under way, else the setup's error (REMORA_E_REJECTED with the peer's data in
 * remora_last_error_data(), CONNECTION_REFUSED, TIMED_OUT, CANCELED after a close).
 */
REMORA_API int remora_connection_setup_status(const remora_connection* conn);

/** @} */

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
 * where the provider has none (every RDM domain; tcp and sockets msg domains have one). Threading:
 * remora_shared_receive_queue_recv may run on several threads; its CQ has one reader at a time.
 */
REMORA_API int remora_shared_receive_queue_create(
    remora_domain* dom, const struct remora_shared_receive_queue_config* cfg,
    remora_shared_receive_queue** srq);
/** Frees this handle (connections using the queue keep it). NULL: nothing. */
REMORA_API void remora_shared_receive_queue_delete(remora_shared_receive_queue* srq);
/**
 * Posts a receive into [offset, offset + len) of dst (REMORA_USAGE_RECEIVE): checked like
 * remora_recv; REMORA_E_WOULD_BLOCK when `depth` receives are posted.
 */
REMORA_API int remora_shared_receive_queue_recv(remora_shared_receive_queue* srq,
                                                const remora_memory_region* dst, size_t offset,
                                                size_t len, unsigned flags, void* context);
/** The queue's CQ (borrowed: lives as long as the handle), where its receives complete. */
REMORA_API int remora_shared_receive_queue_cq(const remora_shared_receive_queue* srq,
                                              remora_completion_queue** cq);
/** Effective depth, receives posted and not reaped, connections attached (each may be NULL). */
REMORA_API int remora_shared_receive_queue_info(const remora_shared_receive_queue* srq,
                                                size_t* depth, size_t* posted, size_t* connections);

/** @} */

/** @name Parked posts of a connection */
/** @{ */

/** Ends every parked post of conn with REMORA_E_CANCELED; *n how many (may be NULL). A post
 * whose try is under way is waited for and counted only if it parks again. */
REMORA_API int remora_connection_cancel_parked(remora_connection* conn, size_t* n);
/** Posts of conn parked now. */
REMORA_API int remora_connection_parked(const remora_connection* conn, size_t* n);

/** @} */

#ifdef __cplusplus
}
#endif

/* The persistence layer's, the pools' and admission's functions over these handles. */
#include <remora/remora_admission.h>
#include <remora/remora_persist.h>
#include <remora/remora_pools.h>

#endif /* REMORA_REMORA_H */

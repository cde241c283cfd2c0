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
 *   (remora_cq from a connection or shared CQ, the remora_mr of a persistent region): those
 *   live as long as their owner and are never deleted.
 * - A NULL handle or NULL out-parameter where one is required is REMORA_E_INVALID.
 * - Configuration structs start with `size`: set it to sizeof the struct you compiled with.
 *   A smaller size from an older header is accepted (the fields past it take their defaults);
 *   a size larger than this library knows, or smaller than the `size` field itself, is refused
 *   with REMORA_E_INVALID. A field left 0 takes its documented default, so
 *   `struct remora_conn_cfg cfg = {.size = sizeof cfg};` is the default configuration, and a
 *   NULL configuration pointer means the same.
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

/** @name Opaque handles */
/** @{ */
typedef struct remora_domain remora_domain;           /**< an opened provider (remora::domain) */
typedef struct remora_mr remora_mr;                   /**< registered local memory */
typedef struct remora_remote remora_remote;           /**< a peer's region descriptor */
typedef struct remora_pregion remora_pregion;         /**< a persistent (or volatile) region */
typedef struct remora_service remora_service;         /**< target side of GPSPM / service atomics */
typedef struct remora_listener remora_listener;       /**< accepts connections */
typedef struct remora_request remora_request;         /**< an incoming connection request */
typedef struct remora_conn remora_conn;               /**< a connection (or an RDM peer) */
typedef struct remora_cq remora_cq;                   /**< a completion queue (borrowed) */
typedef struct remora_shared_cq remora_shared_cq;     /**< a CQ shared by connections */
typedef struct remora_channel remora_channel;         /**< one wait for many CQs */
typedef struct remora_slot_pool remora_slot_pool;     /**< a budget of queue units (slot_pool) */
typedef struct remora_lease remora_lease;             /**< units held from a slot pool */
typedef struct remora_buffer_pool remora_buffer_pool; /**< registered bounce buffers */
typedef struct remora_srq remora_srq;                 /**< a receive queue shared by connections */
/** @} */

/** @name Domain (remora/domain.hpp) */
/** @{ */

/** Endpoint type of a domain. */
enum remora_endpoint {
    REMORA_EP_MSG = 0, /**< connected endpoints: listener and connect */
    REMORA_EP_RDM = 1, /**< reliable datagram endpoints: remora_peer_open and attach */
};

/** How the domain's progress thread waits (remora::progress_policy). */
enum remora_progress {
    REMORA_PROGRESS_DEFAULT = 0,  /**< adaptive */
    REMORA_PROGRESS_BUSY = 1,     /**< polls without sleeping: lowest latency, one core */
    REMORA_PROGRESS_ADAPTIVE = 2, /**< sleeps; polls for progress_spin_us after traffic */
    REMORA_PROGRESS_BLOCKING = 3, /**< sleeps in epoll between events */
};

/** Domain configuration (remora::domain_config). 0 / NULL fields take the defaults. */
struct remora_domain_cfg {
    size_t size;               /**< sizeof(struct remora_domain_cfg) */
    const char* provider;      /**< "tcp", "sockets", "shm", "tcp;ofi_rxm"...; NULL: automatic */
    const char* node;          /**< local address selecting the NIC; NULL: "127.0.0.1" */
    int endpoint;              /**< enum remora_endpoint; default REMORA_EP_MSG */
    int progress;              /**< enum remora_progress; default adaptive */
    uint32_t progress_spin_us; /**< adaptive spin, 1 us .. 1 s; 0: 100 us */
};

/**
 * Opens a domain. Fails with REMORA_E_NOT_SUPPORTED (no such provider on the node), or
 * REMORA_E_INVALID for a bad endpoint, progress or spin value.
 * Threading: a domain may be used from any number of threads at once.
 */
REMORA_API int remora_domain_open(const struct remora_domain_cfg* cfg, remora_domain** dom);

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
struct remora_caps {
    size_t size;                /**< set by the caller: sizeof(struct remora_caps) */
    char provider[32];          /**< provider name, NUL-terminated */
    int endpoint;               /**< enum remora_endpoint */
    bool native_atomics;        /**< the provider has atomics (else the target service does them) */
    bool target_needs_progress; /**< one-sided access needs the target to progress */
    bool cq_wait_fd;            /**< CQs can be blocked on through an fd */
    size_t inject_size;         /**< bytes a write or send may inject */
    size_t cm_data_size;        /**< private data limit of connect and accept */
    size_t max_msg_size;        /**< largest message */
    size_t cq_data_size;        /**< bytes of immediate data */
};

/** Fills *caps (caps->size set by the caller, same size rules as configurations). */
REMORA_API int remora_domain_caps(const remora_domain* dom, struct remora_caps* caps);

/** @} */

/** @name Memory registration (remora/memory_region.hpp) */
/** @{ */

/** What a region may be used for (remora::usage): combine with |. */
enum remora_usage {
    REMORA_USAGE_READ_SRC = 1u << 0, /**< peers may read from it */
    REMORA_USAGE_READ_DST =
        1u << 1, /**< local destination of a read (and of CAS/fetch-add results) */
    REMORA_USAGE_WRITE_SRC = 1u << 2, /**< local source of a write */
    REMORA_USAGE_WRITE_DST = 1u << 3, /**< peers may write into it */
    REMORA_USAGE_SEND = 1u << 4,      /**< source of a send */
    REMORA_USAGE_RECV = 1u << 5,      /**< destination of a receive */
    REMORA_USAGE_ATOMIC = 1u << 6,    /**< peers may run atomics on it */
    REMORA_USAGE_FLUSH = 1u << 7,     /**< peers may flush it */
    REMORA_USAGE_ALL = 0xffu,         /**< every usage above */
};

/**
 * Registers [addr, addr + len) for `usage` (at least one bit, none unknown): REMORA_E_INVALID
 * for NULL addr, len 0, no or unknown usage bits; the provider's error when it refuses.
 * The memory must outlive the region, and the region every operation that uses it.
 * Threading: immutable; usable by many threads and connections at once.
 */
REMORA_API int remora_mr_reg(remora_domain* dom, void* addr, size_t len, unsigned usage,
                             remora_mr** mr);

/** Deregisters and frees (no operation may still use it). NULL: nothing. */
REMORA_API void remora_mr_delete(remora_mr* mr);

/** The registered memory. */
REMORA_API int remora_mr_memory(const remora_mr* mr, void** addr, size_t* len);

/**
 * The descriptor a peer needs for [offset, offset + len) (len 0: to the end), granting only
 * the region's remote usages. REMORA_E_OUT_OF_RANGE when the range is not inside.
 */
REMORA_API int remora_mr_describe(const remora_mr* mr, size_t offset, size_t len,
                                  remora_remote** remote);

/** @} */

/** @name Remote region descriptors (remora/remote_region.hpp) */
/** @{ */

/** Bytes of a serialised descriptor (version 2, little-endian; see remote_region.hpp). */
#define REMORA_DESCRIPTOR_SIZE 32

/** What a target states about a region's durability (remora::persistence). */
enum remora_persistence {
    REMORA_PERSIST_NONE = 0,
    REMORA_PERSIST_PERSISTENT = 1u << 0, /**< durable storage */
    REMORA_PERSIST_APM = 1u << 1,   /**< placed writes are durable (read-after-write persists) */
    REMORA_PERSIST_GPSPM = 1u << 2, /**< the target's service persists on request */
};

/**
 * Parses `len` bytes that came from a peer. Every field is validated: wrong size, version,
 * addressing, usage or persistence bits, reserved bytes, zero length or overflow give
 * REMORA_E_MALFORMED_DESCRIPTOR with a message saying which.
 */
REMORA_API int remora_remote_from_bytes(const void* bytes, size_t len, remora_remote** remote);

/** Writes the REMORA_DESCRIPTOR_SIZE bytes to send; REMORA_E_TOO_LARGE when len is smaller. */
REMORA_API int remora_remote_to_bytes(const remora_remote* remote, void* buf, size_t len);

/** A sub-range [offset, offset + len): REMORA_E_OUT_OF_RANGE outside, INVALID when empty. */
REMORA_API int remora_remote_slice(const remora_remote* remote, uint64_t offset, uint64_t len,
                                   remora_remote** slice);

/** Length in bytes, usage bits (enum remora_usage) and persistence bits of a descriptor. */
REMORA_API int remora_remote_info(const remora_remote* remote, uint64_t* len, unsigned* usage,
                                  unsigned* persistence);

/** Frees a descriptor. NULL: nothing. */
REMORA_API void remora_remote_delete(remora_remote* remote);

/** @} */

/** @name Persistent regions and the target service (persistent_region.hpp, target_service.hpp) */
/** @{ */

/** Persistent region configuration (remora::persistent_region_config). */
struct remora_pregion_cfg {
    size_t size;      /**< sizeof(struct remora_pregion_cfg) */
    const char* path; /**< backing file; NULL or "": anonymous, volatile memory */
    size_t len;       /**< bytes; 0 with a path: the file's size */
    bool create;      /**< create a missing file or extend a short one */
    unsigned usage;   /**< enum remora_usage; 0: READ_SRC | WRITE_DST | ATOMIC | FLUSH */
    bool apm_durable; /**< the operator declares placed writes durable (DAX only) */
    bool unguarded;   /**< no lock or lease on the file (persistent_region_config::exclusive) */
};

/** Opens a persistent (file-backed) or volatile region, registered on `dom`. */
REMORA_API int remora_pregion_open(remora_domain* dom, const struct remora_pregion_cfg* cfg,
                                   remora_pregion** region);
/** Unmaps, deregisters and frees. NULL: nothing. */
REMORA_API void remora_pregion_delete(remora_pregion* region);
/** Its registered memory region (borrowed: lives as long as the persistent region). */
REMORA_API int remora_pregion_mr(const remora_pregion* region, const remora_mr** mr);
/** Makes [offset, offset + len) durable (msync); NOT_SUPPORTED for a volatile region. */
REMORA_API int remora_pregion_persist(const remora_pregion* region, uint64_t offset, uint64_t len);
/**
 * Sets `*revoked` once another process opened or truncated the region's file (its lease is
 * breaking): delete the region before the lease-break time runs out (persistent_region::revoked).
 */
REMORA_API int remora_pregion_revoked(const remora_pregion* region, bool* revoked);
/** The descriptor of [offset, offset + len) (len 0: to the end), stating persistence. */
REMORA_API int remora_pregion_describe(const remora_pregion* region, size_t offset, size_t len,
                                       remora_remote** remote);

/** Creates a target service (answers GPSPM flushes and service atomics). */
REMORA_API int remora_service_new(remora_service** svc);
/** Frees the service (after the connections it serves). NULL: nothing. */
REMORA_API void remora_service_delete(remora_service* svc);
/**
 * Exposes a region to the service's peers and returns its descriptor: a persistent region's
 * states REMORA_PERSIST_GPSPM. Exactly one of `mr` and `region` must be given.
 */
REMORA_API int remora_service_expose(remora_service* svc, const remora_mr* mr,
                                     const remora_pregion* region, remora_remote** remote);
/**
 * Answers `conn`'s service messages from now on. REMORA_E_INVALID when the connection has no
 * service_depth, REMORA_E_BAD_STATE when it already serves or calls a service.
 */
REMORA_API int remora_service_serve(remora_service* svc, remora_conn* conn);
/** Requests answered so far, and how many of them were refused. */
REMORA_API int remora_service_stats(const remora_service* svc, uint64_t* requests,
                                    uint64_t* refused);

/** @} */

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
};

/** One completion (remora::completion). */
struct remora_completion {
    int op;        /**< enum remora_op */
    int status;    /**< 0, or REMORA_E_* (CANCELED, DISCONNECTED, ...) */
    void* context; /**< the context the operation was posted with */
    size_t len;    /**< bytes received (recv); otherwise the provider's report, often 0 */
    uint64_t imm;  /**< immediate data when has_imm */
    bool has_imm;  /**< imm is valid */
    uint64_t tag;  /**< remora_conn_cfg.tag of the connection (tells them apart on a shared CQ) */
    uint32_t failed_part; /**< remora_gather_write: index of the first part that failed */
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
 */
REMORA_API int remora_cq_poll(remora_cq* cq, struct remora_completion* out, size_t max, size_t* n);
/**
 * Blocks until completions are ready or the CQ's channel fires; *ready is the count (0 is the
 * no_completion wake-up: poll and wait again). REMORA_E_TIMED_OUT after the timeout;
 * REMORA_E_BAD_STATE when the CQ's channel is shared (wait on the connection or channel).
 * No completion is lost between a poll that found nothing and this wait.
 */
REMORA_API int remora_cq_wait(remora_cq* cq, int timeout_ms, size_t* ready);
/** The next completion within the timeout (polls, and waits between polls). */
REMORA_API int remora_cq_next(remora_cq* cq, int timeout_ms, struct remora_completion* out);
/**
 * The fd for the caller's own epoll (readable when completions may be ready; -1 when the
 * caps' cq_wait_fd is false, unless a progress thread owns the CQ). Call remora_cq_arm() before
 * blocking on it.
 */
REMORA_API int remora_cq_fd(const remora_cq* cq, int* fd);
/**
 * Arms the CQ's fd: *armed true means it is safe to block on the fd; false means completions
 * may already be ready (poll first).
 */
REMORA_API int remora_cq_arm(remora_cq* cq, bool* armed);
/** The CQ's kind (enum remora_cq_kind) and its connection's tag. */
REMORA_API int remora_cq_info(const remora_cq* cq, int* kind, uint64_t* tag);

/** Shared CQ configuration (remora::shared_cq_config). */
struct remora_shared_cq_cfg {
    size_t size;          /**< sizeof(struct remora_shared_cq_cfg) */
    uint32_t entries;     /**< 0: 1024; clamped to the provider's CQ size */
    bool progress_thread; /**< read by the domain's progress thread */
    uint64_t tag;         /**< reported for a peer's write with immediate data */
};

/**
 * A CQ shared by several connections (remora_conn_cfg.shared_cq / shared_rcq). Attaching a
 * connection whose queue entries would overflow it fails with REMORA_E_TOO_LARGE.
 */
REMORA_API int remora_shared_cq_new(remora_domain* dom, const struct remora_shared_cq_cfg* cfg,
                                    remora_shared_cq** scq);
/** Frees this handle; the CQ lives on while attached connections use it. NULL: nothing. */
REMORA_API void remora_shared_cq_delete(remora_shared_cq* scq);
/** The shared CQ's queue (borrowed, lives as long as the handle): poll, wait, fd, arm. */
REMORA_API int remora_shared_cq_queue(const remora_shared_cq* scq, remora_cq** cq);

/** What a channel wait reports (remora::channel_event). */
struct remora_channel_event {
    remora_cq* cq; /**< the CQ that fired: poll it */
    int kind;      /**< enum remora_cq_kind */
    uint64_t tag;  /**< its connection's tag */
    size_t ready;  /**< completions ready on it; 0 is a no_completion wake-up */
};

/** A completion channel that connections with channel_shared may share. */
REMORA_API int remora_channel_new(remora_channel** ch);
/** Frees this handle (the channel lives while attached connections do). NULL: nothing. */
REMORA_API void remora_channel_delete(remora_channel* ch);
/** The channel's fd for the caller's epoll. */
REMORA_API int remora_channel_fd(const remora_channel* ch, int* fd);
/**
 * Blocks until an attached CQ fires and says which (REMORA_E_TIMED_OUT after the timeout).
 * Threading: one waiter at a time.
 */
REMORA_API int remora_channel_wait(remora_channel* ch, int timeout_ms,
                                   struct remora_channel_event* ev);

/** @} */

/** @name Connections (remora/connection.hpp, listener.hpp) */
/** @{ */

/** Connection configuration (remora::connection_config). 0 / NULL fields take the defaults. */
struct remora_conn_cfg {
    size_t size;                    /**< sizeof(struct remora_conn_cfg) */
    uint32_t sq_size;               /**< send-queue depth; 0: 64 */
    uint32_t rq_size;               /**< receive-queue depth; 0: 64 */
    uint32_t cq_size;               /**< 0: sq_size (+ rq_size without an RCQ) */
    bool rcq;                       /**< receives complete on a separate receive CQ */
    uint32_t rcq_size;              /**< 0: rq_size */
    bool channel_shared;            /**< CQ and RCQ share one channel: remora_conn_wait */
    remora_channel* shared_channel; /**< with channel_shared: this channel (else its own) */
    uint32_t max_sge;               /**< 0: 1 */
    uint32_t connect_timeout_ms;    /**< 0: 5000 */
    bool progress_thread;           /**< the domain's progress thread drives this connection */
    uint64_t tag;                   /**< reported in completions and channel events */
    /** Target-service requests in flight (GPSPM flushes, service atomics); set on both sides,
     *  the target's at least the client's. Such a connection carries only the service's
     *  messages: remora_send and remora_recv are refused (REMORA_E_BAD_STATE). */
    uint32_t service_depth;
    remora_shared_cq* shared_cq;  /**< complete on this shared CQ instead of one's own */
    remora_shared_cq* shared_rcq; /**< receives on this shared CQ (implies rcq) */
    uint32_t signal_every;        /**< selective signalling; 0: 1 (every operation) */
    /** A budget shared with other connections: every operation also takes {sq 1, cq 1} (a
     *  receive {recv 1, cq 1}) from this pool at post and gives them back when its completion
     *  is read. Exhaustion follows the pool's policy: REMORA_E_WOULD_BLOCK under back-pressure
     *  (or a parked post, see remora_op_opts), REMORA_E_BAD_STATE under forbid. Refused with
     *  signal_every > 1. The connection holds the pool: delete the handle whenever. */
    remora_slot_pool* slots;
    /** Bounce buffers for remora_write_copy and remora_send_copy (may be shared). */
    remora_buffer_pool* bounce;
    /** Take incoming messages from this shared receive queue (remora_srq_new) instead of
     *  receives of the connection's own: remora_recv is refused (REMORA_E_BAD_STATE). With rcq,
     *  they complete on the connection's own receive CQ, else on the queue's. Refused
     *  (REMORA_E_INVALID) with service_depth, channel_shared or progress_thread. */
    remora_srq* srq;
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
REMORA_API int remora_listener_new(remora_domain* dom, const char* host, uint16_t port,
                                   remora_listener** lst);
/** Stops listening and frees. NULL: nothing. */
REMORA_API void remora_listener_delete(remora_listener* lst);
/** The bound port. */
REMORA_API int remora_listener_port(const remora_listener* lst, uint16_t* port);
/** An fd readable when a request may be waiting. */
REMORA_API int remora_listener_fd(const remora_listener* lst, int* fd);
/** The next connection request, or REMORA_E_TIMED_OUT. */
REMORA_API int remora_listener_get_request(remora_listener* lst, int timeout_ms,
                                           remora_request** req);
/** The private data the client sent with its request (valid while the request lives). */
REMORA_API int remora_request_private_data(const remora_request* req, const void** data,
                                           size_t* len);
/**
 * Accepts with `pdata` (at most caps.cm_data_size bytes) and waits until the connection is
 * established. Oversize private data is REMORA_E_TOO_LARGE and leaves the request answerable,
 * as do the C layer's own refusals (a bad cfg->size, NULL pdata with a length); a configuration
 * the connection refuses rejects the request (the client sees REMORA_E_REJECTED). Free the
 * request afterwards either way.
 */
REMORA_API int remora_request_accept(remora_request* req, const struct remora_conn_cfg* cfg,
                                     const void* pdata, size_t pdata_len, remora_conn** conn);
/** Rejects with private data (at most caps.cm_data_size - 1 bytes). */
REMORA_API int remora_request_reject(remora_request* req, const void* pdata, size_t pdata_len);
/** Frees a request; one neither accepted nor rejected is rejected. NULL: nothing. */
REMORA_API void remora_request_delete(remora_request* req);

/**
 * Connects to host:port with private data (at most caps.cm_data_size bytes, else
 * REMORA_E_TOO_LARGE). REMORA_E_CONNECTION_REFUSED when nobody listens, REMORA_E_REJECTED when
 * the peer rejects (its private data: remora_last_error_data()), REMORA_E_TIMED_OUT after
 * connect_timeout_ms.
 */
REMORA_API int remora_connect(remora_domain* dom, const char* host, uint16_t port,
                              const struct remora_conn_cfg* cfg, const void* pdata,
                              size_t pdata_len, remora_conn** conn);

/**
 * The private data the peer sent with the failure of the last call that failed on this thread
 * (a rejected connect's reject data); len 0 when none. Valid until the next failing call.
 */
REMORA_API void remora_last_error_data(const void** data, size_t* len);

/** Opens an RDM endpoint (domain opened with REMORA_EP_RDM) with no peer yet. */
REMORA_API int remora_peer_open(remora_domain* dom, const struct remora_conn_cfg* cfg,
                                remora_conn** conn);
/** This RDM endpoint's address, to give to the peer (valid while the connection lives). */
REMORA_API int remora_peer_address(const remora_conn* conn, const void** addr, size_t* len);
/** Makes the peer's address the destination of every operation (REMORA_E_INVALID for junk). */
REMORA_API int remora_peer_attach(remora_conn* conn, const void* addr, size_t len);

/** Disconnects; outstanding operations complete with errors. Idempotent. */
REMORA_API int remora_conn_close(remora_conn* conn);
/** Closes (if open) and frees. NULL: nothing. */
REMORA_API void remora_conn_delete(remora_conn* conn);
/** The private data the peer sent when connecting or accepting (valid while conn lives). */
REMORA_API int remora_conn_peer_private_data(const remora_conn* conn, const void** data,
                                             size_t* len);
/** The connection's CQ (borrowed: lives as long as the connection). */
REMORA_API int remora_conn_cq(remora_conn* conn, remora_cq** cq);
/** Its receive CQ; *rcq is NULL when it has none (rcq false). */
REMORA_API int remora_conn_rcq(remora_conn* conn, remora_cq** rcq);
/**
 * With channel_shared: blocks until the CQ or RCQ fires and says which (with a channel shared
 * by several connections, possibly another connection's: dispatch by ev->tag).
 * REMORA_E_BAD_STATE for separate channels.
 */
REMORA_API int remora_conn_wait(remora_conn* conn, int timeout_ms, struct remora_channel_event* ev);
/** Next connection event (enum remora_conn_event) or REMORA_E_TIMED_OUT. */
REMORA_API int remora_conn_next_event(remora_conn* conn, int timeout_ms, int* event);
/** An fd readable while a connection event is pending. */
REMORA_API int remora_conn_event_fd(const remora_conn* conn, int* fd);
/** Operations posted and not yet reaped. */
REMORA_API int remora_conn_in_flight(const remora_conn* conn, size_t* n);

/** @} */

/** @name Operations (remora/connection.hpp) */
/** @{ */

/** Operation flags (remora::completion_mode); 0: a completion on success and on error. */
enum remora_op_flags {
    REMORA_F_ON_ERROR = 1u << 0, /**< report only an error */
    REMORA_F_AT_POST = 1u << 1,  /**< writes/sends up to inject_size: complete at post */
};

/**
 * Every operation checks its arguments before anything is posted: REMORA_E_OUT_OF_RANGE for a
 * range outside a region or descriptor, REMORA_E_ACCESS_DENIED for a usage not granted,
 * REMORA_E_WOULD_BLOCK for a full queue (reap completions and retry), REMORA_E_INVALID for
 * unknown flags. Each completes later on the connection's CQ (receives on the RCQ if it has one)
 * with `context`. Memory must stay registered until the operation completes.
 */
REMORA_API int remora_write(remora_conn* conn, const remora_remote* dst, uint64_t dst_offset,
                            const remora_mr* src, size_t src_offset, size_t len, unsigned flags,
                            void* context);
/**
 * A write whose arrival the peer sees as REMORA_OP_REMOTE_WRITE carrying `imm` (on its RCQ if
 * it has one); `imm` must fit caps.cq_data_size bytes.
 */
REMORA_API int remora_write_imm(remora_conn* conn, const remora_remote* dst, uint64_t dst_offset,
                                const remora_mr* src, size_t src_offset, size_t len, uint64_t imm,
                                unsigned flags, void* context);
/** Reads [src_offset, +len) of the peer's region into [dst_offset, +len) of dst. */
REMORA_API int remora_read(remora_conn* conn, const remora_mr* dst, size_t dst_offset,
                           const remora_remote* src, uint64_t src_offset, size_t len,
                           unsigned flags, void* context);
/**
 * Atomics on an 8-byte aligned word (REMORA_USAGE_ATOMIC): native, or through the target
 * service with service_depth, else REMORA_E_NOT_SUPPORTED. compare_swap and fetch_add write the
 * word's previous value into 8 bytes of `result` at result_offset (REMORA_USAGE_READ_DST).
 */
REMORA_API int remora_atomic_write(remora_conn* conn, const remora_remote* dst, uint64_t dst_offset,
                                   uint64_t value, unsigned flags, void* context);
/** Compare-and-swap: the word becomes `desired` if it was `expected`. */
REMORA_API int remora_compare_swap(remora_conn* conn, const remora_remote* dst, uint64_t dst_offset,
                                   uint64_t expected, uint64_t desired, const remora_mr* result,
                                   size_t result_offset, unsigned flags, void* context);
/** Fetch-and-add. */
REMORA_API int remora_fetch_add(remora_conn* conn, const remora_remote* dst, uint64_t dst_offset,
                                uint64_t addend, const remora_mr* result, size_t result_offset,
                                unsigned flags, void* context);

/** What a flush guarantees (remora::flush_type). */
enum remora_flush_type {
    REMORA_FLUSH_STRONGEST = 0,   /**< persistence for a persistent region, else visibility */
    REMORA_FLUSH_VISIBILITY = 1,  /**< the target's memory holds the bytes */
    REMORA_FLUSH_PERSISTENCE = 2, /**< ... and they are durable */
};
/** How a flush reaches its guarantee (remora::flush_method). */
enum remora_flush_method {
    REMORA_FLUSH_AUTO = 0,             /**< the cheapest the descriptor offers */
    REMORA_FLUSH_READ_AFTER_WRITE = 1, /**< an 8-byte read after the writes */
    REMORA_FLUSH_GPSPM = 2,            /**< a request the target's service answers */
};
/**
 * Completes (REMORA_OP_FLUSH) once the connection's earlier writes to [offset, offset + len)
 * are visible or durable. The descriptor must grant REMORA_USAGE_FLUSH; persistence needs a
 * persistent region (REMORA_E_NOT_SUPPORTED names what is missing). GPSPM needs service_depth;
 * its reply completes on the RCQ when there is one.
 */
REMORA_API int remora_flush(remora_conn* conn, const remora_remote* dst, uint64_t offset,
                            uint64_t len, int type, int method, unsigned flags, void* context);
/** The method remora_flush would use (enum remora_flush_method), or why none can. */
REMORA_API int remora_flush_method_for(const remora_conn* conn, const remora_remote* dst, int type,
                                       int method, int* chosen);
/** Sends [offset, offset + len) of src. */
REMORA_API int remora_send(remora_conn* conn, const remora_mr* src, size_t offset, size_t len,
                           unsigned flags, void* context);
/** Sends with immediate data (the peer's receive completes with has_imm). */
REMORA_API int remora_send_imm(remora_conn* conn, const remora_mr* src, size_t offset, size_t len,
                               uint64_t imm, unsigned flags, void* context);
/** Posts a receive into [offset, offset + len) of dst. */
REMORA_API int remora_recv(remora_conn* conn, const remora_mr* dst, size_t offset, size_t len,
                           unsigned flags, void* context);

/** @} */

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
    REMORA_BACKPRESSURE = 0, /**< REMORA_E_WOULD_BLOCK, or park (remora_slot_pool_acquire) */
    REMORA_FORBID = 1, /**< sized so it cannot happen: REMORA_E_BAD_STATE names the sizing bug */
};

/** Slot pool configuration (remora::slot_pool_config). */
struct remora_slot_pool_cfg {
    size_t size;                  /**< sizeof(struct remora_slot_pool_cfg) */
    struct remora_units capacity; /**< at least one unit */
    int policy;                   /**< enum remora_exhaustion; default back-pressure */
    size_t max_waiters;           /**< parked requests at most; 0: 1024 */
};

/** Timeout value that waits without a deadline (remora_slot_pool_acquire, remora_op_opts). */
#define REMORA_NO_DEADLINE 0x7fffffff

/**
 * Creates a pool (REMORA_E_INVALID for an empty capacity or an unknown policy; cfg is
 * required). Give it to connections through remora_conn_cfg.slots, or take units from it
 * yourself. Threading: every pool call may run concurrently; a lease is one thread's at a time.
 */
REMORA_API int remora_slot_pool_new(const struct remora_slot_pool_cfg* cfg,
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
                                            remora_lease** lease);
/**
 * What a parked acquisition reports, exactly once: status 0 with the lease (the callee owns it:
 * remora_lease_release), or REMORA_E_TIMED_OUT / REMORA_E_CANCELED with lease NULL. Runs on the
 * thread that gave units back, the pool's timer thread, or remora_slot_pool_cancel_all's; it
 * must not block, and may call into the pool.
 */
typedef void (*remora_acquire_cb)(void* ctx, int status, remora_lease* lease);
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
REMORA_API int remora_lease_units(const remora_lease* lease, struct remora_units* held);
/**
 * Gives the lease's units back and frees the handle (NULL: nothing). Parked requests the units
 * satisfy run their callbacks on this thread before it returns.
 */
REMORA_API void remora_lease_release(remora_lease* lease);

/** @} */

/** @name Bounce buffers (remora/buffer_pool.hpp) */
/** @{ */

/** Buffer pool configuration (remora::buffer_pool_config). */
struct remora_buffer_pool_cfg {
    size_t size;        /**< sizeof(struct remora_buffer_pool_cfg) */
    size_t buffers;     /**< 0: 64 */
    size_t buffer_size; /**< bytes each; 0: 4096 */
    unsigned usage;     /**< enum remora_usage; 0: WRITE_SRC | SEND */
};
/** Registers `buffers` x `buffer_size` bytes on dom for remora_conn_cfg.bounce. */
REMORA_API int remora_buffer_pool_new(remora_domain* dom, const struct remora_buffer_pool_cfg* cfg,
                                      remora_buffer_pool** pool);
/** Frees this handle (connections using the pool keep it). NULL: nothing. */
REMORA_API void remora_buffer_pool_delete(remora_buffer_pool* pool);
/** Buffers free now, of `capacity`, each `buffer_size` bytes (out-parameters may be NULL). */
REMORA_API int remora_buffer_pool_info(const remora_buffer_pool* pool, size_t* available,
                                       size_t* capacity, size_t* buffer_size);

/** @} */

/** @name Operations with options: parked posts, callbacks (remora/connection.hpp op_options) */
/** @{ */

/** How a parked post waits (remora::park_mode). */
enum remora_park_mode {
    REMORA_PARK_BLOCK = 0, /**< the calling thread waits */
    REMORA_PARK_QUEUE = 1, /**< returns at once; the library posts it later (needs callback) */
};

/**
 * A completion delivered to a function instead of remora_cq_poll: runs exactly once, on the
 * thread that reads the CQ (or the library's thread of a queued post), after the CQ's lock is
 * released; must not block. c->context is the operation's context. The library allocates a
 * small record per such operation, freed when the callback runs (a connection destroyed while
 * such operations are unreaped drops their callbacks and loses the records).
 */
typedef void (*remora_completion_cb)(const struct remora_completion* c);

/** Options of the `_ex` operations, remora_gather_write and the copies. NULL: all defaults. */
struct remora_op_opts {
    size_t size;    /**< sizeof(struct remora_op_opts) */
    unsigned flags; /**< enum remora_op_flags */
    void* context;  /**< returned in the completion */
    /**
     * 0: no parking (a full queue or pool is REMORA_E_WOULD_BLOCK at once). Else the post waits
     * up to this many ms (REMORA_NO_DEADLINE: without a deadline) for its queue entries and
     * slot-pool units, in FIFO order, then posts; or ends having taken nothing with
     * REMORA_E_TIMED_OUT, REMORA_E_CANCELED (remora_conn_cancel_parked) or
     * REMORA_E_DISCONNECTED (closed). Somebody else must read the CQ meanwhile.
     */
    int park_ms;
    int park_mode; /**< enum remora_park_mode; REMORA_PARK_QUEUE needs park_ms and callback */
    /** NULL: the completion goes to the CQ. Else to this function (see remora_completion_cb);
     *  a queued post never posted still gets it once, with the reason as its status. */
    remora_completion_cb callback;
};

/** remora_write with options. */
REMORA_API int remora_write_ex(remora_conn* conn, const remora_remote* dst, uint64_t dst_offset,
                               const remora_mr* src, size_t src_offset, size_t len,
                               const struct remora_op_opts* opts);
/** remora_read with options. */
REMORA_API int remora_read_ex(remora_conn* conn, const remora_mr* dst, size_t dst_offset,
                              const remora_remote* src, uint64_t src_offset, size_t len,
                              const struct remora_op_opts* opts);
/** remora_send with options. */
REMORA_API int remora_send_ex(remora_conn* conn, const remora_mr* src, size_t offset, size_t len,
                              const struct remora_op_opts* opts);
/** remora_recv with options. */
REMORA_API int remora_recv_ex(remora_conn* conn, const remora_mr* dst, size_t offset, size_t len,
                              const struct remora_op_opts* opts);

/** A piece of a peer's memory: [offset, offset + len) of `remote` (remora::remote_segment). */
struct remora_segment {
    const remora_remote* remote;
    uint64_t offset;
    size_t len;
};
/** Parts one multi-key operation may have (remora::connection::max_gather_parts). */
#define REMORA_MAX_GATHER_PARTS 64
/**
 * Writes consecutive pieces of src from src_offset into the `n` remote segments in order (part i
 * carries dst[i].len bytes). Every segment is checked before anything is posted
 * (REMORA_E_OUT_OF_RANGE, ACCESS_DENIED; INVALID for n 0, a NULL remote or an empty segment;
 * TOO_LARGE past REMORA_MAX_GATHER_PARTS or the send-queue depth); the n entries (and slot
 * units) are taken all at once or not at all. Completes once, as REMORA_OP_WRITE with len the
 * total; a failure reports the first failing part's status and index (failed_part).
 * REMORA_F_AT_POST is refused.
 */
REMORA_API int remora_gather_write(remora_conn* conn, const struct remora_segment* dst, size_t n,
                                   const remora_mr* src, size_t src_offset,
                                   const struct remora_op_opts* opts);
/**
 * Copies [data, data + len) into a bounce buffer of remora_conn_cfg.bounce and writes it from
 * there: `data` is free when the call returns. REMORA_E_WOULD_BLOCK when the pool or the queue is
 * exhausted, TOO_LARGE past the pool's buffer_size, BAD_STATE without a pool.
 */
REMORA_API int remora_write_copy(remora_conn* conn, const remora_remote* dst, uint64_t dst_offset,
                                 const void* data, size_t len, const struct remora_op_opts* opts);
/** remora_write_copy's send. */
REMORA_API int remora_send_copy(remora_conn* conn, const void* data, size_t len,
                                const struct remora_op_opts* opts);
/** @} */

/** @name Asynchronous setup (connection.hpp connect_async, listener.hpp accept_async) */
/** @{ */

/**
 * Sends the connection request like remora_connect and returns at once (its argument errors
 * too; sockets refuses a port nobody listens on here, REMORA_E_CONNECTION_REFUSED). The outcome
 * is reported once as a connection event (remora_conn_next_event, remora_conn_event_fd):
 * REMORA_CONN_ESTABLISHED, or REMORA_CONN_REJECTED / REFUSED / UNREACHABLE / LOST / CLOSED with
 * its error in remora_conn_setup_status(). tcp progresses the setup only while the connection
 * is looked at (next_event, a channel wait). Receives may be posted meanwhile; every other
 * operation is REMORA_E_BAD_STATE until established.
 */
REMORA_API int remora_connect_async(remora_domain* dom, const char* host, uint16_t port,
                                    const struct remora_conn_cfg* cfg, const void* pdata,
                                    size_t pdata_len, remora_conn** conn);
/** Accepts and returns at once; the outcome is a connection event as for remora_connect_async. */
REMORA_API int remora_request_accept_async(remora_request* req, const struct remora_conn_cfg* cfg,
                                           const void* pdata, size_t pdata_len, remora_conn** conn);
/**
 * 0 once established (and for a connection set up synchronously), REMORA_E_WOULD_BLOCK while
 * the setup is under way, else the setup's error (REMORA_E_REJECTED with the peer's data in
 * remora_last_error_data(), CONNECTION_REFUSED, TIMED_OUT, CANCELED after a close).
 */
REMORA_API int remora_conn_setup_status(const remora_conn* conn);

/** @} */

/** @name Shared receive queues (remora/shared_receive_queue.hpp) */
/** @{ */

/** Shared receive queue configuration (remora::shared_receive_queue_config). */
struct remora_srq_cfg {
    size_t size;    /**< sizeof(struct remora_srq_cfg) */
    uint32_t depth; /**< receives posted at once; 0: 64 (clamped to the provider's) */
    uint64_t tag;   /**< the tag of its receives' completions */
};
/**
 * One receive queue for many connections (remora_conn_cfg.srq). REMORA_E_NOT_SUPPORTED where
 * the provider has none (every RDM domain; tcp and sockets msg domains have one).
 * Threading: remora_srq_recv may run on several threads; its CQ has one reader at a time.
 */
REMORA_API int remora_srq_new(remora_domain* dom, const struct remora_srq_cfg* cfg,
                              remora_srq** srq);
/** Frees this handle (connections using the queue keep it). NULL: nothing. */
REMORA_API void remora_srq_delete(remora_srq* srq);
/**
 * Posts a receive into [offset, offset + len) of dst (REMORA_USAGE_RECV): checked like
 * remora_recv; REMORA_E_WOULD_BLOCK when `depth` receives are posted.
 */
REMORA_API int remora_srq_recv(remora_srq* srq, const remora_mr* dst, size_t offset, size_t len,
                               unsigned flags, void* context);
/** The queue's CQ (borrowed: lives as long as the handle), where its receives complete. */
REMORA_API int remora_srq_cq(const remora_srq* srq, remora_cq** cq);
/** Effective depth, receives posted and not reaped, connections attached (each may be NULL). */
REMORA_API int remora_srq_info(const remora_srq* srq, size_t* depth, size_t* posted,
                               size_t* connections);

/** @} */

/** @name Parked posts of a connection */
/** @{ */

/** Ends every parked post of conn with REMORA_E_CANCELED; *n how many (may be NULL). A post
 * whose try is under way is waited for and counted only if it parks again. */
REMORA_API int remora_conn_cancel_parked(remora_conn* conn, size_t* n);
/** Posts of conn parked now. */
REMORA_API int remora_conn_parked(const remora_conn* conn, size_t* n);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* REMORA_REMORA_H */

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
 * - Names follow the C++ API: the handle of remora::X is remora_X, its calls remora_X_method
 *   (factories as in C++: _open, _create; the destructor is _delete), a configuration struct is
 *   remora_X_config, and the connection's operations are remora_VERB(conn, ...) as the
 *   persistence layer's verbs are in C++ (remora_write, remora_write_with_imm, remora_flush,
 *   remora_publish...). Calls taking options add _ex.
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

#include <remora/version.h>

/** Marks the C API's functions: exported from libremora.so with default visibility. */
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
 * @param code a return code
 * @return a static string, never NULL.
 */
REMORA_API const char* remora_strerror(int code);

/**
 * The message of the last call that failed on this thread ("" when none has): one line naming
 * what was refused and why. Valid until the next failing call on this thread.
 * @return the message, "" when no call failed on this thread.
 */
REMORA_API const char* remora_last_error_message(void);

/**
 * The running library's version, "MAJOR.MINOR.PATCH". Equal to REMORA_VERSION_STRING
 * (remora/version.h, included here) when the program runs with the library it was compiled
 * against.
 * @return a static string, never NULL.
 */
REMORA_API const char* remora_version(void);

/** @} */

/** @name Log lines (remora/log.hpp) */
/** @{ */

/** How much a log line matters, most severe first (remora::log_level). */
enum remora_log_level {
    REMORA_LOG_ERROR = 0,   /**< a failure the library could not report to a caller */
    REMORA_LOG_WARNING = 1, /**< a likely misuse or a misbehaving peer (service timeouts) */
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
 * process, shared with the C++ API's remora::set_log_function: the last set wins. libfabric's
 * own lines (those FI_LOG_LEVEL asks for) come to it too, instead of stderr (remora/log.hpp).
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
    /** Deprecated, and without effect: the same-host path is on by default (no_same_host turns
     *  it off). true with no_same_host is REMORA_E_INVALID. */
    bool same_host;
    /** true: no shm provider beside a tcp or sockets MSG domain, so its connections stay on their
     *  provider (remora::domain_config::same_host false). false (the default): open it when it
     *  is there, register every region in it too and describe regions with their same-host
     *  address, for connections to a peer in another process of this host and user
     *  (remora_provider_caps::same_host says whether it opened; the environment variable
     *  REMORA_SAME_HOST decides instead when set). Over that path such a peer reaches all of
     *  this process's memory: see remora::domain_config::same_host for when it is taken. */
    bool no_same_host;
};

/**
 * Opens a domain. Fails with REMORA_E_NOT_SUPPORTED (no such provider on the node), or
 * REMORA_E_INVALID for a bad endpoint, progress or spin value, or same_host with no_same_host.
 * Threading: a domain may be used from any number of threads at once.
 * @param cfg its configuration (NULL: the defaults)
 * @param dom receives the domain
 * @return 0; REMORA_E_NOT_SUPPORTED (no such provider), REMORA_E_INVALID (a bad endpoint, progress
 * or spin value, same_host with no_same_host), or the provider's error.
 */
REMORA_API int remora_domain_open(const struct remora_domain_config* cfg, remora_domain** dom);

/**
 * Closes the domain and frees the handle, saying whether the provider closed. While objects
 * made from it (regions, listeners, connections, shared CQs, services' regions) still exist:
 * REMORA_E_BAD_STATE with their count, and the handle stays valid (delete them, then close).
 * On success *dom is set to NULL. NULL or *dom NULL: nothing to do, 0.
 * @param dom the domain's handle, set to NULL once closed
 * @return 0; REMORA_E_BAD_STATE while objects made from it exist (the handle stays valid); the
 * provider's error when it failed to close.
 */
REMORA_API int remora_domain_close(remora_domain** dom);

/**
 * Frees the handle without reporting; the provider closes when its last user goes.
 * @param dom the domain, or NULL
 */
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
    /** libfabric's shm provider is open beside the domain: regions are registered there too and
     *  their descriptors carry their same-host address (remora::provider_caps::same_host). */
    bool same_host;
};

/**
 * Fills *caps (caps->size set by the caller, same size rules as configurations).
 * @param dom the domain
 * @param caps filled up to caps->size bytes (set size first)
 * @return 0; REMORA_E_INVALID for a NULL argument or a bad caps->size.
 */
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
 * @param dom the domain
 * @param addr the memory's first byte
 * @param len its length in bytes (> 0)
 * @param usage enum remora_usage bits
 * @param mr receives the region
 * @return 0; REMORA_E_INVALID (NULL addr, len 0, no or unknown usage bits), or the provider's
 * refusal.
 */
REMORA_API int remora_memory_region_create(remora_domain* dom, void* addr, size_t len,
                                           unsigned usage, remora_memory_region** mr);

/**
 * Deregisters and frees (no operation may still use it). NULL: nothing.
 * @param mr the region, or NULL
 */
REMORA_API void remora_memory_region_delete(remora_memory_region* mr);

/**
 * The registered memory.
 * @param mr the registered memory region
 * @param addr receives the first byte
 * @param len receives the length
 * @return 0, or REMORA_E_INVALID for a NULL argument.
 */
REMORA_API int remora_memory_region_data(const remora_memory_region* mr, void** addr, size_t* len);

/**
 * The descriptor a peer needs for [offset, offset + len) (len 0: to the end), granting only
 * the region's remote usages. REMORA_E_OUT_OF_RANGE when the range is not inside.
 * @param mr the registered memory region
 * @param offset the start of the range
 * @param len its length (0: to the end)
 * @param remote receives the descriptor
 * @return 0; REMORA_E_OUT_OF_RANGE when the range is not inside the region.
 */
REMORA_API int remora_memory_region_describe(const remora_memory_region* mr, size_t offset,
                                             size_t len, remora_remote_region** remote);

/** @} */

/** @name Remote region descriptors (remora/remote_region.hpp) */
/** @{ */

/** Bytes of a serialised descriptor (version 3, little-endian; see remote_region.hpp). Parsing
 *  also takes version 2's 32 bytes. */
#define REMORA_DESCRIPTOR_SIZE 40

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
 * @param bytes the bytes from the peer
 * @param len their length: REMORA_DESCRIPTOR_SIZE (version 3), or 32 (version 2)
 * @param remote receives the descriptor
 * @return 0; REMORA_E_MALFORMED_DESCRIPTOR naming what failed validation.
 */
REMORA_API int remora_remote_region_parse(const void* bytes, size_t len,
                                          remora_remote_region** remote);

/**
 * Writes the REMORA_DESCRIPTOR_SIZE bytes to send; REMORA_E_TOO_LARGE when len is smaller.
 * @param remote the descriptor
 * @param buf receives REMORA_DESCRIPTOR_SIZE bytes
 * @param len buf's size
 * @return 0; REMORA_E_TOO_LARGE when len is smaller than REMORA_DESCRIPTOR_SIZE.
 */
REMORA_API int remora_remote_region_serialize(const remora_remote_region* remote, void* buf,
                                              size_t len);

/**
 * A sub-range [offset, offset + len): REMORA_E_OUT_OF_RANGE outside, INVALID when empty.
 * @param remote the descriptor
 * @param offset the start of the sub-range
 * @param len its length (> 0)
 * @param slice receives the new descriptor
 * @return 0; REMORA_E_OUT_OF_RANGE outside the descriptor, REMORA_E_INVALID when empty.
 */
REMORA_API int remora_remote_region_slice(const remora_remote_region* remote, uint64_t offset,
                                          uint64_t len, remora_remote_region** slice);

/**
 * Length in bytes, usage bits (enum remora_usage) and persistence bits of a descriptor.
 * @param remote the descriptor
 * @param len receives its length, or NULL
 * @param usage receives its usage bits (enum remora_usage), or NULL
 * @param persistence receives the persistence bits (enum remora_persistence), or NULL
 * @return 0, or REMORA_E_INVALID for a NULL descriptor.
 */
REMORA_API int remora_remote_region_info(const remora_remote_region* remote, uint64_t* len,
                                         unsigned* usage, unsigned* persistence);

/**
 * Frees a descriptor. NULL: nothing.
 * @param remote the descriptor, or NULL
 */
REMORA_API void remora_remote_region_delete(remora_remote_region* remote);

/** @} */

/* Completion queues, shared CQs and channels. */
#include <remora/remora_cq.h>
struct remora_completion;    /* remora_cq.h (declared here too: it may be included first) */
struct remora_channel_event; /* remora_cq.h */

/* Connections and their operations. */
#include <remora/remora_connection.h>
#ifdef __cplusplus
}
#endif

/* The persistence layer's, the pools', receiving's, admission's and the replica set's functions
 * over these handles. */
#include <remora/remora_admission.h>
#include <remora/remora_persist.h>
#include <remora/remora_pools.h>
#include <remora/remora_receive.h>
#include <remora/remora_replica.h>

#endif /* REMORA_REMORA_H */

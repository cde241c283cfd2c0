// SPDX-License-Identifier: BSD-3-Clause
// src/capi/capi.hpp — the C API's internals: handle types, error reporting, the exception
// barrier, configuration loading by size.
//
// Layer: src/capi sits on the public C++ API only (include/remora/*.hpp), like the tools; it
// includes nothing from src/ but itself (scripts/check-layering.sh checks it).
//
// Every exported function is `guarded(name, body)`: the body returns 0 or a REMORA_E_* code and
// may throw; guarded() turns any exception into REMORA_E_NOMEM / REMORA_E_UNKNOWN with its
// message, so none crosses into C. A failure is reported through fail(), which records the
// per-thread message (and the peer's data of a rejected connect).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include <remora/remora.h>
#include <remora/remora.hpp>

// ---- handle types (the header declares them incomplete). remora_memory_region and
// remora_completion_queue are the C++ objects themselves (memory_region, completion_queue), so
// borrowed ones need no allocation.
struct remora_domain {
    remora::domain d;
};
struct remora_remote_region {
    remora::remote_region r;
};
struct remora_persistent_region {
    remora::persistent_region p;
};
struct remora_target_service {
    remora::target_service s;
};
struct remora_listener {
    remora::listener l;
};
struct remora_connection_request {
    remora::connection_request q;
};
namespace remora::capi {
struct callback_record;
// The C completion callbacks of one connection's operations not yet run: each record is unlinked
// and freed by the trampoline that runs its callback; the ones a destroyed connection dropped
// (never to run) are freed with the registry.
struct callback_registry {
    std::mutex mu;
    callback_record* head = nullptr;
    callback_registry() = default;
    callback_registry(const callback_registry&) = delete;
    callback_registry& operator=(const callback_registry&) = delete;
    ~callback_registry();
};
}  // namespace remora::capi
namespace remora::capi {
// The registry of a C connection, as its first base: built before the connection and destroyed
// after it, so once the connection is gone no callback of its operations runs any more, and the
// records left are freed.
struct callback_owner {
    std::unique_ptr<callback_registry> callbacks = std::make_unique<callback_registry>();
};
}  // namespace remora::capi
// The C handle is the C++ connection itself (a derived object), so the connection a CQ names
// (completion_queue::connection) converts back to its C handle (conn_of) without a lookup. It is
// never moved: the connection the CQ names is always this one. `c` is the connection.
struct remora_connection final : remora::capi::callback_owner, remora::connection {
    explicit remora_connection(remora::connection&& conn) noexcept
        : remora::connection(std::move(conn)) {}
    remora_connection(const remora_connection&) = delete;
    remora_connection& operator=(const remora_connection&) = delete;
    remora::connection& c = *this;
};
struct remora_shared_completion_queue {
    remora::shared_completion_queue q;
};
struct remora_completion_channel {
    remora::completion_channel ch;
};
struct remora_slot_pool {
    std::shared_ptr<remora::slot_pool> p;
};
struct remora_held_units {
    remora::held_units l;
};
struct remora_buffer_pool {
    remora::buffer_pool b;
};
struct remora_shared_receive_queue {
    remora::shared_receive_queue q;
};

struct remora_receive_pool {
    remora::receive_pool p;
};
struct remora_message {
    remora::message m;
};
struct remora_registration_cache {
    remora::registration_cache c;
};
struct remora_cached_region {
    remora::cached_region r;
};
struct remora_admission_key {
    remora::admission_key k;
};
struct remora_admission_gate {
    remora::admission_gate g;
};
struct remora_admitted_peer {
    remora::admitted_peer p;
};
struct remora_attach_request {
    remora::attach_request r;
};
// The set and its C event function: the C++ set's event_context is this handle, so its events
// reach on_event with the C context. `s` is made once the handle exists (its address is the
// context) and is declared last, so it ends, running its last events, before the fields it uses.
struct remora_replica_set {
    remora_replica_event_cb on_event = nullptr;
    void* event_context = nullptr;
    std::optional<remora::replica_set> s;
};

// The helpers below are hidden in both libraries (the version script exports namespace remora as
// a whole; these are not part of it).
#pragma GCC visibility push(hidden)
namespace remora::capi {

inline const memory_region* mr_of(const remora_memory_region* m) noexcept {
    return reinterpret_cast<const memory_region*>(m);
}
inline remora_memory_region* c_mr(memory_region* m) noexcept {
    return reinterpret_cast<remora_memory_region*>(m);
}
inline completion_queue* cq_of(remora_completion_queue* q) noexcept {
    return reinterpret_cast<completion_queue*>(q);
}
inline const completion_queue* cq_of(const remora_completion_queue* q) noexcept {
    return reinterpret_cast<const completion_queue*>(q);
}
inline remora_completion_queue* c_cq(completion_queue* q) noexcept {
    return reinterpret_cast<remora_completion_queue*>(q);
}
// The C handle of a connection the library names (a CQ's connection()): every connection of the
// C API is a remora_connection; nullptr stays nullptr.
inline remora_connection* conn_of(connection* c) noexcept {
    return static_cast<remora_connection*>(c);
}

// The REMORA_E_* code of an error code (0 for none).
int code_of(std::error_code ec) noexcept;

// Records "fn: message" as this thread's last error and returns `code`.
int fail(int code, const char* fn, const std::string& message) noexcept;
// The same for a remora::error (its code mapped, its data kept).
int fail(const error& e, const char* fn) noexcept;
// 0 when `r` succeeded, else fail(r.error(), fn).
inline int done(const char* fn, const result<void>& r) noexcept {
    return r ? 0 : fail(r.error(), fn);
}

// NULL checks: REMORA_E_INVALID "fn: NAME is NULL".
#define REMORA_CAPI_NOT_NULL(fn, p)                                           \
    do {                                                                      \
        if ((p) == nullptr) {                                                 \
            return ::remora::capi::fail(REMORA_E_INVALID, fn, #p " is NULL"); \
        }                                                                     \
    } while (0)

// The body of a getter `int fn(const H* h, T* out)`: REMORA_E_INVALID when `h` or `out` is NULL,
// else `*out = expr` and 0, behind the exception barrier (guarded, below).
#define REMORA_CAPI_GET(fn, h, out, expr) \
    ::remora::capi::guarded(fn, [&] {     \
        REMORA_CAPI_NOT_NULL(fn, h);      \
        REMORA_CAPI_NOT_NULL(fn, out);    \
        *(out) = (expr);                  \
        return 0;                         \
    })

// A negative timeout is refused; otherwise the duration.
int check_timeout(const char* fn, int timeout_ms) noexcept;
inline std::chrono::milliseconds ms(int timeout_ms) noexcept {
    return std::chrono::milliseconds(timeout_ms);
}

// Bytes given as (pointer, length): NULL with a nonzero length is refused.
int check_bytes(const char* fn, const char* name, const void* p, std::size_t len) noexcept;
inline std::span<const std::byte> bytes(const void* p, std::size_t len) noexcept {
    return len == 0 ? std::span<const std::byte>{}
                    : std::span<const std::byte>(static_cast<const std::byte*>(p), len);
}

// Copies a caller's configuration struct by its size field into `out` (zero-initialised, so
// missing fields are 0 = default). NULL: all defaults. A size smaller than the size field or
// larger than this library's struct is REMORA_E_INVALID.
int load_sized(const char* fn, const char* type, const void* in, void* out,
               std::size_t ours) noexcept;
template <class T>
int load_cfg(const char* fn, const char* type, const T* in, T& out) noexcept {
    out = T{};
    return load_sized(fn, type, in, &out, sizeof(T));
}

// Operation flags to op_options: unknown bits or both modes together are REMORA_E_INVALID.
int op_options_of(const char* fn, unsigned flags, void* context, op_options& out) noexcept;
// A C connection configuration as the C++ one (connections.cpp; 0 fields keep the defaults).
int connection_config_of(const char* fn, const remora_connection_config* cfg,
                         connection_config& out);
// A C persistence configuration as the C++ one (persistence.cpp; 0 fields keep the defaults).
int persistence_config_of(const char* fn, const remora_persistence_config* cfg,
                          persistence_config& out);
// A flush's enum remora_flush_type and enum remora_flush_method as flush_options (persistence.cpp):
// values that are no REMORA_FLUSH_* are REMORA_E_INVALID.
int flush_options_of(const char* fn, int type, int method, flush_options& out);

// The connection operations' common start: `conn` given, `flags` and `context` as op_options.
#define REMORA_CAPI_OP_PROLOGUE(fn)                         \
    REMORA_CAPI_NOT_NULL(fn, conn);                         \
    remora::op_options opts;                                \
    if (int rc = op_options_of(fn, flags, context, opts)) { \
        return rc;                                          \
    }

// Hands the value of `r` to the caller as a new handle `*out` (an H holding it) and returns 0;
// an error in `r` is reported through fail() and leaves `*out` untouched.
template <class H, class T>
int give(const char* fn, result<T>&& r, H** out) {
    if (!r) {
        return fail(r.error(), fn);
    }
    *out = new H{std::move(*r)};
    return 0;
}

// The body of remora_connection_wait and remora_completion_channel_wait: waits on `w` (a connection
// or a completion channel) for up to timeout_ms and stores the event in `*ev`.
template <class Waiter>
int wait_event(const char* fn, Waiter& w, int timeout_ms, remora_channel_event* ev) {
    REMORA_CAPI_NOT_NULL(fn, ev);
    if (int rc = check_timeout(fn, timeout_ms)) {
        return rc;
    }
    auto e = w.wait(ms(timeout_ms));
    if (!e) {
        return fail(e.error(), fn);
    }
    *ev = {c_cq(e->cq), static_cast<int>(e->kind), e->tag, e->ready};
    return 0;
}

// Operation options from the C struct (NULL: defaults), for the _ex operations, gather_write,
// publish and the copies of connection `conn`. A C callback is carried by a record allocated here
// and linked in conn's registry, freed by the trampoline that calls it, by release_op_callback
// when the post fails (nothing will call it then), or with the registry when the connection is
// destroyed before it ran.
int op_options_of(const char* fn, const remora_op_options* in, remora_connection& conn,
                  op_options& out);
void release_op_callback(const op_options& o) noexcept;

// A C++ completion as the C struct.
void to_c(const completion& in, remora_completion& out) noexcept;

// A multi-key operation's remote segments from the C array (gather_write, scatter_read and their
// _cached forms): `n` of them, NULL regions kept NULL (the connection refuses them); more parts
// than allowed are passed on as they are: the connection names the limit.
inline std::vector<remote_segment> segments_of(const remora_remote_segment* segs, size_t n) {
    std::vector<remote_segment> out(n);
    for (size_t i = 0; i < n; ++i) {
        out[i] = {segs[i].region == nullptr ? nullptr : &segs[i].region->r, segs[i].offset,
                  segs[i].length};
    }
    return out;
}

// The exception barrier (see the head of this file).
template <class F>
int guarded(const char* fn, F&& body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return fail(REMORA_E_NOMEM, fn, "out of memory");
    } catch (const std::exception& e) {
        return fail(REMORA_E_UNKNOWN, fn, std::string("unexpected exception: ") + e.what());
    } catch (...) {
        return fail(REMORA_E_UNKNOWN, fn, "unexpected exception");
    }
}

// For void functions (the deleters): exceptions are swallowed, nothing to report to.
template <class F>
void guarded_void(F&& body) noexcept {
    try {
        body();
    } catch (...) {
    }
}

}  // namespace remora::capi
#pragma GCC visibility pop

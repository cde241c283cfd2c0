// SPDX-License-Identifier: BSD-3-Clause
// src/capi/pools.cpp — the C API's slot pools and leases, bounce-buffer pools, and the operations
// that take options (parked posts, callbacks, multi-key gather_write and scatter_read, the copies).
#include "capi.hpp"

using namespace remora::capi;

static_assert(REMORA_MAX_GATHER_PARTS == remora::connection::max_gather_parts);
static_assert(REMORA_PARK_QUEUE == static_cast<int>(remora::park_mode::queue));

namespace {

remora::units units_of(const remora_units& u) noexcept {
    remora::units r;
    r.with(remora::unit::sq, u.sq)
        .with(remora::unit::cq, u.cq)
        .with(remora::unit::recv, u.recv)
        .with(remora::unit::registration, u.registration)
        .with(remora::unit::buffer, u.buffer);
    return r;
}

remora_units c_units(const remora::units& u) noexcept {
    return {u[remora::unit::sq], u[remora::unit::cq], u[remora::unit::recv],
            u[remora::unit::registration], u[remora::unit::buffer]};
}

// A C acquisition callback and its context, carried through slot_pool::acquire's ctx.
struct c_acquire {
    remora_acquire_cb fn;
    void* ctx;
};

void acquire_trampoline(void* ctx, remora::result<remora::held_units> r) {
    auto* rec = static_cast<c_acquire*>(ctx);
    const c_acquire c = *rec;
    delete rec;
    if (!r) {
        c.fn(c.ctx, code_of(r.error().code()), nullptr);
        return;
    }
    auto* l = new (std::nothrow) remora_held_units{std::move(*r)};
    c.fn(c.ctx, l == nullptr ? REMORA_E_NOMEM : 0, l);  // without a handle the units go back
}

void callback_trampoline(const remora::completion& c);

}  // namespace

namespace remora::capi {

// A C completion callback and the operation's context, carried as the C++ context; linked in its
// connection's registry until the callback runs.
struct callback_record {
    remora_completion_cb fn;
    void* ctx;
    callback_registry* owner;
    callback_record* prev = nullptr;
    callback_record* next = nullptr;
};

callback_registry::~callback_registry() {
    for (callback_record* r = head; r != nullptr;) {
        callback_record* next = r->next;
        delete r;
        r = next;
    }
}

namespace {

callback_record* link(callback_registry& reg, remora_completion_cb fn, void* ctx) {
    auto* rec = new callback_record{fn, ctx, &reg};
    const std::lock_guard lock(reg.mu);
    rec->next = reg.head;
    if (reg.head != nullptr) {
        reg.head->prev = rec;
    }
    reg.head = rec;
    return rec;
}

void unlink_and_free(callback_record* rec) noexcept {
    {
        const std::lock_guard lock(rec->owner->mu);
        (rec->prev != nullptr ? rec->prev->next : rec->owner->head) = rec->next;
        if (rec->next != nullptr) {
            rec->next->prev = rec->prev;
        }
    }
    delete rec;
}

}  // namespace
}  // namespace remora::capi

namespace {

void callback_trampoline(const remora::completion& c) {
    auto* rec = static_cast<callback_record*>(c.context);
    remora_completion out{};
    to_c(c, out);
    out.context = rec->ctx;
    const remora_completion_cb fn = rec->fn;
    unlink_and_free(rec);  // before the callback: it may destroy the connection
    fn(&out);
}

int done(const char* fn, const remora::result<void>& r, const remora::op_options& o) {
    if (r) {
        return 0;
    }
    release_op_callback(o);
    return fail(r.error(), fn);
}

}  // namespace

namespace remora::capi {

int op_options_of(const char* fn, const remora_op_options* in, remora_connection& conn,
                  op_options& out) {
    remora_op_options o;
    if (int rc = load_cfg(fn, "remora_op_options", in, o)) {
        return rc;
    }
    if (int rc = op_options_of(fn, o.flags, o.context, out)) {
        return rc;
    }
    if (o.park_ms < 0) {
        return fail(REMORA_E_INVALID, fn,
                    "park_ms " + std::to_string(o.park_ms) + " is negative (0: do not park)");
    }
    if (o.park_mode != REMORA_PARK_BLOCK && o.park_mode != REMORA_PARK_QUEUE) {
        return fail(REMORA_E_INVALID, fn,
                    "park_mode " + std::to_string(o.park_mode) + " is not a REMORA_PARK_* mode");
    }
    if (o.park_ms == REMORA_NO_DEADLINE) {
        out.park_until = std::chrono::steady_clock::time_point::max();
    } else if (o.park_ms > 0) {
        out.park_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.park_ms);
    }
    out.park = static_cast<park_mode>(o.park_mode);
    if (o.callback != nullptr) {
        out.context = link(*conn.callbacks, o.callback, o.context);
        out.callback = callback_trampoline;
    }
    return 0;
}

void release_op_callback(const op_options& o) noexcept {
    if (o.callback == callback_trampoline) {
        unlink_and_free(static_cast<callback_record*>(o.context));
    }
}

}  // namespace remora::capi

extern "C" {

// ---- slot pools

REMORA_API int remora_slot_pool_create(const struct remora_slot_pool_config* cfg,
                                       remora_slot_pool** pool) {
    static constexpr const char* fn = "remora_slot_pool_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, cfg);
        REMORA_CAPI_NOT_NULL(fn, pool);
        remora_slot_pool_config c;
        if (int rc = load_cfg(fn, "remora_slot_pool_config", cfg, c)) {
            return rc;
        }
        remora::slot_pool_config pc;
        pc.capacity = units_of(c.capacity);
        if (pc.capacity.empty()) {
            return fail(REMORA_E_INVALID, fn, "the capacity is empty (every unit count is 0)");
        }
        switch (c.policy) {
            case REMORA_EXHAUSTION_BACKPRESSURE:
                pc.policy = remora::exhaustion::backpressure;
                break;
            case REMORA_EXHAUSTION_FORBID:
                pc.policy = remora::exhaustion::forbid;
                break;
            default:
                return fail(
                    REMORA_E_INVALID, fn,
                    "policy " + std::to_string(c.policy) +
                        " is not REMORA_EXHAUSTION_BACKPRESSURE or REMORA_EXHAUSTION_FORBID");
        }
        if (c.max_waiters != 0) {
            pc.max_waiters = c.max_waiters;
        }
        auto p = remora::slot_pool::create(pc);
        if (!p) {
            return fail(p.error(), fn);
        }
        *pool = new remora_slot_pool{std::move(*p)};
        return 0;
    });
}

REMORA_API void remora_slot_pool_delete(remora_slot_pool* pool) {
    guarded_void([&] { delete pool; });
}

REMORA_API int remora_slot_pool_try_acquire(remora_slot_pool* pool, const struct remora_units* need,
                                            remora_held_units** lease) {
    static constexpr const char* fn = "remora_slot_pool_try_acquire";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, pool);
        REMORA_CAPI_NOT_NULL(fn, need);
        REMORA_CAPI_NOT_NULL(fn, lease);
        auto handle = std::make_unique<remora_held_units>();  // before taking: NOMEM takes nothing
        auto l = pool->p->try_acquire(units_of(*need));
        if (!l) {
            return fail(l.error(), fn);
        }
        handle->l = std::move(*l);
        *lease = handle.release();
        return 0;
    });
}

REMORA_API int remora_slot_pool_acquire(remora_slot_pool* pool, const struct remora_units* need,
                                        int timeout_ms, remora_acquire_cb done, void* ctx,
                                        bool* parked) {
    static constexpr const char* fn = "remora_slot_pool_acquire";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, pool);
        REMORA_CAPI_NOT_NULL(fn, need);
        REMORA_CAPI_NOT_NULL(fn, done);
        REMORA_CAPI_NOT_NULL(fn, parked);
        if (int rc = check_timeout(fn, timeout_ms)) {
            return rc;
        }
        const auto deadline = timeout_ms == REMORA_NO_DEADLINE
                                  ? remora::slot_pool::clock::time_point::max()
                                  : remora::slot_pool::clock::now() + ms(timeout_ms);
        auto* rec = new c_acquire{done, ctx};
        auto r = pool->p->acquire(units_of(*need), acquire_trampoline, rec, deadline);
        if (!r) {
            delete rec;  // refused: the callback never runs
            return fail(r.error(), fn);
        }
        *parked = *r == remora::acquired::parked;
        return 0;
    });
}

REMORA_API int remora_slot_pool_cancel_all(remora_slot_pool* pool, size_t* n) {
    static constexpr const char* fn = "remora_slot_pool_cancel_all";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, pool);
        const std::size_t k = pool->p->cancel_all();
        if (n != nullptr) {
            *n = k;
        }
        return 0;
    });
}

REMORA_API int remora_slot_pool_available(const remora_slot_pool* pool, struct remora_units* free,
                                          size_t* waiting) {
    static constexpr const char* fn = "remora_slot_pool_available";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, pool);
        if (free != nullptr) {
            *free = c_units(pool->p->available());
        }
        if (waiting != nullptr) {
            *waiting = pool->p->waiting();
        }
        return 0;
    });
}

REMORA_API int remora_held_units_held(const remora_held_units* lease, struct remora_units* held) {
    static constexpr const char* fn = "remora_held_units_held";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, lease);
        REMORA_CAPI_NOT_NULL(fn, held);
        *held = c_units(lease->l.held());
        return 0;
    });
}

REMORA_API void remora_held_units_delete(remora_held_units* lease) {
    guarded_void([&] { delete lease; });
}

// ---- bounce buffers

REMORA_API int remora_buffer_pool_create(remora_domain* dom,
                                         const struct remora_buffer_pool_config* cfg,
                                         remora_buffer_pool** pool) {
    static constexpr const char* fn = "remora_buffer_pool_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, pool);
        remora_buffer_pool_config c;
        if (int rc = load_cfg(fn, "remora_buffer_pool_config", cfg, c)) {
            return rc;
        }
        remora::buffer_pool_config bc;
        if (c.buffers != 0) {
            bc.buffers = c.buffers;
        }
        if (c.buffer_size != 0) {
            bc.buffer_size = c.buffer_size;
        }
        if (c.usage != 0) {
            if ((c.usage & ~static_cast<unsigned>(REMORA_USAGE_ALL)) != 0) {
                return fail(REMORA_E_INVALID, fn,
                            "usage " + std::to_string(c.usage) + " has unknown bits");
            }
            bc.uses = static_cast<remora::usage>(c.usage);
        }
        auto b = remora::buffer_pool::create(dom->d, bc);
        if (!b) {
            return fail(b.error(), fn);
        }
        *pool = new remora_buffer_pool{std::move(*b)};
        return 0;
    });
}

REMORA_API void remora_buffer_pool_delete(remora_buffer_pool* pool) {
    guarded_void([&] { delete pool; });
}

REMORA_API int remora_buffer_pool_info(const remora_buffer_pool* pool, size_t* available,
                                       size_t* capacity, size_t* buffer_size) {
    static constexpr const char* fn = "remora_buffer_pool_info";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, pool);
        if (available != nullptr) {
            *available = pool->b.available();
        }
        if (capacity != nullptr) {
            *capacity = pool->b.capacity();
        }
        if (buffer_size != nullptr) {
            *buffer_size = pool->b.buffer_size();
        }
        return 0;
    });
}

// ---- shared receive queues

REMORA_API int remora_shared_receive_queue_create(
    remora_domain* dom, const struct remora_shared_receive_queue_config* cfg,
    remora_shared_receive_queue** srq) {
    static constexpr const char* fn = "remora_shared_receive_queue_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, srq);
        remora_shared_receive_queue_config c;
        if (int rc = load_cfg(fn, "remora_shared_receive_queue_config", cfg, c)) {
            return rc;
        }
        remora::shared_receive_queue_config qc;
        if (c.depth != 0) {
            qc.size = c.depth;
        }
        qc.tag = c.tag;
        auto q = remora::shared_receive_queue::create(dom->d, qc);
        if (!q) {
            return fail(q.error(), fn);
        }
        *srq = new remora_shared_receive_queue{std::move(*q)};
        return 0;
    });
}

REMORA_API void remora_shared_receive_queue_delete(remora_shared_receive_queue* srq) {
    guarded_void([&] { delete srq; });
}

REMORA_API int remora_shared_receive_queue_recv(remora_shared_receive_queue* srq,
                                                const remora_memory_region* dst, size_t offset,
                                                size_t len, unsigned flags, void* context) {
    static constexpr const char* fn = "remora_shared_receive_queue_recv";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, srq);
        REMORA_CAPI_NOT_NULL(fn, dst);
        remora::op_options o;
        if (int rc = op_options_of(fn, flags, context, o)) {
            return rc;
        }
        auto r = srq->q.recv(*mr_of(dst), offset, len, o);
        return r ? 0 : fail(r.error(), fn);
    });
}

REMORA_API int remora_shared_receive_queue_cq(const remora_shared_receive_queue* srq,
                                              remora_completion_queue** cq) {
    static constexpr const char* fn = "remora_shared_receive_queue_cq";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, srq);
        REMORA_CAPI_NOT_NULL(fn, cq);
        *cq = c_cq(&srq->q.cq());
        return 0;
    });
}

REMORA_API int remora_shared_receive_queue_info(const remora_shared_receive_queue* srq,
                                                size_t* depth, size_t* posted,
                                                size_t* connections) {
    static constexpr const char* fn = "remora_shared_receive_queue_info";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, srq);
        if (depth != nullptr) {
            *depth = srq->q.size();
        }
        if (posted != nullptr) {
            *posted = srq->q.posted();
        }
        if (connections != nullptr) {
            *connections = srq->q.connections();
        }
        return 0;
    });
}

// ---- operations with options

#define REMORA_CAPI_EX_PROLOGUE(fn)                   \
    REMORA_CAPI_NOT_NULL(fn, conn);                   \
    remora::op_options o;                             \
    if (int rc = op_options_of(fn, opts, *conn, o)) { \
        return rc;                                    \
    }

REMORA_API int remora_write_ex(remora_connection* conn, const remora_remote_region* dst,
                               uint64_t dst_offset, const remora_memory_region* src,
                               size_t src_offset, size_t len,
                               const struct remora_op_options* opts) {
    static constexpr const char* fn = "remora_write_ex";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dst);
        REMORA_CAPI_NOT_NULL(fn, src);
        REMORA_CAPI_EX_PROLOGUE(fn);
        return done(fn, conn->c.write(dst->r, dst_offset, *mr_of(src), src_offset, len, o), o);
    });
}

REMORA_API int remora_read_ex(remora_connection* conn, const remora_memory_region* dst,
                              size_t dst_offset, const remora_remote_region* src,
                              uint64_t src_offset, size_t len,
                              const struct remora_op_options* opts) {
    static constexpr const char* fn = "remora_read_ex";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dst);
        REMORA_CAPI_NOT_NULL(fn, src);
        REMORA_CAPI_EX_PROLOGUE(fn);
        return done(fn, conn->c.read(*mr_of(dst), dst_offset, src->r, src_offset, len, o), o);
    });
}

REMORA_API int remora_send_ex(remora_connection* conn, const remora_memory_region* src,
                              size_t offset, size_t len, const struct remora_op_options* opts) {
    static constexpr const char* fn = "remora_send_ex";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, src);
        REMORA_CAPI_EX_PROLOGUE(fn);
        return done(fn, conn->c.send(*mr_of(src), offset, len, o), o);
    });
}

REMORA_API int remora_recv_ex(remora_connection* conn, const remora_memory_region* dst,
                              size_t offset, size_t len, const struct remora_op_options* opts) {
    static constexpr const char* fn = "remora_recv_ex";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dst);
        REMORA_CAPI_EX_PROLOGUE(fn);
        return done(fn, conn->c.recv(*mr_of(dst), offset, len, o), o);
    });
}

namespace {

// remora_gather_write (`read` false: `local` is the source, `segs` the destination) and
// remora_scatter_read (`read` true: the other way round).
int multi_key(const char* fn, remora_connection* conn, const struct remora_remote_segment* segs,
              size_t n, const remora_memory_region* local, size_t local_offset,
              const struct remora_op_options* opts, bool read) {
    return guarded(fn, [&] {
        if (local == nullptr) {
            return fail(REMORA_E_INVALID, fn, read ? "dst is NULL" : "src is NULL");
        }
        if (n != 0 && segs == nullptr) {
            return fail(REMORA_E_INVALID, fn, read ? "src is NULL" : "dst is NULL");
        }
        const auto parts = segments_of(segs, n);
        REMORA_CAPI_EX_PROLOGUE(fn);
        return done(fn,
                    read ? conn->c.scatter_read(parts, *mr_of(local), local_offset, o)
                         : conn->c.gather_write(parts, *mr_of(local), local_offset, o),
                    o);
    });
}

}  // namespace

REMORA_API int remora_gather_write(remora_connection* conn, const struct remora_remote_segment* dst,
                                   size_t n, const remora_memory_region* src, size_t src_offset,
                                   const struct remora_op_options* opts) {
    return multi_key("remora_gather_write", conn, dst, n, src, src_offset, opts, false);
}

REMORA_API int remora_scatter_read(remora_connection* conn, const struct remora_remote_segment* src,
                                   size_t n, const remora_memory_region* dst, size_t dst_offset,
                                   const struct remora_op_options* opts) {
    return multi_key("remora_scatter_read", conn, src, n, dst, dst_offset, opts, true);
}

REMORA_API int remora_write_copy(remora_connection* conn, const remora_remote_region* dst,
                                 uint64_t dst_offset, const void* data, size_t len,
                                 const struct remora_op_options* opts) {
    static constexpr const char* fn = "remora_write_copy";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dst);
        REMORA_CAPI_NOT_NULL(fn, data);
        REMORA_CAPI_EX_PROLOGUE(fn);
        return done(fn, remora::write_copy(conn->c, dst->r, dst_offset, bytes(data, len), o), o);
    });
}

REMORA_API int remora_send_copy(remora_connection* conn, const void* data, size_t len,
                                const struct remora_op_options* opts) {
    static constexpr const char* fn = "remora_send_copy";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, data);
        REMORA_CAPI_EX_PROLOGUE(fn);
        return done(fn, remora::send_copy(conn->c, bytes(data, len), o), o);
    });
}

REMORA_API int remora_write_or_copy(remora_connection* conn, const remora_remote_region* dst,
                                    uint64_t dst_offset, const struct remora_local_segment* src,
                                    size_t n, const struct remora_op_options* opts) {
    static constexpr const char* fn = "remora_write_or_copy";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dst);
        if (n != 0 && src == nullptr) {
            return fail(REMORA_E_INVALID, fn, "src is NULL");
        }
        std::vector<remora::local_segment> parts(n);
        for (size_t i = 0; i < n; ++i) {
            parts[i] = {src[i].region == nullptr ? nullptr : mr_of(src[i].region), src[i].offset,
                        src[i].length};
        }
        REMORA_CAPI_EX_PROLOGUE(fn);
        return done(fn, remora::write_or_copy(conn->c, dst->r, dst_offset, parts, o), o);
    });
}

REMORA_API int remora_connection_cancel_parked(remora_connection* conn, size_t* n) {
    static constexpr const char* fn = "remora_connection_cancel_parked";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        const std::size_t k = conn->c.cancel_parked();
        if (n != nullptr) {
            *n = k;
        }
        return 0;
    });
}

REMORA_API int remora_connection_parked(const remora_connection* conn, size_t* n) {
    static constexpr const char* fn = "remora_connection_parked";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, conn);
        REMORA_CAPI_NOT_NULL(fn, n);
        *n = conn->c.parked();
        return 0;
    });
}

}  // extern "C"

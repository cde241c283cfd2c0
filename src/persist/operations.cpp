// SPDX-License-Identifier: BSD-3-Clause
// The persistence layer's atomics and flush: native where the provider has them, else the
// target service.
#include <remora/persistence.hpp>

#include <cstring>
#include <string>

#include "core/upper.hpp"
#include "persist/service.hpp"

namespace remora {

const char* to_string(flush_method m) noexcept {
    switch (m) {
        case flush_method::automatic:
            return "automatic";
        case flush_method::read_after_write:
            return "read_after_write";
        case flush_method::gpspm:
            return "gpspm";
    }
    return "unknown";
}

const char* to_string(atomic_path p) noexcept {
    switch (p) {
        case atomic_path::native:
            return "native";
        case atomic_path::service:
            return "service";
        case atomic_path::none:
            break;
    }
    return "none";
}

namespace detail {
namespace {

enum class atomic_kind { write, compare_swap, fetch_add };

result<void> atomic(connection& conn, atomic_kind kind, const char* what, const remote_region& dst,
                    std::uint64_t dst_offset, std::uint64_t arg0, std::uint64_t arg1,
                    const memory_region* result, std::size_t result_offset,
                    const op_options& opts) {
    connection_impl& c = *detail::impl_of(conn);
    if (native_atomics(c)) {
        switch (kind) {  // the connection's own (its checks included)
            case atomic_kind::write:
                return conn.atomic_write(dst, dst_offset, arg0, opts);
            case atomic_kind::compare_swap:
                return conn.compare_swap(dst, dst_offset, arg0, arg1, *result, result_offset, opts);
            case atomic_kind::fetch_add:
                break;
        }
        return conn.fetch_add(dst, dst_offset, arg0, *result, result_offset, opts);
    }
    if (auto r = check_atomic(c, what, dst, dst_offset, result, result_offset); !r) {
        return r;
    }
    if (persistence_of(c).service_depth == 0) {
        return fail(errc::not_supported,
                    std::string(what) + ": provider " + caps_of(c).provider +
                        " has no native atomics; give the connection a persistence_config with a "
                        "service_depth to use the target's service");
    }
    service_request rq;
    rq.op = kind == atomic_kind::write          ? service_op::atomic_write
            : kind == atomic_kind::compare_swap ? service_op::compare_swap
                                                : service_op::fetch_add;
    rq.key = dst.key();
    rq.address = dst.address() + dst_offset;
    rq.arg0 = arg0;
    rq.arg1 = kind == atomic_kind::compare_swap ? arg1 : 0;
    std::byte* out = result != nullptr ? result->data() + result_offset : nullptr;
    return client_request(c, rq, out, opts);
}

}  // namespace
}  // namespace detail

atomic_path atomics(const connection& conn) noexcept {
    const detail::connection_impl& c = *detail::impl_of(conn);
    if (detail::native_atomics(c)) {
        return atomic_path::native;
    }
    return detail::persistence_of(c).service_depth != 0 ? atomic_path::service : atomic_path::none;
}

result<void> atomic_write(connection& conn, const remote_region& dst, std::uint64_t dst_offset,
                          std::uint64_t value, op_options opts) {
    return detail::atomic(conn, detail::atomic_kind::write, "atomic_write", dst, dst_offset, value,
                          0, nullptr, 0, opts);
}

result<void> compare_swap(connection& conn, const remote_region& dst, std::uint64_t dst_offset,
                          std::uint64_t expected, std::uint64_t desired,
                          const memory_region& result, std::size_t result_offset, op_options opts) {
    return detail::atomic(conn, detail::atomic_kind::compare_swap, "compare_swap", dst, dst_offset,
                          expected, desired, &result, result_offset, opts);
}

result<void> fetch_add(connection& conn, const remote_region& dst, std::uint64_t dst_offset,
                       std::uint64_t addend, const memory_region& result, std::size_t result_offset,
                       op_options opts) {
    return detail::atomic(conn, detail::atomic_kind::fetch_add, "fetch_add", dst, dst_offset,
                          addend, 0, &result, result_offset, opts);
}

namespace detail {

result<const memory_region*> flush_scratch(connection_impl& c) {
    persist_conn& p = persist_of(c);
    if (!p.scratch_ready.load(std::memory_order_acquire)) {
        std::lock_guard lock(p.scratch_mu);
        if (!p.scratch) {
            auto mr = memory_region::create(c.dom_handle, p.scratch_bytes, usage::read_destination);
            if (!mr) {
                return fail(
                    mr.error().code(),
                    "flush: cannot register the read-after-write buffer: " + mr.error().message());
            }
            p.scratch.emplace(std::move(*mr));
            p.scratch_ready.store(true, std::memory_order_release);
        }
    }
    return &*p.scratch;
}

}  // namespace detail

namespace {

// flush_type::strongest resolved against what the descriptor states.
flush_type type_for(const remote_region& dst, flush_type t) noexcept {
    if (t != flush_type::strongest) {
        return t;
    }
    return has_all(dst.persistence(), persistence::persistent) ? flush_type::persistence
                                                               : flush_type::visibility;
}

}  // namespace

result<flush_method> flush_method_for(const connection& conn, const remote_region& dst,
                                      flush_options how) {
    if (how.type != flush_type::visibility && how.type != flush_type::persistence &&
        how.type != flush_type::strongest) {
        return fail(errc::invalid_argument, "flush: unknown flush_type");
    }
    const bool persist = type_for(dst, how.type) == flush_type::persistence;
    const persistence p = dst.persistence();
    if (persist && !has_all(p, persistence::persistent)) {
        return fail(errc::not_supported,
                    "flush: the region is not persistent (volatile memory); flush for "
                    "visibility instead");
    }
    const bool has_service = detail::persistence_of(*detail::impl_of(conn)).service_depth != 0;
    const bool raw_ok = !persist || has_all(p, persistence::apm);
    const bool gpspm_ok = has_service && (!persist || has_all(p, persistence::gpspm));
    switch (how.method) {
        case flush_method::automatic:
            if (raw_ok) {
                return flush_method::read_after_write;
            }
            if (gpspm_ok) {
                return flush_method::gpspm;
            }
            return fail(errc::not_supported,
                        has_all(p, persistence::gpspm)
                            ? "flush: persisting this region needs the target's service (GPSPM): "
                              "give the connection a persistence_config with a service_depth"
                            : "flush: the target offers no method that persists this region "
                              "(placed writes are not durable and it does not serve GPSPM)");
        case flush_method::read_after_write:
            if (!raw_ok) {
                return fail(errc::not_supported,
                            "flush: read-after-write does not persist on this target (placed "
                            "writes are not durable there; it did not declare apm)");
            }
            return flush_method::read_after_write;
        case flush_method::gpspm:
            if (!has_service) {
                return fail(errc::not_supported,
                            "flush: GPSPM needs a connection with a persistence_config "
                            "service_depth");
            }
            if (persist && !has_all(p, persistence::gpspm)) {
                return fail(errc::not_supported,
                            "flush: the target does not serve GPSPM for this region");
            }
            return flush_method::gpspm;
    }
    return fail(errc::invalid_argument, "flush: unknown method");
}

result<void> flush(connection& conn, const remote_region& dst, std::uint64_t offset,
                   std::uint64_t length, flush_options how, op_options opts) {
    auto& c = *detail::impl_of(conn);
    if (auto r = detail::check_open(c, "flush"); !r) {
        return r;
    }
    if (auto r = dst.check(offset, length, usage::flush_target); !r) {
        return fail(r.error().code(), "flush: " + r.error().message());
    }
    auto method = flush_method_for(conn, dst, how);
    if (!method) {
        return fail(method.error());
    }
    // A read-after-write flush reads the range itself (on a same-host connection at its
    // same-host address); a GPSPM request names it as the target registered it.
    if (*method != flush_method::gpspm) {
        if (auto r = detail::check_same_host(c, dst, "flush"); !r) {
            return r;
        }
    }
    if (*method == flush_method::gpspm) {
        detail::service_request rq;
        rq.op = detail::service_op::flush;
        rq.flags =
            type_for(dst, how.type) == flush_type::persistence ? detail::flush_persistent : 0;
        rq.key = dst.key();
        rq.address = dst.address() + offset;
        rq.arg0 = length;
        return detail::client_request(c, rq, nullptr, opts);
    }
    // Read-after-write: a small read behind the writes on the same connection returns only once
    // they are placed. It lands in an 8-byte buffer of the connection's own.
    auto scratch = detail::flush_scratch(c);
    if (!scratch) {
        return fail(scratch.error());
    }
    detail::persist_conn& p = detail::persist_of(c);
    const std::uint64_t at = std::min(offset, dst.length() - 1);
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(8, dst.length() - at));
    auto rec = detail::reserve_entries(c, opts, op::flush, false, "flush");
    if (!rec) {
        return fail(rec.error());
    }
    iovec iov{p.scratch_bytes.data(), n};
    void* desc = detail::local_desc(**scratch);
    detail::fabric_post read{.kind = detail::post_kind::read,
                             .flags = detail::ordered_read_flags(c),
                             .iov = &iov,
                             .desc = &desc,
                             .count = 1,
                             .remote = {detail::remote_start(c, dst, at), n, dst.key()},
                             .context = *rec};
    return detail::door(c, read, "flush");
}

}  // namespace remora

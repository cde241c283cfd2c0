// SPDX-License-Identifier: BSD-3-Clause
// What the slots layer lends a connection's operations: bounce buffers (write_copy, send_copy,
// write_or_copy past max_sge) and registrations (gather_write through a registration_cache), held
// by the operation record as a type-erased op_holding (ops/holding.hpp), so the endpoint layer does
// not name them. (Units of connection_config::slots reach the endpoint through the base layer's
// `budget` interface, which slot_pool implements: no call from the endpoint layer up into this one
// remains.)
#include <remora/buffer_pool.hpp>
#include <remora/connection.hpp>
#include <remora/registration_cache.hpp>
#include <remora/slot_pool.hpp>

#include <cstring>
#include <string>

#include "core/multi_ops.hpp"
#include "core/upper.hpp"

namespace remora {
namespace {

// A buffer_pool as a connection addon: the bounce buffers of its write_copy and send_copy.
class bounce_addon final : public connection_addon {
  public:
    explicit bounce_addon(buffer_pool p) : pool(std::move(p)) {}
    buffer_pool pool;
};

// Takes a bounce buffer of at least `size` bytes from the connection's pool: the operation's
// slot then holds it until completion.
result<pooled_buffer> bounce_take(const detail::connection_impl& c, std::size_t size,
                                  const char* what) {
    const bounce_addon* found = nullptr;
    for (const auto& a : c.config.addons) {
        found = dynamic_cast<const bounce_addon*>(a.get());
        if (found != nullptr) {
            break;
        }
    }
    if (found == nullptr || !found->pool) {
        return fail(errc::bad_state,
                    std::string(what) + ": the connection has no buffer_pool among its addons");
    }
    buffer_pool pool = found->pool;  // a handle: the same pool
    if (size > pool.buffer_size()) {
        return fail(errc::too_large, std::string(what) + ": " + std::to_string(size) +
                                         " bytes exceed the bounce buffers of " +
                                         std::to_string(pool.buffer_size()));
    }
    auto b = pool.try_get();
    if (!b) {
        return fail(b.error().code(), std::string(what) + ": " + b.error().message());
    }
    return b;
}

// bounce_take, then `data` copied into the buffer.
result<pooled_buffer> bounce_copy(const detail::connection_impl& c, std::span<const std::byte> data,
                                  const char* what) {
    auto b = bounce_take(c, data.size(), what);
    if (b && !data.empty()) {
        std::memcpy(b->data().data(), data.data(), data.size());
    }
    return b;
}

}  // namespace

buffer_pool::operator std::shared_ptr<const connection_addon>() const {
    return std::make_shared<const bounce_addon>(*this);
}

result<void> write_copy(connection& conn, const remote_region& dst, std::uint64_t dst_offset,
                        std::span<const std::byte> data, op_options opts) {
    auto& c = *detail::impl_of(conn);
    if (auto r = detail::check_open(c, "write_copy"); !r) {
        return r;
    }
    auto b = bounce_copy(c, data, "write_copy");
    if (!b) {
        return fail(b.error());
    }
    const local_segment seg{&b->region(), b->offset(), data.size()};
    detail::op_holding held(std::move(*b));  // the segment points into the pool's registration
    return detail::post_rma(c, detail::rma_kind::write, {&seg, 1}, dst, dst_offset, 0, opts, &held);
}

result<void> write_or_copy(connection& conn, const remote_region& dst, std::uint64_t dst_offset,
                           std::span<const local_segment> src, op_options opts) {
    auto& c = *detail::impl_of(conn);
    if (src.size() <= c.config.max_sge) {
        return conn.write(dst, dst_offset, src, opts);  // one scatter-gather post
    }
    const char* what = "write_or_copy";
    if (auto r = detail::check_open(c, what); !r) {
        return r;
    }
    // More segments than one post carries: each checked as a write's source, then all their bytes
    // copied, in order, into one bounce buffer and written from it.
    std::size_t total = 0;
    for (std::size_t i = 0; i < src.size(); ++i) {
        const local_segment& s = src[i];
        auto part = [i, what] {
            return std::string(what) + ": segment " + std::to_string(i) + ": ";
        };
        if (s.region == nullptr) {
            return fail(errc::invalid_argument, part() + "no region");
        }
        if (!detail::same_domain(c, *s.region)) {
            return fail(errc::invalid_argument, part() + "a region of another domain");
        }
        if (!has_all(s.region->usages(), usage::write_source)) {
            return fail(errc::access_denied, part() + "region not registered for this use");
        }
        if (s.offset > s.region->size() || s.length > s.region->size() - s.offset) {
            return fail(errc::out_of_range, part() + "[" + std::to_string(s.offset) + ", +" +
                                                std::to_string(s.length) + ") outside region of " +
                                                std::to_string(s.region->size()) + " bytes");
        }
        total += s.length;
    }
    auto b = bounce_take(c, total, what);
    if (!b) {
        return fail(b.error());
    }
    std::size_t at = 0;
    for (const local_segment& s : src) {
        if (s.length != 0) {
            std::memcpy(b->data().data() + at, s.region->memory().data() + s.offset, s.length);
        }
        at += s.length;
    }
    const local_segment seg{&b->region(), b->offset(), total};
    detail::op_holding held(std::move(*b));
    return detail::post_rma(c, detail::rma_kind::write, {&seg, 1}, dst, dst_offset, 0, opts, &held);
}

result<void> send_copy(connection& conn, std::span<const std::byte> data, op_options opts) {
    auto& c = *detail::impl_of(conn);
    if (auto r = detail::check_open(c, "send_copy"); !r) {
        return r;
    }
    auto b = bounce_copy(c, data, "send_copy");
    if (!b) {
        return fail(b.error());
    }
    const local_segment seg{&b->region(), b->offset(), data.size()};
    detail::op_holding held(std::move(*b));
    return detail::post_send(c, {&seg, 1}, false, 0, opts, &held);
}

namespace {

// A multi-key operation from memory the caller did not register (`read`: scatter_read into it,
// else gather_write from it): registered through `cache`, the registration held until completion
// and, with slots, one {registration 1} drawn with the parts'.
result<void> through_cache(connection& conn, std::span<const remote_segment> segs,
                           std::span<std::byte> local, registration_cache& cache,
                           const op_options& opts, bool read) {
    auto& c = *detail::impl_of(conn);
    const char* what = read ? "scatter_read" : "gather_write";
    if (auto r = detail::check_open_for(c, opts, what); !r) {
        return r;
    }
    if (local.empty()) {
        return fail(errc::invalid_argument, std::string(what) + ": the local memory is empty");
    }
    if (detail::impl_of(cache.dom()) != c.region_dom) {
        return fail(errc::invalid_argument,
                    std::string(what) + ": the registration cache is of another domain");
    }
    auto reg = cache.get(local, read ? usage::read_destination : usage::write_source);
    if (!reg) {
        return fail(reg.error().code(),
                    std::string(what) + ": registering the local memory: " + reg.error().message());
    }
    const units extra = c.config.slots ? units{}.with(unit::registration, 1) : units{};
    // The operation holds the registration (the cache's handle) until its completion.
    auto keep = std::make_shared<cached_region>(*reg);
    const memory_region& region = keep->region();
    const std::size_t offset = keep->offset();
    return read ? detail::scatter_read_with(c, segs, region, offset, opts, extra, std::move(keep))
                : detail::gather_write_with(c, segs, region, offset, opts, extra, std::move(keep));
}

}  // namespace

result<void> gather_write(connection& conn, std::span<const remote_segment> dst,
                          std::span<std::byte> src, registration_cache& cache, op_options opts) {
    return through_cache(conn, dst, src, cache, opts, false);
}

result<void> scatter_read(connection& conn, std::span<const remote_segment> src,
                          std::span<std::byte> dst, registration_cache& cache, op_options opts) {
    return through_cache(conn, src, dst, cache, opts, true);
}

}  // namespace remora

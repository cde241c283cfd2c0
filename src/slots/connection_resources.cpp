// What the slots layer lends a connection's operations: units of connection_config::slots at
// admission, and bounce buffers (connection::write_copy, send_copy). The operation record holds
// both as type-erased op_holdings (core/holding.hpp), so the endpoint layer names neither.
//
// Note — the one dependency of the endpoint layer on this one: admit() (core) calls
// take_slot_units below when connection_config::slots is set. The budget is part of the
// connection's public configuration and is consulted at admission, before anything is posted,
// so the endpoint has to reach it. Inverting this call too needs slot_pool to offer its budget
// through an interface of a lower layer (the units type, src/base in DESIGN.md), which changes
// slot_pool's own API; until then the call is declared in core/impl.hpp and defined here.
#include <remora/buffer_pool.hpp>
#include <remora/connection.hpp>
#include <remora/slot_pool.hpp>

#include <cstring>
#include <string>

#include "core/impl.hpp"

namespace remora {
namespace detail {

result<void> take_slot_units(const connection_config& cfg, bool recv, const char* what,
                             op_holding& out) {
    auto l =
        cfg.slots->try_acquire(units{}.with(recv ? unit::recv : unit::sq, 1).with(unit::cq, 1));
    if (!l) {
        return fail(l.error().code(),
                    std::string(what) + ": shared slot pool: " + l.error().message());
    }
    out = op_holding(std::move(*l));
    return {};
}

}  // namespace detail

namespace {

// Takes a bounce buffer from the connection's pool and copies `data` into it: the operation's
// slot then holds it until completion.
result<pooled_buffer> bounce_copy(detail::connection_impl& c, std::span<const std::byte> data,
                                  const char* what) {
    if (!c.config.bounce) {
        return fail(errc::bad_state,
                    std::string(what) + ": the connection has no connection_config::bounce pool");
    }
    if (data.size() > c.config.bounce.buffer_size()) {
        return fail(errc::too_large, std::string(what) + ": " + std::to_string(data.size()) +
                                         " bytes exceed the bounce buffers of " +
                                         std::to_string(c.config.bounce.buffer_size()));
    }
    auto b = c.config.bounce.try_get();
    if (!b) {
        return fail(b.error().code(), std::string(what) + ": " + b.error().message());
    }
    if (!data.empty()) {
        std::memcpy(b->data().data(), data.data(), data.size());
    }
    return b;
}

}  // namespace

result<void> connection::write_copy(const remote_region& dst, std::uint64_t dst_offset,
                                    std::span<const std::byte> data, op_options opts) {
    auto& c = *impl_;
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

result<void> connection::send_copy(std::span<const std::byte> data, op_options opts) {
    auto& c = *impl_;
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

}  // namespace remora

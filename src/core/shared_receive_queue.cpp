// SPDX-License-Identifier: BSD-3-Clause
#include <remora/shared_receive_queue.hpp>

#include <string>

#include "core/impl.hpp"
#include "core/srq_impl.hpp"
#include "fabric/endpoint.hpp"
#include "ops/reservation.hpp"

// Shared receive queues: a shared receive context of the provider, the records of the receives
// posted to it, and the completion queue they complete on.

namespace remora {

result<shared_receive_queue> shared_receive_queue::create(const domain& dom,
                                                          const shared_receive_queue_config& cfg) {
    using namespace detail;
    if (!dom) {
        return fail(errc::bad_state,
                    "shared_receive_queue: the domain handle is empty (closed or moved from)");
    }
    const auto& caps = dom.caps();
    const bool rdm = caps.endpoint == endpoint_type::rdm;
    if (!caps.shared_rx) {
        return fail(errc::not_supported,
                    "shared_receive_queue: provider " + caps.provider +
                        (rdm ? " (RDM endpoints)" : " (connected endpoints)") +
                        " has no shared receive context; use a receive_pool (receive_pool.hpp), "
                        "which lends library buffers to each connection's own receive queue");
    }
    if (cfg.size == 0) {
        return fail(errc::invalid_argument, "shared_receive_queue: size must be > 0");
    }
    auto impl = std::make_shared<srq_impl>();
    impl->dom = detail::shared_impl_of(dom);
    impl->size = std::min<std::uint32_t>(
        {cfg.size, static_cast<std::uint32_t>(caps.rx_size), detail::op_pool::max_queue});
    auto q = shared_completion_queue::create(dom, {.size = impl->size, .tag = cfg.tag});
    if (!q) {
        return fail(q.error());
    }
    impl->cq = std::move(*q);
    impl->ops.reset(0, 0, impl->size);
    impl->ops.tag = cfg.tag;
    impl->ops.shared_rx = true;
    if (rdm && detail::impl_of(dom)->source_checked) {
        // A message from anyone but an attached peer fails the receive it took, as on a peer's
        // own receive queue; until the first peer attaches, every message does (srq_no_peer).
        impl->ops.source.store(srq_no_peer, std::memory_order_relaxed);
        impl->ops.check_source.store(true, std::memory_order_relaxed);
    }
    int ret = open_srx(impl->dom->domain.get(), impl->dom->info.get(), impl->size, impl->srx);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_srx_context"));
    }
    shared_receive_queue out;
    out.impl_ = std::move(impl);
    return out;
}

result<void> shared_receive_queue::recv(const memory_region& dst, std::size_t offset,
                                        std::size_t length, op_options opts) {
    using namespace detail;
    if (!impl_) {
        return fail(errc::bad_state, "shared_receive_queue::recv on an empty handle");
    }
    if (opts.report != completion_mode::always) {
        return fail(errc::invalid_argument,
                    "shared_receive_queue::recv: a receive always completes (it reports what "
                    "arrived)");
    }
    if (opts.park_until != std::chrono::steady_clock::time_point{}) {
        return fail(errc::invalid_argument,
                    "shared_receive_queue::recv: parked receives are not supported");
    }
    if (!detail::impl_of(dst)) {
        return fail(errc::invalid_argument, "shared_receive_queue::recv: empty region");
    }
    const region_impl& r = *detail::impl_of(dst);
    if (r.dom != detail::impl_of(*this)->dom) {
        return fail(errc::invalid_argument,
                    "shared_receive_queue::recv: region registered in another domain");
    }
    if (offset > r.memory.size() || length > r.memory.size() - offset) {
        return fail(errc::out_of_range, "shared_receive_queue::recv: range [" +
                                            std::to_string(offset) + ", +" +
                                            std::to_string(length) + ") outside region of " +
                                            std::to_string(r.memory.size()) + " bytes");
    }
    if (!has_all(r.uses, usage::receive)) {
        return fail(errc::access_denied,
                    "shared_receive_queue::recv: region not registered for usage::receive");
    }
    auto rec = reserve_op(detail::impl_of(*this)->ops, queue::recv, nullptr, units{},
                          "shared_receive_queue::recv", detail::impl_of(*this)->size);
    if (!rec) {
        return fail(rec.error());
    }
    arm_user(**rec, opts.context, opts.callback, op::recv, true);
    iovec iov{r.memory.data() + offset, length};
    void* desc = r.desc;
    const fabric_post p{.kind = post_kind::recv,
                        .addr = fabric_addr_unspec,
                        .iov = &iov,
                        .desc = &desc,
                        .count = 1,
                        .context = *rec};
    const ssize_t ret = door_shared_rx(detail::impl_of(*this)->srx.get(), p);
    if (ret != 0) {
        release_failed(**rec);
        if (ret == -fabric_errno::again) {
            return fail(errc::would_block,
                        "shared_receive_queue::recv: the provider's queue is full");
        }
        return fail(fabric_error(static_cast<int>(ret), "shared receive context post"));
    }
    return {};
}

completion_queue& shared_receive_queue::cq() const noexcept {
    return detail::impl_of(*this)->cq.queue();
}
std::size_t shared_receive_queue::size() const noexcept {
    return impl_ ? detail::impl_of(*this)->size : 0;
}
std::size_t shared_receive_queue::posted() const noexcept {
    return impl_ ? detail::impl_of(*this)->ops.in_use() : 0;
}
std::size_t shared_receive_queue::connections() const noexcept {
    return impl_ ? detail::impl_of(*this)->attached.load() : 0;
}

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
// connection_config validated and completed against the provider's limits.
#include <remora/connection.hpp>

#include <string>

#include "core/impl.hpp"
#include "core/liveness.hpp"
#include "core/srq_impl.hpp"

namespace remora::detail {

std::uint32_t addon_sends(const connection_config& c) noexcept {
    for (const auto& a : c.addons) {
        if (a != nullptr && a->internal_sends() != 0) {
            return a->internal_sends();  // effective_config refuses a second one
        }
    }
    return 0;
}

const message_router* router_of(const connection_config& c) noexcept {
    for (const auto& a : c.addons) {
        if (a != nullptr && a->internal_sends() != 0) {
            const auto* r = dynamic_cast<const message_router*>(a.get());
            return r != nullptr && r->application_receives(1) != 0 ? r : nullptr;
        }
    }
    return nullptr;
}

// Validates and completes a connection_config against the provider's limits.
result<connection_config> effective_config(const connection_config& in, const provider_caps& caps) {
    connection_config c = in;
    std::size_t asking = 0;
    for (const auto& a : c.addons) {
        if (a == nullptr) {
            return fail(errc::invalid_argument, "connection_config: an addon is null");
        }
        if (auto r = a->check(); !r) {
            return fail(r.error());
        }
        asking += a->internal_sends() != 0 ? 1 : 0;
    }
    if (asking > 1) {
        return fail(errc::invalid_argument,
                    "connection_config: more than one addon asks for internal sends");
    }
    if (c.liveness.count() < 0) {
        return fail(errc::invalid_argument, "connection_config: liveness must be >= 0 (0: off)");
    }
    // The addon's internal sends and the liveness probe's entry: beside the application's.
    const std::uint32_t internal = addon_sends(c) + probe_sends(c);
    if (c.sq_size == 0 || c.rq_size == 0) {
        return fail(errc::invalid_argument, "connection_config: sq_size and rq_size must be > 0");
    }
    // Depths beyond what the provider grants are clamped (config() reports the effective
    // values); the per-operation factor (max_sge) never is: it is refused below.
    if (c.sq_size + internal > caps.tx_size) {
        if (internal >= caps.tx_size) {
            return fail(errc::too_large, "connection_config: an addon's internal sends " +
                                             std::to_string(internal) +
                                             " leaves no room in the provider's send queue of " +
                                             std::to_string(caps.tx_size));
        }
        c.sq_size = static_cast<std::uint32_t>(caps.tx_size) - internal;
    }
    c.rq_size = std::min<std::uint32_t>(c.rq_size, static_cast<std::uint32_t>(caps.rx_size));
    // And to the most records a queue of the connection's op_pool holds.
    c.sq_size = std::min<std::uint32_t>(c.sq_size, detail::op_pool::max_queue);
    c.rq_size = std::min<std::uint32_t>(c.rq_size, detail::op_pool::max_queue);
    const std::size_t sge_limit = std::min<std::size_t>(caps.iov_limit, max_segments);
    if (c.max_sge == 0 || c.max_sge > sge_limit) {
        return fail(errc::too_large, "connection_config: max_sge " + std::to_string(c.max_sge) +
                                         " must be 1.." + std::to_string(sge_limit) +
                                         " (the provider's iov limit, at most " +
                                         std::to_string(max_segments) + ")");
    }
    if (internal > detail::op_pool::max_queue) {
        return fail(errc::too_large, "connection_config: an addon's internal sends " +
                                         std::to_string(internal) + " exceeds remora's " +
                                         std::to_string(detail::op_pool::max_queue) +
                                         " records a queue");
    }
    if (addon_sends(c) != 0) {
        // The addon's messages are the connection's only receives (with a router, the addon's
        // receives carry the application's messages too), and its sends get entries of their
        // own beside the application's.
        const message_router* router = router_of(c);
        const std::uint64_t want =
            std::uint64_t{addon_sends(c)} +
            (router != nullptr ? router->application_receives(in.rq_size) : 0);
        if (want > caps.rx_size || want > detail::op_pool::max_queue) {
            return fail(errc::too_large,
                        "connection_config: an addon's receives " + std::to_string(want) +
                            " exceed the provider's receive queue of " +
                            std::to_string(caps.rx_size) + " (or remora's bound of a queue)");
        }
        c.rq_size = static_cast<std::uint32_t>(want);
        if (router != nullptr && c.max_sge + 1 > sge_limit) {
            return fail(errc::too_large,
                        "connection_config: max_sge " + std::to_string(c.max_sge) +
                            " leaves no segment for the mark of the application's messages "
                            "beside the addon's (at most " +
                            std::to_string(sge_limit - 1) + ")");
        }
    }
    if (c.srq) {
        if (addon_sends(c) != 0) {
            return fail(errc::invalid_argument,
                        "connection_config: srq cannot be combined with an addon's internal "
                        "sends (they need receives of their own)");
        }
        // Its receives complete on the queue's CQ, which is sized for all of them: the
        // connection reserves nothing there and keeps one (unused) receive record.
        if (c.channel == channel_mode::shared || c.progress_thread) {
            return fail(errc::invalid_argument,
                        "connection_config: srq cannot be combined with channel_mode::shared or "
                        "progress_thread (its CQ is waited on and read by its own reader)");
        }
        c.rq_size = 1;
        c.rcq = true;
        c.shared_rcq = shared_completion_queue{};
    }
    if (c.shared_rcq) {
        c.rcq = true;
    }
    for (const auto* shared : {&c.shared_cq, &c.shared_rcq}) {
        if (c.progress_thread && *shared && detail::impl_of(*shared)->progress == nullptr) {
            return fail(errc::invalid_argument,
                        "connection_config: progress_thread needs its shared CQs to be read by "
                        "the progress thread too (shared_cq_config::progress_thread)");
        }
    }
    if (c.signal_every == 0) {
        return fail(errc::invalid_argument, "connection_config: signal_every must be >= 1");
    }
    if (c.signal_every > 1 && c.slots) {
        // Unsignalled operations keep their units until a later signalled one completes; on a
        // budget shared with other connections they could hold every unit that later one needs.
        return fail(errc::invalid_argument,
                    "connection_config: signal_every > 1 cannot be combined with a shared slot "
                    "pool (unsignalled operations could hold every unit of it)");
    }
    if ((c.shared_cq || c.shared_rcq) && c.channel == channel_mode::shared) {
        return fail(errc::invalid_argument,
                    "connection_config: a shared CQ is waited on itself; channel_mode::shared "
                    "cannot be combined with shared_cq or shared_rcq");
    }
    if (!c.shared_cq && c.cq_size == 0 && caps.cq_size != 0 &&
        c.sq_size + internal + (c.rcq ? 0 : c.rq_size) > caps.cq_size) {
        // The CQ cannot hold every entry: reduce the application's depths to fit it.
        const std::uint32_t addon = addon_sends(c);
        const auto room = static_cast<std::uint32_t>(caps.cq_size) -
                          std::min<std::uint32_t>(addon * (c.rcq ? 1 : 2) + probe_sends(c),
                                                  static_cast<std::uint32_t>(caps.cq_size));
        if (room < (c.rcq ? 1u : 2u)) {
            return fail(errc::too_large, "connection_config: the provider's CQ of " +
                                             std::to_string(caps.cq_size) +
                                             " cannot hold these internal sends");
        }
        if (c.rcq) {
            c.sq_size = std::min(c.sq_size, room);
        } else if (addon == 0) {
            const std::uint32_t total = c.sq_size + c.rq_size;
            c.sq_size = std::max<std::uint32_t>(
                1, static_cast<std::uint32_t>(std::uint64_t(c.sq_size) * room / total));
            c.rq_size = std::max<std::uint32_t>(1, room - c.sq_size);
        } else {
            c.sq_size = std::min(c.sq_size, room);
        }
    }
    const std::uint32_t need = cq_entries(c, cq_kind::cq);
    if (c.shared_cq) {
        c.cq_size = static_cast<std::uint32_t>(c.shared_cq.size());  // fit checked on attach
    } else if (c.cq_size == 0) {
        c.cq_size = need;
    } else if (c.cq_size < need) {
        return fail(errc::invalid_argument,
                    "connection_config: cq_size " + std::to_string(c.cq_size) + " cannot hold " +
                        std::to_string(need) + " completions (send queue" +
                        (c.rcq ? "" : " + receive queue") + "); it could overflow");
    }
    if (c.srq) {
        c.rcq_size = detail::impl_of(c.srq)->size;
    } else if (c.shared_rcq) {
        c.rcq_size = static_cast<std::uint32_t>(c.shared_rcq.size());
    } else if (c.rcq) {
        if (c.rcq_size == 0) {
            c.rcq_size = c.rq_size;
        } else if (c.rcq_size < c.rq_size) {
            return fail(errc::invalid_argument,
                        "connection_config: rcq_size " + std::to_string(c.rcq_size) +
                            " cannot hold the receive queue of " + std::to_string(c.rq_size) +
                            "; it could overflow");
        }
    } else {
        c.rcq_size = 0;
    }
    c.signal_every = std::min(c.signal_every, c.sq_size);  // the bound: one signal per queue
    if (c.shared_channel && c.channel != channel_mode::shared) {
        return fail(errc::invalid_argument,
                    "connection_config: shared_channel given but channel mode is separate");
    }
    if (c.connect_timeout.count() <= 0) {
        return fail(errc::invalid_argument, "connection_config: connect_timeout must be > 0");
    }
    return c;
}

connection_config same_host_sizes(const connection_config& app, const connection_config& eff) {
    connection_config c = app;
    c.sq_size = eff.sq_size;  // after the provider's clamps (queue and CQ), less internal sends
    if (addon_sends(app) == 0) {
        c.rq_size = eff.rq_size;  // else the addon's receives, computed from app.rq_size
    }
    return c;
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
#include <remora/connection.hpp>

#include <algorithm>
#include <cstring>

#include "core/impl.hpp"
#include "fabric/cq.hpp"
#include "fabric/endpoint.hpp"

// A connection's operation builders: gather and check the arguments, reserve (take the
// operation's record: its queue and CQ entries), post to the provider, submit the outcome.

namespace remora {
namespace detail {

// ---------------------------------------------------------------- posting

namespace {

struct gathered {
    static constexpr std::size_t max = max_segments;
    iovec iov[max];
    void* desc[max];
    std::size_t count = 0;
    std::size_t bytes = 0;
};

// Inlined into both posting paths: its call and result cost more than its checks.
[[gnu::always_inline]] inline result<void> gather(const connection_impl& c,
                                                  std::span<const local_segment> segs, usage need,
                                                  const char* what, gathered& g,
                                                  std::size_t extra = 0) {
    if (segs.size() > c.config.max_sge + extra || segs.size() > gathered::max) {
        return fail(errc::too_large, std::string(what) + ": " + std::to_string(segs.size()) +
                                         " segments exceed max_sge " +
                                         std::to_string(c.config.max_sge));
    }
    for (const local_segment& s : segs) {
        if (s.region == nullptr) {
            return fail(errc::invalid_argument, std::string(what) + ": segment without a region");
        }
        const region_impl& r = *detail::impl_of(*s.region);
        if (r.dom.get() != c.region_dom) {
            return fail(errc::invalid_argument,
                        std::string(what) + ": region registered in another domain");
        }
        if (s.offset > r.memory.size() || s.length > r.memory.size() - s.offset) {
            return fail(errc::out_of_range, std::string(what) + ": local range [" +
                                                std::to_string(s.offset) + ", +" +
                                                std::to_string(s.length) + ") outside region of " +
                                                std::to_string(r.memory.size()) + " bytes");
        }
        if (!has_all(r.uses, need)) {
            return fail(errc::access_denied,
                        std::string(what) + ": local region not registered for this use");
        }
        g.iov[g.count].iov_base = r.memory.data() + s.offset;
        g.iov[g.count].iov_len = s.length;
        g.desc[g.count] = r.desc;
        ++g.count;
        g.bytes += s.length;
    }
    return {};
}

result<void> posted(ssize_t ret, const connection_impl& c, const char* what, bool recv,
                    fabric_call call) {
    if (ret == 0) {
        return {};
    }
    if (ret == -fabric_errno::again && c.rdm) {
        return fail(errc::would_block,
                    std::string(what) +
                        ": the provider cannot take it yet (on a new RDM peer it "
                        "sets up the path first, which needs the peer to make "
                        "progress: its application reading its CQ, or its "
                        "progress_thread); reap completions and retry");
    }
    if (ret == -fabric_errno::again) {
        return fail(errc::would_block,
                    std::string(what) + ": " + (recv ? "receive" : "send") + " queue full (depth " +
                        std::to_string(recv ? c.config.rq_size : c.config.sq_size) +
                        "); reap completions");
    }
    if (!c.open) {
        return fail(errc::disconnected, std::string(what) + ": connection is closed");
    }
    switch (-ret) {
        case fabric_errno::not_connected:
        case fabric_errno::connection_reset:
        case fabric_errno::connection_aborted:
        case EPIPE:
        case fabric_errno::no_entry:  // sockets, once its peer is gone
            return fail(errc::disconnected, std::string(what) + ": the connection is lost (" +
                                                to_string(call) + ": " + fabric_strerror(ret) +
                                                ")");
        default:
            return fail(fabric_error(static_cast<int>(ret),
                                     std::string(what) + ": " + to_string(call) + " failed"));
    }
}

}  // namespace

result<void> check_open(const connection_impl& c, const char* what, bool receive) {
    if (!c.open.load()) {
        if (c.connecting.load()) {
            if (receive) {
                return {};
            }
            return fail(errc::bad_state,
                        std::string(what) +
                            ": the connection is not established yet (wait for "
                            "conn_event::established; only receives may be posted before)");
        }
        if (c.rdm && !c.attached.load() && !c.closed.load()) {
            return fail(errc::bad_state,
                        std::string(what) +
                            ": no peer attached (call attach with the peer's local_address)");
        }
        if (c.lost.load()) {  // written before `lost` (liveness.cpp)
            return fail(errc::disconnected,
                        std::string(what) + ": the RDM peer is lost: " + c.lost_reason);
        }
        return fail(errc::disconnected, std::string(what) + ": connection is not open");
    }
    return {};
}

result<void> check_open_for(const connection_impl& c, const op_options& opts, const char* what) {
    if (opts.park_until != std::chrono::steady_clock::time_point{} && !c.open.load() &&
        c.connecting.load()) {
        return {};  // parked: waits for the setup's outcome (reserve_parked, post_or_queue)
    }
    return check_open(c, what);
}

result<void> check_same_host(const connection_impl& c, const remote_region& r, const char* what) {
    if (lacks_same_host(c, r)) {
        return fail(errc::not_supported,
                    std::string(what) +
                        ": the descriptor has no same-host address (its region was registered "
                        "without the target's same-host domain), and this connection reaches its "
                        "peer over shared memory (connection::same_host)");
    }
    return {};
}

result<void> check_imm(const connection_impl& c, std::uint64_t imm) {
    const std::size_t bytes = std::min(c.dom->caps.cq_data_size, user_caps(c).cq_data_size);
    if (bytes == 0) {
        return fail(errc::not_supported, "immediate data: the provider has none");
    }
    if (bytes < 8 && (imm >> (8 * bytes)) != 0) {
        char hex[24];
        std::snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(imm));
        return fail(errc::too_large, std::string("immediate data ") + hex + " exceeds the " +
                                         std::to_string(bytes) +
                                         "-byte immediate of this provider");
    }
    return {};
}

// Reservation: the operation's record is its send- or receive-queue entry (and CQ entry). Every
// operation is posted with post_completion so its record always comes back; on_error only hides
// successes from the application.
result<op_record*> reserve_full(connection_impl& c, const op_options& opts, remora::op kind,
                                bool recv, const char* what) {
    if (opts.report == completion_mode::at_post &&
        ((kind != op::write && kind != op::send) || opts.callback != nullptr)) {
        return fail(errc::invalid_argument,
                    std::string(what) +
                        ": completion_mode::at_post is for writes and sends "
                        "without a callback (their bytes are copied at post)");
    }
    static constexpr units send_need = units{}.with(unit::sq, 1).with(unit::cq, 1);
    static constexpr units recv_need = units{}.with(unit::recv, 1).with(unit::cq, 1);
    auto r = reserve_parked(
        c, opts, what,
        [&] {
            return reserve_op(c.ops, recv ? queue::recv : queue::send, c.config.slots,
                              recv ? recv_need : send_need, what,
                              recv ? c.config.rq_size : c.config.sq_size);
        },
        recv);
    if (r) {
        arm_user(**r, opts.context, opts.callback, kind, opts.report == completion_mode::always);
    }
    return r;
}

result<void> submit_failed(connection_impl& c, op_record* r, ssize_t ret, const char* what,
                           bool recv, fabric_call call) {
    auto res = posted(ret, c, what, recv, call);
    if (!res) {
        release_failed(*r);
    }
    return res;
}

namespace {

result<void> check_at_post(const connection_impl& c, const op_options& opts, std::size_t bytes,
                           const char* what) {
    const std::size_t inject = std::min(c.dom->caps.inject_size, user_caps(c).inject_size);
    if (opts.report == completion_mode::at_post && bytes > inject) {
        return fail(errc::too_large, std::string(what) + ": " + std::to_string(bytes) +
                                         " bytes cannot complete at post: the inject size is " +
                                         std::to_string(inject));
    }
    return {};
}

}  // namespace

// post_rma's body: inlined into the public one-segment calls, where the kind and the segment
// count are constants.
[[gnu::always_inline]] inline result<void> post_rma_inline(
    connection_impl& c, rma_kind kind, std::span<const local_segment> local,
    const remote_region& remote, std::uint64_t remote_offset, std::uint64_t imm,
    const op_options& opts, op_holding* bounce) {
    const char* what = kind == rma_kind::read    ? "read"
                       : kind == rma_kind::write ? "write"
                                                 : "write_with_imm";
    if (!c.open.load()) [[unlikely]] {  // open: check_open_for passes (the posting fast path)
        if (auto r = check_open_for(c, opts, what); !r) {
            return r;
        }
    }
    gathered g;
    const usage local_need = kind == rma_kind::read ? usage::read_destination : usage::write_source;
    if (auto r = gather(c, local, local_need, what, g); !r) {
        return r;
    }
    const usage remote_need =
        kind == rma_kind::read ? usage::read_source : usage::write_destination;
    // remote_region::check, called only when it refuses.
    if (remote_offset > remote.length() || g.bytes > remote.length() - remote_offset ||
        !has_all(remote.usages(), remote_need) || lacks_same_host(c, remote)) [[unlikely]] {
        if (auto r = remote.check(remote_offset, g.bytes, remote_need); !r) {
            return fail(r.error().code(), std::string(what) + ": " + r.error().message());
        }
        if (auto r = check_same_host(c, remote, what); !r) {
            return r;
        }
    }
    if (kind == rma_kind::write_imm) {
        if (auto r = check_imm(c, imm); !r) {
            return r;
        }
    }
    if (kind == rma_kind::read && g.bytes == 0) {
        return fail(errc::invalid_argument, "read: zero-length read");
    }
    const remote_iov rma{remote_start(c, remote, remote_offset), g.bytes, remote.key()};
    if (opts.report == completion_mode::at_post) [[unlikely]] {
        if (auto r = check_at_post(c, opts, g.bytes, what); !r) {
            return r;
        }
    }
    auto rec = reserve_entries(c, opts, kind == rma_kind::read ? op::read : op::write, false, what);
    if (!rec) {
        return fail(rec.error());
    }

    fabric_post p{.kind = kind == rma_kind::read ? post_kind::read : post_kind::write,
                  .flags = (kind == rma_kind::write_imm ? post_remote_data : 0) | more_flag(opts),
                  .iov = g.iov,
                  .desc = g.desc,
                  .count = g.count,
                  .remote = rma,
                  .data = imm,
                  .context = *rec};
    if (kind == rma_kind::read) {
        // A read's destination must outlive it: always signalled.
        p.flags |= post_completion;
        return door(c, p, what);
    }
    return door_maybe_quiet(c, p, g.bytes, opts, what, bounce);
}

result<void> post_rma(connection_impl& c, rma_kind kind, std::span<const local_segment> local,
                      const remote_region& remote, std::uint64_t remote_offset, std::uint64_t imm,
                      const op_options& opts, op_holding* bounce) {
    return post_rma_inline(c, kind, local, remote, remote_offset, imm, opts, bounce);
}

namespace {

result<void> check_messaging(const connection_impl& c, const char* what) {
    if (c.internal_sends != 0 && c.router == nullptr) {
        return fail(errc::bad_state,
                    std::string(what) +
                        ": the connection has an addon's internal sends (a service_depth) and "
                        "carries only the addon's messages (set persistence_config::message_size "
                        "on both sides to carry the application's too)");
    }
    return {};
}

}  // namespace

// post_send's body: inlined into the public one-segment sends, as post_rma_inline.
[[gnu::always_inline]] inline result<void> post_send_inline(
    connection_impl& c, std::span<const local_segment> local, bool with_imm, std::uint64_t imm,
    const op_options& opts, op_holding* bounce, bool routed = false) {
    const char* what = with_imm ? "send_with_imm" : "send";
    if (!c.open.load()) [[unlikely]] {  // open: check_open_for passes (the posting fast path)
        if (auto r = check_open_for(c, opts, what); !r) {
            return r;
        }
    }
    if (c.internal_sends != 0 && !routed) [[unlikely]] {  // check_messaging refuses only then
        if (auto r = check_messaging(c, what); !r) {
            return r;
        }
        if (c.router != nullptr) {
            if (bounce != nullptr) {
                return fail(errc::not_supported,
                            std::string(what) + ": copied sends are not routed beside a service");
            }
            return c.router->send(c, local, with_imm, imm, opts);
        }
    }
    gathered g;
    if (auto r = gather(c, local, usage::send, what, g, routed ? 1 : 0); !r) {
        return r;
    }
    if (with_imm) {
        if (auto r = check_imm(c, imm); !r) {
            return r;
        }
    }
    if (opts.report == completion_mode::at_post) [[unlikely]] {
        if (auto r = check_at_post(c, opts, g.bytes, what); !r) {
            return r;
        }
    }
    auto rec = reserve_entries(c, opts, op::send, false, what);
    if (!rec) {
        return fail(rec.error());
    }

    fabric_post p{.kind = post_kind::send,
                  .flags = (with_imm ? post_remote_data : 0) | more_flag(opts),
                  .iov = g.iov,
                  .desc = g.desc,
                  .count = g.count,
                  .data = imm,
                  .context = *rec};
    return door_maybe_quiet(c, p, g.bytes, opts, what, bounce);
}

result<void> post_send(connection_impl& c, std::span<const local_segment> local, bool with_imm,
                       std::uint64_t imm, const op_options& opts, op_holding* bounce, bool routed) {
    return post_send_inline(c, local, with_imm, imm, opts, bounce, routed);
}

result<void> post_internal(connection_impl& c, queue q, void* buf, std::size_t len, void* desc,
                           hook_fn hook, void* context) {
    const bool recv = q == queue::recv;
    const char* what = recv ? "service receive" : "service send";
    if (auto r = check_open(c, what); !r) {
        return r;
    }
    auto reserved =
        reserve_op(c.ops, q, nullptr, units{}, what, recv ? c.config.rq_size : c.internal_sends);
    if (!reserved) {
        return fail(reserved.error());
    }
    op_record* r = *reserved;
    arm_internal(*r, hook, context, recv ? op::recv : op::send);
    iovec iov{buf, len};
    fabric_post p{.kind = recv ? post_kind::recv : post_kind::send,
                  .iov = &iov,
                  .desc = &desc,
                  .count = 1,
                  .context = r};
    auto res = door(c, p, what);
    if (res && recv) {
        // tcp delivers a message that arrived before this receive only when the provider is
        // called after the post, and a progress thread asleep on the CQ's fd is not woken by it.
        // Inside a completion hook, driving a CQ here could deadlock: the progress thread does
        // it. Without a progress thread, the application's next poll does.
        cq_impl* q = c.rcq ? c.rcq.get() : c.cq.get();
        if (q->progress_owned()) {
            if (in_completion()) {
                q->progress->kick(q);
            } else {
                q->pump();
            }
        }
    }
    return res;
}

}  // namespace detail

// ---------------------------------------------------------------- public API: operations

namespace {

// park_mode::queue for the RMA posts: the call again, without parking, on copies of the segment
// list and the descriptor (the connection's state outlives a queued post: close_owner).
result<void> queue_rma(detail::connection_impl& c, detail::rma_kind kind,
                       std::span<const local_segment> local, const remote_region& remote,
                       std::uint64_t remote_offset, std::uint64_t imm, const op_options& opts) {
    const char* what = kind == detail::rma_kind::read    ? "read"
                       : kind == detail::rma_kind::write ? "write"
                                                         : "write_with_imm";
    return detail::post_or_queue(
        c, opts, kind == detail::rma_kind::read ? op::read : op::write, what,
        [impl = &c, kind, segs = std::vector<local_segment>(local.begin(), local.end()), remote,
         remote_offset, imm](const op_options& o) {
            return detail::post_rma(*impl, kind, segs, remote, remote_offset, imm, o);
        });
}

// Every overload's posting: queued (park_mode::queue) or posted now. Inlined into each, so the
// one-segment overloads call post_rma directly.
[[gnu::always_inline]] inline result<void> rma(detail::connection_impl& c, detail::rma_kind kind,
                                               std::span<const local_segment> local,
                                               const remote_region& remote,
                                               std::uint64_t remote_offset, std::uint64_t imm,
                                               const op_options& opts) {
    if (opts.park == park_mode::queue) {
        return queue_rma(c, kind, local, remote, remote_offset, imm, opts);
    }
    return detail::post_rma_inline(c, kind, local, remote, remote_offset, imm, opts, nullptr);
}

}  // namespace

result<void> connection::read(std::span<const local_segment> dst, const remote_region& src,
                              std::uint64_t src_offset, op_options opts) {
    return rma(*detail::impl_of(*this), detail::rma_kind::read, dst, src, src_offset, 0, opts);
}
result<void> connection::read(const memory_region& dst, std::size_t dst_offset,
                              const remote_region& src, std::uint64_t src_offset,
                              std::size_t length, op_options opts) {
    const local_segment seg{&dst, dst_offset, length};
    return rma(*detail::impl_of(*this), detail::rma_kind::read, {&seg, 1}, src, src_offset, 0,
               opts);
}
result<void> connection::write(const remote_region& dst, std::uint64_t dst_offset,
                               std::span<const local_segment> src, op_options opts) {
    return rma(*detail::impl_of(*this), detail::rma_kind::write, src, dst, dst_offset, 0, opts);
}
result<void> connection::write(const remote_region& dst, std::uint64_t dst_offset,
                               const memory_region& src, std::size_t src_offset, std::size_t length,
                               op_options opts) {
    const local_segment seg{&src, src_offset, length};
    return rma(*detail::impl_of(*this), detail::rma_kind::write, {&seg, 1}, dst, dst_offset, 0,
               opts);
}
result<void> connection::write_with_imm(const remote_region& dst, std::uint64_t dst_offset,
                                        std::span<const local_segment> src, std::uint64_t imm,
                                        op_options opts) {
    return rma(*detail::impl_of(*this), detail::rma_kind::write_imm, src, dst, dst_offset, imm,
               opts);
}
result<void> connection::write_with_imm(const remote_region& dst, std::uint64_t dst_offset,
                                        const memory_region& src, std::size_t src_offset,
                                        std::size_t length, std::uint64_t imm, op_options opts) {
    const local_segment seg{&src, src_offset, length};
    return rma(*detail::impl_of(*this), detail::rma_kind::write_imm, {&seg, 1}, dst, dst_offset,
               imm, opts);
}

namespace {

result<void> queue_send(detail::connection_impl& c, std::span<const local_segment> src,
                        bool with_imm, std::uint64_t imm, const op_options& opts) {
    return detail::post_or_queue(
        c, opts, op::send, with_imm ? "send_with_imm" : "send",
        [impl = &c, segs = std::vector<local_segment>(src.begin(), src.end()), with_imm,
         imm](const op_options& o) { return detail::post_send(*impl, segs, with_imm, imm, o); });
}

// As rma(), for the sends.
[[gnu::always_inline]] inline result<void> message(detail::connection_impl& c,
                                                   std::span<const local_segment> src,
                                                   bool with_imm, std::uint64_t imm,
                                                   const op_options& opts) {
    if (opts.park == park_mode::queue) {
        return queue_send(c, src, with_imm, imm, opts);
    }
    return detail::post_send_inline(c, src, with_imm, imm, opts, nullptr);
}

}  // namespace

result<void> connection::send(std::span<const local_segment> src, op_options opts) {
    return message(*detail::impl_of(*this), src, false, 0, opts);
}
result<void> connection::send(const memory_region& src, std::size_t offset, std::size_t length,
                              op_options opts) {
    const local_segment seg{&src, offset, length};
    return message(*detail::impl_of(*this), {&seg, 1}, false, 0, opts);
}
result<void> connection::send_with_imm(std::span<const local_segment> src, std::uint64_t imm,
                                       op_options opts) {
    return message(*detail::impl_of(*this), src, true, imm, opts);
}
result<void> connection::send_with_imm(const memory_region& src, std::size_t offset,
                                       std::size_t length, std::uint64_t imm, op_options opts) {
    const local_segment seg{&src, offset, length};
    return message(*detail::impl_of(*this), {&seg, 1}, true, imm, opts);
}
namespace {

// Inlined into the public receives (one segment: the count is a constant there).
[[gnu::always_inline]] inline result<void> post_recv(detail::connection_impl& c,
                                                     std::span<const local_segment> dst,
                                                     const op_options& opts) {
    if (!c.open.load()) [[unlikely]] {  // open: check_open passes (the posting fast path)
        if (auto r = detail::check_open(c, "recv", true); !r) {
            return r;
        }
    }
    if (c.srq) {
        return fail(errc::bad_state,
                    "recv: this connection takes its messages from its shared_receive_queue; "
                    "post receives there");
    }
    if (c.internal_sends != 0) [[unlikely]] {  // check_messaging refuses only then
        if (auto r = detail::check_messaging(c, "recv"); !r) {
            return r;
        }
    }
    if (opts.report != completion_mode::always) {
        return fail(errc::invalid_argument,
                    "recv: a receive always completes (it reports what arrived)");
    }
    if (c.router != nullptr) [[unlikely]] {
        return c.router->recv(c, dst, opts);  // the addon's receives carry it
    }
    detail::gathered g;
    if (auto r = detail::gather(c, dst, usage::receive, "recv", g); !r) {
        return r;
    }
    auto rec = detail::reserve_entries(c, opts, op::recv, true, "recv");
    if (!rec) {
        return fail(rec.error());
    }
    detail::fabric_post p{.kind = detail::post_kind::recv,
                          .iov = g.iov,
                          .desc = g.desc,
                          .count = g.count,
                          .context = *rec};
    if (auto r = detail::door(c, p, "recv"); !r) [[unlikely]] {
        return r;
    }
    if (detail::cq_impl* q = c.rcq ? c.rcq.get() : c.cq.get(); q->progress_owned()) {
        // tcp holds a message that arrived before this receive until someone calls into the
        // provider after the post: do it here rather than leave it to the progress thread
        // (which does it when this runs inside a completion callback: driving here could
        // deadlock).
        if (detail::in_completion()) {
            q->progress->kick(q);
        } else {
            q->pump();
        }
    }
    return {};
}

// As rma(), for the receives.
[[gnu::always_inline]] inline result<void> receive(detail::connection_impl& c,
                                                   std::span<const local_segment> dst,
                                                   const op_options& opts) {
    if (opts.park == park_mode::queue) {
        return detail::post_or_queue(
            c, opts, op::recv, "recv",
            [impl = &c, segs = std::vector<local_segment>(dst.begin(), dst.end())](
                const op_options& o) { return post_recv(*impl, segs, o); });
    }
    return post_recv(c, dst, opts);
}
}  // namespace

result<void> connection::recv(std::span<const local_segment> dst, op_options opts) {
    return receive(*detail::impl_of(*this), dst, opts);
}
result<void> connection::recv(const memory_region& dst, std::size_t offset, std::size_t length,
                              op_options opts) {
    const local_segment seg{&dst, offset, length};
    return receive(*detail::impl_of(*this), {&seg, 1}, opts);
}

}  // namespace remora

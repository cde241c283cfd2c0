// SPDX-License-Identifier: BSD-3-Clause
// src/core/peer_control.cpp — control messages between attached RDM peers (peer_control.hpp).
#include "core/peer_control.hpp"

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <remora/memory_region.hpp>

#include "core/impl.hpp"

namespace remora::detail {
namespace {

// The connection's control buffers, registered once, kept until the connection is destroyed
// (after its endpoint is closed): a receive still posted can complete only into them.
struct control_state final : connection_extension {
    // The message out, then room for one in (one byte more: a longer message is truncated).
    std::array<std::byte, 2 * control_max + 1> buf{};
    std::byte* out() noexcept { return buf.data(); }
    std::byte* in() noexcept { return buf.data() + control_max; }
    static constexpr std::size_t in_size = control_max + 1;
    std::optional<memory_region> mr;
    std::atomic<bool> sent{false};
    std::atomic<bool> received{false};
    std::error_code send_status;
    std::error_code recv_status;
    std::size_t recv_bytes = 0;
    bool recv_posted = false;  // a receive posted by an exchange that failed is still pending
    connection_impl* conn = nullptr;
    std::atomic<std::uint64_t> strangers{0};  // others' messages the receive took, ignored
};

bool control_sent(void* context, completion& c, callback_sink* /*sink*/) {
    auto& s = *static_cast<control_state*>(context);
    s.send_status = c.status;
    s.sent.store(true, std::memory_order_release);
    return false;
}

bool control_received(void* context, completion& c, callback_sink* /*sink*/) {
    auto& s = *static_cast<control_state*>(context);
    if (c.status == errc::access_denied) {
        // Someone but the attached peer (cq_impl::refuse_stranger): wait for the peer's.
        s.strangers.fetch_add(1, std::memory_order_relaxed);
        if (post_internal(*s.conn, queue::recv, s.in(), control_state::in_size,
                          detail::impl_of(*s.mr)->desc, control_received, &s)) {
            return false;
        }
    }
    s.recv_status = c.status;
    s.recv_bytes = c.bytes;
    s.received.store(true, std::memory_order_release);
    return false;
}

control_state& state_of(connection_impl& c) {
    static constexpr char key = 0;  // its address names the extension
    return static_cast<control_state&>(
        c.extension(&key, [] { return std::unique_ptr<connection_extension>(new control_state); }));
}

// Reads the connection's CQs (or lets their progress thread) until `flag` is set or the
// deadline. Nothing of the application's is in flight (control_exchange checks), so what a read
// reports is no operation of its own: only the control messages' hooks run.
bool wait_for(connection_impl& c, const std::atomic<bool>& flag,
              std::chrono::steady_clock::time_point deadline) {
    for (unsigned round = 0; !flag.load(std::memory_order_acquire); ++round) {
        if (std::chrono::steady_clock::now() >= deadline) {
            return false;
        }
        bool read = false;
        for (cq_impl* q : {c.cq.get(), c.rcq.get()}) {
            if (q != nullptr && !q->progress_owned()) {
                completion buf[4];
                (void)q->handle.poll(buf);
                read = true;
            }
        }
        if (!read || round >= 256) {
            std::this_thread::sleep_for(std::chrono::microseconds(read ? 50 : 20));
        }
    }
    return true;
}

}  // namespace

result<std::vector<std::byte>> control_exchange(connection& conn,
                                                std::span<const std::byte> message, bool receive,
                                                std::chrono::steady_clock::time_point deadline) {
    connection_impl* c = detail::impl_of(conn);
    if (c == nullptr || !c->rdm) {
        return fail(errc::bad_state, "attach handshake: only for RDM peers (open_peer)");
    }
    if (!c->attached.load()) {
        return fail(errc::bad_state, "attach handshake: no peer attached");
    }
    if (receive && c->srq) {
        return fail(errc::not_supported,
                    "attach handshake: the connection takes its messages from a "
                    "shared_receive_queue, which serves every peer attached to it; admit the "
                    "peer on a connection without srq");
    }
    if (message.size() > control_max) {
        return fail(errc::too_large, "attach handshake: a message of " +
                                         std::to_string(message.size()) + " bytes (at most " +
                                         std::to_string(control_max) + ")");
    }
    for (cq_impl* q : {c->cq.get(), c->rcq.get()}) {
        if (q != nullptr && q->shared && !q->progress_owned()) {
            return fail(errc::not_supported,
                        "attach handshake: the connection's CQ is shared and read by the "
                        "application; run the handshake with a progress thread, or on a "
                        "connection with CQs of its own");
        }
    }
    if (conn.in_flight() != 0) {
        return fail(errc::bad_state,
                    "attach handshake: operations are in flight; the handshake comes first");
    }
    control_state& s = state_of(*c);
    s.conn = c;
    if (s.recv_posted) {
        return fail(errc::bad_state,
                    "attach handshake: an earlier exchange failed on this connection; close it");
    }
    if (!s.mr) {
        auto mr = memory_region::create(c->dom_handle, s.buf, usage::send | usage::receive);
        if (!mr) {
            return fail(mr.error());
        }
        s.mr.emplace(std::move(*mr));
    }
    void* desc = detail::impl_of(*s.mr)->desc;
    if (receive) {
        s.received.store(false);
        if (auto r = post_internal(*c, queue::recv, s.in(), control_state::in_size, desc,
                                   control_received, &s);
            !r) {
            return fail(r.error());
        }
        s.recv_posted = true;
    }
    if (!message.empty()) {
        std::memcpy(s.out(), message.data(), message.size());
        s.sent.store(false);
        const queue q = c->internal_sends != 0 ? queue::service : queue::send;
        auto r = post_internal(*c, q, s.out(), message.size(), desc, control_sent, &s);
        // A peer that is not progressing yet leaves the provider's path to it unset up
        // (would_block): try again until the deadline.
        while (!r && r.error() == errc::would_block &&
               std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::microseconds(100));
            r = post_internal(*c, q, s.out(), message.size(), desc, control_sent, &s);
        }
        if (!r && r.error() == errc::would_block) {
            return fail(errc::timed_out,
                        "attach handshake: the peer did not take a message in time (" +
                            r.error().message() + ")");
        }
        if (!r) {
            return fail(r.error());
        }
        if (!wait_for(*c, s.sent, deadline)) {
            return fail(errc::timed_out,
                        "attach handshake: the peer did not take a message in time");
        }
        if (s.send_status) {
            return fail(s.send_status, "attach handshake: sending to the peer");
        }
    }
    if (!receive) {
        return std::vector<std::byte>{};
    }
    if (!wait_for(*c, s.received, deadline)) {
        return fail(errc::timed_out, "attach handshake: no answer from the peer in time");
    }
    s.recv_posted = false;
    if (s.recv_status) {
        return fail(s.recv_status, "attach handshake: receiving from the peer");
    }
    if (s.recv_bytes > control_max) {
        return fail(errc::too_large, "attach handshake: the peer sent a message longer than " +
                                         std::to_string(control_max) + " bytes");
    }
    return std::vector<std::byte>(s.in(), s.in() + s.recv_bytes);
}

}  // namespace remora::detail

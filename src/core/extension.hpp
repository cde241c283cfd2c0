// SPDX-License-Identifier: BSD-3-Clause
// src/core/extension.hpp — what a layer built on the endpoints attaches to a connection.
//
// The endpoint layer knows nothing of persistence (or of any other layer above it): such a layer
// keeps its per-connection state in an extension, registered on the connection under a key of
// its own on first use (connection_impl::extension) and destroyed with the connection, after its
// endpoint is closed and its destroy hooks ran. What the endpoint layer offers an extension:
//  - queue entries of its own: a connection whose addon (connection_config::addons) asks for
//    internal sends (connection_addon::internal_sends; persistence's service_depth) has that many
//    send entries beside the application's (queue::service), and its receives are the
//    extension's (queue::recv); the application's send and recv are refused there, unless the
//    addon is a message_router (below), which carries them beside its own;
//  - a hook on its internal completions: a send or receive posted with post_internal completes
//    through its hook, in finish(), instead of a user callback;
//  - busy(): the requests it has in flight for the application, which connection::in_flight()
//    counts instead of its always-posted receives;
//  - teardown: it outlives the endpoint, so a record whose context points into it is never
//    completed after it is gone.
// Threading: extension() may be called from any thread; busy() may run concurrently with
// anything but the extension's destruction.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>

#include <remora/connection.hpp>
#include <remora/op_options.hpp>
#include <remora/result.hpp>

namespace remora::detail {

struct connection_impl;

// An addon (connection_addon) whose internal sends share the connection with the application's
// own messages implements this too: the connection's setup finds it (dynamic_cast) and routes
// the application's send and recv through it instead of refusing them. The layer then owns
// every receive the provider holds (application_receives says how many it adds to its internal
// sends), tells its messages from the application's, and hands the application's to its
// receives. Threading: as the connection's posts.
class message_router {
  public:
    // Receives the provider holds for the application's messages, given the receive depth
    // the application asked for (connection_config::rq_size): added to the internal sends'.
    virtual std::uint32_t application_receives(std::uint32_t rq_size) const noexcept = 0;
    // The application's send: the layer marks it and posts it with post_send(..., routed).
    virtual result<void> send(connection_impl& c, std::span<const local_segment> src, bool with_imm,
                              std::uint64_t imm, const op_options& opts) const = 0;
    // The application's receive: taken by the layer, completed through its receives.
    virtual result<void> recv(connection_impl& c, std::span<const local_segment> dst,
                              const op_options& opts) const = 0;

  protected:
    ~message_router() = default;
};

// The router among the configuration's addons, or null.
const message_router* router_of(const connection_config& c) noexcept;

class connection_extension {
  public:
    connection_extension() = default;
    connection_extension(const connection_extension&) = delete;
    connection_extension& operator=(const connection_extension&) = delete;
    virtual ~connection_extension() = default;

    // Requests the extension has in flight for the application (see connection::in_flight).
    virtual std::size_t busy() const noexcept { return 0; }
    // Called while the connection's CQ is read or waited on, and before a wait sleeps: ends
    // requests past their deadline (through the CQ). Returns the next deadline of a request
    // still waiting, or time_point::max() when there is none: a wait sleeps no longer than that.
    virtual std::chrono::steady_clock::time_point tick(std::chrono::steady_clock::time_point) {
        return std::chrono::steady_clock::time_point::max();
    }
};

// A connection's multi-part operations in flight (gather_write, publish), owned here from
// reservation until their last part is done: a connection destroyed first frees them with itself.
// Op names the operation's state; each kind registers its own (connection_impl::extension).
template <class Op>
class owned_operations final : public connection_extension {
  public:
    Op* adopt(std::unique_ptr<Op> m) {
        Op* p = m.get();
        std::lock_guard lock(mu_);
        live_.emplace(p, std::move(m));
        return p;
    }
    // Takes `m` back: its last part is done.
    std::unique_ptr<Op> release(Op* m) {
        std::lock_guard lock(mu_);
        auto node = live_.extract(m);
        return std::move(node.mapped());
    }

  private:
    std::mutex mu_;
    std::unordered_map<Op*, std::unique_ptr<Op>> live_;
};

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/shared_receive_queue.hpp — one receive queue for many connections, over libfabric's
/// shared receive context (shared_receive_queue).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <remora/completion_queue.hpp>
#include <remora/connection.hpp>
#include <remora/domain.hpp>
#include <remora/memory_region.hpp>
#include <remora/result.hpp>

namespace remora {

/// How shared_receive_queue::create makes a queue.
struct shared_receive_queue_config {
    /// Receives posted at once (clamped to the provider's rx size and to 262,144).
    std::uint32_t size = 64;
    std::uint64_t tag = 0;  ///< completion::tag of its receives
};

/// One receive queue for many connections, over libfabric's shared receive context (librpma's
/// rpma_srq).
///
/// A shared_receive_queue holds receives posted into the application's own registered buffers;
/// every connection set up with connection_config::srq = q takes its incoming messages from them,
/// in the order they were posted, whichever connection a message arrives on. A server with many
/// clients thus keeps `size` receives posted in all, not rq_size per connection.
///
/// Endpoints: connected (msg) connections, and RDM peers (connection::open_peer) of a domain
/// whose provider has a shared receive context (caps().shared_rx; which providers have one:
/// docs/providers.md). Elsewhere create() fails with errc::not_supported naming the provider;
/// there receive_pool (receive_pool.hpp) is the answer: library buffers lent to each
/// connection's own receive queue.
///
/// Completions: by default the receives complete on the queue's own completion queue, cq() (a
/// shared_completion_queue of `size` entries: it cannot overflow, since at most `size` receives
/// are posted), with completion::tag = the queue's tag; which connection a message came from is
/// not told there (the provider reports the receive, not the endpoint). A connection set up with
/// connection_config::rcq = true as well gets a receive CQ of its own (sized `size`): the
/// queue's receives that its messages consume complete there, with the connection's tag — which
/// connection, at the price of one CQ each to read. A CQ read drives the provider for its
/// connections.
///
/// RDM peers: a receive takes a message from any peer attached to the queue (receives cannot be
/// directed at one peer). Where the domain checks sources (caps().directed_receive), a message
/// from anyone not attached to the queue still consumes a receive, which completes with
/// errc::access_denied and nothing received (post another). An RDM peer with an srq cannot run
/// the admission attach handshake (prove_admission, admit_peer: errc::not_supported).
///
/// A connection with an srq posts no receives of its own: connection::recv is refused
/// (errc::bad_state), its disconnect cancels nothing of the queue's, and its receive-queue
/// depth is unused. The queue lives as long as a connection uses it (each holds it).
///
/// \par Threading
/// Recv() may run from several threads at once; cq() follows completion_queue's rule
/// (one reader at a time).
class shared_receive_queue {
  public:
    shared_receive_queue() = default;  ///< empty handle
    /// A queue on `dom`, with its own completion queue.
    /// \param dom a domain whose provider has a shared receive context (caps().shared_rx), for
    ///        either endpoint type
    /// \param cfg how many receives it keeps posted, and its completions' tag
    /// \return the queue; errc::not_supported, naming the provider, where the domain's provider
    ///         has no shared receive context; errc::invalid_argument for size 0
    static result<shared_receive_queue> create(const domain& dom,
                                               const shared_receive_queue_config& cfg = {});

    /// True unless the handle is empty.
    explicit operator bool() const noexcept { return impl_ != nullptr; }
    /// Posts a receive into [offset, offset + length) of `dst` (usage::receive): checked like
    /// connection::recv (errc::out_of_range, access_denied; invalid_argument for a report other
    /// than completion_mode::always); errc::would_block when `size` receives are posted.
    /// op_options::park_until is not supported here (invalid_argument).
    /// \return success once posted, or one of the errors above
    result<void> recv(const memory_region& dst, std::size_t offset, std::size_t length,
                      op_options opts = {});
    completion_queue& cq() const noexcept;     ///< its receives complete here
    std::size_t size() const noexcept;         ///< effective
    std::size_t posted() const noexcept;       ///< receives posted, not yet reaped
    std::size_t connections() const noexcept;  ///< attached now

    /// The handle connection_config::srq takes.
    operator srq_binding() const noexcept { return srq_binding(impl_); }  // NOLINT

  private:
    friend struct internal_access;
    using impl = srq_binding::impl;
    explicit shared_receive_queue(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
    std::shared_ptr<impl> impl_;
};

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/connection_config.hpp — how a connection is set up (connection_config): its queues,
/// completion queues and channels, shared resources and the layers built on it
/// (connection_addon), and the CQ entries it takes (cq_entries).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <remora/completion_channel.hpp>
#include <remora/completion_queue.hpp>
#include <remora/result.hpp>
#include <remora/units.hpp>

namespace remora {

/// A shared receive queue for a connection's incoming messages: a handle on a
/// shared_receive_queue (shared_receive_queue.hpp), which converts to it (`cfg.srq = q`).
class srq_binding {
  public:
    srq_binding() = default;  ///< none: the connection posts receives of its own
    /// True when it names a shared receive queue.
    explicit operator bool() const noexcept { return impl_ != nullptr; }

  private:
    friend struct internal_access;
    friend class shared_receive_queue;
    struct impl;  // the queue's state, held by shared_receive_queue too
    explicit srq_binding(std::shared_ptr<impl> q) noexcept : impl_(std::move(q)) {}
    std::shared_ptr<impl> impl_;
};

/// What a layer built on connections asks of a connection's setup, carried by
/// connection_config::addons and kept by the connection for its life (a layer's configuration
/// converts to one). The endpoint layer reads only what is declared here; the layer reads the
/// rest back from config().addons.
///
/// \par Threading
/// The connection calls it from the thread that sets it up; it must not change.
class connection_addon {
  public:
    connection_addon() = default;
    connection_addon(const connection_addon&) = delete;
    connection_addon& operator=(const connection_addon&) = delete;
    virtual ~connection_addon() = default;  ///< when the last connection holding it goes
    /// Send-queue entries the layer's own messages take beside the application's sq_size (each
    /// with its completion-queue entry). A connection with any carries only the layer's
    /// messages: its receives are the layer's, sized to this (rq_size is ignored), and the
    /// application's send and recv are refused (errc::bad_state). 0 (default): none.
    virtual std::uint32_t internal_sends() const noexcept { return 0; }
    /// Checked at setup before anything is opened: an error fails the setup with it.
    virtual result<void> check() const { return {}; }
};

/// A connection's CQ channels: one each, one shared, or none (connection_config::channel).
enum class channel_mode : std::uint8_t {
    separate,  ///< each CQ has its own channel: wait on the CQ
    shared,    ///< CQ and RCQ share one channel: wait on the connection (or on the channel)
    none,      ///< no wait object (FI_WAIT_NONE): cheapest to busy-poll; waits poll, fd() is -1
};

/// How a connection is set up: its queue depths, completion queues and channels, progress,
/// shared resources and the layers built on it (connection::connect, connection::open_peer,
/// connection_request::accept).
///
/// Depths beyond what the provider grants (its send, receive and completion queue sizes), or
/// beyond 262,144 a queue (remora's own bound), are reduced to fit; config() reports the
/// effective values. max_sge is never reduced: too many segments is an error, and so are an
/// addon's internal sends past either bound (errc::too_large). A configuration that
/// contradicts itself fails the setup with errc::invalid_argument, naming the fields.
///
///     remora::connection_config cfg;
///     cfg.sq_size = 128;
///     cfg.rcq = true;               // receives complete on conn.rcq()
///     cfg.progress_thread = true;   // one-sided traffic lands while the target sleeps
struct connection_config {
    std::uint32_t sq_size = 64;  ///< send-queue depth (sends, reads, writes, atomics in flight)
    std::uint32_t rq_size = 64;  ///< receive-queue depth (posted receives)
    std::uint32_t cq_size = 0;   ///< 0: sq_size, plus rq_size when receives complete on the CQ
    bool rcq = false;            ///< receives complete on a separate receive CQ
    std::uint32_t rcq_size = 0;  ///< 0: rq_size
    channel_mode channel = channel_mode::separate;  ///< CQ and RCQ channels: own, shared, none
    /// With channel_mode::shared: attach to this channel (shared by many connections) instead of
    /// a channel of the connection's own.
    completion_channel shared_channel{};
    std::uint32_t max_sge = 1;  ///< scatter-gather entries per operation; at most the iov limit
    /// How long connect, accept and an asynchronous setup wait for the connection.
    std::chrono::milliseconds connect_timeout{5000};
    /// RDM peers: a peer that answers no probe for this long (before its first answer: at least
    /// connect_timeout) is lost; 0: off. Every liveness / 4 while the connection is looked at (its
    /// own CQs read or waited on, next_event, or its progress_thread) it probes a word the peer's
    /// open_peer registered, with a send-queue entry of its own; a failed or late probe reports
    /// conn_event::lost (see RDM peers). The peer must progress. MSG: errc::not_supported.
    std::chrono::milliseconds liveness{0};
    /// Run the domain's library-owned progress thread for this connection, so one-sided reads
    /// and writes from the peer land while the application does not call into remora (where
    /// caps().target_needs_progress), and the addons' internal messages are answered. The
    /// application still polls its own CQs. How the thread waits (busy, adaptive, blocking) is
    /// the domain's choice, for all its connections: domain_config::progress.
    bool progress_thread = false;
    std::uint64_t tag = 0;  ///< returned in channel events
    /// A budget shared with other connections: every operation also takes {sq 1, cq 1} (or {recv 1,
    /// cq 1} for a receive) from it at post and returns them when its completion is read (one
    /// poll() or next() reports is handed out with its queue entries, one wake for a parked post)
    /// or the connection is destroyed. Exhaustion follows the budget's policy (would_block, or
    /// bad_state for a sizing bug). Messages of layers built on the connection (an addon's internal
    /// sends, receives they keep posted) do not draw on it. Any `budget` (units.hpp) serves.
    std::shared_ptr<budget> slots{};
    /// Complete on a CQ shared with other connections instead of one of the connection's own:
    /// shared_cq takes what the CQ would (sends, and receives unless rcq); shared_rcq the
    /// receives (it implies rcq). The connection reserves its entries there (cq_size and
    /// rcq_size then report the shared CQs' sizes) or fails with errc::too_large when they do
    /// not fit. Shared CQs are waited on themselves: channel_mode::shared is refused with them.
    /// A shared CQ's reader drives the connection (progress, and noticing its disconnect); with
    /// progress_thread, each shared CQ given must be read by the progress thread too.
    shared_completion_queue shared_cq{};
    shared_completion_queue shared_rcq{};  ///< see shared_cq
    /// Selective signalling: with N > 1, writes and sends posted with completion_mode::on_error,
    /// no callback and at most caps().inject_size bytes (their buffer is copied at post, so it
    /// is free at once) are posted without a completion, at most N - 1 in a row: the next is
    /// signalled whatever it asks for. An unsignalled operation keeps its send-queue and CQ
    /// entries (an error still completes) until a later signalled operation's completion is
    /// read, which reclaims every unsignalled one posted before it; in_flight() counts them
    /// until then. Reads, atomics, flushes, larger or callback operations are always
    /// signalled. Clamped to sq_size (the bound); 1 (default): every operation is signalled.
    /// Refused with a shared budget (`slots`): unsignalled operations keep their units, and
    /// could hold every unit the signalled one that would reclaim them needs. What an injected
    /// operation holds for a layer built on the connection goes back at post.
    std::uint32_t signal_every = 1;
    /// Take incoming messages from this shared receive queue (shared_receive_queue.hpp) instead
    /// of receives of the connection's own: they complete on the queue's CQ, or with rcq on a
    /// receive CQ of the connection's own (which tells the connection); recv() is refused;
    /// rq_size, rcq_size and shared_rcq are ignored. errc::invalid_argument with a queue of another
    /// domain, with an addon's internal sends (they need receives of their own),
    /// channel_mode::shared or progress_thread (the queue's CQ has its own reader).
    srq_binding srq{};
    /// Layers built on the connection (see connection_addon), in any order. At most one may ask
    /// for internal sends (errc::invalid_argument otherwise); each one's check() runs at setup.
    std::vector<std::shared_ptr<const connection_addon>> addons{};
    /// The same-host path: a connection whose peer runs in another process on this host moves its
    /// operations to shared memory (libfabric's shm provider) once it is set up;
    /// connection::same_host() says whether it did. On by default wherever both domains allow it
    /// (domain_config::same_host, also on by default, says what a peer on the path can do that it
    /// cannot over tcp); false here keeps this connection off it. Taken only when both sides allow
    /// it and find the same host identity (one boot, /dev/shm, pid and user namespace, the same
    /// user and group ids and capabilities), neither process is more than its user's other
    /// processes may reach by the kernel's ptrace rules (Yama's ptrace_scope 0 or no Yama, the
    /// process dumpable, its real, effective and saved ids all one: never a set-id program, and no
    /// capabilities unless it is root's), the client connected
    /// to an address of this host, the peer is another process (two connections of one process
    /// stay on their provider: shm would touch a peer destroyed in the same process; the
    /// environment variable REMORA_SAME_HOST=process allows it, e.g. for tests that destroy
    /// neither side while the other posts),
    /// both domains have shm beside them (domain_config::same_host), the setup is blocking
    /// (connect, accept: never connect_async or accept_async), the configuration shares no CQ or
    /// receive queue (shared_cq, shared_rcq, srq) and the target's shm endpoint answered a probe
    /// before it accepted. The offer travels in a trailer the library appends to the connect and
    /// accept private data and strips before anyone reads it, only when it fits in
    /// caps().cm_data_size beside the application's data (else nothing is offered: never an
    /// error). Over the path the operations, callbacks, parked posts, slots and persistence work
    /// as over the provider, with its capabilities and limits (immediate-data width, inject size,
    /// native atomics: over tcp, atomics and GPSPM flushes still go through the target's
    /// service); one-sided operations reach descriptors at their same-host address
    /// (errc::not_supported for one without); where cross-memory attach works between the
    /// processes, a single-range read or write is copied by the initiator at the post (it
    /// completes while the peer is stopped, and may pass a write with immediate data, an atomic
    /// or a send posted before it, which wait in the peer's queue), and a
    /// stopped peer's queue refuses posts past its depth (errc::would_block); events, close() and
    /// the peer's end come from the connected endpoint, which stays open under it (next_event, the
    /// CQs' reads and waits and a completion channel's wait notice the end). A library progress
    /// thread drives the target's side, so a peer's operations land without the application;
    /// without progress_thread it reads none of the completions, which the application reads and
    /// whose callbacks run on its threads as over the provider. completion_queue::fd() works as
    /// over the provider (a progress thread drives the CQ from the first call). A target granting
    /// a peer restricted access (e.g.\ only a read-only registration) sets it to false: shared
    /// memory checks no memory keys. Ignored on RDM peers.
    bool same_host = true;
};

/// The completion-queue entries a connection with configuration `c` takes, on its CQ (cq_kind::cq:
/// the send queue, the addons' internal sends, and the receive queue unless it has a receive CQ)
/// or on its receive CQ (cq_kind::rcq: the receive queue; 0 without one). A private CQ is sized to
/// this and a shared one reserves it, so size a shared CQ with the sum over the connections that
/// will attach to it. Depths are taken as
/// given: the provider may reduce them at setup, and config() then reports what was reserved.
std::uint32_t cq_entries(const connection_config& c, cq_kind kind) noexcept;

}  // namespace remora

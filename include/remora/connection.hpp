// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/connection.hpp — a reliable connection to one peer (connection): its events
/// (conn_event) and verbs; its setup is connection_config.hpp's.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <remora/completion_channel.hpp>
#include <remora/completion_queue.hpp>
#include <remora/connection_config.hpp>
#include <remora/domain.hpp>
#include <remora/memory_region.hpp>
#include <remora/op_options.hpp>
#include <remora/remote_region.hpp>
#include <remora/result.hpp>
#include <remora/units.hpp>

namespace remora {

/// A connection's event, from connection::next_event (and, for an asynchronous setup's outcome,
/// channel_event::setup).
///
/// An asynchronous setup reports exactly one of established, rejected, refused, unreachable
/// (its connect_timeout passed, or no route), lost (any other failure, e.g.\ the client went
/// away before an accept_async completed) or closed (close() before it ended);
/// connection::setup_status() then gives the error behind a failure.
enum class conn_event : std::uint8_t {
    established,  ///< an asynchronous setup (connect_async, accept_async) succeeded
    closed,       ///< the peer or this side closed the connection; also a peer process that died,
                  ///< where the provider reports that as a close (docs/providers.md)
    lost,         ///< the connection failed (an error the provider reports on it: network error),
                  ///< or an operation on it failed because the transport is gone (reset,
                  ///< broken pipe), whether or not the provider reports the end itself
    rejected,     ///< the peer rejected the request
    refused,      ///< nobody listens at the address
    unreachable,  ///< the address cannot be reached (connect timed out)
};
/// "established", "closed", "lost", ...
const char* to_string(conn_event e) noexcept;

/// A reliable connection to one peer: a connected endpoint (libfabric FI_EP_MSG, like an RC QP)
/// from connect() or a listener, or an RDM peer (FI_EP_RDM) from open_peer() and attach().
///
///     auto conn = remora::connection::connect(dom, host, port);
///     auto desc = remora::remote_region::parse(conn->peer_private_data());
///     conn->write(*desc, 0, mr, 0, n);                    // one-sided, into the peer's region
///     auto c = conn->cq().next(std::chrono::seconds(5));  // op::write, c->ok()
///
/// Operations post work and return at once; each completes later on the connection's CQ (or RCQ
/// for receives when the connection has one) with the op_options::context it was posted with.
/// Every operation checks its arguments before anything is posted; a refused post takes nothing
/// and changes nothing. The errors every operation may return (the verbs name the others):
///   - errc::out_of_range: a remote or local range outside its descriptor or region;
///   - errc::access_denied: a usage the descriptor or local region does not grant;
///   - errc::invalid_argument: a segment without a region, a region of another domain, or
///     op_options the operation does not offer; errc::too_large: segments past max_sge;
///   - errc::would_block: a full queue (or connection_config::slots): reap completions and
///     retry, or park (op_options::park_until; a parked post may end errc::timed_out, canceled);
///   - errc::bad_state: not established yet, or no RDM peer attached; errc::disconnected:
///     closed or lost.
///
/// A write's completion means its source memory may be reused, not that the data is visible in the
/// target's memory: a read after the writes returns only once they are placed. Memory used by an
/// operation must stay allocated and registered until the operation completes or the connection is
/// closed.
///
/// \par Threading
/// Posting may run from several threads at once; the CQs follow completion_queue's rule (one
/// progress owner each); close() and the destructor must not race with other calls. A moved-from
/// connection may only be destroyed or assigned to. Callbacks (op_options::callback) run on the
/// thread that reads the CQ and must not block; what they may do (post, poll, close or destroy a
/// connection, their own included) is stated there.
///
/// \par RDM peers
/// RDM peers (a domain opened with endpoint_type::rdm): open_peer opens one RDM endpoint with its
/// own address vector and the CQ / RCQ / channel setup of a connected endpoint; each side gives
/// the other its local_address() (a file, a socket, a connected remora peer) and attach()es the
/// other's; from then on every operation goes to that peer, as on a connected endpoint. One
/// endpoint per peer relation, with its own queues and accounting. Receives count only the
/// attached peer's messages (provider_caps::directed_receive): anyone else's is held by the
/// provider or completes the receive it took with errc::access_denied and nothing received (post
/// it again), as docs/providers.md says. Attaching is local: to admit only peers that hold a key,
/// run the attach handshake of admission.hpp first. The differences:
///   - no events from the provider: event_fd() is an eventfd; next_event() reports
///     conn_event::closed once after close(), or conn_event::lost once (connection_config::
///     liveness) when the peer stopped answering, else times out.
///   - a one-sided target needs its endpoint and, where caps().target_needs_progress,
///     connection_config::progress_thread or an application reading its CQs.
///   - where caps().cq_wait_fd is false, CQs are polled, not blocked on (see that field);
///     cq().fd() is -1 unless the progress thread owns the CQ.
///   - close() closes the endpoint at once (the provider then writes nothing into the
///     operations' memory) and completes every operation not yet reaped with errc::canceled,
///     through the CQs as usual: read them until in_flight() is 0.
///   - the first operation to a newly attached peer may give errc::would_block while the
///     provider sets up its path to the peer (which needs the peer to progress); the post
///     retries for up to 50 ms first.
///   - a peer that goes away is announced only with liveness: it is then lost (is_open() false),
///     later posts fail with errc::disconnected, and a second later (a post racing the loss has
///     that long to return) the next look closes the endpoint as close() does, completing every
///     outstanding operation with errc::disconnected. Without it, operations to a dead peer
///     fail (docs/providers.md) or never complete; close() ends them. Destroying the peer's
///     endpoint in this process while it is posted to is unsupported.
///
/// \par Accounting
/// Every operation holds a send- or receive-queue entry and a completion-queue entry from post to
/// the reading of its completion (completion_mode::on_error only hides successes). A peer's
/// write_with_imm that consumes no posted receive (provider-dependent, docs/providers.md) is not
/// accounted: a target that accepts them must bound them by its own protocol.
///
/// \see write.cpp, read.cpp, ping_pong.cpp, connection.cpp
class connection {
  public:
    /// Connects to host:port and waits until the connection is established.
    /// \param dom          a domain opened for endpoint_type::msg
    /// \param host         the peer's address (name or number)
    /// \param port         the peer's listener port
    /// \param config       queue depths, CQs, channels, progress (connection_config)
    /// \param private_data sent with the request (at most caps().cm_data_size bytes), read by
    ///                     the server's connection_request::private_data()
    /// \return the connection; errc::connection_refused (nobody listens); errc::rejected (the
    ///         peer's reject private data in error::data(); also when its accept() fails);
    ///         errc::unreachable (no resolution or route); errc::timed_out after
    ///         config.connect_timeout; errc::too_large (private data); errc::not_supported (an
    ///         RDM domain); errc::invalid_argument (a configuration that contradicts itself)
    static result<connection> connect(const domain& dom, const std::string& host,
                                      std::uint16_t port, const connection_config& config = {},
                                      std::span<const std::byte> private_data = {});
    // ---- asynchronous setup ----
    /// Starts connecting to host:port and returns at once; the outcome comes later, as a
    /// connection event. Parameters as connect()'s.
    ///
    /// connect_async checks its arguments and sends the request like connect(), then returns at
    /// once (the same errors for what fails before the request is sent; nobody listening is
    /// errc::connection_refused from the call or conn_event::refused later, as the provider
    /// finds out: docs/providers.md). The connection is being set up until its outcome is known
    /// (is_connecting()); the outcome is reported once as a connection event (next_event(),
    /// readable on event_fd()): conn_event::established, or the failure (see conn_event) with its
    /// error in setup_status(): errc::rejected with the peer's reject private data in
    /// error::data(), errc::connection_refused (nobody listens), errc::timed_out (not established
    /// within config.connect_timeout, counted from this call). With channel_mode::shared (often a
    /// completion channel shared by many connections being set up), the channel's wait() also
    /// reports it once: a channel_event whose `setup` is set (see completion_channel.hpp), so one
    /// thread can set up hundreds of connections.
    ///
    /// While being set up, receives may be posted: they are kept and take the first messages the
    /// peer sends. Parked posts (op_options::park_until, blocking or park_mode::queue) of read,
    /// write, write_with_imm, send, send_with_imm, gather_write, scatter_read (and the multi-part
    /// operations of layers built on the connection that offer parking) wait for the outcome in the
    /// connection's parked FIFO, having taken nothing (parked() counts them): once established they
    /// proceed as any parked post; a failed setup ends them with its code (rejected,
    /// connection_refused, timed_out, canceled for close(); a provider error as disconnected), the
    /// blocking ones by their return, the queued ones through their callback; their own park_until
    /// still bounds them. They do not drive the setup: somebody must still look at the connection
    /// (below). With a shared budget (connection_config::slots) they wait in the budget's FIFO, and
    /// one at its head holds up the posts behind it (other connections' too) until the setup ends.
    /// Every other operation, and a post that does not park, is refused with errc::bad_state. A
    /// failed or closed setup completes the receives posted early with errors (canceled, or flushed
    /// as by close()), read as usual from the CQ. Destroying a connection being set up is allowed
    /// at any time: it closes the endpoint (the peer sees a failed or closed connection) and
    /// returns at once.
    ///
    /// Progress: the setup advances, and its deadline is noticed, only while the connection is
    /// looked at: next_event, a channel wait (both bound their sleep by the deadline), or
    /// next_event(0ms) whenever event_fd() is readable (it is when the setup has work to do) and
    /// at setup_deadline(); left alone, the request may never reach the peer.
    ///
    /// Threading: as the connection's (next_event and the channel's wait may run on other
    /// threads than the posts; peer_private_data() is valid once established).
    /// \return the connection being set up; the errors of connect() found before the request
    ///         is sent
    static result<connection> connect_async(const domain& dom, const std::string& host,
                                            std::uint16_t port,
                                            const connection_config& config = {},
                                            std::span<const std::byte> private_data = {});
    /// How an asynchronous setup went.
    /// \return success once established (and for a connection set up by connect or accept);
    ///         the setup's error once it failed (also errc::canceled after close() during
    ///         setup); errc::would_block while it is under way
    result<void> setup_status() const;
    /// True while an asynchronous setup is under way (its outcome not yet known).
    bool is_connecting() const noexcept;
    /// When an asynchronous setup under way gives up (errc::timed_out).
    std::chrono::steady_clock::time_point setup_deadline() const noexcept;

    // ---- RDM peers ----
    /// Opens an RDM endpoint on `dom` (opened with endpoint_type::rdm) with its own address
    /// vector, enabled, with no peer yet: operations fail with errc::bad_state ("no peer
    /// attached") until attach().
    /// \param dom    a domain opened for endpoint_type::rdm
    /// \param config as for connect() (queue depths, CQs, channels, progress)
    /// \return the endpoint; errc::not_supported on a msg domain (use connect / listener);
    ///         errc::invalid_argument for a configuration that contradicts itself
    static result<connection> open_peer(const domain& dom, const connection_config& config = {});
    /// This endpoint's address (opaque bytes: the provider's name for it and the word liveness
    /// probes read): give it to the peer for its attach(). Empty on a connected endpoint.
    std::span<const std::byte> local_address() const noexcept;
    /// Makes `peer_address` (the peer's local_address()) the destination of every operation.
    /// errc::invalid_argument for bytes that cannot be an address of this provider (wrong size,
    /// format or scheme; nothing changes), errc::bad_state when a peer is already attached or
    /// the endpoint is closed, errc::not_supported on a connected endpoint. An address that is
    /// well-formed but names nobody is not detected here: operations to it fail or never
    /// complete (see connection). Not concurrent with operations on this connection.
    /// \return success, or one of the errors above
    result<void> attach(std::span<const std::byte> peer_address);

    /// Takes over `other`'s endpoint, queues and operations (`other` is then moved-from).
    connection(connection&& other) noexcept;
    /// Destroys this connection (as the destructor), then takes over `other`'s.
    connection& operator=(connection&& other) noexcept;
    /// Closes the endpoint (the peer sees the close) and drops the completions not yet read,
    /// with their callbacks: close() and read the CQs until in_flight() is 0 first to see them.
    /// Must not race other calls (parked posts excepted: op_options::park_until).
    ~connection();

    // ---- one-sided ----
    // Every one-sided call names its destination first, then its source, as memcpy does: a
    // read's local memory, then the remote region; a write's remote region, then the local memory.

    /// Reads from the peer's region into local memory, without the peer's CPU taking part.
    /// Completes as op::read once the bytes are in `dst`. A read posted after writes on this
    /// connection returns only once they are placed.
    /// \param dst        local segments (usage::read_destination), at most config().max_sge;
    ///                   their lengths add up to the bytes read (not 0)
    /// \param src        the peer's region (usage::read_source)
    /// \param src_offset where in `src` the read starts
    /// \param opts       context, callback, reporting, parking, batching (op_options)
    /// \return success once posted; the errors of every operation (see connection);
    ///         errc::invalid_argument for a zero-length read
    result<void> read(std::span<const local_segment> dst, const remote_region& src,
                      std::uint64_t src_offset, op_options opts = {});
    /// \overload
    /// Reads `length` bytes into [dst_offset, dst_offset + length) of one registered region.
    result<void> read(const memory_region& dst, std::size_t dst_offset, const remote_region& src,
                      std::uint64_t src_offset, std::size_t length, op_options opts = {});
    /// Writes local memory into the peer's region, without the peer's CPU taking part.
    /// Completes as op::write once the source memory may be reused: not a sign that the bytes
    /// are visible at the target (a read after the writes is).
    /// \param dst        the peer's region (usage::write_destination)
    /// \param dst_offset where in `dst` the write starts
    /// \param src        local segments (usage::write_source), at most config().max_sge; their
    ///                   lengths add up to the bytes written
    /// \param opts       context, callback, reporting (completion_mode::at_post for small
    ///                   writes), parking, batching (op_options)
    /// \return success once posted; the errors of every operation (see connection)
    result<void> write(const remote_region& dst, std::uint64_t dst_offset,
                       std::span<const local_segment> src, op_options opts = {});
    /// \overload
    /// Writes `length` bytes from [src_offset, src_offset + length) of one registered region.
    result<void> write(const remote_region& dst, std::uint64_t dst_offset, const memory_region& src,
                       std::size_t src_offset, std::size_t length, op_options opts = {});
    /// A write that also notifies the peer: once the bytes are placed, the peer gets an
    /// op::remote_write completion carrying `imm` (on its RCQ if it has one). Where immediate
    /// data consumes a posted receive (caps().rx_cq_data) the peer must have one posted.
    /// \param dst        the peer's region (usage::write_destination)
    /// \param dst_offset where in `dst` the write starts
    /// \param src        local segments (usage::write_source), at most config().max_sge
    /// \param imm        the immediate data; must fit caps().cq_data_size bytes
    /// \param opts       as for write()
    /// \return as write(); errc::too_large when `imm` does not fit; errc::not_supported on a
    ///         provider without immediate data
    result<void> write_with_imm(const remote_region& dst, std::uint64_t dst_offset,
                                std::span<const local_segment> src, std::uint64_t imm,
                                op_options opts = {});
    /// \overload
    /// Writes `length` bytes from [src_offset, src_offset + length) of one registered region.
    result<void> write_with_imm(const remote_region& dst, std::uint64_t dst_offset,
                                const memory_region& src, std::size_t src_offset,
                                std::size_t length, std::uint64_t imm, op_options opts = {});
    // ---- multi-key: one operation over several remote regions ----
    static constexpr std::size_t max_gather_parts = 64;  ///< parts of a multi-key operation at most
    /// Writes consecutive pieces of the local range of `src` starting at src_offset into the remote
    /// segments, in order: part i carries dst[i].length bytes, starting where part i - 1 ended.
    /// Every segment is checked like write()'s destination before anything is taken
    /// (errc::out_of_range, access_denied; invalid_argument for no segment, a null region or a
    /// zero-length segment; too_large for more than max_gather_parts parts or more than sq_size).
    /// Reservation is one all-or-nothing step: dst.size() send-queue entries (with their CQ
    /// entries) and as many {sq 1, cq 1} units of connection_config::slots, or nothing
    /// (errc::would_block, or the budget's error); with op_options::park_until it parks for all of
    /// them at once. The operation completes once, as op::write with `bytes` the total, when its
    /// last part completes: success when every part succeeded, otherwise the status of the first
    /// part (lowest index) that failed, whose index is completion::failed_part. If a part's post
    /// fails, the call returns that error (naming the part) and the operation reports nothing more
    /// (parts already posted complete silently and give their entries back).
    /// completion_mode::at_post is refused (invalid_argument). Allocates one small record per
    /// operation. The local range must be registered already: no registration units are drawn.
    /// \param dst        the remote segments (usage::write_destination)
    /// \param src        the registered local memory (usage::write_source)
    /// \param src_offset where the bytes of part 0 start in `src`
    /// \param opts       context, callback, reporting, parking (op_options)
    /// \return success once every part is posted; the errors above, each naming its part
    result<void> gather_write(std::span<const remote_segment> dst, const memory_region& src,
                              std::size_t src_offset, op_options opts = {});
    /// gather_write's read-side twin, with its contract (segments checked like read()'s source,
    /// completing as op::read): reads them, in order, into consecutive pieces of `dst`.
    /// \param src        the remote segments (usage::read_source)
    /// \param dst        the registered local memory (usage::read_destination)
    /// \param dst_offset where the bytes of part 0 land in `dst`
    /// \param opts       as gather_write's
    /// \return as gather_write's
    result<void> scatter_read(std::span<const remote_segment> src, const memory_region& dst,
                              std::size_t dst_offset, op_options opts = {});
    // ---- parked posts ----
    /// Ends every post of this connection parked in op_options::park_until with errc::canceled
    /// (each returns it once, having taken nothing). Posts parked afterwards wait as usual. May run
    /// on any thread, concurrently with the parked posts. A parked post whose try is under way (its
    /// units just came back) is neither counted nor ended: the call waits for that try (one post)
    /// and counts it only if it is refused and parks again.
    /// \return how many parked posts it ended
    std::size_t cancel_parked();
    /// Posts of this connection parked now (a try under way is waited for, as in cancel_parked).
    std::size_t parked() const;

    // ---- atomics on 8-byte aligned words (usage::atomic_target) ----
    // The provider's atomics (caps().native_atomics). Through the target's service where the
    // provider has none: atomic_write, compare_swap and fetch_add of persistence.hpp.

    /// Writes `value` into the peer's 8-byte word atomically (the provider's atomics,
    /// caps().native_atomics). Completes as op::atomic.
    /// \param dst        the peer's region (usage::atomic_target)
    /// \param dst_offset the word's offset in `dst` (its address 8-byte aligned)
    /// \param value      the value written
    /// \param opts       context, callback, reporting (op_options)
    /// \return success once posted; the errors of every operation (see connection);
    ///         errc::invalid_argument for an unaligned word; errc::not_supported on a provider
    ///         without native atomics
    result<void> atomic_write(const remote_region& dst, std::uint64_t dst_offset,
                              std::uint64_t value, op_options opts = {});
    /// Replaces the peer's 8-byte word with `desired` if it equals `expected`, atomically, and
    /// writes the word's previous value into `result` before it completes (op::atomic): the swap
    /// happened when that value is `expected`.
    /// \param dst           the peer's region (usage::atomic_target)
    /// \param dst_offset    the word's offset in `dst` (its address 8-byte aligned)
    /// \param expected      the value the word must hold
    /// \param desired       the value it then takes
    /// \param result        where the previous value goes (usage::read_destination)
    /// \param result_offset its offset in `result` (8 bytes)
    /// \param opts          context, callback, reporting (op_options)
    /// \return success once posted; as atomic_write()
    result<void> compare_swap(const remote_region& dst, std::uint64_t dst_offset,
                              std::uint64_t expected, std::uint64_t desired,
                              const memory_region& result, std::size_t result_offset,
                              op_options opts = {});
    /// Adds `addend` to the peer's 8-byte word atomically, and writes the word's previous value
    /// into `result` before it completes (op::atomic). Parameters as compare_swap()'s.
    /// \return success once posted; as atomic_write()
    result<void> fetch_add(const remote_region& dst, std::uint64_t dst_offset, std::uint64_t addend,
                           const memory_region& result, std::size_t result_offset,
                           op_options opts = {});

    // ---- two-sided ----

    /// Sends a message, which completes a receive the peer posted (recv()) with its bytes.
    /// Completes as op::send once the source memory may be reused.
    /// \param src  local segments (usage::send), at most config().max_sge; their lengths add up
    ///             to the message
    /// \param opts as for write() (completion_mode::at_post for small messages too)
    /// \return success once posted; the errors of every operation (see connection);
    ///         errc::bad_state on a connection with a service depth (it carries only its own)
    result<void> send(std::span<const local_segment> src, op_options opts = {});
    /// \overload
    /// Sends [offset, offset + length) of one registered region.
    result<void> send(const memory_region& src, std::size_t offset, std::size_t length,
                      op_options opts = {});
    /// A send whose receive completes at the peer with `imm` (completion::has_imm).
    /// \param src  local segments (usage::send), at most config().max_sge
    /// \param imm  the immediate data; must fit caps().cq_data_size bytes
    /// \param opts as for send()
    /// \return as send(); errc::too_large when `imm` does not fit; errc::not_supported on a
    ///         provider without immediate data
    result<void> send_with_imm(std::span<const local_segment> src, std::uint64_t imm,
                               op_options opts = {});
    /// \overload
    /// Sends [offset, offset + length) of one registered region.
    result<void> send_with_imm(const memory_region& src, std::size_t offset, std::size_t length,
                               std::uint64_t imm, op_options opts = {});
    /// Posts a receive: the peer's next message (in posting order) lands in `dst`, and its
    /// completion (op::recv, on the RCQ if the connection has one) gives the bytes received and
    /// any immediate data. A message longer than the receive completes it with an error
    /// (errc::too_large). Receives may be posted while an asynchronous setup is under way.
    /// \param dst  local segments (usage::receive), at most config().max_sge
    /// \param opts context, callback, parking (op_options; the report is always
    ///             completion_mode::always)
    /// \return success once posted; the errors of every operation (see connection);
    ///         errc::bad_state with a shared_receive_queue or a service depth;
    ///         errc::invalid_argument for a report other than completion_mode::always
    result<void> recv(std::span<const local_segment> dst, op_options opts = {});
    /// \overload
    /// Receives into [offset, offset + length) of one registered region.
    result<void> recv(const memory_region& dst, std::size_t offset, std::size_t length,
                      op_options opts = {});

    // ---- completions ----

    /// The connection's completion queue (receives too, without a receive CQ); with
    /// connection_config::shared_cq, the shared CQ's queue(). Valid as long as the connection.
    completion_queue& cq() noexcept;
    completion_queue* rcq() noexcept;  ///< the receive CQ; nullptr without a separate one
    /// With channel_mode::shared: blocks until the CQ or RCQ fires and says which. With a
    /// channel shared by several connections (connection_config::shared_channel) it waits on that
    /// channel and may report another connection's CQ: dispatch by channel_event::tag.
    /// \param timeout the longest it blocks
    /// \return the event (poll its `cq`); errc::timed_out; errc::bad_state for separate channels
    result<channel_event> wait(std::chrono::milliseconds timeout);

    // ---- connection management ----

    /// The next connection event (closed, lost; an asynchronous setup's outcome); event_fd()
    /// for epoll. Also drives the connection while it waits (tcp notices a peer's close only
    /// while its data path progresses).
    /// \param timeout the longest it waits (0: only looks)
    /// \return the event; errc::timed_out when none came
    result<conn_event> next_event(std::chrono::milliseconds timeout);
    /// Readable while an event is pending (read it with next_event(0ms)); not readable when none
    /// is. A peer's close is guaranteed to reach it only while the connection progresses: with
    /// progress_thread, or while the application reads or arms its CQs, so block on it together
    /// with the armed CQ fds.
    int event_fd() const noexcept;
    /// The private data the peer sent while the connection was set up: the server's accept data
    /// on the client (e.g.\ a region's descriptor), the client's request data on the server.
    /// Empty on RDM. Valid as long as the connection.
    std::span<const std::byte> peer_private_data() const noexcept;
    /// Disconnects and closes the endpoint: every outstanding operation completes, once, through
    /// the CQs as usual — with the status the provider's shutdown gave it (errc::canceled or
    /// errc::disconnected, docs/providers.md), else errc::canceled (always errc::canceled on
    /// RDM) — so reading the CQs until in_flight() is 0 ends, also when the peer stopped
    /// acknowledging. This side's next_event() reports
    /// conn_event::closed once (unless the peer's close or loss was reported already); the peer
    /// sees its close. Idempotent. During an asynchronous setup it ends the setup (its outcome
    /// is conn_event::closed, setup_status() errc::canceled, receives posted early complete with
    /// errors); the endpoint, and with it the peer's side, goes when the connection is destroyed.
    /// \return success (also when closed already); the provider's error from its shutdown
    ///         (the connection is closed all the same)
    result<void> close();
    /// True while the connection is established (false before an asynchronous setup succeeded,
    /// after close(), and once the peer's close or a loss was noticed).
    bool is_open() const noexcept;
    /// True when the connection's operations go over shared memory to a peer on this host (the
    /// same-host path, connection_config::same_host), false when they go over its provider.
    bool same_host() const noexcept;

    const connection_config& config() const noexcept;  ///< effective values
    /// Operations posted whose completion the application does not have yet: each counts from its
    /// post until poll() (or next()) hands its completion out or its callback is called, whichever
    /// call read it from the provider (a wait(), the library's progress thread, close()). So "poll,
    /// or wait when poll found nothing, while in_flight() > 0" ends with every completion received
    /// and none to come. Its queue entries stay taken as long (a completion a wait() read, or the
    /// progress thread's ring holds, still takes its entries), so in_flight() never exceeds the
    /// queues' depths. Receives kept posted for an addon's internal messages are not counted (its
    /// own requests in flight are). Provider entries that belong to no operation of the application
    /// (an error entry without context) are dropped, never reported.
    std::size_t in_flight() const noexcept;
    const domain& dom() const noexcept;  ///< the domain it was opened on

  private:
    friend struct internal_access;
    struct impl;
    struct impl_deleter {
        void operator()(impl* p) const noexcept;
    };
    explicit connection(std::unique_ptr<impl, impl_deleter> p) noexcept;
    std::unique_ptr<impl, impl_deleter> impl_;
};

}  // namespace remora

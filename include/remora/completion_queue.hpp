// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/completion_queue.hpp — completions (completion) of a connection's operations, the
/// queues they arrive on (completion_queue, shared_completion_queue) and how to wait for them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

#include <remora/result.hpp>

namespace remora {

/// Which of a connection's completion queues.
enum class cq_kind : std::uint8_t {
    cq,   ///< the CQ: sends, reads, writes, atomics (and receives without a receive CQ)
    rcq,  ///< the receive CQ (connection_config::rcq)
};

/// The kind of operation a completion reports.
enum class op : std::uint8_t {
    unknown,       ///< not an operation of this side (never reported for a posted operation)
    read,          ///< connection::read, scatter_read
    write,         ///< connection::write, write_with_imm, gather_write (and write_copy)
    send,          ///< connection::send, send_with_imm (and send_copy)
    recv,          ///< a receive completed (a send arrived; may carry immediate data)
    remote_write,  ///< a peer's write with immediate data arrived (target side)
    atomic,        ///< atomic_write, compare_swap or fetch_add (native or through the service)
    flush,         ///< a flush (read-after-write or GPSPM) completed: the range is visible/durable
    publish,       ///< publish (persistence.hpp): its writes, flush and publishing atomic completed
};
/// The operation's name: "read", "write", "remote_write", ...
const char* to_string(op o) noexcept;
/// "cq" or "rcq".
const char* to_string(cq_kind k) noexcept;

/// One operation's outcome, as poll(), next(), a callback or co_op report it.
///
/// A small value (it copies without allocating): the kind of operation, its status, the bytes
/// and immediate data it carried, and the context it was posted with.
struct completion {
    remora::op op = op::unknown;  ///< which operation completed
    std::error_code
        status;  ///< empty on success; errc::canceled, errc::disconnected, ... otherwise
    /// Bytes received for recv; for remote_write and other operations what the provider reports
    /// (may be 0; docs/providers.md).
    std::size_t bytes = 0;
    std::uint64_t imm = 0;    ///< immediate data when has_imm
    bool has_imm = false;     ///< the completion carries immediate data (`imm`)
    void* context = nullptr;  ///< the operation's user context
    /// connection_config::tag of the connection it belongs to (tells connections apart on a
    /// shared CQ). A peer's write with immediate data carries no local operation: on a shared CQ
    /// it reports the shared CQ's tag (libfabric's MSG endpoints do not say which connection).
    std::uint64_t tag = 0;
    /// A multi-key operation (connection::gather_write, scatter_read, publish) that failed:
    /// which part (0-based) did.
    std::uint32_t failed_part = 0;
    /// True on success (`status` empty).
    bool ok() const noexcept { return !status; }
    /// The failure as results carry it (remora::error, result.hpp): `status`, with a message naming
    /// the operation (and failed_part, for a publish or a later part of a gather_write or
    /// scatter_read), so a completion's failure and a call's are handled alike (`return
    /// fail(c.error())`). An empty error on success. The completion keeps only the code: it stays a
    /// small value that copies without allocating.
    remora::error error() const;
};

class domain;
class connection;

/// Where a connection's operations complete, and how to wait for them.
///
/// Every connection has a completion queue (CQ) for its sends, reads, writes and atomics, and for
/// its receives unless the connection has a separate receive CQ (RCQ). A CQ has a completion
/// channel: its own (channel_mode::separate), or one shared with the connection's other CQ and
/// possibly with other connections (channel_mode::shared, see completion_channel.hpp).
///
/// poll() returns how many completions it wrote to its span (0 when none are ready); entries it
/// consumed for callbacks (op_options::callback) or hid (successes not reported) are not counted,
/// so the count always indexes what was written. A poll that consumed such entries makes the next
/// wait() (or arm(), or a shared channel's wait) return at once, once, with 0 ready: the obvious
/// loop `while (!done) { if (poll(out) == 0) wait(t); }` re-checks `done` after its callbacks ran
/// instead of sleeping a whole timeout. The same holds for the ring of a CQ read by the library's
/// progress thread and for a shared_completion_queue's queue(). wait() blocks until the
/// CQ's channel fires or the timeout passes and returns how many completions are ready; 0 is the
/// documented *no_completion* wake-up: providers may signal a channel for an event that produces no
/// completion. It is not an error; poll and wait again. No completion is lost between a poll that
/// found nothing and a wait: wait() arms the channel with fi_trywait before it blocks. A CQ read by
/// the library's progress thread also returns 0 when the thread reaped entries that report nothing
/// (callbacks, reclaimed unsignalled operations) since the last wait or arm, so a loop that waits
/// while in_flight() > 0 cannot sleep through a reap that landed between the check and the wait.
///
/// A CQ may also be shared by several connections (shared_completion_queue): it keeps one
/// budget, and attaching a connection whose queue entries could overflow it fails.
///
/// \par Threading
/// One thread at a time polls or waits on a CQ (its progress owner). Where callbacks
/// run and what they may do (post, poll, close or destroy a connection, on a private or a shared
/// CQ) is op_options::callback's contract (connection.hpp).
///
/// \see ping_pong.cpp, receive_cq.cpp
class completion_queue {
  public:
    completion_queue(const completion_queue&) = delete;
    completion_queue& operator=(const completion_queue&) = delete;

    /// Reads ready completions without blocking, writing up to out.size() of them.
    /// Completions consumed by callbacks are not counted; after such a poll the next wait() or
    /// arm() does not block (see completion_queue). A poll right after a wait() that found the
    /// provider empty hands out only what that wait read (it does not read the provider again);
    /// the next poll or wait does.
    /// \param out where completions are written (out[0] .. out[n - 1])
    /// \return n, the count written (0: none to report); a provider error as it reports it
    result<std::size_t> poll(std::span<completion> out);
    /// Blocks until completions are ready or the channel fires; poll() them afterwards.
    /// \param timeout the longest it blocks
    /// \return the ready count, 0 for a no_completion wake-up (poll and wait again);
    ///         errc::timed_out; errc::bad_state when this CQ's channel is shared (wait on the
    ///         connection or the channel instead)
    result<std::size_t> wait(std::chrono::milliseconds timeout);
    /// The next completion to report, within `timeout`: polls, and blocks on the CQ's channel
    /// between polls (no_completion wake-ups and entries consumed by callbacks are absorbed), so
    /// nobody hand-rolls that loop.
    /// \param timeout the longest it waits; 0 only polls
    /// \return the completion (its own status says whether the operation succeeded);
    ///         errc::timed_out when none came in time; errc::bad_state when this CQ's channel
    ///         is shared, as for wait(); a provider error as poll() or wait() report it
    result<completion> next(std::chrono::milliseconds timeout);

    /// For the caller's own epoll: fd() becomes readable when the CQ may have completions. Call
    /// arm() before blocking on it. -1 where the provider's CQs have no fd
    /// (provider_caps::cq_wait_fd) and the progress thread does not own the CQ, except on a
    /// same-host connection (connection::same_host): there the domain's progress thread drives
    /// the CQ from the first call on and signals the fd (under the domain's progress policy:
    /// adaptive and blocking look every 100 us when idle, busy without pause). Not from a
    /// callback run by that domain's progress thread.
    int fd() const noexcept;
    /// Prepares fd() for a blocking wait (libfabric's fi_trywait).
    /// \return true: block on fd(); false: completions may already be ready, or the last poll
    ///         ran callbacks: poll first, then arm again; a provider error as it reports it
    result<bool> arm();

    cq_kind kind() const noexcept;       ///< the connection's CQ or its receive CQ
    std::size_t size() const noexcept;   ///< effective depth
    std::uint64_t tag() const noexcept;  ///< the owning connection's tag
    /// The connection this CQ belongs to: for a connection's own CQ or receive CQ, the connection
    /// object that holds it now (the pointer follows the connection when it is moved). nullptr
    /// for a CQ that several connections may share (shared_completion_queue::queue(), and so
    /// cq() or rcq() of a connection set up with connection_config::shared_cq, shared_rcq, or srq
    /// without rcq): there each completion's `tag` (connection_config::tag) names its connection.
    /// Non-owning. A connection's own CQ is destroyed with the connection, so the pointer is
    /// valid as long as this CQ is; a shared CQ outlives its connections and reports nothing of
    /// one destroyed (shared_completion_queue). Not concurrent with moving or destroying the
    /// connection.
    remora::connection* connection() const noexcept;

  private:
    friend struct internal_access;
    friend class shared_completion_queue;
    struct impl;  // the CQ's state, held by shared_completion_queue too
    explicit completion_queue(impl* p) noexcept : impl_(p) {}
    impl* impl_;
};

/// How shared_completion_queue::create makes a CQ.
struct shared_cq_config {
    /// Entries. Clamped to the provider's CQ size; size() reports the effective value.
    std::uint32_t size = 1024;
    /// Read by the domain's library progress thread (see connection_config::progress_thread):
    /// a target whose provider needs progress (caps().target_needs_progress), and the target
    /// service, make progress while the application sleeps. Otherwise the application's polls and
    /// waits drive it.
    bool progress_thread = false;
    std::uint64_t tag = 0;  ///< reported for a peer's write with immediate data (see completion)
};

/// How shared_completion_queue::create makes a CQ.
/// A completion queue shared by several connections (connection_config::shared_cq, shared_rcq),
/// like a server's one CQ for all its queue pairs.
///
/// It keeps one budget: each attached connection
/// reserves an entry for every queue entry that completes here (send queue + service depth, and
/// the receive queue unless the connection has a separate RCQ), so the CQ cannot overflow;
/// attaching a connection that would exceed size() fails with errc::too_large and the figures.
/// A connection's reservation returns when it is destroyed: its endpoint is closed and every
/// completion of its still in the CQ, or read and not yet handed out, is dropped (its contexts
/// and callbacks may be gone); other connections' entries read on the way are kept, in order,
/// and finished by the CQ's reader on its own thread. close() it and reap first to see its
/// flushed operations. Every completion carries its connection's tag.
///
/// \par Threading
/// As completion_queue (one poller or waiter at a time); connections may attach and
/// detach from any thread meanwhile; callbacks as op_options::callback says. The handle is
/// shared: copies refer to the same CQ, which lives while a handle or an attached connection does.
///
/// \see shared_cq.cpp
class shared_completion_queue {
  public:
    shared_completion_queue() = default;  ///< empty handle
    /// Opens a CQ on `dom` for connections to share.
    /// \param dom the domain of the connections that will attach
    /// \param cfg its size, tag and whether the progress thread reads it
    /// \return the CQ; errc::bad_state for an empty domain handle; errc::invalid_argument for
    ///         size 0; the provider's error when it cannot open one
    static result<shared_completion_queue> create(const domain& dom,
                                                  const shared_cq_config& cfg = {});

    /// True unless the handle is empty.
    explicit operator bool() const noexcept { return impl_ != nullptr; }
    completion_queue& queue() const noexcept;  ///< poll, wait, fd, arm
    std::size_t size() const noexcept;         ///< effective entries
    std::size_t reserved() const noexcept;     ///< held by attached connections
    std::size_t connections() const noexcept;  ///< attached now

  private:
    friend struct internal_access;
    using impl = completion_queue::impl;
    explicit shared_completion_queue(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
    std::shared_ptr<impl> impl_;
};

}  // namespace remora

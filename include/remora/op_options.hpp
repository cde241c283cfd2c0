// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/op_options.hpp — what an operation is posted with: op_options (context, callback, when
/// it completes, parking, batching), and the segments of scatter-gather and multi-key
/// operations (local_segment, remote_segment).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include <remora/completion_queue.hpp>
#include <remora/memory_region.hpp>
#include <remora/remote_region.hpp>

namespace remora {

/// Which outcomes of an operation are reported (op_options::report).
enum class completion_mode : std::uint8_t {
    always,    ///< a completion is reported on success and on error
    on_error,  ///< only an error is reported; the operation still holds its queue entries until
               ///< the library reaps its completion (signalled underneath, unless
               ///< connection_config::signal_every lets it go unsignalled)
    /// Writes and sends of at most caps().inject_size bytes: the provider copies the bytes at
    /// post (inject), so the operation is complete for the caller when the post returns; only
    /// an error is reported later, like on_error. Larger ones: errc::too_large; other operations,
    /// or with a callback: errc::invalid_argument. co_op with await_options::at_post awaits one
    /// without suspending.
    at_post,
};

/// How a parked post waits (op_options::park).
enum class park_mode : std::uint8_t {
    block,  ///< the calling thread waits (the default)
    queue,  ///< the call returns at once; the library posts the operation once its slot is reserved
};

/// What an operation is posted with: its context, callback, which outcomes are reported,
/// parking under back-pressure, and batching.
///
/// Every verb of connection takes one (last, defaulted), and so do the verbs of the layers built
/// on a connection; the contracts of the operations themselves are with each verb. The default
/// posts a signalled operation whose completion goes to poll() with a null context, and fails at
/// once with errc::would_block when its queue entries are taken.
///
///     remora::op_options o;
///     o.context = &request;                              // back in completion::context
///     o.park_until = std::chrono::steady_clock::now() + 10ms;  // wait for room, up to 10 ms
///     auto r = conn.write(dst, 0, mr, 0, n, o);
struct op_options {
    /// Which outcomes are reported.
    completion_mode report = completion_mode::always;
    void* context = nullptr;  ///< returned in the completion
    /// When set, the operation's completion goes to this function instead of to poll(): it runs
    /// exactly once, on the thread that reads the CQ (the application's, or the library progress
    /// thread's), and must not block. Callbacks run after the reading call has released the CQ's
    /// lock, in the order their completions were read, one at a time per CQ (a reader that finds
    /// another thread running the CQ's callbacks leaves its own to that thread, which then wakes
    /// the CQ's waiters). From a callback the application may: post (never parking, see
    /// park_until), poll the CQ it runs from (callbacks read there run after the current one
    /// returns), close a connection, and destroy a connection, its own included, when the
    /// application reads that CQ itself or the CQ is a shared_completion_queue (a connection whose
    /// private CQ is read by the library's progress thread must not be destroyed from that CQ's
    /// callbacks: the thread's teardown waits for itself). Another thread may destroy a
    /// connection while callbacks run: the destroy drops that connection's callbacks not yet
    /// started and waits only for one of its own that is running on another thread, never for
    /// other connections' callbacks (so a callback may wait for a lock the destroying thread
    /// holds, unless it is a callback of the connection being destroyed). The operation stops
    /// counting in in_flight() as its callback is called.
    void (*callback)(const remora::completion&) = nullptr;
    /// Parked posts (back-pressure that waits). The default, the clock's epoch, does not park: a
    /// post that finds its units taken fails at once with errc::would_block. Any other value parks
    /// it: the post waits, on the calling thread, until everything it needs is free (its
    /// send-queue or receive-queue entries and CQ entries, and its connection_config::slots
    /// units) and then posts as usual; time_point::max() waits without a deadline. Waiters are
    /// served in FIFO order: per connection, or, with connection_config::slots, across every
    /// connection drawing on that budget (one FIFO per budget: its head waits for its own
    /// connection's entries too, and nobody passes it). Only the head tries again, after a
    /// completion gives something back; the others sleep. Nothing spins. A parked post ends once,
    /// having posted nothing and taken nothing, with:
    ///   errc::timed_out     at park_until (or shortly after, never before);
    ///   errc::canceled      when connection::cancel_parked() ends it;
    ///   errc::disconnected  when the connection is closed (close(), or the peer's close or
    ///                       death once the connection notices it) or destroyed: destruction
    ///                       from another thread ends the parked posts first and waits for them
    ///                       to return (the one exception to "close and destroy do not race");
    /// or with the post's own error when a retry fails otherwise (a forbid pool's bad_state is
    /// returned at once: forbid never parks). Somebody else must read the CQ meanwhile (another
    /// thread, or connection_config::progress_thread): a thread that is the only reader and
    /// parks waits until its deadline. From inside a completion callback a post never parks: it
    /// tries once and a refusal is errc::would_block (its message says so), so a callback cannot
    /// deadlock the thread that gives units back. Posts without park_until do not queue behind
    /// parked ones.
    std::chrono::steady_clock::time_point park_until{};
    /// park_mode::queue: a parked post that has no thread to wait on (a callback-driven or
    /// coroutine application; co_op with await_options::park_until in coro.hpp). Needs park_until
    /// and a callback. The call checks its arguments and returns at once: success means the
    /// operation was posted or queued. A queued one waits in the same FIFO as the blocking ones
    /// (counted by parked(), not by in_flight() until it is posted) and is posted, once it is the
    /// head and its units come back, on the library's thread of that FIFO (started on first use);
    /// its callback then runs once with its completion, as for any post. If it is never posted, the
    /// callback still runs once, on that thread, with a completion of the operation's kind and
    /// context whose status is timed_out (at park_until), canceled (cancel_parked), disconnected
    /// (close, destruction) or the error a later try met (a bad_state budget...). Its buffers,
    /// regions and remote regions' memory must stay valid until then, as for any operation in
    /// flight; the remote descriptor and the segment list are copied. Offered on read, write,
    /// write_with_imm, send, send_with_imm, recv, gather_write, scatter_read, and the multi-part
    /// operations of layers built on the connection that say so; elsewhere errc::invalid_argument.
    park_mode park = park_mode::block;
    /// Batching hint (libfabric's FI_MORE): another post on this connection follows at once, so
    /// the provider may hold this one back and hand the burst to the fabric together (one
    /// doorbell, one system call). Set it on every post of a burst but the last: the burst ends
    /// with the connection's next post without `more` (any operation; those that do not offer
    /// `more` always post without it). Offered on read, write, write_with_imm, send and
    /// send_with_imm; ignored when the post fails (the burst stays as it was). It changes no
    /// outcome: every operation completes and reports as without it. A burst left open (no post
    /// after one with `more`) may be kept by a provider that defers on FI_MORE until the
    /// connection's next post without it: end every burst, or do not set `more` (which providers
    /// defer: docs/providers.md; gains: docs/performance.md). Threading: a burst is one thread's
    /// run of posts on one connection; posts from other threads in between end it or join it, as
    /// the provider sees them.
    bool more = false;
};

/// A piece of a peer's memory for a multi-key operation: [offset, offset + length) of `region`.
struct remote_segment {
    const remote_region* region = nullptr;  ///< the descriptor of the peer's region
    std::uint64_t offset = 0;               ///< from the start of the region's range
    std::size_t length = 0;                 ///< bytes (non-zero)
};

/// A piece of local memory for an operation: [offset, offset + length) of a registered region.
struct local_segment {
    const memory_region* region = nullptr;  ///< registered; it must outlive the operation
    std::size_t offset = 0;                 ///< from the start of the region
    std::size_t length = 0;                 ///< bytes
};

}  // namespace remora

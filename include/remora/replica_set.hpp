// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/replica_set.hpp — one write made durable on k of N targets (replica_set): fan-out,
/// quorum, dropping a replica that fails, and catching it up again.
///
///     std::vector<remora::replica> members;
///     for (auto& [conn, desc] : targets)  // one client domain, one connection per target
///         members.push_back({&conn, desc});
///     auto set = remora::replica_set::create(members, {.quorum = 2});
///     set->write(offset, mr, 0, n, {.callback = on_durable});  // once 2 of 3 made it durable
///
/// Each write is posted to every live replica as connection::write followed by flush()
/// (persistence.hpp) with replica_set_config::how, and completes once, when `quorum` of the
/// replicas that were live at its post have completed the flush (and every replica's write has
/// given the source memory back). A replica whose write or flush fails (its connection ended,
/// noticed at its next operation) or whose oldest operation waits past behind_limit is dropped,
/// or one the application drops (drop()): the set closes its connection
/// (so nothing posted to it lands later), reports replica_event_kind::dropped once, and records
/// the ranges written since. The set keeps completing while `quorum` replicas stay live; with
/// fewer, every operation that can no longer reach its quorum fails (it never reports success),
/// and later writes are refused with errc::bad_state until rejoin() brings enough replicas
/// back. rejoin() copies what a dropped replica missed (or its whole range) from a live one
/// while writes go on, and reports replica_event_kind::rejoined when it counts again.
///
/// What a success means: the write's bytes are durable (or visible: flush_type::visibility) on
/// at least `quorum` targets. Every live replica holds the bytes of every write that completed
/// (a replica that fails a write is dropped), so any one live replica can bring a returning one
/// back, and any `quorum` that stay live hold everything acknowledged.
///
/// \par Members
/// Every member's connection is opened on one domain (the source memory of a write is
/// registered there) and is read by someone: connection_config::progress_thread, or the
/// application's polling of its CQs (the set posts with callbacks, which run where the CQs are
/// read). Each member's send queue must hold 2 x depth operations (a write and a
/// read-after-write flush per write in flight; with GPSPM: depth, and a service_depth of at
/// least depth): create() checks. A member that refuses a post for a full queue (would_block)
/// gets it again from the set's thread, in order, and is dropped only at behind_limit; rejoin's
/// copies wait for room the same way. The application may read from a member's connection
/// beside the set if it sizes the queue for that too. A member's
/// connection must outlive its membership: until it is dropped and pending(i) is 0 (the set's
/// destructor waits for that).
///
/// \par Threading
/// write(), drop(), rejoin() and the observers may run from any number of threads at once. The
/// set runs one thread of its own: it closes dropped members' connections, watches behind_limit
/// and copies for rejoin(). Callbacks (replica_options::callback, replica_set_config::on_event)
/// run on a member CQ's reading thread or on the set's thread, one completion each, and must not
/// block; from them the application may call write() (never parking: a full set is
/// errc::would_block there).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

#include <remora/connection.hpp>
#include <remora/memory_region.hpp>
#include <remora/persistence.hpp>
#include <remora/remote_region.hpp>
#include <remora/result.hpp>

namespace remora {

/// A member of a replica set: a connection to a target and the target's region the set writes.
struct replica {
    connection* conn = nullptr;  ///< established, in the set's domain; not owned
    /// The target's region (usage::write_destination and usage::flush_target, and
    /// usage::read_source to be a source for rejoin()); copied.
    remote_region region{};
};

/// Where a member stands (replica_set::state).
enum class replica_state : std::uint8_t {
    live,         ///< written, and counted for the quorum
    dropped,      ///< out of the set: written no more, its connection closed
    catching_up,  ///< rejoin(): written again and copied into, not counted yet
};
/// "live", "dropped" or "catching_up".
const char* to_string(replica_state s) noexcept;

/// What a write did on one replica (replica_completion::outcome).
enum class replica_outcome : std::uint8_t {
    not_written,  ///< the replica was dropped when the write was posted
    pending,      ///< still in flight when the write completed
    durable,      ///< its flush completed: the bytes are durable (or visible) there
    failed,       ///< its write or flush failed, or it was dropped meanwhile
};

/// The most members a set has.
inline constexpr std::size_t max_replicas = 16;

/// A write's completion (replica_options::callback, replica_set::poll).
struct replica_completion {
    /// Empty: durable on at least the quorum. Otherwise the quorum became unreachable: the
    /// status of the replica failure that made it so (errc::disconnected, canceled, timed_out
    /// for one dropped behind, the provider's error, ...), or errc::bad_state when replicas were
    /// dropped without an error of an operation (drop()).
    std::error_code status;
    void* context = nullptr;     ///< replica_options::context
    std::uint64_t offset = 0;    ///< where the write went in the replicas' regions
    std::size_t length = 0;      ///< its bytes
    std::uint32_t durable = 0;   ///< replicas whose outcome is durable (counted or not)
    std::uint32_t replicas = 0;  ///< members of the set (outcome's entries in use)
    std::array<replica_outcome, max_replicas> outcome{};  ///< per member, by index
    bool ok() const noexcept { return !status; }          ///< status is empty
};

/// What happened to the set (replica_set_config::on_event).
enum class replica_event_kind : std::uint8_t {
    dropped,          ///< a member left the set (status: why)
    rejoined,         ///< a member caught up and counts again
    quorum_lost,      ///< fewer than the quorum are live: writes fail
    quorum_regained,  ///< the quorum is live again: writes are taken again
};
/// "dropped", "rejoined", "quorum_lost" or "quorum_regained".
const char* to_string(replica_event_kind k) noexcept;

/// An event of the set, reported once each.
struct replica_event {
    replica_event_kind kind = replica_event_kind::dropped;  ///< what happened
    /// The member dropped or rejoined; for quorum_lost and quorum_regained, the member whose drop
    /// or rejoin brought it.
    std::uint32_t index = 0;
    /// Why it was dropped (errc::bad_state for drop()); quorum_lost carries the drop's; empty
    /// otherwise.
    std::error_code status;
    void* context = nullptr;  ///< replica_set_config::event_context
};

/// How a set is formed.
struct replica_set_config {
    /// Durable replicas a write needs: 0 (default) all members; 1 any; members / 2 + 1 a
    /// majority. At most the members.
    std::uint32_t quorum = 0;
    /// Writes in flight (posted and not yet completed, or completed and not yet polled) at most:
    /// a further write is errc::would_block, or parks (replica_options::park_until). 1 to 4096.
    std::uint32_t depth = 16;
    /// What each replica's flush guarantees, and how (flush()): by default the strongest its
    /// region offers (durability for a persistent region).
    flush_options how{};
    /// A replica whose write or flush has waited this long is dropped (errc::timed_out). > 0.
    std::chrono::milliseconds behind_limit{5000};
    /// rejoin() copies in pieces of this many bytes through a buffer of the set's. > 0.
    std::size_t copy_chunk = std::size_t{1} << 20;
    /// Called once per replica_event (see Threading); may be null.
    void (*on_event)(const replica_event&) = nullptr;
    void* event_context = nullptr;  ///< replica_event::context
};

/// How a write is posted.
struct replica_options {
    void* context = nullptr;  ///< replica_completion::context
    /// Gets the completion (see Threading); null: replica_set::poll() returns it.
    void (*callback)(const replica_completion&) = nullptr;
    /// The clock's epoch (default): a full set refuses at once (errc::would_block). Otherwise
    /// the call waits for room until then (errc::timed_out), never from a callback. A write
    /// without a callback holds its place until poll() takes its completion: a thread that parks
    /// must not be the only one that polls.
    std::chrono::steady_clock::time_point park_until{};
};

/// How rejoin() brings a member back.
struct rejoin_options {
    /// Copy the whole range rather than what the set recorded since the member left: for a
    /// target that lost its memory, or another target in its place.
    bool whole = false;
};

/// Writes made durable on k of N targets. See the file's comment for the contract.
class replica_set {
  public:
    /// Forms a set of every member, all live.
    /// \param members 1 to max_replicas connections (established, open, one domain) and their
    ///                regions; the set spans the shortest region
    /// \param config  quorum, depth, flush, limits, events
    /// \return the set; errc::invalid_argument for no or too many members, a null or closed
    ///         connection, members of several domains, a quorum above the members, a depth or
    ///         limit out of range, a region without write_destination or flush_target;
    ///         errc::too_large when a member's queues cannot hold `depth` writes (the message
    ///         says what to raise); flush_method_for()'s error for a member whose region cannot
    ///         be flushed as `how` asks; memory_region::create's for the copy buffer
    static result<replica_set> create(std::span<const replica> members,
                                      const replica_set_config& config = {});
    replica_set(replica_set&&) noexcept;             ///< takes over the set
    replica_set& operator=(replica_set&&) noexcept;  ///< ends its own, takes another's
    /// Waits for every operation of the set to end (members' CQs must still be read), stops
    /// its thread. Completions not polled are dropped; callbacks still due run first.
    ~replica_set();

    /// Writes `length` bytes of `src` from src_offset to [offset, offset + length) of every
    /// live and catching-up replica, each followed by its flush; completes once (see
    /// replica_completion). The bytes of `src` must stay unchanged and registered until then.
    /// \return success once posted to every replica it goes to (a replica whose post fails is
    ///         dropped, and counts as failed); errc::invalid_argument for a zero length or
    ///         `src` of another domain; errc::access_denied for `src` without
    ///         usage::write_source; errc::out_of_range past the set's range or `src`;
    ///         errc::bad_state with fewer
    ///         live replicas than the quorum; errc::would_block when `depth` writes are in
    ///         flight (or errc::timed_out parked)
    result<void> write(std::uint64_t offset, const memory_region& src, std::size_t src_offset,
                       std::size_t length, replica_options opts = {});

    /// Up to out.size() completions of writes posted without a callback, oldest first.
    /// \return how many were written to `out`
    std::size_t poll(std::span<replica_completion> out);
    /// Waits until a completion can be polled, or `timeout`. \return whether one can
    bool wait(std::chrono::milliseconds timeout);
    /// Waits until no write is in flight: every one completed, its member operations ended and
    /// its callback returned (a completion left to poll() counts as delivered).
    /// \return success; errc::timed_out
    result<void> drain(std::chrono::milliseconds timeout);

    /// Drops member `index` (as for a failure, status errc::bad_state): for maintenance, or a
    /// target the application knows is gone. \return success; errc::invalid_argument for no
    /// such member; errc::bad_state when it is dropped already
    result<void> drop(std::size_t index);
    /// Brings dropped member `index` back over `conn` (a new connection to the same target, or
    /// to one in its place, in the set's domain) and `region`: it is written from now on, the
    /// ranges it missed (or the whole range, `how.whole`) are copied into it from a live
    /// replica by the set's thread while writes go on, and once nothing is left to copy it is
    /// live again (replica_event_kind::rejoined; state() says live). A failure while copying
    /// drops it again (replica_event_kind::dropped). Waits, up to behind_limit, for the
    /// operations on its old connection to end.
    /// \return success once it is catching up; errc::invalid_argument for no such member, or
    ///         `conn` or `region` as create() refuses them; errc::bad_state when the member is
    ///         not dropped, its old connection still has operations in flight, or no replica is
    ///         live to copy from
    result<void> rejoin(std::size_t index, connection& conn, const remote_region& region,
                        rejoin_options how = {});

    std::size_t size() const noexcept;             ///< members
    std::uint32_t quorum() const noexcept;         ///< durable replicas a write needs
    std::uint64_t range() const noexcept;          ///< bytes writable (the shortest region)
    std::size_t live() const noexcept;             ///< members live now
    replica_state state(std::size_t index) const;  ///< dropped for no such member
    std::size_t in_flight() const noexcept;        ///< writes not yet completed and delivered
    /// Operations of member `index` still in flight (its writes, flushes and copies).
    std::size_t pending(std::size_t index) const;
    /// Bytes member `index` is known to miss (recorded while dropped, or left to copy).
    std::uint64_t missing(std::size_t index) const;

  private:
    friend struct internal_access;
    struct impl;
    struct impl_deleter {
        void operator()(impl* p) const noexcept;
    };
    explicit replica_set(std::unique_ptr<impl, impl_deleter> p) noexcept;
    std::unique_ptr<impl, impl_deleter> impl_;
};

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/persistence.hpp — flush to visibility or durability, publish, and atomics through the
/// target's service: the persistence layer's verbs over a connection, and its configuration.
///
///     remora::connection_config cfg;
///     cfg.addons = {remora::persistence_config{.service_depth = 8}};  // GPSPM, service atomics
///     auto conn = remora::connection::connect(dom, host, port, cfg);
///     conn->write(dst, 0, mr, 0, n);
///     remora::flush(*conn, dst, 0, n);  // op::flush: the bytes are durable (persistent region)
///                                       // or visible (plain memory)
///
/// A connection without a persistence_config flushes by read-after-write only and has the
/// provider's native atomics only. The target side of GPSPM flushes and service atomics is a
/// target_service (target_service.hpp) serving the accepted connection, set up with a
/// persistence_config of at least the client's service_depth. A target that accepts with a
/// service_depth but never serves the connection is told apart from a slow one: the client's
/// requests fail with errc::bad_state after persistence_config::serve_wait (1 s by default),
/// not at service_timeout.
///
/// Every verb here is an operation of the connection: it checks its arguments before anything is
/// posted, takes its queue entries (and connection_config::slots units) at post, completes on the
/// connection's CQs with op_options::context, and counts in connection::in_flight(); what
/// connection.hpp states of operations holds here. Threading: as the connection's posts.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <remora/connection.hpp>
#include <remora/memory_region.hpp>
#include <remora/op_options.hpp>
#include <remora/remote_region.hpp>
#include <remora/result.hpp>

namespace remora {

/// The persistence layer's part of a connection's setup: an entry of connection_config::addons.
struct persistence_config {
    /// Requests to (client) or from (target) the target's service in flight: GPSPM flushes and
    /// service atomics (see target_service.hpp). 0: none. Set it on both sides; the target's must
    /// be at least the client's. The service's messages get queue entries of their own (the
    /// send queue grows by service_depth + 1, receives are sized to it: the one more is for the
    /// hello, see serve_wait). Without message_size, a connection with a service depth carries
    /// only the service's messages: send and recv are refused (errc::bad_state). It cannot take
    /// a shared_receive_queue. Past the provider's queues or remora's bound of a queue:
    /// errc::too_large at setup.
    std::uint32_t service_depth = 0;
    /// With a service_depth: the longest message of the application's own (send, recv) that
    /// the connection also carries; 0 (default): none, send and recv are refused. Set the same
    /// value on both sides: each side's send marks the application's messages and the other
    /// side's receives tell them from the service's by that mark, so a message of the
    /// application never reaches the service and a service message never reaches the
    /// application's receives.
    ///
    /// What it costs: every receive the provider holds on the connection is then the
    /// library's, service_depth + 1 for the service and 2 x rq_size for the application (its
    /// receives, and as many again for its messages that arrive before it posts a receive),
    /// each max(message_size + 8, 256) bytes, registered at the connection's first message;
    /// config().rq_size reports their count (the CQ or RCQ holds as many entries). The
    /// application's recv posts nothing: it takes one of rq_size receives of the application
    /// (errc::would_block past them; no connection_config::slots units; errc::bad_state before
    /// the connection is established) and completes, on the CQ or RCQ with op::recv, the bytes,
    /// its immediate data and op_options::context, once a message of the application's is
    /// copied into it, in the order the messages came (a longer message than its segments
    /// hold: errc::too_large, its first bytes copied). Up to rq_size messages that arrive with
    /// no receive of the application's waiting are kept until receives are posted, which then
    /// complete through entries the library frees for them (canceled receives of its own). A
    /// message that arrives when rq_size of them wait already is dropped, and the receive that
    /// would have taken it completes with errc::would_block and no bytes in its place, in the
    /// same order: a peer's application should not send further ahead of this side's receives
    /// (a verbs peer would see receiver-not-ready). The service's messages go on meanwhile.
    /// Each send of the application takes one segment more than its own (an 8-byte mark:
    /// max_sge must leave one free, errc::too_large at setup) and its usual send-queue entry;
    /// copied sends (send_copy) are refused (errc::not_supported), as a send longer than
    /// message_size (errc::too_large). When the connection ends (close(), the peer's end), each
    /// receive of the application's still waiting completes once, with the connection's error.
    std::uint32_t message_size = 0;
    /// Client side of the target's service: a GPSPM flush or service atomic whose reply has not
    /// come service_timeout after its post completes with errc::timed_out, and its queue entries
    /// and request entry come back (in_flight() drops); a reply that comes later is ignored. The
    /// target may or may not have executed it (a flush's data may or may not be durable; an atomic
    /// may or may not have changed the word): treat the connection as suspect. Noticed while the
    /// connection's CQ is read or waited on (a wait wakes for it) or by its progress thread's
    /// reads; must be > 0 (errc::invalid_argument at setup).
    std::chrono::milliseconds service_timeout{30000};
    /// Client side: how long the target has to show that it serves the connection. With the
    /// connection's first service request the client also sends a hello, whose reply has a
    /// receive of its own; a target that serves the connection (target_service::serve, on the
    /// thread that reads its CQs) answers it at once. When neither the hello nor any request has
    /// been answered serve_wait after the hello was sent, the target accepted the service but
    /// does not serve it: the requests in flight complete with errc::bad_state (their queue
    /// entries come back, in_flight() drops; a line at log_level::warning says why), and new
    /// ones are refused with errc::bad_state and a message saying so, until a reply comes after
    /// all (a target that serves late: requests work again). The hello is sent once per
    /// connection, is not counted in in_flight() and takes no request of service_depth (the
    /// service's queues have one entry more for it), so later requests cost no more than
    /// without it. Its reply is read where receives complete, like every reply: a client that
    /// leaves its RCQ unread past serve_wait is told the target does not serve. A wait longer
    /// than service_timeout acts at service_timeout. 0: no hello and no check (an unserved
    /// target's requests end only at service_timeout); negative: errc::invalid_argument at
    /// setup.
    std::chrono::milliseconds serve_wait{1000};

    /// As an entry of connection_config::addons (`cfg.addons = {pcfg}`). Allocates.
    operator std::shared_ptr<const connection_addon>() const;
};

/// The persistence_config `conn` was set up with (the default, service_depth 0, when none).
persistence_config persistence_config_of(const connection& conn);

/// What a flush guarantees on completion (flush_options::type).
enum class flush_type : std::uint8_t {
    visibility,   ///< the target's memory holds the written bytes
    persistence,  ///< ... and they are durable (the region must be persistent)
    /// The default: the strongest the descriptor offers. persistence when it states
    /// persistence::persistent (a persistent region's descriptor: never silently weakened to
    /// visibility), visibility otherwise (plain memory), so `flush(desc, 0, n)` works on both.
    strongest,
};

/// How a flush reaches its guarantee (flush_options::method).
enum class flush_method : std::uint8_t {
    automatic,         ///< the cheapest the region offers for the type (see flush())
    read_after_write,  ///< an 8-byte read after the writes (APM)
    gpspm,             ///< a flush request answered by the target's service once it persisted
};
/// "automatic", "read_after_write" or "gpspm".
const char* to_string(flush_method m) noexcept;

/// What flush() (and publish()) guarantees, and how.
struct flush_options {
    flush_type type = flush_type::strongest;        ///< visibility, persistence or the strongest
    flush_method method = flush_method::automatic;  ///< the cheapest the region offers, or one
};

/// How a connection's atomics reach the target (atomics()).
enum class atomic_path : std::uint8_t {
    native,   ///< the provider's atomics (caps().native_atomics)
    service,  ///< a request to the target's service (a provider without native atomics, a
              ///< connection with a service_depth)
    none,     ///< neither: atomics are refused with errc::not_supported
};
/// "native", "service" or "none".
const char* to_string(atomic_path p) noexcept;

/// Completes (op::flush) once the connection's earlier writes to [offset, offset + length) of
/// `dst` are visible, or durable, by the method's guarantee. The descriptor must grant
/// usage::flush_target; for persistence it must come from a persistent region (asked
/// explicitly of any other, errc::not_supported). The default type, flush_type::strongest,
/// persists a persistent region's range and makes a plain region's range visible.
/// flush_method::automatic picks, for visibility, read-after-write; for persistence,
/// read-after-write where the target declared placed writes durable (persistence::apm), else
/// GPSPM where its service persists (persistence::gpspm, and the connection has a
/// service_depth). errc::not_supported names what is missing. GPSPM flushes (and service
/// atomics) complete where their reply arrives: on the RCQ when the connection has one; the
/// request's own send completion is read from the CQ and holds the request's entry (one of
/// service_depth) until then, so read both queues.
/// \param conn   the connection that wrote the range
/// \param dst    the peer's region (usage::flush_target)
/// \param offset where the range starts in `dst`
/// \param length its bytes
/// \param how    the type and method (flush_options)
/// \param opts   context, callback, reporting, parking (op_options)
/// \return success once posted; errc::not_supported naming what is missing; the errors of
///         every operation (see connection)
result<void> flush(connection& conn, const remote_region& dst, std::uint64_t offset,
                   std::uint64_t length, flush_options how = {}, op_options opts = {});
/// The method flush() would use on `conn` (automatic resolved), or why none can.
/// \return the method; errc::not_supported naming what is missing; errc::invalid_argument for
///         an unknown type or method
result<flush_method> flush_method_for(const connection& conn, const remote_region& dst,
                                      flush_options how = {});

/// Native where the provider has atomics (as connection::atomic_write, compare_swap,
/// fetch_add); otherwise through the target's service when the connection has a service_depth
/// (ordered after the connection's earlier writes, atomic with respect to every other service
/// atomic); otherwise errc::not_supported. atomics() says which. compare_swap and fetch_add
/// write the word's previous value into `result` (8 bytes at result_offset,
/// usage::read_destination) before they complete. Each completes as op::atomic.
/// \param conn       the connection
/// \param dst        the peer's region (usage::atomic_target)
/// \param dst_offset the word's offset in `dst` (its address 8-byte aligned)
/// \param value      the value written
/// \param opts       context, callback, reporting (op_options)
/// \return success once posted; connection::atomic_write's errors; errc::not_supported when
///         atomics() is atomic_path::none
result<void> atomic_write(connection& conn, const remote_region& dst, std::uint64_t dst_offset,
                          std::uint64_t value, op_options opts = {});
/// connection::compare_swap, native or through the target's service (see atomic_write()).
/// \return success once posted; as atomic_write()
result<void> compare_swap(connection& conn, const remote_region& dst, std::uint64_t dst_offset,
                          std::uint64_t expected, std::uint64_t desired,
                          const memory_region& result, std::size_t result_offset,
                          op_options opts = {});
/// connection::fetch_add, native or through the target's service (see atomic_write()).
/// \return success once posted; as atomic_write()
result<void> fetch_add(connection& conn, const remote_region& dst, std::uint64_t dst_offset,
                       std::uint64_t addend, const memory_region& result, std::size_t result_offset,
                       op_options opts = {});
/// How `conn`'s atomics reach the target: native, through the service, or none.
atomic_path atomics(const connection& conn) noexcept;

/// Write + flush + atomic publish, reserved together. Writes the local range of `src` from
/// src_offset into the remote segments (as connection::gather_write: part i carries
/// data[i].length bytes), flushes them (flush() with `how`, on the smallest range covering every
/// segment), and then writes `value` into the 8-byte aligned word at flag_offset of `flag`
/// (atomic_write(): native or through the target's service, atomics()). The word is the
/// publication: a reader that sees `value` there sees the data, as flushed. Every segment must
/// lie in one remote region (one descriptor's key and address: the flush names one range),
/// granting usage::write_destination and usage::flush_target; `flag` must grant
/// usage::atomic_target (it may be another region).
///
/// Parts, in order: 0 .. data.size() - 1 the writes, data.size() the flush, data.size() + 1
/// the atomic. Everything is checked before anything is taken (write()'s, flush()'s and
/// atomic_write()'s errors, the part named; invalid_argument for segments in different
/// regions or completion_mode::at_post; too_large as gather_write, counting the flush and a
/// native atomic as send-queue entries). Reservation is one all-or-nothing step: a send-queue
/// entry (with its CQ entry and {sq 1, cq 1} units of connection_config::slots) for each write,
/// for a read-after-write flush and for a native atomic, and a request of the target's service
/// (service_depth) for a GPSPM flush and for a service atomic; or nothing (errc::would_block,
/// or the budget's error). op_options::park_until parks for all of it at once, park_mode::queue
/// queues it (the segment list and both descriptors are copied), like gather_write.
///
/// Ordering: the writes and the flush are posted at once, in that order (the flush is
/// ordered behind the writes as flush() is); the atomic is posted only once the writes and
/// the flush have all completed successfully, by the thread that reads the last of those
/// completions (inside the library's completion handling: no thread waits). So the word
/// never changes before the data is visible (or durable) at the target: no fence is needed
/// from the provider. If a write or the flush fails, the atomic is never posted.
///
/// Completes once, as op::publish with `bytes` the data's total, when the atomic completes
/// (or when the first phase ends in a failure): success when every part succeeded,
/// otherwise the status of the lowest-index part that failed, in completion::failed_part
/// (a part never posted because an earlier one failed does not count). If a write's or the
/// flush's post fails, the call returns that error, naming the part, and the operation
/// reports nothing more (parts already posted complete silently). Allocates one small record
/// per operation. The flag word itself is not flushed: flush it afterwards if it must be
/// durable. Threading: as any post.
/// \param conn        the connection
/// \param data        the remote segments the data goes to, all in one region
/// \param src         the registered local data (usage::write_source)
/// \param src_offset  where part 0's bytes start in `src`
/// \param flag        the region holding the publication word (usage::atomic_target)
/// \param flag_offset the word's offset in `flag` (8-byte aligned)
/// \param value       the value the word takes once the data is flushed
/// \param how         the flush's type and method
/// \param opts        context, callback, parking (op_options)
/// \return success once the writes and the flush are posted; the errors above
result<void> publish(connection& conn, std::span<const remote_segment> data,
                     const memory_region& src, std::size_t src_offset, const remote_region& flag,
                     std::uint64_t flag_offset, std::uint64_t value, flush_options how = {},
                     op_options opts = {});

}  // namespace remora

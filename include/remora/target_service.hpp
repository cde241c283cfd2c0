// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/target_service.hpp — the target side of GPSPM flushes and service atomics
/// (target_service).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

#include <remora/connection.hpp>
#include <remora/memory_region.hpp>
#include <remora/persistent_region.hpp>
#include <remora/remote_region.hpp>
#include <remora/result.hpp>

namespace remora {

/// The target side of GPSPM flushes and service atomics.
///
/// A target_service answers requests that one-sided operations cannot do on every provider:
///  - flush (GPSPM): persist a range of an exposed persistent region (msync), then reply — the
///    request arrives after the connection's earlier writes, so they are covered;
///  - atomic_write, compare_swap, fetch_add on an 8-byte aligned word of an exposed region, for
///    providers without native atomics. They are atomic with respect to each other (CPU
///    atomics on the target's memory, across all connections) and ordered after the connection's
///    earlier writes.
/// Every request is validated against the region (key, range, alignment, usage, persistence);
/// a bad one gets an error reply (the client's operation fails with that errc), never a crash.
///
/// Requests are answered on the thread that reads the served connection's CQs: the library's
/// progress thread when the connection was accepted with connection_config::progress_thread (the
/// application may then sleep), otherwise the application's own poll/wait loop. A request arrives
/// where receives complete (the RCQ if the connection has one) and its receive is posted again
/// when the reply's send completes on the CQ: without a progress thread, read both. A reply the
/// provider refuses (twice) or fails to send is lost, and its receive is posted again at once, so
/// the service keeps its depth; the client's request then completes (with an error) only when its
/// connection ends. A persist
/// (msync) runs on that thread, so a large GPSPM flush delays the others it serves.
///
/// \par Threading
/// Expose() and serve() may run concurrently with requests being answered. Exposed
/// regions must outlive the service and every connection it serves.
///
///     auto svc = remora::target_service::create();
///     auto desc = svc->expose(*pmem);  // send desc->serialize() to the client
///     remora::connection_config cfg;
///     cfg.addons = {remora::persistence_config{.service_depth = 8}};
///     cfg.progress_thread = true;
///     auto conn = req->accept(cfg, desc->serialize());
///     svc->serve(*conn);
///
/// \see flush_persistent.cpp, cas_lock.cpp
class target_service {
  public:
    /// A service with no region exposed.
    /// \return the service
    static result<target_service> create();
    target_service(target_service&&) noexcept;             ///< takes over the service
    target_service& operator=(target_service&&) noexcept;  ///< withdraws its own, takes another's
    /// Withdraws every exposed region: requests on connections still served are refused from
    /// then on (error replies), and persistent regions no longer state GPSPM when described.
    ~target_service();

    /// Lets peers flush (GPSPM) and run service atomics on `region`.
    /// \return its descriptor, which states persistence::gpspm for a persistent region;
    ///         errc::bad_state when the region is exposed already; memory_region::describe's
    ///         errors
    result<remote_region> expose(const persistent_region& region);
    /// The same for plain registered memory: service atomics and visibility flushes only.
    /// \return its descriptor; as the other overload's
    result<remote_region> expose(const memory_region& region);

    /// Answers `conn`'s service messages from now on: posts its service_depth (persistence.hpp)
    /// receives, and one more for the client's hello, which it answers at once. Call it on every
    /// connection accepted with a service_depth, soon after the accept: a client whose hello
    /// is not answered within its persistence_config::serve_wait (1 s by default) fails its
    /// requests with errc::bad_state, saying the target does not serve (and recovers once this
    /// is called after all). errc::invalid_argument without a service depth; errc::bad_state
    /// when the connection already serves or calls a service.
    /// \return success once its receives are posted, or one of the errors above
    result<void> serve(connection& conn);
    /// The same, but `conn` may name only the `grants` (descriptors this service's expose()
    /// returned): a request for any other exposed region is refused with errc::access_denied,
    /// as for an unknown key. Per-client access: expose a read-only and a read-write
    /// registration of the same memory, hand each peer the descriptor of its role and serve it
    /// with that grant; what a request may do is still bounded by the region's usage (a
    /// read_source-only registration refuses flushes and atomics). errc::invalid_argument when
    /// a grant is not exposed here (nothing changes).
    /// \return success, or serve(conn)'s errors and the one above
    result<void> serve(connection& conn, std::span<const remote_region> grants);

    std::uint64_t requests() const noexcept;  ///< answered so far
    std::uint64_t refused() const noexcept;   ///< of which with an error
    /// Requests answered on `conn` (0 when this service does not serve it). A target cannot see
    /// one-sided reads and writes: this counts only what reaches the service (flushes, service
    /// atomics), e.g. to evict idle clients. May run concurrently with requests being answered.
    std::uint64_t requests(const connection& conn) const;
    /// How long the oldest reply on `conn` has waited for the peer to take it (its send not yet
    /// complete; zero when none waits). A peer that stops posting receives for its replies, or
    /// stops reading its socket (hung, stopped), shows here as a wait that only grows: close such
    /// a connection (remora serve does after --reply-timeout). Zero when this service does not
    /// serve `conn`. May run concurrently with requests being answered.
    std::chrono::milliseconds reply_wait(const connection& conn) const;

  private:
    friend struct internal_access;
    struct impl;
    explicit target_service(std::shared_ptr<impl> p) noexcept;
    void withdraw() noexcept;
    result<void> serve_impl(connection& conn, const std::span<const remote_region>* grants);
    std::shared_ptr<impl> impl_;
};

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/target_service.hpp — the target side of GPSPM flushes and service atomics.
///
/// A target_service answers requests that one-sided operations cannot do on every provider:
///  - flush (GPSPM): persist a range of an exposed persistent region (msync), then reply — the
///    request arrives after the connection's earlier writes, so they are covered;
///  - atomic_write, compare_swap, fetch_add on an 8-byte aligned word of an exposed region, for
///    providers without native atomics (tcp). They are atomic with respect to each other (CPU
///    atomics on the target's memory, across all connections) and ordered after the connection's
///    earlier writes.
/// Every request is validated against the region (key, range, alignment, usage, persistence);
/// a bad one gets an error reply (the client's operation fails with that errc), never a crash.
///
/// Requests are answered on the thread that reads the served connection's CQs: the library's
/// progress thread when the connection was accepted with connection_config::progress_thread (the
/// application may then sleep), otherwise the application's own poll/wait loop. A request arrives
/// where receives complete (the RCQ if the connection has one) and its receive is posted again
/// when the reply's send completes on the CQ: without a progress thread, read both. A persist
/// (msync) runs on that thread, so a large GPSPM flush delays the others it serves.
///
/// Threading: expose() and serve() may run concurrently with requests being answered. Exposed
/// regions must outlive the service and every connection it serves.
#pragma once

#include <cstdint>
#include <memory>

#include <remora/connection.hpp>
#include <remora/memory_region.hpp>
#include <remora/persistent_region.hpp>
#include <remora/remote_region.hpp>
#include <remora/result.hpp>

namespace remora {

namespace detail {
struct service_core;
}

class target_service {
  public:
    [[nodiscard]] static result<target_service> create();
    target_service(target_service&&) noexcept;
    target_service& operator=(target_service&&) noexcept;
    ~target_service();

    /// Lets peers flush (GPSPM) and run service atomics on `region`. Returns its descriptor,
    /// which states persistence::gpspm for a persistent region.
    [[nodiscard]] result<remote_region> expose(const persistent_region& region);
    /// The same for plain registered memory: service atomics and visibility flushes only.
    [[nodiscard]] result<remote_region> expose(const memory_region& region);

    /// Answers `conn`'s service messages from now on: posts conn.config().service_depth
    /// receives. errc::invalid_argument without a service depth; errc::bad_state when the
    /// connection already serves or calls a service.
    [[nodiscard]] result<void> serve(connection& conn);

    [[nodiscard]] std::uint64_t requests() const noexcept;  ///< answered so far
    [[nodiscard]] std::uint64_t refused() const noexcept;   ///< of which with an error

  private:
    explicit target_service(std::shared_ptr<detail::service_core> core);
    void withdraw() noexcept;
    std::shared_ptr<detail::service_core> core_;
};

}  // namespace remora

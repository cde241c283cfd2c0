// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/listener.hpp — accepting connections.
///
/// A listener binds host:port (port 0 picks a free port; port() reports it) and yields incoming
/// connection requests. A request carries the peer's private data, which the server reads before
/// it accepts (with private data of its own) or rejects (likewise; a reject carries at most
/// caps().cm_data_size - 1 bytes: remora marks its rejects with one byte so the client can tell a
/// rejection from nobody listening). A request dropped without either is rejected.
///
/// Threading: one thread at a time calls get_request(); requests may be accepted on any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <remora/connection.hpp>
#include <remora/domain.hpp>
#include <remora/result.hpp>

namespace remora {

class connection_request {
  public:
    connection_request(connection_request&&) noexcept;
    connection_request& operator=(connection_request&&) noexcept;
    ~connection_request();

    std::span<const std::byte> private_data() const noexcept;
    /// Accepts and waits (up to config.connect_timeout) until the connection is established.
    /// An invalid config fails the accept and rejects the request (the client's connect fails
    /// with errc::rejected); private data over the limit (errc::too_large) leaves it answerable.
    result<connection> accept(const connection_config& config = {},
                              std::span<const std::byte> private_data = {});
    /// Accepts and returns at once: the connection is being set up (see connection::connect_async
    /// for the events, the errors, the receives kept until established and the deadline). Post
    /// receives before the client's first message can arrive by posting them right here, before
    /// waiting for conn_event::established. Errors before the accept is sent are accept()'s.
    result<connection> accept_async(const connection_config& config = {},
                                    std::span<const std::byte> private_data = {});
    result<void> reject(std::span<const std::byte> private_data = {});

  private:
    friend struct internal_access;
    struct impl;
    struct impl_deleter {
        void operator()(impl* p) const noexcept;
    };
    explicit connection_request(std::unique_ptr<impl, impl_deleter> p) noexcept;
    std::unique_ptr<impl, impl_deleter> impl_;
};

class listener {
  public:
    static result<listener> create(const domain& dom, const std::string& host, std::uint16_t port);
    listener(listener&&) noexcept;
    listener& operator=(listener&&) noexcept;
    ~listener();

    std::uint16_t port() const noexcept;
    int fd() const noexcept;  ///< readable when a request may be waiting
    /// The next connection request, or errc::timed_out.
    result<connection_request> get_request(std::chrono::milliseconds timeout);

    /// Bounds TCP connects that never send a byte (port scanners, floods): the kernel hands the
    /// provider a connection only once its first data arrived (TCP_DEFER_ACCEPT on the
    /// provider's listening socket), and drops one that stays silent for about `silent` (rounded
    /// up to seconds; the kernel retries its SYN-ACK meanwhile). Such connects then hold no file
    /// descriptor and no provider state in this process. Every remora client sends its
    /// connection request at once, so it is not delayed. Socket providers only (tcp, sockets):
    /// errc::not_supported when no listening TCP socket of this listener's port is found in this
    /// process; errc::invalid_argument for a zero duration. Call it before connects arrive;
    /// not concurrently with get_request().
    result<void> defer_silent_connects(std::chrono::milliseconds silent);
    /// The kernel hands a deferred connect over anyway once its SYN-ACK retries are spent, and
    /// the provider then holds it (an fd, forever: tcp and sockets have no timeout for a
    /// connection request that never arrives). This shuts down (SHUT_RDWR, so the provider sees
    /// the end and frees it) every TCP connection accepted on this listener's port that has
    /// received no byte at all for at least `silent`. Connections that sent anything (every
    /// remora client) are left alone. Returns how many it shut down; errc::not_supported as
    /// above. Call it periodically (e.g. once a second) from the thread that owns the listener.
    result<std::size_t> drop_silent_connects(std::chrono::milliseconds silent);

  private:
    friend struct internal_access;
    struct impl;
    explicit listener(std::shared_ptr<impl> p) noexcept;
    std::shared_ptr<impl> impl_;
};

}  // namespace remora

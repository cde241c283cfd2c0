// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/listener.hpp — accepting connections: listener, and the connection_request it yields.
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

/// A peer's request to connect, from listener::get_request: read its private data, then
/// accept() or reject() it, once.
///
/// Move-only. A request destroyed without an answer is rejected. See listener.
class connection_request {
  public:
    connection_request(connection_request&&) noexcept;             ///< takes over the request
    connection_request& operator=(connection_request&&) noexcept;  ///< takes over the request
    ~connection_request();  ///< rejects the request if it was not answered

    /// The bytes the client sent with its request (connection::connect's private_data).
    std::span<const std::byte> private_data() const noexcept;
    /// Accepts and waits (up to config.connect_timeout) until the connection is established.
    /// An invalid config fails the accept and rejects the request (the client's connect fails
    /// with errc::rejected); private data over the limit (errc::too_large) leaves it answerable.
    /// \param config       the accepted connection's configuration (as connection::connect's)
    /// \param private_data sent to the client with the accept (at most caps().cm_data_size)
    /// \return the established connection; errc::too_large for private data over the limit;
    ///         errc::bad_state when the request was answered already; errc::timed_out when it
    ///         is not established within config.connect_timeout; the configuration's error
    ///         (as connection::connect's) or the provider's
    result<connection> accept(const connection_config& config = {},
                              std::span<const std::byte> private_data = {});
    /// Accepts and returns at once: the connection is being set up (see connection::connect_async
    /// for the events, the errors, the receives kept until established and the deadline). Post
    /// receives before the client's first message can arrive by posting them right here, before
    /// waiting for conn_event::established. Errors before the accept is sent are accept()'s.
    result<connection> accept_async(const connection_config& config = {},
                                    std::span<const std::byte> private_data = {});
    /// Rejects the request; the client's connect fails with errc::rejected and these bytes in
    /// error::data().
    /// \param private_data at most caps().cm_data_size - 1 bytes (remora marks its rejects with
    ///                     one byte)
    /// \return success; errc::too_large for private data over the limit; errc::bad_state when
    ///         the request was answered already; the provider's error
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

/// Accepts connections: binds host:port and yields the peers' connection requests.
///
/// A listener binds host:port (port 0 picks a free port; port() reports it) and yields incoming
/// connection requests. A request carries the peer's private data, which the server reads before
/// it accepts (with private data of its own) or rejects (likewise; a reject carries at most
/// caps().cm_data_size - 1 bytes: remora marks its rejects with one byte so the client can tell a
/// rejection from nobody listening). A request dropped without either is rejected.
///
/// \par Threading
/// One thread at a time calls get_request(); requests may be accepted on any thread.
///
///     auto lis = remora::listener::create(dom, "127.0.0.1", 0);  // lis->port(): the port picked
///     auto req = lis->get_request(std::chrono::seconds(10));
///     auto conn = req->accept({}, desc_bytes);  // e.g. a region's serialised descriptor
///
/// \see connection.cpp, write.cpp
class listener {
  public:
    /// Binds host:port and listens.
    /// \param dom  a domain opened for endpoint_type::msg
    /// \param host the local address to bind
    /// \param port the port; 0 picks a free one (port() reports it)
    /// \return the listener; errc::not_supported on an RDM domain; errc::bad_state for an
    ///         empty domain handle; errc::unreachable when the provider cannot use host:port;
    ///         the provider's error when binding or listening fails (e.g.\ the port is taken)
    static result<listener> create(const domain& dom, const std::string& host, std::uint16_t port);
    listener(listener&&) noexcept;             ///< takes over the listening endpoint
    listener& operator=(listener&&) noexcept;  ///< closes its own, takes over another's
    ~listener();                               ///< stops listening

    std::uint16_t port() const noexcept;  ///< the bound port (the one picked for port 0)
    int fd() const noexcept;              ///< readable when a request may be waiting
    /// The next connection request.
    /// \param timeout the longest it waits
    /// \return the request (answer it with accept() or reject()); errc::timed_out; the
    ///         provider's error
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

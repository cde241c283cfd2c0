// remora/listener.hpp — accepting connections.
//
// A listener binds host:port (port 0 picks a free port; port() reports it) and yields incoming
// connection requests. A request carries the peer's private data, which the server reads before
// it accepts (with private data of its own) or rejects (likewise; a reject carries at most
// caps().cm_data_size - 1 bytes: remora marks its rejects with one byte so the client can tell a
// rejection from nobody listening). A request dropped without either is rejected.
//
// Threading: one thread at a time calls get_request(); requests may be accepted on any thread.
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

namespace detail {
struct listener_impl;
struct request_impl;
}  // namespace detail

class connection_request {
  public:
    connection_request(connection_request&&) noexcept;
    connection_request& operator=(connection_request&&) noexcept;
    ~connection_request();

    [[nodiscard]] std::span<const std::byte> private_data() const noexcept;
    // Accepts and waits (up to config.connect_timeout) until the connection is established.
    // An invalid config fails the accept and rejects the request (the client's connect fails
    // with errc::rejected); private data over the limit (errc::too_large) leaves it answerable.
    [[nodiscard]] result<connection> accept(const connection_config& config = {},
                                            std::span<const std::byte> private_data = {});
    // Accepts and returns at once: the connection is being set up (see connection::connect_async
    // for the events, the errors, the receives kept until established and the deadline). Post
    // receives before the client's first message can arrive by posting them right here, before
    // waiting for conn_event::established. Errors before the accept is sent are accept()'s.
    [[nodiscard]] result<connection> accept_async(const connection_config& config = {},
                                                  std::span<const std::byte> private_data = {});
    result<void> reject(std::span<const std::byte> private_data = {});

    explicit connection_request(std::unique_ptr<detail::request_impl> impl);

  private:
    std::unique_ptr<detail::request_impl> impl_;
};

class listener {
  public:
    [[nodiscard]] static result<listener> create(const domain& dom, const std::string& host,
                                                 std::uint16_t port);
    listener(listener&&) noexcept;
    listener& operator=(listener&&) noexcept;
    ~listener();

    [[nodiscard]] std::uint16_t port() const noexcept;
    [[nodiscard]] int fd() const noexcept;  // readable when a request may be waiting
    // The next connection request, or errc::timed_out.
    [[nodiscard]] result<connection_request> get_request(std::chrono::milliseconds timeout);

  private:
    explicit listener(std::shared_ptr<detail::listener_impl> impl);
    std::shared_ptr<detail::listener_impl> impl_;
};

}  // namespace remora

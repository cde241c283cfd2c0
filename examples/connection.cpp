// SPDX-License-Identifier: BSD-3-Clause
// examples/connection — connect, exchange private data, close, and watch the connection events.
//
// A server (on its own thread here) listens on 127.0.0.1 with port 0 (the system picks a free
// port). The client connects and sends a few bytes of private data with its request. The server
// reads them *before* it decides to accept, and accepts with private data of its own, which the
// client reads once connect() returns. Then the client closes, and both sides see
// conn_event::closed from next_event() (which, while the connection is up, just times out).
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <string>
#include <string_view>

#include <remora/remora.hpp>

#include "example_common.hpp"

namespace {

using namespace std::chrono_literals;
using example::bytes_of;
using example::die;
using example::must;
using example::text_of;

constexpr std::string_view client_hello = "hello from the client";
constexpr std::string_view server_hello = "welcome from the server";

// The server: accepts one connection and follows it until the client closes.
void run_server(std::promise<std::uint16_t>& port, std::promise<void>& checked) {
    auto dom = must(remora::domain::open(), "server: open domain");
    auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
    port.set_value(lst.port());

    // A request carries the client's private data; look at it before deciding.
    auto req = must(lst.get_request(10s), "server: get_request");
    const std::string hello = text_of(req.private_data());
    std::printf("server: connection request with private data \"%s\"\n", hello.c_str());
    if (hello != client_hello) {
        (void)req.reject(bytes_of("who are you?"));  // the client would get errc::rejected
        die("server: unexpected private data \"" + hello + "\"");
    }

    // Accept, answering with our own private data. accept() returns once established.
    auto conn = must(req.accept({}, bytes_of(server_hello)), "server: accept");
    std::printf("server: established (peer_private_data() keeps \"%s\")\n",
                text_of(conn.peer_private_data()).c_str());

    // While the connection is up there is no event: next_event times out.
    auto quiet = conn.next_event(100ms);
    if (quiet || !(quiet.error() == remora::errc::timed_out)) {
        die("server: expected no connection event while connected");
    }
    std::printf("server: next_event(100ms) -> timed out (connection still up)\n");
    checked.set_value();  // tell the client it may close now

    // The client's close arrives as conn_event::closed.
    auto ev = must(conn.next_event(10s), "server: next_event");
    std::printf("server: next_event -> %s\n", remora::to_string(ev));
    if (ev != remora::conn_event::closed) {
        die(std::string("server: expected closed, got ") + remora::to_string(ev));
    }
    if (conn.is_open()) {
        die("server: connection still open after the closed event");
    }
    must(conn.close(), "server: close");  // idempotent: already closed by the peer
}

}  // namespace

int main() {
    example::program_name = "example_connection";
    // The client's own domain; domain_config{} picks FI_PROVIDER or remora's default.
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s\n", dom.caps().provider.c_str());
    if (client_hello.size() > dom.caps().cm_data_size) {
        die("the provider allows only " + std::to_string(dom.caps().cm_data_size) +
            " bytes of private data");
    }

    std::promise<void> checked;
    example::server_thread server(run_server, std::ref(checked));
    const std::uint16_t p = server.port();

    auto conn = must(remora::connection::connect(dom, "127.0.0.1", p, {}, bytes_of(client_hello)),
                     "client: connect");
    const std::string answer = text_of(conn.peer_private_data());
    std::printf("client: connected to 127.0.0.1:%u, server answered \"%s\"\n",
                static_cast<unsigned>(p), answer.c_str());
    if (answer != server_hello) {
        die("client: unexpected private data \"" + answer + "\"");
    }

    // Wait until the server has looked at its (quiet) connection, then close.
    checked.get_future().get();
    must(conn.close(), "client: close");
    std::printf("client: closed (is_open() = %s)\n", conn.is_open() ? "true" : "false");
    // The closing side gets the event too: conn_event::closed means "the peer or this side".
    auto ev = must(conn.next_event(10s), "client: next_event");
    std::printf("client: next_event -> %s\n", remora::to_string(ev));
    if (ev != remora::conn_event::closed) {
        die(std::string("client: expected closed, got ") + remora::to_string(ev));
    }

    server.join();
    std::printf("connection: ok\n");
    return 0;
}

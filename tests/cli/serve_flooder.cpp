// SPDX-License-Identifier: BSD-3-Clause
// serve_flooder: a misbehaving client of `remora serve` for tests/cli/serve_reap.sh. It is
// admitted with a key, then sends service requests (flushes of its region) as fast as the target
// takes them for SECONDS, and never posts a receive for their replies. Then, by MODE:
//   exit   it exits at once (_exit: no close, no shutdown of its connection);
//   stop   it stops itself (SIGSTOP) with the connection open, until killed; it stops as soon
//          as the target has taken nothing for 500 ms (backed up: a reply waits), or at SECONDS.
//
//   serve_flooder PROVIDER HOST:PORT KEYFILE SECONDS MODE
// Prints "sent N" (", the target backed up" when it did) on stderr before it exits or stops. Exit
// status 2 when it cannot connect.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <remora/remora.hpp>

#include "persist/persist_impl.hpp"
#include "serve.hpp"

using namespace remora;

int main(int argc, char** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: serve_flooder PROVIDER HOST:PORT KEYFILE SECONDS exit|stop\n");
        return 2;
    }
    const std::string provider = argv[1];
    const std::string mode = argv[5];
    const auto hp = tool::split_address(argv[2]);
    auto key = admission_key::load(argv[3]);
    if (!hp || !key) {
        std::fprintf(stderr, "serve_flooder: bad address or key\n");
        return 2;
    }
    auto dom = domain::open({.provider = provider});
    if (!dom) {
        std::fprintf(stderr, "serve_flooder: %s\n", dom.error().what().c_str());
        return 2;
    }
    // A service depth asked of the target, none of its own: no reply receive is ever posted.
    const auto want = tool::make_depth_request(64);  // serve's default --depth, the most
    auto conn =
        connect_admitted(*dom, hp->first, hp->second, *key, "flooder", {.sq_size = 1024}, want);
    if (!conn) {
        std::fprintf(stderr, "serve_flooder: %s\n", conn.error().what().c_str());
        return 2;
    }
    auto hello = tool::parse_hello(conn->peer_private_data());
    if (!hello) {
        std::fprintf(stderr, "serve_flooder: %s\n", hello.error().what().c_str());
        return 2;
    }
    constexpr std::size_t batch = 1024;
    std::vector<std::byte> requests(batch * detail::request_size);
    for (std::size_t i = 0; i < batch; ++i) {
        detail::service_request rq;
        rq.op = detail::service_op::flush;
        rq.id = i;
        rq.key = hello->region.key();
        rq.address = hello->region.address();
        rq.arg0 = 8;
        detail::encode(rq, std::span<std::byte, detail::request_size>(
                               requests.data() + i * detail::request_size, detail::request_size));
    }
    auto mr = memory_region::create(*dom, requests, usage::send);
    if (!mr) {
        std::fprintf(stderr, "serve_flooder: %s\n", mr.error().what().c_str());
        return 2;
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[4]));
    std::size_t sent = 0;
    auto last_sent = std::chrono::steady_clock::now();
    bool backed_up = false;
    while (std::chrono::steady_clock::now() < end) {
        auto r = conn->send(*mr, (sent % batch) * detail::request_size, detail::request_size);
        if (r) {
            ++sent;
            last_sent = std::chrono::steady_clock::now();
            continue;
        }
        // The target has taken nothing for 500 ms: its replies fill the socket, it has stopped
        // reading requests. A stopping flooder stops here, so the target has a reply waiting.
        if (std::chrono::steady_clock::now() - last_sent > std::chrono::milliseconds(500)) {
            backed_up = true;
            if (mode == "stop") {
                break;
            }
        }
        if (!(r.error() == errc::would_block)) {
            break;  // the target closed the connection
        }
        completion c[64];
        (void)conn->cq().poll(c);  // the sends' completions only: there are no receives
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::fprintf(stderr, "sent %zu%s\n", sent, backed_up ? ", the target backed up" : "");
    if (mode == "stop") {
        ::raise(SIGSTOP);
    }
    ::_exit(0);
}

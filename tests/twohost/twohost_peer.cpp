// SPDX-License-Identifier: BSD-3-Clause
// twohost_peer: the target side of twohost_test on an RDM provider (what `remora serve` is for
// connected endpoints): a file-backed persistent region exposed through the target service on
// one RDM peer endpoint, with the library's progress thread.
//   twohost_peer PROVIDER NODE PATH SIZE
// Prints "peer ADDRESS DESCRIPTOR" (both hex) on stdout, reads the client's address (hex, one
// line) from stdin, attaches it, serves, prints "attached", and runs until killed. Exit 1 with a
// line on stderr when a step fails.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <remora/remora.hpp>

#include "hex.hpp"

namespace {

using remora::twohost::hex;
using remora::twohost::unhex;

int die(const char* what, const remora::error& e) {
    std::fprintf(stderr, "twohost_peer: %s: %s\n", what, e.what().c_str());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace remora;
    if (argc != 5) {
        std::fprintf(stderr, "usage: twohost_peer PROVIDER NODE PATH SIZE\n");
        return 64;
    }
    std::signal(SIGPIPE, SIG_IGN);
    auto dom = domain::open({.provider = argv[1], .node = argv[2], .endpoint = endpoint_type::rdm});
    if (!dom)
        return die("domain", dom.error());
    auto region = persistent_region::open(
        *dom, {.path = argv[3], .size = std::stoull(argv[4]), .create = true});
    if (!region)
        return die("region", region.error());
    auto svc = target_service::create();
    if (!svc)
        return die("service", svc.error());
    auto desc = svc->expose(*region);
    if (!desc)
        return die("expose", desc.error());
    auto conn = connection::open_peer(
        *dom,
        {.progress_thread = true, .addons = {remora::persistence_config{.service_depth = 8}}});
    if (!conn)
        return die("open_peer", conn.error());
    const auto d = desc->serialize();
    std::printf("peer %s %s\n", hex(conn->local_address()).c_str(), hex(d).c_str());
    std::fflush(stdout);
    std::string line;
    if (!std::getline(std::cin, line)) {
        std::fprintf(stderr, "twohost_peer: no client address on stdin\n");
        return 1;
    }
    if (auto r = conn->attach(unhex(line)); !r)
        return die("attach", r.error());
    if (auto r = svc->serve(*conn); !r)
        return die("serve", r.error());
    std::printf("attached\n");
    std::fflush(stdout);
    for (;;) {
        ::pause();
    }
}

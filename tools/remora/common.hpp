// SPDX-License-Identifier: BSD-3-Clause
// tools/remora/common.hpp — shared bits of the `remora` command (public API only).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/core.h>

#include <remora/remora.hpp>

#include "serve.hpp"

namespace remora::tool {

// Prints "remora <what>: <error>" on stderr (user_text: no libfabric call names) and returns
// exit status 1.
inline int report(const char* what, const error& e) {
    fmt::print(stderr, "remora {}: {}\n", what, user_text(e));
    return 1;
}
// Prints "remora <what>: <line>" on stderr and returns exit status 1.
inline int report_line(const char* what, const std::string& line) {
    fmt::print(stderr, "remora {}: {}\n", what, line);
    return 1;
}

struct info_options {
    std::string provider;
    std::string endpoint;  // empty: both kinds; msg or rdm: only that one
    std::string address = "127.0.0.1";
    bool json = false;
};
int run_info(const info_options& o);

struct bench_options {
    std::string provider;                   // empty: automatic
    std::string endpoint = "msg";           // msg (connections) or rdm (peers over an AV)
    std::vector<std::string> ops{"write"};  // see bench_ops.hpp
    std::vector<std::size_t> sizes{8};      // --size; all: powers of two (bench_sizes)
    unsigned qd = 1;
    unsigned connections = 1;
    double duration = 1.0;      // seconds per result
    std::uint64_t count = 0;    // --count: operations per result instead of a duration (0: none)
    std::string wait = "busy";  // busy or blocking
    std::string channel;        // empty: none with --wait busy, else separate
    bool rcq = false;
    std::string completion = "poll";   // poll, callback or coroutine
    std::string registration = "pre";  // pre, per-op or cache
    unsigned signal_every = 1;         // selective signalling of the client connections
    bool shared_cq = false;            // client connections on one shared_completion_queue
    std::string suite;                 // "" or a suite of bench_suites.cpp's table
    unsigned setups = 500;             // --suite connect: connections set up at once
    std::string target;                // HOST:PORT of a `remora serve`; empty: loopback
    std::string key_file;              // with target: the serve's admission key
    std::string plot;                  // PNG file to draw the results into (gnuplot)
    bool json = false;
    bool baseline = false;             // also run plain libfabric and print the ratios
    bool baseline_in_process = false;  // the baseline in this process (default: its own)
    std::vector<std::string> anchors;  // independent programs run beside (fi_pingpong, ...)
    std::string target_progress;       // busy, adaptive, blocking; empty: the library default
    unsigned target_spin_us = 0;       // adaptive's progress_spin; 0: the library default
    std::string same_host = "off";     // on: connections move to shared memory (same host)
    bool pin = false;                  // target threads on one CPU, client threads on another
    bool more = false;                 // reposts after one CQ read go as a burst (FI_MORE)
    unsigned parts = 4;                // --op gather: remote segments per gather_write
};
int run_bench(const bench_options& o);
// The hidden verb `remora bench` re-executes itself with to run its plain-libfabric baseline in a
// process of its own (bench_apart.cpp): `remora __bench-baseline SETUP-JSON` prints the figures
// as JSON.
inline constexpr const char* baseline_verb = "__bench-baseline";
int run_baseline_child(const char* setup_json);
// The names --op accepts (bench_config.cpp) and --suite accepts (bench_suites.cpp).
std::vector<std::string> bench_ops();
std::vector<std::string> bench_suites();
// --suite connect (bench_connect.cpp): many connections set up at once from one thread.
int run_connect_bench(const bench_options& o);

struct serve_options {
    std::string provider;
    std::string listen = "127.0.0.1:7471";
    std::string region = "mem:64M";
    bool create = false;
    bool unguarded = false;  // no lock or lease on the region file
    unsigned depth = 64;     // the most service requests in flight a client may ask for
    // [ro=|rw=]FILE, one per key: a client proving a key gets that key's role (FILE alone: rw).
    // Empty: no admission (anyone who reaches the port connects, with --access's role).
    std::vector<std::string> key_files;
    std::string access = "rw";     // keyless serve: the role every client gets (ro or rw)
    unsigned max_clients = 64;     // clients connected at once; more are rejected as overloaded
    double handshake_timeout = 5;  // seconds an accepted peer has to complete the connection
    double idle_timeout = 0;       // seconds without a service request before eviction; 0: off
    double reply_timeout = 10;     // seconds a reply may wait for the client to take it
    unsigned fd_reserve = 32;      // refuse new clients (overloaded) when fewer fds are left
    std::string same_host = "on";  // on: read-write clients on this host over shared memory
};
int run_serve(const serve_options& o);

struct transfer_options {
    std::string provider;
    std::string target = "127.0.0.1:7471";
    std::uint64_t offset = 0;
    std::uint64_t length = 0;  // get: 0 means to the end of the region
    bool no_flush = false;     // put
    std::string key_file;      // the target's admission key; empty: connect without a token
    // put --replicas: the targets (HOST:PORT each), the quorum (0: a majority), the size of the
    // records stdin is cut into (0: one write of all of it) and the records in flight.
    std::vector<std::string> replicas;
    std::uint32_t quorum = 0;
    std::uint64_t record_size = 0;
    std::uint32_t depth = 16;
};
int run_put(const transfer_options& o);
// A connection to the `remora serve` at `address` as put and get make it (--key-file, the
// provider); `shared` and `progress` as connect_target's.
result<target_link> connect_with_options(const transfer_options& o, const std::string& address,
                                         std::uint16_t depth = default_service_depth,
                                         const domain* shared = nullptr, bool progress = false);
int run_put_replicated(const transfer_options& o);
int run_get(const transfer_options& o);

// `remora keygen FILE`: a new random admission key in FILE (mode 0600, never overwritten).
int run_keygen(const std::string& path);

}  // namespace remora::tool

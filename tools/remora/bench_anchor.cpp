// SPDX-License-Identifier: BSD-3-Clause
// `remora bench --anchor`: independent programs run on the same workload beside remora's
// result, each as a server and a client process of its own on loopback, their figures read from
// what they print. They are optional: a program that is not installed is skipped with a note,
// and none of them is a dependency of the library or the command.
//   fi_pingpong   libfabric's own ping-pong (Debian: libfabric-bin): both sides busy-poll and
//                 inject small sends; it prints the mean time of one transfer (half a round trip).
//   ucx_perftest  UCX's (Debian: ucx-utils): tag_lat, the median and mean one-way latency.
// Both time send ping-pongs: they run beside send results at QD 1 on one busy-polling
// connection, with the run's provider (ucx_perftest: its transport for the same medium; with
// --same-host on, UCX's defaults).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench_internal.hpp"

namespace remora::tool {
namespace {

using clock = std::chrono::steady_clock;

// A TCP port on loopback nobody listens on now (the server binds it a moment later).
result<unsigned> free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return fail(errc::invalid_argument, "socket: no free port");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    ::close(fd);
    if (!ok)
        return fail(errc::invalid_argument, "bind: no free port");
    return unsigned{ntohs(a.sin_port)};
}

// Whether some socket listens on TCP `port` (/proc/net/tcp and tcp6: state 0A).
bool listening(unsigned port) {
    const std::string want = fmt::format(":{:04X}", port);
    for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream in(file);
        std::string line;
        std::getline(in, line);  // the header
        while (std::getline(in, line)) {
            std::istringstream words(line);
            std::string slot, local, remote, state;
            words >> slot >> local >> remote >> state;
            if (state == "0A" && local.size() >= want.size() &&
                local.compare(local.size() - want.size(), want.size(), want) == 0)
                return true;
        }
    }
    return false;
}

// Runs `server`, waits until it listens on `port`, then runs `client`; both must exit 0.
// Returns the client's output and both processes' CPU seconds, or why it failed.
struct pair_run {
    std::string client_out;
    double cpu_s = 0;
};
result<pair_run> run_pair(const std::vector<std::string>& server,
                          const std::vector<std::string>& client,
                          const std::vector<std::string>& env, unsigned port, double timeout_s) {
    child_process srv;
    if (auto r = srv.start(server, env, true); !r)
        return fail(r.error());
    const auto give_up = clock::now() + std::chrono::seconds(10);
    while (!listening(port)) {
        if (!srv.running() || clock::now() > give_up) {
            (void)srv.finish(1);
            return fail(errc::provider_error,
                        "its server did not start: " + srv.last_line().substr(0, 200));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    child_process cli;
    if (auto r = cli.start(client, env, true); !r)
        return fail(r.error());
    auto done = cli.finish(timeout_s);
    auto srv_done = srv.finish(done ? 10.0 : 0.1);
    if (!done)
        return fail(done.error());
    if (!cli.succeeded())
        return fail(errc::provider_error, "it failed: " + cli.last_line().substr(0, 200));
    if (!srv_done || !srv.succeeded())
        return fail(errc::provider_error, "its server failed: " + srv.last_line().substr(0, 200));
    return pair_run{cli.output(), cli.cpu_s() + srv.cpu_s()};
}

std::vector<std::string> words_of(const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> w;
    for (std::string x; in >> x;)
        w.push_back(x);
    return w;
}

std::optional<double> number(const std::string& w) {
    char* end = nullptr;
    const double v = std::strtod(w.c_str(), &end);
    if (end == w.c_str() || *end != '\0' || !(v > 0))
        return std::nullopt;
    return v;
}

// Round trips and the size into figures (ops/s and MiB/s as remora's send rows count them).
figures figures_from(std::uint64_t iterations, double mean_rtt_us, double cpu_s, std::size_t size) {
    figures f;
    f.ops = iterations;
    f.seconds = static_cast<double>(iterations) * mean_rtt_us / 1e6;
    f.ops_per_s = 1e6 / mean_rtt_us;
    f.mib_per_s = f.ops_per_s * static_cast<double>(size) / (1024.0 * 1024.0);
    f.cpu_us_per_op = cpu_s * 1e6 / static_cast<double>(iterations);
    return f;
}

// As many round trips as remora's result made (its -I), or the run's --count.
std::uint64_t iterations_for(const setup& s, const figures& remora) {
    if (s.count != 0)
        return s.count;
    return std::clamp<std::uint64_t>(remora.ops, 100, 100'000'000);
}
// Long enough for ten times remora's pace, plus setting up.
double timeout_for(std::uint64_t iterations, const figures& remora) {
    return 30.0 + 10.0 * static_cast<double>(iterations) / std::max(1.0, remora.ops_per_s);
}

// fi_pingpong prints a header line starting "bytes" and under it one line per size:
//   bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
// usec/xfer is the mean time of one transfer: half a round trip.
anchor_result run_fi_pingpong(const setup& s, const figures& remora) {
    anchor_result a;
    a.name = "fi_pingpong";
    auto port = free_port();
    if (!port) {
        a.skipped = port.error().message();
        return a;
    }
    const std::uint64_t n = iterations_for(s, remora);
    const std::vector<std::string> common{
        "fi_pingpong",         "-p", s.provider, "-e", s.endpoint, "-I", std::to_string(n), "-S",
        std::to_string(s.size)};
    std::vector<std::string> server = common, client = common;
    server.insert(server.end(), {"-B", std::to_string(*port)});
    client.insert(client.end(), {"-P", std::to_string(*port), "127.0.0.1"});
    auto run = run_pair(server, client, {}, *port, timeout_for(n, remora));
    if (!run) {
        a.skipped = "fi_pingpong: " + run.error().message();
        return a;
    }
    std::istringstream lines(run->client_out);
    bool header = false;
    for (std::string line; std::getline(lines, line);) {
        const auto w = words_of(line);
        if (!header) {
            header = !w.empty() && w.front() == "bytes";
            continue;
        }
        if (w.size() < 8)
            break;
        if (auto half = number(w[6])) {
            a.half_rtt_us = *half;
            a.mean_latency = true;
            a.f = figures_from(n, 2 * *half, run->cpu_s, s.size);
            a.f->has_latency = true;
            a.f->p50_us = 2 * *half;  // a mean round trip: printed as such
            return a;
        }
        break;
    }
    a.skipped = "fi_pingpong: no usec/xfer in its output";
    return a;
}

// ucx_perftest's client prints, at the end, a line
//   Final: iterations typical(50%) average overall bw-average bw-overall rate-average rate-overall
// with tag_lat's latencies one way (half a round trip), in microseconds.
anchor_result run_ucx_perftest(const setup& s, const figures& remora) {
    anchor_result a;
    a.name = "ucx_perftest";
    // UCX's transport for the medium the run's provider uses; with --same-host on, UCX's
    // defaults (on one host it picks its shared-memory transports by itself).
    std::vector<std::string> env;
    const bool tcp = s.provider == "tcp" || s.provider == "sockets" ||
                     s.provider == "tcp;ofi_rxm" || s.provider == "net";
    if (!s.same_host && s.provider == "shm")
        env.emplace_back("UCX_TLS=sm,self");
    else if (!s.same_host && tcp)
        env.emplace_back("UCX_TLS=tcp,self");
    auto port = free_port();
    if (!port) {
        a.skipped = port.error().message();
        return a;
    }
    const std::uint64_t n = iterations_for(s, remora);
    const std::vector<std::string> server{"ucx_perftest", "-p", std::to_string(*port)};
    const std::vector<std::string> client{
        "ucx_perftest",         "-p", std::to_string(*port), "-t",       "tag_lat", "-s",
        std::to_string(s.size), "-n", std::to_string(n),     "127.0.0.1"};
    auto run = run_pair(server, client, env, *port, timeout_for(n, remora));
    if (!run) {
        a.skipped = "ucx_perftest: " + run.error().message();
        return a;
    }
    std::istringstream lines(run->client_out);
    for (std::string line; std::getline(lines, line);) {
        const auto w = words_of(line);
        if (w.size() < 9 || w.front() != "Final:")
            continue;
        const auto typical = number(w[2]), overall = number(w[4]);
        if (!typical || !overall)
            break;
        a.half_rtt_us = *typical;
        a.f = figures_from(n, 2 * *overall, run->cpu_s, s.size);
        a.f->has_latency = true;
        a.f->p50_us = 2 * *typical;
        a.f->p99_us = 0;
        return a;
    }
    a.skipped = "ucx_perftest: no Final: line in its output";
    return a;
}

}  // namespace

bool anchor_installed(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
        const std::string file = (dir.empty() ? "." : dir) + "/" + name;
        struct stat st {};
        if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            ::access(file.c_str(), X_OK) == 0)
            return true;
    }
    return false;
}

std::vector<anchor_result> run_anchors(const std::vector<std::string>& names, const setup& s,
                                       const figures& remora) {
    std::vector<anchor_result> out;
    if (names.empty() || s.op != "send")
        return out;
    // What the anchors time: one ping-pong in flight on one connection, both sides busy-polling,
    // a completion for each message, against a loopback target.
    std::string unlike;
    if (s.qd != 1 || s.connections != 1)
        unlike = "they time one ping-pong in flight on one connection (--qd 1, -c 1)";
    else if (s.wait != "busy")
        unlike = "they busy-poll: compared with --wait busy results only";
    else if (s.signal_every != 1 || s.shared_cq || s.one_reader)
        unlike = "they read one CQ per connection, a completion each";
    else if (!s.target.empty())
        unlike = "they run on loopback here";
    for (const std::string& name : names) {
        anchor_result a;
        a.name = name;
        if (!unlike.empty()) {
            a.skipped = name + ": not run beside this result: " + unlike;
        } else if (!anchor_installed(name)) {
            a.skipped = name + ": not installed (Debian: " +
                        (name == "fi_pingpong" ? "libfabric-bin" : "ucx-utils") + "); skipped";
        } else {
            a = name == "fi_pingpong" ? run_fi_pingpong(s, remora) : run_ucx_perftest(s, remora);
        }
        out.push_back(std::move(a));
    }
    return out;
}

}  // namespace remora::tool

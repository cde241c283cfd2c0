// SPDX-License-Identifier: BSD-3-Clause
// tests/twohost/twohost.hpp — what the two-host tests share: the namespaces run.sh set up, and
// targets started in the target namespace (`remora serve`, or twohost_peer for RDM) or, for a
// test that needs some targets local, in the client's.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "hex.hpp"
#include "support.hpp"

namespace remora::test {

inline constexpr std::size_t region_size = 4 << 20;

// What run.sh set up.
struct twohost_env {
    std::string ns_target, ns_client, link_target, link_client, target_addr, client_addr;
};

inline std::optional<twohost_env> environment() {
    const char* names[] = {"REMORA_TWOHOST_NS_TARGET",   "REMORA_TWOHOST_NS_CLIENT",
                           "REMORA_TWOHOST_LINK_TARGET", "REMORA_TWOHOST_LINK_CLIENT",
                           "REMORA_TWOHOST_TARGET_ADDR", "REMORA_TWOHOST_CLIENT_ADDR"};
    std::string v[6];
    for (int i = 0; i < 6; ++i) {
        const char* s = std::getenv(names[i]);
        if (s == nullptr || *s == '\0') {
            return std::nullopt;
        }
        v[i] = s;
    }
    return twohost_env{v[0], v[1], v[2], v[3], v[4], v[5]};
}

inline std::string file_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Runs a shell command; true when it exited 0.
inline bool shell(const std::string& cmd) {
    const int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << cmd;
    return rc == 0;
}

// The target in the target namespace: `remora serve` (connected endpoints) or twohost_peer (an
// RDM peer, one client); its output goes to a log file.
struct target_process {
    pid_t pid = -1;
    std::uint16_t port = 0;  // serve
    std::string log;
    int to_peer = -1;                // twohost_peer's stdin
    std::vector<std::byte> address;  // twohost_peer's endpoint address
    std::vector<std::byte> descriptor;

    static target_process start_peer(const twohost_env& env, const std::string& provider,
                                     const std::string& path, const std::string& log) {
        target_process t;
        t.log = log;
        int in[2];
        EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
        t.pid = ::fork();
        if (t.pid == 0) {
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            ::dup2(in[0], STDIN_FILENO);
            ::dup2(fd, STDOUT_FILENO);
            ::dup2(fd, STDERR_FILENO);
            ::execlp("ip", "ip", "netns", "exec", env.ns_target.c_str(), REMORA_PEER,
                     provider.c_str(), env.target_addr.c_str(), path.c_str(),
                     std::to_string(region_size).c_str(), nullptr);
            ::_exit(127);
        }
        ::close(in[0]);
        t.to_peer = in[1];
        std::string text;
        EXPECT_TRUE(eventually(
            [&] {
                text = file_text(log);
                return text.find('\n') != std::string::npos || !t.alive();
            },
            10s));
        std::istringstream words(text);
        std::string tag, a, d;
        words >> tag >> a >> d;
        EXPECT_EQ(tag, "peer") << "twohost_peer said: " << text;
        t.address = twohost::unhex(a);
        t.descriptor = twohost::unhex(d);
        return t;
    }

    // `local`: in this (the client's) namespace, on 127.0.0.1, rather than the target's.
    static target_process start_serve(const twohost_env& env, const std::string& provider,
                                      const std::string& path, const std::string& log,
                                      bool same_host = false, bool local = false) {
        target_process t;
        t.log = log;
        t.pid = ::fork();
        if (t.pid == 0) {
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            ::dup2(fd, STDOUT_FILENO);
            ::dup2(fd, STDERR_FILENO);
            const std::string listen = (local ? "127.0.0.1" : env.target_addr) + ":0";
            const std::string region = "file:" + path + ":" + std::to_string(region_size);
            if (local) {
                ::execl(REMORA_CLI, REMORA_CLI, "serve", "--provider", provider.c_str(), "--listen",
                        listen.c_str(), "--region", region.c_str(), "--create", "--same-host",
                        same_host ? "on" : "off", nullptr);
            }
            // `ip netns exec` execs the command itself: this pid becomes serve's.
            ::execlp("ip", "ip", "netns", "exec", env.ns_target.c_str(), REMORA_CLI, "serve",
                     "--provider", provider.c_str(), "--listen", listen.c_str(), "--region",
                     region.c_str(), "--create", "--same-host", same_host ? "on" : "off", nullptr);
            ::_exit(127);
        }
        // "remora serve: listening on ADDR:PORT (...)"
        const std::string needle =
            "listening on " + (local ? std::string("127.0.0.1") : env.target_addr) + ":";
        std::string text;
        const bool up = eventually(
            [&] {
                text = file_text(log);
                return text.find(needle) != std::string::npos || !t.alive();
            },
            10s);
        const auto at = text.find(needle);
        EXPECT_TRUE(up && at != std::string::npos) << "serve said: " << text;
        if (at != std::string::npos) {
            t.port = static_cast<std::uint16_t>(std::stoul(text.substr(at + needle.size())));
        }
        return t;
    }

    bool alive() const { return pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0; }
    void signal(int sig) const { ::kill(pid, sig); }
    void kill() {
        if (to_peer >= 0) {
            ::close(to_peer);
            to_peer = -1;
        }
        if (pid > 0) {
            ::kill(pid, SIGCONT);
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
            pid = -1;
        }
    }
    std::string output() const { return file_text(log); }
    ~target_process() { kill(); }
};

}  // namespace remora::test

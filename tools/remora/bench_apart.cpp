// SPDX-License-Identifier: BSD-3-Clause
// `remora bench`: programs run beside remora's results in processes of their own: the
// plain-libfabric baseline (this program re-executed with a hidden verb, so nothing of remora's
// shares its address space, allocator, caches or threads), and the child processes the anchors
// (bench_anchor.cpp) start. Linux: the program re-executes /proc/self/exe.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench_internal.hpp"

extern char** environ;

namespace remora::tool {
namespace {

using clock = std::chrono::steady_clock;

nlohmann::json setup_json(const setup& s, bool busy_target) {
    return {{"provider", s.provider},
            {"endpoint", s.endpoint},
            {"op", s.op},
            {"wait", s.wait},
            {"size", s.size},
            {"qd", s.qd},
            {"duration", s.duration},
            {"count", s.count},
            {"pin", s.pin},
            {"busy_target", busy_target}};
}

nlohmann::json figures_json(const figures& f) {
    return {{"ops", f.ops},
            {"seconds", f.seconds},
            {"ops_per_s", f.ops_per_s},
            {"mib_per_s", f.mib_per_s},
            {"p50_us", f.p50_us},
            {"p99_us", f.p99_us},
            {"p999_us", f.p999_us},
            {"cpu_us_per_op", f.cpu_us_per_op},
            {"has_latency", f.has_latency}};
}

figures figures_of(const nlohmann::json& j) {
    figures f;
    f.ops = j.at("ops").get<std::uint64_t>();
    f.seconds = j.at("seconds").get<double>();
    f.ops_per_s = j.at("ops_per_s").get<double>();
    f.mib_per_s = j.at("mib_per_s").get<double>();
    f.p50_us = j.at("p50_us").get<double>();
    f.p99_us = j.at("p99_us").get<double>();
    f.p999_us = j.at("p999_us").get<double>();
    f.cpu_us_per_op = j.at("cpu_us_per_op").get<double>();
    f.has_latency = j.at("has_latency").get<bool>();
    return f;
}

double seconds_of(const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

}  // namespace

child_process::~child_process() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0)
        ::close(fd_);
}

result<void> child_process::start(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env_extra, bool with_stderr) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0)
        return fail(errc::invalid_argument, std::string("pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    if (with_stderr)
        posix_spawn_file_actions_adddup2(&fa, p[1], STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e)
        env_strings.emplace_back(*e);
    env_strings.insert(env_strings.end(), env_extra.begin(), env_extra.end());
    std::vector<char*> env;
    for (const std::string& e : env_strings)
        env.push_back(const_cast<char*>(e.c_str()));
    env.push_back(nullptr);
    // A name without a slash is looked up on PATH (an anchor); a path runs as it is.
    const int rc =
        argv.front().find('/') == std::string::npos
            ? posix_spawnp(&pid_, argv.front().c_str(), &fa, nullptr, args.data(), env.data())
            : posix_spawn(&pid_, argv.front().c_str(), &fa, nullptr, args.data(), env.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(p[1]);
    if (rc != 0) {
        ::close(p[0]);
        pid_ = -1;
        return fail(rc == ENOENT ? errc::not_supported : errc::invalid_argument,
                    argv.front() + ": " + std::strerror(rc));
    }
    fd_ = p[0];
    return {};
}

bool child_process::running() {
    if (pid_ <= 0)
        return false;
    rusage u{};
    int status = 0;
    const pid_t r = ::wait4(pid_, &status, WNOHANG, &u);
    if (r != pid_)
        return true;
    pid_ = -1;
    exit_ = status;
    cpu_s_ = seconds_of(u.ru_utime) + seconds_of(u.ru_stime);
    return false;
}

result<void> child_process::finish(double timeout_s) {
    const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
    char buf[4096];
    while (fd_ >= 0) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
        if (left <= 0)
            break;
        pollfd pf{fd_, POLLIN, 0};
        if (::poll(&pf, 1, static_cast<int>(std::min<long long>(left, 1000))) <= 0)
            continue;
        const ssize_t n = ::read(fd_, buf, sizeof(buf));
        if (n > 0) {
            out_.append(buf, static_cast<std::size_t>(n));
        } else if (n == 0 || errno != EINTR) {
            ::close(fd_);
            fd_ = -1;
        }
    }
    while (running() && clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        rusage u{};
        ::wait4(pid_, &exit_, 0, &u);
        pid_ = -1;
        return fail(errc::timed_out, fmt::format("did not finish within {:.0f} s", timeout_s));
    }
    return {};
}

bool child_process::succeeded() const {
    return WIFEXITED(exit_) && WEXITSTATUS(exit_) == 0;
}

std::string child_process::last_line() const {
    std::string t = out_;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r'))
        t.pop_back();
    const auto nl = t.rfind('\n');
    return nl == std::string::npos ? t : t.substr(nl + 1);
}

result<figures> run_baseline_apart(const setup& s, bool busy_target) {
    child_process child;
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    const std::string exe =
        n > 0 ? std::string(self, static_cast<std::size_t>(n)) : "/proc/self/exe";
    const std::vector<std::string> argv{exe, baseline_verb, setup_json(s, busy_target).dump()};
    if (auto r = child.start(argv, {}, false); !r)
        return fail(errc::provider_error, "baseline process: " + r.error().message());
    // Its run, plus setting up and tearing down; under --count, the hour run_limit_s allows.
    if (auto r = child.finish(run_limit_s(s) + 120); !r)
        return fail(r.error().code(), "baseline process: " + r.error().message());
    nlohmann::json j = nlohmann::json::parse(child.output(), nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return fail(errc::provider_error, "baseline process: no result (exit status " +
                                              std::to_string(child.exit_status()) + ")");
    if (j.contains("error"))
        return fail(errc::provider_error, j["error"].get<std::string>());
    try {
        return figures_of(j.at("figures"));
    } catch (const nlohmann::json::exception& e) {
        return fail(errc::provider_error, std::string("baseline process: ") + e.what());
    }
}

int run_baseline_child(const char* setup_text) {
    nlohmann::json j = nlohmann::json::parse(setup_text, nullptr, false);
    if (j.is_discarded()) {
        fmt::print("{}\n", nlohmann::json{{"error", "baseline process: bad setup"}}.dump());
        return 1;
    }
    setup s;
    bool busy_target = false;
    try {
        s.provider = j.at("provider").get<std::string>();
        s.endpoint = j.at("endpoint").get<std::string>();
        s.op = j.at("op").get<std::string>();
        s.wait = j.at("wait").get<std::string>();
        s.size = j.at("size").get<std::size_t>();
        s.qd = j.at("qd").get<unsigned>();
        s.duration = j.at("duration").get<double>();
        s.count = j.at("count").get<std::uint64_t>();
        s.pin = j.at("pin").get<bool>();
        busy_target = j.at("busy_target").get<bool>();
    } catch (const nlohmann::json::exception& e) {
        fmt::print("{}\n",
                   nlohmann::json{{"error", std::string("baseline process: ") + e.what()}}.dump());
        return 1;
    }
    auto f = rdm(s) ? run_baseline_rdm(s) : run_baseline(s, busy_target);
    if (!f) {
        fmt::print("{}\n", nlohmann::json{{"error", f.error().message()}}.dump());
        return 1;
    }
    fmt::print("{}\n", nlohmann::json{{"figures", figures_json(*f)}}.dump());
    return 0;
}

}  // namespace remora::tool

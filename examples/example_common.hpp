// SPDX-License-Identifier: BSD-3-Clause
// examples/example_common.hpp — the plumbing the examples share, so that each example file shows
// only its own remora calls. Header-only, over the public API only.
//
//   die / must        any failure ends the whole process at once (from either thread) with one
//                     line "<program_name>: <what>" on stderr and exit status 1: an example stays
//                     short and never hangs waiting for a peer that is gone.
//   next_completion   the next completion of a CQ, checked, within 10 s.
//   wait_for_close    a server's last step: the client's close, within 10 s.
//   server_thread     runs an example's server on its own thread and hands its port to main.
//   bytes_of / text_of, context_for / slot_of   small conversions several examples use.
//   temp_dir / read_file   a scratch directory for backing files, and reading a file back
//                     with ordinary file I/O (the persistence examples).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

#include <remora/remora.hpp>

namespace example {

using namespace std::chrono_literals;

// The name error messages start with. Each example sets it first thing in main (before it
// starts its server thread), e.g. example::program_name = "example_write".
inline const char* program_name = "example";

[[noreturn]] inline void die(const std::string& what) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", program_name, what.c_str());
    std::_Exit(1);  // from either thread: stop at the first error, never hang
}

// Unwraps a remora::result or dies with its message.
template <class T>
T must(remora::result<T> r, std::string_view what) {
    if (!r) {
        die(std::string(what) + ": " + r.error().what());
    }
    if constexpr (!std::is_void_v<T>) {
        return std::move(*r);
    }
}

// The next completion on `cq` (10 s at most), checked to have succeeded. It polls `spin_polls`
// times before it blocks on the CQ's channel with completion_queue::next (0: blocks at once; see
// examples/ping_pong).
inline remora::completion next_completion(remora::completion_queue& cq, const char* who,
                                          int spin_polls = 0) {
    remora::completion c;
    bool got = false;
    for (int spins = 0; spins < spin_polls && !got; ++spins) {
        got = must(cq.poll({&c, 1}), who) == 1;
    }
    if (!got) {
        c = must(cq.next(10s), std::string(who) + ": next completion");
    }
    if (!c.ok()) {
        die(std::string(who) + ": " + remora::to_string(c.op) + " failed: " + c.status.message());
    }
    return c;
}

// Waits (10 s at most) for the connection's next event and dies unless it is the peer's close.
inline void wait_for_close(remora::connection& conn, const char* who) {
    auto ev = must(conn.next_event(10s), std::string(who) + ": next_event");
    if (ev != remora::conn_event::closed) {
        die(std::string(who) + ": expected closed, got " + remora::to_string(ev));
    }
}

// An example's server on its own thread. `run_server(port, args...)` gets a
// std::promise<std::uint16_t>& as its first argument and sets it to its listener's port once it
// listens; port() waits for that. Like std::thread, pass references with std::ref.
class server_thread {
  public:
    template <class F, class... Args>
    explicit server_thread(F&& run_server, Args&&... args)
        : port_(),  // named, so clang 14 sees it constructed before port_future_ uses it
          port_future_(port_.get_future().share()),
          thread_(std::forward<F>(run_server), std::ref(port_), std::forward<Args>(args)...) {}
    server_thread(const server_thread&) = delete;
    server_thread& operator=(const server_thread&) = delete;
    ~server_thread() {
        if (thread_.joinable()) {
            thread_.join();
        }
    }

    // The server's port: waits until it listens.
    std::uint16_t port() const { return port_future_.get(); }
    void join() { thread_.join(); }

  private:
    std::promise<std::uint16_t> port_;  // before thread_: the thread uses it from the start
    std::shared_future<std::uint16_t> port_future_;
    std::thread thread_;
};

// Text <-> bytes, for private data and message buffers.
inline std::span<const std::byte> bytes_of(std::string_view s) {
    return std::as_bytes(std::span(s.data(), s.size()));
}
inline std::string text_of(std::span<const std::byte> b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// An operation's context carrying a slot number, and the slot back from its completion.
inline void* context_for(std::size_t slot) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(slot));
}
inline std::size_t slot_of(const remora::completion& c) {
    return reinterpret_cast<std::uintptr_t>(c.context);
}

// A scratch directory (under $TMPDIR or /tmp) removed with everything in it when this goes out
// of scope. die() exits without unwinding, so a failed example leaves it behind for inspection.
class temp_dir {
  public:
    temp_dir() {
        std::string tmpl =
            (std::filesystem::temp_directory_path() / "remora-example-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) {
            die("cannot create a directory from " + tmpl);
        }
        path_ = tmpl;
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    std::string file(const char* name) const { return (path_ / name).string(); }

  private:
    std::filesystem::path path_;
};

// `n` bytes at `offset` of the file at `path`, read with ordinary file I/O; dies if they are
// not all there.
inline std::string read_file(const std::string& path, std::size_t offset, std::size_t n) {
    std::ifstream in(path, std::ios::binary);
    std::string out(n, '\0');
    if (!in.seekg(static_cast<std::streamoff>(offset)) ||
        !in.read(out.data(), static_cast<std::streamsize>(n))) {
        die("cannot read " + std::to_string(n) + " bytes at " + std::to_string(offset) + " of " +
            path);
    }
    return out;
}

}  // namespace example

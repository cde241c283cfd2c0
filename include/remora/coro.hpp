// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/coro.hpp — C++20 coroutines over remora's operations.
///
///   remora::task copy(connection& c, ...) {
///       auto n = co_await remora::co_op([&](op_options o) {
///           return c.write(dst, 0, src, 0, len, o);
///       });
///       if (!n) { ... n.error() ... }
///   }
///
/// co_op posts the operation with a per-operation callback whose context is the awaiter itself
/// (it lives in the coroutine's frame: nothing is allocated per operation) and suspends; the
/// completion resumes the coroutine on the thread that reads the connection's CQ — the
/// application's poll/wait, or the library's progress thread. It yields result<std::size_t>: the
/// completion's byte count, or its error. A post that fails resumes at once with the error.
/// (Inside the library the resumption is the operation's one completion path: the record's
/// `done` runs this callback, as for any callback operation; see docs/architecture.md.)
///
/// A resumed coroutine runs inside the CQ read: it may post further operations (that is the point)
/// but must not block or poll the same CQ.
///
/// task is a minimal eager coroutine type for code that has none of its own: it starts at once,
/// runs to its first co_await, and done() tells when it has finished; it must outlive its
/// coroutine's last resumption.
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>

#include <remora/completion_queue.hpp>
#include <remora/op_options.hpp>
#include <remora/result.hpp>

namespace remora {

/// How co_op posts and awaits an operation.
struct await_options {
    /// Parked under back-pressure without blocking the thread until then (op_options::park_until
    /// with park_mode::queue): while the operation's units are taken, the coroutine stays
    /// suspended in the FIFO, and resumes with its completion once its slot has been reserved
    /// and it has completed, or with errc::timed_out / canceled / disconnected if it never was.
    /// It then resumes on the thread of that FIFO (the library's), or on the CQ reader's as
    /// usual.
    /// Default: no parking (a post that finds no units fails at once).
    std::chrono::steady_clock::time_point park_until{};
    /// A write or send that completes at post (completion_mode::at_post: its bytes are
    /// injected): awaiting it never suspends and yields 0, or the post's error; a later
    /// transfer error is reported to the CQ like on_error's (with no context).
    bool at_post = false;
};

/// The awaitable co_op returns.
template <class Post>
class op_awaiter {
  public:
    op_awaiter(Post post, await_options how) : post_(std::move(post)), how_(how) {}
    bool await_ready() {
        if (!how_.at_post) {
            return false;
        }
        op_options o;
        o.report = completion_mode::at_post;
        if (auto r = post_(o); !r) {
            out_ = tl::unexpected<error>(r.error());
        }
        return true;  ///< done at post: never suspends
    }
    bool await_suspend(std::coroutine_handle<> h) {
        handle_ = h;
        op_options o;
        o.context = this;
        o.callback = &op_awaiter::on_complete;
        if (how_.park_until != std::chrono::steady_clock::time_point{}) {
            o.park_until = how_.park_until;
            o.park = park_mode::queue;
        }
        auto r = post_(o);
        if (!r) {
            out_ = tl::unexpected<error>(r.error());
            return false;  ///< resume now: nothing was posted
        }
        /// The callback may already have resumed the coroutine (and destroyed this awaiter) on
        /// the thread that reads the CQ: touch nothing from here on.
        return true;
    }
    result<std::size_t> await_resume() { return std::move(out_); }

  private:
    static void on_complete(const completion& c) {
        auto* self = static_cast<op_awaiter*>(c.context);
        if (c.ok()) {
            self->out_ = c.bytes;
        } else {
            self->out_ = tl::unexpected<error>(error(c.status, to_string(c.op)));
        }
        self->handle_.resume();
    }
    Post post_;
    await_options how_;
    std::coroutine_handle<> handle_;
    result<std::size_t> out_{std::size_t{0}};
};

/// An awaitable operation: `post` receives the op_options to pass to a connection call (it must
/// pass them on unchanged), and is called once, when the coroutine awaits.
template <class Post>
op_awaiter<Post> co_op(Post post, await_options how = {}) {
    return op_awaiter<Post>(std::move(post), how);
}

class task {
  public:
    struct promise_type {
        std::atomic<bool> finished{false};
        task get_return_object() {
            return task(std::coroutine_handle<promise_type>::from_promise(*this));
        }
        std::suspend_never initial_suspend() noexcept { return {}; }
        struct final_awaiter {
            bool await_ready() noexcept { return false; }
            void await_suspend(std::coroutine_handle<promise_type> h) noexcept {
                h.promise().finished.store(true, std::memory_order_release);
            }
            void await_resume() noexcept {}
        };
        final_awaiter final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { std::terminate(); }
    };
    task(task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    task& operator=(task&& o) noexcept {
        if (this != &o) {
            if (h_)
                h_.destroy();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    ~task() {
        if (h_)
            h_.destroy();
    }
    bool done() const noexcept {
        return !h_ || h_.promise().finished.load(std::memory_order_acquire);
    }

  private:
    explicit task(std::coroutine_handle<promise_type> h) : h_(h) {}
    std::coroutine_handle<promise_type> h_;
};

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/coro.hpp — C++20 coroutines over remora's operations.
///
///   remora::task copy(connection& c, ...) {
///       auto n = co_await remora::co_op(c, [&](op_options o) {
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
#include <remora/connection.hpp>
#include <remora/result.hpp>

namespace remora {

template <class Post>
class op_awaiter {
  public:
    explicit op_awaiter(Post post, std::chrono::steady_clock::time_point park_until = {})
        : post_(std::move(post)), park_until_(park_until) {}
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) {
        handle_ = h;
        op_options o;
        o.context = this;
        o.callback = &op_awaiter::on_complete;
        if (park_until_ != std::chrono::steady_clock::time_point{}) {
            o.park_until = park_until_;
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
    std::chrono::steady_clock::time_point park_until_;
    std::coroutine_handle<> handle_;
    result<std::size_t> out_{std::size_t{0}};
};

/// An awaitable operation: `post` receives the op_options to pass to a connection call.
template <class Post>
op_awaiter<Post> co_op(connection& /*conn*/, Post post) {
    return op_awaiter<Post>(std::move(post));
}

/// The same, parked under back-pressure without blocking the thread (op_options::park_until and
/// park_mode::queue): when the operation's units are taken, the coroutine stays suspended while
/// it waits in the FIFO, and resumes with its completion once it has been admitted and has
/// completed, or with errc::timed_out / canceled / disconnected if it never was. It then
/// resumes on the thread of that FIFO (the library's), or on the CQ reader's as usual.
template <class Post>
op_awaiter<Post> co_op_parked(connection& /*conn*/, std::chrono::steady_clock::time_point until,
                              Post post) {
    return op_awaiter<Post>(std::move(post), until);
}

/// A write or send that completes at post (completion_mode::at_post: its bytes are injected):
/// awaiting it never suspends. It yields 0, or the post's error; a later transfer error is
/// reported to the CQ like on_error's (with the options' context, here none).
template <class Post>
class at_post_awaiter {
  public:
    explicit at_post_awaiter(Post post) : post_(std::move(post)) {}
    bool await_ready() noexcept {
        op_options o;
        o.report = completion_mode::at_post;
        auto r = post_(o);
        if (!r) {
            out_ = tl::unexpected<error>(r.error());
        }
        return true;
    }
    void await_suspend(std::coroutine_handle<>) noexcept {}
    result<std::size_t> await_resume() { return std::move(out_); }

  private:
    Post post_;
    result<std::size_t> out_{std::size_t{0}};
};

template <class Post>
at_post_awaiter<Post> co_op_at_post(connection& /*conn*/, Post post) {
    return at_post_awaiter<Post>(std::move(post));
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
    [[nodiscard]] bool done() const noexcept {
        return !h_ || h_.promise().finished.load(std::memory_order_acquire);
    }

  private:
    explicit task(std::coroutine_handle<promise_type> h) : h_(h) {}
    std::coroutine_handle<promise_type> h_;
};

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/coro.hpp — C++20 coroutines over remora's operations: co_op (an awaitable operation)
/// and task (a minimal eager coroutine type).
///
///     remora::task copy(connection& c, ...) {
///         auto n = co_await remora::co_op([&](op_options o) {
///             return c.write(dst, 0, src, 0, len, o);
///         });
///         if (!n) { ... n.error() ... }
///     }
///
/// A resumed coroutine runs inside the CQ read: it may post further operations (that is the
/// point) but must not block or poll the same CQ.
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

/// The awaitable co_op returns: awaiting it posts the operation and suspends until it completes.
/// \tparam Post the posting callable (see co_op)
template <class Post>
class op_awaiter {
  public:
    /// Holds `post` until the coroutine awaits.
    op_awaiter(Post post, await_options how) : post_(std::move(post)), how_(how) {}
    /// False (suspend and post), except with await_options::at_post: then it posts here and
    /// never suspends.
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
    /// Posts the operation with a callback that resumes `h`; false (resume at once) when the
    /// post fails.
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
    /// The completion's byte count, or its error (or the post's).
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
///
/// co_op posts the operation with a per-operation callback whose context is the awaiter itself
/// (it lives in the coroutine's frame: nothing is allocated per operation) and suspends; the
/// completion resumes the coroutine on the thread that reads the connection's CQ — the
/// application's poll/wait, or the library's progress thread. It yields result<std::size_t>: the
/// completion's byte count, or its error. A post that fails resumes at once with the error.
/// The resumption is the operation's one completion path, as for any callback operation
/// (op_options::callback).
///
/// \param post a callable `result<void>(op_options)` that posts one operation with them
/// \param how  parking, or completion at post (await_options)
/// \return the awaitable; `co_await` it for result<std::size_t>
template <class Post>
op_awaiter<Post> co_op(Post post, await_options how = {}) {
    return op_awaiter<Post>(std::move(post), how);
}

/// A minimal eager coroutine type for code that has none of its own: it starts at once, runs to
/// its first co_await, and done() tells when it has finished. It must outlive its coroutine's
/// last resumption (destroying it destroys the coroutine's frame). An exception escaping the
/// coroutine terminates the program.
class task {
  public:
    /// The coroutine machinery (used by the compiler, not by the application).
    struct promise_type {
        std::atomic<bool> finished{false};  ///< set when the coroutine reached its end
        /// The task handed to the caller.
        task get_return_object() {
            return task(std::coroutine_handle<promise_type>::from_promise(*this));
        }
        /// Eager: runs at once.
        std::suspend_never initial_suspend() noexcept { return {}; }
        /// Marks the task finished and keeps the frame until the task is destroyed.
        struct final_awaiter {
            bool await_ready() noexcept { return false; }  ///< always suspends
            /// Sets `finished`.
            void await_suspend(std::coroutine_handle<promise_type> h) noexcept {
                h.promise().finished.store(true, std::memory_order_release);
            }
            void await_resume() noexcept {}  ///< never resumed
        };
        final_awaiter final_suspend() noexcept { return {}; }      ///< see final_awaiter
        void return_void() noexcept {}                             ///< `co_return;`
        void unhandled_exception() noexcept { std::terminate(); }  ///< terminates
    };
    /// Takes over `o`'s coroutine; `o` is left empty (done()).
    task(task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    /// Destroys its own coroutine, then takes over `o`'s.
    task& operator=(task&& o) noexcept {
        if (this != &o) {
            if (h_)
                h_.destroy();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    /// Destroys the coroutine's frame.
    ~task() {
        if (h_)
            h_.destroy();
    }
    /// True once the coroutine has finished (or the task is empty). Safe from another thread.
    bool done() const noexcept {
        return !h_ || h_.promise().finished.load(std::memory_order_acquire);
    }

  private:
    explicit task(std::coroutine_handle<promise_type> h) : h_(h) {}
    std::coroutine_handle<promise_type> h_;
};

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
#include <remora/completion_queue.hpp>

#include <string>

#include "core/impl.hpp"

// The public completion_queue handle, the names of ops and CQ kinds, and a completion's error.

namespace remora {

const char* to_string(op o) noexcept {
    switch (o) {
        case op::read:
            return "read";
        case op::write:
            return "write";
        case op::send:
            return "send";
        case op::recv:
            return "recv";
        case op::remote_write:
            return "remote_write";
        case op::atomic:
            return "atomic";
        case op::flush:
            return "flush";
        case op::publish:
            return "publish";
        case op::unknown:
            break;
    }
    return "unknown";
}
remora::error completion::error() const {
    if (ok()) {
        return {};
    }
    std::string what = std::string(to_string(op)) + " failed";
    if (failed_part != 0 || op == remora::op::publish) {
        what += " at part " + std::to_string(failed_part);
    }
    return remora::error(status, std::move(what));
}

const char* to_string(cq_kind k) noexcept {
    return k == cq_kind::cq ? "cq" : "rcq";
}

// ---------------------------------------------------------------- public handles

result<std::size_t> completion_queue::poll(std::span<completion> out) {
    return detail::impl_of(*this)->poll(out);
}

namespace {

[[gnu::cold, gnu::noinline]] tl::unexpected<error> channel_is_shared() {
    return fail(errc::bad_state,
                "this CQ's completion channel is shared: wait on the connection or channel");
}

}  // namespace

result<std::size_t> completion_queue::wait(std::chrono::milliseconds timeout) {
    if (detail::impl_of(*this)->channel) [[unlikely]] {
        return channel_is_shared();
    }
    return detail::impl_of(*this)->wait(timeout);
}

result<completion> completion_queue::next(std::chrono::milliseconds timeout) {
    if (detail::impl_of(*this)->channel) [[unlikely]] {
        return channel_is_shared();
    }
    const auto deadline = detail::deadline_after(timeout);
    completion c;
    for (;;) {
        auto n = detail::impl_of(*this)->poll({&c, 1});
        if (!n) {
            return fail(n.error());
        }
        if (*n == 1) {
            return c;
        }
        // Rounded up: a wait of the truncated remainder could end before the deadline.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left <= std::chrono::milliseconds(0)) {
            return fail(errc::timed_out, std::string("no completion on the ") +
                                             to_string(detail::impl_of(*this)->kind) + " within " +
                                             std::to_string(timeout.count()) + " ms");
        }
        auto w = detail::impl_of(*this)->wait(left);
        if (!w) {
            return fail(w.error());  // timed_out included: nothing came in time
        }
    }
}

int completion_queue::fd() const noexcept {
    return detail::impl_of(*this)->user_fd();
}
result<bool> completion_queue::arm() {
    auto r = detail::impl_of(*this)->trywait();
    detail::impl_of(*this)->deliver();
    return r;
}
cq_kind completion_queue::kind() const noexcept {
    return detail::impl_of(*this)->kind;
}
std::size_t completion_queue::size() const noexcept {
    return detail::impl_of(*this)->size;
}
std::uint64_t completion_queue::tag() const noexcept {
    return detail::impl_of(*this)->tag;
}
remora::connection* completion_queue::connection() const noexcept {
    // Set on a connection's own CQs only: a shared CQ's completions name theirs by tag.
    const detail::connection_impl* c = detail::impl_of(*this)->conn;
    return c != nullptr ? c->handle : nullptr;
}
}  // namespace remora

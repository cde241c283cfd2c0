// remora/completion_queue.hpp — completions of a connection's operations, and how to wait for them.
//
// Every connection has a completion queue (CQ) for its sends, reads, writes and atomics, and for
// its receives unless the connection has a separate receive CQ (RCQ). A CQ has a completion
// channel: its own (channel_mode::separate), or one shared with the connection's other CQ and
// possibly with other connections (channel_mode::shared, see completion_channel.hpp).
//
// poll() returns how many completions it wrote (0 when none are ready). wait() blocks until the
// CQ's channel fires or the timeout passes and returns how many completions are ready; 0 is the
// documented *no_completion* wake-up: providers may signal a channel for an event that produces no
// completion (tcp signals both CQs of a connection for one socket event). It is not an error; poll
// and wait again. No completion is lost between a poll that found nothing and a wait: wait() arms
// the channel with fi_trywait before it blocks.
//
// Threading: one thread at a time polls or waits on a CQ (its progress owner).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>

#include <remora/result.hpp>

namespace remora {

enum class cq_kind : std::uint8_t { cq, rcq };

enum class op : std::uint8_t {
    unknown,
    read,
    write,
    send,
    recv,          // a receive completed (a send arrived; may carry immediate data)
    remote_write,  // a peer's write with immediate data arrived (target side)
    atomic,        // atomic_write, compare_swap or fetch_add (native or through the service)
    flush,         // a flush (read-after-write or GPSPM) completed: the range is visible/durable
};
const char* to_string(op o) noexcept;
const char* to_string(cq_kind k) noexcept;

struct completion {
    remora::op op = op::unknown;
    std::error_code status;  // empty on success; errc::canceled, errc::disconnected, ... otherwise
    // Bytes received for recv; for remote_write what the provider reports (sockets: the write's
    // length; tcp 1.17: 0); for other operations the provider's report (often 0).
    std::size_t bytes = 0;
    std::uint64_t imm = 0;  // immediate data when has_imm
    bool has_imm = false;
    void* context = nullptr;  // the operation's user context
    [[nodiscard]] bool ok() const noexcept { return !status; }
};

namespace detail {
struct cq_impl;
}

class completion_queue {
  public:
    completion_queue(const completion_queue&) = delete;
    completion_queue& operator=(const completion_queue&) = delete;

    // Writes up to out.size() completions; returns the count (0: none ready).
    [[nodiscard]] result<std::size_t> poll(std::span<completion> out);
    // Blocks until completions are ready or the channel fires (returns the ready count, 0 for a
    // no_completion wake-up), or fails with errc::timed_out. Refused with errc::bad_state when
    // this CQ's channel is shared: wait on the connection or the channel instead.
    [[nodiscard]] result<std::size_t> wait(std::chrono::milliseconds timeout);

    // For the caller's own epoll: fd() becomes readable when the CQ may have completions. Call
    // arm() before blocking on it: false means completions may already be ready, poll first.
    [[nodiscard]] int fd() const noexcept;
    [[nodiscard]] result<bool> arm();

    [[nodiscard]] cq_kind kind() const noexcept;
    [[nodiscard]] std::size_t size() const noexcept;   // effective depth
    [[nodiscard]] std::uint64_t tag() const noexcept;  // the owning connection's tag

    [[nodiscard]] detail::cq_impl* impl() const noexcept { return impl_; }
    explicit completion_queue(detail::cq_impl* impl) noexcept : impl_(impl) {}

  private:
    detail::cq_impl* impl_;
};

}  // namespace remora

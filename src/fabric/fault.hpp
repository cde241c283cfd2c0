// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/fault.hpp — the failure-injection seam: a test makes any wrapped libfabric call
// fail with a chosen -FI_* code, without touching the provider.
//
//   using namespace remora::detail;
//   fabric_fault::arm(fabric_call::mr_reg, -FI_ENOMEM);  // the next fi_mr_reg fails, once
//   ... the call under test ...
//   fabric_fault::disarm();                              // every injection off
//
// A call is addressed by its enumerator or its libfabric name (from_string("fi_cq_read")) and
// by ordinal: arm_nth(fabric_call::cq_read, -FI_EIO, 3) makes the 3rd fi_cq_read from now fail,
// once. A sweep first counts the calls a clean run makes (start_counting, calls), then fails
// each (call, ordinal) in turn.
//
// Arming is process-wide (every domain, every thread): a test arms it just before the call it
// means to break. An armed call returns the code without calling libfabric, and writes nothing
// to its out-parameters. When nothing is armed the wrappers pay one relaxed atomic load.
//
// Threading: every function here may be called from any thread at any time.
#pragma once

#include <rdma/fi_errno.h>

#include <atomic>
#include <cstdint>

namespace remora::detail {

// One enumerator per wrapped libfabric call (the posts one per kind).
enum class fabric_call : std::uint8_t {
    getinfo,
    fabric,
    domain,
    mr_reg,
    endpoint,
    ep_bind,
    enable,
    passive_ep,
    pep_bind,
    listen,
    getname,
    connect,
    accept,
    reject,
    shutdown,
    cancel,
    wait_fd,  // fi_control FI_GETWAIT on a CQ or an EQ
    eq_open,
    eq_read,     // fi_eq_sread
    eq_readerr,  // fi_eq_readerr
    cq_open,
    cq_read,     // fi_cq_read (a zero-count read that only drives progress included)
    cq_readerr,  // fi_cq_readerr
    cq_signal,
    trywait,
    post_send,
    post_recv,
    post_write,
    post_read,
    post_atomic,
    post_fetch_atomic,
    post_compare_atomic,
    close,  // fi_close where its result is reported (fid_handle::close: domain::close)
    av_open,
    av_insert,
    av_remove,
    getopt,        // fi_getopt (the connection-data size, probed at domain open)
    query_atomic,  // fi_query_atomic (native atomics, probed at domain open)
    dupinfo,       // fi_dupinfo: an armed one returns no fi_info (whatever the code)
    allocinfo,     // fi_allocinfo: the same
    eq_write,      // fi_eq_write (close() reports its own conn_event::closed)
    cq_sread,      // fi_cq_sread for no entry: a blocking progress thread's wait (one CQ)
};
inline constexpr std::size_t fabric_call_count =
    static_cast<std::size_t>(fabric_call::cq_sread) + 1;

// The libfabric name ("fi_cq_read"); from_string takes it back (false for an unknown name).
const char* to_string(fabric_call c) noexcept;
bool from_string(const char* name, fabric_call* out) noexcept;

namespace fabric_fault {

// The next `times` calls of `call` return `ret` (a negative -FI_* code) instead of calling
// libfabric. Arming a call again replaces its code and count.
void arm(fabric_call call, int ret, unsigned times = 1);
// The `nth` call of `call` from now (1: the next) returns `ret`, once; the calls before it run
// normally. Replaces whatever was armed for `call`.
void arm_nth(fabric_call call, int ret, unsigned nth);
// The next `times` successful completions read from any CQ come back as error entries instead:
// fi_cq_read returns -FI_EAVAIL, then fi_cq_readerr returns the completion's entry with `err`
// in it (0 included: a provider that reports an error without a code). Completions keep their
// order.
// With `skip`, the first `skip` reads that return completions are left alone.
void arm_error_entry(int err, unsigned times = 1, unsigned skip = 0);
// How many completions were turned into error entries since the process started.
unsigned fired_error_entries() noexcept;
// Every injection off (a diverted entry not yet read is still delivered).
void disarm() noexcept;
// How many calls of `call` were made to fail since the process started.
unsigned fired(fabric_call call) noexcept;
// Counting: from start_counting() on, every wrapped call is counted per call (made to fail or
// not) until stop_counting(); calls() reads a count (0 before any counting). Counting routes the
// wrappers through the slow path, so it is for tests only.
void start_counting() noexcept;
void stop_counting() noexcept;
unsigned long calls(fabric_call call) noexcept;
// libfabric objects (fabric, domain, endpoint, EQ, CQ, MR, ...) opened through the fabric layer
// and not yet closed: a test compares it before and after a failed call to show nothing leaked.
long open_objects() noexcept;

// ---- for the wrappers
// Non-zero while anything is armed, counted, or an error entry is diverted.
inline std::atomic<unsigned> armed_count{0};
inline std::atomic<long> open_count{0};
inline bool armed() noexcept {
    return armed_count.load(std::memory_order_relaxed) != 0;
}
// The armed code for `call` (consuming one of its times), or 0.
int take(fabric_call call) noexcept;
// Whether the next completion read becomes an error entry (arm_error_entry); its err if so.
bool take_error_entry(int* err) noexcept;

}  // namespace fabric_fault

// 0, or the code a test armed for `call`: the wrappers' one check.
inline int injected(fabric_call call) noexcept {
    if (fabric_fault::armed()) [[unlikely]] {
        return fabric_fault::take(call);
    }
    return 0;
}

}  // namespace remora::detail

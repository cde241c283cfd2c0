// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/fault.cpp — the failure-injection seam (see fault.hpp).
#include "fabric/fault.hpp"

#include <array>
#include <mutex>
#include <string_view>

namespace remora::detail {

const char* to_string(fabric_call c) noexcept {
    static constexpr const char* names[fabric_call_count] = {
        "fi_getinfo",
        "fi_fabric",
        "fi_domain",
        "fi_mr_reg",
        "fi_endpoint",
        "fi_ep_bind",
        "fi_enable",
        "fi_passive_ep",
        "fi_pep_bind",
        "fi_listen",
        "fi_getname",
        "fi_connect",
        "fi_accept",
        "fi_reject",
        "fi_shutdown",
        "fi_cancel",
        "fi_control FI_GETWAIT",
        "fi_eq_open",
        "fi_eq_sread",
        "fi_eq_readerr",
        "fi_cq_open",
        "fi_cq_read",
        "fi_cq_readerr",
        "fi_cq_signal",
        "fi_trywait",
        "fi_sendmsg",
        "fi_recvmsg",
        "fi_writemsg",
        "fi_readmsg",
        "fi_atomicmsg",
        "fi_fetch_atomicmsg",
        "fi_compare_atomicmsg",
        "fi_close",
        "fi_av_open",
        "fi_av_insert",
        "fi_av_remove",
        "fi_getopt",
        "fi_query_atomic",
        "fi_dupinfo",
        "fi_allocinfo",
        "fi_eq_write",
        "fi_cq_sread",
    };
    const auto i = static_cast<std::size_t>(c);
    return i < fabric_call_count ? names[i] : "unknown";
}

bool from_string(const char* name, fabric_call* out) noexcept {
    const std::string_view n(name != nullptr ? name : "");
    for (std::size_t i = 0; i < fabric_call_count; ++i) {
        const auto c = static_cast<fabric_call>(i);
        if (n == to_string(c)) {
            *out = c;
            return true;
        }
    }
    return false;
}

namespace fabric_fault {
namespace {

struct armed_call {
    int ret = 0;
    unsigned times = 0;
    unsigned skip = 0;  // calls that run normally before the armed ones (arm_nth)
    unsigned fired = 0;
    unsigned long calls = 0;  // while counting
};

struct state {
    std::mutex mu;
    std::array<armed_call, fabric_call_count> calls{};
    int entry_err = 0;
    unsigned entry_times = 0;
    unsigned entry_skip = 0;
    unsigned entries_fired = 0;
    bool counting = false;
};

state& the_state() {
    static state s;
    return s;
}

}  // namespace

namespace {

void arm_locked(state& s, fabric_call call, int ret, unsigned times, unsigned skip) {
    armed_call& a = s.calls[static_cast<std::size_t>(call)];
    if (a.times != 0) {
        armed_count.fetch_sub(1, std::memory_order_relaxed);
    }
    a.ret = ret;
    a.times = ret != 0 ? times : 0;
    a.skip = skip;
    if (a.times != 0) {
        armed_count.fetch_add(1, std::memory_order_relaxed);
    }
}

}  // namespace

void arm(fabric_call call, int ret, unsigned times) {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    arm_locked(s, call, ret, times, 0);
}

void arm_nth(fabric_call call, int ret, unsigned nth) {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    arm_locked(s, call, ret, nth != 0 ? 1 : 0, nth != 0 ? nth - 1 : 0);
}

void start_counting() noexcept {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    for (armed_call& a : s.calls) {
        a.calls = 0;
    }
    if (!s.counting) {
        s.counting = true;
        armed_count.fetch_add(1, std::memory_order_relaxed);
    }
}

void stop_counting() noexcept {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    if (s.counting) {
        s.counting = false;
        armed_count.fetch_sub(1, std::memory_order_relaxed);
    }
}

unsigned long calls(fabric_call call) noexcept {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    return s.calls[static_cast<std::size_t>(call)].calls;
}

void arm_error_entry(int err, unsigned times, unsigned skip) {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    if (s.entry_times != 0) {
        armed_count.fetch_sub(1, std::memory_order_relaxed);
    }
    s.entry_err = err;
    s.entry_times = times;
    s.entry_skip = skip;
    if (times != 0) {
        armed_count.fetch_add(1, std::memory_order_relaxed);
    }
}

void disarm() noexcept {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    for (armed_call& a : s.calls) {
        if (a.times != 0) {
            a.times = 0;
            armed_count.fetch_sub(1, std::memory_order_relaxed);
        }
    }
    if (s.entry_times != 0) {
        s.entry_times = 0;
        armed_count.fetch_sub(1, std::memory_order_relaxed);
    }
}

unsigned fired(fabric_call call) noexcept {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    return s.calls[static_cast<std::size_t>(call)].fired;
}

unsigned fired_error_entries() noexcept {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    return s.entries_fired;
}

long open_objects() noexcept {
    return open_count.load(std::memory_order_relaxed);
}

int take(fabric_call call) noexcept {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    armed_call& a = s.calls[static_cast<std::size_t>(call)];
    if (s.counting) {
        ++a.calls;
    }
    if (a.times == 0) {
        return 0;
    }
    if (a.skip != 0) {
        --a.skip;
        return 0;
    }
    ++a.fired;
    if (--a.times == 0) {
        armed_count.fetch_sub(1, std::memory_order_relaxed);
    }
    return a.ret;
}

bool take_error_entry(int* err) noexcept {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    if (s.entry_times == 0) {
        return false;
    }
    if (s.entry_skip != 0) {
        --s.entry_skip;
        return false;
    }
    ++s.entries_fired;
    *err = s.entry_err;
    if (--s.entry_times == 0) {
        armed_count.fetch_sub(1, std::memory_order_relaxed);
    }
    return true;
}

}  // namespace fabric_fault
}  // namespace remora::detail

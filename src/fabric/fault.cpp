// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/fault.cpp — the failure-injection seam (see fault.hpp).
#include "fabric/fault.hpp"

#include <array>
#include <mutex>

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
        "fi_control(GETWAIT)",
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
    };
    const auto i = static_cast<std::size_t>(c);
    return i < fabric_call_count ? names[i] : "unknown";
}

namespace fabric_fault {
namespace {

struct armed_call {
    int ret = 0;
    unsigned times = 0;
    unsigned fired = 0;
};

struct state {
    std::mutex mu;
    std::array<armed_call, fabric_call_count> calls{};
    int entry_err = 0;
    unsigned entry_times = 0;
};

state& the_state() {
    static state s;
    return s;
}

}  // namespace

void arm(fabric_call call, int ret, unsigned times) {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    armed_call& a = s.calls[static_cast<std::size_t>(call)];
    if (a.times != 0) {
        armed_count.fetch_sub(1, std::memory_order_relaxed);
    }
    a.ret = ret;
    a.times = ret != 0 ? times : 0;
    if (a.times != 0) {
        armed_count.fetch_add(1, std::memory_order_relaxed);
    }
}

void arm_error_entry(int err, unsigned times) {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    if (s.entry_times != 0) {
        armed_count.fetch_sub(1, std::memory_order_relaxed);
    }
    s.entry_err = err;
    s.entry_times = times;
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

long open_objects() noexcept {
    return open_count.load(std::memory_order_relaxed);
}

int take(fabric_call call) noexcept {
    state& s = the_state();
    std::lock_guard lock(s.mu);
    armed_call& a = s.calls[static_cast<std::size_t>(call)];
    if (a.times == 0) {
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
    *err = s.entry_err;
    if (--s.entry_times == 0) {
        armed_count.fetch_sub(1, std::memory_order_relaxed);
    }
    return true;
}

}  // namespace fabric_fault
}  // namespace remora::detail

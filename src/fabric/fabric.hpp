// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/fabric.hpp — move-only RAII handles over libfabric objects, the provider description
// the other layers hold (fabric_info, opaque to them), and libfabric's return codes by name
// (fabric_errno). src/fabric is the only code that includes <rdma/...>, calls fi_* or names
// libfabric's constants and types: its headers by concern (info, mr, cq, eq, endpoint, context)
// wrap every call, each through the failure-injection seam of fault.hpp, and give the layers
// above remora's names for what they need (completion and bind flags, events, codes).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <remora/result.hpp>

#include "fabric/context.hpp"
#include "fabric/fault.hpp"
#include "fabric/rules.hpp"

namespace remora::detail {

// Owns one libfabric object and fi_close()s it.
template <class T>
class fid_handle {
  public:
    fid_handle() = default;
    explicit fid_handle(T* p) noexcept : p_(p) {}
    fid_handle(const fid_handle&) = delete;
    fid_handle& operator=(const fid_handle&) = delete;
    fid_handle(fid_handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    fid_handle& operator=(fid_handle&& o) noexcept {
        if (this != &o) {
            reset();
            p_ = std::exchange(o.p_, nullptr);
        }
        return *this;
    }
    ~fid_handle() { reset(); }

    void reset() noexcept {
        if (p_ != nullptr) {
            fi_close(&p_->fid);
            if (fabric_rules::on()) [[unlikely]] {
                fabric_rules::forget(&p_->fid);
            }
            p_ = nullptr;
            fabric_fault::open_count.fetch_sub(1, std::memory_order_relaxed);
        }
    }
    // Closes now and returns 0, or fi_close's negative -FI_* code with the object still owned
    // (a later close() or the destructor tries again).
    int close() noexcept {
        if (p_ == nullptr) {
            return 0;
        }
        if (int r = injected(fabric_call::close)) {
            return r;
        }
        if (int r = fi_close(&p_->fid); r != 0) {
            return r;
        }
        if (fabric_rules::on()) [[unlikely]] {
            fabric_rules::forget(&p_->fid);
        }
        p_ = nullptr;
        fabric_fault::open_count.fetch_sub(1, std::memory_order_relaxed);
        return 0;
    }
    // Stops owning without closing: for an object libfabric cannot close safely (it leaks).
    void abandon() noexcept {
        if (p_ != nullptr) {
            p_ = nullptr;
            fabric_fault::open_count.fetch_sub(1, std::memory_order_relaxed);
        }
    }
    T* get() const noexcept { return p_; }
    // For the fabric layer's open wrappers: they count what they opened (see
    // fabric_fault::open_objects).
    T** out() noexcept {
        reset();
        return &p_;
    }
    int opened(int ret) noexcept {
        if (ret == 0 && p_ != nullptr) {
            fabric_fault::open_count.fetch_add(1, std::memory_order_relaxed);
        }
        return ret;
    }
    T* operator->() const noexcept { return p_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }
    fid* as_fid() const noexcept { return &p_->fid; }

  private:
    T* p_ = nullptr;
};

using fabric_handle = fid_handle<fid_fabric>;
using domain_handle = fid_handle<fid_domain>;
using ep_handle = fid_handle<fid_ep>;
using pep_handle = fid_handle<fid_pep>;
using eq_handle = fid_handle<fid_eq>;
using cq_handle = fid_handle<fid_cq>;
using mr_handle = fid_handle<fid_mr>;
using av_handle = fid_handle<fid_av>;

// A provider's description (libfabric's fi_info). The layers above hold it and hand it back to
// this layer; only this layer reads or changes its fields (fabric/info.hpp).
using fabric_info = fi_info;

// libfabric's return codes the layers above tell apart, by name. Positive, as libfabric defines
// them; its calls return them negated (`ret == -fabric_errno::again`). Each is libfabric's own
// value, so a comparison costs what it did with libfabric's name.
namespace fabric_errno {
inline constexpr int again = FI_EAGAIN;         // a queue is full, or nothing to read yet
inline constexpr int avail = FI_EAVAIL;         // an error entry is next (read it with *_readerr)
inline constexpr int timed_out = FI_ETIMEDOUT;  // a wait ran out
inline constexpr int canceled = FI_ECANCELED;   // an operation was canceled
inline constexpr int interrupted = FI_EINTR;    // a wait was interrupted by a signal
inline constexpr int not_connected = FI_ENOTCONN;
inline constexpr int connection_reset = FI_ECONNRESET;
inline constexpr int connection_aborted = FI_ECONNABORTED;
inline constexpr int no_entry = FI_ENOENT;         // sockets' answer once its peer is gone
inline constexpr int not_implemented = FI_ENOSYS;  // the provider lacks the call
inline constexpr int invalid = FI_EINVAL;
inline constexpr int not_supported = FI_EOPNOTSUPP;
inline constexpr int no_data = FI_ENODATA;      // fi_getinfo: no provider matches
inline constexpr int too_small = FI_ETOOSMALL;  // a buffer is too small (the size is returned)
inline constexpr int key_in_use = FI_ENOKEY;    // a requested memory key is taken
inline constexpr int other = FI_EOTHER;         // unspecified
}  // namespace fabric_errno

// A peer's entry in an address vector, as posts name their destination and CQ reads a message's
// source (libfabric's fi_addr_t, the same type: the layers above hold it and pass it back).
using fabric_addr = std::uint64_t;
static_assert(std::is_same_v<fabric_addr, fi_addr_t>);
// Addresses with a meaning of their own.
inline constexpr fabric_addr fabric_addr_unspec = FI_ADDR_UNSPEC;      // a receive from anyone
inline constexpr fabric_addr fabric_addr_notavail = FI_ADDR_NOTAVAIL;  // no entry

struct info_deleter {
    void operator()(fi_info* i) const noexcept { fi_freeinfo(i); }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

// Empty when libfabric is out of memory (or the seam's fabric_call::dupinfo is armed).
inline info_ptr dup_info(const fi_info* i) {
    if (injected(fabric_call::dupinfo) != 0) {
        return nullptr;
    }
    return info_ptr(fi_dupinfo(i));
}
inline info_ptr alloc_info() {
    if (injected(fabric_call::allocinfo) != 0) {
        return nullptr;
    }
    return info_ptr(fi_allocinfo());
}

// A libfabric return code (negative FI_* value) as a remora error with context.
error fabric_error(int ret, const std::string& what);
// Maps an FI_* errno (positive) from a completion or event to remora's status code; FI_EOTHER
// (unspecified) is errc::provider_error.
std::error_code status_from_fi(int fi_errno);
// Whether a failed operation's error says the transport to the peer is gone (reset, aborted,
// not connected, shut down, broken pipe), as opposed to an error of that operation alone.
bool transport_lost(int fi_errno) noexcept;
// fi_strerror of a code of either sign.
const char* fabric_strerror(long ret) noexcept;

}  // namespace remora::detail

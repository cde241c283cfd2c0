// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/fabric.hpp — move-only RAII handles over libfabric objects and the libfabric types
// the other layers hold (fi_context2, fi_info, ...). src/fabric is the only code that includes
// <rdma/...> or calls fi_*: its headers by concern (info, mr, cq, eq, endpoint) wrap every call,
// each through the failure-injection seam of fault.hpp.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <memory>
#include <string>
#include <utility>

#include <remora/result.hpp>

#include "fabric/fault.hpp"

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

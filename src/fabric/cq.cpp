// SPDX-License-Identifier: BSD-3-Clause
#include "fabric/cq.hpp"

#include <mutex>
#include <vector>

namespace remora::detail {

// The completion flags are libfabric's bits, so the completion path reads them as they come.
static_assert(cq_flag_send == FI_SEND && cq_flag_recv == FI_RECV && cq_flag_read == FI_READ &&
              cq_flag_write == FI_WRITE && cq_flag_atomic == FI_ATOMIC &&
              cq_flag_remote_write == FI_REMOTE_WRITE && cq_flag_remote_data == FI_REMOTE_CQ_DATA);

int cq_open(fid_domain* domain, std::size_t size, cq_handle& out, bool wait_fd) {
    if (int r = injected(fabric_call::cq_open)) {
        return r;
    }
    fi_cq_attr attr{};
    attr.size = size;
    attr.format = FI_CQ_FORMAT_DATA;
    attr.wait_obj = wait_fd ? FI_WAIT_FD : FI_WAIT_NONE;
    attr.wait_cond = FI_CQ_COND_NONE;
    return out.opened(fi_cq_open(domain, &attr, out.out(), nullptr));
}

int wait_fd(fid* f, int* fd) {
    if (int r = injected(fabric_call::wait_fd)) {
        return r;
    }
    return fi_control(f, FI_GETWAIT, fd);
}

int trywait(fid_fabric* fabric, fid* f) {
    if (int r = injected(fabric_call::trywait)) {
        return r;
    }
    return fi_trywait(fabric, &f, 1);
}

int cq_signal(fid_cq* cq) {
    if (int r = injected(fabric_call::cq_signal)) {
        return r;
    }
    return fi_cq_signal(cq);
}

int cq_wait_entry(fid_cq* cq, int timeout_ms) {
    if (int r = injected(fabric_call::cq_sread)) {
        return r;
    }
    return static_cast<int>(fi_cq_sread(cq, nullptr, 0, nullptr, timeout_ms));
}

namespace fabric_fault {
namespace {

// Completions turned into error entries by arm_error_entry, each waiting for its CQ's next
// fi_cq_readerr. While one waits, armed() stays true so reads come here.
struct diverted {
    fid_cq* cq;
    fi_cq_err_entry entry;
};
std::mutex diverted_mu;
std::vector<diverted> diverted_entries;

bool has_diverted(fid_cq* cq) {
    for (const diverted& d : diverted_entries) {
        if (d.cq == cq) {
            return true;
        }
    }
    return false;
}

}  // namespace

ssize_t cq_read_slow(fid_cq* cq, fi_cq_data_entry* buf, std::size_t count, fabric_addr* src) {
    {
        std::lock_guard lock(diverted_mu);
        if (has_diverted(cq)) {
            return -FI_EAVAIL;  // as a provider does while an error entry is next
        }
    }
    if (int r = take(fabric_call::cq_read)) {
        return r;
    }
    const ssize_t got =
        src != nullptr ? fi_cq_readfrom(cq, buf, count, src) : fi_cq_read(cq, buf, count);
    int err = 0;
    if (got <= 0 || !take_error_entry(&err)) {
        return got;
    }
    // The last completion read becomes the error entry: those before it are returned now, and
    // the next read reports -FI_EAVAIL, so the order is kept.
    const fi_cq_data_entry& last = buf[got - 1];
    diverted d{cq, {}};
    d.entry.op_context = last.op_context;
    d.entry.flags = last.flags;
    d.entry.len = last.len;
    d.entry.buf = last.buf;
    d.entry.data = last.data;
    d.entry.err = err;
    std::lock_guard lock(diverted_mu);
    diverted_entries.push_back(d);
    armed_count.fetch_add(1, std::memory_order_relaxed);
    return got > 1 ? got - 1 : -FI_EAVAIL;
}

ssize_t cq_readerr_slow(fid_cq* cq, fi_cq_err_entry* entry) {
    if (int r = take(fabric_call::cq_readerr)) {
        return r;
    }
    {
        std::lock_guard lock(diverted_mu);
        for (auto it = diverted_entries.begin(); it != diverted_entries.end(); ++it) {
            if (it->cq == cq) {
                *entry = it->entry;
                diverted_entries.erase(it);
                armed_count.fetch_sub(1, std::memory_order_relaxed);
                return 1;
            }
        }
    }
    return fi_cq_readerr(cq, entry, 0);
}

}  // namespace fabric_fault
}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
#include "fabric/eq.hpp"

#include <cstring>

namespace remora::detail {

int eq_open(fid_fabric* fabric, std::size_t size, eq_handle& out) {
    if (int r = injected(fabric_call::eq_open)) {
        return r;
    }
    fi_eq_attr attr{};
    attr.size = size;
    attr.wait_obj = FI_WAIT_FD;
    return out.opened(fi_eq_open(fabric, &attr, out.out(), nullptr));
}

ssize_t eq_sread(fid_eq* eq, std::uint32_t* event, void* buf, std::size_t len, int timeout_ms) {
    if (int r = injected(fabric_call::eq_read)) {
        return r;
    }
    return fi_eq_sread(eq, event, buf, len, timeout_ms, 0);
}

ssize_t eq_readerr(fid_eq* eq, fi_eq_err_entry* entry) {
    if (int r = injected(fabric_call::eq_readerr)) {
        return r;
    }
    return fi_eq_readerr(eq, entry, 0);
}

ssize_t eq_write(fid_eq* eq, std::uint32_t event, const void* buf, std::size_t len) {
    if (int r = injected(fabric_call::eq_write)) {
        return r;
    }
    return fi_eq_write(eq, event, buf, len, 0);
}

fi_info* cm_entry_info(const void* buf) noexcept {
    fi_eq_cm_entry entry;
    std::memcpy(&entry, buf, sizeof(entry));
    return entry.info;
}

bool eq_write_shutdown(fid_eq* eq) {
    fi_eq_cm_entry entry{};
    return eq_write(eq, FI_SHUTDOWN, &entry, sizeof(entry)) == static_cast<ssize_t>(sizeof(entry));
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/eq.hpp — event queues (connection management): open with an fd to wait on, a
// blocking read with a timeout, and the error entry.
//
// Every function returns libfabric's value (a size, 0 or a negative -FI_* code) or the code armed
// for it at the seam (fault.hpp). Threading: as libfabric's calls on the same EQ.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "fabric/fabric.hpp"

namespace remora::detail {

// Opens an EQ of `size` entries that can be waited on through an fd (see wait_fd in cq.hpp).
int eq_open(fid_fabric* fabric, std::size_t size, eq_handle& out);
// fi_eq_sread: the next event into `buf` (its fi_eq_cm_entry and private data), within
// `timeout_ms` (0: do not block). Bytes read, -FI_EAGAIN / -FI_ETIMEDOUT, or -FI_EAVAIL.
ssize_t eq_sread(fid_eq* eq, std::uint32_t* event, void* buf, std::size_t len, int timeout_ms);
ssize_t eq_readerr(fid_eq* eq, fi_eq_err_entry* entry);
// fi_eq_write: queues `event` with `buf` as its entry (the EQ's fd becomes readable).
ssize_t eq_write(fid_eq* eq, std::uint32_t event, const void* buf, std::size_t len);

}  // namespace remora::detail

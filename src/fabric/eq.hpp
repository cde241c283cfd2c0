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

// The connection-manager events remora reads (libfabric's event numbers).
enum class cm_event : std::uint32_t {
    connreq = FI_CONNREQ,      // a connection request, at a listener
    connected = FI_CONNECTED,  // the connection is established
    shutdown = FI_SHUTDOWN,    // the connection ended
};
// An error event (libfabric's fi_eq_err_entry: err, the positive code, and err_data).
using eq_error_entry = fi_eq_err_entry;

// Opens an EQ of `size` entries that can be waited on through an fd (see wait_fd in cq.hpp).
int eq_open(fid_fabric* fabric, std::size_t size, eq_handle& out);
// The bytes of a connection-manager entry before its private data: eq_sread's `buf` holds the
// entry, then the data.
inline constexpr std::size_t cm_entry_size = sizeof(fi_eq_cm_entry);
// The provider description a connection-manager entry read into `buf` carries (a connection
// request's: the reader owns it; else null).
fi_info* cm_entry_info(const void* buf) noexcept;
// fi_eq_sread: the next event into `buf` (its connection-manager entry and private data), within
// `timeout_ms` (0: do not block). Bytes read, -FI_EAGAIN / -FI_ETIMEDOUT, or -FI_EAVAIL.
ssize_t eq_sread(fid_eq* eq, std::uint32_t* event, void* buf, std::size_t len, int timeout_ms);
ssize_t eq_readerr(fid_eq* eq, fi_eq_err_entry* entry);
// fi_eq_write: queues `event` with `buf` as its entry (the EQ's fd becomes readable).
ssize_t eq_write(fid_eq* eq, std::uint32_t event, const void* buf, std::size_t len);
// Queues a shutdown event of this side's own (an empty entry); whether it was queued.
bool eq_write_shutdown(fid_eq* eq);

}  // namespace remora::detail

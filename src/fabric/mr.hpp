// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/mr.hpp — memory registration (fi_mr_reg, fi_mr_desc, fi_mr_key).
//
// Returns libfabric's code (0 or -FI_*) or the one armed at the seam (fault.hpp).
// Threading: as libfabric's calls (FI_THREAD_SAFE domains).
#pragma once

#include <cstddef>
#include <cstdint>

#include "fabric/fabric.hpp"

namespace remora::detail {

// Registers [buf, buf + len) for `access` (FI_READ, FI_REMOTE_WRITE, ...) with `requested_key`
// (ignored by FI_MR_PROV_KEY providers). On failure `out` stays empty.
int mr_reg(fid_domain* domain, void* buf, std::size_t len, std::uint64_t access,
           std::uint64_t requested_key, mr_handle& out);
inline void* mr_desc(fid_mr* mr) noexcept {
    return fi_mr_desc(mr);
}
// FI_KEY_NOTAVAIL for raw keys (FI_MR_RAW).
inline std::uint64_t mr_key(fid_mr* mr) noexcept {
    return fi_mr_key(mr);
}

}  // namespace remora::detail

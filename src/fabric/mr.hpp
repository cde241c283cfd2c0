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

// What a registration lets the memory be used for (libfabric's access bits, combined with |).
using mr_access = std::uint64_t;
inline constexpr mr_access mr_access_send = FI_SEND;                  // source of a send
inline constexpr mr_access mr_access_recv = FI_RECV;                  // destination of a receive
inline constexpr mr_access mr_access_read = FI_READ;                  // destination of a read
inline constexpr mr_access mr_access_write = FI_WRITE;                // source of a write
inline constexpr mr_access mr_access_remote_read = FI_REMOTE_READ;    // peers read from it
inline constexpr mr_access mr_access_remote_write = FI_REMOTE_WRITE;  // peers write into it

// Registers [buf, buf + len) for `access` with `requested_key` (ignored by providers that pick
// their keys, mr_mode::prov_key). On failure `out` stays empty.
int mr_reg(fid_domain* domain, void* buf, std::size_t len, mr_access access,
           std::uint64_t requested_key, mr_handle& out);
// Under verbs rules (rules.hpp): the registration of an enrolled domain, its key drawn by the
// mode; and its descriptor, the mode's own (translated back at the post).
int rules_mr_reg(fid_domain* domain, void* buf, std::size_t len, mr_access access,
                 std::uint64_t requested_key, mr_handle& out);
void* rules_mr_desc(fid_mr* mr) noexcept;
inline void* mr_desc(fid_mr* mr) noexcept {
    if (fabric_rules::on()) [[unlikely]] {
        return rules_mr_desc(mr);
    }
    return fi_mr_desc(mr);
}
// What mr_key returns for a provider whose keys do not fit 64 bits (raw keys, FI_MR_RAW).
inline constexpr std::uint64_t mr_key_unavailable = FI_KEY_NOTAVAIL;
// The region's key, or mr_key_unavailable.
inline std::uint64_t mr_key(fid_mr* mr) noexcept {
    return fi_mr_key(mr);
}

}  // namespace remora::detail

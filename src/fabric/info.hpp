// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/info.hpp — providers and their fabric and domain objects: fi_getinfo, fi_fabric,
// fi_domain, and the passive-endpoint option query the domain makes at open.
//
// Every function returns libfabric's code (0 or a negative -FI_* value), or the code armed for it
// at the failure-injection seam (fault.hpp). Threading: as libfabric's calls (FI_THREAD_SAFE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "fabric/fabric.hpp"

namespace remora::detail {

// fi_getinfo at API version 1.17; on success `out` owns the list.
int getinfo(const char* node, const char* service, std::uint64_t flags, const fi_info* hints,
            info_ptr& out);
int open_fabric(fi_fabric_attr* attr, fabric_handle& out);
int open_domain(fid_fabric* fabric, fi_info* info, domain_handle& out);
// The provider's private-data limit for connection requests (FI_OPT_CM_DATA_SIZE of a passive
// endpoint opened on `info`), if it tells.
std::optional<std::size_t> cm_data_size(fid_fabric* fabric, fi_info* info);
// Whether the domain runs remora's three native atomics on 64-bit words (fi_query_atomic of
// FI_ATOMIC_WRITE, fetching FI_SUM and comparing FI_CSWAP): a provider may list FI_ATOMIC and
// still refuse some of them (net).
bool has_word_atomics(fid_domain* domain);
// Replaces `info`'s source address by the string `name` (FI_ADDR_STR providers: shm names an
// endpoint after its source address, and two processes using the same one collide).
void set_source_name(fi_info* info, const char* name) noexcept;

}  // namespace remora::detail

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

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/av.hpp — address vectors (fi_av(3)): the table of peers an RDM endpoint posts to.
// Open one, insert a peer's raw address (the bytes its endpoint's fi_getname returned) and get
// the fabric_addr (fi_addr_t) the posts name as their destination, remove it again.
//
// Every function returns libfabric's code (0, a count, or a negative -FI_* value), or the code
// armed for it at the failure-injection seam (fault.hpp). Threading: as libfabric's calls on the
// same AV (remora inserts and removes from one thread, under the owning endpoint's rules).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "fabric/fabric.hpp"

namespace remora::detail {

// The AV type to ask for: the provider's preference (domain_attr->av_type) when it states one,
// else FI_AV_TABLE (the first peer inserted is entry 0).
fi_av_type preferred_av_type(const fi_info* info) noexcept;
// Opens an AV of `type` sized for `count` addresses.
int av_open(fid_domain* domain, fi_av_type type, std::size_t count, av_handle& out);
// Inserts one address; on success returns 1 and sets `*out`. 0 (nothing inserted) or a negative
// code otherwise.
int av_insert(fid_av* av, const void* addr, fabric_addr* out);
int av_remove(fid_av* av, fabric_addr addr);
// Whether `addr` can be an address of the format `addr_format` (fi_info::addr_format) on the
// provider whose endpoint has the address `own`: the exact size for fixed-size socket formats
// (with the family checked), for FI_ADDR_STR a printable NUL-terminated name with the same
// scheme ("fi_shm://", ...), else `own`'s size. It does not say that anybody is there.
bool address_plausible(std::uint32_t addr_format, std::span<const std::byte> addr,
                       std::span<const std::byte> own) noexcept;
// The address format name for messages ("FI_SOCKADDR_IN", ...).
const char* address_format_name(std::uint32_t addr_format) noexcept;

}  // namespace remora::detail

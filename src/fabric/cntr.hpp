// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/cntr.hpp — counters (fi_cntr): the remote-access counter the progress thread reads
// to see a peer's one-sided reads and writes (FI_RMA_EVENT), which leave no CQ entry on the
// target.
//
// Every function returns libfabric's value (0 or a negative -FI_* code). Threading: as
// libfabric's calls on the same counter.
#pragma once

#include <cstdint>

#include "fabric/fabric.hpp"

namespace remora::detail {

using cntr_handle = fid_handle<fid_cntr>;

// Opens a counter of events (FI_CNTR_EVENTS_COMP) without a wait object: it is read, never
// waited on.
int cntr_open(fid_domain* domain, cntr_handle& out);
// fi_cntr_read for the counter's value (a read also drives manual-progress providers bound to it).
std::uint64_t cntr_value(fid_cntr* cntr);

}  // namespace remora::detail

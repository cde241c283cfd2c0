// SPDX-License-Identifier: BSD-3-Clause
// tools/remora/baseline_raw.hpp — what the two plain-libfabric baselines (baseline.cpp for MSG,
// baseline_rdm.cpp for RDM) share: their error type and the check that turns a libfabric return
// into it. Written against libfabric directly, like them (excepted by name from the layering
// check).
#pragma once

#include <rdma/fi_errno.h>

#include <string>

namespace remora::tool::raw {

// A failed libfabric call in a baseline: the call as written and libfabric's message.
struct raw_error {
    std::string what;
};

}  // namespace remora::tool::raw

// Throws raw_error naming `call` when it returns non-zero.
#define RAW_CHECK(call)                                                                          \
    do {                                                                                         \
        int rc_ = static_cast<int>(call);                                                        \
        if (rc_ != 0)                                                                            \
            throw ::remora::tool::raw::raw_error{std::string(#call) + ": " + fi_strerror(-rc_)}; \
    } while (0)

// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/context.hpp — the provider's context area of an operation (libfabric's fi_context2):
// storage of its size and alignment that the provider may use from the post to the completion.
// An operation record starts with one, so the record's address is the context its post passes
// and its completion returns. endpoint.cpp checks the size and alignment against libfabric's.
#pragma once

namespace remora::detail {

struct provider_context {
    void* internal[8];
};

}  // namespace remora::detail

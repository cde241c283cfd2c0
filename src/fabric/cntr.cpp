// SPDX-License-Identifier: BSD-3-Clause
#include "fabric/cntr.hpp"

namespace remora::detail {

int cntr_open(fid_domain* domain, cntr_handle& out) {
    fi_cntr_attr attr{};
    attr.events = FI_CNTR_EVENTS_COMP;
    attr.wait_obj = FI_WAIT_NONE;
    return out.opened(fi_cntr_open(domain, &attr, out.out(), nullptr));
}

std::uint64_t cntr_value(fid_cntr* cntr) {
    return fi_cntr_read(cntr);
}

}  // namespace remora::detail

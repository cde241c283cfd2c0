// SPDX-License-Identifier: BSD-3-Clause
#include "fabric/mr.hpp"

namespace remora::detail {

int mr_reg(fid_domain* domain, void* buf, std::size_t len, std::uint64_t access,
           std::uint64_t requested_key, mr_handle& out) {
    if (int r = injected(fabric_call::mr_reg)) {
        return r;
    }
    if (fabric_rules::on()) [[unlikely]] {
        return rules_mr_reg(domain, buf, len, access, requested_key, out);
    }
    return out.opened(fi_mr_reg(domain, buf, len, access, 0, requested_key, 0, out.out(), nullptr));
}

}  // namespace remora::detail

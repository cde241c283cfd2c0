// SPDX-License-Identifier: BSD-3-Clause
#include "fabric/info.hpp"

#include <cstdlib>
#include <cstring>

#include "fabric/endpoint.hpp"

namespace remora::detail {

int getinfo(const char* node, const char* service, std::uint64_t flags, const fi_info* hints,
            info_ptr& out) {
    if (int r = injected(fabric_call::getinfo)) {
        return r;
    }
    fi_info* list = nullptr;
    const int ret = fi_getinfo(FI_VERSION(1, 17), node, service, flags, hints, &list);
    if (ret == 0) {
        out.reset(list);
    }
    return ret;
}

int open_fabric(fi_fabric_attr* attr, fabric_handle& out) {
    if (int r = injected(fabric_call::fabric)) {
        return r;
    }
    return out.opened(fi_fabric(attr, out.out(), nullptr));
}

int open_domain(fid_fabric* fabric, fi_info* info, domain_handle& out) {
    if (int r = injected(fabric_call::domain)) {
        return r;
    }
    return out.opened(fi_domain(fabric, info, out.out(), nullptr));
}

std::optional<std::size_t> cm_data_size(fid_fabric* fabric, fi_info* info) {
    pep_handle pep;
    if (open_passive_ep(fabric, info, pep) != 0) {
        return std::nullopt;
    }
    size_t sz = 0;
    size_t len = sizeof(sz);
    if (injected(fabric_call::getopt) != 0) {
        return std::nullopt;
    }
    if (fi_getopt(pep.as_fid(), FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &sz, &len) != 0) {
        return std::nullopt;
    }
    return sz;
}

bool has_word_atomics(fid_domain* domain) {
    struct query {
        fi_op op;
        std::uint64_t flags;
    };
    for (const query q : {query{FI_ATOMIC_WRITE, 0}, query{FI_SUM, FI_FETCH_ATOMIC},
                          query{FI_CSWAP, FI_COMPARE_ATOMIC}}) {
        fi_atomic_attr attr{};
        if (injected(fabric_call::query_atomic) != 0) {
            return false;
        }
        if (fi_query_atomic(domain, FI_UINT64, q.op, &attr, q.flags) != 0 || attr.count < 1) {
            return false;
        }
    }
    return true;
}

void set_source_name(fi_info* info, const char* name) noexcept {
    std::free(info->src_addr);
    info->src_addr = strdup(name);
    info->src_addrlen = info->src_addr != nullptr ? std::strlen(name) + 1 : 0;
}

}  // namespace remora::detail

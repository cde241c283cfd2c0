// SPDX-License-Identifier: BSD-3-Clause
#include "fabric/endpoint.hpp"

namespace remora::detail {

static_assert(sizeof(provider_context) == sizeof(fi_context2) &&
                  alignof(provider_context) == alignof(fi_context2),
              "provider_context must be libfabric's fi_context2 in size and alignment");

int open_endpoint(fid_domain* domain, fi_info* info, ep_handle& out) {
    if (int r = injected(fabric_call::endpoint)) {
        return r;
    }
    const int ret = out.opened(fi_endpoint(domain, info, out.out(), nullptr));
    if (ret == 0 && fabric_rules::on()) [[unlikely]] {
        fabric_rules::endpoint_opened(domain, out.as_fid());
    }
    return ret;
}

int open_srx(fid_domain* domain, const fi_info* info, std::size_t size, ep_handle& out) {
    if (int r = injected(fabric_call::endpoint)) {
        return r;
    }
    fi_rx_attr attr = *info->rx_attr;
    attr.size = size;
    attr.iov_limit = 1;
    attr.op_flags |= FI_COMPLETION;
    const int ret = out.opened(fi_srx_context(domain, &attr, out.out(), nullptr));
    if (ret == 0 && fabric_rules::on()) [[unlikely]] {
        fabric_rules::endpoint_opened(domain, out.as_fid());
    }
    return ret;
}

int ep_bind(fid_ep* ep, fid* f, bind_flags flags) {
    if (int r = injected(fabric_call::ep_bind)) {
        return r;
    }
    return fi_ep_bind(ep, f, flags);
}

int ep_enable(fid_ep* ep) {
    if (int r = injected(fabric_call::enable)) {
        return r;
    }
    return fi_enable(ep);
}

int ep_connect(fid_ep* ep, const fi_info* info, const void* data, std::size_t len) {
    if (int r = injected(fabric_call::connect)) {
        return r;
    }
    if (fabric_rules::on()) [[unlikely]] {
        if (int r = fabric_rules::check_cm_data(&ep->fid, len, "fi_connect")) {
            return r;
        }
    }
    return fi_connect(ep, info->dest_addr, data, len);
}

int ep_accept(fid_ep* ep, const void* data, std::size_t len) {
    if (int r = injected(fabric_call::accept)) {
        return r;
    }
    if (fabric_rules::on()) [[unlikely]] {
        if (int r = fabric_rules::check_cm_data(&ep->fid, len, "fi_accept")) {
            return r;
        }
    }
    return fi_accept(ep, data, len);
}

int ep_shutdown(fid_ep* ep) {
    if (int r = injected(fabric_call::shutdown)) {
        return r;
    }
    return fi_shutdown(ep, 0);
}

ssize_t ep_cancel(fid* ep, void* context) {
    if (int r = injected(fabric_call::cancel)) {
        return r;
    }
    return fi_cancel(ep, context);
}

int open_passive_ep(fid_fabric* fabric, fi_info* info, pep_handle& out) {
    if (int r = injected(fabric_call::passive_ep)) {
        return r;
    }
    return out.opened(fi_passive_ep(fabric, info, out.out(), nullptr));
}

int pep_bind(fid_pep* pep, fid* eq) {
    if (int r = injected(fabric_call::pep_bind)) {
        return r;
    }
    return fi_pep_bind(pep, eq, 0);
}

int pep_listen(fid_pep* pep) {
    if (int r = injected(fabric_call::listen)) {
        return r;
    }
    return fi_listen(pep);
}

int pep_reject(fid_pep* pep, const fi_info* request, const void* data, std::size_t len) {
    if (int r = injected(fabric_call::reject)) {
        return r;
    }
    return fi_reject(pep, request->handle, data, len);
}

int getname(fid* f, void* addr, std::size_t* len) {
    if (int r = injected(fabric_call::getname)) {
        return r;
    }
    return fi_getname(f, addr, len);
}

}  // namespace remora::detail

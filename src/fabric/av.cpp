// SPDX-License-Identifier: BSD-3-Clause
#include "fabric/av.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <string_view>

namespace remora::detail {

fi_av_type preferred_av_type(const fi_info* info) noexcept {
    if (info != nullptr && info->domain_attr != nullptr &&
        info->domain_attr->av_type == FI_AV_MAP) {
        return FI_AV_MAP;
    }
    return FI_AV_TABLE;
}

int av_open(fid_domain* domain, fi_av_type type, std::size_t count, av_handle& out) {
    if (int r = injected(fabric_call::av_open)) {
        return r;
    }
    fi_av_attr attr{};
    attr.type = type;
    attr.count = count;
    return out.opened(fi_av_open(domain, &attr, out.out(), nullptr));
}

int av_insert(fid_av* av, const void* addr, fabric_addr* out) {
    if (int r = injected(fabric_call::av_insert)) {
        return r;
    }
    return fi_av_insert(av, addr, 1, out, 0, nullptr);
}

int av_remove(fid_av* av, fabric_addr addr) {
    if (int r = injected(fabric_call::av_remove)) {
        return r;
    }
    return fi_av_remove(av, &addr, 1, 0);
}

bool address_plausible(std::uint32_t addr_format, std::span<const std::byte> addr,
                       std::span<const std::byte> own) noexcept {
    if (addr.empty()) {
        return false;
    }
    sa_family_t family = 0;
    if (addr.size() >= sizeof(sa_family_t)) {
        std::memcpy(&family, addr.data(), sizeof(family));
    }
    switch (addr_format) {
        case FI_SOCKADDR_IN:
            return addr.size() == sizeof(sockaddr_in) && family == AF_INET;
        case FI_SOCKADDR_IN6:
            return addr.size() == sizeof(sockaddr_in6) && family == AF_INET6;
        case FI_SOCKADDR:
            return (addr.size() == sizeof(sockaddr_in) && family == AF_INET) ||
                   (addr.size() == sizeof(sockaddr_in6) && family == AF_INET6);
        case FI_ADDR_STR: {
            // A printable name ending in its NUL ("fi_shm://...", "fi_sockaddr_in://...").
            if (addr.size() < 2 || addr.back() != std::byte{0}) {
                return false;
            }
            for (std::size_t i = 0; i + 1 < addr.size(); ++i) {
                const auto ch = static_cast<unsigned char>(addr[i]);
                if (ch < 0x20 || ch > 0x7e) {
                    return false;
                }
            }
            const std::string_view a(reinterpret_cast<const char*>(addr.data()), addr.size());
            const std::string_view o(reinterpret_cast<const char*>(own.data()), own.size());
            const auto scheme = o.find("://");
            return scheme == std::string_view::npos ||
                   a.substr(0, scheme + 3) == o.substr(0, scheme + 3);
        }
        default:
            return addr.size() == own.size();
    }
}

const char* address_format_name(std::uint32_t addr_format) noexcept {
    switch (addr_format) {
        case FI_SOCKADDR:
            return "FI_SOCKADDR";
        case FI_SOCKADDR_IN:
            return "FI_SOCKADDR_IN";
        case FI_SOCKADDR_IN6:
            return "FI_SOCKADDR_IN6";
        case FI_ADDR_STR:
            return "FI_ADDR_STR";
        default:
            return "a provider-specific format";
    }
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/base/result.cpp — the base layer's error category: remora::errc names and messages
// (include/remora/result.hpp). The libfabric error mapping is the fabric layer's
// (src/fabric/error.cpp).
#include <remora/result.hpp>

namespace remora {
namespace {

class remora_category_impl final : public std::error_category {
  public:
    const char* name() const noexcept override { return "remora"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
            case errc::ok:
                return "success";
            case errc::invalid_argument:
                return "invalid argument";
            case errc::out_of_range:
                return "out of range";
            case errc::access_denied:
                return "access denied";
            case errc::not_supported:
                return "not supported";
            case errc::too_large:
                return "too large";
            case errc::would_block:
                return "would block";
            case errc::timed_out:
                return "timed out";
            case errc::connection_refused:
                return "connection refused";
            case errc::rejected:
                return "rejected by peer";
            case errc::unreachable:
                return "unreachable";
            case errc::disconnected:
                return "disconnected";
            case errc::canceled:
                return "canceled";
            case errc::malformed_descriptor:
                return "malformed descriptor";
            case errc::bad_state:
                return "bad state";
            case errc::provider_error:
                return "provider error";
        }
        return "unknown remora error";
    }
};

}  // namespace

const std::error_category& remora_category() noexcept {
    static const remora_category_impl c;
    return c;
}

std::string error::what() const {
    if (message_.empty()) {
        return code_.message();
    }
    return message_ + ": " + code_.message();
}

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/error.cpp — libfabric's error numbers as remora errors.
#include <cerrno>

#include <remora/result.hpp>

#include "fabric/fabric.hpp"

namespace remora {
namespace {

class fabric_category_impl final : public std::error_category {
  public:
    const char* name() const noexcept override { return "libfabric"; }
    std::string message(int ev) const override { return fi_strerror(ev); }
};

}  // namespace

const std::error_category& fabric_category() noexcept {
    static const fabric_category_impl c;
    return c;
}

namespace detail {

const char* fabric_strerror(long ret) noexcept {
    return fi_strerror(static_cast<int>(ret < 0 ? -ret : ret));
}

bool transport_lost(int fi_errno) noexcept {
    switch (fi_errno < 0 ? -fi_errno : fi_errno) {
        case FI_ECONNRESET:
        case FI_ECONNABORTED:
        case FI_ENOTCONN:
        case FI_ESHUTDOWN:
        case EPIPE:
            return true;
        default:
            return false;
    }
}

std::error_code status_from_fi(int e) {
    if (e < 0) {
        e = -e;
    }
    switch (e) {
        case 0:
            return {};
        case FI_ECANCELED:
            return make_error_code(errc::canceled);
        case FI_ECONNRESET:
        case FI_ECONNABORTED:
        case FI_ENOTCONN:
        case FI_ESHUTDOWN:
        case FI_EIO:  // sockets fails in-flight operations with EIO when its peer goes away
            return make_error_code(errc::disconnected);
        case FI_ECONNREFUSED:
            return make_error_code(errc::connection_refused);
        case FI_ETIMEDOUT:
            return make_error_code(errc::timed_out);
        case FI_EAGAIN:
            return make_error_code(errc::would_block);
        case FI_ENOSYS:
        case FI_EOPNOTSUPP:
            return make_error_code(errc::not_supported);
        case FI_EHOSTUNREACH:
        case FI_ENETUNREACH:
        case FI_EADDRNOTAVAIL:
            return make_error_code(errc::unreachable);
        case FI_EINVAL:
            return make_error_code(errc::invalid_argument);
        case FI_EMSGSIZE:
        case FI_ETOOSMALL:
        case FI_ETRUNC:  // a message longer than its receive
            return make_error_code(errc::too_large);
        case FI_EACCES:
        case FI_EPERM:
        case FI_EKEYREJECTED:
            return make_error_code(errc::access_denied);
        case FI_EOTHER:  // unspecified; also an error CQ entry that carried no code (fabric/cq.hpp)
            return make_error_code(errc::provider_error);
        default:
            return {e, fabric_category()};
    }
}

error fabric_error(int ret, const std::string& what) {
    std::error_code code = status_from_fi(ret);
    std::string msg = what;
    if (code.category() != fabric_category()) {
        msg += " (";
        msg += fabric_strerror(ret);
        msg += ")";
    }
    if (fabric_rules::on()) [[unlikely]] {
        if (std::string rule = fabric_rules::take_message(); !rule.empty()) {
            msg += ": " + rule;  // the rule a post or registration broke (rules.hpp)
        }
    }
    return {code, msg};
}

}  // namespace detail
}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/result.hpp — result<T>, remora::errc and the error type every fallible call returns.
///
/// No exception crosses remora's public API. Every fallible function returns result<T>
/// (a tl::expected<T, remora::error> from Debian's libexpected-dev, must-use at class level). An
/// error carries a std::error_code (remora::errc, or a libfabric -FI_* code in fabric_category())
/// and a one-line message naming what was refused and why.
///
/// Threading: value types; no shared state.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

namespace remora {

enum class errc {
    ok = 0,
    invalid_argument,      ///< a parameter is malformed or inconsistent
    out_of_range,          ///< an access falls outside a region
    access_denied,         ///< a region is used for an access it was not registered for
    not_supported,         ///< the provider cannot do this
    too_large,             ///< larger than the provider or configuration allows
    would_block,           ///< a queue is full; retry after completions are reaped
    timed_out,             ///< a wait or connect reached its timeout
    connection_refused,    ///< nobody listens at the address
    rejected,              ///< the peer rejected the connection request
    unreachable,           ///< the address cannot be resolved or reached
    disconnected,          ///< the connection is closed (by either side) or lost
    canceled,              ///< the operation was flushed or canceled
    malformed_descriptor,  ///< a serialised descriptor failed validation
    bad_state,             ///< the call is not valid in the object's current state
    provider_error,        ///< libfabric reported an error not covered above
};

}  // namespace remora

// Hidden from doxygen, which cannot place a specialisation in namespace std.
/// \cond
template <>
struct std::is_error_code_enum<remora::errc> : std::true_type {};
/// \endcond

namespace remora {

const std::error_category& remora_category() noexcept;
/// Category for libfabric's FI_* error numbers (positive values, as fi_strerror takes them).
const std::error_category& fabric_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), remora_category()};
}

/// An error: a code to branch on and a message for people.
class error {
  public:
    error() = default;
    error(std::error_code code, std::string message) : code_(code), message_(std::move(message)) {}
    error(errc e, std::string message) : code_(make_error_code(e)), message_(std::move(message)) {}

    std::error_code code() const noexcept { return code_; }
    const std::string& message() const noexcept { return message_; }
    /// "message: code description"
    std::string what() const;
    /// Bytes the peer sent with the failure: the private data of a rejected connect.
    std::span<const std::byte> data() const noexcept { return data_; }
    error&& with_data(std::vector<std::byte> d) && {
        data_ = std::move(d);
        return std::move(*this);
    }

    friend bool operator==(const error& e, errc c) noexcept {
        return e.code_ == make_error_code(c);
    }

  private:
    std::error_code code_;
    std::string message_;
    std::vector<std::byte> data_;
};

/// Every fallible call returns result<T>: a value, or the error saying why not. The type itself
/// is [[nodiscard]] (as abseil's StatusOr): ignoring any function's result is a warning,
/// whether or not its declaration repeats the attribute. It is a tl::expected<T, error> in every
/// other respect (has_value, operator bool, *, ->, value_or, error) and converts from one.
template <class T>
class [[nodiscard]] result : public tl::expected<T, error> {
    using base = tl::expected<T, error>;

  public:
    using base::base;
    result() = default;
    result(const base& b) : base(b) {}
    result(base&& b) : base(std::move(b)) {}
};

inline tl::unexpected<error> fail(errc e, std::string message) {
    return tl::unexpected<error>(error(e, std::move(message)));
}
inline tl::unexpected<error> fail(std::error_code e, std::string message) {
    return tl::unexpected<error>(error(e, std::move(message)));
}
inline tl::unexpected<error> fail(error e) {
    return tl::unexpected<error>(std::move(e));
}

}  // namespace remora

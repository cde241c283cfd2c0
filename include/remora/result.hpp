// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/result.hpp — result<T>, remora::errc and the error type every fallible call returns.
///
/// No exception crosses remora's public API: every fallible function returns result<T>, whose
/// error is a remora::error (see those classes).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

namespace remora {

/// The error codes of remora's own category (remora_category()); every fallible call names the
/// ones it returns. An error_code made from one compares equal to the enumerator (`e.code() ==
/// errc::timed_out`), and error compares with it directly (`e == errc::timed_out`).
enum class errc {
    ok = 0,                ///< no error (never returned as a failure)
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

/// The category of remora::errc codes (name "remora"; message() describes each code).
const std::error_category& remora_category() noexcept;
/// Category for libfabric's FI_* error numbers (positive values, as fi_strerror takes them): a
/// provider failure remora has no errc for keeps the provider's code in this category.
const std::error_category& fabric_category() noexcept;

/// An error_code of remora_category() for `e`; lets errc convert to std::error_code implicitly.
inline std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), remora_category()};
}

/// An error: a code to branch on and a message for people.
///
/// The code is a std::error_code: a remora::errc (remora_category()), or a libfabric FI_* code
/// (fabric_category()) for a provider failure remora has no errc for. The message is one line
/// naming what was refused and why. Some errors also carry bytes from the peer (data()).
///
/// \par Threading
/// A value type; no shared state.
class error {
  public:
    error() = default;  ///< no error: an empty code and message
    /// An error with `code` and `message`.
    error(std::error_code code, std::string message) : code_(code), message_(std::move(message)) {}
    /// An error with remora's code `e` and `message`.
    error(errc e, std::string message) : code_(make_error_code(e)), message_(std::move(message)) {}

    /// The code to branch on (compare with an errc, or `== errc::...` on the error itself).
    std::error_code code() const noexcept { return code_; }
    /// One line naming what was refused and why.
    const std::string& message() const noexcept { return message_; }
    /// "message: code description"
    std::string what() const;
    /// Bytes the peer sent with the failure: the private data of a rejected connect.
    std::span<const std::byte> data() const noexcept { return data_; }
    /// This error carrying `d` as data() (the library's rejects use it).
    error&& with_data(std::vector<std::byte> d) && {
        data_ = std::move(d);
        return std::move(*this);
    }

    /// True when the error's code is remora's `c`.
    friend bool operator==(const error& e, errc c) noexcept {
        return e.code_ == make_error_code(c);
    }

  private:
    std::error_code code_;
    std::string message_;
    std::vector<std::byte> data_;
};

/// Every fallible call returns result<T>: a value, or the error saying why not.
///
/// The type itself is [[nodiscard]] (as abseil's StatusOr): ignoring any function's result is a
/// warning, whether or not its declaration repeats the attribute. It is a
/// tl::expected<T, error> (Debian's libexpected-dev) in every other respect (has_value,
/// operator bool, *, ->, value_or, error) and converts from one. result<void> has no value:
/// success or an error.
///
///     auto conn = remora::connection::connect(dom, "127.0.0.1", port);
///     if (!conn) {
///         std::fprintf(stderr, "%s\n", conn.error().what().c_str());
///         return 1;
///     }
///     conn->close();
///
/// \tparam T the value on success (void: none)
template <class T>
class [[nodiscard]] result : public tl::expected<T, error> {
    using base = tl::expected<T, error>;

  public:
    using base::base;
    result() = default;  ///< a default-constructed value (success)
    /// From a tl::expected (a value or an error).
    result(const base& b) : base(b) {}
    /// From a tl::expected (a value or an error).
    result(base&& b) : base(std::move(b)) {}
};

/// A failure to return from a function returning any result<T>: `return fail(errc::x, "why");`.
inline tl::unexpected<error> fail(errc e, std::string message) {
    return tl::unexpected<error>(error(e, std::move(message)));
}
/// A failure with any error_code (e.g.\ fabric_category()'s) and a message.
inline tl::unexpected<error> fail(std::error_code e, std::string message) {
    return tl::unexpected<error>(error(e, std::move(message)));
}
/// A failure passing an error on (`return fail(r.error());`, or a completion's
/// completion::error()).
inline tl::unexpected<error> fail(error e) {
    return tl::unexpected<error>(std::move(e));
}

}  // namespace remora

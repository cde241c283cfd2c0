// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/log.hpp — the library's log lines, delivered to a function of the application's.
///
/// The library reports every failure through its return values; a log line adds what a status
/// code cannot say: service requests that got no reply within persistence_config::service_timeout
/// (log_level::warning, with a hint when the target never answered on that connection: a target
/// that accepted with a service_depth and never called target_service::serve). By default nothing
/// is logged (no function is set) and the library writes nothing to stdout or stderr.
///
/// libfabric's own lines come to the same function while one is set, once the library has called
/// libfabric (a domain, a listener or `remora info`): the lines libfabric's own settings ask for
/// (FI_LOG_LEVEL: none when unset; FI_LOG_PROV), as "libfabric <provider>:<subsystem>:
/// <function>():<line>: <text>", warn at log_level::warning, info at info, trace and debug at
/// debug, and then not on stderr. With no function set, libfabric writes them to stderr itself.
///
///     remora::set_log_function([](remora::log_level l, const char* line, void*) {
///         std::fprintf(stderr, "remora %s: %s\n", remora::to_string(l), line);
///     });
///
/// Threading: the function may be called from any thread, the library's own (progress thread,
/// timers) included, and from several at once; it must not block for long nor call back into the
/// library. set_log_function and set_log_threshold may run concurrently with logging: a line
/// being delivered while the function is replaced may still reach the old one.
#pragma once

#include <cstdint>

namespace remora {

/// How much a line matters, most severe first.
enum class log_level : std::uint8_t {
    error,    ///< something failed that the library could not report to a caller
    warning,  ///< a likely misuse or a peer misbehaving (e.g. service requests timing out)
    notice,   ///< a normal but significant event
    info,     ///< informational
    debug,    ///< details for debugging
};
/// "error", "warning", "notice", "info", "debug".
const char* to_string(log_level l) noexcept;

/// Receives one log line: its level, the text (one line, no newline; valid during the call) and
/// the context given to set_log_function.
using log_function = void (*)(log_level level, const char* line, void* context);

/// Sends the library's log lines at or above the threshold to `fn` with `context`; nullptr stops
/// logging (the default).
void set_log_function(log_function fn, void* context = nullptr) noexcept;
/// Lines less severe than `level` are not delivered (nor composed). Default: log_level::notice.
void set_log_threshold(log_level level) noexcept;

}  // namespace remora

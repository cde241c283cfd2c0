// SPDX-License-Identifier: BSD-3-Clause
// src/base/log.hpp — the library's side of remora/log.hpp: whether a level is wanted, and
// delivering a line.
#pragma once

#include <remora/log.hpp>

#include <string>

namespace remora::detail {

// True when a function is set and `level` is at or above the threshold: compose the line only
// then.
bool log_enabled(log_level level) noexcept;
// Delivers `line` at `level` (nothing when not enabled). Never throws.
void log_line(log_level level, const std::string& line) noexcept;

// Called with whether a log function is set: at once, and after each set_log_function (one
// watcher; a later call replaces it).
using log_watch = void (*)(bool has_function) noexcept;
void watch_log_function(log_watch w) noexcept;

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/log_import.cpp — libfabric's own log lines (its core's and its providers'), delivered
// to the application's log function (remora/log.hpp) through libfabric's logging import
// (fi_import_log): while a log function is set, the lines libfabric's own settings ask for
// (FI_LOG_LEVEL, FI_LOG_PROV) go to it instead of stderr; libfabric's own logging is restored when
// it is removed.
#include <rdma/fabric.h>
#include <rdma/fi_ext.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <strings.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "base/log.hpp"
#include "fabric/info.hpp"

namespace remora::detail {
namespace {

log_level level_of(fi_log_level l) noexcept {
    switch (l) {
        case FI_LOG_WARN:
            return log_level::warning;
        case FI_LOG_INFO:
            return log_level::info;
        default:
            return log_level::debug;  // FI_LOG_TRACE, FI_LOG_DEBUG
    }
}

const char* subsystem(fi_log_subsys s) noexcept {
    static constexpr const char* names[] = {"core", "fabric", "domain", "ep_ctrl", "ep_data",
                                            "av",   "cq",     "eq",     "mr",      "cntr"};
    const auto i = static_cast<std::size_t>(s);
    return i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

// The most verbose level FI_LOG_LEVEL asks libfabric for (warn, trace, info, debug), -1 when it
// is unset or unknown: libfabric's own default, no lines at all.
int wanted_level() noexcept {
    const char* v = std::getenv("FI_LOG_LEVEL");
    static constexpr const char* names[] = {"warn", "trace", "info", "debug"};
    for (int i = 0; v != nullptr && i < 4; ++i) {
        if (strcasecmp(v, names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

int enabled(const fi_provider*, fi_log_level level, fi_log_subsys, std::uint64_t flags) {
    static const int wanted = wanted_level();
    // libfabric's own filters first (FI_LOG_LEVEL, and FI_LOG_PROV through the flag), then the
    // log function's threshold.
    return static_cast<int>(level) <= wanted && (flags & FI_LOG_PROV_FILTERED) == 0 &&
                   log_enabled(level_of(level))
               ? 1
               : 0;
}

// libfabric's rate-limited lines (at most one per 2 s per call site), as its own logging does.
int ready(const fi_provider* prov, fi_log_level level, fi_log_subsys subsys, std::uint64_t flags,
          std::uint64_t* showtime) {
    if (enabled(prov, level, subsys, flags) == 0) {
        return 0;
    }
    const auto now =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now().time_since_epoch())
                                       .count());
    if (now < *showtime) {
        return 0;
    }
    *showtime = now + 2000;
    return 1;
}

void log(const fi_provider* prov, fi_log_level level, fi_log_subsys subsys, const char* func,
         int line, const char* msg) {
    std::string text = "libfabric ";
    text += prov != nullptr && prov->name != nullptr ? prov->name : "core";
    text += ':';
    text += subsystem(subsys);
    text += ':';
    text += func != nullptr ? func : "?";
    text += "():";
    text += std::to_string(line);
    text += ": ";
    text += msg != nullptr ? msg : "";
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
        text.pop_back();  // one line, as every line the log function receives
    }
    log_line(level_of(level), text);
}

fi_ops_log import_ops{sizeof(fi_ops_log), enabled, ready, log};
fid_logging import_fid{};
bool imported = false;
std::mutex import_mu;  // never held while a line is delivered

// Follows set_log_function: imports while a function is set, gives libfabric its own back when
// it is removed. A failed import leaves libfabric's own logging (nothing is lost but the
// redirection).
void follow(bool has_function) noexcept {  // a log_watch
    const std::lock_guard lock(import_mu);
    if (has_function && !imported) {
        import_fid = fid_logging{};
        import_fid.ops = &import_ops;
        imported = fi_import_log(FI_VERSION(1, 17), 0, &import_fid) == 0;
    } else if (!has_function && imported) {
        fi_close(&import_fid.fid);
        imported = false;
    }
}

}  // namespace

void route_provider_log() noexcept {
    static std::once_flag once;
    std::call_once(once, [] { watch_log_function(&follow); });
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/base/log.cpp — the log function and threshold (remora/log.hpp).
#include "base/log.hpp"

#include <atomic>
#include <mutex>

namespace remora {
namespace {

struct sink {
    log_function fn = nullptr;
    void* context = nullptr;
};

std::mutex sink_mu;  // guards `current` as a pair
sink current;
std::atomic<bool> have_fn{false};
std::atomic<std::uint8_t> threshold{static_cast<std::uint8_t>(log_level::notice)};
// Told when a function is set or removed (the fabric layer routes libfabric's lines with it).
// watch_mu orders its calls; it is never held while a line is delivered.
std::mutex watch_mu;
detail::log_watch watcher = nullptr;

}  // namespace

const char* to_string(log_level l) noexcept {
    switch (l) {
        case log_level::error:
            return "error";
        case log_level::warning:
            return "warning";
        case log_level::notice:
            return "notice";
        case log_level::info:
            return "info";
        case log_level::debug:
            return "debug";
    }
    return "unknown";
}

void set_log_function(log_function fn, void* context) noexcept {
    const std::lock_guard watch(watch_mu);
    {
        const std::lock_guard lock(sink_mu);
        current = {fn, context};
        have_fn.store(fn != nullptr, std::memory_order_release);
    }
    if (watcher != nullptr) {
        watcher(fn != nullptr);
    }
}

void set_log_threshold(log_level level) noexcept {
    threshold.store(static_cast<std::uint8_t>(level), std::memory_order_relaxed);
}

namespace detail {

void watch_log_function(log_watch w) noexcept {
    const std::lock_guard watch(watch_mu);
    watcher = w;
    w(have_fn.load(std::memory_order_acquire));
}

bool log_enabled(log_level level) noexcept {
    return have_fn.load(std::memory_order_acquire) &&
           static_cast<std::uint8_t>(level) <= threshold.load(std::memory_order_relaxed);
}

void log_line(log_level level, const std::string& line) noexcept {
    if (!log_enabled(level)) {
        return;
    }
    sink s;
    {
        const std::lock_guard lock(sink_mu);
        s = current;
    }
    if (s.fn != nullptr) {
        s.fn(level, line.c_str(), s.context);
    }
}

}  // namespace detail
}  // namespace remora

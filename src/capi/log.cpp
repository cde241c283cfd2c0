// SPDX-License-Identifier: BSD-3-Clause
// src/capi/log.cpp — the C API's log function and threshold over remora/log.hpp.
#include <mutex>

#include "capi.hpp"

using namespace remora::capi;

static_assert(REMORA_LOG_DEBUG == static_cast<int>(remora::log_level::debug));
static_assert(REMORA_LOG_WARNING == static_cast<int>(remora::log_level::warning));

namespace {

std::mutex c_log_mu;  // guards the pair below
remora_log_function c_log_fn = nullptr;
void* c_log_context = nullptr;

// The C++ log function that forwards to the C one (the C signature takes an int level).
void c_log_trampoline(remora::log_level level, const char* line, void* /*context*/) {
    remora_log_function fn = nullptr;
    void* context = nullptr;
    {
        const std::lock_guard lock(c_log_mu);
        fn = c_log_fn;
        context = c_log_context;
    }
    if (fn != nullptr) {
        fn(static_cast<int>(level), line, context);
    }
}

}  // namespace

extern "C" {

REMORA_API void remora_set_log_function(remora_log_function fn, void* context) {
    {
        const std::lock_guard lock(c_log_mu);
        c_log_fn = fn;
        c_log_context = context;
    }
    remora::set_log_function(fn == nullptr ? nullptr : c_log_trampoline, nullptr);
}

REMORA_API int remora_set_log_threshold(int level) {
    static constexpr const char* fn = "remora_set_log_threshold";
    return guarded(fn, [&] {
        if (level < REMORA_LOG_ERROR || level > REMORA_LOG_DEBUG) {
            return fail(REMORA_E_INVALID, fn,
                        "level " + std::to_string(level) + " is not a REMORA_LOG_* level");
        }
        remora::set_log_threshold(static_cast<remora::log_level>(level));
        return 0;
    });
}

}  // extern "C"

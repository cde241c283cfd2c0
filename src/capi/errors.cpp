// SPDX-License-Identifier: BSD-3-Clause
// src/capi/errors.cpp — the C API's error codes, messages, and the shared argument checks.
#include <new>
#include <vector>

#include "capi.hpp"

namespace remora::capi {
namespace {

struct last_error {
    std::string message;
    std::vector<std::byte> data;
    int refusal = 0;  // enum remora_admission_refusal of the failure
};

last_error& last() noexcept {
    thread_local last_error e;
    return e;
}

}  // namespace

int code_of(std::error_code ec) noexcept {
    if (!ec) {
        return 0;
    }
    if (ec.category() == remora_category()) {
        const int v = ec.value();
        if (v >= static_cast<int>(errc::invalid_argument) &&
            v <= static_cast<int>(errc::provider_error)) {
            return -v;
        }
        return REMORA_E_UNKNOWN;
    }
    if (ec.category() == fabric_category()) {
        return REMORA_E_PROVIDER;
    }
    return REMORA_E_UNKNOWN;
}

int fail(int code, const char* fn, const std::string& message) noexcept {
    auto& e = last();
    try {
        e.message = std::string(fn) + ": " + message;
    } catch (...) {
        e.message.clear();  // no memory for the message: the code still says what happened
    }
    e.data.clear();
    e.refusal = 0;
    return code;
}

int fail(const error& err, const char* fn) noexcept {
    const int code = code_of(err.code());
    std::string text;
    try {
        text = err.message();
        if (code == REMORA_E_PROVIDER || code == REMORA_E_UNKNOWN) {
            text += " (" + err.code().message() + ")";
        }
    } catch (...) {
    }
    fail(code == 0 ? REMORA_E_UNKNOWN : code, fn, text);
    try {
        last().data.assign(err.data().begin(), err.data().end());
    } catch (...) {
    }
    if (const auto r = admission_refusal_of(err)) {
        last().refusal = static_cast<int>(*r);
    }
    return code == 0 ? REMORA_E_UNKNOWN : code;
}

int check_timeout(const char* fn, int timeout_ms) noexcept {
    if (timeout_ms < 0) {
        return fail(REMORA_E_INVALID, fn,
                    "timeout_ms is " + std::to_string(timeout_ms) + " (must be 0 or more)");
    }
    return 0;
}

int check_bytes(const char* fn, const char* name, const void* p, std::size_t len) noexcept {
    if (p == nullptr && len != 0) {
        return fail(REMORA_E_INVALID, fn,
                    std::string(name) + " is NULL with a length of " + std::to_string(len));
    }
    return 0;
}

int load_sized(const char* fn, const char* type, const void* in, void* out,
               std::size_t ours) noexcept {
    std::memcpy(out, &ours, sizeof ours);  // every configuration starts with size_t size
    if (in == nullptr) {
        return 0;
    }
    std::size_t theirs = 0;
    std::memcpy(&theirs, in, sizeof theirs);
    if (theirs < sizeof(std::size_t)) {
        return fail(REMORA_E_INVALID, fn,
                    std::string("struct ") + type + " size " + std::to_string(theirs) +
                        " is smaller than its size field (set size = sizeof(struct " + type + "))");
    }
    if (theirs > ours) {
        return fail(REMORA_E_INVALID, fn,
                    std::string("struct ") + type + " size " + std::to_string(theirs) +
                        " is larger than this library's (" + std::to_string(ours) +
                        " bytes): built against a newer remora.h");
    }
    std::memcpy(out, in, theirs);
    return 0;
}

int op_options_of(const char* fn, unsigned flags, void* context, op_options& out) noexcept {
    constexpr unsigned known = REMORA_F_ON_ERROR | REMORA_F_AT_POST | REMORA_F_MORE;
    if ((flags & ~known) != 0) {
        return fail(REMORA_E_INVALID, fn, "unknown flag bits " + std::to_string(flags & ~known));
    }
    if ((flags & REMORA_F_ON_ERROR) != 0 && (flags & REMORA_F_AT_POST) != 0) {
        return fail(REMORA_E_INVALID, fn,
                    "REMORA_F_ON_ERROR and REMORA_F_AT_POST exclude each other");
    }
    out = {};
    out.context = context;
    out.report = (flags & REMORA_F_AT_POST)    ? completion_mode::at_post
                 : (flags & REMORA_F_ON_ERROR) ? completion_mode::on_error
                                               : completion_mode::always;
    out.more = (flags & REMORA_F_MORE) != 0;
    return 0;
}

void to_c(const completion& in, remora_completion& out) noexcept {
    out.op = static_cast<int>(in.op);
    out.status = code_of(in.status);
    out.context = in.context;
    out.bytes = in.bytes;
    out.imm = in.imm;
    out.has_imm = in.has_imm;
    out.tag = in.tag;
    out.failed_part = in.failed_part;
}

}  // namespace remora::capi

using namespace remora::capi;

extern "C" {

REMORA_API const char* remora_strerror(int code) {
    switch (code) {
        case REMORA_OK:
            return "success";
        case REMORA_E_INVALID:
            return "invalid argument";
        case REMORA_E_OUT_OF_RANGE:
            return "out of range";
        case REMORA_E_ACCESS_DENIED:
            return "access denied";
        case REMORA_E_NOT_SUPPORTED:
            return "not supported";
        case REMORA_E_TOO_LARGE:
            return "too large";
        case REMORA_E_WOULD_BLOCK:
            return "would block";
        case REMORA_E_TIMED_OUT:
            return "timed out";
        case REMORA_E_CONNECTION_REFUSED:
            return "connection refused";
        case REMORA_E_REJECTED:
            return "rejected by peer";
        case REMORA_E_UNREACHABLE:
            return "unreachable";
        case REMORA_E_DISCONNECTED:
            return "disconnected";
        case REMORA_E_CANCELED:
            return "canceled";
        case REMORA_E_MALFORMED_DESCRIPTOR:
            return "malformed descriptor";
        case REMORA_E_BAD_STATE:
            return "bad state";
        case REMORA_E_PROVIDER:
            return "provider error";
        case REMORA_E_NOMEM:
            return "out of memory";
        case REMORA_E_UNKNOWN:
            return "unknown failure";
        default:
            return "unknown error code";
    }
}

REMORA_API const char* remora_last_error_message(void) {
    return last().message.c_str();
}

REMORA_API int remora_last_admission_refusal(void) {
    return last().refusal;
}

REMORA_API void remora_last_error_data(const void** data, size_t* len) {
    const auto& d = last().data;
    if (data != nullptr) {
        *data = d.empty() ? nullptr : d.data();
    }
    if (len != nullptr) {
        *len = d.size();
    }
}

}  // extern "C"

// SPDX-License-Identifier: BSD-3-Clause
// tests/unit/capi_guard_test.cpp — the C API's exception barrier and error mapping (the parts a
// C program cannot provoke): no exception leaves guarded(), each becomes its code and message.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "capi/capi.hpp"

namespace {

using remora::capi::guarded;

TEST(CapiGuard, StdExceptionIsUnknownWithItsMessage) {
    EXPECT_EQ(guarded("remora_test_fn", []() -> int { throw std::runtime_error("boom"); }),
              REMORA_E_UNKNOWN);
    EXPECT_STREQ(remora_last_error_message(), "remora_test_fn: unexpected exception: boom");
}

TEST(CapiGuard, BadAllocIsNomem) {
    EXPECT_EQ(guarded("remora_test_fn", []() -> int { throw std::bad_alloc(); }), REMORA_E_NOMEM);
    EXPECT_STREQ(remora_last_error_message(), "remora_test_fn: out of memory");
}

TEST(CapiGuard, AnythingElseIsUnknown) {
    EXPECT_EQ(guarded("remora_test_fn", []() -> int { throw 42; }), REMORA_E_UNKNOWN);
    EXPECT_STREQ(remora_last_error_message(), "remora_test_fn: unexpected exception");
}

TEST(CapiGuard, BodyResultPassesThrough) {
    EXPECT_EQ(guarded("remora_test_fn", [] { return 0; }), 0);
    EXPECT_EQ(guarded("remora_test_fn", [] { return REMORA_E_TIMED_OUT; }), REMORA_E_TIMED_OUT);
}

TEST(CapiErrors, EveryErrcHasItsCode) {
    using remora::errc;
    EXPECT_EQ(remora::capi::code_of({}), 0);
    EXPECT_EQ(remora::capi::code_of(errc::invalid_argument), REMORA_E_INVALID);
    EXPECT_EQ(remora::capi::code_of(errc::would_block), REMORA_E_WOULD_BLOCK);
    EXPECT_EQ(remora::capi::code_of(errc::disconnected), REMORA_E_DISCONNECTED);
    EXPECT_EQ(remora::capi::code_of(errc::malformed_descriptor), REMORA_E_MALFORMED_DESCRIPTOR);
    EXPECT_EQ(remora::capi::code_of(errc::provider_error), REMORA_E_PROVIDER);
    // libfabric's own codes are provider errors; anything else is unknown
    EXPECT_EQ(remora::capi::code_of({5, remora::fabric_category()}), REMORA_E_PROVIDER);
    EXPECT_EQ(remora::capi::code_of(std::make_error_code(std::errc::io_error)), REMORA_E_UNKNOWN);
    // every code has a name of its own
    for (int c = REMORA_E_UNKNOWN; c <= 0; ++c) {
        EXPECT_STRNE(remora_strerror(c), "unknown error code") << c;
    }
}

TEST(CapiErrors, MessagesArePerThread) {
    (void)remora::capi::fail(REMORA_E_INVALID, "main_thread", "one");
    std::string other;
    std::thread([&] {
        other = remora_last_error_message();
        (void)remora::capi::fail(REMORA_E_INVALID, "other_thread", "two");
    }).join();
    EXPECT_EQ(other, "");
    EXPECT_STREQ(remora_last_error_message(), "main_thread: one");
}

// REMORA_CAPI_GET, the body of every getter: the NULL checks, the value, the barrier.
TEST(CapiGuard, GetterChecksHandleAndOutputThenStores) {
    int value = 7;
    const int* h = &value;
    int out = -1;
    int* out_p = &out;
    EXPECT_EQ(REMORA_CAPI_GET("remora_test_get", h, out_p, *h + 1), 0);
    EXPECT_EQ(out, 8);
    const int* no_h = nullptr;
    EXPECT_EQ(REMORA_CAPI_GET("remora_test_get", no_h, out_p, 1), REMORA_E_INVALID);
    EXPECT_STREQ(remora_last_error_message(), "remora_test_get: no_h is NULL");
    int* no_out = nullptr;
    EXPECT_EQ(REMORA_CAPI_GET("remora_test_get", h, no_out, 1), REMORA_E_INVALID);
    EXPECT_STREQ(remora_last_error_message(), "remora_test_get: no_out is NULL");
    auto throws = []() -> int { throw std::runtime_error("boom"); };
    EXPECT_EQ(REMORA_CAPI_GET("remora_test_get", h, out_p, throws()), REMORA_E_UNKNOWN);
    EXPECT_STREQ(remora_last_error_message(), "remora_test_get: unexpected exception: boom");
    EXPECT_EQ(out, 8);  // a failed getter stores nothing
}

// The C API's getters refuse a NULL handle by name and store nothing.
TEST(CapiGuard, GettersRefuseANullHandle) {
    std::uint16_t port = 7;
    EXPECT_EQ(remora_listener_port(nullptr, &port), REMORA_E_INVALID);
    EXPECT_STREQ(remora_last_error_message(), "remora_listener_port: lst is NULL");
    EXPECT_EQ(port, 7);
    std::size_t n = 3;
    EXPECT_EQ(remora_connection_in_flight(nullptr, &n), REMORA_E_INVALID);
    EXPECT_STREQ(remora_last_error_message(), "remora_connection_in_flight: conn is NULL");
    EXPECT_EQ(n, 3u);
    int fd = -2;
    EXPECT_EQ(remora_completion_channel_fd(nullptr, &fd), REMORA_E_INVALID);
    EXPECT_STREQ(remora_last_error_message(), "remora_completion_channel_fd: ch is NULL");
    EXPECT_EQ(fd, -2);
}

}  // namespace

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

}  // namespace

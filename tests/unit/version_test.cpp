// SPDX-License-Identifier: BSD-3-Clause
// The version: the headers' macros (remora/version.h, generated from the project's version),
// the C API's remora_version() and the C++ remora::version() agree.
#include <remora/remora.h>
#include <remora/remora.hpp>

#include <gtest/gtest.h>

#include <string>

TEST(version, headers_and_library_agree) {
    const std::string want = std::to_string(REMORA_VERSION_MAJOR) + "." +
                             std::to_string(REMORA_VERSION_MINOR) + "." +
                             std::to_string(REMORA_VERSION_PATCH);
    EXPECT_EQ(want, REMORA_VERSION_STRING);
    EXPECT_EQ(want, remora::version());
    EXPECT_EQ(want, remora_version());
    EXPECT_EQ(REMORA_VERSION,
              REMORA_VERSION_OF(REMORA_VERSION_MAJOR, REMORA_VERSION_MINOR, REMORA_VERSION_PATCH));
    EXPECT_GT(REMORA_VERSION_OF(0, 2, 0), REMORA_VERSION_OF(0, 1, 99));
}

// SPDX-License-Identifier: BSD-3-Clause
// libfabric's own log lines reach the application's log function (remora/log.hpp) while one is
// set: the lines libfabric's settings ask for (this binary runs with FI_LOG_LEVEL=warn), prefixed
// "libfabric ", at log_level::warning, and none of them on stderr. Removed, libfabric writes to
// stderr again; below the threshold, nothing arrives. Opening a tcp domain makes libfabric warn
// (its core names the layered providers that match nothing).
#include <mutex>
#include <string>
#include <vector>

#include "support.hpp"

namespace remora::test {
namespace {

struct lines {
    std::mutex mu;
    std::vector<std::pair<log_level, std::string>> got;

    static void take(log_level l, const char* line, void* self) {
        auto* me = static_cast<lines*>(self);
        const std::lock_guard lock(me->mu);
        me->got.emplace_back(l, line);
    }
    std::vector<std::pair<log_level, std::string>> from_libfabric() {
        const std::lock_guard lock(mu);
        std::vector<std::pair<log_level, std::string>> out;
        for (const auto& [l, s] : got) {
            if (s.rfind("libfabric ", 0) == 0) {
                out.emplace_back(l, s);
            }
        }
        return out;
    }
};

void open_tcp_domain() {
    auto d = domain::open({.provider = "tcp"});
    ASSERT_TRUE(d) << d.error().message();
}

TEST(provider_log, libfabric_lines_reach_the_log_function_and_not_stderr) {
    lines sink;
    set_log_threshold(log_level::notice);
    set_log_function(&lines::take, &sink);
    testing::internal::CaptureStderr();
    open_tcp_domain();
    const std::string err = testing::internal::GetCapturedStderr();
    set_log_function(nullptr);
    const auto got = sink.from_libfabric();
    ASSERT_FALSE(got.empty()) << "no libfabric line reached the log function";
    for (const auto& [l, s] : got) {
        EXPECT_EQ(l, log_level::warning) << s;
        EXPECT_EQ(s.find('\n'), std::string::npos) << s;
    }
    // "libfabric <provider>:<subsystem>:<function>():<line>: <text>"
    EXPECT_NE(got.front().second.find("():"), std::string::npos) << got.front().second;
    EXPECT_EQ(err.find("libfabric:"), std::string::npos) << err;
}

TEST(provider_log, with_no_function_libfabric_writes_to_stderr_again) {
    lines sink;
    set_log_function(&lines::take, &sink);
    open_tcp_domain();
    set_log_function(nullptr);
    ASSERT_FALSE(sink.from_libfabric().empty());
    const auto before = sink.from_libfabric().size();
    testing::internal::CaptureStderr();
    open_tcp_domain();
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("libfabric:"), std::string::npos) << "libfabric's own logging not restored";
    EXPECT_EQ(sink.from_libfabric().size(), before);
}

TEST(provider_log, lines_below_the_threshold_are_not_delivered) {
    lines sink;
    set_log_threshold(log_level::error);
    set_log_function(&lines::take, &sink);
    testing::internal::CaptureStderr();
    open_tcp_domain();
    const std::string err = testing::internal::GetCapturedStderr();
    set_log_function(nullptr);
    set_log_threshold(log_level::notice);
    EXPECT_TRUE(sink.from_libfabric().empty()) << sink.from_libfabric().front().second;
    EXPECT_EQ(err.find("libfabric:"), std::string::npos) << err;
}

}  // namespace
}  // namespace remora::test

// SPDX-License-Identifier: BSD-3-Clause
// The command's size parser (tools/remora/args.hpp): every size, length and offset of `remora`
// goes through it, so its edges are pinned here; the command's own refusals are
// tests/cli/arguments.sh.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "args.hpp"

using remora::tool::format_size;
using remora::tool::parse_region;
using remora::tool::parse_size;

TEST(size_args, bytes_and_binary_suffixes) {
    EXPECT_EQ(parse_size("0").value(), 0u);
    EXPECT_EQ(parse_size("4096").value(), 4096u);
    for (const char* k : {"4K", "4k", "4KiB", "4kib", "4KB", "4kb"})
        EXPECT_EQ(parse_size(k).value(), 4096u) << k;
    EXPECT_EQ(parse_size("64M").value(), 64u << 20);
    EXPECT_EQ(parse_size("1GiB").value(), 1u << 30);
    EXPECT_EQ(parse_size("1T").value(), std::uint64_t{1} << 40);
    EXPECT_EQ(parse_size("7B").value(), 7u);
    EXPECT_EQ(parse_size("16777215T").value(), std::uint64_t{16777215} << 40);
    EXPECT_EQ(parse_size("18446744073709551615").value(), UINT64_MAX);
}

TEST(size_args, refusals_say_why) {
    auto why = [](const char* s) { return parse_size(s).error().message(); };
    EXPECT_NE(why("-1").find("negative"), std::string::npos);
    EXPECT_NE(why("4X").find("unknown suffix 'X'"), std::string::npos);
    EXPECT_NE(why("4KiBs").find("unknown suffix"), std::string::npos);
    EXPECT_NE(why("1.5M").find("whole number"), std::string::npos);
    EXPECT_NE(why("").find("empty"), std::string::npos);
    EXPECT_NE(why("K").find("not a number"), std::string::npos);
    EXPECT_NE(why("+4").find("not a number"), std::string::npos);
    EXPECT_NE(why(" 4").find("not a number"), std::string::npos);
    EXPECT_NE(why("16777216T").find("too large"), std::string::npos);
    EXPECT_NE(why("18446744073709551616").find("too large"), std::string::npos);
}

TEST(size_args, formats_exact_sizes) {
    EXPECT_EQ(format_size(64u << 20), "64 MiB");
    EXPECT_EQ(format_size(std::uint64_t{1} << 40), "1 TiB");
    EXPECT_EQ(format_size(1536), "1536 bytes");
    EXPECT_EQ(format_size(0), "0 bytes");
}

TEST(size_args, region_specs) {
    EXPECT_EQ(parse_region("mem:1M", false).value().size, 1u << 20);
    const auto f = parse_region("file:/tmp/x:2G", true).value();
    EXPECT_EQ(f.path, "/tmp/x");
    EXPECT_EQ(f.size, std::uint64_t{2} << 30);
    EXPECT_TRUE(parse_region("file:/tmp/x", false).has_value());
    EXPECT_FALSE(parse_region("mem:0", false).has_value());
    EXPECT_FALSE(parse_region("mem:2T", false).has_value());
    EXPECT_FALSE(parse_region("mem:64X", false).has_value());
    EXPECT_FALSE(parse_region("file:", false).has_value());
    EXPECT_FALSE(parse_region("disk:1M", false).has_value());
}

TEST(size_args, cli_transformer_bounds) {
    auto v = remora::tool::size_arg(1, 64u << 20, "the bench's buffers");
    std::string s = "4K";
    EXPECT_EQ(v(s), "");
    EXPECT_EQ(s, "4096");
    s = "0";
    EXPECT_NE(v(s).find("0 bytes mean nothing"), std::string::npos);
    s = "65M";
    EXPECT_NE(v(s).find("at most 64 MiB (the bench's buffers)"), std::string::npos);
}

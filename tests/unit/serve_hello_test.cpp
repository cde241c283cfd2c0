// SPDX-License-Identifier: BSD-3-Clause
// `remora serve`'s handshake bytes (tools/remora/serve.hpp): the accept hello a client parses and
// the service depth a target reads from a client's private data. Regression inputs from
// tests/fuzz (fuzz_serve_hello: a hello with non-zero reserved bytes was accepted and did not
// round-trip).
#include <vector>

#include "serve.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

using tool::hello_size;
using tool::make_hello;
using tool::parse_hello;

remote_region sample() {
    auto r =
        remote_region::make(0, 1 << 20, 42, usage::read_source | usage::write_destination, false);
    EXPECT_TRUE(r.has_value());
    return *r;
}

TEST(serve_hello, round_trips) {
    const auto bytes = make_hello(65535, sample());
    auto h = parse_hello(bytes);
    ASSERT_TRUE(h.has_value()) << h.error().message();
    EXPECT_EQ(h->depth, 65535);
    EXPECT_EQ(h->region, sample());
}

TEST(serve_hello, rejects_each_non_zero_reserved_byte) {
    for (std::size_t at : {5u, 8u, 9u, 10u, 11u}) {
        auto bytes = make_hello(8, sample());
        bytes[at] = std::byte{1};
        EXPECT_ERRC(parse_hello(bytes), errc::invalid_argument);
    }
}

TEST(serve_hello, rejects_wrong_sizes_magic_version_and_bad_descriptor) {
    const auto good = make_hello(8, sample());
    std::vector<std::byte> v(good.begin(), good.end());
    v.pop_back();
    EXPECT_ERRC(parse_hello(v), errc::invalid_argument);
    v.assign(good.begin(), good.end());
    v.push_back(std::byte{0});
    EXPECT_ERRC(parse_hello(v), errc::invalid_argument);
    EXPECT_ERRC(parse_hello({}), errc::invalid_argument);
    for (std::size_t at : {0u, 1u, 2u, 3u, 4u}) {
        auto b = good;
        b[at] = static_cast<std::byte>(static_cast<unsigned>(b[at]) ^ 0x20);
        EXPECT_ERRC(parse_hello(b), errc::invalid_argument);
    }
    auto b = good;
    b[12 + 29] = std::byte{1};  // the descriptor's reserved byte
    EXPECT_ERRC(parse_hello(b), errc::malformed_descriptor);
}

TEST(serve_depth_request, two_bytes_are_the_depth_other_sizes_the_default) {
    for (unsigned d : {0u, 1u, 8u, 256u, 65535u}) {
        const auto b = tool::make_depth_request(static_cast<std::uint16_t>(d));
        EXPECT_EQ(tool::parse_depth_request(b), d);
    }
    const std::vector<std::byte> three(3, std::byte{0xff});
    EXPECT_EQ(tool::parse_depth_request(three), tool::default_service_depth);
    EXPECT_EQ(tool::parse_depth_request(std::span(three).first(1)), tool::default_service_depth);
    EXPECT_EQ(tool::parse_depth_request({}), tool::default_service_depth);
}

}  // namespace
}  // namespace remora::test

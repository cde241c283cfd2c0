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
    // A descriptor with a same-host address (a tcp or sockets target with shm beside it).
    const remote_region same_host =
        must(remote_region::make(0, 4096, 7, usage::read_source, false, 0x7f0000001000ull));
    auto s = parse_hello(make_hello(8, same_host));
    ASSERT_TRUE(s.has_value()) << s.error().message();
    EXPECT_EQ(s->region.same_host_address(), 0x7f0000001000ull);
    EXPECT_EQ(hello_size, 52u);
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

TEST(serve_depth_request, exactly_two_bytes_of_a_nonzero_depth_anything_else_refused) {
    for (unsigned d : {1u, 8u, 256u, 65535u}) {
        const auto b = tool::make_depth_request(static_cast<std::uint16_t>(d));
        auto got = tool::parse_depth_request(b);
        ASSERT_TRUE(got) << got.error().what();
        EXPECT_EQ(*got, d);
    }
    EXPECT_ERRC(tool::parse_depth_request(tool::make_depth_request(0)), errc::invalid_argument);
    const std::vector<std::byte> big(256, std::byte{0x08});
    for (std::size_t n : {0u, 1u, 3u, 256u}) {
        auto got = tool::parse_depth_request(std::span(big).first(n));
        EXPECT_ERRC(got, errc::invalid_argument);
        if (!got) {
            EXPECT_NE(got.error().message().find(std::to_string(n) + " bytes"), std::string::npos)
                << got.error().message();
        }
    }
}

}  // namespace
}  // namespace remora::test

// SPDX-License-Identifier: BSD-3-Clause
// The target service's wire format: round trips, every truncation and oversize, and a
// deterministic mutation fuzz of the request and reply decoders against an independent rule.
#include <random>
#include <vector>

#include "persist/persist_impl.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

using detail::reply_size;
using detail::request_size;
using detail::service_op;
using detail::service_reply;
using detail::service_request;

std::uint64_t le(const std::vector<std::byte>& b, std::size_t at, int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) {
        v |= static_cast<std::uint64_t>(b[at + i]) << (8 * i);
    }
    return v;
}

std::vector<std::byte> wire(const service_request& r) {
    std::vector<std::byte> b(request_size);
    detail::encode(r, std::span<std::byte, request_size>(b.data(), request_size));
    return b;
}
std::vector<std::byte> wire(const service_reply& r) {
    std::vector<std::byte> b(reply_size);
    detail::encode(r, std::span<std::byte, reply_size>(b.data(), reply_size));
    return b;
}

// The validity rules, written independently of the decoders.
bool request_valid(const std::vector<std::byte>& b) {
    if (b.size() != request_size || le(b, 0, 4) != detail::service_magic ||
        static_cast<int>(b[4]) != detail::service_version) {
        return false;
    }
    const auto op = static_cast<int>(b[5]);
    const auto flags = le(b, 6, 2);
    if (op < 1 || op > 5 || flags > 1 || (flags != 0 && op != 1)) {
        return false;
    }
    if (op == 5) {  // a hello: nothing after the id
        return le(b, 16, 8) == 0 && le(b, 24, 8) == 0 && le(b, 32, 8) == 0 && le(b, 40, 8) == 0;
    }
    return op == 3 || le(b, 40, 8) == 0;  // only compare_swap has a second operand
}
bool reply_valid(const std::vector<std::byte>& b) {
    if (b.size() != reply_size || le(b, 0, 4) != detail::service_magic ||
        static_cast<int>(b[4]) != detail::service_version) {
        return false;
    }
    const auto op = static_cast<int>(b[5]);
    return op >= 1 && op <= 5 && le(b, 6, 2) <= static_cast<std::uint64_t>(errc::provider_error) &&
           le(b, 24, 8) == 0;
}

TEST(service_wire, requests_and_replies_round_trip) {
    const service_request rq{.op = service_op::compare_swap,
                             .flags = 0,
                             .id = 0x0102030405060708ull,
                             .key = 42,
                             .address = 4096,
                             .arg0 = 7,
                             .arg1 = 9};
    auto back = must(detail::decode_request(wire(rq)));
    EXPECT_EQ(back.op, rq.op);
    EXPECT_EQ(back.id, rq.id);
    EXPECT_EQ(back.key, rq.key);
    EXPECT_EQ(back.address, rq.address);
    EXPECT_EQ(back.arg0, rq.arg0);
    EXPECT_EQ(back.arg1, rq.arg1);
    const service_reply rp{.op = service_op::fetch_add,
                           .status = static_cast<std::uint16_t>(errc::out_of_range),
                           .id = 99,
                           .value = ~0ull};
    auto rb = must(detail::decode_reply(wire(rp)));
    EXPECT_EQ(rb.op, rp.op);
    EXPECT_EQ(rb.status, rp.status);
    EXPECT_EQ(rb.id, rp.id);
    EXPECT_EQ(rb.value, rp.value);
}

TEST(service_wire, truncated_oversize_and_foreign_messages_are_refused) {
    const auto b = wire(service_request{.op = service_op::flush, .flags = 1, .arg0 = 8});
    for (std::size_t n = 0; n <= 2 * request_size; ++n) {
        if (n == request_size) {
            continue;
        }
        std::vector<std::byte> c = b;
        c.resize(n, std::byte{0});
        SCOPED_TRACE(n);
        EXPECT_ERRC(detail::decode_request(c), errc::invalid_argument);
    }
    const auto r = wire(service_reply{});
    for (std::size_t n = 0; n <= 2 * reply_size; ++n) {
        if (n != reply_size) {
            std::vector<std::byte> c = r;
            c.resize(n, std::byte{0});
            SCOPED_TRACE(n);
            EXPECT_ERRC(detail::decode_reply(c), errc::invalid_argument);
        }
    }
    // A request is not a reply and the other way round (sizes and fields differ).
    EXPECT_ERRC(detail::decode_reply(b), errc::invalid_argument);
    EXPECT_ERRC(detail::decode_request(r), errc::invalid_argument);
    // Flags only on flush; operands beyond what the operation uses must be zero.
    EXPECT_ERRC(
        detail::decode_request(wire(service_request{.op = service_op::fetch_add, .flags = 1})),
        errc::invalid_argument);
    EXPECT_ERRC(detail::decode_request(wire(service_request{.op = service_op::flush, .arg1 = 1})),
                errc::invalid_argument);
}

// A client's hello (persistence_config::serve_wait) carries its id and nothing else; its answer
// is a reply like any other.
TEST(service_wire, a_hello_carries_its_id_only) {
    auto back =
        must(detail::decode_request(wire(service_request{.op = service_op::hello, .id = 7})));
    EXPECT_EQ(back.op, service_op::hello);
    EXPECT_EQ(back.id, 7u);
    for (const service_request bad : {service_request{.op = service_op::hello, .key = 1},
                                      service_request{.op = service_op::hello, .address = 1},
                                      service_request{.op = service_op::hello, .arg0 = 1},
                                      service_request{.op = service_op::hello, .arg1 = 1},
                                      service_request{.op = service_op::hello, .flags = 1}}) {
        EXPECT_ERRC(detail::decode_request(wire(bad)), errc::invalid_argument);
    }
    auto reply = must(detail::decode_reply(wire(service_reply{.op = service_op::hello, .id = 7})));
    EXPECT_EQ(reply.op, service_op::hello);
    EXPECT_EQ(reply.id, 7u);
}

TEST(service_wire, mutated_messages_decode_exactly_when_valid) {
    std::mt19937_64 rng(0x5eed'5e41'0001ull);
    auto pick = [&](std::uint64_t n) {
        return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng);
    };
    std::size_t accepted = 0, refused = 0;
    for (int i = 0; i < 100'000; ++i) {
        const bool request = pick(2) == 0;
        std::vector<std::byte> b =
            request ? wire(service_request{.op = static_cast<service_op>(1 + pick(5)),
                                           .id = rng(),
                                           .key = rng(),
                                           .address = rng(),
                                           .arg0 = rng()})
                    : wire(service_reply{.op = static_cast<service_op>(1 + pick(5)),
                                         .status = static_cast<std::uint16_t>(pick(16)),
                                         .id = rng(),
                                         .value = rng()});
        for (int m = 1 + static_cast<int>(pick(3)); m > 0; --m) {
            switch (pick(5)) {
                case 0:
                    b[pick(b.size())] ^= static_cast<std::byte>(1u << pick(8));
                    break;
                case 1:
                    b[4 + pick(4)] = static_cast<std::byte>(pick(6));  // version, op, flags
                    break;
                case 2:
                    b.resize(pick(b.size() + 8), std::byte{0});
                    break;
                case 3:
                    if (b.size() > 8) {
                        b[8 + pick(b.size() - 8)] = static_cast<std::byte>(rng());
                    }
                    break;
                default:
                    if (b.size() >= 48) {
                        b[40 + pick(8)] = std::byte{0};
                    }
                    break;
            }
            if (b.empty()) {
                break;
            }
        }
        const bool ok =
            request ? detail::decode_request(b).has_value() : detail::decode_reply(b).has_value();
        ASSERT_EQ(ok, request ? request_valid(b) : reply_valid(b)) << "iteration " << i;
        ++(ok ? accepted : refused);
    }
    EXPECT_GT(accepted, 10'000u);
    EXPECT_GT(refused, 10'000u);
}

}  // namespace
}  // namespace remora::test

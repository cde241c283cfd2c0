// SPDX-License-Identifier: BSD-3-Clause
// remote_region: the wire descriptor (serialise/parse of versions 3 and 2 and every validation),
// slice/check bounds, a deterministic mutation fuzz of parse(), and memory_region::describe on a
// real tcp domain.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "support.hpp"

namespace remora::test {
namespace {

constexpr std::uint64_t u64max = std::numeric_limits<std::uint64_t>::max();
constexpr usage rw = usage::read_source | usage::write_destination;
constexpr std::uint16_t remote_bits = static_cast<std::uint16_t>(remote_region::remote_usages);

remote_region sample() {
    return must(remote_region::make(0x1122334455667788ull, 0x1000, 0xa1b2c3d4e5f60718ull,
                                    rw | usage::flush_target, true, 0x00007f0012345000ull));
}

std::vector<std::byte> wire_of(const remote_region& r) {
    auto a = r.serialize();
    return {a.begin(), a.end()};
}

// The version 2 form of `r` (version 3's first 32 bytes, version byte 2).
std::vector<std::byte> v2_wire_of(const remote_region& r) {
    auto b = wire_of(r);
    b.resize(32);
    b[0] = std::byte{2};
    return b;
}

std::uint64_t le(const std::vector<std::byte>& b, std::size_t at, int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) {
        v |= static_cast<std::uint64_t>(b[at + i]) << (8 * i);
    }
    return v;
}

void put(std::vector<std::byte>& b, std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) {
        b[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
    }
}

#define EXPECT_MALFORMED(expr)                                                      \
    do {                                                                            \
        auto r_ = (expr);                                                           \
        ASSERT_FALSE(r_.has_value()) << #expr << " was accepted";                   \
        EXPECT_TRUE(r_.error() == errc::malformed_descriptor) << r_.error().what(); \
        EXPECT_FALSE(r_.error().message().empty());                                 \
    } while (0)

// ---------------------------------------------------------------- serialise / parse

TEST(remote_region_wire, layout_is_little_endian_version_3) {
    const auto b = wire_of(sample());
    ASSERT_EQ(b.size(), 40u);
    ASSERT_EQ(remote_region::serialized_size, 40u);
    EXPECT_EQ(static_cast<int>(b[0]), 3);
    EXPECT_EQ(static_cast<int>(b[1]), 1);
    EXPECT_EQ(le(b, 2, 2), static_cast<std::uint16_t>(rw | usage::flush_target));
    EXPECT_EQ(le(b, 4, 8), 0x1122334455667788ull);
    EXPECT_EQ(le(b, 12, 8), 0x1000u);
    EXPECT_EQ(le(b, 20, 8), 0xa1b2c3d4e5f60718ull);
    EXPECT_EQ(le(b, 28, 4), 0u);
    EXPECT_EQ(le(b, 32, 8), 0x00007f0012345000ull);
    const auto p =
        wire_of(must(sample().with_persistence(persistence::persistent | persistence::gpspm)));
    EXPECT_EQ(le(p, 28, 4), 0x5u);
}

TEST(remote_region_wire, persistence_round_trips_and_is_validated) {
    for (unsigned bits = 0; bits < 256; ++bits) {
        SCOPED_TRACE(bits);
        auto b = wire_of(sample());
        b[28] = static_cast<std::byte>(bits);
        auto r = remote_region::parse(b);
        const bool valid = bits == 0 || (bits <= 7 && (bits & 1) != 0);
        if (!valid) {
            EXPECT_MALFORMED(r);
            continue;
        }
        ASSERT_TRUE(r.has_value()) << r.error().what();
        EXPECT_EQ(static_cast<unsigned>(r->persistence()), bits);
        // A slice keeps what the target said about durability.
        EXPECT_EQ(must(r->slice(8, 8)).persistence(), r->persistence());
    }
    for (std::size_t at = 29; at < 32; ++at) {
        auto b = wire_of(sample());
        b[at] = std::byte{1};
        EXPECT_MALFORMED(remote_region::parse(b));
    }
    EXPECT_ERRC(sample().with_persistence(persistence::gpspm), errc::invalid_argument);
    EXPECT_ERRC(sample().with_persistence(static_cast<persistence>(0x10)), errc::invalid_argument);
}

TEST(remote_region_wire, round_trip) {
    const remote_region cases[] = {
        sample(),
        must(remote_region::make(0, 1, 0, usage::read_source, false)),
        must(remote_region::make(0, u64max, u64max, remote_region::remote_usages, false)),
        must(remote_region::make(u64max - 1, 1, 7, usage::write_destination, true)),
        must(remote_region::make(4096, 8, 42, usage::atomic_target, false)),
        must(remote_region::make(0, 64, 9, rw, false, 0x7ffd00001000ull)),
        must(remote_region::make(0, 1, 9, rw, false, u64max - 1)),
    };
    for (const remote_region& r : cases) {
        const auto b = r.serialize();
        auto back = remote_region::parse(b);
        ASSERT_TRUE(back.has_value()) << back.error().what();
        EXPECT_EQ(*back, r);
        EXPECT_EQ(back->address(), r.address());
        EXPECT_EQ(back->length(), r.length());
        EXPECT_EQ(back->key(), r.key());
        EXPECT_EQ(back->usages(), r.usages());
        EXPECT_EQ(back->virtual_addressing(), r.virtual_addressing());
        EXPECT_EQ(back->same_host_address(), r.same_host_address());
        EXPECT_EQ(back->serialize(), b);
    }
}

TEST(remote_region_wire, version_2_is_read_without_a_same_host_address) {
    const remote_region r = must(sample().with_persistence(persistence::persistent));
    const auto v2 = v2_wire_of(r);
    auto back = remote_region::parse(v2);
    ASSERT_TRUE(back.has_value()) << back.error().what();
    EXPECT_EQ(back->address(), r.address());
    EXPECT_EQ(back->length(), r.length());
    EXPECT_EQ(back->key(), r.key());
    EXPECT_EQ(back->usages(), r.usages());
    EXPECT_EQ(back->virtual_addressing(), r.virtual_addressing());
    EXPECT_EQ(back->persistence(), r.persistence());
    EXPECT_EQ(back->same_host_address(), 0u);
    // Written again, it is version 3 with no same-host address.
    const auto v3 = wire_of(*back);
    ASSERT_EQ(v3.size(), 40u);
    EXPECT_EQ(static_cast<int>(v3[0]), 3);
    EXPECT_TRUE(std::equal(v3.begin() + 1, v3.begin() + 32, v2.begin() + 1));
    EXPECT_EQ(le(v3, 32, 8), 0u);

    // The same checks as version 3's: size, reserved bytes, overflow.
    for (std::size_t n : {0u, 1u, 31u, 33u, 40u}) {
        SCOPED_TRACE(n);
        auto b = v2;
        b.resize(n, std::byte{0});
        if (n > 0) {
            b[0] = std::byte{2};
        }
        EXPECT_MALFORMED(remote_region::parse(b));
    }
    for (std::size_t at = 29; at < 32; ++at) {
        auto b = v2;
        b[at] = std::byte{1};
        EXPECT_MALFORMED(remote_region::parse(b));
    }
    auto wraps = v2;
    put(wraps, 4, u64max, 8);
    EXPECT_MALFORMED(remote_region::parse(wraps));
}

TEST(remote_region_wire, same_host_address_plus_length_overflow_is_malformed) {
    struct c {
        std::uint64_t same_host, length;
        bool ok;
    };
    const c cases[] = {
        {0, u64max, true},  // none: nothing to overflow
        {u64max, 1, false}, {u64max - 10, 10, true},         {u64max - 9, 10, false},
        {1, u64max, false}, {1ull << 63, 1ull << 63, false},
    };
    for (const c& k : cases) {
        SCOPED_TRACE(testing::Message() << k.same_host << " + " << k.length);
        auto b = wire_of(sample());
        put(b, 4, 0, 8);
        put(b, 12, k.length, 8);
        put(b, 32, k.same_host, 8);
        auto parsed = remote_region::parse(b);
        auto made = remote_region::make(0, k.length, 3, usage::read_source, false, k.same_host);
        if (k.ok) {
            ASSERT_TRUE(parsed.has_value()) << parsed.error().what();
            ASSERT_TRUE(made.has_value()) << made.error().what();
            EXPECT_EQ(parsed->same_host_address(), k.same_host);
        } else {
            EXPECT_MALFORMED(std::move(parsed));
            EXPECT_MALFORMED(std::move(made));
        }
    }
}

TEST(remote_region_wire, every_truncation_is_malformed) {
    const auto b = wire_of(sample());
    for (std::size_t n = 0; n < remote_region::serialized_size; ++n) {
        SCOPED_TRACE(n);
        EXPECT_MALFORMED(remote_region::parse(std::span(b.data(), n)));
    }
    EXPECT_MALFORMED(remote_region::parse({}));
}

TEST(remote_region_wire, oversize_is_malformed) {
    const auto b = wire_of(sample());
    for (std::size_t n = remote_region::serialized_size + 1; n <= 128; ++n) {
        SCOPED_TRACE(n);
        std::vector<std::byte> big = b;
        big.resize(n, std::byte{0});
        EXPECT_MALFORMED(remote_region::parse(big));
    }
    std::vector<std::byte> huge = b;
    huge.resize(1 << 20, std::byte{0x5a});
    EXPECT_MALFORMED(remote_region::parse(huge));
}

TEST(remote_region_wire, unknown_version_is_malformed) {
    for (int v = 0; v < 256; ++v) {
        if (v == remote_region::version) {
            continue;  // (2 with version 3's 40 bytes is oversize for version 2: refused too)
        }
        SCOPED_TRACE(v);
        auto b = wire_of(sample());
        b[0] = static_cast<std::byte>(v);
        EXPECT_MALFORMED(remote_region::parse(b));
    }
}

TEST(remote_region_wire, addressing_byte_above_one_is_malformed) {
    for (int a = 0; a < 256; ++a) {
        SCOPED_TRACE(a);
        auto b = wire_of(sample());
        b[1] = static_cast<std::byte>(a);
        auto r = remote_region::parse(b);
        if (a <= 1) {
            ASSERT_TRUE(r.has_value()) << r.error().what();
            EXPECT_EQ(r->virtual_addressing(), a == 1);
        } else {
            EXPECT_MALFORMED(std::move(r));
        }
    }
}

TEST(remote_region_wire, usage_bits_must_be_nonempty_remote_usages) {
    for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
        auto b = wire_of(sample());
        put(b, 2, bits, 2);
        auto r = remote_region::parse(b);
        const bool valid = bits != 0 && (bits & ~remote_bits) == 0;
        if (valid) {
            ASSERT_TRUE(r.has_value()) << bits << ": " << r.error().what();
            EXPECT_EQ(static_cast<std::uint16_t>(r->usages()), bits);
        } else {
            ASSERT_FALSE(r.has_value()) << "usage bits " << bits << " accepted";
            ASSERT_TRUE(r.error() == errc::malformed_descriptor) << r.error().what();
        }
    }
    // Each local-only usage alone is refused, by make() as well.
    for (usage u : {usage::read_destination, usage::write_source, usage::send, usage::receive,
                    static_cast<usage>(1u << 8), static_cast<usage>(1u << 15)}) {
        SCOPED_TRACE(static_cast<int>(u));
        EXPECT_MALFORMED(remote_region::make(0, 1, 1, u, false));
        EXPECT_MALFORMED(remote_region::make(0, 1, 1, usage::read_source | u, false));
    }
    EXPECT_MALFORMED(remote_region::make(0, 1, 1, usage::none, false));
}

TEST(remote_region_wire, zero_length_is_malformed) {
    auto b = wire_of(sample());
    put(b, 12, 0, 8);
    EXPECT_MALFORMED(remote_region::parse(b));
    EXPECT_MALFORMED(remote_region::make(0, 0, 1, usage::read_source, false));
    EXPECT_MALFORMED(remote_region::make(u64max, 0, 1, usage::read_source, false));
}

TEST(remote_region_wire, address_plus_length_overflow_is_malformed) {
    struct c {
        std::uint64_t address, length;
        bool ok;
    };
    const c cases[] = {
        {u64max, 1, false},
        {1, u64max, false},
        {u64max, u64max, false},
        {u64max - 10, 10, true},  // address + length == 2^64 - 1: fits
        {u64max - 9, 10, false},  // address + length == 2^64: wraps to 0
        {u64max - 9, 11, false},
        {1ull << 63, 1ull << 63, false},
        {(1ull << 63) - 1, 1ull << 63, true},
        {0, u64max, true},
    };
    for (const c& k : cases) {
        SCOPED_TRACE(testing::Message() << k.address << " + " << k.length);
        auto b = wire_of(sample());
        put(b, 4, k.address, 8);
        put(b, 12, k.length, 8);
        put(b, 32, 0, 8);  // no same-host address (checked on its own below)
        auto parsed = remote_region::parse(b);
        auto made = remote_region::make(k.address, k.length, 3, usage::read_source, false);
        if (k.ok) {
            ASSERT_TRUE(parsed.has_value()) << parsed.error().what();
            ASSERT_TRUE(made.has_value()) << made.error().what();
            EXPECT_EQ(parsed->address(), k.address);
            EXPECT_EQ(parsed->length(), k.length);
        } else {
            EXPECT_MALFORMED(std::move(parsed));
            EXPECT_MALFORMED(std::move(made));
        }
    }
}

// ---------------------------------------------------------------- slice / check

TEST(remote_region_bounds, slice_narrows_and_keeps_key_usage_addressing) {
    const remote_region r = must(remote_region::make(1000, 4096, 77, rw, false));
    auto s = r.slice(100, 200);
    ASSERT_TRUE(s.has_value()) << s.error().what();
    EXPECT_EQ(s->address(), 1100u);
    EXPECT_EQ(s->length(), 200u);
    EXPECT_EQ(s->key(), 77u);
    EXPECT_EQ(s->usages(), rw);
    EXPECT_FALSE(s->virtual_addressing());

    auto whole = r.slice(0, 4096);
    ASSERT_TRUE(whole.has_value());
    EXPECT_EQ(*whole, r);
    auto tail = r.slice(4095, 1);
    ASSERT_TRUE(tail.has_value());
    EXPECT_EQ(tail->address(), 1000u + 4095u);

    // A slice grants nothing beyond itself.
    EXPECT_ERRC(s->slice(0, 201), errc::out_of_range);
    EXPECT_ERRC(s->slice(200, 1), errc::out_of_range);
    EXPECT_ERRC(s->check(199, 2, usage::none), errc::out_of_range);
    EXPECT_TRUE(s->check(199, 1, usage::read_source).has_value());

    const remote_region v = must(remote_region::make(u64max - 4096, 4096, 5, rw, true));
    auto vs = v.slice(4000, 96);
    ASSERT_TRUE(vs.has_value()) << vs.error().what();
    EXPECT_EQ(vs->address(), u64max - 96);
    EXPECT_TRUE(vs->virtual_addressing());
    EXPECT_EQ(vs->same_host_address(), 0u);  // none stays none

    // The same-host address moves with the offset.
    const remote_region h = must(remote_region::make(1000, 4096, 77, rw, false, u64max - 4096));
    auto hs = h.slice(4000, 96);
    ASSERT_TRUE(hs.has_value()) << hs.error().what();
    EXPECT_EQ(hs->same_host_address(), u64max - 96);
    EXPECT_EQ(hs->address(), 5000u);
}

TEST(remote_region_bounds, slice_out_of_range_and_overflow) {
    const remote_region r = must(remote_region::make(1000, 4096, 77, rw, false));
    EXPECT_ERRC(r.slice(4097, 1), errc::out_of_range);
    EXPECT_ERRC(r.slice(4096, 1), errc::out_of_range);
    EXPECT_ERRC(r.slice(0, 4097), errc::out_of_range);
    EXPECT_ERRC(r.slice(1, 4096), errc::out_of_range);
    EXPECT_ERRC(r.slice(4000, 97), errc::out_of_range);
    // offset + length wraps around 2^64 to a small number: must still be refused.
    EXPECT_ERRC(r.slice(1, u64max), errc::out_of_range);
    EXPECT_ERRC(r.slice(u64max, 1), errc::out_of_range);
    EXPECT_ERRC(r.slice(u64max, 2), errc::out_of_range);
    EXPECT_ERRC(r.slice(u64max - 4095, 4096), errc::out_of_range);
    EXPECT_ERRC(r.slice(4096, u64max), errc::out_of_range);
    EXPECT_ERRC(r.slice(u64max, u64max), errc::out_of_range);
    // An empty slice describes nothing.
    EXPECT_ERRC(r.slice(0, 0), errc::invalid_argument);
    EXPECT_ERRC(r.slice(4096, 0), errc::invalid_argument);
}

TEST(remote_region_bounds, check_bounds_and_overflow) {
    const remote_region r = must(remote_region::make(0, 4096, 1, rw, false));
    EXPECT_TRUE(r.check(0, 4096, usage::read_source).has_value());
    EXPECT_TRUE(r.check(0, 0, usage::none).has_value());
    EXPECT_TRUE(r.check(4096, 0, usage::none).has_value());
    EXPECT_TRUE(r.check(4095, 1, usage::write_destination).has_value());
    EXPECT_TRUE(r.check(100, 3996, rw).has_value());

    EXPECT_ERRC(r.check(4097, 0, usage::none), errc::out_of_range);
    EXPECT_ERRC(r.check(4096, 1, usage::none), errc::out_of_range);
    EXPECT_ERRC(r.check(0, 4097, usage::none), errc::out_of_range);
    EXPECT_ERRC(r.check(100, 3997, usage::none), errc::out_of_range);
    EXPECT_ERRC(r.check(1, u64max, usage::none), errc::out_of_range);
    EXPECT_ERRC(r.check(u64max, 1, usage::none), errc::out_of_range);
    EXPECT_ERRC(r.check(u64max, 0, usage::none), errc::out_of_range);
    EXPECT_ERRC(r.check(u64max - 10, 11, usage::none), errc::out_of_range);
    EXPECT_ERRC(r.check(u64max, u64max, usage::none), errc::out_of_range);
    // Overflow that would land exactly inside the region after wrapping.
    EXPECT_ERRC(r.check(u64max - 99, 200, usage::read_source), errc::out_of_range);
    EXPECT_ERRC(r.check(8, u64max - 7, usage::read_source), errc::out_of_range);

    // Range is checked before usage; a usage not granted is access_denied.
    EXPECT_ERRC(r.check(0, 8, usage::atomic_target), errc::access_denied);
    EXPECT_ERRC(r.check(0, 8, usage::flush_target), errc::access_denied);
    EXPECT_ERRC(r.check(0, 8, usage::read_source | usage::atomic_target), errc::access_denied);
    const remote_region ro = must(remote_region::make(0, 4096, 1, usage::read_source, false));
    EXPECT_ERRC(ro.check(0, 8, usage::write_destination), errc::access_denied);
    EXPECT_TRUE(ro.check(0, 8, usage::read_source).has_value());

    // A slice checks against its own length, not the parent's.
    const remote_region s = must(r.slice(4000, 96));
    EXPECT_TRUE(s.check(0, 96, usage::read_source).has_value());
    EXPECT_ERRC(s.check(0, 97, usage::read_source), errc::out_of_range);
    EXPECT_ERRC(s.check(u64max, 2, usage::read_source), errc::out_of_range);
}

// ---------------------------------------------------------------- fuzz

// The validity rule of the wire format, written independently of parse().
bool reference_valid(const std::vector<std::byte>& b) {
    if (b.empty()) {
        return false;
    }
    const int version = static_cast<int>(b[0]);
    if (!(version == 3 && b.size() == 40) && !(version == 2 && b.size() == 32)) {
        return false;
    }
    if (static_cast<int>(b[1]) > 1) {
        return false;
    }
    const auto persist = static_cast<unsigned>(b[28]);
    if (persist > 7 || (persist != 0 && (persist & 1) == 0) || le(b, 29, 3) != 0) {
        return false;
    }
    const std::uint64_t bits = le(b, 2, 2);
    if (bits == 0 || (bits & ~static_cast<std::uint64_t>(remote_bits)) != 0) {
        return false;
    }
    const std::uint64_t address = le(b, 4, 8);
    const std::uint64_t length = le(b, 12, 8);
    if (length == 0) {
        return false;
    }
    unsigned __int128 end = static_cast<unsigned __int128>(address) + length;
    const std::uint64_t same_host = version == 3 ? le(b, 32, 8) : 0;
    unsigned __int128 same_host_end = static_cast<unsigned __int128>(same_host) + length;
    return end <= static_cast<unsigned __int128>(u64max) &&
           same_host_end <= static_cast<unsigned __int128>(u64max);
}

TEST(remote_region_fuzz, mutated_descriptors_parse_or_fail_cleanly) {
    std::mt19937_64 rng(0x5eed'2024'0001ull);
    auto pick = [&](std::uint64_t n) {
        return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng);
    };
    const std::uint64_t interesting[] = {
        0, 1, 7, 8, 4095, 4096, 1ull << 32, (1ull << 63) - 1, 1ull << 63, u64max - 1, u64max};
    auto value = [&]() -> std::uint64_t {
        return pick(3) == 0 ? interesting[pick(std::size(interesting))] : rng();
    };

    std::size_t accepted = 0;
    std::size_t refused = 0;
    constexpr int iterations = 200'000;
    for (int i = 0; i < iterations; ++i) {
        // Start from a valid descriptor, then mutate it 1..4 times.
        const auto uses = static_cast<usage>((1 + pick(remote_bits)) & remote_bits);
        auto base = remote_region::make(pick(1ull << 40), 1 + pick(1ull << 30), rng(),
                                        any(uses) ? uses : usage::read_source, pick(2) == 1,
                                        pick(2) == 1 ? pick(1ull << 47) : 0);
        ASSERT_TRUE(base.has_value()) << base.error().what();
        std::vector<std::byte> b = pick(4) == 0 ? v2_wire_of(*base) : wire_of(*base);
        const int mutations = 1 + static_cast<int>(pick(4));
        for (int m = 0; m < mutations; ++m) {
            switch (pick(9)) {
                case 0:  // flip one bit
                    if (!b.empty()) {
                        b[pick(b.size())] ^= static_cast<std::byte>(1u << pick(8));
                    }
                    break;
                case 1:  // random byte
                    if (!b.empty()) {
                        b[pick(b.size())] = static_cast<std::byte>(pick(256));
                    }
                    break;
                case 2:  // truncate
                    b.resize(pick(b.size() + 1));
                    break;
                case 3:  // append
                    b.resize(b.size() + 1 + pick(8), static_cast<std::byte>(pick(256)));
                    break;
                case 4:  // a field gets an interesting or random value
                    if (b.size() >= 40) {
                        const std::size_t field = pick(4);
                        put(b, field == 3 ? 32 : 4 + 8 * field, value(), 8);
                    } else if (b.size() >= 28) {
                        put(b, 4 + 8 * pick(3), value(), 8);
                    }
                    break;
                case 8:  // persistence and reserved bytes
                    if (b.size() >= 32) {
                        b[28 + pick(4)] =
                            static_cast<std::byte>(pick(4) == 0 ? pick(256) : pick(8));
                    }
                    break;
                case 5:  // usage bits
                    if (b.size() >= 4) {
                        put(b, 2, pick(3) == 0 ? pick(0x10000) : pick(256), 2);
                    }
                    break;
                case 6:  // version / addressing
                    if (b.size() >= 2) {
                        b[pick(2)] = static_cast<std::byte>(pick(4));
                    }
                    break;
                default:  // length/address or length/same-host address near the overflow edge
                    if (b.size() >= 28) {
                        const std::uint64_t len = 1 + pick(1 << 12);
                        put(b, 12, len, 8);
                        const std::size_t at = b.size() >= 40 && pick(2) == 0 ? 32 : 4;
                        put(b, at, u64max - len + 1 - pick(3) + pick(3), 8);
                    }
                    break;
            }
        }
        auto r = remote_region::parse(b);
        const bool expect_ok = reference_valid(b);
        if (r) {
            ASSERT_TRUE(expect_ok) << "iteration " << i << ": accepted an invalid descriptor";
            // One encoding per descriptor: version 3 gives back its bytes; version 2 its bytes
            // as version 3 (version byte 3, no same-host address).
            std::vector<std::byte> want = b;
            if (static_cast<int>(b[0]) == 2) {
                want[0] = std::byte{3};
                want.resize(40, std::byte{0});
            }
            const auto again = r->serialize();
            ASSERT_EQ(want.size(), again.size());
            ASSERT_TRUE(std::equal(want.begin(), want.end(), again.begin())) << "iteration " << i;
            ++accepted;
        } else {
            ASSERT_TRUE(r.error() == errc::malformed_descriptor)
                << "iteration " << i << ": " << r.error().what();
            ASSERT_FALSE(expect_ok)
                << "iteration " << i << ": refused a valid descriptor: " << r.error().what();
            ASSERT_FALSE(r.error().message().empty());
            ++refused;
        }
    }
    // The mutations must exercise both outcomes substantially.
    EXPECT_GT(accepted, static_cast<std::size_t>(iterations / 20));
    EXPECT_GT(refused, static_cast<std::size_t>(iterations / 4));
    std::printf("fuzz: %zu accepted, %zu refused\n", accepted, refused);
}

// ---------------------------------------------------------------- memory_region::describe

class describe_test : public testing::Test {
  protected:
    void SetUp() override {
        auto d = domain::open({.provider = "tcp"});
        ASSERT_TRUE(d.has_value()) << d.error().what();
        dom_ = std::move(*d);
    }
    std::optional<domain> dom_;
    buffer mem_{4096};
};

TEST_F(describe_test, whole_region_and_subranges) {
    auto mr = must(memory_region::create(*dom_, mem_.span(), rw));
    const bool virt = has_all(dom_->caps().mr_mode, mr_mode::virt_addr);
    const std::uint64_t base = virt ? reinterpret_cast<std::uintptr_t>(mem_.bytes.data()) : 0;

    auto all = mr.describe();
    ASSERT_TRUE(all.has_value()) << all.error().what();
    EXPECT_EQ(all->length(), 4096u);
    EXPECT_EQ(all->address(), base);
    EXPECT_EQ(all->usages(), rw);
    EXPECT_EQ(all->virtual_addressing(), virt);

    auto part = mr.describe(100, 200);
    ASSERT_TRUE(part.has_value()) << part.error().what();
    EXPECT_EQ(part->address(), base + 100);
    EXPECT_EQ(part->length(), 200u);
    EXPECT_EQ(part->key(), all->key());

    auto to_end = mr.describe(4000);
    ASSERT_TRUE(to_end.has_value()) << to_end.error().what();
    EXPECT_EQ(to_end->length(), 96u);
    auto last = mr.describe(4095, 1);
    ASSERT_TRUE(last.has_value()) << last.error().what();

    // The descriptor survives the wire.
    auto wire = remote_region::parse(part->serialize());
    ASSERT_TRUE(wire.has_value()) << wire.error().what();
    EXPECT_EQ(*wire, *part);
}

TEST_F(describe_test, offset_beyond_region_is_out_of_range) {
    auto mr = must(memory_region::create(*dom_, mem_.span(), rw));
    EXPECT_ERRC(mr.describe(4097), errc::out_of_range);
    EXPECT_ERRC(mr.describe(4097, 1), errc::out_of_range);
    EXPECT_ERRC(mr.describe(1 << 20, 1), errc::out_of_range);
    EXPECT_ERRC(mr.describe(std::numeric_limits<std::size_t>::max(), 1), errc::out_of_range);
    EXPECT_ERRC(mr.describe(std::numeric_limits<std::size_t>::max()), errc::out_of_range);
}

TEST_F(describe_test, offset_at_end_leaves_nothing_to_describe) {
    // [4096, end) of a 4096-byte region is empty: a range error, not a "malformed descriptor"
    // (nothing was parsed).
    auto mr = must(memory_region::create(*dom_, mem_.span(), rw));
    EXPECT_ERRC(mr.describe(4096), errc::out_of_range);
}

TEST_F(describe_test, length_beyond_region_is_out_of_range) {
    auto mr = must(memory_region::create(*dom_, mem_.span(), rw));
    EXPECT_ERRC(mr.describe(0, 4097), errc::out_of_range);
    EXPECT_ERRC(mr.describe(1, 4096), errc::out_of_range);
    EXPECT_ERRC(mr.describe(4000, 97), errc::out_of_range);
    EXPECT_ERRC(mr.describe(4096, 1), errc::out_of_range);
    // offset + length wraps around: must not pass the bounds check.
    EXPECT_ERRC(mr.describe(1, std::numeric_limits<std::size_t>::max()), errc::out_of_range);
    EXPECT_ERRC(mr.describe(4000, std::numeric_limits<std::size_t>::max() - 3000),
                errc::out_of_range);
}

TEST_F(describe_test, grants_only_remote_usages) {
    auto mr = must(memory_region::create(*dom_, mem_.span(),
                                         usage::read_source | usage::atomic_target | usage::send |
                                             usage::receive | usage::write_source |
                                             usage::read_destination));
    auto d = mr.describe();
    ASSERT_TRUE(d.has_value()) << d.error().what();
    EXPECT_EQ(d->usages(), usage::read_source | usage::atomic_target);
    EXPECT_ERRC(d->check(0, 8, usage::write_destination), errc::access_denied);

    auto all = must(memory_region::create(*dom_, mem_.span(), all_usages));
    auto da = all.describe();
    ASSERT_TRUE(da.has_value()) << da.error().what();
    EXPECT_EQ(da->usages(), remote_region::remote_usages);
}

TEST_F(describe_test, local_only_region_cannot_be_described) {
    for (usage u : {usage::read_destination, usage::write_source, usage::send, usage::receive,
                    usage::read_destination | usage::write_source | usage::send | usage::receive}) {
        SCOPED_TRACE(static_cast<int>(u));
        auto mr = must(memory_region::create(*dom_, mem_.span(), u));
        EXPECT_ERRC(mr.describe(), errc::access_denied);
        EXPECT_ERRC(mr.describe(0, 8), errc::access_denied);
    }
}

TEST_F(describe_test, create_refuses_empty_memory_and_no_usage) {
    EXPECT_ERRC(memory_region::create(*dom_, {}, rw), errc::invalid_argument);
    EXPECT_ERRC(memory_region::create(*dom_, mem_.span(), usage::none), errc::invalid_argument);
    EXPECT_ERRC(memory_region::create(*dom_, mem_.span(), static_cast<usage>(1u << 8)),
                errc::invalid_argument);
}

}  // namespace
}  // namespace remora::test

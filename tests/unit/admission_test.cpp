// SPDX-License-Identifier: BSD-3-Clause
// Admission tokens (remora/admission.hpp): what a gate admits and why it refuses the rest.
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "support.hpp"

namespace remora::test {
namespace {

using clock = std::chrono::system_clock;

admission_key key_of(std::uint8_t fill) {
    std::array<std::byte, 32> raw;
    raw.fill(static_cast<std::byte>(fill));
    return must(admission_key::from_bytes(raw), "key");
}

admission_gate gate_of(std::uint8_t fill, admission_config cfg = {}) {
    return must(admission_gate::create(key_of(fill), cfg), "gate");
}

std::vector<std::byte> token(std::uint8_t fill, std::string_view id = "alice",
                             std::span<const std::byte> payload = {},
                             clock::time_point now = clock::now()) {
    return must(make_admission_token(key_of(fill), id, payload, now), "token");
}

// The refusal reason of a failed check, or nullopt when it passed.
template <class R>
std::optional<admission_refusal> refusal(const R& r) {
    if (r.has_value())
        return std::nullopt;
    EXPECT_TRUE(r.error() == errc::access_denied) << r.error().what();
    return admission_refusal_of(r.error());
}

TEST(admission_token, valid_token_is_admitted_with_identity_and_payload) {
    auto gate = gate_of(7);
    const std::array<std::byte, 2> payload{std::byte{8}, std::byte{0}};
    const auto t = token(7, "alice@host", payload);
    EXPECT_EQ(t.size(), admission_token_overhead + 10 + 2);
    auto p = gate.check(t);
    REMORA_ASSERT_OK(p);
    EXPECT_EQ(p->identity, "alice@host");
    EXPECT_EQ(p->payload, std::vector<std::byte>(payload.begin(), payload.end()));
    EXPECT_EQ(gate.remembered(), 1u);
}

// The layout admission.hpp states, byte by byte, with the MAC recomputed here through libsodium.
TEST(admission_token, layout_is_the_documented_one) {
    EXPECT_EQ(admission_token_overhead, 38u);
    const std::array<std::byte, 3> payload{std::byte{4}, std::byte{5}, std::byte{6}};
    const clock::time_point now{std::chrono::milliseconds(0x0123456789abLL)};
    const auto t = token(7, "dave", payload, now);
    ASSERT_EQ(t.size(), 38u + 4 + 3);
    EXPECT_EQ(t[0], std::byte{'R'});
    EXPECT_EQ(t[1], std::byte{'a'});
    EXPECT_EQ(t[2], std::byte{2});  // version
    EXPECT_EQ(t[3], std::byte{4});  // identity length
    const std::array<std::byte, 6> stamp{std::byte{0xab}, std::byte{0x89}, std::byte{0x67},
                                         std::byte{0x45}, std::byte{0x23}, std::byte{0x01}};
    EXPECT_TRUE(std::equal(stamp.begin(), stamp.end(), t.begin() + 4));
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(&t[22]), 4), "dave");
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), t.begin() + 26));
    auto k = key_of(7);
    std::array<unsigned char, crypto_auth_hmacsha512256_BYTES> mac;
    crypto_auth_hmacsha512256(mac.data(), reinterpret_cast<const unsigned char*>(t.data()),
                              t.size() - 16, k.bytes());
    EXPECT_EQ(std::memcmp(mac.data(), &t[t.size() - 16], 16), 0);
    // Two tokens of the same instant differ in their random nonce (bytes 10..21).
    const auto u = token(7, "dave", payload, now);
    EXPECT_FALSE(std::equal(t.begin() + 10, t.begin() + 22, u.begin() + 10));
    auto gate = gate_of(7);
    REMORA_ASSERT_OK(gate.check(t, now));
    REMORA_ASSERT_OK(gate.check(u, now));
}

TEST(admission_token, wrong_key_is_refused_as_bad_proof) {
    auto gate = gate_of(7);
    EXPECT_EQ(refusal(gate.check(token(8))), admission_refusal::bad_proof);
    EXPECT_EQ(gate.remembered(), 0u);
}

TEST(admission_token, every_tampered_byte_is_refused) {
    auto gate = gate_of(7);
    const std::array<std::byte, 3> payload{std::byte{1}, std::byte{2}, std::byte{3}};
    const auto good = token(7, "bob", payload);
    for (std::size_t i = 0; i < good.size(); ++i) {
        auto bad = good;
        bad[i] ^= std::byte{0x01};
        const auto why = refusal(gate.check(bad));
        ASSERT_TRUE(why.has_value()) << "byte " << i << " flipped was admitted";
        // Flipping a byte of the magic, version or identity length changes the token's shape.
        if (i >= 4) {
            EXPECT_EQ(why, admission_refusal::bad_proof) << "byte " << i;
        }
    }
    EXPECT_EQ(gate.remembered(), 0u);
    REMORA_ASSERT_OK(gate.check(good));  // the original still passes: nothing was remembered
}

TEST(admission_token, stale_and_future_tokens_are_refused) {
    auto gate = gate_of(7, {.window = std::chrono::seconds(30)});
    const auto now = clock::now();
    EXPECT_EQ(refusal(gate.check(token(7, "a", {}, now - std::chrono::seconds(31)), now)),
              admission_refusal::stale);
    EXPECT_EQ(refusal(gate.check(token(7, "a", {}, now + std::chrono::seconds(31)), now)),
              admission_refusal::stale);
    REMORA_ASSERT_OK(gate.check(token(7, "a", {}, now - std::chrono::seconds(29)), now));
    REMORA_ASSERT_OK(gate.check(token(7, "a", {}, now + std::chrono::seconds(29)), now));
}

TEST(admission_token, replayed_token_is_refused_until_it_is_stale) {
    auto gate = gate_of(7, {.window = std::chrono::seconds(30)});
    const auto now = clock::now();
    const auto t = token(7, "a", {}, now);
    REMORA_ASSERT_OK(gate.check(t, now));
    EXPECT_EQ(refusal(gate.check(t, now)), admission_refusal::replayed);
    EXPECT_EQ(refusal(gate.check(t, now + std::chrono::seconds(30))), admission_refusal::replayed);
    // Once its timestamp left the window the nonce is forgotten, and the token is stale instead.
    EXPECT_EQ(refusal(gate.check(t, now + std::chrono::seconds(31))), admission_refusal::stale);
    EXPECT_EQ(gate.remembered(), 0u);
}

TEST(admission_token, full_replay_cache_fails_closed_and_frees_with_time) {
    auto gate = gate_of(7, {.window = std::chrono::seconds(10), .replay_cache = 3});
    const auto now = clock::now();
    for (int i = 0; i < 3; ++i)
        REMORA_ASSERT_OK(gate.check(token(7, "a", {}, now), now));
    EXPECT_EQ(refusal(gate.check(token(7, "a", {}, now), now)), admission_refusal::overloaded);
    EXPECT_EQ(gate.remembered(), 3u);
    const auto later = now + std::chrono::seconds(11);
    REMORA_ASSERT_OK(gate.check(token(7, "a", {}, later), later));
    EXPECT_EQ(gate.remembered(), 1u);
}

TEST(admission_token, truncated_oversized_and_foreign_data_are_malformed) {
    auto gate = gate_of(7);
    const auto good = token(7, "carol");
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2},
                          admission_token_overhead - 1, good.size() - 1}) {
        std::vector<std::byte> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
        EXPECT_EQ(refusal(gate.check(cut)), admission_refusal::malformed) << n << " bytes";
    }
    // An identity length over the limit, or beyond the token's end.
    auto long_id = good;
    long_id[3] = std::byte{65};
    EXPECT_EQ(refusal(gate.check(long_id)), admission_refusal::malformed);
    auto past_end = good;
    past_end[3] = std::byte{6};
    past_end.resize(admission_token_overhead + 5);
    EXPECT_EQ(refusal(gate.check(past_end)), admission_refusal::malformed);
    std::vector<std::byte> big(256, std::byte{0x41});
    EXPECT_EQ(refusal(gate.check(big)), admission_refusal::malformed);
    for (auto v : {std::byte{1}, std::byte{3}}) {
        auto other_version = good;
        other_version[2] = v;
        EXPECT_EQ(refusal(gate.check(other_version)), admission_refusal::malformed);
    }
    EXPECT_EQ(gate.remembered(), 0u);
}

TEST(admission_token, bytes_added_or_removed_at_the_end_break_the_proof) {
    // The payload runs to the MAC: a byte more or less moves the MAC, which then fails.
    auto gate = gate_of(7);
    const std::array<std::byte, 2> payload{std::byte{8}, std::byte{0}};
    const auto good = token(7, "erin", payload);
    auto longer = good;
    longer.push_back(std::byte{0});
    EXPECT_EQ(refusal(gate.check(longer)), admission_refusal::bad_proof);
    auto shorter = good;
    shorter.erase(shorter.end() - 17);  // the payload's last byte
    EXPECT_EQ(refusal(gate.check(shorter)), admission_refusal::bad_proof);
    EXPECT_EQ(gate.remembered(), 0u);
    REMORA_ASSERT_OK(gate.check(good));
}

TEST(admission_token, limits_of_identity_and_config_are_refused) {
    EXPECT_ERRC(make_admission_token(key_of(1), std::string(65, 'x')), errc::invalid_argument);
    REMORA_ASSERT_OK(make_admission_token(key_of(1), std::string(64, 'x')));
    EXPECT_ERRC(make_admission_token(key_of(1), "a", std::vector<std::byte>(65536)),
                errc::invalid_argument);
    EXPECT_ERRC(
        make_admission_token(key_of(1), "a", {}, clock::time_point{std::chrono::milliseconds(-1)}),
        errc::invalid_argument);
    EXPECT_ERRC(admission_gate::create(key_of(1), {.window = std::chrono::milliseconds(0)}),
                errc::invalid_argument);
    EXPECT_ERRC(admission_gate::create(key_of(1), {.replay_cache = 0}), errc::invalid_argument);
    EXPECT_ERRC(admission_key::from_bytes(std::vector<std::byte>(31)), errc::invalid_argument);
}

TEST(admission_token, reject_data_round_trips_and_foreign_data_is_not_a_refusal) {
    for (auto r :
         {admission_refusal::malformed, admission_refusal::bad_proof, admission_refusal::stale,
          admission_refusal::replayed, admission_refusal::overloaded}) {
        const auto d = admission_reject_data(r);
        auto e = error(errc::rejected, "x").with_data({d.begin(), d.end()});
        EXPECT_EQ(admission_refusal_of(e), r);
        EXPECT_NE(std::string(to_string(r)), "unknown reason");
    }
    EXPECT_EQ(admission_refusal_of(error(errc::rejected, "x")), std::nullopt);
    auto other = error(errc::rejected, "x").with_data({std::byte{1}});
    EXPECT_EQ(admission_refusal_of(other), std::nullopt);
}

struct key_file_test : testing::Test {
    std::filesystem::path dir;
    void SetUp() override {
        char tmpl[] = "/tmp/remora-key-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir = tmpl;
    }
    void TearDown() override { std::filesystem::remove_all(dir); }
    void write(const std::filesystem::path& p, std::size_t n, mode_t mode) {
        std::ofstream(p) << std::string(n, 'k');
        ASSERT_EQ(::chmod(p.c_str(), mode), 0);
    }
};

TEST_F(key_file_test, saved_key_loads_and_proves_the_same) {
    auto k = must(admission_key::generate());
    const auto p = (dir / "k").string();
    REMORA_ASSERT_OK(k.save(p));
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_ERRC(k.save(p), errc::invalid_argument);  // never overwrites
    auto loaded = must(admission_key::load(p));
    auto gate = must(admission_gate::create(std::move(loaded)));
    REMORA_ASSERT_OK(gate.check(must(make_admission_token(k, "me"))));
}

TEST_F(key_file_test, open_mode_wrong_size_and_missing_files_are_refused) {
    write(dir / "open", 32, 0644);
    EXPECT_ERRC(admission_key::load((dir / "open").string()), errc::access_denied);
    write(dir / "short", 31, 0600);
    EXPECT_ERRC(admission_key::load((dir / "short").string()), errc::invalid_argument);
    write(dir / "long", 33, 0600);
    EXPECT_ERRC(admission_key::load((dir / "long").string()), errc::invalid_argument);
    EXPECT_ERRC(admission_key::load((dir / "none").string()), errc::invalid_argument);
    write(dir / "ok", 32, 0400);
    REMORA_ASSERT_OK(admission_key::load((dir / "ok").string()));
}

}  // namespace
}  // namespace remora::test

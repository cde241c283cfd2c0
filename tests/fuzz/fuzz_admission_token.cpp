// SPDX-License-Identifier: BSD-3-Clause
// Fuzzes what an admission_gate parses from a connecting peer: the admission token in the
// connection request's private data (include/remora/admission.hpp, src/access), and what a
// refused client parses from the target's reject. The first byte picks a mode (modulo 3):
//   0     the rest is a token as received. Contract: no crash or UB; a refusal is
//         errc::access_denied with a message and a reason; nothing is admitted without the key's
//         HMAC (an admission here would be a forgery: the fuzzer does not know the key).
//   1     the rest shapes a genuine token (identity length, time offset, identity, payload)
//         made with the key, and optionally flips one of its bits. Contract: the genuine token is
//         admitted once with its identity and payload intact, then refused as replayed; a
//         flipped token is refused (malformed, wrong proof or stale), never admitted.
//   2     the rest is a reject's private data (admission_refusal_of). Contract: a reason is
//         found exactly when the bytes are admission_reject_data(reason).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <remora/admission.hpp>

#include "fuzz_check.hpp"

namespace {

using namespace remora;
using clock_type = std::chrono::system_clock;

const clock_type::time_point fixed_now{std::chrono::milliseconds(1'700'000'000'000)};

admission_key make_key() {
    std::byte k[admission_key::size];
    for (std::size_t i = 0; i < sizeof k; ++i) {
        k[i] = static_cast<std::byte>(i * 7 + 1);
    }
    auto key = admission_key::from_bytes(k);
    FUZZ_CHECK(key.has_value());
    return std::move(*key);
}

admission_gate make_gate() {
    auto g = admission_gate::create(make_key(), {.window = std::chrono::seconds(30)});
    FUZZ_CHECK(g.has_value());
    return std::move(*g);
}

void check_refusal(const result<admitted_peer>& r) {
    FUZZ_CHECK(!r.has_value());
    FUZZ_CHECK(r.error() == errc::access_denied);
    FUZZ_CHECK(!r.error().message().empty());
    FUZZ_CHECK(admission_refusal_of(r.error()).has_value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return 0;
    }
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
    if (data[0] % 3 == 2) {
        const error e = error(errc::rejected, "rejected").with_data({in.begin(), in.end()});
        const auto why = admission_refusal_of(e);
        bool genuine = false;
        for (int r = 1; r <= 5; ++r) {
            const auto d = admission_reject_data(static_cast<admission_refusal>(r));
            if (std::equal(d.begin(), d.end(), in.begin(), in.end())) {
                genuine = true;
                FUZZ_CHECK(why.has_value() && static_cast<int>(*why) == r);
            }
        }
        FUZZ_CHECK(genuine == why.has_value());
        return 0;
    }
    if (data[0] % 3 == 0) {
        static admission_gate gate = make_gate();  // nothing is ever admitted: it stays empty
        check_refusal(gate.check(in, fixed_now));
        return 0;
    }
    // Odd: [identity length][time offset s, signed][flip position u16][flip bit] identity payload
    if (in.size() < 5) {
        return 0;
    }
    const std::size_t id_len =
        std::min<std::size_t>(static_cast<std::size_t>(in[0]) % 80, in.size() - 5);
    const auto offset = std::chrono::seconds(static_cast<std::int8_t>(in[1]));
    const std::size_t flip_at = static_cast<std::size_t>(in[2]) | static_cast<std::size_t>(in[3])
                                                                      << 8;
    const auto flip_bit = static_cast<unsigned>(in[4]) % 9;  // 8: no flip
    const std::string identity(reinterpret_cast<const char*>(in.data() + 5), id_len);
    const auto payload = in.subspan(5 + id_len);
    static admission_key key = make_key();
    auto token = make_admission_token(key, identity, payload, fixed_now + offset);
    if (identity.size() > admission_max_identity || payload.size() > 65535) {
        FUZZ_CHECK(!token.has_value() && token.error() == errc::invalid_argument);
        return 0;
    }
    FUZZ_CHECK(token.has_value());
    FUZZ_CHECK(token->size() == admission_token_overhead + identity.size() + payload.size());
    admission_gate gate = make_gate();  // a fresh replay cache per input
    const bool fresh = offset <= std::chrono::seconds(30) && offset >= std::chrono::seconds(-30);
    if (flip_bit < 8) {
        (*token)[flip_at % token->size()] ^= static_cast<std::byte>(1u << flip_bit);
        check_refusal(gate.check(*token, fixed_now));
        FUZZ_CHECK(gate.remembered() == 0);
        return 0;
    }
    auto admitted = gate.check(*token, fixed_now);
    if (!fresh) {
        check_refusal(admitted);
        FUZZ_CHECK(*admission_refusal_of(admitted.error()) == admission_refusal::stale);
        return 0;
    }
    FUZZ_CHECK(admitted.has_value());
    FUZZ_CHECK(admitted->identity == identity);
    FUZZ_CHECK(std::equal(admitted->payload.begin(), admitted->payload.end(), payload.begin(),
                          payload.end()));
    auto again = gate.check(*token, fixed_now);
    check_refusal(again);
    FUZZ_CHECK(*admission_refusal_of(again.error()) == admission_refusal::replayed);
    return 0;
}

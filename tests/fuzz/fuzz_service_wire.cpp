// SPDX-License-Identifier: BSD-3-Clause
// Fuzzes the target service's message decoders (src/persist/service_wire.cpp): the same bytes go to
// decode_request (what a target reads from a client) and decode_reply (what a client reads from
// a target). Contract: no crash or UB; a rejection is errc::invalid_argument with a message; an
// accepted message has the exact size and encode() gives back the same bytes.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_check.hpp"
#include "persist/persist_impl.hpp"

using namespace remora;
using namespace remora::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
    if (auto rq = decode_request(in)) {
        FUZZ_CHECK(size == request_size);
        std::array<std::byte, request_size> out{};
        encode(*rq, out);
        FUZZ_CHECK(std::equal(out.begin(), out.end(), in.begin(), in.end()));
    } else {
        FUZZ_CHECK(rq.error() == errc::invalid_argument);
        FUZZ_CHECK(!rq.error().message().empty());
    }
    if (auto rp = decode_reply(in)) {
        FUZZ_CHECK(size == reply_size);
        std::array<std::byte, reply_size> out{};
        encode(*rp, out);
        FUZZ_CHECK(std::equal(out.begin(), out.end(), in.begin(), in.end()));
    } else {
        FUZZ_CHECK(rp.error() == errc::invalid_argument);
        FUZZ_CHECK(!rp.error().message().empty());
    }
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
// Fuzzes remote_region::parse, the descriptor a peer sends. Contract: no crash or UB on any bytes;
// a rejected input gives errc::malformed_descriptor with a message; an accepted input is exactly
// 32 bytes and serialize() gives back the same bytes (one encoding per descriptor), and parsing
// that again gives an equal descriptor.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include <remora/remote_region.hpp>

#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
    auto r = remora::remote_region::parse(in);
    if (!r) {
        FUZZ_CHECK(r.error() == remora::errc::malformed_descriptor);
        FUZZ_CHECK(!r.error().message().empty());
        return 0;
    }
    FUZZ_CHECK(size == remora::remote_region::serialized_size);
    const auto out = r->serialize();
    FUZZ_CHECK(std::equal(out.begin(), out.end(), in.begin(), in.end()));
    auto again = remora::remote_region::parse(out);
    FUZZ_CHECK(again && *again == *r);
    FUZZ_CHECK(r->length() > 0);
    return 0;
}

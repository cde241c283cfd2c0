// SPDX-License-Identifier: BSD-3-Clause
// Fuzzes remote_region::parse, the descriptor a peer sends. Contract: no crash or UB on any bytes;
// a rejected input gives errc::malformed_descriptor with a message; an accepted input is exactly
// 40 bytes of version 3, which serialize() gives back (one encoding per descriptor), or 32 bytes
// of version 2, which serialize() gives back as version 3 (version byte 3, same-host address 0);
// parsing that again gives an equal descriptor.
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
    const bool v2 = size == 32 && data[0] == 2;
    FUZZ_CHECK(v2 || (size == remora::remote_region::serialized_size &&
                      data[0] == remora::remote_region::version));
    const auto out = r->serialize();
    if (v2) {
        FUZZ_CHECK(out[0] == std::byte{remora::remote_region::version});
        FUZZ_CHECK(std::equal(out.begin() + 1, out.begin() + 32, in.begin() + 1, in.end()));
        FUZZ_CHECK(std::all_of(out.begin() + 32, out.end(),
                               [](std::byte b) { return b == std::byte{0}; }));
        FUZZ_CHECK(r->same_host_address() == 0);
    } else {
        FUZZ_CHECK(std::equal(out.begin(), out.end(), in.begin(), in.end()));
    }
    auto again = remora::remote_region::parse(out);
    FUZZ_CHECK(again && *again == *r);
    FUZZ_CHECK(r->length() > 0);
    return 0;
}

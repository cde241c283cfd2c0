// SPDX-License-Identifier: BSD-3-Clause
// Fuzzes what `remora serve` parses from a connecting client: the service depth in the
// connection request's private data (tools/remora/serve.hpp parse_depth_request). Contract: no
// crash or UB on any size; exactly 2 bytes of a non-zero depth round-trip through
// make_depth_request; any other size, and depth 0, is refused.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_check.hpp"
#include "serve.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace remora::tool;
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
    const auto want = parse_depth_request(in);
    if (size != 2 || (in[0] == std::byte{0} && in[1] == std::byte{0})) {
        FUZZ_CHECK(!want);
        return 0;
    }
    FUZZ_CHECK(want.has_value());
    const auto out = make_depth_request(*want);
    FUZZ_CHECK(std::equal(out.begin(), out.end(), in.begin(), in.end()));
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
// Fuzzes what a `remora serve` client parses from the target: the accept hello
// (tools/remora/serve.hpp parse_hello). Contract: no crash or UB; a rejection is an error with a
// message; an accepted hello is hello_size bytes and make_hello() of what was parsed gives back
// the same bytes (reserved bytes included).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_check.hpp"
#include "serve.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
    auto h = remora::tool::parse_hello(in);
    if (!h) {
        FUZZ_CHECK(!h.error().message().empty());
        return 0;
    }
    FUZZ_CHECK(size == remora::tool::hello_size);
    const auto out = remora::tool::make_hello(h->depth, h->region);
    FUZZ_CHECK(std::equal(out.begin(), out.end(), in.begin(), in.end()));
    return 0;
}

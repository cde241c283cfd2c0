// SPDX-License-Identifier: BSD-3-Clause
// Fuzzes what the library parses from the connect and accept private data before anyone else:
// its same-host trailer (src/core/same_host.hpp). The first byte picks a mode (modulo 2):
//   0     the rest is a request's or an accept's private data as received. Contract: no crash or
//         UB; a trailer is found exactly when the data ends with version 1 and the magic, and then
//         taking it off leaves the bytes before it, which with the trailer appended again are the
//         input.
//   1     the rest is the application's connect data (at most 256 bytes, tcp's limit): the
//         client's connect data, the target's reading and its answer, the client's reading of
//         that, with the offer on or off (bit 0 of the second byte) on either side (bit 1).
//         Contract: whenever there is room for a trailer beside the data, both sides read
//         exactly the bytes the other's application sent; an offer is made only with room, and
//         both agree only when both offer (one process: the same host identity).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/same_host.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace remora;

void check_raw(std::span<const std::byte> in) {
    std::vector<std::byte> data(in.begin(), in.end());
    const auto t = detail::take_trailer(data);
    const std::size_t fixed = detail::setup_trailer_size;
    bool shaped = in.size() >= fixed && in[in.size() - fixed] == std::byte{1} &&
                  in[in.size() - 4] == std::byte{'R'} && in[in.size() - 3] == std::byte{'M'} &&
                  in[in.size() - 2] == std::byte{'S'} && in[in.size() - 1] == std::byte{'H'};
    std::size_t whole = fixed;
    if (shaped &&
        (static_cast<std::uint8_t>(in[in.size() - fixed + 1]) & detail::trailer_address)) {
        // The shm address and its length before it: n from 1, all of it inside the data.
        const std::size_t n =
            in.size() > fixed ? static_cast<std::size_t>(in[in.size() - fixed - 1]) : 0;
        shaped = n != 0 && in.size() >= fixed + 1 + n;
        whole = fixed + 1 + n;
    }
    FUZZ_CHECK(t.has_value() == shaped);
    if (!t) {
        FUZZ_CHECK(std::equal(data.begin(), data.end(), in.begin(), in.end()));
        return;
    }
    FUZZ_CHECK(t->wire_size() == whole);
    FUZZ_CHECK(data.size() == in.size() - whole);
    detail::append_trailer(data, *t);
    FUZZ_CHECK(std::equal(data.begin(), data.end(), in.begin(), in.end()));
}

void check_exchange(std::uint8_t how, std::span<const std::byte> app) {
    provider_caps caps;
    caps.provider = "tcp";
    caps.endpoint = endpoint_type::msg;
    caps.cm_data_size = 256;
    if (app.size() > caps.cm_data_size) {
        return;  // the library refuses it before any of this (errc::too_large)
    }
    const bool client_on = (how & 1) != 0;
    const bool server_on = (how & 2) != 0;
    const bool room = app.size() + detail::setup_trailer_size <= caps.cm_data_size;
    const bool identity = detail::this_host_identity().has_value();
    // The client's connect data, as the target reads it.
    bool offered = false;
    detail::same_host_nonce nonce{};
    auto request = detail::connect_data(caps, {.same_host = client_on}, app, offered, nonce);
    FUZZ_CHECK(request.size() <= caps.cm_data_size);
    FUZZ_CHECK(offered == (client_on && room && identity));
    const auto offer = detail::take_trailer(request);
    if (room) {
        FUZZ_CHECK(std::equal(request.begin(), request.end(), app.begin(), app.end()));
        FUZZ_CHECK((offer && offer->same_host()) == offered);
    }
    // The target answers with the same bytes of its own; the client reads the answer.
    bool agreed = false;
    auto accept = detail::accept_data(caps, {.same_host = server_on}, offer, app, agreed);
    FUZZ_CHECK(accept.size() <= caps.cm_data_size);
    const bool client_agreed = detail::settle_connect(accept, offered, nonce);
    if (room) {
        FUZZ_CHECK(std::equal(accept.begin(), accept.end(), app.begin(), app.end()));
        FUZZ_CHECK(agreed == (offered && server_on));
        FUZZ_CHECK(client_agreed == agreed);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) {
        return 0;
    }
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
    if (data[0] % 2 == 0) {
        check_raw(in);
    } else {
        check_exchange(data[1], in.subspan(1));
    }
    return 0;
}

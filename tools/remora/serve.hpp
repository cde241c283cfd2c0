// SPDX-License-Identifier: BSD-3-Clause
// tools/remora/serve.hpp — what `remora serve` tells its clients, and how they connect to it.
//
// A client connects with 2 bytes of private data: the service depth it wants (u16 LE); to a
// target started with --key-file, inside an admission token (remora/admission.hpp). The
// target accepts with its hello (52 bytes): "RMRA" | u8 version (1) | u8 zero | u16 service
// depth granted | u32 zero | the region's descriptor (remote_region::serialized_size bytes,
// version 3).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <remora/remora.hpp>

namespace remora::tool {

inline constexpr std::size_t hello_size = 12 + remote_region::serialized_size;
inline constexpr std::uint16_t default_service_depth = 8;

inline std::array<std::byte, hello_size> make_hello(std::uint16_t depth, const remote_region& r) {
    std::array<std::byte, hello_size> h{};
    const char magic[4] = {'R', 'M', 'R', 'A'};
    for (int i = 0; i < 4; ++i)
        h[i] = static_cast<std::byte>(magic[i]);
    h[4] = std::byte{1};
    h[6] = static_cast<std::byte>(depth & 0xff);
    h[7] = static_cast<std::byte>(depth >> 8);
    const auto d = r.serialize();
    for (std::size_t i = 0; i < d.size(); ++i)
        h[12 + i] = d[i];
    return h;
}

struct hello {
    std::uint16_t depth = 0;
    remote_region region;
};

inline result<hello> parse_hello(std::span<const std::byte> b) {
    if (b.size() != hello_size || b[0] != std::byte{'R'} || b[1] != std::byte{'M'} ||
        b[2] != std::byte{'R'} || b[3] != std::byte{'A'} || b[4] != std::byte{1})
        return fail(errc::invalid_argument, "the peer is not a `remora serve` target");
    if (b[5] != std::byte{0} || b[8] != std::byte{0} || b[9] != std::byte{0} ||
        b[10] != std::byte{0} || b[11] != std::byte{0})
        return fail(errc::invalid_argument, "the target's hello has non-zero reserved bytes");
    hello h;
    h.depth = static_cast<std::uint16_t>(static_cast<unsigned>(b[6]) |
                                         (static_cast<unsigned>(b[7]) << 8));
    auto r = remote_region::parse(b.subspan(12));
    if (!r)
        return fail(r.error());
    h.region = *r;
    return h;
}

// The client's private data: the service depth it asks for, u16 LE.
inline std::array<std::byte, 2> make_depth_request(std::uint16_t depth) {
    return {static_cast<std::byte>(depth & 0xff), static_cast<std::byte>(depth >> 8)};
}

// The depth a client's private data asks for: exactly 2 bytes, u16 LE, not 0. Anything else
// (0, 1, 3, 256 bytes, or depth 0) fails with errc::invalid_argument saying why: a peer that is
// not a remora client is refused, never served with a default depth.
inline result<std::uint16_t> parse_depth_request(std::span<const std::byte> b) {
    if (b.size() != 2)
        return fail(errc::invalid_argument,
                    "the connection request carries " + std::to_string(b.size()) +
                        " bytes of private data; a remora client sends exactly 2 (its service "
                        "depth)");
    const auto d = static_cast<std::uint16_t>(static_cast<unsigned>(b[0]) |
                                              (static_cast<unsigned>(b[1]) << 8));
    if (d == 0)
        return fail(errc::invalid_argument, "the client asks for service depth 0");
    return d;
}

// "HOST:PORT" (HOST may be empty: 127.0.0.1), the port a number from 0 to 65535.
inline result<std::pair<std::string, std::uint16_t>> split_address(const std::string& a) {
    const auto colon = a.rfind(':');
    if (colon == std::string::npos)
        return fail(errc::invalid_argument, "'" + a + "' is not HOST:PORT (no port)");
    std::string host = a.substr(0, colon);
    const std::string port = a.substr(colon + 1);
    const bool digits = !port.empty() && port.size() <= 5 &&
                        port.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoul(port) > 65535)
        return fail(errc::invalid_argument,
                    "'" + a + "': port '" + port + "' is not a number from 0 to 65535");
    if (host.empty())
        host = "127.0.0.1";
    return std::pair{host, static_cast<std::uint16_t>(std::stoul(port))};
}

// A library error as one line for a user: its message without the libfabric call that failed
// ("fi_getinfo: ...", "fi_passive_ep (why)"), then what its code says.
inline std::string user_text(const error& e) {
    std::string m = e.message();
    if (m.rfind("fi_", 0) == 0) {
        const auto end = m.find_first_not_of("abcdefghijklmnopqrstuvwxyz_", 3);
        m = end == std::string::npos ? std::string() : m.substr(end);
        if (m.rfind(": ", 0) == 0)
            m.erase(0, 2);
        else if (m.size() > 3 && m.rfind(" (", 0) == 0 && m.back() == ')')
            m = m.substr(2, m.size() - 3);
    }
    return m.empty() ? e.code().message() : m + ": " + e.code().message();
}

// What a failed connect to a `remora serve` at `address` tells the user: the address and the
// reason in its words, never the library's internals (`with_key`: the connect carried a token).
inline std::string connect_failure(const std::string& address, const error& e, bool with_key) {
    const auto why = admission_refusal_of(e);
    if (!with_key && why == admission_refusal::malformed)
        return "the target at " + address + " requires admission: pass --key-file with its key";
    if (why)
        return "the target at " + address + " refused admission: " + to_string(*why);
    if (e == errc::rejected)
        return "the target at " + address + " refused the connection (its log says why)";
    if (e == errc::connection_refused)
        return "nobody listens at " + address + " (is `remora serve` running there?)";
    if (e == errc::unreachable)
        return address + " cannot be reached";
    if (e == errc::timed_out)
        return "the target at " + address + " did not answer in time";
    return "cannot connect to " + address + ": " + user_text(e);
}

// A connection to a `remora serve` target: the connection, the region it serves and the depth.
struct target_link {
    domain dom;
    connection conn;
    hello info;
};

// With `key`, the connect carries an admission token naming `identity` (its start, where the
// provider's connect data leaves less room, as verbs' 55 bytes do). A failed connect keeps
// its code, with connect_failure's message (a refusal says why; without a key, that it wants
// one).
// `shared`: connect from that domain rather than a new one; `progress`: the connection's CQs are
// read by the library's progress thread.
inline result<target_link> connect_target(const std::string& provider, const std::string& address,
                                          std::uint16_t depth = default_service_depth,
                                          const admission_key* key = nullptr,
                                          std::string_view identity = {},
                                          const domain* shared = nullptr, bool progress = false) {
    auto hp = split_address(address);
    if (!hp)
        return fail(hp.error());
    auto dom = shared != nullptr ? result<domain>(*shared) : domain::open({.provider = provider});
    if (!dom)
        return fail(dom.error());
    const auto want = make_depth_request(depth);
    // The identity is a label: cut to what the provider's connect data leaves (e.g. verbs').
    const std::size_t room = admission_connect_room(*dom);
    identity = identity.substr(0, room > want.size() ? room - want.size() : 0);
    connection_config cfg{.addons = {remora::persistence_config{.service_depth = depth}}};
    cfg.progress_thread = progress;
    auto conn = key != nullptr
                    ? connect_admitted(*dom, hp->first, hp->second, *key, identity, cfg, want)
                    : connection::connect(*dom, hp->first, hp->second, cfg, want);
    if (!conn)
        return fail(conn.error().code(), connect_failure(address, conn.error(), key != nullptr));
    auto h = parse_hello(conn->peer_private_data());
    if (!h)
        return fail(h.error());
    return target_link{std::move(*dom), std::move(*conn), *h};
}

}  // namespace remora::tool

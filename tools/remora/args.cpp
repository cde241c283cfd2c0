// SPDX-License-Identifier: BSD-3-Clause
// The command's arguments: sizes, addresses, region and key specs, providers, and the user's
// message for a failed connect or listen (args.hpp).
#include "args.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

namespace remora::tool {
namespace {

constexpr std::uint64_t tib = std::uint64_t{1} << 40;

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

// The shift of a suffix: "" and "b" bytes, k/kb/kib 10, ... t/tb/tib 40; -1: unknown.
int suffix_shift(std::string_view suffix) {
    const std::string s = lower(suffix);
    if (s.empty() || s == "b")
        return 0;
    constexpr std::string_view letters = "kmgt";
    const auto at = letters.find(s[0]);
    if (at == std::string_view::npos)
        return -1;
    const std::string rest = s.substr(1);
    if (!rest.empty() && rest != "b" && rest != "ib")
        return -1;
    return static_cast<int>(10 * (at + 1));
}

// This machine's memory in bytes (0: unknown).
std::uint64_t physical_memory() {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * page : 0;
}

std::string approx_size(std::uint64_t bytes) {
    if (bytes >= (std::uint64_t{1} << 30))
        return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30));
    return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

std::string join(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names)
        out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? "none" : out;
}

bool has(const std::vector<std::string>& names, const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
}

// A code from the operating system or libfabric (not one of remora's own): its errno value.
int os_errno(const error& e) {
    return e.code().category() == remora_category() ? 0 : e.code().value();
}

}  // namespace

result<std::uint64_t> parse_size(std::string_view text) {
    const std::string quoted = "'" + std::string(text) + "'";
    if (text.empty())
        return fail(errc::invalid_argument, "an empty size");
    if (text[0] == '-')
        return fail(errc::invalid_argument, quoted + " is negative: sizes are 0 or more bytes");
    std::size_t i = 0;
    std::uint64_t v = 0;
    constexpr auto most = std::numeric_limits<std::uint64_t>::max();
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
        const auto digit = static_cast<std::uint64_t>(text[i] - '0');
        if (v > (most - digit) / 10)
            return fail(errc::too_large, quoted + " is too large (at most 2^64 - 1 bytes)");
        v = v * 10 + digit;
    }
    if (i == 0)
        return fail(errc::invalid_argument, quoted + " is not a number of bytes");
    if (i < text.size() && (text[i] == '.' || text[i] == ','))
        return fail(errc::invalid_argument, quoted + ": a whole number is needed (1.5M is 1536K)");
    const int shift = suffix_shift(text.substr(i));
    if (shift < 0)
        return fail(errc::invalid_argument,
                    quoted + ": unknown suffix '" + std::string(text.substr(i)) +
                        "' (K, M, G, T or KiB, MiB, GiB, TiB: powers of 1024)");
    if (shift > 0 && v > (most >> shift))
        return fail(errc::too_large, quoted + " is too large (at most 2^64 - 1 bytes)");
    return v << shift;
}

std::string format_size(std::uint64_t bytes) {
    constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
    for (int u = 3; u >= 0; --u) {
        const unsigned shift = 10 * (u + 1);
        if (bytes != 0 && bytes % (std::uint64_t{1} << shift) == 0)
            return fmt::format("{} {}", bytes >> shift, units[u]);
    }
    return fmt::format("{} bytes", bytes);
}

CLI::Validator size_arg(std::uint64_t least, std::uint64_t most, std::string limit_why) {
    return CLI::Validator(
        [=](std::string& text) -> std::string {
            auto v = parse_size(text);
            if (!v)
                return v.error().message();
            if (*v < least)
                return least == 1 ? "'" + text + "': 0 bytes mean nothing here (at least 1)"
                                  : fmt::format("'{}' is less than {}", text, format_size(least));
            if (*v > most)
                return fmt::format("'{}' is too large: at most {}{}", text, format_size(most),
                                   limit_why.empty() ? "" : " (" + limit_why + ")");
            text = std::to_string(*v);
            return {};
        },
        "SIZE");
}

CLI::Validator address_arg(bool any_port) {
    return CLI::Validator(
        [=](std::string& text) -> std::string {
            auto a = split_address(text);
            if (!a)
                return a.error().message();
            if (a->second == 0 && !any_port)
                return "'" + text + "': port 0 names no target (give the port it listens on)";
            return {};
        },
        "HOST:PORT");
}

result<persistent_region_config> parse_region(const std::string& spec, bool create) {
    persistent_region_config cfg;
    cfg.create = create;
    auto sized = [&](const std::string& text) -> result<void> {
        auto n = parse_size(text);
        if (!n)
            return fail(n.error().code(), "region '" + spec + "': " + n.error().message());
        if (*n == 0)
            return fail(errc::invalid_argument, "region '" + spec + "': 0 bytes hold nothing");
        if (*n > tib)
            return fail(errc::too_large,
                        "region '" + spec + "' is too large: at most 1 TiB (" + text + " asked)");
        cfg.size = *n;
        return {};
    };
    if (spec.rfind("mem:", 0) == 0) {
        if (auto r = sized(spec.substr(4)); !r)
            return fail(r.error());
        if (const auto mem = physical_memory(); mem != 0 && cfg.size > mem)
            return fail(errc::too_large,
                        fmt::format("region '{}' is too large: {} is more than "
                                    "this machine's memory ({})",
                                    spec, format_size(cfg.size), approx_size(mem)));
        return cfg;
    }
    if (spec.rfind("file:", 0) == 0) {
        std::string rest = spec.substr(5);
        const auto colon = rest.rfind(':');
        if (colon != std::string::npos) {
            if (auto r = sized(rest.substr(colon + 1)); !r)
                return fail(r.error());
            rest = rest.substr(0, colon);
        }
        if (rest.empty())
            return fail(errc::invalid_argument, "region '" + spec + "': empty path");
        cfg.path = rest;
        return cfg;
    }
    return fail(errc::invalid_argument,
                "region '" + spec + "' is neither mem:SIZE nor file:PATH[:SIZE]");
}

CLI::Validator region_arg() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            auto r = parse_region(text, false);
            return r ? std::string() : r.error().message();
        },
        "SPEC");
}

CLI::Validator key_spec_arg() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            std::string file = text;
            if (text.rfind("ro=", 0) == 0 || text.rfind("rw=", 0) == 0)
                file = text.substr(3);
            if (file.empty())
                return "'" + text + "': no file named";
            if (::access(file.c_str(), R_OK) != 0)
                return "'" + text + "': cannot read " + file + " (remora keygen FILE makes one)";
            return {};
        },
        "[ro=|rw=]FILE");
}

result<void> check_provider(const std::string& provider, std::optional<endpoint_type> type) {
    if (provider.empty())
        return {};
    const auto msg = domain::providers(endpoint_type::msg);
    const auto rdm = domain::providers(endpoint_type::rdm);
    if (msg.empty() && rdm.empty())
        return {};  // nothing listed at all: let opening the domain say why
    const bool want_msg = !type || *type == endpoint_type::msg;
    const bool want_rdm = !type || *type == endpoint_type::rdm;
    if ((want_msg && has(msg, provider)) || (want_rdm && has(rdm, provider)))
        return {};
    const char* filter = std::getenv("FI_PROVIDER");
    const std::string narrowed =
        filter != nullptr ? fmt::format(" (FI_PROVIDER={} narrows the list)", filter) : "";
    if (type == endpoint_type::rdm && has(msg, provider)) {
        const std::string rxm = provider + ";ofi_rxm";
        return fail(
            errc::invalid_argument,
            fmt::format("'{}' offers connected endpoints (msg), not RDM{}; RDM providers "
                        "here: {}{}",
                        provider, has(rdm, rxm) ? fmt::format(": its RDM form is '{}'", rxm) : "",
                        join(rdm), narrowed));
    }
    if (type == endpoint_type::msg && has(rdm, provider))
        return fail(errc::invalid_argument,
                    fmt::format("'{}' offers RDM endpoints only (bench --endpoint rdm); connected "
                                "(msg) providers here: {}{}",
                                provider, join(msg), narrowed));
    return fail(errc::invalid_argument,
                fmt::format("no provider '{}' on this machine; providers here: msg: {}; rdm: {}{}",
                            provider, join(msg), join(rdm), narrowed));
}

std::string listen_failure(const std::string& address, const error& e) {
    if (e == errc::unreachable)  // tcp: the address is no local interface's
        return fmt::format("cannot listen on {}: no interface of this machine has that address",
                           address);
    switch (os_errno(e)) {
        case EADDRINUSE:
            return fmt::format(
                "cannot listen on {}: the address is in use (another `remora "
                "serve`? --listen HOST:0 takes any free port)",
                address);
        case EADDRNOTAVAIL:
            return fmt::format(
                "cannot listen on {}: no interface of this machine has that "
                "address",
                address);
        case EACCES:
            return fmt::format(
                "cannot listen on {}: permission denied (ports below 1024 need "
                "privileges)",
                address);
        default:
            // The library's message names libfabric's calls: the code's words say it plainly.
            return fmt::format("cannot listen on {}: {}", address,
                               os_errno(e) != 0 || e.message().find("fi_") != std::string::npos
                                   ? e.code().message()
                                   : user_text(e));
    }
}

}  // namespace remora::tool

// SPDX-License-Identifier: BSD-3-Clause
// tools/remora/args.hpp — the command's arguments: one parser for every size, length and
// offset, the checks CLI11 runs on HOST:PORT, region specs, key specs and providers (so a bad
// argument exits 64 before anything is opened), and the user's message for a library error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <remora/remora.hpp>

#include "serve.hpp"

namespace CLI {
class Validator;  // <CLI/CLI.hpp>: included only where the validators are built and used
}  // namespace CLI

namespace remora::tool {

// What every size option's help says about its numbers.
inline constexpr const char* size_units =
    "bytes, or with a binary suffix: K, M, G, T = KiB, MiB, GiB, TiB (1024, as perftest and fio "
    "read 4K)";

// A size, length or offset: a whole number of bytes, optionally followed by K, M, G or T
// (also KiB..TiB or KB..TB, any case), each a power of 1024. Refuses a sign, a fraction, an
// unknown suffix and a value past 2^64 - 1, each with a message that names the text.
result<std::uint64_t> parse_size(std::string_view text);
// "64 MiB", "1 TiB", "1000 bytes": a size as people read it (exact, or in bytes).
std::string format_size(std::uint64_t bytes);

// CLI11 transformers: the option's text becomes its number of bytes, or the option fails
// (exit 64) with "--opt: why". `least` refuses smaller values (1: a zero length means nothing),
// `most` larger ones, saying what the limit is for (`limit_why`).
CLI::Validator size_arg(std::uint64_t least, std::uint64_t most, std::string limit_why = {});
// HOST:PORT with a port of 1..65535 (0 too when `any_port`: a listener picks a free port).
CLI::Validator address_arg(bool any_port);
// mem:SIZE or file:PATH[:SIZE], memory no larger than this machine's.
CLI::Validator region_arg();
// [ro=|rw=]FILE with FILE a readable file.
CLI::Validator key_spec_arg();

// mem:SIZE or file:PATH[:SIZE] as the region's configuration.
result<persistent_region_config> parse_region(const std::string& spec, bool create);

// A --provider this machine has, for that endpoint type (none: either). Fails with a message
// listing the providers there are, and for a connected provider asked for RDM endpoints
// (-e rdm -p tcp) naming its RDM form (tcp;ofi_rxm).
result<void> check_provider(const std::string& provider, std::optional<endpoint_type> type);

// What a failed listen on HOST:PORT tells the user: the address and the reason, never the
// library's internals (a failed connect: connect_failure, serve.hpp).
std::string listen_failure(const std::string& address, const error& e);

}  // namespace remora::tool

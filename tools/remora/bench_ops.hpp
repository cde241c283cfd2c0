// SPDX-License-Identifier: BSD-3-Clause
// tools/remora/bench_ops.hpp — the bench's option values as lookup tables: what each --op is,
// and a name-to-value lookup for the options that select a library setting.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remora::tool {

// The entry of `table` (entries with a `name`) named `name`, or nullptr.
template <class T, std::size_t N>
constexpr const T* find_named(const T (&table)[N], std::string_view name) {
    for (const T& e : table) {
        if (e.name == name)
            return &e;
    }
    return nullptr;
}

// The names of the entries of `table`, in its order (what the command line accepts).
template <class T, std::size_t N>
std::vector<std::string> names_of(const T (&table)[N]) {
    std::vector<std::string> out;
    for (const T& e : table)
        out.emplace_back(e.name);
    return out;
}

// How the client posts an operation (client::post_with).
enum class op_kind {
    write,
    read,
    flush_raw,
    flush_gpspm,
    atomic_write,
    cas,
    fetch_add,
    gpspm,
    send,
    gather
};

// One --op: what it is, and which parts of the bench apply to it.
struct op_info {
    std::string_view name;
    op_kind kind;
    bool rma;          // write, read: one-sided RMA (--registration applies)
    bool idle_target;  // one-sided: the target's application idles, its progress thread serves
    bool two_sided;    // the target answers each operation with a message (send, gpspm)
    bool persistence;  // through the persistence layer: a file-backed region behind a service
    bool signals;      // --signal-every applies (write, send)
    bool baseline;     // plain libfabric has it too (--baseline: write, read, send)
};

// clang-format off
inline constexpr op_info op_table[] = {
    // name           kind                   rma    idle   2-sided persist signals baseline
    {"write",        op_kind::write,        true,  true,  false, false, true,  true},
    {"read",         op_kind::read,         true,  true,  false, false, false, true},
    {"send",         op_kind::send,         false, false, true,  false, true,  true},
    {"gpspm",        op_kind::gpspm,        false, false, true,  false, true,  false},
    {"flush-raw",    op_kind::flush_raw,    false, false, false, true,  false, false},
    {"flush-gpspm",  op_kind::flush_gpspm,  false, false, false, true,  false, false},
    {"atomic-write", op_kind::atomic_write, false, false, false, true,  false, false},
    {"cas",          op_kind::cas,          false, false, false, true,  false, false},
    {"fetch-add",    op_kind::fetch_add,    false, false, false, true,  false, false},
    {"gather",       op_kind::gather,       false, true,  false, false, false, false},
};
// clang-format on

// The entry of the operation named `name` (the command line admits only these; anything else,
// such as the table's "write x4" or "write/same" rows, is treated as a send).
constexpr const op_info& op_of(std::string_view name) {
    const op_info* o = find_named(op_table, name);
    return o != nullptr ? *o : *find_named(op_table, "send");
}

// The value a name stands for in `names`, or `otherwise`.
template <class T, std::size_t N>
constexpr T pick(const std::pair<std::string_view, T> (&names)[N], std::string_view name,
                 T otherwise) {
    for (const auto& [n, v] : names) {
        if (n == name)
            return v;
    }
    return otherwise;
}

// How the local buffer of a write or read is registered (--registration).
enum class registration_mode { pre, per_op, cache };
inline constexpr std::pair<std::string_view, registration_mode> registration_modes[] = {
    {"pre", registration_mode::pre},
    {"per-op", registration_mode::per_op},
    {"cache", registration_mode::cache}};
constexpr registration_mode registration_of(std::string_view name) {
    return pick(registration_modes, name, registration_mode::pre);
}

// How the client learns of its completions (--completion).
enum class completion_style { poll, callback, coroutine };

}  // namespace remora::tool

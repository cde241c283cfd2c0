// SPDX-License-Identifier: BSD-3-Clause
// src/persist/persist_impl.hpp — the persistence layer's internals: persistent regions and the
// wire format of the target service's requests and replies.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <remora/memory_region.hpp>
#include <remora/persistent_region.hpp>
#include <remora/remote_region.hpp>
#include <remora/result.hpp>

#include "base/internal_access.hpp"

struct remora::persistent_region::impl {};

namespace remora::detail {

struct persistent_impl;
REMORA_HANDLE_STATE(persistent_region, persistent_impl);

struct persistent_impl : internal_access::opaque<persistent_region> {
    void* base = nullptr;
    std::size_t mapped = 0;
    bool persistent = false;
    bool dax = false;
    bool apm_durable = false;
    std::string path;
    int fd = -1;             // the file, held open for its lock and lease (exclusive)
    bool exclusive = false;  // locked and leased: revoked() watches the lease
    std::optional<memory_region> region;
    std::atomic<int> served{0};  // target services exposing this region

    ~persistent_impl();
    result<void> persist(std::uint64_t offset, std::uint64_t length) const;
    bool revoked() const noexcept;
    persistence offered(bool served) const;
};

// ---- the target service's messages (little-endian, fixed size) -------------------------------
//
// request, 48 bytes: u32 magic | u8 version | u8 op | u16 flags | u64 id | u64 key |
//                    u64 address | u64 arg0 | u64 arg1
//   flags: bit 0 = flush to persistence (else visibility); no other bit is defined.
//   flush: arg0 = length; atomic_write: arg0 = value; compare_swap: arg0 = expected,
//   arg1 = desired; fetch_add: arg0 = addend. `address` is what an RMA to the same place would
//   use (the descriptor's address + offset).
// reply, 32 bytes:   u32 magic | u8 version | u8 op | u16 status (remora::errc) | u64 id |
//                    u64 value (the word's old value for compare_swap and fetch_add) | u64 zero
enum class service_op : std::uint8_t {
    flush = 1,
    atomic_write = 2,
    compare_swap = 3,
    fetch_add = 4,
    hello = 5,  // a client asks whether the target serves the connection (first request)
};

inline constexpr std::uint16_t flush_persistent = 1;

struct service_request {
    service_op op = service_op::flush;
    std::uint16_t flags = 0;
    std::uint64_t id = 0;
    std::uint64_t key = 0;
    std::uint64_t address = 0;
    std::uint64_t arg0 = 0;
    std::uint64_t arg1 = 0;
};

struct service_reply {
    service_op op = service_op::flush;
    std::uint16_t status = 0;
    std::uint64_t id = 0;
    std::uint64_t value = 0;
};

inline constexpr std::uint32_t service_magic = 0x56534d52;  // "RMSV"
inline constexpr std::uint8_t service_version = 1;
inline constexpr std::size_t request_size = 48;
// What a target receives a request into: a longer message than a request, up to this size, is
// received whole and answered as malformed (a provider that cannot place a message in its receive
// may close the connection instead: tcp does).
inline constexpr std::size_t request_room = 256;
inline constexpr std::size_t reply_size = 32;

void encode(const service_request& r, std::span<std::byte, request_size> out) noexcept;
void encode(const service_reply& r, std::span<std::byte, reply_size> out) noexcept;
// Validate everything that came over the wire (exact size, magic, version, op, flags, zero fields).
result<service_request> decode_request(std::span<const std::byte> in);
result<service_reply> decode_reply(std::span<const std::byte> in);

}  // namespace remora::detail

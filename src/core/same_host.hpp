// SPDX-License-Identifier: BSD-3-Clause
// src/core/same_host.hpp — how the two sides of a connection being set up learn that they run on
// one host (remora::detail): this process's host identity, and the library-owned trailer of the
// connect and accept private data that offers and accepts a same-host path
// (connection_config::same_host).
//
// The trailer (30 bytes, integers little-endian), appended after everything else in the private
// data (the application's bytes, an admission token among them) and stripped before anything
// else sees the data:
//
//     u8 version (1) | u8 flags | u8[8] host identity | u8[16] nonce | u32 magic ("RMSH")
//
// flags bit 0: the client offers a same-host path (connect), the target accepts it (accept);
// other bits are ignored. The client sends its identity; the target sends its own only when it
// accepts (zero otherwise). The client's nonce is fresh random bytes per connect; the target's
// accept trailer echoes it (the later proof over shm names it). A trailer is found by its magic
// in the last 4 bytes and its version at its fixed offset, so data of any length can carry one;
// data without one is passed on untouched and means "no offer".
//
// Who sends one: a client that offers (same_host_eligible, connection_config::same_host, a host
// identity, and room in caps().cm_data_size beside its data), and a client whose own data would
// read as a trailer (a trailer without the offer after it, when there is room, keeps that data
// intact); a target only in answer to an offer (when there is room beside its accept data).
// A client reads the accept data's trailer only when it offered, and only one that echoes its
// nonce.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <remora/connection.hpp>
#include <remora/domain.hpp>

namespace remora::detail {

inline constexpr std::size_t host_identity_size = 8;
inline constexpr std::size_t same_host_nonce_size = 16;
using host_identity = std::array<std::byte, host_identity_size>;
using same_host_nonce = std::array<std::byte, same_host_nonce_size>;

// This process's host identity, as far as libfabric's shm provider is concerned: the first 8
// bytes of a BLAKE2b hash (libsodium crypto_generichash) over the boot id
// (/proc/sys/kernel/random/boot_id), the real, effective and saved user and group ids, the
// permitted and effective capabilities, /dev/shm's device and inode (shm's segments live there:
// one tmpfs instance is reachable), and the pid and user namespaces (/proc/self/ns: shm's
// cross-memory attach needs the peer's pid in ours, and the kernel's ptrace rules one user
// namespace). Computed at each setup (credentials may change); nullopt when an input cannot be
// read (then nothing is offered). Two honest peers with one identity have the same credentials;
// a peer can claim any identity (every input is readable by its user), so it keeps honest peers
// apart and is no proof: the target's proof is that the request comes from a socket of its own
// user on this host, whose processes reach shm's segments (files of that user) anyway.
std::optional<host_identity> this_host_identity() noexcept;
// Why this process is more than its user's other processes may reach, so the same-host path
// (which lets the peer reach all of this process's memory) is not taken, or nullopt: Yama's
// ptrace_scope above 0 (or unreadable), not dumpable, real, effective and saved user ids not
// all one or group ids not all one (a set-id program), or capabilities held by a process other
// than root's. These are the kernel's ptrace rules as far as this process's side decides them.
// Looked at on every setup (a process may change them).
std::optional<std::string> same_host_untrusted();
// The same, throwing std::bad_alloc when out of memory (this_host_identity gives nullopt then).
std::optional<host_identity> compute_host_identity();

inline constexpr std::size_t setup_trailer_size =
    1 + 1 + host_identity_size + same_host_nonce_size + 4;
inline constexpr std::uint8_t setup_trailer_version = 1;
inline constexpr std::uint32_t setup_trailer_magic = 0x48534d52;  // "RMSH" in wire order
inline constexpr std::uint8_t trailer_same_host = 0x01;           // flags bit 0
// flags bit 1: the shm endpoint's address precedes the trailer, `u8[n] address | u8 n` (n from 1
// to 255): the client's shm peer in an offer, the target's in an acceptance.
inline constexpr std::uint8_t trailer_address = 0x02;
inline constexpr std::size_t max_trailer_address = 255;

struct setup_trailer {
    std::uint8_t flags = 0;
    host_identity identity{};
    same_host_nonce nonce{};
    std::array<std::byte, max_trailer_address> address{};
    std::uint8_t address_size = 0;  // bytes of `address` (flags bit 1 when not 0)
    bool same_host() const noexcept { return (flags & trailer_same_host) != 0; }
    std::span<const std::byte> shm_address() const noexcept {
        return std::span(address).first(address_size);
    }
    // The bytes it takes after the data: setup_trailer_size, and the address with its length.
    std::size_t wire_size() const noexcept {
        return setup_trailer_size + (address_size != 0 ? 1u + address_size : 0u);
    }
};

// Appends `t` (version setup_trailer_version) to `out`.
void append_trailer(std::vector<std::byte>& out, const setup_trailer& t);
// The trailer `data` ends with, or nullopt when it ends with none.
std::optional<setup_trailer> trailer_of(std::span<const std::byte> data) noexcept;
// The same, stripped from `data` when there is one.
std::optional<setup_trailer> take_trailer(std::vector<std::byte>& data) noexcept;

// A domain whose connections may offer (and accept) a same-host path: MSG on tcp or sockets,
// held to no provider's rules (verbs' and efa's leave no room in their connect data).
bool same_host_eligible(const provider_caps& caps) noexcept;

// What the connect sends: `data` with the library's trailer when it offers (or when `data` would
// read as a trailer). `offered` and `nonce` record the offer.
// `address`: the client's shm peer (empty: none), carried with the offer when it fits.
std::vector<std::byte> connect_data(const provider_caps& caps, const connection_config& config,
                                    std::span<const std::byte> data, bool& offered,
                                    same_host_nonce& nonce,
                                    std::span<const std::byte> address = {});
// The client's reading of the accept data `data` (the peer's private data on FI_CONNECTED):
// when it offered, a trailer echoing `nonce` is stripped from `data`, and the result says
// whether the target accepted the path with this host's identity. Without an offer `data` stays.
// `address`, when given, receives the target's shm address (empty when it sent none).
bool settle_connect(std::vector<std::byte>& data, bool offered, const same_host_nonce& nonce,
                    std::vector<std::byte>* address = nullptr);
// The target's answer to a request whose trailer was `offer` (nullopt: none): whether it
// accepts the path (its config, its domain, the identities), and the accept data to send
// (`data`, with a trailer when the client offered and there is room; without room it does
// not accept, as the client could not learn it).
// `address`: the target's shm peer, sent with an acceptance when it fits (without room for it,
// no acceptance).
std::vector<std::byte> accept_data(const provider_caps& caps, const connection_config& config,
                                   const std::optional<setup_trailer>& offer,
                                   std::span<const std::byte> data, bool& agreed,
                                   std::span<const std::byte> address = {});

// The outcome of the negotiation on a connection, for tests and the layers that build the path:
// whether this side offered (client) or was offered (target), whether both agreed, and the
// client's nonce (zero without an offer). Fixed once the connection is established (read it
// then: an asynchronous client's `agreed` is set when FI_CONNECTED is read). Empty handle:
// nothing offered.
struct same_host_outcome {
    bool offered = false;
    bool agreed = false;
    same_host_nonce nonce{};
};
same_host_outcome same_host_of(const connection& c) noexcept;

}  // namespace remora::detail

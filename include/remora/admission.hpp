// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/admission.hpp — who may connect: a pre-shared key (admission_key) proven in the
/// connection request, checked by the target (admission_gate); for RDM peers, the same proof in
/// an attach handshake (prove_admission, attach_request, admit_peer).
///
/// A target admits only peers that prove they hold its 32-byte key. The client sends an
/// admission token as the connection request's private data (connect_admitted); the target
/// checks it before it accepts (admission_gate::admit), and rejects anything else with a reject
/// that names a short reason. The key itself never crosses the wire.
///
/// The token (version 2, 38 bytes + identity + payload, all integers little-endian):
///
///     "Ra" | u8 version (2) | u8 identity length (0..64) | u48 timestamp (ms since the Unix
///     epoch) | 12-byte random nonce | identity | payload |
///     16-byte MAC: the first 16 bytes of HMAC-SHA-512-256 (libsodium crypto_auth) under the key
///     over every byte before it
///
/// The payload is what follows the identity up to the MAC (its length is the token's less the
/// rest). It is the application's own connect data (e.g.\ `remora serve`'s service depth): it
/// is covered by the MAC, so nobody without the key can change it. The MAC keeps half of the
/// HMAC's output, 128 bits (truncation as RFC 2104 section 5 allows), and is compared in
/// constant time.
///
/// The whole token travels in the connection request's private data (no extra round trip; the
/// library's same-host trailer, when it offers one, follows it and is taken off before the gate
/// or the application sees the data), so it must fit in caps().cm_data_size: identity and payload
/// may take admission_connect_room(dom) = cm_data_size - 38 bytes together. On tcp and sockets
/// (256) that is 218: the longest identity (64 bytes) and a payload of up to 154; under verbs rules
/// (domain_config::rules, REMORA_RULES=verbs) and on libfabric's verbs provider over InfiniBand
/// (55) it is 17, e.g.\ a 15-byte identity with `remora serve`'s 2-byte depth. connect_admitted
/// refuses a longer identity + payload with errc::invalid_argument naming both sizes, before
/// anything is sent.
///
/// Refusals. admission_gate::check fails with errc::access_denied; admit() also rejects the
/// request, with admission_reject_data(reason) as its private data ("RMAR" | u8 reason). The
/// client's connect_admitted then fails with errc::rejected and a message naming the reason; on
/// either side admission_refusal_of(error) returns the reason.
///
/// RDM peers (connection::open_peer) have no connection request: the same token travels in an
/// attach handshake instead, over the attached pair's own messages (library-internal sends and
/// receives, accounted as every queue entry, also on a connection with a service depth; the
/// application's CQ reads never see them). The target speaks first, so every message reaches a
/// peer that has attached its sender already:
///   1. the client attaches the target's address, then gives the target its own local_address
///      (any way it likes) and calls prove_admission();
///   2. the target attaches the client's address and calls attach_request::receive(): it sends
///      "RMAC" | u8 version (1) | 16-byte random challenge;
///   3. the client answers with a token whose payload is the challenge followed by its own
///      payload (so a token answers one challenge only);
///   4. the target checks it (attach_request::check, with one gate per key it accepts) and
///      answers "RMAA" | accept data (e.g.\ the descriptor of the client's role) or
///      "RMAR" | reason.
///
/// Receives are directed at the attached peer (provider_caps::directed_receive): a message from
/// any other sender is never taken. A handshake that fails leaves the connection to be closed.
///
/// What this does not do (docs/security.md): it does not authenticate the target to the client,
/// and it protects nothing after admission — on tcp and sockets the traffic, including the memory
/// key in a region's descriptor, is neither encrypted nor integrity-protected.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <remora/connection.hpp>
#include <remora/domain.hpp>
#include <remora/listener.hpp>
#include <remora/result.hpp>

namespace remora {

/// Why a target refused a peer; the byte carried in its reject.
enum class admission_refusal : std::uint8_t {
    malformed = 1,   ///< no token, a short, long or unknown one (e.g. a client without a key)
    bad_proof = 2,   ///< the HMAC does not verify: a wrong key, or a tampered token
    stale = 3,       ///< the timestamp is outside the window (old token, or clocks apart)
    replayed = 4,    ///< the nonce was already admitted
    overloaded = 5,  ///< the target refuses for load (replay cache full, or too many clients)
};
/// "malformed token", "wrong key or tampered token", …
const char* to_string(admission_refusal r) noexcept;

/// A 32-byte pre-shared key: the target's gate checks tokens under it, a client makes them.
///
/// Keys are held in libsodium's guarded memory (sodium_malloc) and zeroed when the key is
/// destroyed; temporary copies made while loading are zeroed too (sodium_memzero).
///
/// \par Threading
/// Immutable after creation; const calls may run concurrently. Move-only.
class admission_key {
  public:
    static constexpr std::size_t size = 32;  ///< bytes of a key

    /// A fresh random key (libsodium randombytes).
    /// \return the key; errc::not_supported when libsodium fails to initialise; errc::too_large
    ///         when guarded memory cannot be allocated
    static result<admission_key> generate();
    /// A key from its bytes. The caller zeroes its own copy.
    /// \param bytes exactly `size` bytes
    /// \return the key; errc::invalid_argument for another size; as generate() otherwise
    static result<admission_key> from_bytes(std::span<const std::byte> bytes);
    /// A key file: exactly 32 raw bytes (e.g. `head -c 32 /dev/urandom > F; chmod 600 F`), a
    /// regular file not readable or writable by group or others. errc::invalid_argument when it
    /// is missing, unreadable or of another size; errc::access_denied when its mode is too open.
    static result<admission_key> load(const std::string& path);
    /// Writes the key to a new file with mode 0600; never overwrites (errc::invalid_argument if
    /// the path exists).
    result<void> save(const std::string& path) const;

    admission_key(admission_key&&) noexcept;             ///< takes over the key's memory
    admission_key& operator=(admission_key&&) noexcept;  ///< zeroes its own, takes over another's
    ~admission_key();                                    ///< zeroes the key

    /// The key's bytes (for the library's HMAC calls; do not copy them).
    const unsigned char* bytes() const noexcept { return bytes_; }

  private:
    admission_key() = default;
    unsigned char* bytes_ = nullptr;  ///< sodium_malloc'ed, `size` bytes
};

inline constexpr std::size_t admission_token_overhead = 38;  ///< bytes besides identity + payload
inline constexpr std::size_t admission_max_identity = 64;  ///< bytes of a token's identity at most

/// A token proving `key` (the connection request's private data; connect_admitted makes and
/// sends one itself).
/// \param key      the pre-shared key
/// \param identity who the client says it is (at most admission_max_identity bytes)
/// \param payload  the application's own data, covered by the HMAC (at most 65535 bytes)
/// \param now      the token's timestamp
/// \return the token (admission_token_overhead + identity + payload bytes);
///         errc::invalid_argument for a longer identity or payload, or a time before 1970;
///         errc::bad_state for a moved-from key
result<std::vector<std::byte>> make_admission_token(
    const admission_key& key, std::string_view identity, std::span<const std::byte> payload = {},
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

/// How an admission_gate checks tokens.
struct admission_config {
    std::chrono::milliseconds window{30'000};  ///< |now - timestamp| allowed
    std::size_t replay_cache = 4096;           ///< nonces remembered at most (>= 1)
};

/// What an admitted peer said about itself (vouched for by the key, not by anything else).
struct admitted_peer {
    std::string identity;            ///< the token's identity
    std::vector<std::byte> payload;  ///< the token's payload (the client's own connect data)
};

/// The target's check of admission tokens under one key, with a replay cache.
///
/// A token is admitted once: its HMAC verifies (constant-time compare), its timestamp is within
/// admission_config::window of the target's clock, and its nonce was not seen before. Nonces of
/// admitted tokens are remembered until their timestamp leaves the window, in a cache of at most
/// admission_config::replay_cache entries; only tokens whose HMAC verified enter it, so peers
/// without the key cannot fill it. When it is full of live entries, new tokens are refused as
/// `overloaded` (fail closed) rather than forgetting a nonce that could then be replayed.
/// A refused token allocates nothing on the target.
///
///     auto gate = remora::admission_gate::create(std::move(*key));
///     auto req = lis->get_request(std::chrono::seconds(10));
///     if (auto peer = gate->admit(*req)) {
///         auto conn = req->accept();  // peer->identity, peer->payload: vouched for by the key
///     }
///
/// \par Threading
/// Every call may run concurrently (the replay cache is behind a mutex). Move-only.
class admission_gate {
  public:
    /// A gate checking tokens under `key`.
    /// \param key    the pre-shared key (the gate keeps it)
    /// \param config the time window and the replay cache's size
    /// \return the gate; errc::invalid_argument for a zero window or replay cache, or a
    ///         moved-from key
    static result<admission_gate> create(admission_key key, const admission_config& config = {});
    admission_gate(admission_gate&&) noexcept;             ///< takes over the gate
    admission_gate& operator=(admission_gate&&) noexcept;  ///< takes over the gate
    ~admission_gate();                                     ///< destroys its key (zeroed)

    /// Checks a token and, when it is admitted, remembers its nonce.
    /// \param token the client's token (the request's private data)
    /// \param now   the target's clock
    /// \return who the token names; errc::access_denied with the reason in
    ///         admission_refusal_of() (nothing remembered)
    result<admitted_peer> check(
        std::span<const std::byte> token,
        std::chrono::system_clock::time_point now = std::chrono::system_clock::now());
    /// check() on the request's private data; on a refusal, also rejects the request with
    /// admission_reject_data(reason) (the caller then drops it). On success the caller
    /// accepts it.
    /// \return as check()
    result<admitted_peer> admit(connection_request& request);

    /// Nonces remembered now (expired ones are dropped on the next check of a token whose HMAC
    /// verifies).
    std::size_t remembered() const;

  private:
    struct impl;
    explicit admission_gate(std::unique_ptr<impl> i);
    std::unique_ptr<impl> impl_;
};

/// The private data of a reject for `reason`: "RMAR" | reason.
std::array<std::byte, 5> admission_reject_data(admission_refusal reason) noexcept;
/// The reason in a refusal: an admission_gate error, or a rejected connect whose reject carried
/// admission_reject_data. nullopt for anything else.
std::optional<admission_refusal> admission_refusal_of(const error& e) noexcept;

/// Bytes an admission token leaves for identity + payload in a connect on `dom`: its
/// caps().cm_data_size (verbs' 55 under verbs rules) less admission_token_overhead. 0 for an
/// empty or RDM domain (RDM peers prove admission in messages, prove_admission).
std::size_t admission_connect_room(const domain& dom) noexcept;

/// connection::connect with a token for `key` and `identity` carrying `payload`. A target that
/// refuses admission makes it fail with errc::rejected, "the target refused admission: <reason>",
/// and the reject's bytes in error::data(). errc::invalid_argument for an identity over
/// admission_max_identity bytes, or when identity + payload exceed admission_connect_room(dom)
/// (the message names the token's size and the provider's limit; nothing is sent). Other
/// failures are connect's.
result<connection> connect_admitted(const domain& dom, const std::string& host, std::uint16_t port,
                                    const admission_key& key, std::string_view identity,
                                    const connection_config& config = {},
                                    std::span<const std::byte> payload = {});

/// The longest accept data an RDM target may send (attach_request::accept).
inline constexpr std::size_t admission_max_accept_data = 512;

/// The target's side of one RDM attach handshake (see admission.hpp). Move-only; one per
/// attached connection, used from one thread.
class attach_request {
  public:
    /// Sends a fresh challenge to the peer `conn` is attached to and waits for its token, at
    /// most `timeout`. errc::bad_state when `conn` is not an attached RDM peer, errc::timed_out
    /// when no token came (e.g. the client never called prove_admission, or attached the
    /// target only after the challenge was sent), the provider's failure otherwise. `conn` must
    /// outlive the request.
    /// \return the request, holding the client's token; the errors above
    static result<attach_request> receive(
        connection& conn, std::chrono::milliseconds timeout = std::chrono::seconds(5));

    /// The token's check by `gate` (admission_gate::check), and that it answers this request's
    /// challenge (else errc::access_denied, admission_refusal::replayed). On success the
    /// admitted peer's payload is the client's own (the challenge taken off).
    /// \return who the token names; errc::access_denied with the reason in
    ///         admission_refusal_of()
    result<admitted_peer> check(admission_gate& gate) const;
    /// Tells the client it is admitted, with `data` (at most admission_max_accept_data bytes,
    /// else errc::too_large and nothing is sent), which prove_admission returns to it.
    /// \return success once sent; errc::too_large; errc::bad_state when the request was
    ///         answered already; the connection's error sending the answer
    result<void> accept(std::span<const std::byte> data = {});
    /// Tells the client it is refused, and why. The caller then closes the connection.
    /// \return as accept()
    result<void> reject(admission_refusal reason);

    attach_request(attach_request&&) noexcept = default;             ///< takes over the request
    attach_request& operator=(attach_request&&) noexcept = default;  ///< takes over the request

  private:
    attach_request(connection& conn, std::chrono::steady_clock::time_point deadline)
        : conn_(&conn), deadline_(deadline) {}
    result<void> answer(std::span<const std::byte> message);
    connection* conn_;
    std::chrono::steady_clock::time_point deadline_;
    std::array<std::byte, 16> challenge_{};
    std::vector<std::byte> token_;
    bool answered_ = false;
};

/// The client's side of an RDM attach handshake: `conn` is attached to the target already, and
/// the target has (or will have, within `timeout`) attached `conn`'s local_address. Waits for
/// the target's challenge, sends a token for `key`, `identity` and `payload`, and returns the
/// target's accept data. Errors: errc::rejected when the target refuses ("the target refused
/// admission: <reason>", the reject's bytes in error::data()), errc::timed_out when the
/// target does not answer in time, errc::invalid_argument for an identity over 64 bytes or a
/// payload over 256, errc::malformed_descriptor for an answer that is not a handshake message.
/// After a failure close the connection.
/// \return the target's accept data; the errors above
result<std::vector<std::byte>> prove_admission(
    connection& conn, const admission_key& key, std::string_view identity,
    std::span<const std::byte> payload = {},
    std::chrono::milliseconds timeout = std::chrono::seconds(5));

/// The target's side for one key: attach_request::receive, check with `gate`, then accept with
/// `accept_data` or reject with the reason. Returns the admitted peer, or the refusal
/// (errc::access_denied, admission_refusal_of() names the reason) after telling the client.
result<admitted_peer> admit_peer(connection& conn, admission_gate& gate,
                                 std::span<const std::byte> accept_data = {},
                                 std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace remora

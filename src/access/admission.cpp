// SPDX-License-Identifier: BSD-3-Clause
// src/access/admission.cpp — admission tokens (remora/admission.hpp) over libsodium.
// Public API only: nothing here sees libfabric or the core's internals.
#include <remora/admission.hpp>

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace remora {
namespace {

static_assert(crypto_auth_hmacsha512256_KEYBYTES == admission_key::size);
static_assert(crypto_auth_hmacsha512256_BYTES == 32);

// The token's layout (remora/admission.hpp): magic, version, identity length, time, nonce, then
// identity and payload, then the HMAC truncated to its first mac_size bytes.
constexpr std::size_t mac_size = 16;
static_assert(mac_size * 2 >= crypto_auth_hmacsha512256_BYTES && mac_size * 8 >= 80,
              "a truncated HMAC keeps at least half its output and 80 bits (RFC 2104, 5)");
constexpr std::size_t version_at = 2;
constexpr std::size_t identity_length_at = 3;
constexpr std::size_t time_at = 4;
constexpr std::size_t time_size = 6;
constexpr std::size_t nonce_at = time_at + time_size;
constexpr std::size_t nonce_size = 12;
constexpr std::size_t header_size = nonce_at + nonce_size;  // magic .. nonce
static_assert(header_size + mac_size == admission_token_overhead);
static_assert(mac_size == crypto_verify_16_BYTES);
constexpr std::size_t max_payload = 0xffff;
constexpr std::byte token_magic[2] = {std::byte{'R'}, std::byte{'a'}};
constexpr std::byte reject_magic[4] = {std::byte{'R'}, std::byte{'M'}, std::byte{'A'},
                                       std::byte{'R'}};
constexpr std::byte token_version{2};

using nonce_t = std::array<std::byte, nonce_size>;

result<void> init_sodium() {
    if (sodium_init() < 0)
        return fail(errc::not_supported, "libsodium failed to initialise");
    return {};
}

std::string errno_text() {
    return std::strerror(errno);
}

void put_le(std::byte* p, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
        p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
std::uint64_t get_le(const std::byte* p, int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i)
        v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    return v;
}

std::int64_t to_ms(std::chrono::system_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

tl::unexpected<error> refuse(admission_refusal r, const std::string& detail) {
    const auto d = admission_reject_data(r);
    return tl::unexpected<error>(
        error(errc::access_denied, std::string("admission refused: ") + to_string(r) +
                                       (detail.empty() ? "" : " (" + detail + ")"))
            .with_data({d.begin(), d.end()}));
}

}  // namespace

const char* to_string(admission_refusal r) noexcept {
    switch (r) {
        case admission_refusal::malformed:
            return "no valid admission token (a client without the key, or not a remora client)";
        case admission_refusal::bad_proof:
            return "wrong key or tampered token";
        case admission_refusal::stale:
            return "stale token (older or newer than the target's window: check the clocks)";
        case admission_refusal::replayed:
            return "replayed token";
        case admission_refusal::overloaded:
            return "the target is at its limit, try again later";
    }
    return "unknown reason";
}

// ---- admission_key

result<admission_key> admission_key::from_bytes(std::span<const std::byte> bytes) {
    if (bytes.size() != size)
        return fail(errc::invalid_argument,
                    "an admission key is exactly 32 bytes, not " + std::to_string(bytes.size()));
    if (auto r = init_sodium(); !r)
        return fail(r.error());
    admission_key k;
    k.bytes_ = static_cast<unsigned char*>(sodium_malloc(size));
    if (k.bytes_ == nullptr)
        return fail(errc::too_large, "cannot allocate guarded memory for the key");
    std::memcpy(k.bytes_, bytes.data(), size);
    return k;
}

result<admission_key> admission_key::generate() {
    if (auto r = init_sodium(); !r)
        return fail(r.error());
    std::array<std::byte, size> raw;
    randombytes_buf(raw.data(), raw.size());
    auto k = from_bytes(raw);
    sodium_memzero(raw.data(), raw.size());
    return k;
}

result<admission_key> admission_key::load(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return fail(errc::invalid_argument, "cannot open key file '" + path + "': " + errno_text());
    struct fd_closer {
        int fd;
        ~fd_closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return fail(errc::invalid_argument, "cannot stat key file '" + path + "': " + errno_text());
    if (!S_ISREG(st.st_mode))
        return fail(errc::invalid_argument, "key file '" + path + "' is not a regular file");
    if ((st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return fail(errc::access_denied, "key file '" + path + "' is accessible by others (mode " +
                                             mode + "): chmod 600 '" + path + "'");
    }
    if (st.st_size != static_cast<off_t>(size))
        return fail(errc::invalid_argument, "key file '" + path + "' must hold exactly 32 bytes (" +
                                                std::to_string(st.st_size) + " found)");
    std::array<std::byte, size + 1> raw;  // one more, to see a file that grew meanwhile
    std::size_t got = 0;
    while (got < raw.size()) {
        const ssize_t n = ::read(fd, raw.data() + got, raw.size() - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            sodium_memzero(raw.data(), raw.size());
            return fail(errc::invalid_argument,
                        "cannot read key file '" + path + "': " + errno_text());
        }
        if (n == 0)
            break;
        got += static_cast<std::size_t>(n);
    }
    if (got != size) {
        sodium_memzero(raw.data(), raw.size());
        return fail(errc::invalid_argument, "key file '" + path + "' must hold exactly 32 bytes");
    }
    auto k = from_bytes(std::span<const std::byte>(raw.data(), size));
    sodium_memzero(raw.data(), raw.size());
    return k;
}

result<void> admission_key::save(const std::string& path) const {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return fail(errc::invalid_argument,
                    "cannot create key file '" + path + "': " + errno_text() +
                        (errno == EEXIST ? " (a key file is never overwritten)" : ""));
    std::size_t put = 0;
    while (put < size) {
        const ssize_t n = ::write(fd, bytes_ + put, size - put);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            const std::string why = errno_text();
            ::close(fd);
            ::unlink(path.c_str());
            return fail(errc::invalid_argument, "cannot write key file '" + path + "': " + why);
        }
        put += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        const std::string why = errno_text();
        ::unlink(path.c_str());
        return fail(errc::invalid_argument, "cannot write key file '" + path + "': " + why);
    }
    return {};
}

admission_key::admission_key(admission_key&& o) noexcept
    : bytes_(std::exchange(o.bytes_, nullptr)) {}
admission_key& admission_key::operator=(admission_key&& o) noexcept {
    if (this != &o) {
        if (bytes_ != nullptr)
            sodium_free(bytes_);  // zeroes before freeing
        bytes_ = std::exchange(o.bytes_, nullptr);
    }
    return *this;
}
admission_key::~admission_key() {
    if (bytes_ != nullptr)
        sodium_free(bytes_);  // zeroes before freeing
}

// ---- tokens

namespace {

// The full HMAC of `message` under `key`; the token carries its first mac_size bytes.
std::array<unsigned char, crypto_auth_hmacsha512256_BYTES> full_mac(
    const admission_key& key, std::span<const std::byte> message) {
    std::array<unsigned char, crypto_auth_hmacsha512256_BYTES> mac;
    crypto_auth_hmacsha512256(mac.data(), reinterpret_cast<const unsigned char*>(message.data()),
                              message.size(), key.bytes());
    return mac;
}

}  // namespace

result<std::vector<std::byte>> make_admission_token(const admission_key& key,
                                                    std::string_view identity,
                                                    std::span<const std::byte> payload,
                                                    std::chrono::system_clock::time_point now) {
    if (key.bytes() == nullptr)
        return fail(errc::bad_state, "the admission key was moved from");
    if (identity.size() > admission_max_identity)
        return fail(errc::invalid_argument, "an admission identity is at most 64 bytes, not " +
                                                std::to_string(identity.size()));
    if (payload.size() > max_payload)
        return fail(errc::invalid_argument, "an admission payload is at most 65535 bytes");
    const std::int64_t ms = to_ms(now);
    if (ms < 0 || static_cast<std::uint64_t>(ms) >> (8 * time_size) != 0)
        return fail(errc::invalid_argument,
                    "an admission token's time is between 1970 and the year 10889");
    if (auto r = init_sodium(); !r)
        return fail(r.error());
    std::vector<std::byte> t(admission_token_overhead + identity.size() + payload.size());
    std::memcpy(t.data(), token_magic, sizeof token_magic);
    t[version_at] = token_version;
    t[identity_length_at] = static_cast<std::byte>(identity.size());
    put_le(&t[time_at], static_cast<std::uint64_t>(ms), time_size);
    randombytes_buf(&t[nonce_at], nonce_size);
    if (!identity.empty())
        std::memcpy(&t[header_size], identity.data(), identity.size());
    if (!payload.empty())
        std::memcpy(&t[header_size + identity.size()], payload.data(), payload.size());
    const std::size_t signed_len = t.size() - mac_size;
    auto mac = full_mac(key, std::span<const std::byte>(t.data(), signed_len));
    std::memcpy(&t[signed_len], mac.data(), mac_size);
    return t;
}

std::array<std::byte, 5> admission_reject_data(admission_refusal reason) noexcept {
    return {reject_magic[0], reject_magic[1], reject_magic[2], reject_magic[3],
            static_cast<std::byte>(reason)};
}

std::optional<admission_refusal> admission_refusal_of(const error& e) noexcept {
    const auto d = e.data();
    if (d.size() != 5 || std::memcmp(d.data(), reject_magic, 4) != 0)
        return std::nullopt;
    const auto r = static_cast<std::uint8_t>(d[4]);
    if (r < 1 || r > 5)
        return std::nullopt;
    return static_cast<admission_refusal>(r);
}

// ---- the gate

struct admission_gate::impl {
    impl(admission_key k, const admission_config& c) : key(std::move(k)), config(c) {}
    admission_key key;
    admission_config config;
    mutable std::mutex mu;
    std::set<nonce_t> seen;                       // nonces of admitted, still-valid tokens
    std::multimap<std::int64_t, nonce_t> expiry;  // ms after which a nonce cannot be replayed

    void expire(std::int64_t now_ms) {
        while (!expiry.empty() && expiry.begin()->first < now_ms) {
            seen.erase(expiry.begin()->second);
            expiry.erase(expiry.begin());
        }
    }
};

admission_gate::admission_gate(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
admission_gate::admission_gate(admission_gate&&) noexcept = default;
admission_gate& admission_gate::operator=(admission_gate&&) noexcept = default;
admission_gate::~admission_gate() = default;

result<admission_gate> admission_gate::create(admission_key key, const admission_config& config) {
    if (key.bytes() == nullptr)
        return fail(errc::invalid_argument, "the admission key was moved from");
    if (config.window.count() <= 0)
        return fail(errc::invalid_argument, "the admission window must be positive");
    if (config.replay_cache == 0)
        return fail(errc::invalid_argument, "the replay cache must hold at least one nonce");
    auto i = std::make_unique<impl>(std::move(key), config);
    return admission_gate(std::move(i));
}

result<admitted_peer> admission_gate::check(std::span<const std::byte> t,
                                            std::chrono::system_clock::time_point now) {
    // Shape first: nothing is allocated for a refused token.
    if (t.size() < admission_token_overhead)
        return refuse(admission_refusal::malformed, std::to_string(t.size()) +
                                                        " bytes, a token has at least " +
                                                        std::to_string(admission_token_overhead));
    if (std::memcmp(t.data(), token_magic, sizeof token_magic) != 0)
        return refuse(admission_refusal::malformed, "no token");
    if (t[version_at] != token_version)
        return refuse(admission_refusal::malformed,
                      "token version " + std::to_string(static_cast<unsigned>(t[version_at])));
    const std::size_t id_len = static_cast<std::size_t>(t[identity_length_at]);
    if (id_len > admission_max_identity ||
        t.size() > admission_token_overhead + id_len + max_payload ||
        t.size() < admission_token_overhead + id_len)
        return refuse(admission_refusal::malformed, "its lengths do not add up");
    const std::size_t signed_len = t.size() - mac_size;
    auto mac = full_mac(impl_->key, t.first(signed_len));
    const bool proven =
        crypto_verify_16(mac.data(), reinterpret_cast<const unsigned char*>(&t[signed_len])) == 0;
    sodium_memzero(mac.data(), mac.size());
    if (!proven)
        return refuse(admission_refusal::bad_proof, "");
    const auto stamp = static_cast<std::int64_t>(get_le(&t[time_at], time_size));
    const std::int64_t now_ms = to_ms(now);
    const std::int64_t window = impl_->config.window.count();
    std::unique_lock lock(impl_->mu);
    impl_->expire(now_ms);
    if (stamp < now_ms - window || stamp > now_ms + window)
        return refuse(admission_refusal::stale,
                      std::to_string((now_ms - stamp) / 1000) + " s from the target's clock");
    nonce_t nonce;
    std::memcpy(nonce.data(), &t[nonce_at], nonce_size);
    if (impl_->seen.count(nonce) != 0)
        return refuse(admission_refusal::replayed, "");
    if (impl_->seen.size() >= impl_->config.replay_cache)
        return refuse(admission_refusal::overloaded,
                      "replay cache full: " + std::to_string(impl_->config.replay_cache) +
                          " admissions within the window");
    impl_->seen.insert(nonce);
    impl_->expiry.emplace(stamp + window, nonce);
    lock.unlock();
    admitted_peer p;
    p.identity.assign(reinterpret_cast<const char*>(&t[header_size]), id_len);
    p.payload.assign(t.begin() + static_cast<std::ptrdiff_t>(header_size + id_len),
                     t.begin() + static_cast<std::ptrdiff_t>(signed_len));
    return p;
}

result<admitted_peer> admission_gate::admit(connection_request& request) {
    auto p = check(request.private_data());
    if (!p) {
        const auto d = p.error().data();
        (void)request.reject(d);
    }
    return p;
}

std::size_t admission_gate::remembered() const {
    std::lock_guard lock(impl_->mu);
    return impl_->seen.size();
}

// ---- the client

std::size_t admission_connect_room(const domain& dom) noexcept {
    if (!dom || dom.caps().endpoint != endpoint_type::msg ||
        dom.caps().cm_data_size < admission_token_overhead)
        return 0;
    return dom.caps().cm_data_size - admission_token_overhead;
}

result<connection> connect_admitted(const domain& dom, const std::string& host, std::uint16_t port,
                                    const admission_key& key, std::string_view identity,
                                    const connection_config& config,
                                    std::span<const std::byte> payload) {
    auto token = make_admission_token(key, identity, payload);
    if (!token)
        return fail(token.error());
    // The whole token must fit in the connect request's private data: refused before anything
    // is sent.
    if (dom && dom.caps().endpoint == endpoint_type::msg &&
        token->size() > dom.caps().cm_data_size) {
        const auto& caps = dom.caps();
        return fail(errc::invalid_argument,
                    "admission: a token of " + std::to_string(token->size()) + " bytes (" +
                        std::to_string(admission_token_overhead) + " + identity " +
                        std::to_string(identity.size()) + " + payload " +
                        std::to_string(payload.size()) + ") does not fit in " + caps.provider +
                        "'s connect data of " + std::to_string(caps.cm_data_size) + " bytes" +
                        (caps.rules == provider_rules::verbs ? " (verbs rules)" : "") +
                        ": identity and payload may take " +
                        std::to_string(admission_connect_room(dom)) + " bytes together");
    }
    auto c = connection::connect(dom, host, port, config, *token);
    if (c)
        return c;
    if (c.error() == errc::rejected) {
        if (auto why = admission_refusal_of(c.error())) {
            auto d = c.error().data();
            return tl::unexpected<error>(
                error(errc::rejected,
                      std::string("the target refused admission: ") + to_string(*why))
                    .with_data({d.begin(), d.end()}));
        }
    }
    return c;
}

}  // namespace remora

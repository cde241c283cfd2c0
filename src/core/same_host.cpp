// SPDX-License-Identifier: BSD-3-Clause
// The host identity and the connect / accept trailer of a same-host offer (core/same_host.hpp).
#include "core/same_host.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sodium.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/connection_impl.hpp"
#include "core/little_endian.hpp"

namespace remora::detail {
namespace {

// Reads a small file whole (the boot id: 37 bytes); nullopt when it cannot be read, is empty or
// is larger than 4 KiB.
std::optional<std::vector<unsigned char>> read_small_file(const char* path) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return std::nullopt;
    }
    std::vector<unsigned char> out(4096);
    std::size_t got = 0;
    ssize_t n = 0;
    while (got < out.size() && (n = ::read(fd, out.data() + got, out.size() - got)) != 0) {
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            break;
        }
        got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (n < 0 || got == 0 || got == out.size()) {
        return std::nullopt;
    }
    out.resize(got);
    return out;
}

void hash_u64(crypto_generichash_state& st, std::uint64_t v) {
    std::byte b[8];
    put_le(b, v, 8);
    crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(b), sizeof b);
}

// This process's real, effective and saved user and group ids and its permitted and effective
// capabilities: what ptrace's rules compare.
struct credentials {
    uid_t uid[3]{};
    gid_t gid[3]{};
    std::uint64_t permitted = 0;
    std::uint64_t effective = 0;
    bool uniform() const noexcept {
        return uid[0] == uid[1] && uid[0] == uid[2] && gid[0] == gid[1] && gid[0] == gid[2];
    }
};

std::optional<credentials> own_credentials() {
    credentials c;
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
    if (::getresuid(&c.uid[0], &c.uid[1], &c.uid[2]) != 0 ||
        ::getresgid(&c.gid[0], &c.gid[1], &c.gid[2]) != 0 ||
        ::syscall(SYS_capget, &hdr, data) != 0) {
        return std::nullopt;
    }
    c.permitted = data[0].permitted | (std::uint64_t{data[1].permitted} << 32);
    c.effective = data[0].effective | (std::uint64_t{data[1].effective} << 32);
    return c;
}

}  // namespace

std::optional<std::string> same_host_untrusted() {
    // Yama (when the kernel has it) lets only ptrace_scope 0 attach to an unrelated process.
    static constexpr char yama[] = "/proc/sys/kernel/yama/ptrace_scope";
    const auto scope = read_small_file(yama);
    if (scope ? !(scope->size() >= 1 && (*scope)[0] == '0')
              : ::access(yama, F_OK) == 0 || errno != ENOENT) {
        return "Yama's ptrace_scope is not 0 (peers of this user may not attach to each other)";
    }
    if (::prctl(PR_GET_DUMPABLE) != 1) {
        return "this process is not dumpable (prctl PR_SET_DUMPABLE: peers may not attach)";
    }
    const auto cred = own_credentials();
    if (!cred || !cred->uniform()) {
        return "this process's user or group ids differ (set-id: peers may not attach)";
    }
    // Capabilities beyond its user's: a process of the user without them may not attach. A root
    // process is trusted to every uid 0 process of the host, one with fewer capabilities too.
    if (cred->uid[0] != 0 && cred->permitted != 0) {
        return "this process holds capabilities its user's other processes may not have";
    }
    return std::nullopt;
}

std::optional<host_identity> compute_host_identity() {
    if (sodium_init() < 0) {
        return std::nullopt;
    }
    const auto boot_id = read_small_file("/proc/sys/kernel/random/boot_id");
    struct stat shm {};
    struct stat pid_ns {};
    struct stat user_ns {};
    const auto cred = own_credentials();
    if (!boot_id || ::stat("/dev/shm", &shm) != 0 || ::stat("/proc/self/ns/pid", &pid_ns) != 0 ||
        ::stat("/proc/self/ns/user", &user_ns) != 0 || !cred) {
        return std::nullopt;
    }
    static constexpr char domain_tag[] = "remora same-host identity v2";
    crypto_generichash_state st;
    if (crypto_generichash_init(&st, nullptr, 0, crypto_generichash_BYTES_MIN) != 0) {
        return std::nullopt;
    }
    crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(domain_tag),
                              sizeof domain_tag);
    hash_u64(st, boot_id->size());
    crypto_generichash_update(&st, boot_id->data(), boot_id->size());
    for (const std::uint64_t v :
         {std::uint64_t{cred->uid[0]}, std::uint64_t{cred->uid[1]}, std::uint64_t{cred->uid[2]},
          std::uint64_t{cred->gid[0]}, std::uint64_t{cred->gid[1]}, std::uint64_t{cred->gid[2]},
          cred->permitted, cred->effective}) {
        hash_u64(st, v);
    }
    hash_u64(st, shm.st_dev);
    hash_u64(st, shm.st_ino);
    hash_u64(st, pid_ns.st_dev);
    hash_u64(st, pid_ns.st_ino);
    hash_u64(st, user_ns.st_dev);
    hash_u64(st, user_ns.st_ino);
    // BLAKE2b's shortest output is 16 bytes: the identity is its first 8.
    std::array<unsigned char, crypto_generichash_BYTES_MIN> full{};
    if (crypto_generichash_final(&st, full.data(), full.size()) != 0) {
        return std::nullopt;
    }
    host_identity id;
    std::memcpy(id.data(), full.data(), id.size());
    return id;
}

namespace {

constexpr std::size_t trailer_flags_at = 1;
constexpr std::size_t trailer_identity_at = 2;
constexpr std::size_t trailer_nonce_at = trailer_identity_at + host_identity_size;
constexpr std::size_t trailer_magic_at = trailer_nonce_at + same_host_nonce_size;
static_assert(trailer_magic_at + 4 == setup_trailer_size);

}  // namespace

std::optional<host_identity> this_host_identity() noexcept {
    try {
        return compute_host_identity();
    } catch (...) {  // out of memory reading the boot id: no identity, no offer
        return std::nullopt;
    }
}

void append_trailer(std::vector<std::byte>& out, const setup_trailer& t) {
    std::uint8_t flags = static_cast<std::uint8_t>(t.flags & ~trailer_address);
    if (t.address_size != 0) {
        out.insert(out.end(), t.address.begin(), t.address.begin() + t.address_size);
        out.push_back(static_cast<std::byte>(t.address_size));
        flags |= trailer_address;
    }
    const std::size_t at = out.size();
    out.resize(at + setup_trailer_size);
    std::byte* p = out.data() + at;
    p[0] = static_cast<std::byte>(setup_trailer_version);
    p[trailer_flags_at] = static_cast<std::byte>(flags);
    std::memcpy(p + trailer_identity_at, t.identity.data(), host_identity_size);
    std::memcpy(p + trailer_nonce_at, t.nonce.data(), same_host_nonce_size);
    put_le(p + trailer_magic_at, setup_trailer_magic, 4);
}

std::optional<setup_trailer> take_trailer(std::vector<std::byte>& data) noexcept {
    auto t = trailer_of(data);
    if (t) {
        data.resize(data.size() - t->wire_size());
    }
    return t;
}

std::optional<setup_trailer> trailer_of(std::span<const std::byte> data) noexcept {
    if (data.size() < setup_trailer_size) {
        return std::nullopt;
    }
    const std::byte* p = data.data() + data.size() - setup_trailer_size;
    if (get_le(p + trailer_magic_at, 4) != setup_trailer_magic ||
        p[0] != static_cast<std::byte>(setup_trailer_version)) {
        return std::nullopt;
    }
    setup_trailer t;
    t.flags = static_cast<std::uint8_t>(p[trailer_flags_at]);
    std::memcpy(t.identity.data(), p + trailer_identity_at, host_identity_size);
    std::memcpy(t.nonce.data(), p + trailer_nonce_at, same_host_nonce_size);
    if ((t.flags & trailer_address) != 0) {
        // `u8[n] address | u8 n` before it: n from 1 to 255, all of it inside the data.
        const std::size_t before = data.size() - setup_trailer_size;
        const std::size_t n = before >= 1 ? static_cast<std::size_t>(p[-1]) : 0;
        if (n == 0 || before < 1 + n) {
            return std::nullopt;
        }
        std::memcpy(t.address.data(), p - 1 - n, n);
        t.address_size = static_cast<std::uint8_t>(n);
    }
    return t;
}

bool same_host_eligible(const provider_caps& caps) noexcept {
    return caps.endpoint == endpoint_type::msg && caps.rules == provider_rules::native &&
           (caps.provider == "tcp" || caps.provider == "sockets");
}

std::vector<std::byte> connect_data(const provider_caps& caps, const connection_config& config,
                                    std::span<const std::byte> data, bool& offered,
                                    same_host_nonce& nonce, std::span<const std::byte> address) {
    offered = false;
    nonce = {};
    std::vector<std::byte> out(data.begin(), data.end());
    if (address.size() > max_trailer_address) {
        address = {};
    }
    const std::size_t extra = address.empty() ? 0 : 1 + address.size();
    const bool room = data.size() + setup_trailer_size + extra <= caps.cm_data_size;
    if (!room) {
        return out;  // no offer: the application's data is never refused for the trailer
    }
    const auto& id = this_host_identity();
    setup_trailer t;
    if (config.same_host && same_host_eligible(caps) && id) {
        randombytes_buf(nonce.data(), nonce.size());  // sodium_init ran for the identity
        t.flags = trailer_same_host;
        t.identity = *id;
        t.nonce = nonce;
        std::copy(address.begin(), address.end(), t.address.begin());
        t.address_size = static_cast<std::uint8_t>(address.size());
        offered = true;
    } else if (!trailer_of(data)) {
        return out;
    }
    append_trailer(out, t);
    return out;
}

bool settle_connect(std::vector<std::byte>& data, bool offered, const same_host_nonce& nonce,
                    std::vector<std::byte>* address) {
    if (address != nullptr) {
        address->clear();
    }
    if (!offered) {
        return false;
    }
    const auto t = trailer_of(data);
    if (!t || t->nonce != nonce) {
        return false;  // a target that does not answer offers: its data is all the application's
    }
    data.resize(data.size() - t->wire_size());
    if (address != nullptr) {
        address->assign(t->shm_address().begin(), t->shm_address().end());
    }
    const auto& id = this_host_identity();
    return t->same_host() && id && t->identity == *id;
}

std::vector<std::byte> accept_data(const provider_caps& caps, const connection_config& config,
                                   const std::optional<setup_trailer>& offer,
                                   std::span<const std::byte> data, bool& agreed,
                                   std::span<const std::byte> address) {
    agreed = false;
    std::vector<std::byte> out(data.begin(), data.end());
    if (!offer || !offer->same_host() || data.size() + setup_trailer_size > caps.cm_data_size) {
        return out;
    }
    // An acceptance carries the target's shm address when it has one: without room for it, the
    // answer declines.
    const bool room =
        address.size() <= max_trailer_address &&
        data.size() + setup_trailer_size + (address.empty() ? 0 : 1 + address.size()) <=
            caps.cm_data_size;
    const auto& id = this_host_identity();
    agreed = room && config.same_host && same_host_eligible(caps) && id && offer->identity == *id;
    setup_trailer t;
    t.nonce = offer->nonce;
    if (agreed) {  // a refusal tells the client nothing of this host: its identity stays zero
        t.flags = trailer_same_host;
        t.identity = *id;
        std::copy(address.begin(), address.end(), t.address.begin());
        t.address_size = static_cast<std::uint8_t>(address.size());
    }
    append_trailer(out, t);
    return out;
}

same_host_outcome same_host_of(const connection& c) noexcept {
    const connection_impl* impl = impl_of(c);
    if (impl == nullptr) {
        return {};
    }
    return {impl->same_host_offered, impl->same_host_agreed, impl->setup_nonce};
}

}  // namespace remora::detail

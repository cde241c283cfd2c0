// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/rules.cpp — the provider-rules registry and checks (rules.hpp).
#include "fabric/rules.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "base/log.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/mr.hpp"

namespace remora::detail {
namespace {

// A registration of an enrolled domain; its address is the descriptor the mode hands out.
struct mr_entry {
    const fid* domain = nullptr;
    std::uintptr_t base = 0;
    std::size_t len = 0;
    bool local_write = false;  // verbs' IBV_ACCESS_LOCAL_WRITE: a destination of the NIC's writes
    void* desc = nullptr;      // the provider's
};

// An enrolled endpoint: its domain and the rules it is held to.
struct ep_entry {
    const fid* domain = nullptr;
    const rules_profile* profile = nullptr;
};

struct registry {
    std::shared_mutex mu;
    std::unordered_map<const fid*, const rules_profile*> domains;
    std::unordered_map<const fid*, ep_entry> endpoints;             // endpoint -> its domain
    std::unordered_map<const fid*, std::unique_ptr<mr_entry>> mrs;  // by the registration
    std::unordered_map<const void*, const mr_entry*> tokens;        // descriptor -> entry
};

registry& reg() {
    static registry* r = new registry;  // never destroyed: closes may run at exit
    return *r;
}

std::atomic<unsigned long> violation_count{0};
std::atomic<unsigned> printed{0};
thread_local std::string last_message;

constexpr unsigned max_printed = 20;

int violation(const rules_profile& rules, const std::string& what) {
    violation_count.fetch_add(1, std::memory_order_relaxed);
    last_message = std::string(rules.name) + " rules: " + what;
    // Logged; without a log function the first ones go to stderr: the mode is a testing aid,
    // and a rule broken by a post whose failure a caller swallows must still show.
    if (log_enabled(log_level::error)) {
        log_line(log_level::error, last_message);
    } else if (printed.fetch_add(1, std::memory_order_relaxed) < max_printed) {
        std::fprintf(stderr, "remora: %s\n", last_message.c_str());
    }
    return -FI_EINVAL;
}

std::string hex(std::uintptr_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, v);
    return buf;
}

const char* kind_name(post_kind k) {
    switch (k) {
        case post_kind::send:
            return "send";
        case post_kind::recv:
            return "receive";
        case post_kind::write:
            return "write";
        case post_kind::read:
            return "read";
        case post_kind::atomic_write:
            return "atomic write";
        case post_kind::fetch_add:
            return "fetch-add";
        case post_kind::compare_swap:
            break;
    }
    return "compare-swap";
}

// Checks one local buffer of `p` against its descriptor; on success `*out` is the provider's.
int check_segment(const registry& r, const ep_entry& ep, const fabric_post& p, std::size_t i,
                  const void* base, std::size_t len, void* desc, bool destination, void** out) {
    const rules_profile& rules = *ep.profile;
    const std::string which = std::string(kind_name(p.kind)) + ": local segment " +
                              std::to_string(i) + " (" + std::to_string(len) + " bytes at " +
                              hex(reinterpret_cast<std::uintptr_t>(base)) + ")";
    if (desc == nullptr) {
        return violation(rules, which + " carries no local descriptor (" + rules.name +
                                    " needs an lkey: post from a memory_region and pass its "
                                    "descriptor)");
    }
    const auto it = r.tokens.find(desc);
    if (it == r.tokens.end()) {
        return violation(rules, which +
                                    " carries a descriptor that is no live registration of an "
                                    "enrolled domain");
    }
    const mr_entry& e = *it->second;
    if (e.domain != ep.domain) {
        return violation(rules,
                         which + " carries the descriptor of a registration of another domain");
    }
    const auto a = reinterpret_cast<std::uintptr_t>(base);
    if (a < e.base || len > e.len || a - e.base > e.len - len) {
        return violation(rules, which + " is not inside its registration [" + hex(e.base) + ", +" +
                                    std::to_string(e.len) + ")");
    }
    if (destination && !e.local_write) {
        return violation(rules, which +
                                    " is written by the NIC but its registration does not allow "
                                    "local writes (register it for receive or read_destination)");
    }
    *out = e.desc;
    return 0;
}

// Replaces each descriptor that is one of the mode's by the provider's (a post on an endpoint
// of a domain not under the rules that names a registration of one that is).
void translate_foreign(const registry& r, void** desc, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
        if (auto it = r.tokens.find(desc[i]); it != r.tokens.end()) {
            desc[i] = it->second->desc;
        }
    }
}

std::uint64_t draw_key() {
    thread_local std::mt19937_64 gen{std::random_device{}()};
    std::uint64_t k = 0;
    while (k == 0) {
        k = gen() & 0xffffffffu;
    }
    return k;
}

}  // namespace

ssize_t rules_post(fid_ep* ep, const fabric_post& p) {
    last_message.clear();
    constexpr std::size_t max_iov = rules_max_iov;
    void* desc[max_iov];
    fabric_post q = p;
    {
        registry& r = reg();
        std::shared_lock lock(r.mu);
        const auto ep_it = r.endpoints.find(&ep->fid);
        if (ep_it == r.endpoints.end()) {
            if (p.desc != nullptr && p.count <= max_iov) {
                std::copy(p.desc, p.desc + p.count, desc);
                translate_foreign(r, desc, p.count);
                q.desc = desc;
            }
            if (p.result_desc != nullptr) {
                translate_foreign(r, &q.result_desc, 1);
            }
            lock.unlock();
            return ep_post_direct(ep, q);
        }
        const ep_entry& entry = ep_it->second;
        const rules_profile& rules = *entry.profile;
        const std::string name = rules.name;
        const char* kind = kind_name(p.kind);
        if (p.context == nullptr) {
            return violation(rules, std::string(kind) +
                                        " without a context (the provider owns the "
                                        "post's fi_context2 until its completion)");
        }
        if (reinterpret_cast<std::uintptr_t>(p.context) % alignof(fi_context2) != 0) {
            return violation(rules,
                             std::string(kind) + ": its context is not aligned as fi_context2");
        }
        const bool atomic = p.kind == post_kind::atomic_write || p.kind == post_kind::fetch_add ||
                            p.kind == post_kind::compare_swap;
        const bool rma = p.kind == post_kind::write || p.kind == post_kind::read;
        if (!atomic) {
            const std::size_t limit =
                p.kind == post_kind::recv ? rules.rx_iov_limit : rules.iov_limit;
            if (p.count > limit) {
                return violation(rules, std::string(kind) + " of " + std::to_string(p.count) +
                                            " local segments: " + name + " takes at most " +
                                            std::to_string(limit) + " (iov_limit)");
            }
            std::size_t total = 0;
            const bool destination = p.kind == post_kind::recv || p.kind == post_kind::read;
            for (std::size_t i = 0; i < p.count; ++i) {
                total += p.iov[i].iov_len;
                desc[i] = nullptr;
                if (p.iov[i].iov_len == 0) {
                    continue;
                }
                if (int e = check_segment(r, entry, p, i, p.iov[i].iov_base, p.iov[i].iov_len,
                                          p.desc != nullptr ? p.desc[i] : nullptr, destination,
                                          &desc[i])) {
                    return e;
                }
            }
            q.desc = desc;
            if (total > rules.max_msg_size) {
                return violation(rules, std::string(kind) + " of " + std::to_string(total) +
                                            " bytes: " + name + "'s largest message is " +
                                            std::to_string(rules.max_msg_size) + " (max_msg_size)");
            }
            if ((p.flags & post_inject) != 0 && total > rules.inject_size) {
                return violation(rules, std::string(kind) + " of " + std::to_string(total) +
                                            " bytes injected: " + name + " injects at most " +
                                            std::to_string(rules.inject_size) + " (inject_size)");
            }
        } else {
            if (rules.aligned_atomics && p.remote.addr % sizeof(std::uint64_t) != 0) {
                return violation(rules, std::string(kind) + " on remote address " +
                                            hex(p.remote.addr) +
                                            ": the NIC's atomics take 8-byte aligned "
                                            "words (" +
                                            name + ")");
            }
            if (p.kind != post_kind::atomic_write) {
                if (int e = check_segment(r, entry, p, 0, p.result, sizeof(std::uint64_t),
                                          p.result_desc, true, &q.result_desc)) {
                    return e;
                }
            }
        }
        if ((p.flags & post_remote_data) != 0 && rules.cq_data_size < sizeof(std::uint64_t) &&
            (p.data >> (8 * rules.cq_data_size)) != 0) {
            return violation(rules, std::string(kind) + " with immediate data " + hex(p.data) +
                                        ": " + name + " carries " +
                                        std::to_string(rules.cq_data_size) +
                                        " bytes (cq_data_size)");
        }
        if ((rma || atomic) && rules.mr_key_size < sizeof(std::uint64_t) &&
            (p.remote.key >> (8 * rules.mr_key_size)) != 0) {
            return violation(rules, std::string(kind) + " with remote key " + hex(p.remote.key) +
                                        ": " + name + "'s keys are " +
                                        std::to_string(rules.mr_key_size) + " bytes (mr_key_size)");
        }
    }
    // The provider may use the whole context area from here to the completion.
    std::memset(p.context, 0xa5, sizeof(fi_context2));
    return ep_post_direct(ep, q);
}

int rules_mr_reg(fid_domain* domain, void* buf, std::size_t len, mr_access access,
                 std::uint64_t requested_key, mr_handle& out) {
    registry& r = reg();
    const rules_profile* rules = nullptr;
    {
        std::shared_lock lock(r.mu);
        const auto it = r.domains.find(&domain->fid);
        if (it == r.domains.end()) {
            lock.unlock();
            return out.opened(
                fi_mr_reg(domain, buf, len, access, 0, requested_key, 0, out.out(), nullptr));
        }
        rules = it->second;
    }
    if (requested_key != 0) {
        return violation(*rules, "a registration of " + std::to_string(len) +
                                     " bytes asked for key " + hex(requested_key) + ": under " +
                                     rules->name + " the provider chooses the keys");
    }
    int ret = -FI_ENOKEY;
    for (int attempt = 0; attempt < 16 && ret == -FI_ENOKEY; ++attempt) {
        ret = out.opened(fi_mr_reg(domain, buf, len, access, 0, draw_key(), 0, out.out(), nullptr));
    }
    if (ret != 0) {
        return ret;
    }
    auto e = std::make_unique<mr_entry>();
    e->domain = &domain->fid;
    e->base = reinterpret_cast<std::uintptr_t>(buf);
    e->len = len;
    e->local_write = (access & (FI_RECV | FI_READ | FI_REMOTE_WRITE)) != 0;
    e->desc = fi_mr_desc(out.get());
    std::unique_lock lock(r.mu);
    r.tokens[e.get()] = e.get();
    r.mrs[out.as_fid()] = std::move(e);
    return 0;
}

void* rules_mr_desc(fid_mr* mr) noexcept {
    registry& r = reg();
    std::shared_lock lock(r.mu);
    if (auto it = r.mrs.find(&mr->fid); it != r.mrs.end()) {
        return it->second.get();
    }
    return fi_mr_desc(mr);
}

namespace fabric_rules {

void enroll(fid_domain* domain, const rules_profile& profile) {
    registry& r = reg();
    std::unique_lock lock(r.mu);
    if (r.domains.emplace(&domain->fid, &profile).second) {
        enrolled.fetch_add(1, std::memory_order_relaxed);
    }
}

void endpoint_opened(const fid_domain* domain, const fid* ep) {
    registry& r = reg();
    std::unique_lock lock(r.mu);
    if (const auto it = r.domains.find(&domain->fid); it != r.domains.end()) {
        r.endpoints[ep] = {&domain->fid, it->second};
    }
}

int check_cm_data(const fid* ep, std::size_t len, const char* call) {
    last_message.clear();
    registry& r = reg();
    std::shared_lock lock(r.mu);
    const auto it = r.endpoints.find(ep);
    if (it != r.endpoints.end() && len > it->second.profile->cm_data_size) {
        const rules_profile& rules = *it->second.profile;
        return violation(rules, std::string(call) + " with " + std::to_string(len) +
                                    " bytes of private data: " + rules.name + " leaves " +
                                    std::to_string(rules.cm_data_size) +
                                    " in a connect request (cm_data_size)");
    }
    return 0;
}

void forget(const fid* f) noexcept {
    registry& r = reg();
    std::unique_lock lock(r.mu);
    r.endpoints.erase(f);
    if (auto it = r.mrs.find(f); it != r.mrs.end()) {
        r.tokens.erase(it->second.get());
        r.mrs.erase(it);
    }
    if (r.domains.erase(f) != 0) {
        std::erase_if(r.endpoints, [f](const auto& e) { return e.second.domain == f; });
        for (auto it = r.mrs.begin(); it != r.mrs.end();) {
            if (it->second->domain == f) {
                r.tokens.erase(it->second.get());
                it = r.mrs.erase(it);
            } else {
                ++it;
            }
        }
        enrolled.fetch_sub(1, std::memory_order_relaxed);
    }
}

void report(const rules_profile& profile, const std::string& what) {
    (void)violation(profile, what);
}

unsigned long violations() noexcept {
    return violation_count.load(std::memory_order_relaxed);
}

std::string take_message() {
    return std::exchange(last_message, std::string());
}

}  // namespace fabric_rules
}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
#include <remora/memory_region.hpp>
#include <remora/remote_region.hpp>

#include <sodium.h>

#include "base/log.hpp"
#include "core/impl.hpp"
#include "fabric/mr.hpp"

namespace remora {
namespace {

detail::mr_access access_for(usage u) {
    using namespace detail;
    mr_access a = 0;
    if (any(u & usage::read_source))
        a |= mr_access_remote_read;
    if (any(u & usage::read_destination))
        a |= mr_access_read;
    if (any(u & usage::write_source))
        a |= mr_access_write;
    if (any(u & usage::write_destination))
        a |= mr_access_remote_write;
    if (any(u & usage::send))
        a |= mr_access_send;
    if (any(u & usage::receive))
        a |= mr_access_recv;
    if (any(u & usage::atomic_target))
        a |= mr_access_remote_read | mr_access_remote_write;
    if (any(u & usage::flush_target))
        a |= mr_access_remote_read;
    return a;
}

// A requested key for providers that take ours (no mr_mode::prov_key): random (libsodium's
// randombytes), limited to the provider's mr_key_size, never 0. A counter would make every
// region's key known in advance (1 on every start).
std::uint64_t random_key(std::size_t key_size) {
    std::uint64_t k = 0;
    while (k == 0) {
        randombytes_buf(&k, sizeof k);
        if (key_size > 0 && key_size < sizeof k)
            k &= (std::uint64_t{1} << (8 * key_size)) - 1;
    }
    return k;
}

// Registers the region's memory in the domain's same-host shm domain too, with the same access
// and the key the region's own registration got (shm takes the key asked for, and checks it
// against nothing: docs/security.md). A refusal (the key in use there, a fault) leaves the region
// without it: it still works over its own domain, only not over shared memory.
void register_same_host(detail::region_impl& r, detail::mr_access access) {
    using namespace detail;
    domain_impl* shm = r.dom->same_host.get();
    if (shm == nullptr) {
        return;
    }
    mr_handle mr;
    const int ret = mr_reg(shm->domain.get(), r.memory.data(), r.memory.size(), access, r.key, mr);
    if (ret != 0 || mr_key(mr.get()) != r.key) {
        if (log_enabled(log_level::debug)) {
            log_line(log_level::debug,
                     "memory_region: the same-host shm registration of " +
                         std::to_string(r.memory.size()) + " bytes failed (" +
                         (ret != 0 ? std::string(fabric_strerror(ret)) : "another key") +
                         "): the region is reached over " + r.dom->caps.provider + " only");
        }
        return;
    }
    r.same_host_mr = std::move(mr);
}

}  // namespace

memory_region::memory_region(std::unique_ptr<impl, impl_deleter> p) noexcept
    : impl_(std::move(p)) {}
void memory_region::impl_deleter::operator()(impl* p) const noexcept {
    internal_access::destroy<memory_region>(p);
}
memory_region::memory_region(memory_region&&) noexcept = default;
memory_region& memory_region::operator=(memory_region&&) noexcept = default;
memory_region::~memory_region() = default;

bool memory_region::registered_in(const domain& dom) const noexcept {
    return impl_ != nullptr && dom && detail::impl_of(*this)->dom.get() == detail::impl_of(dom);
}

result<memory_region> memory_region::create(const domain& dom, std::span<std::byte> memory,
                                            usage uses) {
    if (!dom) {
        return fail(errc::bad_state,
                    "memory_region: the domain handle is empty (closed or moved from)");
    }
    if (memory.empty() || memory.data() == nullptr) {
        return fail(errc::invalid_argument, "memory_region: empty memory");
    }
    if (!any(uses) || any(uses & ~all_usages)) {
        return fail(errc::invalid_argument,
                    "memory_region: usage must name at least one known usage");
    }
    auto impl = std::make_unique<detail::region_impl>();
    impl->dom = detail::shared_impl_of(dom);
    impl->memory = memory;
    impl->uses = uses;
    detail::domain_impl& d = *impl->dom;
    const bool prov_key = has_all(d.caps.mr_mode, mr_mode::prov_key);
    // A random key may collide with one in use (fabric_errno::key_in_use): draw again, a few times.
    int ret = 0;
    for (int attempt = 0; attempt < 8; ++attempt) {
        const std::uint64_t requested = prov_key ? 0 : random_key(d.caps.mr_key_size);
        ret = detail::mr_reg(d.domain.get(), memory.data(), memory.size(), access_for(uses),
                             requested, impl->mr);
        if (prov_key || ret != -detail::fabric_errno::key_in_use)
            break;
    }
    if (ret != 0) {
        return fail(
            detail::fabric_error(ret, "fi_mr_reg of " + std::to_string(memory.size()) + " bytes"));
    }
    impl->desc = detail::mr_desc(impl->mr.get());
    impl->key = detail::mr_key(impl->mr.get());
    if (impl->key == detail::mr_key_unavailable) {
        return fail(errc::not_supported, "memory_region: provider uses raw keys (FI_MR_RAW)");
    }
    register_same_host(*impl, access_for(uses));
    return internal_access::wrap<memory_region>(std::move(impl));
}

std::span<std::byte> memory_region::memory() const noexcept {
    return detail::impl_of(*this)->memory;
}
usage memory_region::usages() const noexcept {
    return detail::impl_of(*this)->uses;
}

result<remote_region> memory_region::describe(std::size_t offset, std::size_t length) const {
    const std::size_t size = detail::impl_of(*this)->memory.size();
    if (offset >= size) {
        return fail(errc::out_of_range, "describe: offset " + std::to_string(offset) +
                                            " beyond region of " + std::to_string(size) + " bytes");
    }
    if (length == 0) {
        length = size - offset;
    }
    if (length > size - offset) {
        return fail(errc::out_of_range, "describe: range [" + std::to_string(offset) + ", +" +
                                            std::to_string(length) + ") beyond region of " +
                                            std::to_string(size) + " bytes");
    }
    const usage remote = detail::impl_of(*this)->uses & remote_region::remote_usages;
    if (!any(remote)) {
        return fail(errc::access_denied, "describe: region has no remote usage to grant");
    }
    const detail::region_impl& r = *detail::impl_of(*this);
    const bool virt = has_all(r.dom->caps.mr_mode, mr_mode::virt_addr);
    const std::uint64_t address = reinterpret_cast<std::uintptr_t>(r.memory.data());
    // shm addresses registrations by virtual address (mr_mode::virt_addr)
    const std::uint64_t same_host = r.same_host_mr ? address + offset : 0;
    return remote_region::make((virt ? address : 0) + offset, length, r.key, remote, virt,
                               same_host);
}

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
#include <remora/persistent_region.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/impl.hpp"
#include "persist/persist_impl.hpp"

namespace remora {
namespace detail {

persistent_impl::~persistent_impl() {
    region.reset();  // deregister before unmapping
    if (base != nullptr) {
        ::munmap(base, mapped);
    }
}

}  // namespace detail

namespace {

std::string sys_error(const std::string& what, int err) {
    return what + ": " + std::strerror(err);
}

}  // namespace

persistent_region::persistent_region(std::unique_ptr<detail::persistent_impl> impl)
    : impl_(std::move(impl)) {}
persistent_region::persistent_region(persistent_region&&) noexcept = default;
persistent_region& persistent_region::operator=(persistent_region&&) noexcept = default;
persistent_region::~persistent_region() = default;

result<persistent_region> persistent_region::open(const domain& dom,
                                                  const persistent_region_config& config) {
    if (!dom) {
        return fail(errc::bad_state,
                    "persistent_region: the domain handle is empty (closed or moved from)");
    }
    auto impl = std::make_unique<detail::persistent_impl>();
    impl->path = config.path;
    std::size_t size = config.size;
    if (config.path.empty()) {
        if (size == 0) {
            return fail(errc::invalid_argument,
                        "persistent_region: a volatile region needs a size");
        }
        void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return fail(
                errc::invalid_argument,
                sys_error("persistent_region: mmap of " + std::to_string(size) + " bytes", errno));
        }
        impl->base = p;
        impl->mapped = size;
    } else {
        const int flags = O_RDWR | O_CLOEXEC | (config.create ? O_CREAT | O_EXCL : 0);
        detail::unique_fd fd(::open(config.path.c_str(), flags, 0644));
        bool created = fd.get() >= 0 && config.create;
        if (fd.get() < 0 && config.create && errno == EEXIST) {
            fd = detail::unique_fd(::open(config.path.c_str(), O_RDWR | O_CLOEXEC));
            created = false;
        }
        if (fd.get() < 0) {
            return fail(errc::invalid_argument, sys_error("persistent_region: open " + config.path +
                                                              (config.create ? "" : " (no create)"),
                                                          errno));
        }
        struct stat st {};
        if (::fstat(fd.get(), &st) != 0) {
            return fail(errc::invalid_argument,
                        sys_error("persistent_region: stat " + config.path, errno));
        }
        if (!S_ISREG(st.st_mode)) {
            return fail(errc::invalid_argument,
                        "persistent_region: " + config.path + " is not a regular file");
        }
        const auto file_size = static_cast<std::size_t>(st.st_size);
        if (size == 0) {
            size = file_size;
        }
        if (size == 0) {
            return fail(errc::invalid_argument,
                        "persistent_region: " + config.path + " is empty; give a size and create");
        }
        if (file_size < size) {
            if (!config.create) {
                return fail(errc::invalid_argument,
                            "persistent_region: " + config.path + " has " +
                                std::to_string(file_size) + " bytes, " + std::to_string(size) +
                                " asked (create extends it; remora never truncates)");
            }
            // Allocate the blocks now, so a full disk fails here and not as SIGBUS on a write.
            if (int e = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(size)); e != 0) {
                return fail(errc::invalid_argument,
                            sys_error("persistent_region: extend " + config.path, e));
            }
            if (::fsync(fd.get()) != 0) {
                return fail(errc::invalid_argument,
                            sys_error("persistent_region: fsync " + config.path, errno));
            }
        }
        if (created) {
            // A new file is durable only once its directory entry is.
            const auto slash = config.path.rfind('/');
            const std::string dir = slash == std::string::npos ? "."
                                    : slash == 0               ? "/"
                                                               : config.path.substr(0, slash);
            detail::unique_fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            if (dfd.get() < 0 || ::fsync(dfd.get()) != 0) {
                return fail(errc::invalid_argument,
                            sys_error("persistent_region: fsync of directory " + dir, errno));
            }
        }
        // MAP_SYNC (DAX file systems) keeps the file's metadata durable for every write fault;
        // elsewhere the kernel refuses it and msync does the work.
        void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC,
                         fd.get(), 0);
        if (p != MAP_FAILED) {
            impl->dax = true;
        } else {
            p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
            if (p == MAP_FAILED) {
                return fail(errc::invalid_argument,
                            sys_error("persistent_region: mmap " + config.path, errno));
            }
        }
        impl->base = p;
        impl->mapped = size;
        impl->persistent = true;
    }
    if (config.apm_durable && !impl->dax) {
        return fail(errc::invalid_argument,
                    "persistent_region: apm_durable needs a DAX mapping (MAP_SYNC); writes into "
                    "the page cache are not durable when placed");
    }
    impl->apm_durable = config.apm_durable;
    auto mr = memory_region::create(dom, {static_cast<std::byte*>(impl->base), impl->mapped},
                                    config.uses);
    if (!mr) {
        return fail(mr.error());
    }
    impl->region.emplace(std::move(*mr));
    return persistent_region(std::move(impl));
}

const memory_region& persistent_region::region() const noexcept {
    return *impl_->region;
}
std::span<std::byte> persistent_region::memory() const noexcept {
    return {static_cast<std::byte*>(impl_->base), impl_->mapped};
}
bool persistent_region::is_persistent() const noexcept {
    return impl_->persistent;
}
bool persistent_region::is_dax() const noexcept {
    return impl_->dax;
}
const std::string& persistent_region::path() const noexcept {
    return impl_->path;
}

result<void> persistent_region::persist(std::uint64_t offset, std::uint64_t length) const {
    return impl_->persist(offset, length);
}

namespace detail {

result<void> persistent_impl::persist(std::uint64_t offset, std::uint64_t length) const {
    if (offset > mapped || length > mapped - offset) {
        return fail(errc::out_of_range, "persist: range [" + std::to_string(offset) + ", +" +
                                            std::to_string(length) + ") outside region of " +
                                            std::to_string(mapped) + " bytes");
    }
    if (!persistent) {
        return fail(errc::not_supported, "persist: the region is volatile (no backing file)");
    }
    if (length == 0) {
        return {};
    }
    static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t start = offset / page * page;
    const std::uint64_t end = offset + length;
    if (::msync(static_cast<std::byte*>(base) + start, end - start, MS_SYNC) != 0) {
        return fail(errc::provider_error, sys_error("persist: msync", errno));
    }
    return {};
}

persistence persistent_impl::offered(bool served) const {
    if (!persistent) {
        return persistence::none;
    }
    persistence p = persistence::persistent;
    if (apm_durable) {
        p = p | persistence::apm;
    }
    if (served) {
        p = p | persistence::gpspm;
    }
    return p;
}

}  // namespace detail

result<remote_region> persistent_region::describe(std::size_t offset, std::size_t length) const {
    auto d = impl_->region->describe(offset, length);
    if (!d) {
        return d;
    }
    return d->with_persistence(impl_->offered(impl_->served.load() > 0));
}

}  // namespace remora

// SPDX-License-Identifier: BSD-3-Clause
#include <remora/persistent_region.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/unique_fd.hpp"
#include "persist/persist_impl.hpp"

namespace remora {
namespace detail {

persistent_impl::~persistent_impl() {
    region.reset();  // deregister before unmapping
    if (base != nullptr) {
        ::munmap(base, mapped);
    }
    if (fd >= 0) {
        ::close(fd);  // releases the lock and the lease, after the mapping is gone
    }
}

bool persistent_impl::revoked() const noexcept {
    // During a lease break the kernel reports the type the lease must be brought down to.
    return exclusive && ::fcntl(fd, F_GETLEASE) != F_WRLCK;
}

}  // namespace detail

namespace {

std::string sys_error(const std::string& what, int err) {
    return what + ": " + std::strerror(err);
}

// The pid holding a flock or a lease on the file (dev, ino), from /proc/locks; nullopt when none
// is listed (or /proc is not mounted).
std::optional<long> lock_holder(dev_t dev, ino_t ino) {
    std::ifstream locks("/proc/locks");
    char id[64];
    std::snprintf(id, sizeof id, "%02x:%02x:%llu", major(dev), minor(dev),
                  static_cast<unsigned long long>(ino));
    std::string line;
    while (std::getline(locks, line)) {
        // "1: FLOCK  ADVISORY  WRITE 6699 fe:00:10952993 0 EOF"; "1: -> ..." are waiters.
        std::istringstream in(line);
        std::string n, kind, mode, type, where;
        long pid = 0;
        if (in >> n >> kind && kind != "->" && (kind == "FLOCK" || kind == "LEASE") &&
            in >> mode >> type >> pid >> where && where == id) {
            return pid;
        }
    }
    return std::nullopt;
}

std::string in_use(const std::string& path, std::optional<long> pid) {
    return "persistent_region: " + path + " is already served by another region" +
           (pid ? " (pid " + std::to_string(*pid) + ")" : std::string()) +
           "; a file backs one region at a time";
}

// Deletes a file this open created unless the open succeeds.
struct created_file {
    std::string path;
    bool keep = false;
    ~created_file() {
        if (!path.empty() && !keep) {
            ::unlink(path.c_str());
        }
    }
};

// The file alone: an exclusive lock (a second region on it is refused, naming the holder), and a
// write lease, which the kernel breaks before anyone else's open or truncate(2) of the file goes
// through: revoked() turns true and the opener waits (lease-break-time) for the region to close,
// so a truncation can never land under the mapping. The break is signalled with SIGURG, whose
// default action is to ignore it; revoked() polls the lease.
result<void> take_file(int fd, const std::string& path, const struct stat& st) {
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            return fail(errc::bad_state, in_use(path, lock_holder(st.st_dev, st.st_ino)));
        }
        return fail(errc::invalid_argument, sys_error("persistent_region: lock " + path, errno));
    }
    if (::fcntl(fd, F_SETSIG, SIGURG) != 0 || ::fcntl(fd, F_SETLEASE, F_WRLCK) != 0) {
        const int e = errno;
        const std::string why =
            e == EAGAIN ? "it is open elsewhere; a region needs the file to itself "
                          "(a truncation under the mapping would kill this process)"
            : e == EACCES || e == EPERM
                ? "only the file's owner (or a process with CAP_LEASE) can hold its lease"
                : "the file system offers no leases";
        return fail(errc::bad_state, sys_error("persistent_region: lease on " + path, e) + ": " +
                                         why + "; `exclusive = false` opens it unguarded");
    }
    return {};
}

}  // namespace

persistent_region::persistent_region(std::unique_ptr<impl, impl_deleter> p) noexcept
    : impl_(std::move(p)) {}
void persistent_region::impl_deleter::operator()(impl* p) const noexcept {
    internal_access::destroy<persistent_region>(p);
}
persistent_region::persistent_region(persistent_region&&) noexcept = default;
persistent_region& persistent_region::operator=(persistent_region&&) noexcept = default;
persistent_region::~persistent_region() = default;

namespace {

// What every region does once mapped: the durability declaration and the registration.
result<void> finish(detail::persistent_impl& impl, const domain& dom,
                    const persistent_region_config& config) {
    if (config.apm_durable && !impl.dax) {
        return fail(errc::invalid_argument,
                    "persistent_region: apm_durable needs a DAX mapping (MAP_SYNC); writes into "
                    "the page cache are not durable when placed");
    }
    impl.apm_durable = config.apm_durable;
    auto mr =
        memory_region::create(dom, {static_cast<std::byte*>(impl.base), impl.mapped}, config.uses);
    if (!mr) {
        return fail(mr.error());
    }
    impl.region.emplace(std::move(*mr));
    return {};
}

}  // namespace

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
        if (config.exclusive) {
            // Refused before opening: an open would break the holder's lease.
            struct stat held {};
            if (::stat(config.path.c_str(), &held) == 0) {
                if (auto pid = lock_holder(held.st_dev, held.st_ino)) {
                    return fail(errc::bad_state, in_use(config.path, pid));
                }
            }
        }
        const int flags = O_RDWR | O_CLOEXEC | (config.create ? O_CREAT | O_EXCL : 0);
        detail::unique_fd fd(::open(config.path.c_str(), flags, 0600));
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
        created_file undo{created ? config.path : std::string()};
        struct stat st {};
        if (::fstat(fd.get(), &st) != 0) {
            return fail(errc::invalid_argument,
                        sys_error("persistent_region: stat " + config.path, errno));
        }
        if (!S_ISREG(st.st_mode)) {
            return fail(errc::invalid_argument,
                        "persistent_region: " + config.path + " is not a regular file");
        }
        if (config.exclusive) {
            if (auto r = take_file(fd.get(), config.path, st); !r) {
                return fail(r.error());
            }
        }
        const auto file_size = static_cast<std::size_t>(st.st_size);
        if (size == 0) {
            size = file_size;
        }
        if (size == 0) {
            return fail(errc::invalid_argument,
                        "persistent_region: " + config.path + " is empty; give a size and create");
        }
        if (file_size < size && !config.create) {
            return fail(errc::invalid_argument,
                        "persistent_region: " + config.path + " has " + std::to_string(file_size) +
                            " bytes, " + std::to_string(size) +
                            " asked (create extends it; remora never truncates)");
        }
        // Every block of the region allocated now, whether the file grows or was made sparse
        // beforehand: a full file system fails here and not as SIGBUS on a write.
        if (int e = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(size)); e != 0) {
            return fail(errc::invalid_argument,
                        sys_error("persistent_region: allocate " + std::to_string(size) +
                                      " bytes of " + config.path,
                                  e));
        }
        if (::fsync(fd.get()) != 0) {
            return fail(errc::invalid_argument,
                        sys_error("persistent_region: fsync " + config.path, errno));
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
        // A fork()ed child would hold the file through its copy of the mapping (and keep the
        // lease from ever being released); registered memory is not shared with children anyway.
        (void)::madvise(p, size, MADV_DONTFORK);
        impl->exclusive = config.exclusive;
        impl->fd = fd.release();
        if (auto r = finish(*impl, dom, config); !r) {
            return fail(r.error());  // the file this open created is deleted with `undo`
        }
        undo.keep = true;
        return internal_access::wrap<persistent_region>(std::move(impl));
    }
    if (auto r = finish(*impl, dom, config); !r) {
        return fail(r.error());
    }
    return internal_access::wrap<persistent_region>(std::move(impl));
}

const memory_region& persistent_region::region() const noexcept {
    return *detail::impl_of(*this)->region;
}
std::span<std::byte> persistent_region::memory() const noexcept {
    return {static_cast<std::byte*>(detail::impl_of(*this)->base), detail::impl_of(*this)->mapped};
}
bool persistent_region::is_persistent() const noexcept {
    return detail::impl_of(*this)->persistent;
}
bool persistent_region::is_dax() const noexcept {
    return detail::impl_of(*this)->dax;
}
const std::string& persistent_region::path() const noexcept {
    return detail::impl_of(*this)->path;
}
bool persistent_region::revoked() const noexcept {
    return detail::impl_of(*this)->revoked();
}

result<void> persistent_region::persist(std::uint64_t offset, std::uint64_t length) const {
    return detail::impl_of(*this)->persist(offset, length);
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
    auto d = detail::impl_of(*this)->region->describe(offset, length);
    if (!d) {
        return d;
    }
    return d->with_persistence(
        detail::impl_of(*this)->offered(detail::impl_of(*this)->served.load() > 0));
}

}  // namespace remora

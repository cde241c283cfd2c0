// SPDX-License-Identifier: BSD-3-Clause
#include <remora/buffer_pool.hpp>

#include <sys/mman.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "base/internal_access.hpp"

namespace remora {

struct buffer_pool::impl {};

namespace detail {

struct buffer_pool_impl;
REMORA_HANDLE_STATE(buffer_pool, buffer_pool_impl);

struct buffer_pool_impl : internal_access::opaque<buffer_pool> {
    std::span<std::byte> memory;  // mmap'ed: page aligned, zeroed
    std::optional<memory_region> mr;
    std::size_t buffer_size = 0;
    std::size_t count = 0;
    mutable std::mutex mu;
    std::vector<std::uint32_t> free;  // indices; reserved at creation

    ~buffer_pool_impl() {
        mr.reset();  // deregistered before the memory goes
        if (!memory.empty()) {
            ::munmap(memory.data(), memory.size());
        }
    }
};

// The pool behind a buffer's pool_.
template <class P>
buffer_pool_impl* buffer_pool_of(const P& p) noexcept {
    return internal_access::cast<buffer_pool>(p.get());
}

}  // namespace detail

pooled_buffer::pooled_buffer(pooled_buffer&& o) noexcept
    : pool_(std::move(o.pool_)), index_(o.index_) {}

pooled_buffer& pooled_buffer::operator=(pooled_buffer&& o) noexcept {
    if (this != &o) {
        release();
        pool_ = std::move(o.pool_);
        index_ = o.index_;
    }
    return *this;
}

pooled_buffer::~pooled_buffer() {
    release();
}

void pooled_buffer::release() noexcept {
    if (pool_) {
        {
            std::lock_guard lock(detail::buffer_pool_of(pool_)->mu);
            detail::buffer_pool_of(pool_)->free.push_back(
                index_);  // capacity reserved at creation: no allocation
        }
        pool_.reset();
    }
}

std::span<std::byte> pooled_buffer::data() const noexcept {
    return detail::buffer_pool_of(pool_)->memory.subspan(
        offset(), detail::buffer_pool_of(pool_)->buffer_size);
}
const memory_region& pooled_buffer::region() const noexcept {
    return *detail::buffer_pool_of(pool_)->mr;
}
std::size_t pooled_buffer::offset() const noexcept {
    return static_cast<std::size_t>(index_) * detail::buffer_pool_of(pool_)->buffer_size;
}

result<buffer_pool> buffer_pool::create(const domain& dom, const buffer_pool_config& cfg) {
    if (cfg.buffers == 0 || cfg.buffer_size == 0 || cfg.buffers > UINT32_MAX) {
        return fail(errc::invalid_argument,
                    "buffer_pool: buffers and buffer_size must be > 0 (buffers < 2^32)");
    }
    if (cfg.buffer_size > SIZE_MAX / cfg.buffers) {
        return fail(errc::too_large, "buffer_pool: buffers x buffer_size overflows");
    }
    auto impl = std::make_shared<detail::buffer_pool_impl>();
    const std::size_t bytes = cfg.buffers * cfg.buffer_size;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return fail(errc::too_large, "buffer_pool: cannot map " + std::to_string(bytes) +
                                         " bytes: " + std::strerror(errno));
    }
    impl->memory = {static_cast<std::byte*>(p), bytes};
    auto mr = memory_region::create(dom, impl->memory, cfg.uses);
    if (!mr) {
        return fail(mr.error().code(), "buffer_pool: " + mr.error().message());
    }
    impl->mr.emplace(std::move(*mr));
    impl->buffer_size = cfg.buffer_size;
    impl->count = cfg.buffers;
    impl->free.reserve(cfg.buffers);
    for (std::size_t i = cfg.buffers; i-- > 0;) {
        impl->free.push_back(static_cast<std::uint32_t>(i));
    }
    buffer_pool out;
    out.impl_ = std::move(impl);
    return out;
}

result<pooled_buffer> buffer_pool::try_get() {
    if (!impl_) {
        return fail(errc::bad_state, "buffer_pool: empty handle");
    }
    pooled_buffer b;
    {
        std::lock_guard lock(detail::impl_of(*this)->mu);
        if (detail::impl_of(*this)->free.empty()) {
            return fail(errc::would_block, "buffer_pool: all " +
                                               std::to_string(detail::impl_of(*this)->count) +
                                               " buffers are in use");
        }
        b.index_ = detail::impl_of(*this)->free.back();
        detail::impl_of(*this)->free.pop_back();
    }
    b.pool_ = impl_;
    return b;
}

std::size_t buffer_pool::available() const noexcept {
    if (!impl_) {
        return 0;
    }
    std::lock_guard lock(detail::impl_of(*this)->mu);
    return detail::impl_of(*this)->free.size();
}
std::size_t buffer_pool::capacity() const noexcept {
    return impl_ ? detail::impl_of(*this)->count : 0;
}
std::size_t buffer_pool::buffer_size() const noexcept {
    return impl_ ? detail::impl_of(*this)->buffer_size : 0;
}

}  // namespace remora

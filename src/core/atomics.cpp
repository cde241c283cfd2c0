// SPDX-License-Identifier: BSD-3-Clause
// connection's atomics: the provider's own (caps().native_atomics), through the door.
#include <remora/connection.hpp>

#include <string>

#include "core/impl.hpp"

namespace remora {
namespace detail {

result<void> check_atomic(const connection_impl& c, const char* what, const remote_region& dst,
                          std::uint64_t dst_offset, const memory_region* result,
                          std::size_t result_offset) {
    if (auto r = check_open(c, what); !r) {
        return r;
    }
    if (auto r = dst.check(dst_offset, 8, usage::atomic_target); !r) {
        return fail(r.error().code(), std::string(what) + ": " + r.error().message());
    }
    // A native atomic reaches the word itself (on a same-host connection at its same-host
    // address); the service's atomics name it as the target registered it.
    const bool native = native_atomics(c);
    if (native) {
        if (auto r = check_same_host(c, dst, what); !r) {
            return r;
        }
    }
    if ((native ? remote_start(c, dst, dst_offset) : dst.address() + dst_offset) % 8 != 0) {
        return fail(errc::invalid_argument,
                    std::string(what) + ": target word is not 8-byte aligned");
    }
    if (result != nullptr) {
        const region_impl& r = *detail::impl_of(*result);
        if (r.dom.get() != c.region_dom) {
            return fail(errc::invalid_argument,
                        std::string(what) + ": result region registered in another domain");
        }
        if (result_offset > r.memory.size() || r.memory.size() - result_offset < 8) {
            return fail(errc::out_of_range, std::string(what) + ": result [" +
                                                std::to_string(result_offset) +
                                                ", +8) outside its region");
        }
        if (!has_all(r.uses, usage::read_destination)) {
            return fail(errc::access_denied,
                        std::string(what) + ": result region lacks usage::read_destination");
        }
    }
    return {};
}

namespace {

enum class native_kind { write, compare_swap, fetch_add };

result<void> native_atomic(connection_impl& c, native_kind kind, const char* what,
                           const remote_region& dst, std::uint64_t dst_offset, std::uint64_t arg0,
                           std::uint64_t arg1, const memory_region* result,
                           std::size_t result_offset, const op_options& opts) {
    if (auto r = check_atomic(c, what, dst, dst_offset, result, result_offset); !r) {
        return r;
    }
    if (!native_atomics(c)) {
        return fail(errc::not_supported, std::string(what) + ": provider " + user_caps(c).provider +
                                             " has no native atomics");
    }
    auto rec = reserve_entries(c, opts, op::atomic, false, what);
    if (!rec) {
        return fail(rec.error());
    }
    op_record* r = *rec;
    // The operands live in the record: the provider may read them until completion.
    r->operands[0] = kind == native_kind::compare_swap ? arg1 : arg0;  // swap value / operand
    r->operands[1] = arg0;                                             // compare value
    fabric_post p{.kind = kind == native_kind::write       ? post_kind::atomic_write
                          : kind == native_kind::fetch_add ? post_kind::fetch_add
                                                           : post_kind::compare_swap,
                  .remote = {remote_start(c, dst, dst_offset), 1, dst.key()},
                  .operands = r->operands,
                  .context = r};
    if (kind == native_kind::write) {
        p.flags = atomic_write_flags(c);
    } else {
        const region_impl& res = *detail::impl_of(*result);
        p.result = res.memory.data() + result_offset;
        p.result_desc = res.desc;
    }
    return door(c, p, what);
}

}  // namespace
}  // namespace detail

result<void> connection::atomic_write(const remote_region& dst, std::uint64_t dst_offset,
                                      std::uint64_t value, op_options opts) {
    return detail::native_atomic(*detail::impl_of(*this), detail::native_kind::write,
                                 "atomic_write", dst, dst_offset, value, 0, nullptr, 0, opts);
}

result<void> connection::compare_swap(const remote_region& dst, std::uint64_t dst_offset,
                                      std::uint64_t expected, std::uint64_t desired,
                                      const memory_region& result, std::size_t result_offset,
                                      op_options opts) {
    return detail::native_atomic(*detail::impl_of(*this), detail::native_kind::compare_swap,
                                 "compare_swap", dst, dst_offset, expected, desired, &result,
                                 result_offset, opts);
}

result<void> connection::fetch_add(const remote_region& dst, std::uint64_t dst_offset,
                                   std::uint64_t addend, const memory_region& result,
                                   std::size_t result_offset, op_options opts) {
    return detail::native_atomic(*detail::impl_of(*this), detail::native_kind::fetch_add,
                                 "fetch_add", dst, dst_offset, addend, 0, &result, result_offset,
                                 opts);
}

}  // namespace remora

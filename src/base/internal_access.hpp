// SPDX-License-Identifier: BSD-3-Clause
// src/base/internal_access.hpp — the library's one way to the state behind a public handle.
//
// A public handle (connection, domain, completion_queue, ...) names its state only as a private,
// opaque nested `struct impl;` held in `impl_`, and declares `friend struct internal_access;`: no
// public header names a remora::detail type, and users have no accessor. The state is a
// remora::detail type deriving from that (empty) nested type, defined next to it in src/ with
// REMORA_HANDLE_STATE, which tells internal_access which detail type it is. Conversions are
// inline static_casts between a class and an empty base of it: no indirection (with the empty
// base at offset 0, as the Itanium ABI places it, no instruction either). A handle held by
// unique_ptr has an impl_deleter that deletes the state (destroy).
//
//   detail::impl_of(conn)      the state (detail::connection_impl*), null for an empty handle
//   detail::shared_impl_of(d)  for a handle held by shared_ptr: a shared_ptr to its state
//   internal_access::wrap<H>(state_ptr)   a handle over a state (unique_ptr, shared_ptr or raw,
//                                        as the handle holds it)
#pragma once

#include <memory>
#include <utility>

namespace remora {

namespace detail {
// handle_state<H>::type: the remora::detail type behind handle H (see REMORA_HANDLE_STATE).
template <class H>
struct handle_state;
}  // namespace detail

struct internal_access {
    // H's opaque nested type (a member class, not an alias template: clang checks an alias
    // template's access at the point of use).
    template <class H>
    struct opaque_of {
        using type = typename H::impl;
    };
    template <class H>
    using opaque = typename opaque_of<H>::type;
    template <class H>
    using state = typename detail::handle_state<H>::type;

    template <class H>
    static state<H>* get(const H& h) noexcept {
        return static_cast<state<H>*>(std::to_address(h.impl_));
    }
    template <class H>
    static std::shared_ptr<state<H>> share(const H& h) noexcept {
        return std::static_pointer_cast<state<H>>(h.impl_);
    }
    // The state behind a pointer to H's opaque type (what a handle's member holds).
    template <class H>
    static state<H>* cast(opaque<H>* p) noexcept {
        return static_cast<state<H>*>(p);
    }
    template <class H>
    static H wrap(std::unique_ptr<state<H>> p) noexcept {
        return H(decltype(H::impl_)(p.release()));
    }
    template <class H>
    static H wrap(std::shared_ptr<state<H>> p) noexcept {
        return H(decltype(H::impl_)(std::move(p)));
    }
    template <class H>
    static H wrap(state<H>* p) noexcept {
        return H(static_cast<opaque<H>*>(p));
    }
    // For a handle's impl_deleter (handles held by unique_ptr).
    template <class H>
    static void destroy(opaque<H>* p) noexcept {
        delete static_cast<state<H>*>(p);
    }
};

namespace detail {
template <class H>
auto* impl_of(const H& h) noexcept {
    return internal_access::get(h);
}
template <class H>
auto shared_impl_of(const H& h) noexcept {
    return internal_access::share(h);
}
}  // namespace detail

}  // namespace remora

// Inside namespace remora::detail, before STATE is used through a handle (STATE may be incomplete
// there): STATE is the state behind public handle HANDLE. STATE derives from
// internal_access::opaque<HANDLE>, which its header defines empty first
// (`struct remora::HANDLE::impl {};`).
#define REMORA_HANDLE_STATE(HANDLE, STATE) \
    template <>                            \
    struct handle_state<HANDLE> {          \
        using type = STATE;                \
    }

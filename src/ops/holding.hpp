// SPDX-License-Identifier: BSD-3-Clause
// src/ops/holding.hpp — what an operation holds beside its queue entries, type-erased.
//
// An operation may hold something from post to completion beside its record: units of a shared
// budget (connection_config::slots: a held_units, taken by reservation, ops/reservation.cpp), a
// bounce buffer (write_copy, send_copy: a pooled_buffer, lent by the slots layer). The record
// keeps each in an op_holding, which the operations and endpoint layers move and destroy
// (destroying gives it back) without naming its type: the value lives inline (no allocation on
// the data path), and only the code that creates one names the type.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace remora::detail {

class op_holding {
  public:
    static constexpr std::size_t capacity = 6 * sizeof(void*);

    op_holding() = default;
    template <class T>
    requires(!std::is_same_v<std::decay_t<T>, op_holding>) explicit op_holding(T&& value) noexcept(
        std::is_nothrow_move_constructible_v<std::decay_t<T>>) {
        using V = std::decay_t<T>;
        static_assert(sizeof(V) <= capacity && alignof(V) <= alignof(std::max_align_t),
                      "op_holding: the held value does not fit inline");
        static_assert(std::is_nothrow_move_constructible_v<V>);
        ::new (static_cast<void*>(buf_)) V(std::forward<T>(value));
        ops_ = &ops_for<V>;
    }
    op_holding(op_holding&& o) noexcept { take(o); }
    op_holding& operator=(op_holding&& o) noexcept {
        if (this != &o) {
            reset();
            take(o);
        }
        return *this;
    }
    op_holding(const op_holding&) = delete;
    op_holding& operator=(const op_holding&) = delete;
    ~op_holding() { reset(); }

    // Destroys the held value (which gives it back); empty afterwards.
    void reset() noexcept {
        if (ops_ != nullptr) {
            std::exchange(ops_, nullptr)->destroy(buf_);
        }
    }
    explicit operator bool() const noexcept { return ops_ != nullptr; }

  private:
    struct operations {
        void (*relocate)(void* to, void* from) noexcept;  // move-construct, destroy the source
        void (*destroy)(void* p) noexcept;
    };
    template <class V>
    static constexpr operations ops_for{[](void* to, void* from) noexcept {
                                            ::new (to) V(std::move(*static_cast<V*>(from)));
                                            static_cast<V*>(from)->~V();
                                        },
                                        [](void* p) noexcept { static_cast<V*>(p)->~V(); }};

    void take(op_holding& o) noexcept {
        if (o.ops_ != nullptr) {
            o.ops_->relocate(buf_, o.buf_);
            ops_ = std::exchange(o.ops_, nullptr);
        }
    }

    alignas(std::max_align_t) std::byte buf_[capacity];
    const operations* ops_ = nullptr;
};

// What an operation holds beside its record: units of connection_config::slots and a bounce
// buffer (write_copy, send_copy). Moved out of the record and released outside its lock.
struct op_holdings {
    op_holding units;
    op_holding bounce;

    // Holds anything (most operations hold nothing: moving them out is then skipped).
    explicit operator bool() const noexcept { return units || bounce; }
};

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// src/fabric/cq.hpp — completion queues: open (FI_CQ_FORMAT_DATA, an fd to wait on), read,
// read an error entry, signal, and fi_trywait (on a CQ or an EQ).
//
// Reads are inline (the data path): when nothing is armed at the seam (fault.hpp) they cost one
// relaxed atomic load beyond libfabric's own call. Every function returns libfabric's value (a
// count, 0, or a negative -FI_* code) or the code armed for it.
// Threading: as libfabric's calls on the same CQ (remora keeps one reader at a time).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "fabric/fabric.hpp"

namespace remora::detail {

// A completion as the provider reports it (libfabric's fi_cq_data_entry: op_context, flags, len,
// buf, data), and an error entry (fi_cq_err_entry: the same and err, the positive code).
using cq_entry = fi_cq_data_entry;
using cq_error_entry = fi_cq_err_entry;

// What a completion entry's `flags` say, in remora's words. They are libfabric's bits (cq.cpp
// checks), so reading an entry translates nothing: `(e.flags & cq_flag_recv) != 0`.
using cq_flags = std::uint64_t;
inline constexpr cq_flags cq_flag_send = FI_SEND;                   // a send of this side
inline constexpr cq_flags cq_flag_recv = FI_RECV;                   // a receive of this side
inline constexpr cq_flags cq_flag_read = FI_READ;                   // a read of this side
inline constexpr cq_flags cq_flag_write = FI_WRITE;                 // a write of this side
inline constexpr cq_flags cq_flag_atomic = FI_ATOMIC;               // an atomic of this side
inline constexpr cq_flags cq_flag_remote_write = FI_REMOTE_WRITE;   // a peer's write, here
inline constexpr cq_flags cq_flag_remote_data = FI_REMOTE_CQ_DATA;  // `data` holds immediate data

// Opens a CQ of `size` entries that reports fi_cq_data_entry and, with `wait_fd`, can be waited
// on through an fd (FI_WAIT_FD); without, it has no wait object (FI_WAIT_NONE: shm has no other)
// and is polled.
int cq_open(fid_domain* domain, std::size_t size, cq_handle& out, bool wait_fd = true);
// The fd to wait on for a CQ or an EQ (fi_control FI_GETWAIT); libfabric owns it.
int wait_fd(fid* f, int* fd);
// fi_trywait on one CQ or EQ: 0 when it is safe to block on its fd, -FI_EAGAIN when entries (or
// progress) are pending.
int trywait(fid_fabric* fabric, fid* f);
int cq_signal(fid_cq* cq);
// Blocks in the provider's own wait (fi_cq_sread asking for no entry) until `cq` holds an entry,
// fi_cq_signal is called, or `timeout_ms` passes; reads none. 0 when an entry waits, else
// -FI_EAGAIN (tcp in 1.17 says it for a signal as for the timeout: only the elapsed time tells
// them apart) or another -FI_* code. Only for CQs whose sread waits when asked for none (the util
// CQ of tcp and net; sockets' spins): domain_impl::cq_sread_waits.
int cq_wait_entry(fid_cq* cq, int timeout_ms);

namespace fabric_fault {
ssize_t cq_read_slow(fid_cq* cq, fi_cq_data_entry* buf, std::size_t count,
                     fabric_addr* src = nullptr);
ssize_t cq_readerr_slow(fid_cq* cq, fi_cq_err_entry* entry);
}  // namespace fabric_fault

// Up to `count` completions, or -FI_EAGAIN (none), -FI_EAVAIL (an error entry is next), or
// another -FI_* code. A zero count only drives the provider's progress.
inline ssize_t cq_read(fid_cq* cq, fi_cq_data_entry* buf, std::size_t count) {
    if (fabric_fault::armed()) [[unlikely]] {
        return fabric_fault::cq_read_slow(cq, buf, count);
    }
    return fi_cq_read(cq, buf, count);
}

// cq_read, with each completion's source address in src[i] (fi_cq_readfrom; FI_SOURCE): the
// address vector's entry of the sender of a received message, FI_ADDR_NOTAVAIL when the sender is
// in no entry (net, sockets; shm reports 0 for such a sender, so an RDM endpoint keeps entry 0
// for itself).
inline ssize_t cq_readfrom(fid_cq* cq, fi_cq_data_entry* buf, std::size_t count, fabric_addr* src) {
    if (fabric_fault::armed()) [[unlikely]] {
        return fabric_fault::cq_read_slow(cq, buf, count, src);
    }
    return fi_cq_readfrom(cq, buf, count, src);
}

// Calls into the provider for progress (a zero-length read).
inline void cq_drive(fid_cq* cq) {
    (void)cq_read(cq, nullptr, 0);
}

// The next error entry: 1, -FI_EAGAIN (none), or another -FI_* code. An entry always carries an
// error: one the provider reported without a code (err == 0) comes back as FI_EOTHER
// (errc::provider_error), never as a success.
inline ssize_t cq_readerr(fid_cq* cq, fi_cq_err_entry* entry) {
    const ssize_t r = fabric_fault::armed() ? fabric_fault::cq_readerr_slow(cq, entry)
                                            : fi_cq_readerr(cq, entry, 0);
    if (r == 1 && entry->err == 0) [[unlikely]] {
        entry->err = FI_EOTHER;
    }
    return r;
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// tools/remora/bench_client.hpp — one client connection's workload, and the loops that drive
// the client connections (a thread each, one shared CQ, or one reader of every CQ).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "bench_internal.hpp"

namespace remora::tool {

// One client connection's workload: keeps s.qd operations in flight and counts those whose
// completion is known. Driven by run_client (the connection's own CQs, a thread per connection)
// or run_shared (one thread reading the shared CQ of every connection).
//
// Selective signalling (--signal-every N > 1) on writes ("quiet" mode): every write is posted
// with completion_mode::on_error and no context, so the library leaves up to N - 1 in a row
// unsignalled (all are signalled above caps().inject_size), and poll() reports no success at
// all: the library reads the signalled ones itself. A write counts as done when its entry is
// reclaimed: connection::in_flight() drops when the library reads a signalled completion, which
// frees that write and every unsignalled one posted before it, so the writes known complete are
// those posted minus in_flight(). The client keeps qd writes posted and not yet reclaimed (qd
// is raised to N when smaller: with fewer, no write would ever be signalled). Which write is
// signalled is the library's choice, so no per-operation latency is measured (the table prints
// "-"). After the end, it reads completions until fewer than N remain in flight: those trailing
// unsignalled writes wait for a signal that never comes and are not counted. Sends under
// --signal-every are counted as before, by the target's reply: their latency stays meaningful.
class client {
  public:
    using clock = std::chrono::steady_clock;

    client(connection& c, const remote_region& remote, const setup& s, clock::time_point end,
           client_result& out, void (*callback)(const completion&), std::uint64_t budget);

    // Registers the buffers; false (with out.failure set) when that fails.
    bool init();
    // The first qd operations (and the receives for their replies).
    bool start();
    // A completion of this connection, read at `now`.
    bool handle(const completion& d, clock::time_point now);
    // After each read of the CQ: posts refused before are tried again. Quiet mode: count what
    // was reclaimed and post up to qd again.
    bool settle(clock::time_point now);

    [[nodiscard]] bool finished() const { return quiet_ ? quiet_done_ : in_flight_ == 0; }
    // settle() has work after a read that found nothing: quiet mode counts reclaimed writes,
    // and refused posts wait to be tried again.
    [[nodiscard]] bool settles_idle() const { return quiet_ || !deferred_.empty(); }
    [[nodiscard]] bool on_rcq() const { return on_rcq_; }
    std::vector<clock::time_point>& started() { return started_; }

    // Posts the operation of slot k with these options.
    result<void> post_with(unsigned k, const op_options& done);

    // --more: the next post is followed at once by another (the loop sets it for every
    // completion of a read but the last, whose repost ends the burst).
    void set_more(bool more) { more_ = more; }

  private:
    bool failed(const error& e) {
        out_.fail(e);
        return false;
    }
    static void* context(unsigned k) {
        return reinterpret_cast<void*>(static_cast<std::uintptr_t>(k));
    }
    result<void> post(unsigned k) {
        return post_with(k, {.context = context(k), .callback = callback_, .more = more_});
    }
    // Posts slot k's operation; when the provider cannot take it yet (would_block: an RDM
    // provider still setting up its path to the peer), settle() posts it again after a reap.
    bool post_or_defer(unsigned k);
    // Quiet mode: posts writes until qd are posted and not yet reclaimed (or, under --count,
    // the budget is posted: the last write is signalled, so every one before it is reclaimed).
    bool refill();
    // Registration of the local buffer per operation: none (registered once, in init), a fresh
    // registration each time (held until the operation completes), or the registration cache.
    result<std::pair<const memory_region*, std::size_t>> local(unsigned k);

    connection& c_;
    const remote_region& remote_;
    const setup& s_;
    const clock::time_point end_;
    const std::uint64_t budget_;  // operations to post (--count; otherwise no limit)
    client_result& out_;
    void (*const callback_)(const completion&);
    const std::size_t slot_, data_base_;
    const op_kind kind_;
    const registration_mode registration_;
    const bool two_sided_, quiet_;
    bool on_rcq_ = false;
    std::vector<std::byte> buf_;
    std::optional<memory_region> mr_;
    std::optional<registration_cache> cache_;
    std::vector<clock::time_point> started_;
    std::vector<std::optional<memory_region>> fresh_;
    std::vector<cached_region> cached_;
    std::vector<unsigned> deferred_;  // slots whose post would have blocked, posted in settle()
    unsigned in_flight_ = 0;          // operations posted and not yet completed (not quiet mode)
    std::uint64_t posts_ = 0;         // operations posted (not quiet mode)
    std::uint64_t posted_ = 0;        // quiet mode: writes posted
    bool quiet_done_ = false;         // quiet mode: past the end, no signalled write left in flight
    bool more_ = false;               // --more: op_options::more on the next post
};

// The loops (bench_loops.cpp), each until `end` (or each connection's --count budget).
// A connection with CQs of its own, on its own thread.
void run_client(connection& c, const remote_region& remote, const setup& s,
                std::chrono::steady_clock::time_point end, client_result& out,
                std::uint64_t budget);
// --shared-cq: every client connection completes on one shared CQ, read by this one thread,
// which hands each completion to its connection by completion::tag (the connection's index).
void run_shared(std::vector<connection>& conns, const std::vector<remote_region>& remotes,
                const shared_completion_queue& scq, const setup& s,
                std::chrono::steady_clock::time_point end, std::vector<client_result>& results);
// --suite fanin's third arrangement: every connection keeps a CQ of its own (poll, busy), and
// this one thread reads them all in turn, handing each completion to its connection.
void run_one_reader(std::vector<connection>& conns, const std::vector<remote_region>& remotes,
                    const setup& s, std::chrono::steady_clock::time_point end,
                    std::vector<client_result>& results);

}  // namespace remora::tool

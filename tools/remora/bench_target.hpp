// SPDX-License-Identifier: BSD-3-Clause
// tools/remora/bench_target.hpp — the bench's loopback target, in the same process as its
// clients.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bench_internal.hpp"

namespace remora::tool {

// What an RDM target hands its client: its peer address and its region's descriptor.
struct peer_offer {
    std::vector<std::byte> address, descriptor;
};

// The loopback target: accepts the connections (MSG) or opens a peer for each client (RDM),
// exposes one region, answers send/gpspm. An RDM target's thread busy-polls its CQ whatever
// the operation: shm and rxm move one-sided traffic only when the target calls into the
// provider, and a busy poller is the fastest way to do that (the baseline does the same).
class target {
  public:
    result<void> start(const setup& s);
    std::uint16_t port() const { return lst_->port(); }

    // --op gather: the descriptors of the part regions, handed over in memory (the connection's
    // private data carries one descriptor), as the user's own exchange would carry them.
    result<std::vector<remote_region>> segments() const;

    // Accepts one connection (the client connects concurrently) and serves it on a thread.
    result<void> accept_and_serve(const setup& s, unsigned index);

    // RDM: opens a peer for the client at `client_address`, serves it on a thread, and returns
    // what the client needs to reach it.
    result<peer_offer> open_peer_for(const setup& s, unsigned index,
                                     std::span<const std::byte> client_address);

    void stop();
    ~target() { stop(); }

    // What the serving threads saw, for a client's failure: the messages they received and
    // their first failure (a receive or reply the provider refused, a failed completion).
    std::string status() const;

  private:
    result<remote_region> descriptor() const {
        return service_ ? result<remote_region>(desc_) : mr_->describe();
    }
    // Serves a new connection: through the service (persistence ops), and on a thread that
    // answers sends (send, gpspm) or, over RDM, busy-polls to drive progress.
    result<void> adopt(connection c, const setup& s, unsigned index);
    void serve(connection& c, const setup& s, unsigned index);
    void record(const error& e);  // the first failure is kept; every serving thread ends

    std::optional<domain> dom_;
    std::optional<listener> lst_;
    std::vector<std::byte> mem_, msg_;
    std::optional<memory_region> mr_, msg_mr_;
    std::vector<std::vector<std::byte>> segment_mem_;  // --op gather: a buffer per part
    std::vector<memory_region> segment_mr_;
    std::optional<persistent_region> region_;
    std::optional<target_service> service_;
    remote_region desc_;
    std::vector<std::unique_ptr<connection>> conns_;
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> failed_{false};
    std::atomic<std::uint64_t> received_{0};
    mutable std::mutex failure_mu_;
    std::optional<error> failure_;
};

}  // namespace remora::tool

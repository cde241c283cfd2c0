// SPDX-License-Identifier: BSD-3-Clause
// src/persist/service.hpp — the target service's messages on one connection, both sides.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include <remora/completion_queue.hpp>
#include <remora/connection.hpp>
#include <remora/memory_region.hpp>
#include <remora/persistence.hpp>
#include <remora/target_service.hpp>

#include "core/upper.hpp"  // connection_extension, hook_fn
#include "persist/persist_impl.hpp"

struct remora::target_service::impl {};

namespace remora::detail {

struct service_core;
REMORA_HANDLE_STATE(target_service, service_core);

struct connection_impl;

// The persistence_config `c` was set up with (its entry of connection_config::addons), or the
// default (no service) when it has none (config.cpp).
const persistence_config& persistence_of(const connection_impl& c) noexcept;

// The regions a target service exposes, looked up by key.
struct service_core : internal_access::opaque<target_service> {
    struct exposed {
        std::uint64_t key = 0;
        std::uint64_t base = 0;  // the descriptor address of offset 0
        std::span<std::byte> memory;
        usage uses = usage::none;
        const persistent_impl* persist = nullptr;  // null: plain memory
    };
    mutable std::shared_mutex mu;
    std::vector<exposed> regions;
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> refused{0};

    // Executes a request; the reply's status and value. With `granted`, only regions whose key
    // is in it may be named (others: access_denied, as an unknown key).
    service_reply execute(const service_request& rq,
                          const std::vector<std::uint64_t>* granted = nullptr) const;
};

struct service_conn {
    connection_impl* conn = nullptr;
    bool target = false;
    std::uint32_t depth = 0;
    // Messages each side has room for: depth requests and the client's hello (message_slots).
    std::uint32_t count = 0;
    std::vector<std::byte> storage;  // count requests (request_room each), then count replies
    std::optional<memory_region> mr;
    struct ref {
        service_conn* owner;
        std::uint32_t index;
    };
    std::vector<ref> recv_refs, send_refs;
    std::shared_ptr<service_core> core;  // target side
    // Target side: the keys this connection was granted (target_service::serve with grants);
    // nullopt: every exposed region.
    std::optional<std::vector<std::uint64_t>> granted;
    std::atomic<std::uint64_t> answered{0};  // target side: requests answered on this connection
    // Target side: per slot, when its reply was posted (steady_clock ticks; 0: none waiting),
    // cleared when the reply's send completes. A peer that stops taking replies shows here
    // (target_service::reply_wait). Sized with the slots, read by any thread.
    std::unique_ptr<std::atomic<std::int64_t>[]> reply_since;

    // Client side: one slot per request in flight, and the hello's (index depth, never free).
    struct slot {
        bool busy = false;
        bool posted = false;  // its request's send was accepted by the provider
        bool delivered = false;
        int pending = 0;       // the send's completion and the reply (or failure) still to come
        std::uint64_t id = 0;  // the id its request carries, unpredictable (make_request_id)
        void* user_context = nullptr;
        void (*callback)(const completion&) = nullptr;
        bool report_success = true;
        service_op kind = service_op::flush;
        std::byte* result = nullptr;  // compare_swap / fetch_add: where the old value goes
        std::uint64_t sequence = 0;   // order of the requests (a failed reply's is the oldest)
        // A multi-part operation's part (connection::publish): its completion goes to
        // hook(hook_context, c), which says whether the CQ's reader sees it, instead of to
        // callback / the reader. Set only by hook_request.
        hook_fn hook = nullptr;
        void* hook_context = nullptr;
        bool reserved = false;  // taken by reserve_request, not yet used by client_request
        // connection_config::service_timeout: past this, the request ends errc::timed_out
        // (persist_conn::tick): its send is canceled if still pending, else a reply receive is,
        // and that receive's completion carries the timeout (client_reply).
        std::chrono::steady_clock::time_point deadline{};
        bool expired = false;
        // Sent before the target was heard from, and ended by the hello's serve_wait: it
        // completes errc::bad_state instead of timed_out.
        bool unserved = false;
    };
    std::mutex mu;
    std::vector<slot> slots;
    std::vector<std::uint32_t> free_slots;
    std::size_t busy = 0;
    std::uint64_t bad_replies = 0;
    std::uint64_t next_sequence = 0;
    // Request ids: the slot's index in the low index_bits, above it a keyed hash (SipHash) of
    // the request's sequence number under a random key of this connection's. A sender that did
    // not see the request cannot name it: a forged reply matches nothing and is dropped.
    std::array<unsigned char, 16> id_key{};
    unsigned index_bits = 0;
    // The connection failed (a reply receive was flushed, or could not be posted again): new
    // requests are refused, and a request whose send completes from now on fails.
    bool dead = false;
    // Reply receives canceled by tick() to end expired requests, until their completion comes.
    std::vector<bool> recv_canceled;
    std::size_t recv_cancels = 0;
    // Client side: a reply from the target came on this connection (the log's hint for a
    // target that never served it).
    bool replied = false;
    // Client side: whether the target serves this connection, learnt from the hello sent with
    // the first request (persistence_config::serve_wait). unknown: no hello sent yet (or its
    // post was refused: the next request tries again); waiting: sent, no reply yet; yes: a
    // reply came (or the check is off); no: none came within serve_wait, and requests are
    // refused (errc::bad_state) until one does.
    enum class serving : std::uint8_t { unknown, waiting, yes, no };
    serving served = serving::unknown;
    std::chrono::steady_clock::time_point hello_deadline{};

    std::byte* request_buf(std::uint32_t i) { return storage.data() + i * request_room; }
    std::byte* reply_buf(std::uint32_t i) {
        return storage.data() + count * request_room + i * reply_size;
    }
};

struct message_mux;  // messages.cpp

// The persistence layer's state on one connection, attached to it as its extension
// (core/extension.hpp): the service's messages in either role, and the read-after-write flush's
// buffer. Destroyed with the connection, after its endpoint is closed.
struct persist_conn final : connection_extension {
    mutable std::mutex svc_mu;
    std::unique_ptr<service_conn> svc;  // client or target side of the service, once used
    // The read-after-write flush's 8-byte destination, registered by the first flush (a failed
    // registration is reported and tried again by the next flush). Set once, under scratch_mu;
    // scratch_ready says it is.
    std::mutex scratch_mu;
    std::atomic<bool> scratch_ready{false};
    std::optional<memory_region> scratch;
    std::array<std::byte, 8> scratch_bytes{};
    // persistence_config::message_size: the library's receives that carry the service's
    // messages and the application's (messages.cpp), created on first use.
    mutable std::mutex mux_mu;
    std::unique_ptr<message_mux> mux;

    persist_conn();
    ~persist_conn() override;

    // Client side: service requests in flight (connection::in_flight counts them).
    std::size_t busy() const noexcept override;
    // Client side: ends the requests past their connection_config::service_timeout.
    std::chrono::steady_clock::time_point tick(std::chrono::steady_clock::time_point now) override;
};

// The service's receive of [buf, buf + len) (registered with the service's buffers): posted to
// the provider, or with persistence_config::message_size taken from the library's receives
// (messages.cpp). Its completion goes to hook(context, c) either way.
result<void> service_recv(service_conn& s, void* buf, std::size_t len, hook_fn hook, void* context);
// With message_size: ends the service receive of `p` posted with `context` early (its hook sees
// errc::canceled, as a canceled provider receive). False when it is not waiting (any more), or
// the connection has no message_size (cancel the provider's receive instead).
bool cancel_service_recv(persist_conn& p, void* context);
// The application's send and recv on a connection with message_size (message_router).
result<void> mux_send(connection_impl& c, std::span<const local_segment> src, bool with_imm,
                      std::uint64_t imm, const op_options& opts);
result<void> mux_recv(connection_impl& c, std::span<const local_segment> dst,
                      const op_options& opts);
// The application's receives waiting for a message (connection::in_flight counts them).
std::size_t mux_waiting(persist_conn& p) noexcept;

// The connection's persistence state, attached on first use.
persist_conn& persist_of(connection_impl& c);

// The messages either side of a service of depth `depth` has room for: its requests and the
// client's hello. The addon's internal sends (config.cpp) and the receives of both sides.
constexpr std::uint32_t message_slots(std::uint32_t depth) noexcept {
    return depth == 0 ? 0 : depth + 1;
}

// The message a client's bad_state carries when the target never answered its hello.
std::string unserved_message(const connection_impl& c);

// The service state of connection `c` in the target (`target`) or client role: its buffers,
// registered, and its receives' contexts. errc::not_supported without a service depth.
result<std::unique_ptr<service_conn>> make_service_conn(connection_impl& c, bool target);
// The registration descriptor of the service's buffers.
void* desc_of(service_conn& s);
// A receive that failed because the connection is going away (as opposed to one message that
// did not fit, after which the connection still works).
bool teardown_status(const completion& c);

// Creates the connection's service state in the client role on first use (posts its reply
// receives). errc::not_supported without a service depth, bad_state if it serves.
result<service_conn*> client_side(connection_impl& c);
// Sends one request; its completion (op::flush or op::atomic) reaches the application when the
// reply arrives. `result` receives the old value for compare_swap and fetch_add.
result<void> client_request(connection_impl& c, service_request rq, std::byte* result,
                            const op_options& opts);

// A multi-part operation's service parts (connection::publish): reserve_request takes a request
// slot now (errc::would_block when service_depth requests are in flight, disconnected once the
// service's connection is lost, not_supported without a service depth), so the part can be sent
// later without a refusal; hook_request sends a reserved slot's request, whose completion goes to
// hook(context, c) (it says whether the CQ's reader sees c); release_request gives back a slot
// that will not be sent. A reserved slot counts in in_flight() until it is given back or its
// request completes.
result<std::uint32_t> reserve_request(connection_impl& c);
result<void> hook_request(connection_impl& c, std::uint32_t slot, service_request rq, hook_fn hook,
                          void* context);
// `notify`: false to undo a reservation of a failed reservation (see op_pool::give's `wake`).
void release_request(connection_impl& c, std::uint32_t slot, bool notify = true) noexcept;

// connection::publish operations whose state is allocated now, on every connection: 0 once each
// has completed or its connection is gone (tests count leaks with it).
std::size_t publish_ops_alive() noexcept;

// The read-after-write flush's 8-byte destination (registered on first use).
result<const memory_region*> flush_scratch(connection_impl& c);

}  // namespace remora::detail

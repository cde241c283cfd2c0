// SPDX-License-Identifier: BSD-3-Clause
// src/core/liveness.cpp — RDM peer liveness: the word peers read, and the probe (liveness.hpp).
#include "core/liveness.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <remora/memory_region.hpp>
#include <remora/remote_region.hpp>

#include "core/impl.hpp"
#include "core/little_endian.hpp"

namespace remora::detail {
namespace {

using clock = std::chrono::steady_clock;

// The trailer ends in "rLv" and a byte that says how the word may be probed: '1' read, '2' read
// or atomics (the peer's domain runs the provider's atomics).
constexpr std::byte liveness_magic[3] = {std::byte{'r'}, std::byte{'L'}, std::byte{'v'}};
constexpr std::byte word_read{'1'};
constexpr std::byte word_atomic{'2'};
constexpr std::uint64_t liveness_word_value =
    0x72656d6f72616c76;  // what a probe reads (never checked)

enum class probe_state : int { idle, out, answered, failed };

// The connection's liveness: the word it offers (registered at open_peer), the peer's word
// (from attach) and the probe in flight. Outlives the endpoint (an extension), so the probe's
// record, completed by close(), finds it.
struct liveness_state final : connection_extension {
    connection_impl* conn = nullptr;
    // [0] the word peers probe, [1] where this side's probe lands.
    alignas(8) std::uint64_t words[2] = {liveness_word_value, 0};
    std::optional<memory_region> mr;
    std::uint64_t peer_key = 0;
    std::uint64_t peer_addr = 0;
    bool peer_word = false;  // attach found the peer's word in its address
    // Probe with a fetch-and-add of 0 instead of a read (take_liveness_word says where).
    bool atomic = false;
    std::mutex mu;  // one tick at a time (readers of the CQ and RCQ may tick at once)
    std::atomic<probe_state> state{probe_state::idle};
    std::error_code failure;  // written by the hook before state = failed
    clock::time_point sent{};
    clock::time_point next{};
    clock::time_point last_answer{};   // the last answer seen (or the start)
    clock::time_point close_at{};      // lost: when the endpoint closes
    std::atomic<bool> started{false};  // attach: the peer's word is known (fields above set)
    bool answered_once = false;
    // Until the peer first answers, the provider may still be setting up its path to it (which
    // needs the peer's progress too): as patient as a connection's setup.
    std::chrono::milliseconds limit() const {
        return answered_once ? conn->config.liveness
                             : std::max(conn->config.liveness, conn->config.connect_timeout);
    }
    clock::duration interval() const {
        return std::max<clock::duration>(std::chrono::milliseconds(1), conn->config.liveness / 4);
    }
    clock::time_point tick(clock::time_point now) override {
        if (conn == nullptr) {
            return clock::time_point::max();
        }
        const auto next = check(now, true);
        conn->live_due.store(next.time_since_epoch().count());
        return next;
    }
    // `may_close`: a loss closes the endpoint once due (not on the progress thread).
    clock::time_point check(clock::time_point now, bool may_close);
    // Posts the probe (an 8-byte read of the peer's word) with an entry of `q`. would_block:
    // try next interval.
    result<void> post_probe(queue q = queue::service);
    void lose(clock::time_point now, std::string why);
};

bool liveness_probe_done(void* context, completion& c, callback_sink* /*sink*/) {
    auto& s = *static_cast<liveness_state*>(context);
    if (c.ok()) {
        s.state.store(probe_state::answered, std::memory_order_release);
    } else {
        s.failure = c.status;
        s.state.store(probe_state::failed, std::memory_order_release);
        s.conn->expect_deadline(clock::now());  // the next look acts on it
    }
    return false;  // never the application's
}

liveness_state& liveness_of(connection_impl& c) {
    static constexpr char key = 0;  // its address names the extension
    auto& s = static_cast<liveness_state&>(c.extension(
        &key, [] { return std::unique_ptr<connection_extension>(new liveness_state); }));
    return s;
}

result<void> liveness_state::post_probe(queue q) {
    connection_impl& c = *conn;
    op_record* r = c.ops.take(q);
    if (r == nullptr) {
        return fail(errc::would_block, "liveness probe: its send-queue entry is taken");
    }
    arm_internal(*r, &liveness_probe_done, this, atomic ? op::atomic : op::read);
    iovec iov{&words[1], sizeof(std::uint64_t)};
    void* desc = detail::impl_of(*mr)->desc;
    fabric_post p{.kind = post_kind::read,
                  .iov = &iov,
                  .desc = &desc,
                  .count = 1,
                  .remote = {peer_addr, sizeof(std::uint64_t), peer_key},
                  .context = r};
    if (atomic) {
        r->operands[0] = 0;  // adds nothing: the word's value is what comes back
        p = fabric_post{.kind = post_kind::fetch_add,
                        .remote = {peer_addr, 1, peer_key},
                        .operands = r->operands,
                        .result = &words[1],
                        .result_desc = desc,
                        .context = r};
    }
    // Once: a provider still setting up its path to the peer is asked again on the next
    // interval, and the application's read of its CQ is not held up.
    return door_once(c, p, "liveness probe");
}

void liveness_state::lose(clock::time_point now, std::string why) {
    connection_impl& c = *conn;
    {
        std::lock_guard lock(c.event_mu);
        if (c.lost.load() || c.closed.load()) {
            return;
        }
        c.lost_reason = std::move(why);
        c.rdm_end.store(conn_event::lost);
        c.lost.store(true);
    }
    c.open = false;  // later posts fail (check_open: errc::disconnected, with the reason)
    parked_gate(c).wake_owner(&c, errc::disconnected);
    c.signal_end();
    // A post that passed its checks before the loss gets this long to leave the provider before
    // the endpoint closes under it (posts take no lock to stay cheap).
    close_at = now + std::max<clock::duration>(interval(), std::chrono::seconds(1));
}

clock::time_point liveness_state::check(clock::time_point now, bool may_close) {
    constexpr auto none = clock::time_point::max();
    if (conn == nullptr || conn->config.liveness.count() <= 0 ||
        !started.load(std::memory_order_acquire)) {
        return none;
    }
    std::unique_lock lock(mu, std::try_to_lock);
    if (!lock.owns_lock()) {
        return now + interval();  // another reader ticks now
    }
    connection_impl& c = *conn;
    if (c.closed.load()) {
        return none;
    }
    if (c.lost.load()) {
        if (!may_close) {
            return none;  // the application's next look, or close(), closes the endpoint
        }
        // A post that passed its checks before the loss is out of the provider by now: the
        // endpoint closes, and every operation still outstanding completes (disconnected).
        // Not from inside a completion callback (its CQ is being read): the next look does it.
        if (now < close_at || in_completion()) {
            return std::max(close_at, now + std::chrono::milliseconds(1));
        }
        c.close_endpoint();
        return none;
    }
    switch (state.load(std::memory_order_acquire)) {
        case probe_state::failed:
            lose(now, "the peer did not answer a liveness probe (" + failure.message() + ")");
            return close_at;
        case probe_state::out:
            if (now - sent >= limit()) {
                lose(now, "the peer did not answer a liveness probe within " +
                              std::to_string(limit().count()) + " ms");
                return close_at;
            }
            return sent + limit();
        case probe_state::answered:
            state.store(probe_state::idle, std::memory_order_relaxed);
            last_answer = now;
            answered_once = true;
            next = now + interval();
            return next;
        case probe_state::idle:
            break;
    }
    if (now < next) {
        return next;
    }
    // Out before it is posted: its answer (the hook, maybe on the progress thread) comes after.
    sent = now;
    state.store(probe_state::out, std::memory_order_release);
    auto r = post_probe();
    if (r) {
        return std::min(sent + limit(), now + interval());
    }
    state.store(probe_state::idle, std::memory_order_relaxed);  // not posted: no answer comes
    if (r.error() == errc::would_block && now - last_answer < limit()) {
        next = now + interval();  // the provider sets up its path to the peer: next interval
        return next;
    }
    if (r.error() == errc::would_block) {
        lose(now, "the peer could not be reached for " + std::to_string(limit().count()) + " ms (" +
                      r.error().message() + ")");
        return close_at;
    }
    lose(now, "a liveness probe could not be posted (" + r.error().message() + ")");
    return close_at;
}

}  // namespace

result<void> offer_liveness_word(connection_impl& c) {
    liveness_state& s = liveness_of(c);
    s.conn = &c;  // open_peer: before any other thread can look at it
    const bool atomics = c.dom->caps.native_atomics;
    auto mr = memory_region::create(
        c.dom_handle, std::as_writable_bytes(std::span<std::uint64_t>(s.words)),
        usage::read_source | usage::read_destination | (atomics ? usage::atomic_target : usage{}));
    std::optional<remote_region> desc;
    std::string why;
    if (mr) {
        if (auto d = mr->describe(0, sizeof(std::uint64_t)); d) {
            desc = *d;
        } else {
            why = d.error().message();
        }
    } else {
        why = mr.error().message();
    }
    if (!desc) {
        if (c.config.liveness.count() > 0) {
            return fail(errc::not_supported,
                        "open_peer: liveness needs a word peers may read, and " +
                            c.dom->caps.provider + " refused it (" + why + ")");
        }
        return {};  // peers cannot watch this endpoint: its address says so (no trailer)
    }
    s.mr.emplace(std::move(*mr));
    std::byte t[liveness_trailer];
    put_le(t, desc->key(), 8);
    put_le(t + 8, desc->address(), 8);
    std::memcpy(t + 16, liveness_magic, sizeof(liveness_magic));
    t[19] = atomics ? word_atomic : word_read;
    c.local_addr.insert(c.local_addr.end(), t, t + liveness_trailer);
    c.local_trailer = liveness_trailer;
    return {};
}

result<std::span<const std::byte>> take_liveness_word(connection_impl& c,
                                                      std::span<const std::byte> addr) {
    liveness_state& s = liveness_of(c);
    const std::byte* t =
        addr.size() > liveness_trailer ? addr.data() + addr.size() - liveness_trailer : nullptr;
    const bool has = t != nullptr &&
                     std::memcmp(t + 16, liveness_magic, sizeof(liveness_magic)) == 0 &&
                     (t[19] == word_read || t[19] == word_atomic);
    if (!has) {
        if (c.config.liveness.count() > 0) {
            return fail(errc::invalid_argument,
                        "attach: the peer's address carries no liveness word (connection_config::"
                        "liveness needs the peer's local_address from a remora RDM endpoint)");
        }
        return addr;
    }
    s.peer_key = get_le(t, 8);
    s.peer_addr = get_le(t + 8, 8);
    s.peer_word = true;
    // shm serves a read from the kernel (cross-memory attach) without the peer, so a stopped
    // process would answer: there the probe is an atomic, which the peer's progress serves. The
    // other providers serve reads through the peer's progress already.
    s.atomic = t[19] == word_atomic && c.dom->caps.native_atomics && c.dom->caps.provider == "shm";
    return addr.first(addr.size() - liveness_trailer);
}

result<void> prove_peer(connection_impl& c, clock::time_point deadline) {
    liveness_state& s = liveness_of(c);
    if (!s.peer_word || c.config.liveness.count() > 0) {
        return fail(errc::bad_state, "prove_peer: the peer's address carries no word");
    }
    s.state.store(probe_state::out, std::memory_order_release);
    // The provider answers again (would_block) until the peer's side progressed once (shm's
    // first contact): post again until it takes the probe.
    result<void> posted = fail(errc::would_block, "not posted");
    while (!(posted = s.post_probe(queue::send)) && posted.error() == errc::would_block) {
        if (clock::now() >= deadline) {
            s.state.store(probe_state::idle, std::memory_order_relaxed);
            return fail(errc::timed_out, "the peer's endpoint did not take a probe in time");
        }
        rdm_nudge(c);
    }
    if (!posted) {
        s.state.store(probe_state::idle, std::memory_order_relaxed);
        return posted;
    }
    completion buf[4];
    for (;;) {
        const probe_state st = s.state.load(std::memory_order_acquire);
        if (st == probe_state::answered) {
            s.state.store(probe_state::idle, std::memory_order_relaxed);
            // Its reap is no news for the application's first wait: forget it (nothing else has
            // been posted on the connection yet).
            (void)c.cq->trywait(nullptr);
            return {};
        }
        if (st == probe_state::failed) {
            return fail(errc::provider_error,
                        "the peer's endpoint refused a probe (" + s.failure.message() + ")");
        }
        if (clock::now() >= deadline) {
            // Still out: it completes canceled when the endpoint closes.
            return fail(errc::timed_out, "the peer's endpoint did not answer a probe in time");
        }
        if (c.cq->progress_owned()) {
            std::this_thread::sleep_for(std::chrono::microseconds(50));  // its thread reads it
        } else if (auto n = c.cq->poll(buf); !n) {
            return fail(n.error());
        }
    }
}

clock::time_point liveness_progress(connection_impl& c, clock::time_point now) {
    const auto due = clock::time_point(clock::duration(c.live_due.load()));
    if (now < due) {
        return due;
    }
    liveness_state& s = liveness_of(c);
    const auto next = s.check(now, false);
    c.live_due.store(next.time_since_epoch().count());
    c.expect_deadline(next);  // the application's looks see it too
    return next;
}

void start_liveness(connection_impl& c) {
    if (c.config.liveness.count() <= 0) {
        return;
    }
    liveness_state& s = liveness_of(c);
    {
        std::lock_guard lock(s.mu);
        s.last_answer = clock::now();
        s.next = s.last_answer + s.interval();
        s.started.store(true, std::memory_order_release);
    }
    c.live_due.store(s.next.time_since_epoch().count());
    c.expect_deadline(s.next);
    if (c.cq && c.cq->progress_owned()) {
        c.cq->progress->kick(c.cq.get());  // it may sleep without a timeout: look from now on
    }
}

}  // namespace remora::detail

// SPDX-License-Identifier: BSD-3-Clause
// Stress and admission: eight tiny-queued connections under 100,000 mixed operations, and posting
// as fast as possible when queue entries are scarce and registrations plentiful. Every operation
// is accounted exactly once, every refused post is errc::would_block, every entry comes back, and
// the bytes that arrive are the bytes that were written or sent.
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace remora::test {
namespace {

using clk = std::chrono::steady_clock;

class stress : public testing::TestWithParam<std::string> {};

// What the test saw of one operation; the operation's context points at its tracker.
struct tracker {
    std::uint32_t polled = 0;  // completions poll() returned for it
    std::uint32_t called = 0;  // runs of its callback
    std::uint32_t failed = 0;  // of those, completions with an error status
    op last = op::unknown;     // the op the last completion reported
};

// The trackers of the running test. Callbacks are plain function pointers: they reach it through
// `current`. Only the thread that reads a CQ touches it while operations run.
struct ledger {
    std::vector<tracker> ops;
    std::size_t recv_begin = 0, recv_end = 0;  // trackers of receives
    std::vector<completion> recv_callbacks;    // receive completions delivered to callbacks
    std::size_t stray = 0;                     // completions whose context is no tracker here
    std::size_t seen = 0;                      // completions recorded
    std::string first_error;

    tracker* find(const void* ctx) {
        const auto p = reinterpret_cast<std::uintptr_t>(ctx);
        const auto lo = reinterpret_cast<std::uintptr_t>(ops.data());
        const auto hi = reinterpret_cast<std::uintptr_t>(ops.data() + ops.size());
        if (p < lo || p >= hi || (p - lo) % sizeof(tracker) != 0)
            return nullptr;
        return &ops[(p - lo) / sizeof(tracker)];
    }
    std::size_t index(const tracker* t) const { return static_cast<std::size_t>(t - ops.data()); }
    tracker* record(const completion& c, bool from_callback) {
        ++seen;
        tracker* t = find(c.context);
        if (t == nullptr) {
            ++stray;
            return nullptr;
        }
        ++(from_callback ? t->called : t->polled);
        t->last = c.op;
        if (!c.ok()) {
            ++t->failed;
            if (first_error.empty()) {
                first_error = std::string(to_string(c.op)) + " #" + std::to_string(index(t)) +
                              ": " + c.status.message();
            }
        }
        return t;
    }
};
ledger* current = nullptr;

struct ledger_scope {
    explicit ledger_scope(ledger& l) { current = &l; }
    ~ledger_scope() { current = nullptr; }
};

void on_complete(const completion& c) {
    tracker* t = current->record(c, true);
    if (t != nullptr) {
        const std::size_t i = current->index(t);
        if (i >= current->recv_begin && i < current->recv_end)
            current->recv_callbacks.push_back(c);
    }
}

// Bytes distinct per operation and position; the first four carry the operation's number.
std::byte pattern(std::uint32_t k, std::size_t j) {
    return static_cast<std::byte>(((k * 2654435761u) >> 11) + j * 31 + (k >> 7));
}
void stamp(std::byte* p, std::uint32_t k, std::size_t len) {
    for (std::size_t j = 0; j < len; ++j)
        p[j] = pattern(k, j);
    if (len >= sizeof k)
        std::memcpy(p, &k, sizeof k);
}
bool stamped(const std::byte* p, std::uint32_t k, std::size_t len) {
    std::vector<std::byte> want(len);
    stamp(want.data(), k, len);
    return std::memcmp(p, want.data(), len) == 0;
}

// Waiting for the provider. A thread that spins (even with sched_yield) starves the provider's
// own progress threads on a small machine: sockets ran about 10 times slower that way on 2 cores.
void idle() {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
}

// Failures found inside the loops, reported once at the end (first one in full).
struct faults {
    std::size_t count = 0;
    std::string first;
    void add(const std::string& what) {
        if (count++ == 0)
            first = what;
    }
};

// ------------------------------------------------------------------------------------------
// 1. Eight connections with send and receive queues of 4 (CQ 8) between two domains carry
// 100,000 mixed writes, reads and sends (the receiver keeps receives posted and reposts them),
// some with completion_mode::on_error, some with callbacks, each with its own context. A post
// refused with would_block is retried after reaping. One thread drives both sides (no progress
// thread: the target's polls make one-sided operations land on tcp).

enum class kind : std::uint8_t { write, read, send };

struct planned {
    kind what = kind::write;
    bool on_error = false;
    bool callback = false;
    std::uint8_t conn = 0;
    std::uint16_t len = 0;
    std::uint32_t read_off = 0;  // reads: offset in the target's read area
};

op op_of(kind k) {
    return k == kind::write ? op::write : k == kind::read ? op::read : op::send;
}

struct lane {
    connection* client = nullptr;
    connection* server = nullptr;
    std::vector<std::uint32_t> ops;  // plan indices, in posting order
    std::size_t next = 0;
    std::size_t sends_planned = 0, sends_posted = 0, recvs_posted = 0, recvs_done = 0;
    std::vector<std::uint32_t> free_slots;  // inbox slots without a posted receive
    std::int64_t last_write = -1;
    std::size_t would_block = 0;
};

struct recv_posting {
    std::uint32_t lane = 0, slot = 0;
};

TEST_P(stress, eight_tiny_connections_mixed_operations_each_accounted_exactly_once) {
    const std::string provider = GetParam();
    constexpr std::size_t lanes = 8, depth = 4, slot = 32, read_area = 1 << 16;
    // Measured on 2 cores (RelWithDebInfo): under 1 s on tcp, 5-30 s on sockets (its progress
    // threads compete with everything else for the CPU).
    const std::size_t total = 100000;

    auto sd = must(domain::open({.provider = provider}), "server domain");
    auto cd = must(domain::open({.provider = provider}), "client domain");
    auto lst = must(listener::create(sd, "127.0.0.1", 0), "listener");
    // Target: a slot per operation for writes, then a read area of known bytes. Client: a source
    // slot per operation (writes and sends), a destination slot per operation (reads), and a
    // slot per connection for the final read-back. Memory and registrations come first: they
    // outlive the connections, which may still touch them when the test ends early.
    buffer target(total * slot + read_area), inbox(lanes * depth * slot);
    buffer local(2 * total * slot + lanes * slot);
    auto tmr = must(
        memory_region::create(sd, target.span(), usage::write_destination | usage::read_source));
    auto imr = must(memory_region::create(sd, inbox.span(), usage::receive));
    auto lmr = must(memory_region::create(
        cd, local.span(), usage::write_source | usage::send | usage::read_destination));
    std::vector<connection> servers, clients;
    for (std::size_t i = 0; i < lanes; ++i) {
        const connection_config cfg{.sq_size = depth, .rq_size = depth, .tag = i};
        auto accepted = std::async(std::launch::async, [&]() -> result<connection> {
            auto req = lst.get_request(10s);
            if (!req)
                return fail(req.error());
            return req->accept(cfg);
        });
        auto c = connection::connect(cd, "127.0.0.1", lst.port(), cfg);
        auto s = accepted.get();
        ASSERT_TRUE(c) << "connect " << i << ": " << c.error().what();
        ASSERT_TRUE(s) << "accept " << i << ": " << s.error().what();
        ASSERT_EQ(c->config().cq_size, 2 * depth);
        ASSERT_EQ(s->config().cq_size, 2 * depth);
        clients.push_back(std::move(*c));
        servers.push_back(std::move(*s));
    }

    std::byte* const area = target.bytes.data() + total * slot;
    for (std::size_t j = 0; j < read_area; ++j)
        area[j] = static_cast<std::byte>(j * 13 + (j >> 8));
    for (std::uint32_t k = 0; k < total; ++k)
        stamp(local.bytes.data() + k * slot, k, slot);
    const auto desc = must(tmr.describe());

    // The plan: connection, kind, completion mode, callback, length: seeded, reproducible.
    std::mt19937 rng(20240611);
    std::vector<planned> plan(total);
    std::vector<lane> L(lanes);
    for (std::size_t i = 0; i < lanes; ++i) {
        L[i].client = &clients[i];
        L[i].server = &servers[i];
        for (std::uint32_t s = 0; s < depth; ++s)
            L[i].free_slots.push_back(s);
    }
    std::size_t sends = 0;
    for (std::uint32_t k = 0; k < total; ++k) {
        planned& p = plan[k];
        p.conn = static_cast<std::uint8_t>(rng() % lanes);
        const auto roll = rng() % 100;
        p.what = roll < 40 ? kind::write : roll < 70 ? kind::read : kind::send;
        p.on_error = rng() % 5 == 0;
        p.callback = rng() % 4 == 0;
        p.len = static_cast<std::uint16_t>(8 + rng() % (slot - 7));
        p.read_off = static_cast<std::uint32_t>(rng() % (read_area - slot));
        L[p.conn].ops.push_back(k);
        if (p.what == kind::send) {
            ++L[p.conn].sends_planned;
            ++sends;
        }
    }

    // Trackers: the operations, then one per receive, then one per final read-back.
    ledger led;
    led.ops.resize(total + sends + lanes);
    led.recv_begin = total;
    led.recv_end = total + sends;
    ledger_scope scope(led);
    std::vector<recv_posting> postings(sends);
    std::size_t next_recv = 0;
    std::vector<std::uint8_t> delivered(total, 0);
    faults bad;
    std::size_t max_client_in_flight = 0, max_server_in_flight = 0, would_block = 0;

    auto handle_recv = [&](const completion& c) {
        tracker* t = led.find(c.context);
        if (t == nullptr || led.index(t) < led.recv_begin || led.index(t) >= led.recv_end) {
            bad.add("a receive completion with a foreign context");
            return;
        }
        const recv_posting where = postings[led.index(t) - led.recv_begin];
        lane& l = L[where.lane];
        ++l.recvs_done;
        l.free_slots.push_back(where.slot);
        std::byte* payload = inbox.bytes.data() + (where.lane * depth + where.slot) * slot;
        if (!c.ok())
            return;  // counted by the ledger
        std::uint32_t k = 0;
        std::memcpy(&k, payload, sizeof k);
        if (c.op != op::recv) {
            bad.add(std::string("receive reported as ") + to_string(c.op));
        } else if (k >= total || plan[k].what != kind::send || plan[k].conn != where.lane) {
            bad.add("receive on connection " + std::to_string(where.lane) +
                    " carries no send of that connection (" + std::to_string(k) + ")");
        } else if (c.bytes != plan[k].len || !stamped(payload, k, plan[k].len)) {
            bad.add("send " + std::to_string(k) + " arrived as " + std::to_string(c.bytes) +
                    " bytes, want " + std::to_string(plan[k].len) + " of its pattern");
        } else {
            ++delivered[k];
        }
        std::memset(payload, 0, slot);  // a stale payload cannot pass for the next one
    };

    completion buf[2 * depth];
    // Reaps both sides of a lane: the client's completions, and the server's receives (whose
    // polls also drive the target side of one-sided operations).
    auto reap = [&](lane& l) -> bool {
        auto n = l.client->cq().poll(buf);
        if (!n) {
            bad.add("client poll: " + n.error().what());
            return false;
        }
        for (std::size_t i = 0; i < *n; ++i)
            led.record(buf[i], false);
        auto m = l.server->cq().poll(buf);
        if (!m) {
            bad.add("server poll: " + m.error().what());
            return false;
        }
        for (std::size_t i = 0; i < *m; ++i) {
            led.record(buf[i], false);
            handle_recv(buf[i]);
        }
        for (const completion& c : led.recv_callbacks)
            handle_recv(c);
        led.recv_callbacks.clear();
        max_client_in_flight = std::max(max_client_in_flight, l.client->in_flight());
        max_server_in_flight = std::max(max_server_in_flight, l.server->in_flight());
        return true;
    };

    auto all_done = [&] {
        for (const lane& l : L) {
            if (l.next != l.ops.size() || l.client->in_flight() != 0 ||
                l.recvs_done != l.sends_planned)
                return false;
        }
        return true;
    };
    auto describe_lanes = [&] {
        std::ostringstream os;
        for (std::size_t i = 0; i < lanes; ++i) {
            const lane& l = L[i];
            os << "\n  lane " << i << ": posted " << l.next << "/" << l.ops.size()
               << ", client in flight " << l.client->in_flight() << ", server in flight "
               << l.server->in_flight() << ", sends " << l.sends_posted << "/" << l.sends_planned
               << ", receives posted " << l.recvs_posted << " done " << l.recvs_done;
        }
        return os.str();
    };

    const auto start = clk::now();
    const auto deadline = start + 100s;
    std::size_t posted = 0;
    auto last_progress = start;
    clk::duration longest_stall{};  // longest time without a post or a completion
    while (!all_done() && clk::now() < deadline && bad.count == 0) {
        const std::size_t before = posted + led.seen;
        for (std::size_t li = 0; li < lanes; ++li) {
            lane& l = L[li];
            // The receiver keeps a receive posted in every free slot, for the sends to come.
            while (l.recvs_posted < l.sends_planned && !l.free_slots.empty()) {
                const std::uint32_t s = l.free_slots.back();
                tracker* t = &led.ops[led.recv_begin + next_recv];
                const op_options o{.context = t,
                                   .callback = next_recv % 4 == 1 ? &on_complete : nullptr};
                auto r = l.server->recv(imr, (li * depth + s) * slot, slot, o);
                if (!r) {
                    bad.add("recv with a free slot: " + r.error().what());
                    break;
                }
                l.free_slots.pop_back();
                postings[next_recv++] = {static_cast<std::uint32_t>(li), s};
                ++l.recvs_posted;
            }
            // The initiator posts until refused; a send waits for a receive posted for it.
            while (l.next < l.ops.size()) {
                const std::uint32_t k = l.ops[l.next];
                const planned& p = plan[k];
                if (p.what == kind::send && l.sends_posted >= l.recvs_posted)
                    break;
                const op_options o{
                    .report = p.on_error ? completion_mode::on_error : completion_mode::always,
                    .context = &led.ops[k],
                    .callback = p.callback ? &on_complete : nullptr};
                result<void> r;
                switch (p.what) {
                    case kind::write:
                        r = l.client->write(desc, k * slot, lmr, k * slot, p.len, o);
                        break;
                    case kind::read:
                        r = l.client->read(lmr, (total + k) * slot, desc, total * slot + p.read_off,
                                           p.len, o);
                        break;
                    case kind::send:
                        r = l.client->send(lmr, k * slot, p.len, o);
                        break;
                }
                if (!r) {
                    if (!(r.error() == errc::would_block))
                        bad.add("post " + std::to_string(k) + ": " + r.error().what());
                    ++l.would_block;
                    ++would_block;
                    break;  // reap, then retry
                }
                ++l.next;
                ++posted;
                if (p.what == kind::send)
                    ++l.sends_posted;
                if (p.what == kind::write)
                    l.last_write = k;
            }
            if (!reap(l))
                break;
        }
        if (posted + led.seen == before) {
            idle();  // nothing moved: let the provider's threads run
        } else {
            const auto now = clk::now();
            longest_stall = std::max(longest_stall, now - last_progress);
            last_progress = now;
        }
    }
    const auto elapsed = clk::now() - start;
    ASSERT_EQ(bad.count, 0u) << bad.first << describe_lanes();
    ASSERT_TRUE(all_done()) << "not finished in 100 s" << describe_lanes();

    // Read back each connection's last write: the read flushes that connection's writes too.
    std::size_t flushes = 0;
    for (std::size_t li = 0; li < lanes; ++li) {
        if (L[li].last_write < 0)
            continue;
        const auto k = static_cast<std::uint32_t>(L[li].last_write);
        auto r = L[li].client->read(lmr, 2 * total * slot + li * slot, desc, k * slot, plan[k].len,
                                    {.context = &led.ops[total + sends + li]});
        ASSERT_TRUE(r) << r.error().what();
        ++flushes;
    }
    const auto flush_deadline = clk::now() + 10s;
    auto flushed = [&] {
        std::size_t n = 0;
        for (std::size_t li = 0; li < lanes; ++li)
            n += led.ops[total + sends + li].polled;
        return n;
    };
    while (flushed() < flushes && clk::now() < flush_deadline && bad.count == 0) {
        for (lane& l : L)
            reap(l);
    }
    ASSERT_EQ(bad.count, 0u) << bad.first;
    ASSERT_EQ(flushed(), flushes) << "read-backs missing" << describe_lanes();
    for (std::size_t li = 0; li < lanes; ++li) {
        if (L[li].last_write < 0)
            continue;
        const auto k = static_cast<std::uint32_t>(L[li].last_write);
        EXPECT_TRUE(stamped(local.bytes.data() + 2 * total * slot + li * slot, k, plan[k].len))
            << "read-back of write " << k << " on connection " << li;
    }

    // Accounting: every entry came back, on both sides of every connection.
    for (std::size_t li = 0; li < lanes; ++li) {
        EXPECT_EQ(L[li].client->in_flight(), 0u) << "client " << li;
        EXPECT_EQ(L[li].server->in_flight(), 0u) << "server " << li;
        EXPECT_GT(L[li].would_block, 0u) << "connection " << li << " never hit a full queue";
    }
    EXPECT_LE(max_client_in_flight, depth);
    EXPECT_LE(max_server_in_flight, depth);
    EXPECT_EQ(next_recv, sends);
    EXPECT_EQ(led.stray, 0u) << "completions with contexts the test never used";
    EXPECT_TRUE(led.first_error.empty()) << "error completion: " << led.first_error;

    // Every completion exactly once: poll() reports operations posted with completion_mode::always
    // and no callback; a callback runs exactly once (whatever the completion mode) and poll()
    // reports nothing for it; a success of an operation posted with on_error is never reported.
    faults once;
    std::size_t hidden = 0, via_callback = 0;
    for (std::uint32_t k = 0; k < total; ++k) {
        const planned& p = plan[k];
        const tracker& t = led.ops[k];
        const std::uint32_t want_polled = !p.callback && !p.on_error ? 1 : 0;
        const std::uint32_t want_called = p.callback ? 1 : 0;
        hidden += !p.callback && p.on_error ? 1 : 0;
        via_callback += want_called;
        if (t.polled != want_polled || t.called != want_called || t.failed != 0 ||
            (t.polled + t.called != 0 && t.last != op_of(p.what))) {
            once.add("operation " + std::to_string(k) + " (" + to_string(op_of(p.what)) +
                     (p.on_error ? ", on_error" : "") + (p.callback ? ", callback" : "") +
                     "): polled " + std::to_string(t.polled) + ", called " +
                     std::to_string(t.called) + ", failed " + std::to_string(t.failed) +
                     ", last op " + to_string(t.last));
        }
    }
    for (std::size_t i = led.recv_begin; i < led.recv_end; ++i) {
        const tracker& t = led.ops[i];
        const bool cb = (i - led.recv_begin) % 4 == 1;
        if (t.polled != (cb ? 0u : 1u) || t.called != (cb ? 1u : 0u) || t.last != op::recv) {
            once.add("receive " + std::to_string(i - led.recv_begin) + ": polled " +
                     std::to_string(t.polled) + ", called " + std::to_string(t.called));
        }
    }
    EXPECT_EQ(once.count, 0u) << once.count
                              << " operations not accounted exactly once; first: " << once.first;
    EXPECT_GT(hidden, 0u);
    EXPECT_GT(via_callback, 0u);

    // Data: every send arrived once with its bytes (checked on arrival), every read brought the
    // read area's bytes, every write left its bytes in its slot and nothing beyond.
    faults data;
    for (std::uint32_t k = 0; k < total; ++k) {
        const planned& p = plan[k];
        if (p.what == kind::send && delivered[k] != 1) {
            data.add("send " + std::to_string(k) + " delivered " + std::to_string(delivered[k]) +
                     " times");
        } else if (p.what == kind::read && std::memcmp(local.bytes.data() + (total + k) * slot,
                                                       area + p.read_off, p.len) != 0) {
            data.add("read " + std::to_string(k) + " brought other bytes");
        } else if (p.what == kind::write) {
            const std::byte* s = target.bytes.data() + k * slot;
            const bool tail_clear =
                std::all_of(s + p.len, s + slot, [](std::byte b) { return b == std::byte{0}; });
            if (!stamped(s, k, p.len) || !tail_clear)
                data.add("write " + std::to_string(k) + " did not land as written");
        }
    }
    EXPECT_EQ(data.count, 0u) << data.count << " data mismatches; first: " << data.first;

    std::cout << "[ stress   ] " << provider << ": " << total << " operations (" << sends
              << " sends) on " << lanes << " connections in "
              << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms; "
              << would_block << " posts refused with would_block; longest stall "
              << std::chrono::duration_cast<std::chrono::milliseconds>(longest_stall).count()
              << " ms\n";
}

// ------------------------------------------------------------------------------------------
// 2. The classic bug: admission that counts registrations but not queue entries. Here
// registrations are plentiful (hundreds of regions on each side) and entries scarce (send
// queue 2, receive queue 2, CQ 4): posting as fast as possible, every post beyond the free
// entries must come back as errc::would_block — never a provider error, never a CQ overrun —
// including while completions sit unread in the CQ, and everything is accounted at the end.

TEST_P(stress, scarce_entries_plentiful_registrations_over_admission_is_would_block) {
    constexpr std::size_t regions = 512, rsize = 1024, half = rsize / 2;
    constexpr std::uint32_t sq = 2, rq = 2;
    // Client region r: bytes of its own in the first half (write source), read destination in
    // the second half. Target region r: write destination in the first half, bytes of its own in
    // the second (read source). Each region is a registration of its own. The memory and its
    // registrations are declared first: they outlive the connections, which may still touch
    // them when the test ends early.
    buffer cmem(regions * rsize), tmem(regions * rsize), smem(4096);
    std::vector<memory_region> cregs, tregs;
    std::optional<memory_region> smr;
    auto p = must(connect_pair(GetParam(), {.sq_size = sq, .rq_size = rq, .progress_thread = true},
                               {.sq_size = sq, .rq_size = rq}));
    ASSERT_EQ(p.client->config().cq_size, sq + rq);
    for (std::uint32_t r = 0; r < regions; ++r) {
        stamp(cmem.bytes.data() + r * rsize, 1000000 + r, half);
        stamp(tmem.bytes.data() + r * rsize + half, 2000000 + r, half);
    }
    std::vector<remote_region> descs;
    for (std::size_t r = 0; r < regions; ++r) {
        cregs.push_back(must(
            memory_region::create(p.client_domain, cmem.span().subspan(r * rsize, rsize),
                                  usage::write_source | usage::read_destination | usage::receive)));
        tregs.push_back(
            must(memory_region::create(p.server_domain, tmem.span().subspan(r * rsize, rsize),
                                       usage::write_destination | usage::read_source)));
        descs.push_back(must(tregs.back().describe()));
    }
    smr = must(memory_region::create(p.server_domain, smem.span(), usage::send));
    connection& client = *p.client;

    completion buf[8];
    // Reads the client's CQ until nothing is in flight; returns the completions reported.
    auto drain = [&](std::vector<completion>& got) {
        const auto deadline = clk::now() + 10s;
        while (client.in_flight() != 0 && clk::now() < deadline) {
            auto n = client.cq().poll(buf);
            ASSERT_TRUE(n) << n.error().what();
            got.insert(got.end(), buf, buf + *n);
        }
        ASSERT_EQ(client.in_flight(), 0u);
    };
    // Calls into the provider without reading the CQ until the completions of what is in flight
    // sit in it unread (arm() says so).
    auto settle = [&] {
        const auto deadline = clk::now() + 5s;
        for (;;) {
            auto armed = client.cq().arm();
            ASSERT_TRUE(armed) << armed.error().what();
            pollfd fd{client.cq().fd(), POLLIN, 0};
            if (!*armed || ::poll(&fd, 1, 0) == 1)
                return;  // tcp: arming fails; sockets: arms, but the fd is already readable
            ASSERT_TRUE(clk::now() < deadline) << "the completions never reached the CQ";
            // Drives the CQ (a zero-length read); the connection stays up.
            ASSERT_ERRC(client.next_event(2ms), errc::timed_out);
        }
    };

    // Phase A: bursts from an idle connection. Exactly sq posts are admitted; the rest are
    // refused with would_block, also once their completions have arrived but are still unread.
    for (const bool reads : {false, true}) {
        for (const auto mode : {completion_mode::always, completion_mode::on_error}) {
            SCOPED_TRACE(std::string(reads ? "reads" : "writes") +
                         (mode == completion_mode::on_error ? ", on_error" : ", always"));
            std::size_t admitted = 0;
            for (std::size_t i = 0; i < 2 * regions; ++i) {
                const std::size_t r = i % regions;
                auto res = reads ? client.read(cregs[r], half, descs[r], half, 64, {.report = mode})
                                 : client.write(descs[r], 0, cregs[r], 0, 64, {.report = mode});
                if (res) {
                    ++admitted;
                } else {
                    ASSERT_TRUE(res.error() == errc::would_block)
                        << "post " << i << ": " << res.error().what();
                }
                ASSERT_LE(client.in_flight(), sq);
            }
            EXPECT_EQ(admitted, sq);
            settle();
            if (HasFatalFailure())
                return;
            for (std::size_t r = 0; r < regions; ++r) {
                auto res = client.write(descs[r], 0, cregs[r], 0, 64, {.report = mode});
                ASSERT_FALSE(res) << "admitted while " << sq
                                  << " completions sit unread in a CQ of " << sq + rq;
                ASSERT_TRUE(res.error() == errc::would_block) << res.error().what();
            }
            std::vector<completion> got;
            drain(got);
            if (HasFatalFailure())
                return;
            EXPECT_EQ(got.size(), mode == completion_mode::always ? sq : 0u);
            for (const completion& c : got) {
                EXPECT_TRUE(c.ok()) << c.status.message();
                EXPECT_EQ(c.op, reads ? op::read : op::write);
            }
        }
    }

    // Receives: exactly rq are admitted, the rest refused; the peer's sends fill them.
    {
        std::size_t admitted = 0;
        for (std::size_t r = 0; r < regions; ++r) {
            auto res = client.recv(cregs[r], half, half, {.context = &cregs[r]});
            if (res) {
                ++admitted;
            } else {
                ASSERT_TRUE(res.error() == errc::would_block) << res.error().what();
            }
        }
        EXPECT_EQ(admitted, rq);
        EXPECT_EQ(client.in_flight(), rq);
        std::memcpy(smem.bytes.data(), "scarce entries", 14);
        for (std::uint32_t i = 0; i < rq; ++i)
            REMORA_ASSERT_OK(p.server->send(*smr, 0, 14));
        auto sent = collect(p.server->cq(), rq, true);
        ASSERT_EQ(sent.size(), rq);
        std::vector<completion> got;
        drain(got);
        if (HasFatalFailure())
            return;
        ASSERT_EQ(got.size(), rq);
        for (const completion& c : got) {
            EXPECT_TRUE(c.ok()) << c.status.message();
            EXPECT_EQ(c.op, op::recv);
            EXPECT_EQ(c.bytes, 14u);
            const auto* mr = static_cast<const memory_region*>(c.context);
            ASSERT_TRUE(mr == &cregs[0] || mr == &cregs[1]);
            EXPECT_EQ(std::memcmp(mr->data() + half, "scarce entries", 14), 0);
        }
        // Regions 0 and 1 are read destinations again in phase B, which checks them whole: give
        // them back the bytes their reads brought in phase A.
        for (std::size_t r : {0, 1})
            std::memcpy(cregs[r].data() + half, tmem.bytes.data() + r * rsize + half, half);
    }

    // Phase B: two threads post as fast as they can (a refused post is retried after a 20 us
    // pause) while this thread reaps; operations spread over all regions, mixed modes and
    // callbacks.
    const std::size_t total = 20000;
    ledger led;
    led.ops.resize(total + 1);
    led.recv_begin = led.recv_end = total + 1;
    ledger_scope scope(led);
    struct plan2 {
        bool read, on_error, callback;
        std::uint16_t len;
        std::uint32_t region;
    };
    std::vector<plan2> plan(total);
    std::mt19937 rng(7);
    std::vector<std::size_t> write_max(regions, 0), read_max(regions, 0);
    for (std::size_t k = 0; k < total; ++k) {
        plan[k] = {rng() % 2 == 0, rng() % 3 == 0, rng() % 4 == 0,
                   static_cast<std::uint16_t>(8 * (1 + rng() % (half / 8))),
                   static_cast<std::uint32_t>(k % regions)};
        auto& m = plan[k].read ? read_max : write_max;
        m[plan[k].region] = std::max<std::size_t>(m[plan[k].region], plan[k].len);
    }
    std::atomic<std::size_t> next{0}, refused{0}, posters_done{0}, over{0};
    std::atomic<bool> stop{false};
    std::mutex fault_mu;
    faults bad;
    auto poster = [&] {
        for (std::size_t k = next++; k < total && !stop.load(); k = next++) {
            const plan2& q = plan[k];
            const op_options o{
                .report = q.on_error ? completion_mode::on_error : completion_mode::always,
                .context = &led.ops[k],
                .callback = q.callback ? &on_complete : nullptr};
            while (!stop.load()) {
                auto r = q.read
                             ? client.read(cregs[q.region], half, descs[q.region], half, q.len, o)
                             : client.write(descs[q.region], 0, cregs[q.region], 0, q.len, o);
                if (client.in_flight() > sq)
                    ++over;
                if (r)
                    break;
                if (!(r.error() == errc::would_block)) {
                    std::lock_guard lock(fault_mu);
                    bad.add("post " + std::to_string(k) + ": " + r.error().what());
                    stop = true;
                    break;
                }
                ++refused;
                idle();
            }
        }
        ++posters_done;
    };
    const auto start = clk::now();
    std::thread a(poster), b(poster);
    const auto deadline = start + 60s;
    std::string poll_error;
    while ((posters_done.load() < 2 || client.in_flight() != 0) && clk::now() < deadline) {
        auto n = client.cq().poll(buf);
        if (!n) {
            poll_error = n.error().what();
            break;
        }
        for (std::size_t i = 0; i < *n; ++i)
            led.record(buf[i], false);
        if (client.in_flight() > sq)
            ++over;
        if (*n == 0)
            idle();
    }
    stop = true;  // on a failure or the deadline; a no-op once everything is posted
    a.join();
    b.join();
    const auto elapsed = clk::now() - start;
    ASSERT_TRUE(poll_error.empty()) << "poll: " << poll_error;
    ASSERT_EQ(bad.count, 0u) << bad.first;
    ASSERT_EQ(posters_done.load(), 2u);
    ASSERT_GE(next.load(), total) << "not all posted in 60 s: " << next.load();
    ASSERT_EQ(client.in_flight(), 0u) << "entries never came back";
    EXPECT_EQ(over.load(), 0u) << "more than " << sq << " operations in flight";
    EXPECT_GT(refused.load(), 0u) << "never refused: the test did not test admission";
    EXPECT_EQ(led.stray, 0u);
    EXPECT_TRUE(led.first_error.empty()) << "error completion: " << led.first_error;
    faults once;
    for (std::size_t k = 0; k < total; ++k) {
        const tracker& t = led.ops[k];
        const std::uint32_t want_polled = !plan[k].callback && !plan[k].on_error ? 1 : 0;
        const std::uint32_t want_called = plan[k].callback ? 1 : 0;
        if (t.polled != want_polled || t.called != want_called ||
            (t.polled + t.called != 0 && t.last != (plan[k].read ? op::read : op::write))) {
            once.add("operation " + std::to_string(k) + ": polled " + std::to_string(t.polled) +
                     ", called " + std::to_string(t.called));
        }
    }
    EXPECT_EQ(once.count, 0u) << once.count
                              << " operations not accounted exactly once; first: " << once.first;

    // Data: a final read flushes the writes; each region holds its source's bytes.
    REMORA_ASSERT_OK(client.read(cregs[0], half, descs[0], 0, 8, {.context = &led.ops[total]}));
    {
        std::vector<completion> got;
        drain(got);
        if (HasFatalFailure())
            return;
        ASSERT_EQ(got.size(), 1u);
        EXPECT_TRUE(got[0].ok()) << got[0].status.message();
        EXPECT_EQ(got[0].context, &led.ops[total]);
    }
    faults data;
    for (std::uint32_t r = 0; r < regions; ++r) {
        if (write_max[r] != 0 && std::memcmp(tmem.bytes.data() + r * rsize,
                                             cmem.bytes.data() + r * rsize, write_max[r]) != 0) {
            data.add("target region " + std::to_string(r) + " does not hold what was written");
        }
        // Region 0's read destination took the 8-byte flush read last.
        const std::size_t from = r == 0 ? 8 : 0;
        if (read_max[r] > from &&
            std::memcmp(cmem.bytes.data() + r * rsize + half + from,
                        tmem.bytes.data() + r * rsize + half + from, read_max[r] - from) != 0) {
            data.add("client region " + std::to_string(r) + " does not hold what was read");
        }
    }
    EXPECT_EQ(data.count, 0u) << data.count << " data mismatches; first: " << data.first;
    EXPECT_TRUE(std::memcmp(cmem.bytes.data() + half, tmem.bytes.data(), 8) == 0);

    std::cout << "[ stress   ] " << GetParam() << ": " << total << " operations from 2 threads in "
              << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms; "
              << refused.load() << " posts refused with would_block\n";
}

INSTANTIATE_TEST_SUITE_P(providers, stress, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

// SPDX-License-Identifier: BSD-3-Clause
// One-sided and two-sided operations, immediate data, scatter-gather, completion modes, atomics,
// private data, connection events and the library-owned progress thread, on every provider.
#include <poll.h>

#include <atomic>
#include <numeric>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

class ops : public testing::TestWithParam<std::string> {
  protected:
    bool native_atomics() const { return GetParam() == "sockets"; }
};

// The target's application makes no call at all; the library's progress thread serves the
// peer's one-sided writes and reads (tcp needs the target to call into libfabric for that).
TEST_P(ops, target_sleeps_while_peer_writes_and_reads_back) {
    buffer target(1 << 16), local(1 << 16);
    auto p = must(connect_pair(GetParam(), {.progress_thread = true}));
    auto tmr = must(memory_region::create(p.server_domain, target.span(),
                                          usage::write_destination | usage::read_source));
    auto lmr = must(memory_region::create(p.client_domain, local.span(),
                                          usage::write_source | usage::read_destination));
    auto desc = must(tmr.describe());
    for (std::size_t i = 0; i < 32768; ++i)
        local.bytes[i] = static_cast<std::byte>(i * 7);
    // From here to the end nothing calls into the server's connection or domain: only the
    // progress thread can serve the write and the read whose completions the client waits for.
    REMORA_ASSERT_OK(p.client->write(desc, 4096, lmr, 0, 32768));
    auto w = collect(p.client->cq(), 1, true, 5s);
    ASSERT_EQ(w.size(), 1u);
    ASSERT_TRUE(w[0].ok()) << w[0].status.message();
    REMORA_ASSERT_OK(p.client->read(lmr, 32768, desc, 4096, 32768));
    auto r = collect(p.client->cq(), 1, true, 5s);
    ASSERT_EQ(r.size(), 1u);
    ASSERT_TRUE(r[0].ok()) << r[0].status.message();
    EXPECT_EQ(std::memcmp(local.bytes.data(), local.bytes.data() + 32768, 32768), 0);
    EXPECT_EQ(std::memcmp(target.bytes.data() + 4096, local.bytes.data(), 32768), 0);
}

TEST_P(ops, write_with_imm_reports_remote_write_on_target) {
    for (bool rcq : {false, true}) {
        buffer target(4096), local(4096);
        auto p = must(connect_pair(GetParam(), {.rcq = rcq}));
        auto tmr = must(memory_region::create(p.server_domain, target.span(),
                                              usage::write_destination | usage::receive));
        auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::write_source));
        // A receive posted for providers that consume one with immediate data (verbs).
        REMORA_ASSERT_OK(p.server->recv(tmr, 2048, 64));
        std::memcpy(local.bytes.data(), "imm!", 4);
        REMORA_ASSERT_OK(p.client->write_with_imm(must(tmr.describe()), 8, lmr, 0, 4, 0xfeedbeef));
        completion_queue& q = rcq ? *p.server->rcq() : p.server->cq();
        auto got = collect(q, 1, true);
        ASSERT_EQ(got.size(), 1u) << "rcq=" << rcq;
        EXPECT_TRUE(got[0].ok());
        EXPECT_EQ(got[0].op, op::remote_write);
        EXPECT_TRUE(got[0].has_imm);
        EXPECT_EQ(got[0].imm, 0xfeedbeefu);
        EXPECT_EQ(std::memcmp(target.bytes.data() + 8, "imm!", 4), 0);
        auto w = collect(p.client->cq(), 1, false);
        ASSERT_EQ(w.size(), 1u);
        EXPECT_EQ(w[0].op, op::write);
    }
}

TEST_P(ops, send_with_imm_and_zero_length_send) {
    buffer in(256), out(256);
    auto p = must(connect_pair(GetParam()));
    auto imr = must(memory_region::create(p.server_domain, in.span(), usage::receive));
    auto omr = must(memory_region::create(p.client_domain, out.span(), usage::send));
    int ctx_a = 0, ctx_b = 0;
    REMORA_ASSERT_OK(p.server->recv(imr, 0, 128, {.context = &ctx_a}));
    REMORA_ASSERT_OK(p.server->recv(imr, 128, 128, {.context = &ctx_b}));
    std::memcpy(out.bytes.data(), "payload", 7);
    REMORA_ASSERT_OK(p.client->send_with_imm(omr, 0, 7, 42));
    REMORA_ASSERT_OK(p.client->send(std::span<const local_segment>{}));
    auto got = collect(p.server->cq(), 2, true);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].op, op::recv);
    EXPECT_EQ(got[0].context, &ctx_a);
    EXPECT_EQ(got[0].bytes, 7u);
    EXPECT_TRUE(got[0].has_imm);
    EXPECT_EQ(got[0].imm, 42u);
    EXPECT_EQ(std::memcmp(in.bytes.data(), "payload", 7), 0);
    EXPECT_EQ(got[1].context, &ctx_b);
    EXPECT_EQ(got[1].bytes, 0u);
    EXPECT_FALSE(got[1].has_imm);
    EXPECT_EQ(collect(p.client->cq(), 2, false).size(), 2u);
}

TEST_P(ops, scatter_gather_up_to_the_iov_limit) {
    auto probe = must(domain::open({.provider = GetParam()}));
    const auto sge = static_cast<std::uint32_t>(probe.caps().iov_limit);
    ASSERT_GE(sge, 2u);
    buffer target(4096), local(4096);
    auto p =
        must(connect_pair(GetParam(), {.max_sge = sge, .progress_thread = true}, {.max_sge = sge}));
    auto tmr = must(memory_region::create(p.server_domain, target.span(),
                                          usage::write_destination | usage::read_source));
    auto lmr = must(memory_region::create(p.client_domain, local.span(),
                                          usage::write_source | usage::read_destination));
    std::vector<local_segment> segs;
    std::string expect;
    for (std::uint32_t i = 0; i < sge; ++i) {
        const std::size_t off = i * 256, len = 10 + i;
        for (std::size_t k = 0; k < len; ++k) {
            local.bytes[off + k] = static_cast<std::byte>('a' + i);
            expect.push_back(static_cast<char>('a' + i));
        }
        segs.push_back({&lmr, off, len});
    }
    REMORA_ASSERT_OK(p.client->write(must(tmr.describe()), 100, segs));
    ASSERT_EQ(collect(p.client->cq(), 1, true).size(), 1u);
    // A write's completion frees its source; visibility at the target needs a read after it.
    std::vector<local_segment> back{{&lmr, 3000, 5}, {&lmr, 3100, expect.size() - 5}};
    REMORA_ASSERT_OK(p.client->read(back, must(tmr.describe()), 100));
    ASSERT_EQ(collect(p.client->cq(), 1, true).size(), 1u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(target.bytes.data()) + 100, expect.size()),
              expect);
    std::string got(reinterpret_cast<const char*>(local.bytes.data()) + 3000, 5);
    got.append(reinterpret_cast<const char*>(local.bytes.data()) + 3100, expect.size() - 5);
    EXPECT_EQ(got, expect);
    // One more segment than the limit is refused before posting.
    segs.push_back({&lmr, 4000, 1});
    EXPECT_ERRC(p.client->write(must(tmr.describe()), 0, segs), errc::too_large);
    EXPECT_EQ(p.client->in_flight(), 0u);
}

TEST_P(ops, completion_on_error_only_reports_nothing_on_success) {
    buffer target(4096), local(4096);
    auto p = must(connect_pair(GetParam(), {.progress_thread = true}));
    auto tmr = must(memory_region::create(p.server_domain, target.span(),
                                          usage::write_destination | usage::read_source));
    auto lmr = must(memory_region::create(p.client_domain, local.span(),
                                          usage::write_source | usage::read_destination));
    auto desc = must(tmr.describe());
    int quiet = 0, loud = 0;
    local.bytes[0] = std::byte{0x5a};
    REMORA_ASSERT_OK(p.client->write(desc, 0, lmr, 0, 1,
                                     {.report = completion_mode::on_error, .context = &quiet}));
    REMORA_ASSERT_OK(p.client->write(desc, 1, lmr, 0, 1, {.context = &loud}));
    // The connection's writes complete in order: had the quiet one been reported, it would come
    // before the loud one. The first completion is the loud one, and nothing else is left.
    auto got = collect(p.client->cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &loud);
    completion more[2];
    EXPECT_EQ(must(p.client->cq().poll(more)), 0u);
    EXPECT_EQ(p.client->in_flight(), 0u);  // the quiet write's entries came back unreported
    REMORA_ASSERT_OK(p.client->read(lmr, 8, desc, 0, 2));  // makes both writes visible
    ASSERT_EQ(collect(p.client->cq(), 1, true).size(), 1u);
    EXPECT_EQ(target.bytes[0], std::byte{0x5a});
    EXPECT_EQ(target.bytes[1], std::byte{0x5a});
}

TEST_P(ops, atomic_write_native_or_not_supported) {
    auto p = must(connect_pair(GetParam(), {.progress_thread = true}));
    alignas(8) static thread_local std::uint64_t words[4];
    std::memset(words, 0, sizeof(words));
    auto tmr = must(memory_region::create(p.server_domain, std::as_writable_bytes(std::span(words)),
                                          usage::atomic_target));
    auto desc = must(tmr.describe());
    if (!native_atomics()) {
        EXPECT_ERRC(p.client->atomic_write(desc, 8, 0x1122334455667788ull), errc::not_supported);
        EXPECT_EQ(p.client->in_flight(), 0u);
        return;
    }
    REMORA_ASSERT_OK(p.client->atomic_write(desc, 8, 0x1122334455667788ull));
    auto got = collect(p.client->cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(got[0].op, op::atomic);
    EXPECT_EQ(words[1], 0x1122334455667788ull);
    EXPECT_EQ(words[0], 0u);
    EXPECT_EQ(words[2], 0u);
}

TEST_P(ops, private_data_both_ways_and_close_events) {
    // 200 bytes, or the provider's limit where it is smaller (55 under verbs rules).
    const std::size_t limit = must(domain::open({.provider = GetParam()})).caps().cm_data_size;
    const std::string hello(std::min<std::size_t>(200, limit), 'c'), welcome = "welcome, client";
    auto p = must(connect_pair(GetParam(), {}, {}, bytes_of(hello), bytes_of(welcome)));
    EXPECT_EQ(string_of(p.server->peer_private_data()), hello);
    EXPECT_EQ(string_of(p.client->peer_private_data()), welcome);
    EXPECT_TRUE(p.client->is_open());
    // No event while the connection is up.
    EXPECT_ERRC(p.server->next_event(50ms), errc::timed_out);
    REMORA_ASSERT_OK(p.client->close());
    EXPECT_FALSE(p.client->is_open());
    // The peer closed in order: closed, not lost.
    auto ev = p.server->next_event(10s);
    ASSERT_TRUE(ev) << ev.error().what();
    EXPECT_EQ(*ev, conn_event::closed) << to_string(*ev);
    EXPECT_FALSE(p.server->is_open());
    // Posting on a closed connection is refused.
    buffer b(64);
    auto mr = must(memory_region::create(p.client_domain, b.span(), usage::send));
    EXPECT_ERRC(p.client->send(mr, 0, 8), errc::disconnected);
    EXPECT_ERRC(p.server->send(mr, 0, 8), errc::disconnected);
}

// The send queue admits exactly sq_size operations: the next post is refused with would_block
// (nothing reaches the provider, so nothing can overflow the CQ), every admitted operation
// completes exactly once, and once they are reaped the queue admits again.
TEST_P(ops, queue_full_is_would_block_not_overflow) {
    buffer in(64 * 8), out(64);
    auto p = must(connect_pair(GetParam(), {}, {.sq_size = 4}));
    const std::uint32_t depth = p.client->config().sq_size;
    ASSERT_EQ(depth, 4u);
    auto mr = must(memory_region::create(p.client_domain, out.span(), usage::send));
    auto imr = must(memory_region::create(p.server_domain, in.span(), usage::receive));
    // Nothing is reaped: every send keeps its entry until its completion is read.
    int ctx[8] = {};
    for (std::uint32_t i = 0; i < depth; ++i) {
        REMORA_ASSERT_OK(p.client->send(mr, 0, 64, {.context = &ctx[i]}));
    }
    EXPECT_EQ(p.client->in_flight(), depth);
    EXPECT_ERRC(p.client->send(mr, 0, 64, {.context = &ctx[depth]}), errc::would_block);
    EXPECT_ERRC(p.client->send(mr, 0, 64, {.context = &ctx[depth]}), errc::would_block);
    EXPECT_EQ(p.client->in_flight(), depth);
    // The target takes the messages; every admitted send completes exactly once, and nothing
    // else: the refused ones were never posted.
    for (std::uint32_t i = 0; i < depth + 1; ++i) {
        REMORA_ASSERT_OK(p.server->recv(imr, i * 64, 64));
    }
    auto got = collect(p.client->cq(), depth, true);
    ASSERT_EQ(got.size(), depth);
    for (std::uint32_t i = 0; i < depth; ++i) {
        EXPECT_TRUE(got[i].ok()) << got[i].status.message();
        EXPECT_EQ(got[i].op, op::send);
        EXPECT_EQ(got[i].context, &ctx[i]) << "completion " << i;
    }
    EXPECT_EQ(p.client->in_flight(), 0u);
    EXPECT_EQ(collect(p.server->cq(), depth, true).size(), depth);
    // Reaped: the queue admits again, and that send completes too (before any stray one).
    REMORA_ASSERT_OK(p.client->send(mr, 0, 64, {.context = &ctx[depth]}));
    auto again = collect(p.client->cq(), 1, true);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_TRUE(again[0].ok()) << again[0].status.message();
    EXPECT_EQ(again[0].context, &ctx[depth]);
    completion more[4];
    EXPECT_EQ(must(p.client->cq().poll(more)), 0u);
    EXPECT_EQ(p.client->in_flight(), 0u);
    EXPECT_EQ(collect(p.server->cq(), 1, true).size(), 1u);
}

// With a library progress thread, the application's blocking waits on the same connection must
// still wake for every completion (the thread owns the CQ; the application waits on its eventfd).
// A wait that times out while a completion is ready is a lost wake-up.
TEST_P(ops, blocking_waits_never_miss_a_wakeup_beside_the_progress_thread) {
    buffer sbuf(64), cbuf(64);
    connection_config server_cfg{.rcq = true, .progress_thread = true};
    auto p = must(connect_pair(GetParam(), server_cfg, {.rcq = true}));
    auto smr =
        must(memory_region::create(p.server_domain, sbuf.span(), usage::send | usage::receive));
    auto cmr =
        must(memory_region::create(p.client_domain, cbuf.span(), usage::send | usage::receive));
    std::atomic<int> lost{0};
    constexpr int rounds = 100;
    std::thread server([&] {
        completion c[4];
        for (int i = 0; i < rounds && lost == 0; ++i) {
            ASSERT_TRUE(p.server->recv(smr, 0, 32));
            for (;;) {
                auto w = p.server->rcq()->wait(2s);
                auto n = p.server->rcq()->poll(c);
                ASSERT_TRUE(n);
                if (!w && *n != 0)
                    ++lost;  // timed out although a completion was there
                if (*n != 0)
                    break;
                if (lost != 0)
                    return;
            }
            ASSERT_TRUE(p.server->send(smr, 32, 8, {.report = completion_mode::on_error}));
            // Reap the CQ too: an unreported send holds its queue entry until it is reaped.
            ASSERT_TRUE(p.server->cq().poll(c));
        }
    });
    completion c[4];
    for (int i = 0; i < rounds && lost == 0; ++i) {
        REMORA_ASSERT_OK(p.client->recv(cmr, 0, 32));
        REMORA_ASSERT_OK(p.client->send(cmr, 32, 8, {.report = completion_mode::on_error}));
        std::size_t got = 0;
        while (got == 0 && lost == 0) {
            auto w = p.client->rcq()->wait(2s);
            auto n = p.client->rcq()->poll(c);
            ASSERT_TRUE(n);
            if (!w && *n != 0)
                ++lost;
            got = *n;
        }
        REMORA_ASSERT_OK(p.client->cq().poll(c));
    }
    server.join();
    EXPECT_EQ(lost.load(), 0) << "a blocking wait slept through a ready completion";
}

// tcp keeps a message that arrived before its receive was posted until someone calls into the
// provider after the post. With the progress thread owning the CQ, posting a receive must wake
// it, or the message waits forever. The server reposts its receive only once the client's next
// request has left (its send completed), so every request after the first arrives first; it
// then sleeps on its CQ's fd (not calling into remora, which would drive the provider itself)
// until the progress thread delivers. Its replies complete at post: nothing else wakes the fd.
TEST_P(ops, message_arriving_before_its_receive_is_delivered_beside_the_progress_thread) {
    buffer sbuf(64), cbuf(64);
    auto p = must(connect_pair(GetParam(), {.progress_thread = true}));
    auto smr =
        must(memory_region::create(p.server_domain, sbuf.span(), usage::send | usage::receive));
    auto cmr =
        must(memory_region::create(p.client_domain, cbuf.span(), usage::send | usage::receive));
    // sockets busy-polls slowly on two cores (its own progress threads compete): fewer rounds.
    const int rounds = GetParam() == "tcp" ? 100 : 30;
    std::atomic<bool> stalled{false};
    std::atomic<int> requests_sent{0};  // client requests whose send completed
    constexpr auto limit = 10s;
    // Reads c's CQ until its receive completes (and, with `sent`, its send too). With
    // `sleep_on_fd`, reads it only once its fd is readable.
    auto next_recv = [&](connection& c, std::atomic<int>* sent, int round, bool sleep_on_fd) {
        completion done[4];
        bool got = false, left = sent == nullptr;
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < deadline && !stalled) {
            if (sleep_on_fd) {
                pollfd fd{c.cq().fd(), POLLIN, 0};
                if (::poll(&fd, 1, 100) != 1)
                    continue;
            }
            auto n = c.cq().poll(done);
            if (!n)
                return false;
            for (std::size_t i = 0; i < *n; ++i) {
                if (!done[i].ok())
                    return false;
                if (done[i].op == op::recv)
                    got = true;
                if (done[i].op == op::send && sent != nullptr) {
                    left = true;
                    sent->store(round + 1);
                }
            }
            if (got && left)
                return true;
        }
        stalled = true;
        return false;
    };
    std::thread server([&] {
        ASSERT_TRUE(p.server->recv(smr, 0, 32));
        for (int i = 0; i < rounds; ++i) {
            if (!next_recv(*p.server, nullptr, i, true))
                return;
            ASSERT_TRUE(p.server->send(smr, 32, 8, {.report = completion_mode::at_post}));
            if (i + 1 == rounds)
                break;
            // Repost only once the next request has been sent: it arrives before its receive.
            const auto deadline = std::chrono::steady_clock::now() + limit;
            while (requests_sent.load() < i + 2 && !stalled) {
                if (std::chrono::steady_clock::now() >= deadline) {
                    stalled = true;
                    return;
                }
                std::this_thread::yield();
            }
            ASSERT_TRUE(p.server->recv(smr, 0, 32));
        }
    });
    int done_rounds = 0;
    for (int i = 0; i < rounds && !stalled; ++i) {
        REMORA_ASSERT_OK(p.client->recv(cmr, 0, 32));
        REMORA_ASSERT_OK(p.client->send(cmr, 32, 8));
        if (!next_recv(*p.client, &requests_sent, i, false))
            break;
        ++done_rounds;
    }
    server.join();
    EXPECT_FALSE(stalled.load()) << "a message was never delivered (round " << done_rounds << ")";
    EXPECT_EQ(done_rounds, rounds);
}

INSTANTIATE_TEST_SUITE_P(providers, ops, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

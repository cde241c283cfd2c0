// SPDX-License-Identifier: BSD-3-Clause
// A completion queue shared by several connections: one budget (an attach that could overflow
// it is refused), completions told apart by tag, a destroyed connection's entries returned and
// its leftover completions dropped while the others' are kept. On tcp and sockets.
#include <poll.h>

#include <atomic>
#include <map>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

class shared_cq_test : public testing::TestWithParam<std::string> {};

// cq_entries() says what a configuration takes on each CQ; a shared CQ sized with their sum takes
// exactly those connections, and a connection's reservation is what cq_entries() said.
TEST_P(shared_cq_test, cq_entries_sizes_a_shared_cq_exactly) {
    EXPECT_EQ(cq_entries({.sq_size = 8, .rq_size = 4}, cq_kind::cq), 12u);
    EXPECT_EQ(cq_entries({.sq_size = 8, .rq_size = 4}, cq_kind::rcq), 0u);
    EXPECT_EQ(cq_entries({.sq_size = 8, .rq_size = 4, .rcq = true}, cq_kind::cq), 8u);
    EXPECT_EQ(cq_entries({.sq_size = 8, .rq_size = 4, .rcq = true}, cq_kind::rcq), 4u);
    EXPECT_EQ(cq_entries({.sq_size = 8,
                          .rq_size = 4,
                          .addons = {remora::persistence_config{.service_depth = 2}}},
                         cq_kind::cq),
              15u);  // 12, and the service's depth plus its hello (persistence_config)

    auto s = server_side::open(GetParam());
    const std::vector<connection_config> cfgs = {
        {.sq_size = 4, .rq_size = 4, .tag = 1},
        {.sq_size = 8, .rq_size = 2, .tag = 2},
        {.sq_size = 2, .rq_size = 6, .rcq = true, .tag = 3},
    };
    std::uint32_t total = 0;
    for (const auto& c : cfgs) {
        total += cq_entries(c, cq_kind::cq);
    }
    auto shared = must(shared_completion_queue::create(s.dom, {.size = total}));
    ASSERT_EQ(shared.size(), total);
    std::vector<connection> conns;
    std::size_t reserved = 0;
    for (auto c : cfgs) {
        c.shared_cq = shared;
        conns.push_back(must(s.add(c)));
        reserved += cq_entries(c, cq_kind::cq);
        EXPECT_EQ(shared.reserved(), reserved);
    }
    EXPECT_EQ(shared.reserved(), shared.size());
    EXPECT_ERRC(s.add({.sq_size = 1, .rq_size = 1, .tag = 4, .shared_cq = shared}),
                errc::too_large);
}

TEST_P(shared_cq_test, an_attach_that_could_overflow_the_budget_is_refused) {
    auto s = server_side::open(GetParam());
    auto shared = must(shared_completion_queue::create(s.dom, {.size = 64}));
    ASSERT_EQ(shared.size(), 64u);
    std::vector<connection> conns;
    for (std::uint64_t i = 0; i < 4; ++i) {
        conns.push_back(must(s.add({.sq_size = 8, .rq_size = 8, .tag = i, .shared_cq = shared})));
        EXPECT_EQ(conns.back().config().cq_size, 64u);
    }
    EXPECT_EQ(shared.reserved(), 64u);
    EXPECT_EQ(shared.connections(), 4u);
    // Full: the fifth is refused, with the figures, and changes nothing.
    auto fifth = s.add({.sq_size = 8, .rq_size = 8, .tag = 4, .shared_cq = shared});
    ASSERT_ERRC(fifth, errc::too_large);
    EXPECT_NE(fifth.error().message().find("shared_cq: send queue 8 + receive queue 8 needs 16 "
                                           "entries of the shared CQ of 64, which has 0 free"),
              std::string::npos)
        << fifth.error().message();
    EXPECT_EQ(shared.reserved(), 64u);
    // A smaller one still does not fit; a connection with its own RCQ needs only its sends.
    conns.pop_back();
    EXPECT_EQ(shared.reserved(), 48u);
    EXPECT_EQ(shared.connections(), 3u);
    EXPECT_ERRC(s.add({.sq_size = 16, .rq_size = 8, .tag = 5, .shared_cq = shared}),
                errc::too_large);
    auto sends_only =
        must(s.add({.sq_size = 16, .rq_size = 32, .rcq = true, .tag = 6, .shared_cq = shared}));
    EXPECT_EQ(shared.reserved(), 64u);
    ASSERT_NE(sends_only.rcq(), nullptr);
    EXPECT_EQ(sends_only.rcq()->size(), 32u);
    // A shared RCQ takes the receive queue only.
    auto rshared = must(shared_completion_queue::create(s.dom, {.size = 20}));
    auto r1 = must(s.add({.sq_size = 4, .rq_size = 10, .tag = 7, .shared_rcq = rshared}));
    EXPECT_TRUE(r1.config().rcq);
    EXPECT_EQ(r1.config().rcq_size, 20u);
    EXPECT_EQ(rshared.reserved(), 10u);
    auto r2 = s.add({.sq_size = 4, .rq_size = 11, .tag = 8, .shared_rcq = rshared});
    ASSERT_ERRC(r2, errc::too_large);
    EXPECT_NE(r2.error().message().find("shared_rcq: receive queue 11 needs 11 entries of the "
                                        "shared CQ of 20, which has 10 free"),
              std::string::npos)
        << r2.error().message();
}

TEST_P(shared_cq_test, bad_configurations_are_refused) {
    auto s = server_side::open(GetParam());
    EXPECT_ERRC(shared_completion_queue::create(s.dom, {.size = 0}), errc::invalid_argument);
    auto shared = must(shared_completion_queue::create(s.dom, {.size = 64}));
    auto other = must(shared_completion_queue::create(s.client_dom, {.size = 64}));
    EXPECT_ERRC(s.add({.channel = channel_mode::shared, .shared_cq = shared}),
                errc::invalid_argument);
    EXPECT_ERRC(s.add({.sq_size = 4, .rq_size = 4, .shared_cq = other}), errc::invalid_argument);
    EXPECT_EQ(other.reserved(), 0u);
    EXPECT_EQ(shared.reserved(), 0u);
    // The provider's CQ limit clamps the size.
    auto huge = must(shared_completion_queue::create(s.dom, {.size = 0xffffffffu}));
    if (s.dom.caps().cq_size != 0) {
        EXPECT_EQ(huge.size(), s.dom.caps().cq_size);
    }
}

// Messages from several clients arrive on one shared CQ (or RCQ), each completion tagged with
// its connection; replies' send completions land there too.
void exchange_on_shared(const std::string& provider, bool rcq) {
    auto s = server_side::open(provider);
    auto shared = must(shared_completion_queue::create(s.dom, {.size = 256, .tag = 99}));
    constexpr int conns_n = 4;
    constexpr int msgs = 8;
    std::vector<connection> conns;
    buffer inbox(conns_n * msgs * 64);
    auto in_mr = must(memory_region::create(s.dom, inbox.span(), usage::receive | usage::send));
    for (int i = 0; i < conns_n; ++i) {
        connection_config cfg{.sq_size = msgs, .rq_size = msgs, .tag = 100u + i};
        (rcq ? cfg.shared_rcq : cfg.shared_cq) = shared;
        conns.push_back(must(s.add(cfg)));
        for (int m = 0; m < msgs; ++m) {
            const std::size_t slot = static_cast<std::size_t>(i * msgs + m);
            REMORA_ASSERT_OK(conns.back().recv(in_mr, slot * 64, 64,
                                               {.context = reinterpret_cast<void*>(slot + 1)}));
        }
    }
    EXPECT_EQ(shared.reserved(), rcq ? conns_n * msgs : conns_n * 2 * msgs);
    buffer out(64);
    auto out_mr =
        must(memory_region::create(s.client_dom, out.span(), usage::send | usage::receive));
    for (int i = 0; i < conns_n; ++i) {
        for (int m = 0; m < msgs; ++m) {
            const std::string text = "client " + std::to_string(i) + " msg " + std::to_string(m);
            std::memcpy(out.bytes.data(), text.data(), text.size());
            REMORA_ASSERT_OK(s.clients[i].send(out_mr, 0, text.size()));
            auto done = collect(s.clients[i].cq(), 1, false);
            ASSERT_EQ(done.size(), 1u);
            ASSERT_TRUE(done[0].ok());
        }
    }
    auto got = collect(shared.queue(), conns_n * msgs, true);
    ASSERT_EQ(got.size(), static_cast<std::size_t>(conns_n * msgs));
    std::map<std::uint64_t, int> per_tag;
    for (const completion& c : got) {
        ASSERT_TRUE(c.ok()) << c.status.message();
        ASSERT_EQ(c.op, op::recv);
        const auto slot = reinterpret_cast<std::uintptr_t>(c.context) - 1;
        const int conn = static_cast<int>(slot / msgs);
        EXPECT_EQ(c.tag, 100u + conn);  // the tag names the connection the context belongs to
        const std::string text(reinterpret_cast<const char*>(inbox.bytes.data() + slot * 64),
                               c.bytes);
        EXPECT_EQ(text.rfind("client " + std::to_string(conn) + " msg ", 0), 0u) << text;
        ++per_tag[c.tag];
    }
    for (int i = 0; i < conns_n; ++i) {
        EXPECT_EQ(per_tag[100u + i], msgs);
        EXPECT_EQ(conns[i].in_flight(), 0u);
    }
    // Replies: their send completions are on the shared CQ, or on each connection's own CQ.
    for (int i = 0; i < conns_n; ++i) {
        REMORA_ASSERT_OK(conns[i].send(in_mr, 0, 8, {.context = &conns[i]}));
        REMORA_ASSERT_OK(s.clients[i].recv(out_mr, 0, 64));
    }
    for (int i = 0; i < conns_n; ++i) {
        auto sent = collect(rcq ? conns[i].cq() : shared.queue(), 1, true);
        ASSERT_EQ(sent.size(), 1u);
        EXPECT_EQ(sent[0].op, op::send);
        if (!rcq) {
            EXPECT_EQ(sent[0].context, &conns[sent[0].tag - 100]);
        }
        EXPECT_EQ(collect(s.clients[i].cq(), 1, true).size(), 1u);
    }
}

TEST_P(shared_cq_test, completions_of_many_connections_carry_their_tags) {
    exchange_on_shared(GetParam(), false);
}

TEST_P(shared_cq_test, receives_of_many_connections_share_one_rcq) {
    exchange_on_shared(GetParam(), true);
}

// A connection destroyed with receives posted and completions still unread in the shared CQ:
// its entries return, its completions are dropped, every other connection's are delivered.
TEST_P(shared_cq_test, destroying_a_connection_drops_only_its_completions) {
    for (bool progress : {false, true}) {
        SCOPED_TRACE(progress ? "progress thread" : "application polls");
        auto s = server_side::open(GetParam());
        auto shared =
            must(shared_completion_queue::create(s.dom, {.size = 48, .progress_thread = progress}));
        std::vector<std::optional<connection>> conns;
        buffer inbox(3 * 8 * 32);
        auto in_mr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
        std::atomic<int> callbacks{0};
        static std::atomic<int>* counter = nullptr;
        counter = &callbacks;
        for (std::uint64_t i = 0; i < 3; ++i) {
            conns.emplace_back(
                must(s.add({.sq_size = 8, .rq_size = 8, .tag = i, .shared_cq = shared})));
            for (int m = 0; m < 8; ++m) {
                // Connection 1's receives report to a callback that must never run once it is
                // destroyed.
                op_options o{.context = reinterpret_cast<void*>(i + 1)};
                if (i == 1) {
                    o.callback = [](const completion&) { counter->fetch_add(1); };
                }
                REMORA_ASSERT_OK(conns.back()->recv(in_mr, (i * 8 + m) * 32, 32, o));
            }
        }
        EXPECT_EQ(shared.reserved(), 48u);
        buffer out(32);
        std::memset(out.bytes.data(), 'm', 16);
        auto out_mr = must(memory_region::create(s.client_dom, out.span(), usage::send));
        // Every client sends 4 messages; their send completions say they left.
        for (auto& c : s.clients) {
            for (int m = 0; m < 4; ++m) {
                REMORA_ASSERT_OK(c.send(out_mr, 0, 16));
            }
            ASSERT_EQ(collect(c.cq(), 4, true).size(), 4u);
        }
        // Let them land in the shared CQ without reading it (the callbacks would run on read):
        // calling into the provider for the connections' events and arming the CQ drive tcp's
        // progress, until
        // all 12 messages are in the server's memory (the provider writes each one's completion
        // as it places it). A progress thread reads them as they come: connection 1's 4
        // callbacks run there.
        const int expected_callbacks = progress ? 4 : 0;
        auto all_landed = [&] {
            for (std::size_t i = 0; i < 3; ++i) {
                for (std::size_t m = 0; m < 4; ++m) {
                    const auto* at = inbox.bytes.data() + (i * 8 + m) * 32;
                    if (string_of({at, 16}) != std::string(16, 'm')) {
                        return false;
                    }
                }
            }
            return true;
        };
        const auto until = std::chrono::steady_clock::now() + 10s;
        while ((!all_landed() || callbacks.load() < expected_callbacks) &&
               std::chrono::steady_clock::now() < until) {
            for (auto& c : conns) {
                (void)c->next_event(1ms);
            }
            (void)shared.queue().arm();  // tcp progresses in fi_trywait too; it reads nothing
        }
        ASSERT_TRUE(all_landed());
        ASSERT_EQ(callbacks.load(), expected_callbacks);
        conns[1].reset();
        EXPECT_EQ(shared.reserved(), 32u);
        EXPECT_EQ(shared.connections(), 2u);
        auto got = collect(shared.queue(), 8, true, 5s);
        ASSERT_EQ(got.size(), 8u);
        for (const completion& c : got) {
            EXPECT_TRUE(c.ok()) << c.status.message();
            EXPECT_NE(c.tag, 1u);
            EXPECT_EQ(c.context, reinterpret_cast<void*>(c.tag + 1));
        }
        // Its canceled receives never reach their callback.
        EXPECT_EQ(callbacks.load(), expected_callbacks);
        // Nothing more: connection 1's messages and canceled receives are gone.
        completion extra[4];
        EXPECT_EQ(must(shared.queue().poll(extra)), 0u);
        // The freed entries serve a new connection, and the others keep working.
        conns.emplace_back(
            must(s.add({.sq_size = 8, .rq_size = 8, .tag = 7, .shared_cq = shared})));
        EXPECT_EQ(shared.reserved(), 48u);
        REMORA_ASSERT_OK(conns[3]->recv(in_mr, 0, 32, {.context = &conns}));
        REMORA_ASSERT_OK(s.clients.back().send(out_mr, 0, 16));
        auto fresh = collect(shared.queue(), 1, true);
        ASSERT_EQ(fresh.size(), 1u);
        EXPECT_EQ(fresh[0].tag, 7u);
        EXPECT_EQ(fresh[0].context, &conns);
        EXPECT_EQ(conns[0]->in_flight(), 4u);  // its 4 remaining receives stay posted
        conns.clear();
        EXPECT_EQ(shared.reserved(), 0u);
        EXPECT_EQ(shared.connections(), 0u);
    }
}

// Client side: 8 connections whose every operation completes on one CQ sized exactly to their
// queues, driven flat out with mixed reads and writes and callbacks: the budget holds (the CQ
// cannot overflow), every callback runs once, every entry comes back.
TEST_P(shared_cq_test, eight_connections_flat_out_on_an_exactly_sized_cq) {
    constexpr int conns_n = 8;
    constexpr int per_conn = 1500;
    auto s = server_side::open(GetParam());
    auto shared = must(shared_completion_queue::create(s.client_dom, {.size = conns_n * 8}));
    buffer target(conns_n * 4096);
    auto tmr = must(
        memory_region::create(s.dom, target.span(), usage::write_destination | usage::read_source));
    const auto dst = must(tmr.describe());
    std::vector<connection> server_conns;
    // Connect from the client side with the shared CQ: accept on the server with a progress
    // thread (one-sided access on tcp needs the target to make progress).
    for (std::uint64_t i = 0; i < conns_n; ++i) {
        server_conns.push_back(
            must(s.add({.progress_thread = true},
                       {.sq_size = 4, .rq_size = 4, .tag = i, .shared_cq = shared})));
    }
    ASSERT_EQ(shared.reserved(), static_cast<std::size_t>(conns_n * 8));
    buffer local(conns_n * 4096);
    auto lmr = must(memory_region::create(s.client_dom, local.span(),
                                          usage::write_source | usage::read_destination));
    struct tally {
        std::atomic<int> done[conns_n];
        std::atomic<int> errors{0};
    };
    static tally t;
    for (auto& d : t.done) {
        d = 0;
    }
    t.errors = 0;
    std::vector<int> posted(conns_n, 0);
    int total_done = 0;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    completion buf[16];
    while (total_done < conns_n * per_conn && std::chrono::steady_clock::now() < deadline) {
        for (int i = 0; i < conns_n; ++i) {
            while (posted[i] < per_conn) {
                const bool write = posted[i] % 3 != 0;
                const std::size_t off = static_cast<std::size_t>(i) * 4096 + (posted[i] % 8) * 512;
                op_options o{.context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(i))};
                if (posted[i] % 2 == 0) {
                    o.callback = [](const completion& c) {
                        if (!c.ok() || c.tag != reinterpret_cast<std::uintptr_t>(c.context)) {
                            ++t.errors;
                        }
                        ++t.done[c.tag];
                    };
                }
                auto r = write ? s.clients[i].write(dst, off, lmr, off, 512, o)
                               : s.clients[i].read(lmr, off, dst, off, 512, o);
                if (!r) {
                    ASSERT_ERRC(r, errc::would_block);
                    break;
                }
                ++posted[i];
            }
        }
        auto n = shared.queue().poll(buf);
        ASSERT_TRUE(n.has_value()) << n.error().what();
        for (std::size_t k = 0; k < *n; ++k) {
            if (!buf[k].ok() || buf[k].tag != reinterpret_cast<std::uintptr_t>(buf[k].context)) {
                ++t.errors;
            }
            ++t.done[buf[k].tag];
        }
        total_done = 0;
        for (auto& d : t.done) {
            total_done += d.load();
        }
    }
    EXPECT_EQ(t.errors.load(), 0);
    for (int i = 0; i < conns_n; ++i) {
        EXPECT_EQ(t.done[i].load(), per_conn) << "connection " << i;
        EXPECT_EQ(s.clients[i].in_flight(), 0u);
    }
    EXPECT_EQ(must(shared.queue().poll(buf)), 0u);
    s.clients.clear();
    EXPECT_EQ(shared.reserved(), 0u);
}

// completion: "a peer's write with immediate data carries no local operation: on a shared CQ it
// reports the shared CQ's tag" (shared_cq_config::tag), on a shared RCQ the RCQ's, never the
// tag of whichever connection it came through. Waited for through fd() and arm(), as an
// application's own epoll would.
void remote_write_reports_the_shared_tag(const std::string& provider, bool rcq) {
    auto s = server_side::open(provider);
    auto shared = must(shared_completion_queue::create(s.dom, {.size = 64, .tag = 77}));
    buffer target(4096);
    auto tmr = must(memory_region::create(s.dom, target.span(), usage::write_destination));
    const auto dst = must(tmr.describe());
    std::vector<connection> conns;
    for (std::uint64_t i = 0; i < 2; ++i) {
        connection_config cfg{.sq_size = 4, .rq_size = 4, .tag = 100 + i};
        (rcq ? cfg.shared_rcq : cfg.shared_cq) = shared;
        conns.push_back(must(s.add(cfg)));
    }
    buffer src(64);
    auto smr = must(memory_region::create(s.client_dom, src.span(), usage::write_source));
    completion_queue& q = shared.queue();
    for (std::uint64_t i = 0; i < 2; ++i) {
        std::memset(src.bytes.data(), 'a' + static_cast<int>(i), 16);
        REMORA_ASSERT_OK(
            s.clients[i].write_with_imm(dst, 64 * i, smr, 0, 16, 0x1000 + i, {.context = &src}));
        auto sent = collect(s.clients[i].cq(), 1, true);
        ASSERT_EQ(sent.size(), 1u);
        ASSERT_TRUE(sent[0].ok()) << sent[0].status.message();
        // Block on the CQ's fd until the peer's write is reported.
        std::vector<completion> got;
        completion buf[4];
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (got.empty() && std::chrono::steady_clock::now() < until) {
            if (must(q.arm())) {
                pollfd pfd{q.fd(), POLLIN, 0};
                ASSERT_GE(::poll(&pfd, 1, 100), 0);
            }
            const std::size_t n = must(q.poll(buf));
            got.insert(got.end(), buf, buf + n);
        }
        ASSERT_EQ(got.size(), 1u) << "connection " << i;
        EXPECT_TRUE(got[0].ok()) << got[0].status.message();
        EXPECT_EQ(got[0].op, op::remote_write);
        EXPECT_TRUE(got[0].has_imm);
        EXPECT_EQ(got[0].imm, 0x1000 + i);
        EXPECT_EQ(got[0].context, nullptr);
        EXPECT_EQ(got[0].tag, 77u) << "connection " << i << " (tag " << 100 + i << ")";
        EXPECT_EQ(string_of(std::span(target.bytes).subspan(64 * i, 16)),
                  std::string(16, static_cast<char>('a' + i)));
    }
}

TEST_P(shared_cq_test, a_peers_write_with_imm_carries_the_shared_cqs_tag) {
    remote_write_reports_the_shared_tag(GetParam(), false);
}

TEST_P(shared_cq_test, a_peers_write_with_imm_carries_the_shared_rcqs_tag) {
    remote_write_reports_the_shared_tag(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(providers, shared_cq_test, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

// SPDX-License-Identifier: BSD-3-Clause
// From a completion queue back to its connection (completion_queue::connection): a connection's
// own CQ and receive CQ name it among several, also after it is moved, and a channel's event
// names the connection that fired; a CQ shared by several connections names none (the
// completions' tags do), and a destroyed connection is never named again. On tcp and sockets,
// and (own CQs) on RDM peers over shm and tcp;ofi_rxm.
#include <cstdint>
#include <future>
#include <set>

#include "support.hpp"

namespace remora::test {
namespace {

class cq_connection : public testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        if (is_rdm(GetParam())) {
            auto d =
                domain::open({.provider = GetParam().substr(4), .endpoint = endpoint_type::rdm});
            if (!d)
                GTEST_SKIP() << GetParam() << " offers no RDM endpoint here: " << d.error().what();
        }
    }
};

// Three connections (every other one with a receive CQ): each CQ names its own; a move carries
// the name to the new object, and a moved-from handle's CQ is the same CQ, now naming the new one.
TEST_P(cq_connection, own_cqs_name_their_connection_among_several) {
    std::vector<connected_pair> pairs;
    for (int i = 0; i < 3; ++i) {
        const connection_config cfg{.rcq = (i % 2) == 1, .tag = static_cast<std::uint64_t>(i)};
        pairs.push_back(must(connect_pair(GetParam(), cfg, cfg)));
    }
    std::set<const connection*> named;
    for (auto& p : pairs) {
        for (connection* c : {&*p.server, &*p.client}) {
            EXPECT_EQ(c->cq().connection(), c);
            if (c->rcq() != nullptr) {
                EXPECT_EQ(c->rcq()->connection(), c);
                EXPECT_NE(c->rcq(), &c->cq());
            }
            named.insert(c->cq().connection());
        }
    }
    EXPECT_EQ(named.size(), 6u);  // six connections, six distinct names
    // Moved into a vector that grows (every element moves again): each CQ follows its connection.
    std::vector<connection> moved;
    for (auto& p : pairs) {
        completion_queue* cq = &p.server->cq();
        completion_queue* rcq = p.server->rcq();
        moved.push_back(std::move(*p.server));
        EXPECT_EQ(cq, &moved.back().cq());  // the same CQ, now reached through the new handle
        EXPECT_EQ(cq->connection(), &moved.back());
        if (rcq != nullptr) {
            EXPECT_EQ(rcq->connection(), &moved.back());
        }
    }
    for (auto& c : moved) {
        EXPECT_EQ(c.cq().connection(), &c);
        if (c.rcq() != nullptr) {
            EXPECT_EQ(c.rcq()->connection(), &c);
        }
    }
    // Move assignment: the target's own connection goes, the source's CQ names the target.
    connection& first = moved.front();
    completion_queue* second_cq = &moved[1].cq();
    first = std::move(moved[1]);
    EXPECT_EQ(second_cq->connection(), &first);
    EXPECT_EQ(first.cq().tag(), 1u);
    // The names still work for traffic: a completion read from a CQ is its connection's.
    buffer src(64), dst(64);
    auto& p = pairs[2];
    auto smr = must(memory_region::create(p.client_domain, src.span(), usage::send));
    auto dmr = must(memory_region::create(p.server_domain, dst.span(), usage::receive));
    connection& server = moved[2];
    REMORA_ASSERT_OK(server.recv(dmr, 0, 64));
    REMORA_ASSERT_OK(p.client->send(smr, 0, 8));
    completion_queue& rq = server.rcq() != nullptr ? *server.rcq() : server.cq();
    auto got = collect(rq, 1, false);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].op, op::recv);
    EXPECT_EQ(rq.connection(), &server);
    EXPECT_EQ(rq.connection()->config().tag, got[0].tag);
    EXPECT_EQ(collect(p.client->cq(), 1, false).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(providers, cq_connection,
                         testing::Values("tcp", "sockets", "rdm:shm", "rdm:tcp;ofi_rxm"),
                         provider_name);

// MSG only: a channel shared by several connections, and shared CQs.
class cq_connection_msg : public testing::TestWithParam<std::string> {};

// A server's connections on one shared channel: every event's CQ names the connection whose tag
// the event carries. A destroyed connection's CQ leaves the channel: with a message for it still
// unread, the channel reports only the others.
TEST_P(cq_connection_msg, a_channel_event_names_the_connection_that_fired) {
    constexpr int conns = 3;
    buffer inbox(conns * 4 * 16), out(16);
    auto ch = must(completion_channel::create());
    auto s = server_side::open(GetParam());
    std::vector<std::optional<connection>> servers;
    auto in_mr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
    auto out_mr = must(memory_region::create(s.client_dom, out.span(), usage::send));
    for (int i = 0; i < conns; ++i) {
        servers.emplace_back(must(s.add({.channel = channel_mode::shared,
                                         .shared_channel = ch,
                                         .tag = static_cast<std::uint64_t>(10 + i)})));
        for (int k = 0; k < 4; ++k)
            REMORA_ASSERT_OK(servers.back()->recv(in_mr, (i * 4 + k) * 16, 16));
    }
    // One message from each client: each event's CQ names the connection its tag names.
    auto reap_clients = [&] {
        for (auto& c : s.clients)
            EXPECT_EQ(collect(c.cq(), 1, false).size(), 1u);
    };
    for (auto& c : s.clients)
        REMORA_ASSERT_OK(c.send(out_mr, 0, 16));
    reap_clients();
    std::set<std::uint64_t> seen;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (seen.size() < conns && std::chrono::steady_clock::now() < deadline) {
        auto ev = ch.wait(1s);
        if (!ev) {
            ASSERT_TRUE(ev.error() == errc::timed_out) << ev.error().what();
            continue;
        }
        ASSERT_NE(ev->cq, nullptr);
        connection* named = ev->cq->connection();
        ASSERT_NE(named, nullptr);
        const auto idx = ev->tag - 10;
        ASSERT_LT(idx, static_cast<std::uint64_t>(conns));
        EXPECT_EQ(named, &*servers[idx]) << "tag " << ev->tag;
        EXPECT_EQ(named->config().tag, ev->tag);
        completion c[4];
        auto n = ev->cq->poll(c);
        ASSERT_TRUE(n) << n.error().what();
        for (std::size_t j = 0; j < *n; ++j) {
            EXPECT_EQ(c[j].tag, ev->tag);
            seen.insert(c[j].tag);
        }
    }
    ASSERT_EQ(seen.size(), static_cast<std::size_t>(conns));
    // Connection 0 gets a message, and is destroyed before anyone reads it.
    REMORA_ASSERT_OK(s.clients[0].send(out_mr, 0, 16));
    EXPECT_EQ(collect(s.clients[0].cq(), 1, false).size(), 1u);
    const auto gone = reinterpret_cast<std::uintptr_t>(&servers[0]->cq());
    servers[0].reset();
    EXPECT_EQ(ch.attached(), static_cast<std::size_t>(conns - 1));
    REMORA_ASSERT_OK(s.clients[2].send(out_mr, 0, 16));
    EXPECT_EQ(collect(s.clients[2].cq(), 1, false).size(), 1u);
    bool got = false;
    while (!got && std::chrono::steady_clock::now() < deadline) {
        auto ev = ch.wait(1s);
        if (!ev) {
            ASSERT_TRUE(ev.error() == errc::timed_out) << ev.error().what();
            continue;
        }
        ASSERT_NE(reinterpret_cast<std::uintptr_t>(ev->cq), gone);
        ASSERT_TRUE(ev->tag == 11u || ev->tag == 12u) << ev->tag;
        EXPECT_EQ(ev->cq->connection(), &*servers[ev->tag - 10]);
        completion c[4];
        auto n = ev->cq->poll(c);
        ASSERT_TRUE(n) << n.error().what();
        for (std::size_t j = 0; j < *n; ++j) {
            EXPECT_EQ(c[j].tag, 12u);
            got = true;
        }
    }
    EXPECT_TRUE(got);
}

// A CQ shared by several connections names none of them: its completions' tags do (here the index
// of the connection in the application's table). Once a connection is destroyed its tag never
// shows again, and the CQ still names nobody.
TEST_P(cq_connection_msg, a_shared_cq_names_no_connection_and_tags_do) {
    auto s = server_side::open(GetParam());
    auto shared = must(shared_completion_queue::create(s.dom, {.size = 64}));
    buffer inbox(2 * 4 * 16), out(16);
    auto in_mr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
    auto out_mr = must(memory_region::create(s.client_dom, out.span(), usage::send));
    std::vector<std::optional<connection>> table;  // the tag is the index
    for (std::uint64_t i = 0; i < 2; ++i) {
        table.emplace_back(
            must(s.add({.sq_size = 8, .rq_size = 8, .tag = i, .shared_cq = shared})));
        EXPECT_EQ(table.back()->cq().connection(), nullptr);
        EXPECT_EQ(&table.back()->cq(), &shared.queue());
        for (int k = 0; k < 4; ++k)
            REMORA_ASSERT_OK(table.back()->recv(in_mr, (i * 4 + k) * 16, 16));
    }
    EXPECT_EQ(shared.queue().connection(), nullptr);
    for (auto& c : s.clients) {
        REMORA_ASSERT_OK(c.send(out_mr, 0, 16));
        EXPECT_EQ(collect(c.cq(), 1, false).size(), 1u);
    }
    auto got = collect(shared.queue(), 2, false);
    ASSERT_EQ(got.size(), 2u);
    std::set<std::uint64_t> tags;
    for (const auto& c : got) {
        ASSERT_LT(c.tag, table.size());
        ASSERT_TRUE(table[c.tag].has_value());
        EXPECT_EQ(table[c.tag]->config().tag, c.tag);
        tags.insert(c.tag);
    }
    EXPECT_EQ(tags, (std::set<std::uint64_t>{0, 1}));
    // Connection 0: a message lands, then the connection is destroyed before it is read.
    REMORA_ASSERT_OK(s.clients[0].send(out_mr, 0, 16));
    EXPECT_EQ(collect(s.clients[0].cq(), 1, false).size(), 1u);
    table[0].reset();
    EXPECT_EQ(shared.connections(), 1u);
    REMORA_ASSERT_OK(s.clients[1].send(out_mr, 0, 16));
    EXPECT_EQ(collect(s.clients[1].cq(), 1, false).size(), 1u);
    auto after = collect(shared.queue(), 1, false);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].tag, 1u);
    EXPECT_EQ(shared.queue().connection(), nullptr);
    completion extra[4];
    auto n = shared.queue().poll(extra);
    ASSERT_TRUE(n);
    EXPECT_EQ(*n, 0u) << "a destroyed connection's completion was reported";
}

INSTANTIATE_TEST_SUITE_P(providers, cq_connection_msg, testing::ValuesIn(providers()),
                         provider_name);

}  // namespace
}  // namespace remora::test

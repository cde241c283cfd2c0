// SPDX-License-Identifier: BSD-3-Clause
// Shared receive queues (shared_receive_queue.hpp) on the providers that have a shared receive
// context: tcp and sockets (MSG), sockets (RDM peers): messages from many connections land in the
// receives posted to the queue, complete on its CQ; bad input is refused. The RDM providers
// without one (shm, tcp;ofi_rxm, net) refuse the queue, naming receive_pool.
#include "support.hpp"

#include <set>

namespace remora::test {
namespace {

class srq : public testing::TestWithParam<std::string> {};

// The receiving side of a test: a domain whose connections take the queue, and clients in a
// domain of their own. MSG: a listener accepting them (server_side). "rdm:<provider>": each
// add() opens a peer on either side and attaches them to each other.
struct side {
    std::optional<server_side> msg;
    domain dom;
    domain client_dom;
    std::vector<connection> rdm_clients;

    static side open(const std::string& provider) {
        if (!is_rdm(provider)) {
            auto s = server_side::open(provider);
            domain d = s.dom, cd = s.client_dom;
            return side{std::move(s), d, cd, {}};
        }
        const std::string p = provider.substr(4);
        return side{std::nullopt,
                    must(domain::open({.provider = p, .endpoint = endpoint_type::rdm})),
                    must(domain::open({.provider = p, .endpoint = endpoint_type::rdm})),
                    {}};
    }
    std::vector<connection>& clients() { return msg ? msg->clients : rdm_clients; }
    result<connection> add(const connection_config& server_cfg,
                           const connection_config& client_cfg = {}) {
        if (msg) {
            return msg->add(server_cfg, client_cfg);
        }
        auto server = connection::open_peer(dom, server_cfg);
        if (!server) {
            return server;
        }
        auto client = connection::open_peer(client_dom, client_cfg);
        if (!client) {
            return fail(client.error());
        }
        if (auto r = server->attach(client->local_address()); !r) {
            return fail(r.error());
        }
        if (auto r = client->attach(server->local_address()); !r) {
            return fail(r.error());
        }
        rdm_clients.push_back(std::move(*client));
        return server;
    }
};

// The RDM providers here with a shared receive context: sockets only (docs/providers.md).
std::vector<std::string> srq_providers() {
    auto p = providers();
    p.push_back("rdm:sockets");
    return p;
}

constexpr std::size_t slot = 64;

// Three clients send two messages each; six receives posted once to the queue take them all,
// whichever connection they arrived on, and complete on the queue's CQ with its tag.
TEST_P(srq, messages_of_many_connections_fill_the_shared_receives) {
    auto s = side::open(GetParam());
    auto q = must(shared_receive_queue::create(s.dom, {.size = 8, .tag = 77}));
    EXPECT_EQ(q.size(), 8u);
    std::vector<connection> server_conns;
    for (int i = 0; i < 3; ++i) {
        server_conns.push_back(must(s.add({.srq = q})));
    }
    EXPECT_EQ(q.connections(), 3u);
    buffer inbox(8 * slot), outbox(6 * slot);
    auto rmr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
    auto smr = must(memory_region::create(s.client_dom, outbox.span(), usage::send));
    int ctx[6];
    for (int j = 0; j < 6; ++j) {
        REMORA_ASSERT_OK(q.recv(rmr, j * slot, slot, {.context = &ctx[j]}));
    }
    EXPECT_EQ(q.posted(), 6u);
    std::set<std::string> sent;
    for (int i = 0; i < 3; ++i) {
        for (int k = 0; k < 2; ++k) {
            const std::string m = "client " + std::to_string(i) + " message " + std::to_string(k);
            std::memcpy(outbox.bytes.data() + (2 * i + k) * slot, m.data(), m.size());
            sent.insert(m);
            REMORA_ASSERT_OK(s.clients()[i].send(smr, (2 * i + k) * slot, m.size()));
        }
    }
    auto got = collect(q.cq(), 6, false);
    ASSERT_EQ(got.size(), 6u);
    std::set<void*> contexts;
    std::set<std::string> received;
    for (const auto& c : got) {
        EXPECT_TRUE(c.ok()) << c.status.message();
        EXPECT_EQ(c.op, op::recv);
        EXPECT_EQ(c.tag, 77u);
        EXPECT_EQ(c.bytes, 18u);
        contexts.insert(c.context);
        const auto j = static_cast<int*>(c.context) - ctx;
        ASSERT_TRUE(j >= 0 && j < 6);
        received.insert(
            std::string(reinterpret_cast<const char*>(inbox.bytes.data()) + j * slot, c.bytes));
    }
    EXPECT_EQ(contexts.size(), 6u);
    EXPECT_EQ(received, sent);
    EXPECT_EQ(q.posted(), 0u);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(collect(s.clients()[i].cq(), 2, false).size(), 2u);
    }
}

// A connection that goes away takes nothing of the queue: its receives serve the others.
TEST_P(srq, receives_outlive_a_connection) {
    auto s = side::open(GetParam());
    auto q = must(shared_receive_queue::create(s.dom, {.size = 4}));
    auto a = must(s.add({.srq = q}));
    auto b = must(s.add({.srq = q}));
    buffer inbox(slot), outbox(slot);
    auto rmr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
    auto smr = must(memory_region::create(s.client_dom, outbox.span(), usage::send));
    REMORA_ASSERT_OK(q.recv(rmr, 0, slot));
    { auto gone = std::move(a); }
    EXPECT_EQ(q.connections(), 1u);
    EXPECT_EQ(q.posted(), 1u);
    std::memcpy(outbox.bytes.data(), "to b", 4);
    REMORA_ASSERT_OK(s.clients()[1].send(smr, 0, 4));
    auto got = collect(q.cq(), 1, false);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(inbox.bytes.data()), 4), "to b");
}

// The same with receive CQs of their own: the receives left in the queue when a connection (an
// RDM peer) and its CQ go away complete on the CQ of the connection the next message arrives on.
TEST_P(srq, receives_outlive_a_connection_and_its_cq) {
    auto s = side::open(GetParam());
    auto q = must(shared_receive_queue::create(s.dom, {.size = 4}));
    auto a = must(s.add({.rcq = true, .tag = 1, .srq = q}));
    auto b = must(s.add({.rcq = true, .tag = 2, .srq = q}));
    buffer inbox(2 * slot), outbox(slot);
    auto rmr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
    auto smr = must(memory_region::create(s.client_dom, outbox.span(), usage::send));
    REMORA_ASSERT_OK(q.recv(rmr, 0, slot));
    REMORA_ASSERT_OK(q.recv(rmr, slot, slot));
    { auto gone = std::move(a); }
    EXPECT_EQ(q.connections(), 1u);
    EXPECT_EQ(q.posted(), 2u);
    std::memcpy(outbox.bytes.data(), "to b", 4);
    REMORA_ASSERT_OK(s.clients()[1].send(smr, 0, 4));
    auto got = collect(*b.rcq(), 1, false);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(got[0].tag, 2u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(inbox.bytes.data()), 4), "to b");
    EXPECT_EQ(q.posted(), 1u);
}

// With receive CQs of their own, the connections tell which one a message came from: the
// queue's receives complete on the receiving connection's CQ, with its tag.
TEST_P(srq, own_receive_cqs_tell_the_connection) {
    auto s = side::open(GetParam());
    auto q = must(shared_receive_queue::create(s.dom, {.size = 4, .tag = 9}));
    auto a = must(s.add({.rcq = true, .tag = 1, .srq = q}));
    auto b = must(s.add({.rcq = true, .tag = 2, .srq = q}));
    ASSERT_NE(a.rcq(), nullptr);
    buffer inbox(4 * slot), outbox(2 * slot);
    auto rmr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
    auto smr = must(memory_region::create(s.client_dom, outbox.span(), usage::send));
    int ctx[4];
    for (int j = 0; j < 4; ++j) {
        REMORA_ASSERT_OK(q.recv(rmr, j * slot, slot, {.context = &ctx[j]}));
    }
    std::memcpy(outbox.bytes.data(), "for a", 5);
    std::memcpy(outbox.bytes.data() + slot, "for b", 5);
    REMORA_ASSERT_OK(s.clients()[0].send(smr, 0, 5));
    REMORA_ASSERT_OK(s.clients()[1].send(smr, slot, 5));
    auto got_a = collect(*a.rcq(), 1, false);
    auto got_b = collect(*b.rcq(), 1, false);
    ASSERT_EQ(got_a.size(), 1u);
    ASSERT_EQ(got_b.size(), 1u);
    EXPECT_EQ(got_a[0].tag, 1u);
    EXPECT_EQ(got_b[0].tag, 2u);
    ASSERT_TRUE(got_a[0].ok()) << got_a[0].status.message();
    ASSERT_TRUE(got_b[0].ok()) << got_b[0].status.message();
    auto text = [&](const completion& c) {
        const auto j = static_cast<int*>(c.context) - ctx;
        EXPECT_TRUE(j >= 0 && j < 4);
        return std::string(reinterpret_cast<const char*>(inbox.bytes.data()) + j * slot, c.bytes);
    };
    EXPECT_EQ(text(got_a[0]), "for a");  // each completion names the connection it came from
    EXPECT_EQ(text(got_b[0]), "for b");
    EXPECT_EQ(q.posted(), 2u);
    completion none[1];
    auto on_queue = q.cq().poll(none);
    REMORA_ASSERT_OK(on_queue);
    EXPECT_EQ(*on_queue, 0u);  // nothing of theirs on the queue's CQ
}

TEST_P(srq, bad_input_is_refused) {
    auto s = side::open(GetParam());
    auto q = must(shared_receive_queue::create(s.dom, {.size = 2}));
    EXPECT_ERRC(shared_receive_queue::create(s.dom, {.size = 0}), errc::invalid_argument);
    auto conn = must(s.add({.srq = q}));
    buffer mem(4 * slot);
    auto rmr = must(memory_region::create(s.dom, mem.span(), usage::receive));
    auto smr = must(memory_region::create(s.dom, mem.span(), usage::send));
    auto other = must(memory_region::create(s.client_dom, mem.span(), usage::receive));
    EXPECT_ERRC(conn.recv(rmr, 0, slot), errc::bad_state);  // receives belong to the queue
    EXPECT_ERRC(q.recv(smr, 0, slot), errc::access_denied);
    EXPECT_ERRC(q.recv(rmr, 4 * slot - 1, 2), errc::out_of_range);
    EXPECT_ERRC(q.recv(other, 0, slot), errc::invalid_argument);
    EXPECT_ERRC(q.recv(rmr, 0, slot, {.report = completion_mode::on_error}),
                errc::invalid_argument);
    EXPECT_EQ(q.posted(), 0u);
    REMORA_ASSERT_OK(q.recv(rmr, 0, slot));
    REMORA_ASSERT_OK(q.recv(rmr, slot, slot));
    EXPECT_ERRC(q.recv(rmr, 2 * slot, slot), errc::would_block);
    EXPECT_EQ(q.posted(), 2u);
    EXPECT_ERRC(s.add({.srq = q, .addons = {remora::persistence_config{.service_depth = 2}}}),
                errc::invalid_argument);
    auto foreign = must(shared_receive_queue::create(s.client_dom, {.size = 2}));
    EXPECT_ERRC(s.add({.srq = foreign}), errc::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(providers, srq, testing::ValuesIn(srq_providers()), provider_name);

// The RDM providers of libfabric 1.17 without a shared receive context for RDM endpoints: shm
// and net open one but refuse an endpoint using it, tcp;ofi_rxm has none (docs/providers.md).
// The queue is refused with not_supported, naming the provider and receive_pool; sockets (RDM)
// has one (the srq suite above runs there).
class srq_unsupported : public testing::TestWithParam<std::string> {};

TEST_P(srq_unsupported, create_names_the_provider_and_receive_pool) {
    const std::string p = GetParam().substr(4);
    auto d = must(domain::open({.provider = p, .endpoint = endpoint_type::rdm}));
    EXPECT_FALSE(d.caps().shared_rx);
    auto q = shared_receive_queue::create(d);
    ASSERT_FALSE(q.has_value()) << p << " now has a shared receive context: update the docs";
    EXPECT_TRUE(q.error() == errc::not_supported) << q.error().what();
    const std::string what = q.error().what();
    EXPECT_NE(what.find("provider " + p + " (RDM endpoints)"), std::string::npos) << what;
    EXPECT_NE(what.find("receive_pool"), std::string::npos) << what;
}

INSTANTIATE_TEST_SUITE_P(providers, srq_unsupported, testing::ValuesIn(rdm_providers()),
                         provider_name);

// RDM: a peer not attached to the queue that sends to one of its peers' addresses consumes a
// receive, which completes with access_denied and nothing received; the next receive serves the
// attached peer.
TEST(srq_rdm, a_stranger_takes_a_receive_and_is_refused) {
    auto s = side::open("rdm:sockets");
    auto q = must(shared_receive_queue::create(s.dom, {.size = 4}));
    auto a = must(s.add({.rcq = true, .tag = 1, .srq = q}));
    auto stranger = must(connection::open_peer(s.client_dom));
    REMORA_ASSERT_OK(stranger.attach(a.local_address()));
    buffer inbox(2 * slot), outbox(2 * slot);
    auto rmr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
    auto smr = must(memory_region::create(s.client_dom, outbox.span(), usage::send));
    REMORA_ASSERT_OK(q.recv(rmr, 0, slot));
    REMORA_ASSERT_OK(q.recv(rmr, slot, slot));
    std::memcpy(outbox.bytes.data(), "intruder", 8);
    std::memcpy(outbox.bytes.data() + slot, "friend", 6);
    REMORA_ASSERT_OK(stranger.send(smr, 0, 8));
    auto refused = collect(*a.rcq(), 1, false);
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_EQ(refused[0].status, errc::access_denied) << refused[0].status.message();
    EXPECT_EQ(refused[0].bytes, 0u);
    EXPECT_EQ(q.posted(), 1u);
    REMORA_ASSERT_OK(s.clients()[0].send(smr, slot, 6));
    auto got = collect(*a.rcq(), 1, false);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(got[0].bytes, 6u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(inbox.bytes.data()) + slot, 6), "friend");
    EXPECT_EQ(q.posted(), 0u);
}

// The admission attach handshake needs receives of the connection's own: an RDM peer taking its
// messages from a queue is refused it, and nothing is posted.
TEST(srq_rdm, an_attach_handshake_is_refused) {
    auto s = side::open("rdm:sockets");
    auto q = must(shared_receive_queue::create(s.dom, {.size = 2}));
    auto a = must(s.add({.rcq = true, .srq = q}));
    auto gate = must(admission_gate::create(must(admission_key::generate())));
    EXPECT_ERRC(admit_peer(a, gate, {}, 1s), errc::not_supported);
    EXPECT_EQ(q.posted(), 0u);
    EXPECT_EQ(a.in_flight(), 0u);
}

TEST(srq_rdm, sockets_has_a_shared_receive_context) {
    auto d = must(domain::open({.provider = "sockets", .endpoint = endpoint_type::rdm}));
    EXPECT_TRUE(d.caps().shared_rx);
    EXPECT_TRUE(d.caps().directed_receive);
}

}  // namespace
}  // namespace remora::test

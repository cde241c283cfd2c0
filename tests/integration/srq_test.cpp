// SPDX-License-Identifier: BSD-3-Clause
// Shared receive queues (shared_receive_queue.hpp) on the msg providers that have a shared
// receive context (tcp, sockets): messages from many connections land in the receives posted
// to the queue, complete on its CQ; bad input and unsupported providers are refused.
#include "support.hpp"

#include <set>

namespace remora::test {
namespace {

class srq : public testing::TestWithParam<std::string> {};

constexpr std::size_t slot = 64;

// Three clients send two messages each; six receives posted once to the queue take them all,
// whichever connection they arrived on, and complete on the queue's CQ with its tag.
TEST_P(srq, messages_of_many_connections_fill_the_shared_receives) {
    auto s = server_side::open(GetParam());
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
            REMORA_ASSERT_OK(s.clients[i].send(smr, (2 * i + k) * slot, m.size()));
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
        EXPECT_EQ(collect(s.clients[i].cq(), 2, false).size(), 2u);
    }
}

// A connection that goes away takes nothing of the queue: its receives serve the others.
TEST_P(srq, receives_outlive_a_connection) {
    auto s = server_side::open(GetParam());
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
    REMORA_ASSERT_OK(s.clients[1].send(smr, 0, 4));
    auto got = collect(q.cq(), 1, false);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(inbox.bytes.data()), 4), "to b");
}

// With receive CQs of their own, the connections tell which one a message came from: the
// queue's receives complete on the receiving connection's CQ, with its tag.
TEST_P(srq, own_receive_cqs_tell_the_connection) {
    auto s = server_side::open(GetParam());
    auto q = must(shared_receive_queue::create(s.dom, {.size = 4, .tag = 9}));
    auto a = must(s.add({.rcq = true, .tag = 1, .srq = q}));
    auto b = must(s.add({.rcq = true, .tag = 2, .srq = q}));
    ASSERT_NE(a.rcq(), nullptr);
    buffer inbox(4 * slot), outbox(2 * slot);
    auto rmr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
    auto smr = must(memory_region::create(s.client_dom, outbox.span(), usage::send));
    for (int j = 0; j < 4; ++j) {
        REMORA_ASSERT_OK(q.recv(rmr, j * slot, slot));
    }
    std::memcpy(outbox.bytes.data(), "for a", 5);
    std::memcpy(outbox.bytes.data() + slot, "for b", 5);
    REMORA_ASSERT_OK(s.clients[0].send(smr, 0, 5));
    REMORA_ASSERT_OK(s.clients[1].send(smr, slot, 5));
    auto got_a = collect(*a.rcq(), 1, false);
    auto got_b = collect(*b.rcq(), 1, false);
    ASSERT_EQ(got_a.size(), 1u);
    ASSERT_EQ(got_b.size(), 1u);
    EXPECT_EQ(got_a[0].tag, 1u);
    EXPECT_EQ(got_b[0].tag, 2u);
    EXPECT_TRUE(got_a[0].ok() && got_b[0].ok());
    EXPECT_EQ(q.posted(), 2u);
    completion none[1];
    auto on_queue = q.cq().poll(none);
    REMORA_ASSERT_OK(on_queue);
    EXPECT_EQ(*on_queue, 0u);  // nothing of theirs on the queue's CQ
}

TEST_P(srq, bad_input_is_refused) {
    auto s = server_side::open(GetParam());
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

INSTANTIATE_TEST_SUITE_P(providers, srq, testing::ValuesIn(providers()), provider_name);

// The RDM providers of libfabric 1.17 have no shared receive context (shm, tcp;ofi_rxm, net),
// nor does remora offer one on RDM: receive_pool is the answer there.
TEST(srq_rdm, not_supported_on_rdm_domains) {
    auto d = domain::open({.provider = "shm", .endpoint = endpoint_type::rdm});
    if (!d) {
        GTEST_SKIP() << "no shm: " << d.error().what();
    }
    EXPECT_ERRC(shared_receive_queue::create(*d), errc::not_supported);
}

}  // namespace
}  // namespace remora::test

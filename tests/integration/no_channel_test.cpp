// SPDX-License-Identifier: BSD-3-Clause
// channel_mode::none: a connection's CQs without a wait object (libfabric FI_WAIT_NONE), for an
// application that busy-polls. Its CQs give no fd; write, read and send/recv complete through
// poll() and through next()/wait() (which poll); a wait with nothing to come ends at its timeout;
// a shared channel is refused with it. On the connected providers and the RDM peers.
#include <cstring>
#include <numeric>

#include "support.hpp"

namespace remora::test {
namespace {

class no_channel : public testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        // The target's progress thread serves the client's reads (tcp's target must progress).
        const connection_config cfg{.channel = channel_mode::none};
        auto p = connect_pair(GetParam(), {.progress_thread = true}, cfg);
        ASSERT_TRUE(p) << p.error().message();
        pair_.emplace(std::move(*p));
        buf_.resize(64);
        std::iota(reinterpret_cast<unsigned char*>(buf_.data()),
                  reinterpret_cast<unsigned char*>(buf_.data()) + buf_.size(), 1);
        peer_.resize(64);
        auto mr = memory_region::create(
            pair_->client_domain, buf_,
            usage::write_source | usage::read_destination | usage::send | usage::receive);
        ASSERT_TRUE(mr) << mr.error().message();
        mr_.emplace(std::move(*mr));
        auto pmr = memory_region::create(
            pair_->server_domain, peer_,
            usage::write_destination | usage::read_source | usage::send | usage::receive);
        ASSERT_TRUE(pmr) << pmr.error().message();
        peer_mr_.emplace(std::move(*pmr));
        remote_ = must(peer_mr_->describe());
    }

    connection& client() { return *pair_->client; }

    // The buffers outlive the connections: a progress thread may still be in the provider with
    // them when the test ends.
    std::vector<std::byte> buf_, peer_;
    std::optional<connected_pair> pair_;
    std::optional<memory_region> mr_, peer_mr_;
    remote_region remote_;
};

TEST_P(no_channel, its_cqs_have_no_fd) {
    EXPECT_EQ(client().cq().fd(), -1);
    EXPECT_EQ(client().config().channel, channel_mode::none);
}

TEST_P(no_channel, a_write_and_a_read_complete_through_poll) {
    ASSERT_TRUE(client().write(remote_, 0, *mr_, 0, 32));
    auto w = collect(client().cq(), 1, false);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_TRUE(w[0].ok()) << w[0].status.message();
    EXPECT_EQ(w[0].op, op::write);
    ASSERT_TRUE(client().read(*mr_, 32, remote_, 0, 32));
    auto r = collect(client().cq(), 1, false);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_TRUE(r[0].ok()) << r[0].status.message();
    EXPECT_EQ(std::memcmp(buf_.data(), buf_.data() + 32, 32), 0);
}

TEST_P(no_channel, next_waits_by_polling) {
    ASSERT_TRUE(client().write(remote_, 0, *mr_, 0, 16));
    auto c = client().cq().next(10s);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_TRUE(c->ok());
    EXPECT_EQ(c->op, op::write);
}

TEST_P(no_channel, a_send_reaches_a_posted_receive_and_next_reports_both) {
    connection& server = *pair_->server;
    ASSERT_TRUE(server.recv(*peer_mr_, 0, 16));
    ASSERT_TRUE(client().send(*mr_, 0, 16));
    completion_queue& sq = server.rcq() != nullptr ? *server.rcq() : server.cq();
    auto got = collect(sq, 1, false);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].op, op::recv);
    EXPECT_EQ(std::memcmp(peer_.data(), buf_.data(), 16), 0);
    auto sent = client().cq().next(10s);
    ASSERT_TRUE(sent) << sent.error().message();
    EXPECT_EQ(sent->op, op::send);
}

TEST_P(no_channel, a_wait_with_nothing_to_come_ends_at_its_timeout) {
    const auto t0 = std::chrono::steady_clock::now();
    auto c = client().cq().next(50ms);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), errc::timed_out);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 50ms);
}

INSTANTIATE_TEST_SUITE_P(providers, no_channel, testing::ValuesIn([] {
                             auto v = providers();
                             v.push_back("rdm:shm");
                             v.push_back("rdm:tcp;ofi_rxm");
                             return v;
                         }()),
                         provider_name);

TEST(no_channel_config, a_shared_channel_is_refused_with_it) {
    auto ch = completion_channel::create();
    ASSERT_TRUE(ch);
    auto p = connect_pair("tcp", {}, {.channel = channel_mode::none, .shared_channel = *ch});
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error(), errc::invalid_argument);
}

}  // namespace
}  // namespace remora::test

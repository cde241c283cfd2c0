// SPDX-License-Identifier: BSD-3-Clause
// A read-after-write flush comes back only once every write posted before it on the connection
// was placed at the target: plain writes and writes with immediate data alike, on every
// provider. (shm serves a plain read at once, between the processes, but queues a write with
// immediate data for the target's progress: a read posted plainly overtook it.)
#include <cstring>
#include <string>
#include <vector>

#include <remora/persistence.hpp>

#include "support.hpp"

using namespace remora;
using namespace remora::test;

namespace {

class flush_order : public testing::TestWithParam<std::string> {};

std::vector<std::string> all_providers() {
    auto all = providers();
    for (auto& p : rdm_providers())
        all.push_back(p);
    return all;
}

TEST_P(flush_order, a_read_after_write_flush_covers_the_writes_before_it) {
    // The memory outlives the pair: the target's provider may still be sending a read's answer
    // out of it when the test's last completion arrives.
    buffer target(4096), local(4096);
    connection_config server;
    server.progress_thread = true;  // the target places the writes while the test waits
    auto p = must(connect_pair(GetParam(), server, {}));
    const auto& caps = p.server_domain.caps();
    if (caps.cq_data_size == 0 || caps.rx_cq_data)
        GTEST_SKIP() << GetParam() << ": no immediate data that takes no receive";
    auto tmr = must(
        memory_region::create(p.server_domain, target.span(),
                              usage::write_destination | usage::read_source | usage::flush_target));
    auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::write_source));
    auto desc = must(tmr.describe(0, 4096));
    constexpr int rounds = 300;
    int stale = 0;
    for (int i = 1; i <= rounds; ++i) {
        // Odd rounds: a write with immediate data, even ones: a plain write; each with its flush.
        const std::uint64_t v = static_cast<std::uint64_t>(i);
        std::memcpy(local.bytes.data(), &v, 8);
        const bool imm = i % 2 == 1;
        REMORA_ASSERT_OK(
            imm ? p.client->write_with_imm(desc, 64, lmr, 0, 8, static_cast<std::uint32_t>(i))
                : p.client->write(desc, 64, lmr, 0, 8));
        REMORA_ASSERT_OK(
            remora::flush(*p.client, desc, 64, 8, {.method = flush_method::read_after_write}));
        auto done = collect(p.client->cq(), 2, true);
        ASSERT_EQ(done.size(), 2u) << "round " << i;
        for (const auto& c : done)
            ASSERT_TRUE(c.ok()) << c.status.message();
        std::uint64_t now = 0;
        std::memcpy(&now, target.bytes.data() + 64, 8);
        stale += now != v;
        if (imm) {
            auto got = collect(p.server->cq(), 1, true, 5s);  // the write's immediate data
            ASSERT_EQ(got.size(), 1u) << "round " << i;
            EXPECT_EQ(got[0].op, op::remote_write);
        }
    }
    EXPECT_EQ(stale, 0) << "flushes that completed before the write they follow was placed";
}

INSTANTIATE_TEST_SUITE_P(providers, flush_order, testing::ValuesIn(all_providers()), provider_name);

}  // namespace

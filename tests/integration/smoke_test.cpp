#include "support.hpp"

namespace remora::test {
namespace {

class smoke : public testing::TestWithParam<std::string> {};

TEST_P(smoke, write_then_read_back) {
    buffer target(4096), local(4096);
    auto p = must(connect_pair(GetParam(), {.progress_thread = true}));
    auto tmr = must(memory_region::create(p.server_domain, target.span(),
                                          usage::write_destination | usage::read_source));
    auto lmr = must(memory_region::create(p.client_domain, local.span(),
                                          usage::write_source | usage::read_destination));
    auto desc = must(tmr.describe());
    std::memcpy(local.bytes.data(), "hello remora", 12);
    REMORA_ASSERT_OK(p.client->write(desc, 100, lmr, 0, 12, {.context = &local}));
    auto done = collect(p.client->cq(), 1, false);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok()) << done[0].status.message();
    EXPECT_EQ(done[0].op, op::write);
    EXPECT_EQ(done[0].context, &local);
    REMORA_ASSERT_OK(p.client->read(lmr, 1000, desc, 100, 12));
    done = collect(p.client->cq(), 1, false);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].op, op::read);
    EXPECT_EQ(std::memcmp(local.bytes.data() + 1000, "hello remora", 12), 0);
    EXPECT_EQ(std::memcmp(target.bytes.data() + 100, "hello remora", 12), 0);
}

INSTANTIATE_TEST_SUITE_P(providers, smoke, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

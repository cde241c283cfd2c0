// RDM peers (connection::open_peer + attach) behind the connection API, on every RDM provider
// here: shm, tcp;ofi_rxm, net. One-sided and two-sided operations, atomics, flush, CQ / RCQ /
// channels, callbacks, accounting, bad input, close with operations outstanding, peer death, and
// a progress-thread target serving reads while its application sleeps.
#include <poll.h>

#include <atomic>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

// Two attached RDM peers, each in a domain of its own (as two processes would be).
struct rdm_pair {
    domain a_dom;
    domain b_dom;
    std::optional<connection> a;
    std::optional<connection> b;
};

result<domain> open_rdm(const std::string& provider) {
    return domain::open({.provider = provider, .endpoint = endpoint_type::rdm});
}

result<rdm_pair> make_pair(const std::string& provider, const connection_config& a_cfg = {},
                           const connection_config& b_cfg = {}) {
    auto ad = open_rdm(provider);
    if (!ad)
        return fail(ad.error());
    auto bd = open_rdm(provider);
    if (!bd)
        return fail(bd.error());
    auto a = connection::open_peer(*ad, a_cfg);
    if (!a)
        return fail(a.error());
    auto b = connection::open_peer(*bd, b_cfg);
    if (!b)
        return fail(b.error());
    if (auto r = a->attach(b->local_address()); !r)
        return fail(r.error());
    if (auto r = b->attach(a->local_address()); !r)
        return fail(r.error());
    return rdm_pair{*ad, *bd, std::move(*a), std::move(*b)};
}

class rdm : public testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        auto d = open_rdm(GetParam());
        if (!d) {
            GTEST_SKIP() << GetParam() << " offers no RDM endpoint here: " << d.error().what();
        }
    }
};

TEST_P(rdm, write_then_read_back) {
    buffer target(1 << 16), local(1 << 16);
    auto p = must(make_pair(GetParam()));
    EXPECT_EQ(p.a_dom.caps().endpoint, endpoint_type::rdm);
    EXPECT_EQ(p.a_dom.caps().provider, GetParam());
    auto tmr = must(memory_region::create(p.b_dom, target.span(),
                                          usage::write_destination | usage::read_source));
    auto lmr = must(memory_region::create(p.a_dom, local.span(),
                                          usage::write_source | usage::read_destination));
    auto desc = must(tmr.describe());
    for (std::size_t i = 0; i < 32768; ++i)
        local.bytes[i] = static_cast<std::byte>(i * 7);
    // b reads its CQ on another thread: shm and tcp;ofi_rxm progress the target only then.
    std::atomic<bool> stop{false};
    std::thread drive([&] {
        completion c[4];
        while (!stop)
            (void)p.b->cq().poll(c);
    });
    auto join = [&] {
        stop = true;
        if (drive.joinable())
            drive.join();
    };
    REMORA_ASSERT_OK(p.a->write(desc, 4096, lmr, 0, 32768));
    auto w = collect(p.a->cq(), 1, true, 10s);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_TRUE(w[0].ok()) << w[0].status.message();
    EXPECT_EQ(w[0].op, op::write);
    REMORA_ASSERT_OK(p.a->read(lmr, 32768, desc, 4096, 32768));
    auto r = collect(p.a->cq(), 1, true, 10s);
    join();
    ASSERT_EQ(r.size(), 1u);
    EXPECT_TRUE(r[0].ok()) << r[0].status.message();
    EXPECT_EQ(r[0].op, op::read);
    EXPECT_EQ(std::memcmp(target.bytes.data() + 4096, local.bytes.data(), 32768), 0);
    EXPECT_EQ(std::memcmp(local.bytes.data() + 32768, local.bytes.data(), 32768), 0);
    EXPECT_EQ(p.a->in_flight(), 0u);
}

INSTANTIATE_TEST_SUITE_P(providers, rdm, testing::Values("shm", "tcp;ofi_rxm", "net"),
                         [](const testing::TestParamInfo<std::string>& i) {
                             std::string n = i.param;
                             for (char& ch : n)
                                 if (ch == ';')
                                     ch = '_';
                             return n;
                         });

}  // namespace
}  // namespace remora::test

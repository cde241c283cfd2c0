// SPDX-License-Identifier: BSD-3-Clause
// The same-host shm domain beside a tcp or sockets MSG domain (domain_config::same_host): when it
// opens, every region is registered in it too, with the region's key, and the region's
// descriptors carry its virtual address (remote_region::same_host_address); an shm endpoint of
// another domain writes into the region there. On by default; off on request, under verbs
// rules and for RDM domains; REMORA_SAME_HOST decides instead when set; a failure of the shm side
// never fails the domain or the region.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "core/impl.hpp"
#include "fabric/fault.hpp"
#include "fabric/mr.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

namespace fault = detail::fabric_fault;
using detail::fabric_call;

constexpr usage target_uses = usage::read_source | usage::write_destination;

// Whether libfabric offers shm here (FI_PROVIDER may leave it out): the same-host domain opens
// only then.
bool shm_available() {
    const auto names = domain::providers(endpoint_type::rdm);
    return std::find(names.begin(), names.end(), "shm") != names.end();
}

std::uint64_t address_of(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p);
}

// A domain held to its provider's own rules whatever REMORA_RULES says (the shm domain opens
// beside it only then), and otherwise the defaults.
domain_config native(const std::string& provider) {
    return {.provider = provider, .rules = provider_rules::native};
}

// Sets REMORA_SAME_HOST (or unsets it, for nullptr) until the end of the scope.
class same_host_env {
  public:
    explicit same_host_env(const char* value) {
        if (const char* before = std::getenv("REMORA_SAME_HOST"))
            saved_ = before;
        set(value);
    }
    ~same_host_env() { set(saved_ ? saved_->c_str() : nullptr); }
    same_host_env(const same_host_env&) = delete;
    same_host_env& operator=(const same_host_env&) = delete;

  private:
    static void set(const char* value) {
        if (value != nullptr)
            ::setenv("REMORA_SAME_HOST", value, 1);
        else
            ::unsetenv("REMORA_SAME_HOST");
    }
    std::optional<std::string> saved_;
};

const detail::region_impl& state_of(const memory_region& mr) {
    return *detail::impl_of(mr);
}

class same_host_msg : public testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        if (!shm_available()) {
            GTEST_SKIP() << "libfabric offers no shm provider here (FI_PROVIDER?)";
        }
    }
};

TEST_P(same_host_msg, regions_are_registered_in_shm_and_described_at_their_address) {
    const same_host_env defaults(nullptr);  // the default decides: on
    auto dom = must(domain::open(native(GetParam())));
    ASSERT_TRUE(dom.caps().same_host);
    ASSERT_NE(detail::impl_of(dom)->same_host, nullptr);
    EXPECT_EQ(detail::impl_of(dom)->same_host->caps.provider, "shm");

    buffer mem{4096};
    auto mr = must(memory_region::create(dom, mem.span(), target_uses));
    const detail::region_impl& r = state_of(mr);
    ASSERT_TRUE(r.same_host_mr) << "no shm registration beside the " << GetParam() << " one";
    EXPECT_EQ(detail::mr_key(r.same_host_mr.get()), r.key);

    const remote_region all = must(mr.describe());
    EXPECT_EQ(all.same_host_address(), address_of(mem.bytes.data()));
    EXPECT_EQ(all.key(), r.key);
    const remote_region part = must(mr.describe(100, 200));
    EXPECT_EQ(part.same_host_address(), address_of(mem.bytes.data()) + 100);
    const remote_region slice = must(part.slice(8, 16));
    EXPECT_EQ(slice.same_host_address(), address_of(mem.bytes.data()) + 108);
    EXPECT_EQ(slice.address(), part.address() + 8);

    // Version 3 on the wire, the same-host address with it.
    const auto wire = part.serialize();
    ASSERT_EQ(wire.size(), 40u);
    EXPECT_EQ(static_cast<int>(wire[0]), 3);
    const remote_region back = must(remote_region::parse(wire));
    EXPECT_EQ(back, part);
    EXPECT_EQ(back.same_host_address(), part.same_host_address());

    // Local-only regions are registered there too (a later connection's sources and sinks).
    auto local = must(memory_region::create(dom, mem.span(), usage::write_source));
    EXPECT_TRUE(state_of(local).same_host_mr);
}

TEST_P(same_host_msg, off_on_request) {
    const same_host_env defaults(nullptr);  // the configuration decides
    auto dom = must(domain::open({.provider = GetParam(), .same_host = false}));
    EXPECT_FALSE(dom.caps().same_host);
    EXPECT_EQ(detail::impl_of(dom)->same_host, nullptr);
    buffer mem{4096};
    auto mr = must(memory_region::create(dom, mem.span(), target_uses));
    EXPECT_FALSE(state_of(mr).same_host_mr);
    EXPECT_EQ(must(mr.describe()).same_host_address(), 0u);
    EXPECT_EQ(must(mr.describe(64, 64)).same_host_address(), 0u);
}

TEST_P(same_host_msg, the_environment_decides_for_every_domain) {
    for (const char* off : {"off", "0", "no", "false"}) {
        SCOPED_TRACE(off);
        const same_host_env env(off);
        auto dom = must(domain::open(native(GetParam())));
        EXPECT_FALSE(dom.caps().same_host);
        buffer mem{4096};
        auto mr = must(memory_region::create(dom, mem.span(), target_uses));
        EXPECT_EQ(must(mr.describe()).same_host_address(), 0u);
    }
    for (const char* on : {"on", "1", "yes", "true", "process"}) {
        SCOPED_TRACE(on);
        const same_host_env env(on);
        domain_config off = native(GetParam());
        off.same_host = false;
        auto dom = must(domain::open(off));
        EXPECT_TRUE(dom.caps().same_host);
        buffer mem{4096};
        auto mr = must(memory_region::create(dom, mem.span(), target_uses));
        EXPECT_EQ(must(mr.describe()).same_host_address(), address_of(mem.bytes.data()));
    }
}

TEST_P(same_host_msg, none_under_verbs_rules) {
    auto check = [&](domain& dom) {
        EXPECT_FALSE(dom.caps().same_host);
        EXPECT_EQ(detail::impl_of(dom)->same_host, nullptr);
        buffer mem{4096};
        auto mr = must(memory_region::create(dom, mem.span(), target_uses));
        EXPECT_FALSE(state_of(mr).same_host_mr);
        EXPECT_EQ(must(mr.describe()).same_host_address(), 0u);
    };
    {
        auto dom = must(domain::open({.provider = GetParam(), .rules = provider_rules::verbs}));
        check(dom);
    }
    // The same through REMORA_RULES, as the verbs-rules runs of the suite set it.
    const char* before = std::getenv("REMORA_RULES");
    const std::optional<std::string> saved =
        before != nullptr ? std::optional<std::string>(before) : std::nullopt;
    ::setenv("REMORA_RULES", "verbs", 1);
    auto dom = domain::open({.provider = GetParam()});
    if (saved) {
        ::setenv("REMORA_RULES", saved->c_str(), 1);
    } else {
        ::unsetenv("REMORA_RULES");
    }
    ASSERT_TRUE(dom.has_value()) << dom.error().what();
    EXPECT_EQ(dom->caps().rules, provider_rules::verbs);
    check(*dom);
}

INSTANTIATE_TEST_SUITE_P(msg, same_host_msg, testing::Values("tcp", "sockets"));

TEST(same_host, none_for_rdm_domains) {
    if (!shm_available()) {
        GTEST_SKIP() << "libfabric offers no shm provider here";
    }
    for (const char* p : {"shm", "tcp;ofi_rxm"}) {
        SCOPED_TRACE(p);
        auto dom = domain::open({.provider = p, .endpoint = endpoint_type::rdm});
        if (!dom) {
            continue;  // not offered here (tcp;ofi_rxm needs ofi_rxm)
        }
        EXPECT_FALSE(dom->caps().same_host);
        EXPECT_EQ(detail::impl_of(*dom)->same_host, nullptr);
    }
}

class same_host_fault : public testing::Test {
  protected:
    void SetUp() override {
        if (!shm_available()) {
            GTEST_SKIP() << "libfabric offers no shm provider here";
        }
    }
    void TearDown() override { fault::disarm(); }
};

// The shm domain failing to open leaves the tcp domain open without it.
TEST_F(same_host_fault, a_failed_shm_domain_leaves_the_domain_without_it) {
    const long objects = fault::open_objects();
    {
        const unsigned before = fault::fired(fabric_call::domain);
        fault::arm_nth(fabric_call::domain, -FI_ENOMEM, 2);  // 1: tcp's, 2: shm's
        auto dom = domain::open(native("tcp"));
        fault::disarm();
        ASSERT_TRUE(dom.has_value()) << dom.error().what();
        EXPECT_EQ(fault::fired(fabric_call::domain), before + 1);
        EXPECT_FALSE(dom->caps().same_host);
        buffer mem{4096};
        auto mr = must(memory_region::create(*dom, mem.span(), target_uses));
        EXPECT_EQ(must(mr.describe()).same_host_address(), 0u);
    }
    EXPECT_EQ(fault::open_objects(), objects);
}

// shm refusing a region's registration leaves the region reachable over tcp only.
TEST_F(same_host_fault, a_refused_shm_registration_leaves_the_region_without_it) {
    auto dom = must(domain::open(native("tcp")));
    ASSERT_TRUE(dom.caps().same_host);
    buffer mem{4096};
    const unsigned before = fault::fired(fabric_call::mr_reg);
    fault::arm_nth(fabric_call::mr_reg, -FI_ENOKEY, 2);  // 1: tcp's, 2: shm's
    auto mr = memory_region::create(dom, mem.span(), target_uses);
    fault::disarm();
    ASSERT_TRUE(mr.has_value()) << mr.error().what();
    EXPECT_EQ(fault::fired(fabric_call::mr_reg), before + 1);
    EXPECT_FALSE(state_of(*mr).same_host_mr);
    EXPECT_EQ(must(mr->describe()).same_host_address(), 0u);
    // The next region has it again.
    auto next = must(memory_region::create(dom, mem.span(), target_uses));
    EXPECT_NE(must(next.describe()).same_host_address(), 0u);
}

// close() closes the shm domain with the domain, and says when it failed to.
TEST_F(same_host_fault, close_closes_the_shm_domain_and_reports_its_failure) {
    const long objects = fault::open_objects();
    {
        auto dom = must(domain::open(native("tcp")));
        ASSERT_TRUE(dom.caps().same_host);
        {
            buffer mem{4096};
            auto mr = must(memory_region::create(dom, mem.span(), target_uses));
        }
        REMORA_ASSERT_OK(dom.close());
        EXPECT_FALSE(dom);
    }
    EXPECT_EQ(fault::open_objects(), objects);
    {
        auto dom = must(domain::open(native("tcp")));
        ASSERT_TRUE(dom.caps().same_host);
        fault::arm_nth(fabric_call::close, -FI_EBUSY, 2);  // 1: tcp's domain, 2: shm's
        auto r = dom.close();
        fault::disarm();
        ASSERT_FALSE(r.has_value());
        EXPECT_TRUE(r.error().code() == std::error_code(FI_EBUSY, fabric_category()))
            << r.error().what();
        EXPECT_NE(r.error().message().find("same-host shm"), std::string::npos) << r.error().what();
        EXPECT_FALSE(dom) << "the domain itself closed: the handle is emptied";
    }
    EXPECT_EQ(fault::open_objects(), objects);
}

// An shm endpoint of another domain writes into a tcp domain's region over its shm registration:
// at the descriptor's same-host address, with its key.
TEST(same_host, another_shm_domain_writes_into_the_region) {
    if (!shm_available()) {
        GTEST_SKIP() << "libfabric offers no shm provider here";
    }
    auto dom = must(domain::open(native("tcp")));
    ASSERT_TRUE(dom.caps().same_host);
    buffer mem{4096};
    auto mr = must(memory_region::create(dom, mem.span(), target_uses));
    const remote_region whole = must(mr.describe());
    const remote_region slice = must(whole.slice(1024, 64));

    // The target: an endpoint of the tcp domain's shm domain (a later connection's), driven by
    // the progress thread. The initiator: an shm domain of its own, as another process has.
    const domain shm_side = internal_access::wrap<domain>(detail::impl_of(dom)->same_host);
    auto target = must(connection::open_peer(shm_side, {.progress_thread = true}));
    auto other = must(domain::open(
        {.provider = "shm", .endpoint = endpoint_type::rdm, .rules = provider_rules::native}));
    auto initiator = must(connection::open_peer(other));
    REMORA_ASSERT_OK(initiator.attach(target.local_address()));
    REMORA_ASSERT_OK(target.attach(initiator.local_address()));

    buffer src{64};
    const std::string text = "written over shared memory, at the same-host address";
    std::memcpy(src.bytes.data(), text.data(), text.size());
    auto src_mr = must(memory_region::create(other, src.span(), usage::write_source));
    for (const remote_region& d : {whole, slice}) {
        const remote_region over_shm =
            must(remote_region::make(d.same_host_address(), d.length(), d.key(), d.usages(), true));
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        result<void> posted = fail(errc::would_block, "not posted");
        while (!posted && posted.error() == errc::would_block &&
               std::chrono::steady_clock::now() < deadline) {
            posted = initiator.write(over_shm, 0, src_mr, 0, text.size());
        }
        REMORA_ASSERT_OK(posted);
        const auto done = collect(initiator.cq(), 1, false);
        ASSERT_EQ(done.size(), 1u);
        EXPECT_TRUE(done[0].ok()) << done[0].status.message();
    }
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(mem.bytes.data()), text.size()), text);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(mem.bytes.data()) + 1024, text.size()),
              text);
}

}  // namespace
}  // namespace remora::test

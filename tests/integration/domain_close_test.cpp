// SPDX-License-Identifier: BSD-3-Clause
// domain::close(): closes the provider domain when this handle is its last holder and reports
// libfabric's answer; while copies or objects made from the domain hold it, errc::bad_state and
// nothing changes. Runs on tcp and sockets.
#include <string>

#include "fabric/fault.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

using detail::fabric_call;
namespace fault = detail::fabric_fault;

struct disarm_at_exit {
    ~disarm_at_exit() { fault::disarm(); }
};

class domain_close : public testing::TestWithParam<std::string> {
  protected:
    disarm_at_exit guard_;
    buffer mem_{4096};
};

TEST_P(domain_close, closes_the_last_holder_and_empties_the_handle) {
    const long before = fault::open_objects();
    auto dom = must(domain::open({.provider = GetParam()}));
    EXPECT_GT(fault::open_objects(), before);
    REMORA_ASSERT_OK(dom.close());
    EXPECT_EQ(fault::open_objects(), before);  // the domain and its fabric are closed
    EXPECT_FALSE(dom);
    EXPECT_TRUE(dom.caps().provider.empty());
    REMORA_ASSERT_OK(dom.close());  // closed already: nothing to do
    // Objects made from an empty handle are refused, not crashed into.
    EXPECT_ERRC(memory_region::create(dom, mem_.span(), usage::write_destination), errc::bad_state);
    EXPECT_ERRC(listener::create(dom, "127.0.0.1", 0), errc::bad_state);
    EXPECT_ERRC(connection::connect(dom, "127.0.0.1", 1), errc::bad_state);
    EXPECT_ERRC(shared_completion_queue::create(dom), errc::bad_state);
    EXPECT_ERRC(registration_cache::create(dom, 4), errc::bad_state);
    EXPECT_ERRC(persistent_region::open(dom, {.size = 4096}), errc::bad_state);
}

TEST_P(domain_close, is_refused_while_a_region_or_a_copy_holds_it_and_changes_nothing) {
    auto dom = must(domain::open({.provider = GetParam()}));
    {
        auto mr = must(memory_region::create(dom, mem_.span(), usage::write_destination));
        auto r = dom.close();
        ASSERT_ERRC(r, errc::bad_state);
        EXPECT_NE(r.error().message().find("1 other"), std::string::npos) << r.error().what();
        ASSERT_TRUE(dom);  // still open and usable
        EXPECT_EQ(dom.caps().provider, GetParam());
        buffer more(4096);
        REMORA_ASSERT_OK(memory_region::create(dom, more.span(), usage::read_source));
    }
    {
        domain copy = dom;
        EXPECT_ERRC(dom.close(), errc::bad_state);
        EXPECT_ERRC(copy.close(), errc::bad_state);
    }
    REMORA_ASSERT_OK(dom.close());
    EXPECT_FALSE(dom);
}

// Connections and listeners hold it too; once they are gone it closes.
TEST_P(domain_close, waits_for_connections_and_listeners_to_go) {
    auto p = must(connect_pair(GetParam()));
    EXPECT_ERRC(p.client_domain.close(), errc::bad_state);
    EXPECT_ERRC(p.server_domain.close(), errc::bad_state);
    // Nothing was torn down: the connection still carries a message.
    auto rmr = must(memory_region::create(p.server_domain, mem_.span(), usage::receive));
    buffer src(64);
    auto smr = must(memory_region::create(p.client_domain, src.span(), usage::send));
    REMORA_ASSERT_OK(p.server->recv(rmr, 0, 64));
    REMORA_ASSERT_OK(p.client->send(smr, 0, 8));
    EXPECT_EQ(collect(p.server->cq(), 1, true).size(), 1u);
    EXPECT_EQ(collect(p.client->cq(), 1, true).size(), 1u);
    {
        auto r = p.client_domain.close();
        ASSERT_ERRC(r, errc::bad_state);
    }
    p.client.reset();
    p.server.reset();
    p.lst.reset();
    { [[maybe_unused]] auto gone = std::move(smr); }
    { [[maybe_unused]] auto gone = std::move(rmr); }
    REMORA_ASSERT_OK(p.client_domain.close());
    REMORA_ASSERT_OK(p.server_domain.close());
}

// A provider's refusal to close is reported with its code and changes nothing: the domain stays
// open and usable, and a later close() succeeds.
TEST_P(domain_close, reports_a_failed_close_and_keeps_the_domain) {
    const long before = fault::open_objects();
    auto dom = must(domain::open({.provider = GetParam()}));
    fault::arm(fabric_call::close, -FI_EBUSY);
    auto r = dom.close();
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), (std::error_code{FI_EBUSY, fabric_category()})) << r.error().what();
    EXPECT_NE(r.error().message().find("fi_close"), std::string::npos) << r.error().what();
    ASSERT_TRUE(dom);
    REMORA_ASSERT_OK(memory_region::create(dom, mem_.span(), usage::write_destination));
    REMORA_ASSERT_OK(dom.close());
    EXPECT_EQ(fault::open_objects(), before);
}

INSTANTIATE_TEST_SUITE_P(providers, domain_close, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

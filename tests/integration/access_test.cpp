// SPDX-License-Identifier: BSD-3-Clause
// Per-client access (issue 13, item 2): random registration keys, a read-only registration that
// the provider itself refuses to write through, and a target service that answers a connection
// only for the registration it was granted.
#include <cstring>
#include <set>

#include "persist/persist_impl.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

class access_test : public testing::TestWithParam<std::string> {};

constexpr usage rw_usage =
    usage::read_source | usage::write_destination | usage::atomic_target | usage::flush_target;

TEST_P(access_test, keys_differ_per_registration_and_per_start) {
    // Two "starts" (domains), two registrations each: four different keys, none of them the
    // counter's 1 of before.
    std::set<std::uint64_t> keys;
    for (int start = 0; start < 2; ++start) {
        auto dom = must(domain::open({.provider = GetParam()}));
        buffer a(4096), b(4096);
        auto ra = must(memory_region::create(dom, a.span(), rw_usage));
        auto rb = must(memory_region::create(dom, b.span(), usage::read_source));
        keys.insert(must(ra.describe()).key());
        keys.insert(must(rb.describe()).key());
    }
    EXPECT_EQ(keys.size(), 4u);
    EXPECT_EQ(keys.count(1), 0u);
}

// A target with one piece of memory registered twice: read-write and read-only.
struct two_roles {
    connected_pair pair;
    buffer mem{4096};
    std::optional<memory_region> rw, ro;
    remote_region rw_desc, ro_desc;
    buffer local{4096};
    std::optional<memory_region> local_mr;

    explicit two_roles(const std::string& provider, const connection_config& client_cfg = {})
        : pair(must(connect_pair(
              provider,
              {.progress_thread = true, .addons = {remora::persistence_config{.service_depth = 4}}},
              client_cfg))) {
        std::memset(mem.bytes.data(), 'A', mem.bytes.size());
        rw.emplace(must(memory_region::create(pair.server_domain, mem.span(), rw_usage)));
        ro.emplace(must(memory_region::create(pair.server_domain, mem.span(), usage::read_source)));
        rw_desc = must(rw->describe());
        ro_desc = must(ro->describe());
        local_mr.emplace(must(memory_region::create(
            pair.client_domain, local.span(),
            usage::read_destination | usage::write_source | usage::send | usage::receive)));
    }
    // The read-only descriptor with write (and atomic) usage claimed by the client.
    remote_region forged() const {
        return must(remote_region::make(ro_desc.address(), ro_desc.length(), ro_desc.key(),
                                        rw_usage, ro_desc.virtual_addressing()));
    }
};

TEST_P(access_test, a_read_only_key_reads_but_the_provider_refuses_writes_through_it) {
    two_roles t(GetParam());
    EXPECT_NE(t.ro_desc.key(), t.rw_desc.key());
    EXPECT_EQ(t.ro_desc.usages(), usage::read_source);
    connection& cl = *t.pair.client;

    REMORA_ASSERT_OK(cl.read(*t.local_mr, 0, t.ro_desc, 0, 64));
    auto got = collect(cl.cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(t.local.bytes[0], std::byte{'A'});

    // The library refuses at once what the descriptor does not grant...
    EXPECT_ERRC(cl.write(t.ro_desc, 0, *t.local_mr, 0, 64), errc::access_denied);
    // ...and a client that claims write access for the read-only key anyway is refused by the
    // provider at the target: the operation fails and the memory is unchanged.
    std::memset(t.local.bytes.data(), 'B', 64);
    REMORA_ASSERT_OK(cl.write(t.forged(), 0, *t.local_mr, 0, 64));
    got = collect(cl.cq(), 1, true);
    ASSERT_EQ(got.size(), 1u) << "no completion for the forged write";
    EXPECT_EQ(got[0].op, op::write);
    if (GetParam() == "tcp") {
        // tcp completes a write once it is sent (transmit complete); the target's provider then
        // refuses it (the key does not allow remote write) and drops the connection.
        EXPECT_TRUE(got[0].ok()) << got[0].status.message();
        auto ev = cl.next_event(10s);
        ASSERT_TRUE(ev) << ev.error().what();
        EXPECT_EQ(*ev, conn_event::closed);
        EXPECT_ERRC(cl.read(*t.local_mr, 0, t.ro_desc, 0, 64), errc::disconnected);
    } else {
        // sockets fails the write with the target's refusal; the connection stays usable.
        EXPECT_EQ(got[0].status, errc::access_denied) << got[0].status.message();
        REMORA_ASSERT_OK(cl.read(*t.local_mr, 0, t.ro_desc, 0, 64));
        got = collect(cl.cq(), 1, true);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_TRUE(got[0].ok()) << got[0].status.message();
        EXPECT_EQ(t.local.bytes[0], std::byte{'A'});
    }
    EXPECT_EQ(t.mem.bytes[0], std::byte{'A'});
    EXPECT_EQ(t.mem.bytes[63], std::byte{'A'});
}

TEST_P(access_test, the_read_write_key_writes) {
    two_roles t(GetParam());
    connection& cl = *t.pair.client;
    std::memset(t.local.bytes.data(), 'C', 64);
    REMORA_ASSERT_OK(cl.write(t.rw_desc, 0, *t.local_mr, 0, 64));
    auto got = collect(cl.cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_TRUE(eventually([&] { return t.mem.bytes[63] == std::byte{'C'}; }));
}

// Sends one raw service request for `key` and returns the reply's status.
std::uint16_t raw_request(two_roles& t, detail::service_op op, std::uint64_t key,
                          std::uint64_t address, std::uint64_t id) {
    connection& cl = *t.pair.client;
    detail::service_request rq{.op = op, .id = id, .key = key, .address = address, .arg0 = 8};
    detail::encode(
        rq, std::span<std::byte, detail::request_size>(t.local.bytes.data(), detail::request_size));
    EXPECT_TRUE(cl.recv(*t.local_mr, 1024, detail::reply_size));
    EXPECT_TRUE(cl.send(*t.local_mr, 0, detail::request_size));
    auto got = collect(cl.cq(), 2, true);
    EXPECT_EQ(got.size(), 2u);
    for (const auto& c : got)
        EXPECT_TRUE(c.ok()) << c.status.message();
    auto rp = must(detail::decode_reply({t.local.bytes.data() + 1024, detail::reply_size}));
    EXPECT_EQ(rp.id, id);
    return rp.status;
}

TEST_P(access_test, the_service_answers_a_connection_only_for_its_grant) {
    two_roles t(GetParam());
    auto svc = must(target_service::create());
    EXPECT_EQ(must(svc.expose(*t.rw)).key(), t.rw_desc.key());
    EXPECT_EQ(must(svc.expose(*t.ro)).key(), t.ro_desc.key());
    // A grant the service does not expose is refused, and nothing is served.
    buffer other(4096);
    auto other_mr = must(memory_region::create(t.pair.server_domain, other.span(), rw_usage));
    const remote_region foreign = must(other_mr.describe());
    EXPECT_ERRC(svc.serve(*t.pair.server, std::span(&foreign, 1)), errc::invalid_argument);
    REMORA_ASSERT_OK(svc.serve(*t.pair.server, std::span(&t.ro_desc, 1)));
    EXPECT_EQ(svc.requests(*t.pair.server), 0u);

    const auto denied = static_cast<std::uint16_t>(errc::access_denied);
    using detail::service_op;
    // The granted read-only registration: no atomics, no flushes (its usage).
    EXPECT_EQ(raw_request(t, service_op::fetch_add, t.ro_desc.key(), t.ro_desc.address(), 1),
              denied);
    EXPECT_EQ(raw_request(t, service_op::flush, t.ro_desc.key(), t.ro_desc.address(), 2), denied);
    // The read-write registration is exposed, but not to this connection.
    EXPECT_EQ(raw_request(t, service_op::atomic_write, t.rw_desc.key(), t.rw_desc.address(), 3),
              denied);
    EXPECT_EQ(raw_request(t, service_op::flush, t.rw_desc.key(), t.rw_desc.address(), 4), denied);
    EXPECT_EQ(t.mem.bytes[0], std::byte{'A'});
    EXPECT_EQ(svc.requests(*t.pair.server), 4u);
    EXPECT_EQ(svc.refused(), 4u);
}

TEST_P(access_test, a_read_write_grant_runs_service_requests) {
    two_roles t(GetParam());
    auto svc = must(target_service::create());
    (void)must(svc.expose(*t.rw));
    (void)must(svc.expose(*t.ro));
    REMORA_ASSERT_OK(svc.serve(*t.pair.server, std::span(&t.rw_desc, 1)));
    using detail::service_op;
    EXPECT_EQ(raw_request(t, service_op::atomic_write, t.rw_desc.key(), t.rw_desc.address(), 1), 0);
    EXPECT_EQ(t.mem.bytes[0], std::byte{8});
    EXPECT_EQ(raw_request(t, service_op::flush, t.rw_desc.key(), t.rw_desc.address(), 2), 0);
    // Not granted: the read-only registration.
    EXPECT_EQ(raw_request(t, service_op::flush, t.ro_desc.key(), t.ro_desc.address(), 3),
              static_cast<std::uint16_t>(errc::access_denied));
    EXPECT_EQ(svc.requests(*t.pair.server), 3u);
}

INSTANTIATE_TEST_SUITE_P(providers, access_test, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

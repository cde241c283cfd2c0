// SPDX-License-Identifier: BSD-3-Clause
// The same-host offer in connection setup (connection_config::same_host, core/same_host.hpp): the
// host identity, the library's trailer of the connect and accept private data (the application's
// bytes arrive byte for byte whether or not it is there), and when the two sides agree: both on
// and eligible, the same identity, room for the trailer, and a target that does not turn it off
// (as for a read-only role after admission). On tcp and sockets over loopback.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "core/same_host.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

using detail::same_host_of;
using detail::this_host_identity;

std::vector<std::byte> pattern(std::size_t n, std::uint8_t seed) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<std::byte>(seed + 7 * i);
    return v;
}

std::vector<std::byte> copy_of(std::span<const std::byte> s) {
    return {s.begin(), s.end()};
}

bool zero(const detail::same_host_nonce& n) {
    return std::all_of(n.begin(), n.end(), [](std::byte b) { return b == std::byte{0}; });
}

struct setup {
    connection server;
    connection client;
    std::vector<std::byte> request_data;  // what connection_request::private_data() gave
};

struct same_host : testing::TestWithParam<std::string> {
    // Native rules whatever REMORA_RULES says (the verbs test below asks for verbs' itself).
    domain server_dom =
        must(domain::open({.provider = GetParam(), .rules = provider_rules::native}));
    domain client_dom =
        must(domain::open({.provider = GetParam(), .rules = provider_rules::native}));
    listener lst = must(listener::create(server_dom, "127.0.0.1", 0));

    setup connect(const connection_config& server_cfg, const connection_config& client_cfg,
                  std::span<const std::byte> client_data, std::span<const std::byte> server_data) {
        return connect_to(lst, client_dom, server_cfg, client_cfg, client_data, server_data);
    }
    static setup connect_to(listener& l, const domain& cd, const connection_config& server_cfg,
                            const connection_config& client_cfg,
                            std::span<const std::byte> client_data,
                            std::span<const std::byte> server_data) {
        auto client = std::async(std::launch::async, [&] {
            return connection::connect(cd, "127.0.0.1", l.port(), client_cfg, client_data);
        });
        auto req = must(request_while_connecting(l, client), "request");
        auto seen = copy_of(req.private_data());
        auto s = must(req.accept(server_cfg, server_data), "accept");
        auto c = must(client.get(), "connect");
        return {std::move(s), std::move(c), std::move(seen)};
    }
};

TEST(same_host_identity, is_stable_has_8_bytes_and_follows_the_credentials) {
    const auto a = this_host_identity();
    ASSERT_TRUE(a.has_value()) << "boot id, /dev/shm or /proc/self/ns unreadable here";
    EXPECT_EQ(a->size(), 8u);
    EXPECT_EQ(this_host_identity(), a);
    if (::geteuid() == 0) {
        // Computed at each setup: a process whose credentials changed has another identity.
        gid_t rg, eg, sg;
        ASSERT_EQ(::getresgid(&rg, &eg, &sg), 0);
        if (::setresgid(-1, -1, sg + 1) != 0)
            GTEST_SKIP() << "this root may not change its group ids (a user namespace, no "
                            "CAP_SETGID): "
                         << std::strerror(errno);
        const auto other = this_host_identity();
        ASSERT_EQ(::setresgid(-1, -1, sg), 0);
        EXPECT_NE(other, a);
        EXPECT_EQ(this_host_identity(), a);
    }
    EXPECT_FALSE(std::all_of(a->begin(), a->end(), [](std::byte b) { return b == std::byte{0}; }));
    // Computed again from its inputs: the same (another process's: two_processes_on_one_host).
    EXPECT_EQ(detail::compute_host_identity(), a);
}

TEST(same_host_trailer, is_recognised_only_whole_and_at_the_end) {
    detail::setup_trailer t;
    t.flags = detail::trailer_same_host;
    t.identity.fill(std::byte{0x11});
    t.nonce.fill(std::byte{0x22});
    std::vector<std::byte> data = pattern(5, 1);
    detail::append_trailer(data, t);
    ASSERT_EQ(data.size(), 5 + detail::setup_trailer_size);
    EXPECT_EQ(detail::setup_trailer_size, 30u);
    auto got = detail::trailer_of(data);
    ASSERT_TRUE(got.has_value());
    EXPECT_TRUE(got->same_host());
    EXPECT_EQ(got->identity, t.identity);
    EXPECT_EQ(got->nonce, t.nonce);
    // The magic is the last 4 bytes, little-endian "RMSH"; the version first.
    EXPECT_EQ(data[data.size() - 4], std::byte{'R'});
    EXPECT_EQ(data[data.size() - 1], std::byte{'H'});
    EXPECT_EQ(data[5], std::byte{1});
    // One byte short, another version, a damaged magic, or a byte after it: no trailer.
    EXPECT_FALSE(detail::trailer_of(std::span(data).subspan(6)).has_value());
    auto other = data;
    other[5] = std::byte{2};
    EXPECT_FALSE(detail::trailer_of(other).has_value());
    other = data;
    other.back() = std::byte{'h'};
    EXPECT_FALSE(detail::trailer_of(other).has_value());
    other = data;
    other.push_back(std::byte{0});
    EXPECT_FALSE(detail::trailer_of(other).has_value());
    // take_trailer leaves the bytes before it.
    auto stripped = data;
    ASSERT_TRUE(detail::take_trailer(stripped).has_value());
    EXPECT_EQ(stripped, pattern(5, 1));
}

TEST_P(same_host, private_data_survives_both_ways_and_both_agree_only_when_both_offer) {
    const std::size_t max = client_dom.caps().cm_data_size;
    ASSERT_GE(max, detail::setup_trailer_size + 2);
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, max}) {
        for (const bool client_on : {true, false}) {
            for (const bool server_on : {true, false}) {
                SCOPED_TRACE("size " + std::to_string(n) + ", client " +
                             (client_on ? "on" : "off") + ", server " + (server_on ? "on" : "off"));
                const auto cdata = pattern(n, 3);
                const auto sdata = pattern(n, 101);
                auto s = connect({.same_host = server_on}, {.same_host = client_on}, cdata, sdata);
                EXPECT_EQ(s.request_data, cdata);
                EXPECT_EQ(copy_of(s.server.peer_private_data()), cdata);
                EXPECT_EQ(copy_of(s.client.peer_private_data()), sdata);
                const bool room = n + detail::setup_trailer_size <= max;
                const auto co = same_host_of(s.client);
                const auto so = same_host_of(s.server);
                EXPECT_EQ(co.offered, client_on && room);
                EXPECT_EQ(so.offered, client_on && room);
                const bool agree = client_on && server_on && room;
                EXPECT_EQ(co.agreed, agree);
                EXPECT_EQ(so.agreed, agree);
                if (co.offered) {
                    EXPECT_FALSE(zero(co.nonce));
                    EXPECT_EQ(co.nonce, so.nonce);
                }
            }
        }
    }
}

TEST_P(same_host, accept_data_too_large_for_the_trailer_means_no_agreement_and_arrives_whole) {
    const std::size_t max = client_dom.caps().cm_data_size;
    const auto cdata = pattern(2, 9);
    const auto sdata = pattern(max - detail::setup_trailer_size + 1, 50);
    auto s = connect({}, {}, cdata, sdata);
    EXPECT_EQ(copy_of(s.server.peer_private_data()), cdata);
    EXPECT_EQ(copy_of(s.client.peer_private_data()), sdata);
    EXPECT_TRUE(same_host_of(s.client).offered);
    EXPECT_FALSE(same_host_of(s.client).agreed);
    EXPECT_FALSE(same_host_of(s.server).agreed);
    // Room for the trailer and the target's shm address with it: both agree.
    const auto fits = pattern(max - detail::setup_trailer_size - 1 - 100, 50);  // shm: 47 bytes
    auto t = connect({}, {}, cdata, fits);
    EXPECT_EQ(copy_of(t.client.peer_private_data()), fits);
    EXPECT_TRUE(same_host_of(t.client).agreed);
    EXPECT_TRUE(same_host_of(t.server).agreed);
}

TEST_P(same_host, data_that_reads_as_a_trailer_arrives_whole) {
    // The application's own bytes end like a trailer (an echo of one, say): with the offer on or
    // off, and within the room for one more, they still arrive as sent.
    ASSERT_TRUE(this_host_identity().has_value());
    std::vector<std::byte> tricky = pattern(3, 5);
    detail::setup_trailer t;
    t.flags = detail::trailer_same_host;
    t.identity = *this_host_identity();
    detail::append_trailer(tricky, t);
    for (const bool on : {true, false}) {
        SCOPED_TRACE(on ? "offer on" : "offer off");
        auto s = connect({}, {.same_host = on}, tricky, tricky);
        EXPECT_EQ(s.request_data, tricky);
        EXPECT_EQ(copy_of(s.server.peer_private_data()), tricky);
        EXPECT_EQ(copy_of(s.client.peer_private_data()), tricky);
        EXPECT_EQ(same_host_of(s.client).agreed, on);
    }
}

// An asynchronous setup hands the connection out before it is established (receives may be
// posted on it meanwhile): it offers no path of its own, and stays on its provider.
TEST_P(same_host, an_asynchronous_setup_stays_on_the_provider) {
    const auto cdata = pattern(2, 1);
    const auto sdata = pattern(3, 2);
    auto c = must(connection::connect_async(client_dom, "127.0.0.1", lst.port(), {}, cdata));
    // The setup advances while the connection is looked at: look while waiting for the request.
    result<connection_request> req = fail(errc::timed_out, "no request");
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!req && std::chrono::steady_clock::now() < deadline) {
        req = lst.get_request(20ms);
        if (!req) {
            ASSERT_ERRC(c.next_event(0ms), errc::timed_out);
        }
    }
    REMORA_ASSERT_OK(req);
    EXPECT_EQ(copy_of(req->private_data()), cdata);
    auto s = must(req->accept_async({}, sdata), "accept_async");
    auto server_event = std::async(std::launch::async, [&] { return s.next_event(10s); });
    auto ce = c.next_event(10s);
    auto se = server_event.get();
    REMORA_ASSERT_OK(ce);
    REMORA_ASSERT_OK(se);
    ASSERT_EQ(*ce, conn_event::established);
    ASSERT_EQ(*se, conn_event::established);
    EXPECT_EQ(copy_of(c.peer_private_data()), sdata);
    EXPECT_EQ(copy_of(s.peer_private_data()), cdata);
    EXPECT_FALSE(same_host_of(c).agreed);
    EXPECT_FALSE(same_host_of(s).agreed);
    EXPECT_FALSE(c.same_host());
    EXPECT_FALSE(s.same_host());
    EXPECT_EQ(same_host_of(c).nonce, same_host_of(s).nonce);
}

TEST_P(same_host, a_client_without_a_trailer_connects_and_nothing_is_offered) {
    // A plain libfabric client, or one with the offer off: its data is all its own.
    const auto cdata = pattern(2, 8);
    auto s = connect({}, {.same_host = false}, cdata, {});
    EXPECT_EQ(s.request_data, cdata);
    EXPECT_TRUE(s.server.is_open());
    EXPECT_TRUE(s.client.is_open());
    EXPECT_FALSE(same_host_of(s.server).offered);
    EXPECT_FALSE(same_host_of(s.server).agreed);
    EXPECT_TRUE(zero(same_host_of(s.server).nonce));
    EXPECT_FALSE(same_host_of(s.client).offered);
    EXPECT_TRUE(s.client.peer_private_data().empty());
}

TEST_P(same_host, nothing_is_offered_under_verbs_rules) {
    auto sd = must(domain::open({.provider = GetParam(), .rules = provider_rules::verbs}));
    auto cd = must(domain::open({.provider = GetParam(), .rules = provider_rules::verbs}));
    ASSERT_EQ(cd.caps().cm_data_size, 55u);
    auto l = must(listener::create(sd, "127.0.0.1", 0));
    const auto cdata = pattern(2, 4);  // room for the trailer (2 + 30 <= 55): still no offer
    auto s = connect_to(l, cd, {}, {}, cdata, cdata);
    EXPECT_EQ(s.request_data, cdata);
    EXPECT_EQ(copy_of(s.client.peer_private_data()), cdata);
    EXPECT_FALSE(same_host_of(s.client).offered);
    EXPECT_FALSE(same_host_of(s.server).offered);
    // A client under native rules offers; a target under verbs' declines, and receives data that
    // fits its 55 bytes whole, also when the trailer after it does not.
    for (const std::size_t n : {std::size_t{2}, std::size_t{40}, std::size_t{55}}) {
        SCOPED_TRACE("native client, " + std::to_string(n) + " bytes");
        const auto data = pattern(n, 4);
        auto s2 = connect_to(l, client_dom, {}, {}, data, cdata);
        EXPECT_EQ(s2.request_data, data);
        EXPECT_EQ(copy_of(s2.client.peer_private_data()), cdata);
        EXPECT_TRUE(same_host_of(s2.client).offered);
        EXPECT_FALSE(same_host_of(s2.client).agreed);
        EXPECT_FALSE(same_host_of(s2.server).agreed);
    }
}

TEST_P(same_host, the_target_echoes_the_nonce_and_declines_an_offer_without_an_shm_address) {
    // The raw answer: a client under verbs' rules sends no trailer of its own and reads none (its
    // 55 bytes leave no room for a second one), so a crafted offer as its whole data reaches the
    // target as an offer, and the target's answer arrives as it was sent. The offer names no shm
    // peer of the client's, so no target can take the path: it declines, naming no identity.
    ASSERT_TRUE(this_host_identity().has_value());
    auto cd = must(domain::open({.provider = GetParam(), .rules = provider_rules::verbs}));
    for (const bool target_on : {true, false}) {
        SCOPED_TRACE(target_on ? "target on" : "target off");
        detail::setup_trailer offer;
        offer.flags = detail::trailer_same_host;
        offer.identity = *this_host_identity();
        offer.nonce.fill(std::byte{0x5a});
        std::vector<std::byte> raw;
        detail::append_trailer(raw, offer);
        const auto sdata = pattern(2, 77);
        auto s = connect_to(lst, cd, {.same_host = target_on}, {}, raw, sdata);
        EXPECT_TRUE(s.request_data.empty()) << "the target took the trailer off";
        EXPECT_TRUE(same_host_of(s.server).offered);
        EXPECT_FALSE(same_host_of(s.server).agreed);
        EXPECT_FALSE(s.server.same_host());
        EXPECT_EQ(same_host_of(s.server).nonce, offer.nonce);
        const auto got = copy_of(s.client.peer_private_data());
        ASSERT_EQ(got.size(), sdata.size() + detail::setup_trailer_size);
        EXPECT_TRUE(std::equal(sdata.begin(), sdata.end(), got.begin()));
        const auto answer = detail::trailer_of(got);
        ASSERT_TRUE(answer.has_value());
        EXPECT_EQ(answer->nonce, offer.nonce);
        EXPECT_FALSE(answer->same_host());
        EXPECT_EQ(answer->identity, detail::host_identity{});
    }
}

TEST_P(same_host, oversize_private_data_is_still_the_same_clear_error) {
    const std::size_t max = client_dom.caps().cm_data_size;
    const auto big = pattern(max + 1, 0);
    auto c = connection::connect(client_dom, "127.0.0.1", lst.port(), {}, big);
    ASSERT_ERRC(c, errc::too_large);
    EXPECT_EQ(c.error().message(), "connect: private data of " + std::to_string(max + 1) +
                                       " bytes exceeds the " + GetParam() + " limit of " +
                                       std::to_string(max) + " bytes");
    // On the accepting side too (the request stays answerable).
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(client_dom, "127.0.0.1", lst.port());
    });
    auto req = must(request_while_connecting(lst, client), "request");
    auto a = req.accept({}, big);
    ASSERT_ERRC(a, errc::too_large);
    EXPECT_EQ(a.error().message(), "accept: private data of " + std::to_string(max + 1) +
                                       " bytes exceeds the " + GetParam() + " limit of " +
                                       std::to_string(max) + " bytes");
    REMORA_ASSERT_OK(req.accept());
    REMORA_ASSERT_OK(client.get());
}

admission_key key_of(std::uint8_t fill) {
    std::array<std::byte, 32> raw;
    raw.fill(static_cast<std::byte>(fill));
    return must(admission_key::from_bytes(raw), "key");
}

TEST_P(same_host, a_read_only_role_after_admission_gets_no_agreement_a_read_write_role_does) {
    // As `remora serve` does: one gate per key, the key that verifies decides the role, and a
    // read-only client is accepted with the offer turned off.
    struct role {
        bool rw;
        admission_gate gate;
    };
    std::vector<role> roles;
    roles.push_back({false, must(admission_gate::create(key_of(1)))});
    roles.push_back({true, must(admission_gate::create(key_of(2)))});
    const std::array<std::byte, 2> payload{std::byte{8}, std::byte{0}};
    for (const std::uint8_t fill : {1, 2}) {
        SCOPED_TRACE(fill == 1 ? "read-only key" : "read-write key");
        auto k = key_of(fill);
        auto client = std::async(std::launch::async, [&] {
            return connect_admitted(client_dom, "127.0.0.1", lst.port(), k, "someone", {}, payload);
        });
        auto req = must(request_while_connecting(lst, client), "request");
        std::optional<bool> rw;
        for (auto& r : roles) {
            auto p = r.gate.check(req.private_data());  // the token, the trailer taken off
            if (p) {
                EXPECT_EQ(p->identity, "someone");
                EXPECT_EQ(p->payload, copy_of(payload));
                rw = r.rw;
                break;
            }
            EXPECT_EQ(admission_refusal_of(p.error()), admission_refusal::bad_proof);
        }
        ASSERT_TRUE(rw.has_value()) << "no key admitted the token";
        EXPECT_EQ(*rw, fill == 2);
        auto s = must(req.accept({.same_host = *rw}), "accept");
        auto c = must(client.get(), "connect_admitted");
        EXPECT_TRUE(same_host_of(c).offered);
        EXPECT_TRUE(same_host_of(s).offered);
        EXPECT_EQ(same_host_of(c).agreed, *rw);
        EXPECT_EQ(same_host_of(s).agreed, *rw);
    }
}

// The client of two_processes_on_one_host_agree, in a process of its own (exec'd, so it computes
// its host identity itself): connects to the port it reads and reports its identity, the outcome
// and the accept data.
TEST(same_host_child, DISABLED_client_process) {
    const char* prov = std::getenv("REMORA_SAME_HOST_CHILD");
    const char* fds = std::getenv("REMORA_SAME_HOST_CHILD_FDS");
    if (prov == nullptr || fds == nullptr)
        GTEST_SKIP() << "the client process of same_host.two_processes_*: runs only from that test";
    int in = -1, out = -1;
    ASSERT_EQ(std::sscanf(fds, "%d,%d", &in, &out), 2);
    std::uint16_t port = 0;
    ASSERT_TRUE(read_all(in, &port, sizeof port));
    auto d = must(domain::open({.provider = prov, .rules = provider_rules::native}));
    auto c = must(connection::connect(d, "127.0.0.1", port, {}, pattern(2, 6)), "connect");
    const auto id = detail::compute_host_identity().value_or(detail::host_identity{});
    const auto o = same_host_of(c);
    const std::uint8_t flags = (o.offered ? 1 : 0) | (o.agreed ? 2 : 0);
    const auto got = copy_of(c.peer_private_data());
    const auto n = static_cast<std::uint32_t>(got.size());
    ASSERT_TRUE(write_all(out, id.data(), id.size()) && write_all(out, &flags, 1) &&
                write_all(out, o.nonce.data(), o.nonce.size()) && write_all(out, &n, 4) &&
                write_all(out, got.data(), n));
    std::uint8_t done = 0;
    (void)read_all(in, &done, 1);  // the target has read everything: close now
}

// Two processes: the client in a child process, the target here. They find the same host
// identity, and agree on the same nonce.
TEST_P(same_host, two_processes_on_one_host_agree) {
    int to_child[2], from_child[2];
    ASSERT_EQ(::pipe2(to_child, O_CLOEXEC), 0);
    ASSERT_EQ(::pipe2(from_child, O_CLOEXEC), 0);
    const std::string provider = GetParam();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);           // its gtest report is not ours
        ::dup2(to_child[0], 100);  // survive exec (O_CLOEXEC)
        ::dup2(from_child[1], 101);
        ::setenv("REMORA_SAME_HOST_CHILD", provider.c_str(), 1);
        ::setenv("REMORA_SAME_HOST_CHILD_FDS", "100,101", 1);
        ::execl("/proc/self/exe", "same_host_test", "--gtest_also_run_disabled_tests",
                "--gtest_filter=same_host_child.DISABLED_client_process",
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    struct reap {
        pid_t pid;
        int fds[2];
        ~reap() {
            if (pid > 0) {  // never kill(-1, ...)
                ::kill(pid, SIGKILL);
                ::waitpid(pid, nullptr, 0);
            }
            ::close(fds[0]);
            ::close(fds[1]);
        }
    } reaper{child, {to_child[1], from_child[0]}};
    const std::uint16_t port = lst.port();
    ASSERT_TRUE(write_all(to_child[1], &port, sizeof port));
    auto req = lst.get_request(10s);
    REMORA_ASSERT_OK(req);
    EXPECT_EQ(copy_of(req->private_data()), pattern(2, 6));
    const auto sdata = pattern(4, 60);
    auto s = req->accept({}, sdata);
    REMORA_ASSERT_OK(s);
    detail::host_identity theirs{};
    std::uint8_t flags = 0;
    detail::same_host_nonce nonce{};
    std::uint32_t n = 0;
    ASSERT_TRUE(read_all(from_child[0], theirs.data(), theirs.size()))
        << "the child ended before reporting";
    ASSERT_TRUE(read_all(from_child[0], &flags, 1));
    ASSERT_TRUE(read_all(from_child[0], nonce.data(), nonce.size()));
    ASSERT_TRUE(read_all(from_child[0], &n, 4));
    ASSERT_LE(n, 4096u);
    std::vector<std::byte> got(n);
    ASSERT_TRUE(read_all(from_child[0], got.data(), n));
    ASSERT_TRUE(this_host_identity().has_value());
    EXPECT_EQ(theirs, *this_host_identity());
    EXPECT_EQ(got, sdata);
    EXPECT_EQ(flags, 3) << "the child offered (1) and agreed (2)";
    EXPECT_TRUE(same_host_of(*s).agreed);
    EXPECT_EQ(same_host_of(*s).nonce, nonce);
    const std::uint8_t done = 1;
    ASSERT_TRUE(write_all(to_child[1], &done, 1));
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    reaper.pid = 0;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

INSTANTIATE_TEST_SUITE_P(providers, same_host, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

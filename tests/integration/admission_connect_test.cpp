// SPDX-License-Identifier: BSD-3-Clause
// Admission through a real listener and connect (tcp, sockets over loopback): the right key
// connects and its payload arrives; a wrong key, no token or a replayed token is rejected before
// accept, the client sees errc::rejected naming the reason, and the listener keeps serving; an
// identity + payload that does not fit the connect data is refused before sending. The ctest
// label verbs_rules runs it again under REMORA_RULES=verbs (55 bytes of connect data); the last
// tests hold their domains to verbs' rules themselves.
#include "support.hpp"

namespace remora::test {
namespace {

admission_key key_of(std::uint8_t fill) {
    std::array<std::byte, 32> raw;
    raw.fill(static_cast<std::byte>(fill));
    return must(admission_key::from_bytes(raw), "key");
}

struct admission_connect : testing::TestWithParam<std::string> {
    domain server_dom = must(domain::open({.provider = GetParam()}));
    domain client_dom = must(domain::open({.provider = GetParam()}));
    listener lst = must(listener::create(server_dom, "127.0.0.1", 0));
    admission_gate gate = must(admission_gate::create(key_of(7)));

    // Runs `connect` in a thread while the server admits (and accepts) or refuses its request.
    // Returns the client's result; `admitted` gets the server's.
    template <class Connect>
    result<connection> run(Connect connect, result<admitted_peer>* admitted = nullptr,
                           std::optional<connection>* server = nullptr) {
        auto client = std::async(std::launch::async, connect);
        auto req = request_while_connecting(lst, client);
        if (req) {
            auto p = gate.admit(*req);
            if (p) {
                auto s = req->accept();
                if (s && server)
                    server->emplace(std::move(*s));
            }
            if (admitted)
                *admitted = std::move(p);
        }
        return client.get();
    }
};

TEST_P(admission_connect, right_key_connects_and_carries_identity_and_payload) {
    const std::array<std::byte, 2> payload{std::byte{9}, std::byte{1}};
    auto k = key_of(7);
    result<admitted_peer> p = fail(errc::bad_state, "not run");
    std::optional<connection> server;
    auto c = run(
        [&] {
            return connect_admitted(client_dom, "127.0.0.1", lst.port(), k, "client-1", {},
                                    payload);
        },
        &p, &server);
    REMORA_ASSERT_OK(c);
    REMORA_ASSERT_OK(p);
    EXPECT_EQ(p->identity, "client-1");
    EXPECT_EQ(p->payload, std::vector<std::byte>(payload.begin(), payload.end()));
    ASSERT_TRUE(server.has_value());
    EXPECT_TRUE(c->is_open());
}

TEST_P(admission_connect, wrong_key_is_rejected_with_its_reason_and_the_listener_serves_on) {
    auto wrong = key_of(8);
    result<admitted_peer> p = fail(errc::bad_state, "not run");
    auto c =
        run([&] { return connect_admitted(client_dom, "127.0.0.1", lst.port(), wrong, "mallory"); },
            &p);
    ASSERT_ERRC(c, errc::rejected);
    EXPECT_EQ(admission_refusal_of(c.error()), admission_refusal::bad_proof);
    EXPECT_NE(c.error().message().find("wrong key"), std::string::npos) << c.error().what();
    ASSERT_ERRC(p, errc::access_denied);
    EXPECT_EQ(gate.remembered(), 0u);
    // The next client with the right key still gets in.
    auto k = key_of(7);
    REMORA_ASSERT_OK(
        run([&] { return connect_admitted(client_dom, "127.0.0.1", lst.port(), k, "alice"); }));
}

TEST_P(admission_connect, client_without_a_token_is_rejected_as_malformed) {
    const std::array<std::byte, 2> depth{std::byte{8}, std::byte{0}};
    auto c =
        run([&] { return connection::connect(client_dom, "127.0.0.1", lst.port(), {}, depth); });
    ASSERT_ERRC(c, errc::rejected);
    EXPECT_EQ(admission_refusal_of(c.error()), admission_refusal::malformed);
    auto none = run([&] { return connection::connect(client_dom, "127.0.0.1", lst.port()); });
    ASSERT_ERRC(none, errc::rejected);
    EXPECT_EQ(admission_refusal_of(none.error()), admission_refusal::malformed);
}

TEST_P(admission_connect, replayed_token_is_rejected) {
    auto k = key_of(7);
    const auto token = must(make_admission_token(k, "alice"));
    std::optional<connection> server;
    auto first =
        run([&] { return connection::connect(client_dom, "127.0.0.1", lst.port(), {}, token); },
            nullptr, &server);
    REMORA_ASSERT_OK(first);
    auto again =
        run([&] { return connection::connect(client_dom, "127.0.0.1", lst.port(), {}, token); });
    ASSERT_ERRC(again, errc::rejected);
    EXPECT_EQ(admission_refusal_of(again.error()), admission_refusal::replayed);
}

TEST_P(admission_connect, identity_and_payload_filling_the_room_exactly_connect) {
    const std::size_t room = admission_connect_room(client_dom);
    EXPECT_EQ(room, client_dom.caps().cm_data_size - admission_token_overhead);
    if (client_dom.caps().rules == provider_rules::verbs) {
        EXPECT_EQ(room, 17u);  // under REMORA_RULES=verbs: 55 - 38
    }
    ASSERT_GE(room, 15u);
    const std::string identity(std::min(room - 2, admission_max_identity), 'i');
    const std::vector<std::byte> payload(room - identity.size(), std::byte{3});
    auto k = key_of(7);
    result<admitted_peer> p = fail(errc::bad_state, "not run");
    std::optional<connection> server;
    auto c = run(
        [&] {
            return connect_admitted(client_dom, "127.0.0.1", lst.port(), k, identity, {}, payload);
        },
        &p, &server);
    REMORA_ASSERT_OK(c);
    REMORA_ASSERT_OK(p);
    EXPECT_EQ(p->identity, identity);
    EXPECT_EQ(p->payload, payload);
}

TEST_P(admission_connect, token_over_the_providers_limit_is_refused_before_sending) {
    auto k = key_of(7);
    const std::size_t limit = client_dom.caps().cm_data_size;
    const std::vector<std::byte> payload(admission_connect_room(client_dom), std::byte{1});
    auto c = connect_admitted(client_dom, "127.0.0.1", lst.port(), k, "x", {}, payload);
    ASSERT_ERRC(c, errc::invalid_argument);
    // Both sizes are named: the token's and the provider's limit.
    const std::string token_size = std::to_string(limit + 1) + " bytes";
    const std::string limit_size = std::to_string(limit) + " bytes";
    EXPECT_NE(c.error().message().find(token_size), std::string::npos) << c.error().what();
    EXPECT_NE(c.error().message().find(limit_size), std::string::npos) << c.error().what();
    // Nothing was sent: no request is waiting.
    EXPECT_ERRC(lst.get_request(std::chrono::milliseconds(200)), errc::timed_out);
}

// Domains held to verbs' rules whatever REMORA_RULES says: 55 bytes of connect data.
struct admission_verbs_rules : testing::TestWithParam<std::string> {
    domain server_dom =
        must(domain::open({.provider = GetParam(), .rules = provider_rules::verbs}));
    domain client_dom =
        must(domain::open({.provider = GetParam(), .rules = provider_rules::verbs}));
    listener lst = must(listener::create(server_dom, "127.0.0.1", 0));
    admission_gate gate = must(admission_gate::create(key_of(7)));
};

TEST_P(admission_verbs_rules, a_token_fits_and_admits) {
    ASSERT_EQ(client_dom.caps().cm_data_size, 55u);
    EXPECT_EQ(admission_connect_room(client_dom), 17u);
    const std::array<std::byte, 2> depth{std::byte{8}, std::byte{0}};
    const std::string identity(15, 'v');  // 38 + 15 + 2 = 55
    auto k = key_of(7);
    auto client = std::async(std::launch::async, [&] {
        return connect_admitted(client_dom, "127.0.0.1", lst.port(), k, identity, {}, depth);
    });
    auto req = request_while_connecting(lst, client);
    REMORA_ASSERT_OK(req);
    EXPECT_EQ(req->private_data().size(), 55u);
    auto p = gate.admit(*req);
    REMORA_ASSERT_OK(p);
    EXPECT_EQ(p->identity, identity);
    auto s = req->accept();
    REMORA_ASSERT_OK(s);
    REMORA_ASSERT_OK(client.get());
}

TEST_P(admission_verbs_rules, a_refusal_reaches_the_client) {
    auto wrong = key_of(8);
    auto client = std::async(std::launch::async, [&] {
        return connect_admitted(client_dom, "127.0.0.1", lst.port(), wrong, "mallory");
    });
    auto req = request_while_connecting(lst, client);
    REMORA_ASSERT_OK(req);
    EXPECT_ERRC(gate.admit(*req), errc::access_denied);
    auto c = client.get();
    ASSERT_ERRC(c, errc::rejected);
    EXPECT_EQ(admission_refusal_of(c.error()), admission_refusal::bad_proof);
}

TEST_P(admission_verbs_rules, too_long_an_identity_is_an_invalid_argument_naming_both_sizes) {
    auto k = key_of(7);
    // 64 bytes is a valid identity, and fits tcp's and sockets' own 256 bytes: not verbs' 55.
    auto c = connect_admitted(client_dom, "127.0.0.1", lst.port(), k, std::string(64, 'x'));
    ASSERT_ERRC(c, errc::invalid_argument);
    const std::string m = c.error().message();
    EXPECT_NE(m.find("102 bytes"), std::string::npos) << m;  // 38 + 64
    EXPECT_NE(m.find("55 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("verbs rules"), std::string::npos) << m;
    EXPECT_EQ(m.find("verbs rules: "), std::string::npos) << "not the seam's refusal: " << m;
    // One byte over: 18 bytes of identity and payload.
    const std::array<std::byte, 2> depth{std::byte{8}, std::byte{0}};
    EXPECT_ERRC(
        connect_admitted(client_dom, "127.0.0.1", lst.port(), k, std::string(16, 'x'), {}, depth),
        errc::invalid_argument);
    // Nothing was sent: no request is waiting.
    EXPECT_ERRC(lst.get_request(std::chrono::milliseconds(200)), errc::timed_out);
}

INSTANTIATE_TEST_SUITE_P(providers, admission_connect, testing::ValuesIn(providers()),
                         provider_name);
INSTANTIATE_TEST_SUITE_P(providers, admission_verbs_rules, testing::ValuesIn(providers()),
                         provider_name);

}  // namespace
}  // namespace remora::test

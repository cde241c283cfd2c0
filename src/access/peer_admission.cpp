// SPDX-License-Identifier: BSD-3-Clause
// src/access/peer_admission.cpp — admission of RDM peers: the attach handshake
// (remora/admission.hpp) over the endpoint layer's control messages (core/peer_control.hpp).
#include <sodium.h>

#include <algorithm>
#include <cstring>

#include <remora/admission.hpp>

#include "core/peer_control.hpp"

namespace remora {
namespace {

constexpr std::byte magic_byte(char c) {
    return static_cast<std::byte>(c);
}
constexpr std::array<std::byte, 4> challenge_magic = {magic_byte('R'), magic_byte('M'),
                                                      magic_byte('A'), magic_byte('C')};
constexpr std::array<std::byte, 4> accept_magic = {magic_byte('R'), magic_byte('M'),
                                                   magic_byte('A'), magic_byte('A')};
constexpr std::byte handshake_version{1};
constexpr std::size_t challenge_size = 16;
constexpr std::size_t challenge_message = 4 + 1 + challenge_size;
constexpr std::size_t max_client_payload = 256;

bool starts_with(std::span<const std::byte> m, std::span<const std::byte> prefix) {
    return m.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), m.begin());
}

std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds t) {
    return std::chrono::steady_clock::now() + t;
}

}  // namespace

result<attach_request> attach_request::receive(connection& conn,
                                               std::chrono::milliseconds timeout) {
    if (sodium_init() < 0)
        return fail(errc::not_supported, "libsodium failed to initialise");
    attach_request req(conn, deadline_after(timeout));
    randombytes_buf(req.challenge_.data(), req.challenge_.size());
    std::array<std::byte, challenge_message> m{};
    std::copy(challenge_magic.begin(), challenge_magic.end(), m.begin());
    m[4] = handshake_version;
    std::copy(req.challenge_.begin(), req.challenge_.end(), m.begin() + 5);
    auto token = detail::control_exchange(conn, m, true, req.deadline_);
    if (!token) {
        if (token.error() == errc::timed_out)
            return fail(errc::timed_out,
                        "admission: the attached peer sent no token in time (did it call "
                        "prove_admission after attaching this target?)");
        return fail(token.error());
    }
    req.token_ = std::move(*token);
    return req;
}

result<admitted_peer> attach_request::check(admission_gate& gate) const {
    auto peer = gate.check(token_);
    if (!peer)
        return peer;
    // Not secret, so no constant-time compare: the HMAC above already vouched for the bytes.
    if (!starts_with(peer->payload, challenge_)) {
        const auto d = admission_reject_data(admission_refusal::replayed);
        return tl::unexpected<error>(
            error(errc::access_denied,
                  "admission refused: the token answers another challenge (replayed)")
                .with_data({d.begin(), d.end()}));
    }
    peer->payload.erase(peer->payload.begin(), peer->payload.begin() + challenge_size);
    return peer;
}

result<void> attach_request::answer(std::span<const std::byte> message) {
    if (answered_)
        return fail(errc::bad_state, "admission: this attach request was answered already");
    auto r = detail::control_exchange(*conn_, message, false, deadline_);
    if (!r)
        return fail(r.error());
    answered_ = true;
    return {};
}

result<void> attach_request::accept(std::span<const std::byte> data) {
    if (data.size() > admission_max_accept_data)
        return fail(errc::too_large, "admission: " + std::to_string(data.size()) +
                                         " bytes of accept data (at most " +
                                         std::to_string(admission_max_accept_data) + ")");
    std::vector<std::byte> m(accept_magic.begin(), accept_magic.end());
    m.insert(m.end(), data.begin(), data.end());
    return answer(m);
}

result<void> attach_request::reject(admission_refusal reason) {
    const auto d = admission_reject_data(reason);
    return answer(d);
}

result<std::vector<std::byte>> prove_admission(connection& conn, const admission_key& key,
                                               std::string_view identity,
                                               std::span<const std::byte> payload,
                                               std::chrono::milliseconds timeout) {
    if (payload.size() > max_client_payload)
        return fail(errc::invalid_argument, "admission: a payload of " +
                                                std::to_string(payload.size()) +
                                                " bytes (at most 256 on an RDM peer)");
    if (identity.size() > admission_max_identity)
        return fail(
            errc::invalid_argument,
            "admission: an identity of " + std::to_string(identity.size()) + " bytes (at most 64)");
    const auto deadline = deadline_after(timeout);
    auto challenge = detail::control_exchange(conn, {}, true, deadline);
    if (!challenge) {
        if (challenge.error() == errc::timed_out)
            return fail(errc::timed_out,
                        "admission: the target sent no challenge in time (has it attached this "
                        "peer's local_address and called attach_request::receive?)");
        return fail(challenge.error());
    }
    if (challenge->size() != challenge_message || !starts_with(*challenge, challenge_magic) ||
        (*challenge)[4] != handshake_version)
        return fail(errc::malformed_descriptor,
                    "admission: the target's first message is not a challenge (" +
                        std::to_string(challenge->size()) + " bytes)");
    std::vector<std::byte> bound(challenge->begin() + 5, challenge->end());
    bound.insert(bound.end(), payload.begin(), payload.end());
    auto token = make_admission_token(key, identity, bound);
    if (!token)
        return fail(token.error());
    auto answer = detail::control_exchange(conn, *token, true, deadline);
    if (!answer) {
        if (answer.error() == errc::timed_out)
            return fail(errc::timed_out, "admission: the target did not answer the token in time");
        return fail(answer.error());
    }
    if (starts_with(*answer, accept_magic))
        return std::vector<std::byte>(answer->begin() + 4, answer->end());
    auto as_reject = error(errc::rejected, "").with_data(*answer);
    if (auto why = admission_refusal_of(as_reject))
        return tl::unexpected<error>(
            error(errc::rejected, std::string("the target refused admission: ") + to_string(*why))
                .with_data(std::move(*answer)));
    return fail(errc::malformed_descriptor,
                "admission: the target's answer is not a handshake "
                "message (" +
                    std::to_string(answer->size()) + " bytes)");
}

result<admitted_peer> admit_peer(connection& conn, admission_gate& gate,
                                 std::span<const std::byte> accept_data,
                                 std::chrono::milliseconds timeout) {
    auto req = attach_request::receive(conn, timeout);
    if (!req)
        return fail(req.error());
    auto peer = req->check(gate);
    if (!peer) {
        const auto why = admission_refusal_of(peer.error()).value_or(admission_refusal::malformed);
        (void)req->reject(why);
        return peer;
    }
    if (auto r = req->accept(accept_data); !r)
        return fail(r.error());
    return peer;
}

}  // namespace remora

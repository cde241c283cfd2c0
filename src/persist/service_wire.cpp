// SPDX-License-Identifier: BSD-3-Clause
// The target service's wire format: requests and replies encoded and validated (persist_impl.hpp
// describes the layout).
#include <cstring>
#include <string>

#include "core/little_endian.hpp"
#include "persist/persist_impl.hpp"

namespace remora::detail {

// ---------------------------------------------------------------- wire format

namespace {

result<void> check_header(std::span<const std::byte> in, std::size_t size, const char* what) {
    if (in.size() != size) {
        return fail(errc::invalid_argument, std::string(what) + ": " + std::to_string(in.size()) +
                                                " bytes, want " + std::to_string(size));
    }
    if (get_le(in.data(), 4) != service_magic) {
        return fail(errc::invalid_argument, std::string(what) + ": bad magic");
    }
    if (static_cast<std::uint8_t>(in[4]) != service_version) {
        return fail(errc::invalid_argument, std::string(what) + ": version " +
                                                std::to_string(static_cast<unsigned>(in[4])) +
                                                " is not supported");
    }
    const auto op = static_cast<std::uint8_t>(in[5]);
    if (op < static_cast<std::uint8_t>(service_op::flush) ||
        op > static_cast<std::uint8_t>(service_op::hello)) {
        return fail(errc::invalid_argument,
                    std::string(what) + ": unknown operation " + std::to_string(op));
    }
    return {};
}

}  // namespace

namespace {

// The first 16 bytes of both messages: magic, version, op, a 16-bit field (request flags or
// reply status) and the request id.
void put_header(std::byte* p, service_op op, std::uint16_t field, std::uint64_t id) noexcept {
    put_le(p, service_magic, 4);
    p[4] = static_cast<std::byte>(service_version);
    p[5] = static_cast<std::byte>(op);
    put_le(p + 6, field, 2);
    put_le(p + 8, id, 8);
}

}  // namespace

void encode(const service_request& r, std::span<std::byte, request_size> out) noexcept {
    std::byte* p = out.data();
    put_header(p, r.op, r.flags, r.id);
    put_le(p + 16, r.key, 8);
    put_le(p + 24, r.address, 8);
    put_le(p + 32, r.arg0, 8);
    put_le(p + 40, r.arg1, 8);
}

void encode(const service_reply& r, std::span<std::byte, reply_size> out) noexcept {
    std::byte* p = out.data();
    put_header(p, r.op, r.status, r.id);
    put_le(p + 16, r.value, 8);
    put_le(p + 24, 0, 8);
}

result<service_request> decode_request(std::span<const std::byte> in) {
    if (auto r = check_header(in, request_size, "service request"); !r) {
        return fail(r.error());
    }
    service_request rq;
    rq.op = static_cast<service_op>(in[5]);
    rq.flags = static_cast<std::uint16_t>(get_le(&in[6], 2));
    if ((rq.flags & ~flush_persistent) != 0 || (rq.flags != 0 && rq.op != service_op::flush)) {
        return fail(errc::invalid_argument, "service request: unknown flags");
    }
    rq.id = get_le(&in[8], 8);
    rq.key = get_le(&in[16], 8);
    rq.address = get_le(&in[24], 8);
    rq.arg0 = get_le(&in[32], 8);
    rq.arg1 = get_le(&in[40], 8);
    if (rq.op != service_op::compare_swap && rq.arg1 != 0) {
        return fail(errc::invalid_argument, "service request: unused operand is not zero");
    }
    if (rq.op == service_op::hello && (rq.key != 0 || rq.address != 0 || rq.arg0 != 0)) {
        return fail(errc::invalid_argument, "service request: a hello's fields are not zero");
    }
    return rq;
}

result<service_reply> decode_reply(std::span<const std::byte> in) {
    if (auto r = check_header(in, reply_size, "service reply"); !r) {
        return fail(r.error());
    }
    service_reply rp;
    rp.op = static_cast<service_op>(in[5]);
    rp.status = static_cast<std::uint16_t>(get_le(&in[6], 2));
    if (rp.status > static_cast<std::uint16_t>(errc::provider_error)) {
        return fail(errc::invalid_argument, "service reply: unknown status");
    }
    rp.id = get_le(&in[8], 8);
    rp.value = get_le(&in[16], 8);
    if (get_le(&in[24], 8) != 0) {
        return fail(errc::invalid_argument, "service reply: reserved field is not zero");
    }
    return rp;
}

}  // namespace remora::detail

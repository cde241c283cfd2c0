// SPDX-License-Identifier: BSD-3-Clause
// Bad input gets a clear error and changes nothing: every refused operation is refused before it is
// posted (no completion, no byte moved), on the real tcp and sockets providers over loopback.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/impl.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

constexpr std::uint64_t u64max = std::numeric_limits<std::uint64_t>::max();
constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();
constexpr std::size_t region_size = 4096;
constexpr std::byte target_fill{0xa5};
constexpr std::byte local_fill{0x3c};

bool all_equal(std::span<const std::byte> s, std::byte v) {
    return std::all_of(s.begin(), s.end(), [v](std::byte b) { return b == v; });
}

std::vector<std::byte> filled(std::size_t n, char c) {
    return std::vector<std::byte>(n, static_cast<std::byte>(c));
}

class bad_input : public testing::TestWithParam<std::string> {
  protected:
    // A connected pair; the server's progress thread lets one-sided traffic land on tcp.
    void open_pair(connection_config server_cfg = {}, connection_config client_cfg = {}) {
        server_cfg.progress_thread = true;
        auto p = connect_pair(GetParam(), server_cfg, client_cfg);
        ASSERT_TRUE(p.has_value()) << p.error().what();
        pair_.emplace(std::move(*p));
        std::fill(target_.bytes.begin(), target_.bytes.end(), target_fill);
        std::fill(local_.bytes.begin(), local_.bytes.end(), local_fill);
        tmr_.emplace(must(memory_region::create(pair_->server_domain, target_.span(),
                                                usage::write_destination | usage::read_source)));
        lmr_.emplace(must(memory_region::create(pair_->client_domain, local_.span(),
                                                usage::write_source | usage::read_destination)));
        probe_mr_.emplace(must(
            memory_region::create(pair_->client_domain, probe_.span(), usage::read_destination)));
        desc_ = must(tmr_->describe());
    }

    connection& client() { return *pair_->client; }
    connection& server() { return *pair_->server; }

    // Posts a valid read of remote [0, 8) and waits (generously) for its completion, which must
    // be the first and the only one on the client's CQ. An operation refused "before posting"
    // that was posted anyway would sit ahead of the probe on this ordered connection: a write
    // completes once sent and a read once answered, both before the later probe's answer. And
    // each operation holds a queue entry from post until its completion is read, so once the
    // probe's completion is read nothing may still be in flight, nor waiting in the CQ.
    void probe_only_completion() {
        int probe_ctx = 0;
        ASSERT_TRUE(client().read(*probe_mr_, 0, desc_, 0, 8, {.context = &probe_ctx}).has_value());
        auto done = collect(client().cq(), 1, false, 10s);
        ASSERT_EQ(done.size(), 1u) << "the probe read never completed";
        EXPECT_EQ(done[0].context, &probe_ctx) << "a refused operation completed before the probe";
        EXPECT_TRUE(done[0].ok()) << done[0].status.message();
        EXPECT_EQ(done[0].op, op::read);
        completion more[4];
        auto n = client().cq().poll(more);
        ASSERT_TRUE(n.has_value()) << n.error().what();
        EXPECT_EQ(*n, 0u) << "a refused operation produced a completion";
        EXPECT_EQ(client().in_flight(), 0u) << "a refused operation holds a queue entry";
    }

    void expect_target_unchanged() { EXPECT_TRUE(all_equal(target_.bytes, target_fill)); }
    void expect_local_unchanged() { EXPECT_TRUE(all_equal(local_.bytes, local_fill)); }

    // The memory outlives the connections: a progress thread may still be in the provider with
    // it when the test ends (ASan's sendmsg check).
    buffer target_{region_size};
    buffer local_{region_size};
    buffer probe_{64};
    std::optional<connected_pair> pair_;
    std::optional<memory_region> tmr_, lmr_, probe_mr_;
    remote_region desc_;
};

// ---------------------------------------------------------------- ranges

TEST_P(bad_input, remote_out_of_range_write_is_refused_before_posting) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    int ctx = 0;
    const op_options o{.context = &ctx};
    EXPECT_ERRC(client().write(desc_, 4000, *lmr_, 0, 200, o), errc::out_of_range);
    EXPECT_ERRC(client().write(desc_, 4096, *lmr_, 0, 1, o), errc::out_of_range);
    EXPECT_ERRC(client().write(desc_, 4097, *lmr_, 0, 0, o), errc::out_of_range);
    EXPECT_ERRC(client().write(desc_, 1, *lmr_, 0, 4096, o), errc::out_of_range);
    // offset + length wraps around 2^64 into the region: still refused.
    EXPECT_ERRC(client().write(desc_, u64max, *lmr_, 0, 8, o), errc::out_of_range);
    EXPECT_ERRC(client().write(desc_, u64max - 3, *lmr_, 0, 16, o), errc::out_of_range);
    EXPECT_ERRC(client().write_with_imm(desc_, u64max - 3, *lmr_, 0, 16, 7, o), errc::out_of_range);
    // A slice grants nothing beyond itself, though the region behind it is larger.
    const remote_region part = must(desc_.slice(1024, 64));
    EXPECT_ERRC(client().write(part, 0, *lmr_, 0, 65, o), errc::out_of_range);
    EXPECT_ERRC(client().write(part, 64, *lmr_, 0, 1, o), errc::out_of_range);
    probe_only_completion();
    expect_target_unchanged();
}

TEST_P(bad_input, remote_out_of_range_read_is_refused_before_posting) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    int ctx = 0;
    const op_options o{.context = &ctx};
    EXPECT_ERRC(client().read(*lmr_, 0, desc_, 4000, 200, o), errc::out_of_range);
    EXPECT_ERRC(client().read(*lmr_, 0, desc_, 4096, 1, o), errc::out_of_range);
    EXPECT_ERRC(client().read(*lmr_, 0, desc_, 1, 4096, o), errc::out_of_range);
    EXPECT_ERRC(client().read(*lmr_, 0, desc_, u64max, 8, o), errc::out_of_range);
    EXPECT_ERRC(client().read(*lmr_, 0, desc_, u64max - 3, 16, o), errc::out_of_range);
    const remote_region part = must(desc_.slice(1024, 64));
    EXPECT_ERRC(client().read(*lmr_, 0, part, 1, 64, o), errc::out_of_range);
    probe_only_completion();
    expect_local_unchanged();
    expect_target_unchanged();
}

TEST_P(bad_input, local_range_outside_local_region) {
    ASSERT_NO_FATAL_FAILURE(open_pair({}, {.max_sge = 2}));
    int ctx = 0;
    const op_options o{.context = &ctx};
    EXPECT_ERRC(client().write(desc_, 0, *lmr_, 4000, 200, o), errc::out_of_range);
    EXPECT_ERRC(client().write(desc_, 0, *lmr_, 4097, 0, o), errc::out_of_range);
    EXPECT_ERRC(client().write(desc_, 0, *lmr_, 0, 4097, o), errc::out_of_range);
    EXPECT_ERRC(client().write(desc_, 0, *lmr_, size_max, 2, o), errc::out_of_range);
    EXPECT_ERRC(client().write(desc_, 0, *lmr_, 8, size_max - 7, o), errc::out_of_range);
    EXPECT_ERRC(client().read(*lmr_, 4000, desc_, 0, 200, o), errc::out_of_range);
    EXPECT_ERRC(client().read(*lmr_, size_max, desc_, 0, 2, o), errc::out_of_range);
    // One good segment and one bad one: nothing is posted.
    const local_segment segs[] = {{&*lmr_, 0, 8}, {&*lmr_, 4090, 8}};
    EXPECT_ERRC(client().write(desc_, 0, segs, o), errc::out_of_range);
    EXPECT_ERRC(client().read(segs, desc_, 0, o), errc::out_of_range);

    // send and recv check the local range too.
    auto smr = must(memory_region::create(pair_->client_domain, local_.span(), usage::send));
    EXPECT_ERRC(client().send(smr, 4000, 97, o), errc::out_of_range);
    buffer rbuf(256);
    auto rmr = must(memory_region::create(pair_->server_domain, rbuf.span(), usage::receive));
    EXPECT_ERRC(server().recv(rmr, 200, 57, o), errc::out_of_range);
    EXPECT_ERRC(server().recv(rmr, 257, 0, o), errc::out_of_range);
    probe_only_completion();
    expect_target_unchanged();
    expect_local_unchanged();
    completion c[4];
    auto n = server().cq().poll(c);
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(*n, 0u);
}

// ---------------------------------------------------------------- usage

TEST_P(bad_input, write_to_remote_region_without_write_destination_is_denied) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    buffer ro(region_size);
    std::fill(ro.bytes.begin(), ro.bytes.end(), target_fill);
    auto ro_mr = must(memory_region::create(pair_->server_domain, ro.span(), usage::read_source));
    const remote_region ro_desc = must(ro_mr.describe());
    ASSERT_EQ(ro_desc.usages(), usage::read_source);
    int ctx = 0;
    EXPECT_ERRC(client().write(ro_desc, 0, *lmr_, 0, 64, {.context = &ctx}), errc::access_denied);
    EXPECT_ERRC(client().write_with_imm(ro_desc, 0, *lmr_, 0, 64, 1, {.context = &ctx}),
                errc::access_denied);
    // And the converse: reading a region that only grants writes.
    buffer wo(region_size);
    std::fill(wo.bytes.begin(), wo.bytes.end(), target_fill);
    auto wo_mr =
        must(memory_region::create(pair_->server_domain, wo.span(), usage::write_destination));
    const remote_region wo_desc = must(wo_mr.describe());
    EXPECT_ERRC(client().read(*lmr_, 0, wo_desc, 0, 64, {.context = &ctx}), errc::access_denied);
    probe_only_completion();
    EXPECT_TRUE(all_equal(ro.bytes, target_fill));
    expect_local_unchanged();
}

// A descriptor forged to claim write_destination for a region registered read-only passes
// remora's check (remora cannot know), but the key was registered without FI_REMOTE_WRITE, so the
// provider must not let the bytes land (least privilege is enforced by the registration).
// The bytes are checked only once the target has provably dealt with the write:
// - sockets completes a write when the target acknowledges it, so the write's completion is the
//   target's answer: access_denied. (A read posted right behind it is not usable as a witness on
//   sockets: it attributes the refusal to whichever of the two it answers last.)
// - tcp completes a write once it is sent, so a read of the same bytes through the genuine
//   descriptor follows it on the same ordered connection. The target drops the connection on
//   the bad key: the read is flushed (canceled) and the client sees the connection close.
//   Had the write been applied, the read would have succeeded and brought the forged bytes back.
// On the same-host path shm checks no key or access right (docs/concepts.md): a forged
// descriptor made without the region's same-host address is refused before posting (the path
// reaches only descriptors carrying one), and one forged with it does write the region.
TEST_P(bad_input, forged_descriptor_cannot_write_a_read_only_region) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    buffer ro(region_size);
    std::fill(ro.bytes.begin(), ro.bytes.end(), target_fill);
    auto ro_mr = must(memory_region::create(pair_->server_domain, ro.span(), usage::read_source));
    const remote_region real = must(ro_mr.describe());
    const remote_region forged = must(remote_region::make(
        real.address(), real.length(), real.key(), usage::read_source | usage::write_destination,
        real.virtual_addressing()));
    if (client().same_host()) {
        int ctx = 0;
        EXPECT_ERRC(client().write(forged, 0, *lmr_, 0, 64, {.context = &ctx}),
                    errc::not_supported);
        probe_only_completion();
        EXPECT_TRUE(all_equal(ro.bytes, target_fill)) << "the refused write landed";
        const remote_region reaching =
            must(remote_region::make(real.address(), real.length(), real.key(),
                                     usage::read_source | usage::write_destination,
                                     real.virtual_addressing(), real.same_host_address()));
        ASSERT_TRUE(client().write(reaching, 0, *lmr_, 0, 64, {.context = &ctx}).has_value());
        auto done = collect(client().cq(), 1, false, 10s);
        ASSERT_EQ(done.size(), 1u) << "the write never completed";
        EXPECT_TRUE(done[0].ok()) << done[0].status.message();
        EXPECT_TRUE(eventually([&] {
            return all_equal(std::span(ro.bytes).first(64), local_fill);
        })) << "no key check on the same-host path: the forged write should have landed";
        EXPECT_TRUE(all_equal(std::span(ro.bytes).subspan(64), target_fill));
        return;
    }
    buffer back(64);
    auto back_mr =
        must(memory_region::create(pair_->client_domain, back.span(), usage::read_destination));
    const bool tcp = GetParam() == "tcp";
    int ctx = 0, back_ctx = 0;
    ASSERT_TRUE(client().write(forged, 0, *lmr_, 0, 64, {.context = &ctx}).has_value());
    if (tcp) {
        ASSERT_TRUE(client().read(back_mr, 0, real, 0, 64, {.context = &back_ctx}).has_value());
    }
    auto done = collect(client().cq(), tcp ? 2 : 1, false, 10s);
    ASSERT_EQ(done.size(), tcp ? 2u : 1u) << "an operation never completed";
    EXPECT_EQ(done[0].context, &ctx);
    if (tcp) {
        EXPECT_EQ(done[1].context, &back_ctx);
        EXPECT_EQ(done[1].status, make_error_code(errc::canceled))
            << "the read behind the forged write: "
            << (done[1].ok() ? "succeeded" : done[1].status.message());
        EXPECT_FALSE(all_equal(back.bytes, local_fill)) << "the read brought the forged bytes back";
        auto ev = client().next_event(10s);
        ASSERT_TRUE(ev.has_value()) << ev.error().what();
        EXPECT_EQ(*ev, conn_event::closed) << to_string(*ev);
    } else {
        EXPECT_EQ(done[0].status, make_error_code(errc::access_denied))
            << "the forged write: " << (done[0].ok() ? "succeeded" : done[0].status.message());
        EXPECT_TRUE(client().is_open());
    }
    EXPECT_TRUE(all_equal(ro.bytes, target_fill)) << "a write landed in a read-only region";
}

TEST_P(bad_input, local_region_without_the_usage_is_denied) {
    ASSERT_NO_FATAL_FAILURE(open_pair({}, {.max_sge = 2}));
    int ctx = 0;
    const op_options o{.context = &ctx};
    buffer b(region_size);
    std::fill(b.bytes.begin(), b.bytes.end(), local_fill);
    // Registered for reads into it and sends from it, but not as a write source.
    auto no_ws = must(memory_region::create(pair_->client_domain, b.span(),
                                            usage::read_destination | usage::send));
    EXPECT_ERRC(client().write(desc_, 0, no_ws, 0, 64, o), errc::access_denied);
    EXPECT_ERRC(client().write_with_imm(desc_, 0, no_ws, 0, 64, 9, o), errc::access_denied);
    // Not a read destination.
    auto no_rd = must(memory_region::create(pair_->client_domain, b.span(), usage::write_source));
    EXPECT_ERRC(client().read(no_rd, 0, desc_, 0, 64, o), errc::access_denied);
    // Not a send source.
    EXPECT_ERRC(client().send(no_rd, 0, 64, o), errc::access_denied);
    EXPECT_ERRC(client().send_with_imm(no_rd, 0, 64, 1, o), errc::access_denied);
    // Mixed segments: the second lacks the usage, nothing is posted.
    const local_segment mixed[] = {{&*lmr_, 0, 8}, {&no_ws, 0, 8}};
    EXPECT_ERRC(client().write(desc_, 0, mixed, o), errc::access_denied);
    probe_only_completion();
    expect_target_unchanged();
    EXPECT_TRUE(all_equal(b.bytes, local_fill));
}

TEST_P(bad_input, receive_into_region_without_receive_usage_is_denied) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    buffer bad(256), good(256), src(256);
    std::fill(bad.bytes.begin(), bad.bytes.end(), std::byte{0});
    std::fill(good.bytes.begin(), good.bytes.end(), std::byte{0});
    std::fill(src.bytes.begin(), src.bytes.end(), std::byte{0x77});
    auto bad_mr = must(memory_region::create(pair_->server_domain, bad.span(),
                                             usage::write_destination | usage::send));
    auto good_mr = must(memory_region::create(pair_->server_domain, good.span(), usage::receive));
    auto src_mr = must(memory_region::create(pair_->client_domain, src.span(), usage::send));
    int bad_ctx = 0, good_ctx = 0, send_ctx = 0;
    EXPECT_ERRC(server().recv(bad_mr, 0, 256, {.context = &bad_ctx}), errc::access_denied);
    ASSERT_TRUE(server().recv(good_mr, 0, 256, {.context = &good_ctx}).has_value());
    ASSERT_TRUE(client().send(src_mr, 0, 100, {.context = &send_ctx}).has_value());
    auto sent = collect(client().cq(), 1, false, 2s);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_TRUE(sent[0].ok()) << sent[0].status.message();
    // Receives match messages in the order they were posted: had the refused receive been
    // posted, it would have been first and taken this message.
    auto got = collect(server().cq(), 1, false, 10s);
    ASSERT_EQ(got.size(), 1u) << "the message never arrived";
    EXPECT_EQ(got[0].context, &good_ctx) << "the refused receive was posted";
    EXPECT_EQ(got[0].op, op::recv);
    EXPECT_EQ(got[0].bytes, 100u);
    EXPECT_TRUE(all_equal(std::span(good.bytes).first(100), std::byte{0x77}));
    EXPECT_TRUE(all_equal(bad.bytes, std::byte{0}));
    completion more[4];
    auto n = server().cq().poll(more);
    ASSERT_TRUE(n.has_value()) << n.error().what();
    EXPECT_EQ(*n, 0u);
    EXPECT_EQ(server().in_flight(), 0u) << "the refused receive holds a queue entry";
}

// ---------------------------------------------------------------- segments

TEST_P(bad_input, more_segments_than_max_sge_is_too_large) {
    const std::size_t limit = [&] {
        auto d = domain::open({.provider = GetParam()});
        return d ? d->caps().iov_limit : 0;
    }();
    ASSERT_GT(limit, 1u);
    ASSERT_NO_FATAL_FAILURE(open_pair({}, {.max_sge = static_cast<std::uint32_t>(limit)}));
    ASSERT_EQ(client().config().max_sge, limit);
    int ctx = 0;
    const op_options o{.context = &ctx};
    std::vector<local_segment> segs;
    for (std::size_t i = 0; i <= limit; ++i) {
        segs.push_back({&*lmr_, i * 16, 16});
    }
    const std::span<const local_segment> over(segs);
    const std::span<const local_segment> at = over.first(limit);
    EXPECT_ERRC(client().write(desc_, 0, over, o), errc::too_large);
    EXPECT_ERRC(client().write_with_imm(desc_, 0, over, 1, o), errc::too_large);
    EXPECT_ERRC(client().read(over, desc_, 0, o), errc::too_large);
    auto smr = must(memory_region::create(pair_->client_domain, local_.span(), usage::send));
    std::vector<local_segment> ssegs(limit + 1, local_segment{&smr, 0, 8});
    EXPECT_ERRC(client().send(ssegs, o), errc::too_large);
    // Far more segments than any provider's limit.
    std::vector<local_segment> many(64, local_segment{&*lmr_, 0, 8});
    EXPECT_ERRC(client().write(desc_, 0, many, o), errc::too_large);
    probe_only_completion();
    expect_target_unchanged();

    // Exactly max_sge segments work: a gathered write lands in order.
    for (std::size_t i = 0; i < limit; ++i) {
        std::memset(local_.bytes.data() + i * 16, static_cast<int>('a' + i), 16);
    }
    ASSERT_TRUE(client().write(desc_, 100, at, o).has_value());
    auto done = collect(client().cq(), 1, false, 2s);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok()) << done[0].status.message();
    probe_only_completion();
    for (std::size_t i = 0; i < limit; ++i) {
        EXPECT_TRUE(all_equal(std::span(target_.bytes).subspan(100 + i * 16, 16),
                              static_cast<std::byte>('a' + i)))
            << "segment " << i;
    }

    // On the server (default max_sge 1) two receive segments are too many.
    buffer rb(64);
    auto rmr = must(memory_region::create(pair_->server_domain, rb.span(), usage::receive));
    const local_segment two[] = {{&rmr, 0, 32}, {&rmr, 32, 32}};
    ASSERT_EQ(server().config().max_sge, 1u);
    EXPECT_ERRC(server().recv(two, o), errc::too_large);
}

// ---------------------------------------------------------------- private data

TEST_P(bad_input, oversize_private_data_on_connect_is_too_large) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    const std::size_t limit = cd.caps().cm_data_size;
    ASSERT_GT(limit, 0u);
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    const auto over = filled(limit + 1, 'x');
    const auto start = std::chrono::steady_clock::now();
    EXPECT_ERRC(connection::connect(cd, "127.0.0.1", lst.port(), {}, over), errc::too_large);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
    auto huge = filled(1 << 16, 'y');
    EXPECT_ERRC(connection::connect(cd, "127.0.0.1", lst.port(), {}, huge), errc::too_large);
    // Exactly the limit is carried whole. It is the first request the listener sees: the
    // refused connects sent nothing (had they, their requests would have arrived before it).
    const auto exact = filled(limit, 'z');
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(cd, "127.0.0.1", lst.port(), {}, exact);
    });
    auto s = [&]() -> result<connection> {
        auto r = request_while_connecting(lst, client);
        if (!r)
            return fail(r.error());
        if (r->private_data().size() != limit ||
            !std::equal(exact.begin(), exact.end(), r->private_data().begin()))
            return fail(errc::invalid_argument, "the first request was not the valid connect's");
        return r->accept();
    }();
    auto c = client.get();
    ASSERT_TRUE(c.has_value()) << c.error().what();
    ASSERT_TRUE(s.has_value()) << s.error().what();
    EXPECT_EQ(s->peer_private_data().size(), limit);
    EXPECT_ERRC(lst.get_request(0ms), errc::timed_out);  // and no other request is waiting
}

TEST_P(bad_input, oversize_private_data_on_accept_is_too_large_and_request_stays_answerable) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    const std::size_t limit = sd.caps().cm_data_size;
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    const auto over = filled(limit + 1, 'a');
    const auto exact = filled(limit, 'b');
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(cd, "127.0.0.1", lst.port(), {.connect_timeout = 5s});
    });
    auto s = [&]() -> result<connection> {
        auto r = request_while_connecting(lst, client);
        if (!r)
            return fail(r.error());
        auto bad = r->accept({}, over);
        if (bad || !(bad.error() == errc::too_large))
            return fail(errc::invalid_argument,
                        "oversize accept was not refused with too_large: " +
                            (bad ? std::string("accepted") : bad.error().what()));
        return r->accept({}, exact);
    }();
    auto c = client.get();
    ASSERT_TRUE(s.has_value()) << s.error().what();
    ASSERT_TRUE(c.has_value()) << c.error().what();
    const auto seen = c->peer_private_data();
    ASSERT_EQ(seen.size(), limit);
    EXPECT_TRUE(std::equal(exact.begin(), exact.end(), seen.begin()));
}

TEST_P(bad_input, oversize_private_data_on_reject_is_too_large_and_request_stays_answerable) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    const std::size_t limit = sd.caps().cm_data_size;
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(cd, "127.0.0.1", lst.port(), {.connect_timeout = 5s});
    });
    auto s = [&]() -> result<void> {
        auto r = request_while_connecting(lst, client);
        if (!r)
            return fail(r.error());
        auto bad = r->reject(filled(limit + 1, 'r'));
        if (bad || !(bad.error() == errc::too_large))
            return fail(errc::invalid_argument, "oversize reject was not refused with too_large");
        return r->reject(bytes_of("no room"));
    }();
    auto c = client.get();
    ASSERT_TRUE(s.has_value()) << s.error().what();
    ASSERT_FALSE(c.has_value());
    EXPECT_TRUE(c.error() == errc::rejected) << c.error().what();
}

TEST_P(bad_input, rejected_request_carries_private_data_both_ways) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    std::chrono::steady_clock::duration elapsed{};
    const auto start = std::chrono::steady_clock::now();
    auto client = std::async(std::launch::async, [&] {
        auto c = connection::connect(cd, "127.0.0.1", lst.port(), {.connect_timeout = 5s},
                                     bytes_of("client hello"));
        elapsed = std::chrono::steady_clock::now() - start;
        return c;
    });
    auto s = [&]() -> result<std::string> {
        auto r = request_while_connecting(lst, client);
        if (!r)
            return fail(r.error());
        std::string seen = string_of(r->private_data());
        if (auto j = r->reject(bytes_of("server says no")); !j)
            return fail(j.error());
        // Answered: neither accept nor a second reject is possible.
        auto again = r->accept();
        if (again || !(again.error() == errc::bad_state))
            return fail(errc::invalid_argument, "accept after reject was not bad_state");
        return seen;
    }();
    auto c = client.get();
    ASSERT_TRUE(s.has_value()) << s.error().what();
    EXPECT_EQ(s->substr(0, 12), "client hello");
    ASSERT_FALSE(c.has_value());
    std::printf("[%s] rejected connect: %s\n", GetParam().c_str(), c.error().what().c_str());
    EXPECT_TRUE(c.error() == errc::rejected) << c.error().what();
    EXPECT_LT(elapsed, 3s);
}

// connection.hpp: connect() fails with errc::rejected and the peer's reject private data in
// error::data(). The client has no other way to see it: a failed connect returns no connection.
TEST_P(bad_input, reject_private_data_reaches_the_client) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(cd, "127.0.0.1", lst.port(), {.connect_timeout = 5s});
    });
    auto s = [&]() -> result<void> {
        auto r = request_while_connecting(lst, client);
        if (!r)
            return fail(r.error());
        return r->reject(bytes_of("busy, retry at port 4242"));
    }();
    auto c = client.get();
    ASSERT_TRUE(s.has_value()) << s.error().what();
    ASSERT_FALSE(c.has_value());
    EXPECT_TRUE(c.error() == errc::rejected) << c.error().what();
    EXPECT_EQ(string_of(c.error().data()), "busy, retry at port 4242")
        << "the reject private data did not reach the client: " << c.error().what();
}

// listener.hpp: "A request dropped without either is rejected." The client must be able to tell a
// peer that listened and said no from an address where nobody listens.
TEST_P(bad_input, rejected_request_without_private_data) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(cd, "127.0.0.1", lst.port(), {.connect_timeout = 5s});
    });
    auto s = [&]() -> result<void> {
        auto r = request_while_connecting(lst, client);
        if (!r)
            return fail(r.error());
        return r->reject();
    }();
    auto c = client.get();
    ASSERT_TRUE(s.has_value()) << s.error().what();
    ASSERT_FALSE(c.has_value());
    std::printf("[%s] rejected connect (no data): %s\n", GetParam().c_str(),
                c.error().what().c_str());
    EXPECT_TRUE(c.error() == errc::rejected) << c.error().what();
}

// ---------------------------------------------------------------- connection_config

TEST_P(bad_input, connection_config_is_validated_before_anything_reaches_the_peer) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    const provider_caps& caps = cd.caps();
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    const auto tx = static_cast<std::uint32_t>(caps.tx_size);
    const auto rx = static_cast<std::uint32_t>(caps.rx_size);
    const auto iov = static_cast<std::uint32_t>(caps.iov_limit);
    struct bad {
        const char* what;
        connection_config cfg;
        errc code;
    };
    const bad cases[] = {
        {"sq_size 0", {.sq_size = 0}, errc::invalid_argument},
        {"rq_size 0", {.rq_size = 0}, errc::invalid_argument},
        {"cq_size below sq+rq",
         {.sq_size = 16, .rq_size = 16, .cq_size = 31},
         errc::invalid_argument},
        {"cq_size below sq with rcq",
         {.sq_size = 16, .rq_size = 16, .cq_size = 15, .rcq = true},
         errc::invalid_argument},
        {"rcq_size below rq",
         {.sq_size = 16, .rq_size = 16, .rcq = true, .rcq_size = 15},
         errc::invalid_argument},
        {"max_sge 0", {.max_sge = 0}, errc::too_large},
        {"max_sge above iov_limit", {.max_sge = iov + 1}, errc::too_large},
        {"connect_timeout 0", {.connect_timeout = 0ms}, errc::invalid_argument},
        {"shared_channel with separate mode",
         {.channel = channel_mode::separate, .shared_channel = must(completion_channel::create())},
         errc::invalid_argument},
    };
    for (const bad& b : cases) {
        SCOPED_TRACE(b.what);
        EXPECT_ERRC(connection::connect(cd, "127.0.0.1", lst.port(), b.cfg), b.code);
    }
    // The limits themselves are accepted, and the effective values read back. The valid
    // connect's request is the first the listener sees: none of the refused ones sent one (had
    // they, it would have arrived before this one).
    // Depths beyond the provider's are clamped to it (never the per-operation max_sge).
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(cd, "127.0.0.1", lst.port(),
                                   {.sq_size = tx + 1000, .rq_size = rx + 1000, .max_sge = iov},
                                   bytes_of("valid"));
    });
    auto s = [&]() -> result<connection> {
        auto r = request_while_connecting(lst, client);
        if (!r)
            return fail(r.error());
        if (string_of(r->private_data()).substr(0, 5) != "valid")
            return fail(errc::invalid_argument, "an invalid config reached the listener first");
        return r->accept();
    }();
    auto c = client.get();
    ASSERT_TRUE(c.has_value()) << c.error().what();
    ASSERT_TRUE(s.has_value()) << s.error().what();
    EXPECT_ERRC(lst.get_request(0ms), errc::timed_out);  // and no other request is waiting
    EXPECT_EQ(c->config().sq_size, tx);
    EXPECT_EQ(c->config().rq_size, rx);
    EXPECT_EQ(c->config().cq_size, tx + rx);
    EXPECT_EQ(c->cq().size(), tx + rx);
    EXPECT_EQ(c->config().max_sge, iov);
}

TEST_P(bad_input, invalid_config_on_accept_is_refused_and_the_client_is_turned_away) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    const auto iov = static_cast<std::uint32_t>(sd.caps().iov_limit);
    const auto start = std::chrono::steady_clock::now();
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(cd, "127.0.0.1", lst.port(), {.connect_timeout = 2s});
    });
    auto s = [&]() -> result<connection> {
        auto r = request_while_connecting(lst, client);
        if (!r)
            return fail(r.error());
        return r->accept({.max_sge = iov + 1});
    }();
    auto c = client.get();
    ASSERT_FALSE(s.has_value());
    EXPECT_TRUE(s.error() == errc::too_large) << s.error().what();
    // listener.hpp: an accept that fails rejects the request, so the client is told it was
    // rejected (with no private data), on both providers.
    ASSERT_ERRC(c, errc::rejected);
    EXPECT_TRUE(c.error().data().empty());
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
}

// ---------------------------------------------------------------- nobody listening

TEST_P(bad_input, connect_to_a_port_nobody_listens_on_fails_within_the_timeout) {
    // A bound but not listening socket holds the port, so nobody else takes it meanwhile.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    const std::uint16_t port = ntohs(a.sin_port);

    auto cd = must(domain::open({.provider = GetParam()}));
    const auto start = std::chrono::steady_clock::now();
    auto c = connection::connect(cd, "127.0.0.1", port, {.connect_timeout = 2s});
    const auto elapsed = std::chrono::steady_clock::now() - start;
    ::close(fd);
    ASSERT_FALSE(c.has_value());
    std::printf("[%s] connect to closed port after %lld ms: %s\n", GetParam().c_str(),
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()),
                c.error().what().c_str());
    // connection.hpp: connection_refused when nobody listens, at once on both providers (tcp
    // reports the refusal on the endpoint's event queue, sockets from fi_connect itself).
    EXPECT_ERRC(c, errc::connection_refused);
    EXPECT_LT(elapsed, 2s) << "a refusal waited for the connect timeout";
}

// result.hpp: errc::unreachable, "the address cannot be resolved or reached" (connection.hpp
// documents it for connect). A name that does not resolve (.invalid never does, RFC 6761), and
// an address no route reaches (the broadcast address: the kernel refuses it with ENETUNREACH),
// both fail at once, long before the connect timeout. On tcp, a reserved address (240.0.0.1,
// class E) too: the provider reports ENOPROTOOPT, which remora has no code for, so a failed
// connect with a provider code says unreachable (sockets calls it refused: its own mapping).
TEST_P(bad_input, connect_to_an_unresolvable_or_unroutable_address_is_unreachable) {
    auto cd = must(domain::open({.provider = GetParam()}));
    std::vector<const char*> hosts{"no-such-host.invalid", "255.255.255.255"};
    if (GetParam() == "tcp") {
        hosts.push_back("240.0.0.1");
    }
    for (const char* host : hosts) {
        SCOPED_TRACE(host);
        const auto start = std::chrono::steady_clock::now();
        auto c = connection::connect(cd, host, 4242, {.connect_timeout = 10s});
        const auto elapsed = std::chrono::steady_clock::now() - start;
        EXPECT_ERRC(c, errc::unreachable);
        EXPECT_LT(elapsed, 5s) << "an unreachable address waited for the connect timeout";
    }
}

// connection.hpp: connect fails with errc::timed_out after config.connect_timeout. A listener
// that never takes the request (nobody calls get_request) leaves the client waiting for an
// answer: the connect returns timed_out no sooner than the configured timeout, and before the
// 5 s default would have passed (so a connect that ignored the configured timeout fails this).
TEST_P(bad_input, connect_to_a_listener_that_never_answers_times_out) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    constexpr auto timeout = 1s;
    ASSERT_LT(timeout, connection_config{}.connect_timeout);
    const auto start = std::chrono::steady_clock::now();
    auto c = connection::connect(cd, "127.0.0.1", lst.port(), {.connect_timeout = timeout});
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_ERRC(c, errc::timed_out);
    EXPECT_GE(elapsed, timeout);
    EXPECT_LT(elapsed, connection_config{}.connect_timeout - 500ms);
    // The request did reach the listener: it was the answer that never came.
    auto req = lst.get_request(10s);
    EXPECT_TRUE(req.has_value()) << req.error().what();
}

// ---------------------------------------------------------------- immediate data, atomics

// connection.hpp: "`imm` must fit caps().cq_data_size bytes". tcp and sockets carry 8 bytes, so
// there every value fits: the widest arrives whole. A narrower provider (verbs reports 4 bytes)
// does not run here, and remora checks against the domain's measured cq_data_size, so the test
// narrows the client domain's measured width as such a provider would report it: a value above
// 32 bits is then refused before posting (the peer's first remote write after it carries the
// 32-bit value posted later), and a provider without immediate data refuses any.
TEST_P(bad_input, immediate_data_wider_than_the_provider_is_too_large) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    provider_caps& caps = detail::impl_of(pair_->client_domain)->caps;
    // Under verbs rules the domain reports verbs' 4 bytes itself: the 8-byte part does not apply.
    const bool verbs_rules = caps.rules == provider_rules::verbs;
    const std::size_t width = verbs_rules ? 4u : 8u;
    ASSERT_EQ(caps.cq_data_size, width) << GetParam() << " no longer carries " << width << " bytes";
    auto smr = must(memory_region::create(pair_->client_domain, local_.span(), usage::send));
    int ctx = 0;
    const op_options o{.context = &ctx};
    auto remote_imm = [&]() -> std::optional<std::uint64_t> {
        auto w = collect(client().cq(), 1, false, 10s);
        EXPECT_EQ(w.size(), 1u) << "the write never completed";
        auto got = collect(server().cq(), 1, false, 10s);
        if (got.size() != 1u || got[0].op != op::remote_write || !got[0].has_imm) {
            ADD_FAILURE() << "no remote write with immediate data reached the peer";
            return std::nullopt;
        }
        return got[0].imm;
    };

    // 8 bytes: every 64-bit value fits and arrives whole.
    if (!verbs_rules) {
        ASSERT_TRUE(client().write_with_imm(desc_, 0, *lmr_, 0, 8, u64max, o).has_value());
        EXPECT_EQ(remote_imm(), u64max);
    }

    caps.cq_data_size = 4;
    EXPECT_ERRC(client().write_with_imm(desc_, 0, *lmr_, 0, 8, std::uint64_t{1} << 32, o),
                errc::too_large);
    EXPECT_ERRC(client().write_with_imm(desc_, 0, *lmr_, 0, 8, u64max, o), errc::too_large);
    EXPECT_ERRC(client().send_with_imm(smr, 0, 8, std::uint64_t{1} << 32, o), errc::too_large);
    ASSERT_TRUE(client().write_with_imm(desc_, 0, *lmr_, 0, 8, 0xffffffffu, o).has_value());
    EXPECT_EQ(remote_imm(), 0xffffffffu) << "a refused write_with_imm reached the peer";

    caps.cq_data_size = 0;
    EXPECT_ERRC(client().write_with_imm(desc_, 0, *lmr_, 0, 8, 0, o), errc::not_supported);
    EXPECT_ERRC(client().send_with_imm(smr, 0, 8, 0, o), errc::not_supported);
    caps.cq_data_size = width;

    probe_only_completion();
    completion more[4];
    auto n = server().cq().poll(more);
    ASSERT_TRUE(n.has_value()) << n.error().what();
    EXPECT_EQ(*n, 0u) << "a refused operation reached the peer";
}

TEST_P(bad_input, atomic_write_without_native_atomics_is_not_supported) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    if (GetParam() == "tcp") {
        EXPECT_FALSE(pair_->client_domain.caps().native_atomics);
    }
    if (pair_->client_domain.caps().native_atomics) {
        GTEST_SKIP() << GetParam() << " has native atomics";
    }
    buffer word(64);
    auto amr = must(memory_region::create(pair_->server_domain, word.span(),
                                          usage::atomic_target | usage::read_source));
    const remote_region adesc = must(amr.describe());
    int ctx = 0;
    EXPECT_ERRC(client().atomic_write(adesc, 8, 42, {.context = &ctx}), errc::not_supported);
    probe_only_completion();
    EXPECT_TRUE(all_equal(word.bytes, std::byte{0}));
}

TEST_P(bad_input, atomic_write_checks_alignment_range_and_usage) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    // sockets must run it: tcp (no native atomics) skips it.
    if (GetParam() == "sockets") {
        ASSERT_TRUE(pair_->client_domain.caps().native_atomics);
    }
    if (!pair_->client_domain.caps().native_atomics) {
        GTEST_SKIP() << GetParam() << " has no native atomics";
    }
    buffer word(64);
    auto amr = must(memory_region::create(pair_->server_domain, word.span(),
                                          usage::atomic_target | usage::read_source));
    const remote_region adesc = must(amr.describe());
    int ctx = 0;
    const op_options o{.context = &ctx};
    for (std::uint64_t off : {1, 3, 4, 7, 12, 52}) {
        SCOPED_TRACE(off);
        EXPECT_ERRC(client().atomic_write(adesc, off, 42, o), errc::invalid_argument);
    }
    EXPECT_ERRC(client().atomic_write(adesc, 64, 42, o), errc::out_of_range);
    EXPECT_ERRC(client().atomic_write(adesc, 57, 42, o), errc::out_of_range);
    EXPECT_ERRC(client().atomic_write(adesc, u64max - 7, 42, o), errc::out_of_range);
    // The fixture's region grants reads and writes but not atomics.
    EXPECT_ERRC(client().atomic_write(desc_, 8, 42, o), errc::access_denied);
    probe_only_completion();
    EXPECT_TRUE(all_equal(word.bytes, std::byte{0}));
    expect_target_unchanged();

    // An aligned atomic write in range does land.
    const std::uint64_t value = 0x0123456789abcdefull;
    ASSERT_TRUE(client().atomic_write(adesc, 16, value, o).has_value());
    auto done = collect(client().cq(), 1, false, 2s);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok()) << done[0].status.message();
    EXPECT_EQ(done[0].context, &ctx);
    buffer back(8);
    auto bmr =
        must(memory_region::create(pair_->client_domain, back.span(), usage::read_destination));
    ASSERT_TRUE(client().read(bmr, 0, adesc, 16, 8).has_value());
    ASSERT_EQ(collect(client().cq(), 1, false, 2s).size(), 1u);
    std::uint64_t landed = 0;
    std::memcpy(&landed, word.bytes.data() + 16, 8);
    EXPECT_EQ(landed, value);
}

// ---------------------------------------------------------------- waiting on the wrong thing

TEST_P(bad_input, cq_wait_with_a_shared_channel_is_bad_state) {
    ASSERT_NO_FATAL_FAILURE(open_pair({}, {.rcq = true, .channel = channel_mode::shared}));
    auto w = client().cq().wait(10ms);
    ASSERT_FALSE(w.has_value());
    EXPECT_TRUE(w.error() == errc::bad_state) << w.error().what();
    ASSERT_NE(client().rcq(), nullptr);
    auto wr = client().rcq()->wait(10ms);
    ASSERT_FALSE(wr.has_value());
    EXPECT_TRUE(wr.error() == errc::bad_state) << wr.error().what();
    // The connection-level wait is the right one: it times out cleanly when idle.
    auto cw = client().wait(20ms);
    ASSERT_FALSE(cw.has_value());
    EXPECT_TRUE(cw.error() == errc::timed_out) << cw.error().what();
}

TEST_P(bad_input, connection_wait_with_separate_channels_is_bad_state) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    auto w = client().wait(10ms);
    ASSERT_FALSE(w.has_value());
    EXPECT_TRUE(w.error() == errc::bad_state) << w.error().what();
    auto sw = server().wait(10ms);
    ASSERT_FALSE(sw.has_value());
    EXPECT_TRUE(sw.error() == errc::bad_state) << sw.error().what();
    // The CQ-level wait is the right one.
    auto cw = client().cq().wait(20ms);
    ASSERT_FALSE(cw.has_value());
    EXPECT_TRUE(cw.error() == errc::timed_out) << cw.error().what();
}

// ---------------------------------------------------------------- closed connection

TEST_P(bad_input, operations_on_a_closed_connection_are_disconnected) {
    ASSERT_NO_FATAL_FAILURE(open_pair());
    ASSERT_TRUE(client().close().has_value());
    EXPECT_FALSE(client().is_open());
    ASSERT_TRUE(client().close().has_value());  // idempotent
    int ctx = 0;
    const op_options o{.context = &ctx};
    EXPECT_ERRC(client().write(desc_, 0, *lmr_, 0, 8, o), errc::disconnected);
    EXPECT_ERRC(client().read(*lmr_, 0, desc_, 0, 8, o), errc::disconnected);
    // An admitted operation holds its queue entry until its completion is read: none was.
    EXPECT_EQ(client().in_flight(), 0u);
    completion c[4];
    auto n = client().cq().poll(c);
    ASSERT_TRUE(n.has_value()) << n.error().what();
    EXPECT_EQ(*n, 0u);
    expect_target_unchanged();
    expect_local_unchanged();
}

INSTANTIATE_TEST_SUITE_P(providers, bad_input, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

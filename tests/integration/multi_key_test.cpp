// SPDX-License-Identifier: BSD-3-Clause
// Multi-key operations (connection::gather_write, scatter_read): one local range into or from
// several remote regions, admitted all or nothing (records and slot units), completing once when
// the last part does, an error in any part reported once with the part's index; parked like any
// post.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include <remora/registration_cache.hpp>
#include <remora/slot_pool.hpp>

#include "core/multi_ops.hpp"
#include "fabric/fault.hpp"
#include "support.hpp"

using namespace remora;
using namespace remora::test;
namespace fault = remora::detail::fabric_fault;

namespace {

using clk = std::chrono::steady_clock;

std::vector<std::string> multi_key_providers() {
    auto all = providers();
    for (auto& p : rdm_providers())
        all.push_back(p);
    return all;
}

constexpr std::size_t parts = 4;
constexpr std::size_t part_len = 256;

class multi_key_test : public testing::TestWithParam<std::string> {
  protected:
    // The connections go before the registrations: a write the client saw complete (net, tcp:
    // once sent) may still be landing at the target, and closing the region under it crashed
    // the target's progress thread inside libfabric 1.17's net provider (in its key lookup).
    void TearDown() override {
        fault::disarm();
        if (pair_) {
            pair_->client.reset();
            pair_->server.reset();
        }
    }
    void open(const connection_config& client_cfg) {
        pair_.emplace(must(connect_pair(GetParam(), {}, client_cfg)));
        for (std::size_t i = 0; i < parts; ++i) {
            targets_.emplace_back(4096);
            std::memset(targets_.back().bytes.data(), 0, 4096);
        }
        for (std::size_t i = 0; i < parts; ++i) {
            tmrs_.push_back(
                must(memory_region::create(pair_->server_domain, targets_[i].span(),
                                           usage::write_destination | usage::read_source)));
            descs_.push_back(must(tmrs_.back().describe()));
        }
        for (std::size_t i = 0; i < src_.bytes.size(); ++i) {
            src_.bytes[i] = static_cast<std::byte>(i / part_len + 1);
        }
        smr_.emplace(
            must(memory_region::create(pair_->client_domain, src_.span(), usage::write_source)));
        std::memset(dst_.bytes.data(), 0, dst_.bytes.size());
        dmr_.emplace(must(
            memory_region::create(pair_->client_domain, dst_.span(), usage::read_destination)));
        for (std::size_t i = 0; i < parts; ++i) {
            segs_[i] = {&descs_[i], 8 * i, part_len};
        }
    }
    connection& client() { return *pair_->client; }
    result<void> gather(void* ctx, clk::time_point park = {}) {
        return client().gather_write(segs_, *smr_, 0, {.context = ctx, .park_until = park});
    }
    result<void> scatter(void* ctx, clk::time_point park = {}) {
        return client().scatter_read(segs_, *dmr_, read_at, {.context = ctx, .park_until = park});
    }
    // The bytes part i of a scatter_read finds at the target: (i + 1) * 16 + b % 7.
    static std::byte target_byte(std::size_t i, std::size_t b) {
        return static_cast<std::byte>((i + 1) * 16 + b % 7);
    }
    void seed_targets() {
        for (std::size_t i = 0; i < parts; ++i) {
            for (std::size_t b = 0; b < part_len; ++b) {
                targets_[i].bytes[8 * i + b] = target_byte(i, b);
            }
        }
    }
    // Reads the client's CQ until `n` completions or `limit`, `per_poll` provider entries at a
    // time, driving the target too (tcp's target progresses when driven; polling a CQ the
    // progress thread owns is refused: ignored).
    std::vector<completion> reap(std::size_t n, std::chrono::milliseconds limit = 10s,
                                 std::size_t per_poll = 4) {
        std::vector<completion> out;
        const auto deadline = clk::now() + limit;
        while (out.size() < n && clk::now() < deadline) {
            completion c[4];
            (void)pair_->server->cq().poll(c);
            auto r = client().cq().poll(std::span(c, std::min(per_poll, n - out.size())));
            if (!r) {
                ADD_FAILURE() << r.error().what();
                break;
            }
            out.insert(out.end(), c, c + *r);
        }
        return out;
    }
    // What a whole operation's completions must be (read for two, within 2 s: one completion,
    // never a second): one success of `kind` with `ctx` and every part's bytes, nothing left.
    void expect_one_success(const std::vector<completion>& got, op kind, void* ctx) {
        ASSERT_EQ(got.size(), 1u);
        EXPECT_TRUE(got[0].ok()) << got[0].status.message();
        EXPECT_EQ(got[0].op, kind);
        EXPECT_EQ(got[0].context, ctx);
        EXPECT_EQ(got[0].bytes, parts * part_len);
        EXPECT_EQ(client().in_flight(), 0u);
    }
    // A descriptor of `mr` claiming both RMA accesses, whatever its key was registered for;
    // with `same_host`, also carrying the region's same-host address (as a v3 descriptor from
    // the wire can), which a same-host connection needs to reach it at all.
    static remote_region forged_from(const memory_region& mr, bool same_host = false) {
        const auto real = must(mr.describe());
        return must(remote_region::make(real.address(), real.length(), real.key(),
                                        usage::read_source | usage::write_destination,
                                        real.virtual_addressing(),
                                        same_host ? real.same_host_address() : 0));
    }
    bool landed(std::size_t i) const {
        for (std::size_t b = 0; b < part_len; ++b) {
            if (targets_[i].bytes[8 * i + b] != static_cast<std::byte>(i + 1))
                return false;
        }
        return true;
    }

    // The buffers outlive the connections: the target's progress thread may still be writing
    // a part into them when the test ends (TSan saw it).
    static constexpr std::size_t read_at = 16;  // where a scatter_read's part 0 lands in dst_
    std::vector<buffer> targets_;
    buffer src_{parts * part_len};
    buffer dst_{read_at + parts * part_len + 16};
    std::optional<connected_pair> pair_;
    std::vector<memory_region> tmrs_;
    std::vector<remote_region> descs_;
    std::optional<memory_region> smr_;
    std::optional<memory_region> dmr_;
    remote_segment segs_[parts];
};

int ctx_[4];

}  // namespace

TEST_P(multi_key_test, a_gather_write_lands_every_part_and_completes_once) {
    open({.sq_size = 8});
    REMORA_ASSERT_OK(gather(&ctx_[0]));
    EXPECT_EQ(client().in_flight(), parts);
    expect_one_success(collect(client().cq(), 2, false, 2s), op::write, &ctx_[0]);
    if (GetParam() == "sockets") {  // sockets completes a write once the target has it
        for (std::size_t i = 0; i < parts; ++i) {
            EXPECT_TRUE(landed(i)) << "part " << i;
        }
    } else {  // tcp completes once sent: a read behind it on the ordered connection proves it
        EXPECT_TRUE(eventually([&] {
            completion c[4];
            (void)pair_->server->cq().poll(c);  // tcp's target progresses when driven
            for (std::size_t i = 0; i < parts; ++i) {
                if (!landed(i))
                    return false;
            }
            return true;
        }));
    }
}

TEST_P(multi_key_test, a_gather_write_that_cannot_get_every_entry_takes_none) {
    open({.sq_size = 4});
    REMORA_ASSERT_OK(client().write(descs_[0], 0, *smr_, 0, 8));  // 3 entries left of 4
    EXPECT_ERRC(gather(&ctx_[0]), errc::would_block);
    EXPECT_EQ(client().in_flight(), 1u) << "a refused gather_write kept entries";
    EXPECT_EQ(collect(client().cq(), 1, true).size(), 1u);
    REMORA_ASSERT_OK(gather(&ctx_[0]));  // all four free now
    EXPECT_EQ(collect(client().cq(), 1, true).size(), 1u);
    EXPECT_EQ(client().in_flight(), 0u);
}

TEST_P(multi_key_test, a_gather_write_that_cannot_get_every_slot_unit_takes_none) {
    auto pool = must(slot_pool::create({.capacity = units{}.with(unit::sq, 4).with(unit::cq, 4),
                                        .policy = exhaustion::backpressure}));
    open({.sq_size = 16, .slots = pool});
    REMORA_ASSERT_OK(client().write(descs_[0], 0, *smr_, 0, 8));
    EXPECT_ERRC(gather(&ctx_[0]), errc::would_block);
    EXPECT_EQ(pool->available()[unit::sq], 3u) << "a refused gather_write kept units";
    EXPECT_EQ(client().in_flight(), 1u) << "a refused gather_write kept records";
    EXPECT_EQ(collect(client().cq(), 1, true).size(), 1u);
    REMORA_ASSERT_OK(gather(&ctx_[0]));
    EXPECT_EQ(pool->available()[unit::sq], 0u);
    EXPECT_EQ(collect(client().cq(), 1, true).size(), 1u);
    EXPECT_EQ(pool->available(), pool->capacity());
}

TEST_P(multi_key_test, a_parked_gather_write_waits_for_all_its_entries_at_once) {
    open({.sq_size = 4});
    REMORA_ASSERT_OK(client().write(descs_[0], 0, *smr_, 0, 8, {.context = &ctx_[1]}));
    auto p = std::async(std::launch::async, [&] { return gather(&ctx_[0], clk::now() + 10s); });
    ASSERT_TRUE(eventually([&] { return client().parked() == 1; }));
    EXPECT_EQ(client().in_flight(), 1u) << "a parked gather_write holds entries";
    auto first = collect(client().cq(), 1, true);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].context, &ctx_[1]);
    REMORA_ASSERT_OK(p.get());
    auto got = collect(client().cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx_[0]);
    EXPECT_EQ(client().in_flight(), 0u);
}

TEST_P(multi_key_test, a_parked_gather_write_ends_at_its_deadline_or_on_cancel_or_destruction) {
    open({.sq_size = 4});
    REMORA_ASSERT_OK(client().write(descs_[0], 0, *smr_, 0, 8));
    EXPECT_ERRC(gather(&ctx_[0], clk::now() + 100ms), errc::timed_out);
    auto c =
        std::async(std::launch::async, [&] { return gather(&ctx_[0], clk::time_point::max()); });
    ASSERT_TRUE(eventually([&] { return client().parked() == 1; }));
    EXPECT_EQ(client().cancel_parked(), 1u);
    EXPECT_ERRC(c.get(), errc::canceled);
    EXPECT_EQ(client().in_flight(), 1u);
    connection* conn = &client();
    auto d = std::async(std::launch::async, [&] {
        return conn->gather_write(segs_, *smr_, 0, {.park_until = clk::time_point::max()});
    });
    ASSERT_TRUE(eventually([&] { return conn->parked() == 1; }));
    pair_->client.reset();
    EXPECT_ERRC(d.get(), errc::disconnected);
}

// Reads the client's CQ one provider entry at a time (a poll of one), so an error entry armed
// with arm_error_entry lands on the first part read: part 0.
std::vector<completion> collect_one_by_one(completion_queue& cq, std::size_t n,
                                           std::chrono::milliseconds limit) {
    std::vector<completion> out;
    const auto deadline = clk::now() + limit;
    while (out.size() < n && clk::now() < deadline) {
        completion c[1];
        auto r = cq.poll(c);
        if (!r) {
            ADD_FAILURE() << r.error().what();
            break;
        }
        if (*r == 1) {
            out.push_back(c[0]);
        }
    }
    return out;
}

TEST_P(multi_key_test, an_error_in_one_part_is_reported_once_with_the_part) {
    open({.sq_size = 8});
    fault::arm_error_entry(FI_EIO, 1);  // the first part read comes back as an error
    REMORA_ASSERT_OK(gather(&ctx_[0]));
    auto got = collect_one_by_one(client().cq(), 2, 2s);
    ASSERT_EQ(got.size(), 1u) << "reported more than once";
    EXPECT_FALSE(got[0].ok());
    EXPECT_EQ(got[0].failed_part, 0u);
    EXPECT_EQ(got[0].context, &ctx_[0]);
    EXPECT_EQ(client().in_flight(), 0u);
    // Every part failing is still one report, naming the first.
    fault::arm_error_entry(FI_EIO, parts);
    REMORA_ASSERT_OK(gather(&ctx_[1]));
    got = collect_one_by_one(client().cq(), 2, 2s);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_FALSE(got[0].ok());
    EXPECT_EQ(got[0].failed_part, 0u);
    EXPECT_EQ(client().in_flight(), 0u);
}

TEST_P(multi_key_test, a_part_refused_by_the_target_is_named) {
    open({.sq_size = 8});
    // Part 2's descriptor claims write access its key was never registered for.
    buffer ro(4096);
    auto ro_mr = must(memory_region::create(pair_->server_domain, ro.span(), usage::read_source));
    const auto forged = forged_from(ro_mr);
    segs_[2] = {&forged, 0, part_len};
    if (client().same_host()) {
        // Over shared memory no key or access right is checked (docs/concepts.md): the target
        // refuses nothing. A forged descriptor made without a same-host address is refused
        // before anything is posted, naming its part; one carrying it reaches the region.
        auto r = gather(&ctx_[0]);
        ASSERT_FALSE(r.has_value());
        EXPECT_TRUE(r.error() == errc::not_supported) << r.error().what();
        EXPECT_NE(r.error().message().find("part 2"), std::string::npos) << r.error().what();
        EXPECT_EQ(client().in_flight(), 0u);
        EXPECT_TRUE(collect(client().cq(), 1, false, 300ms).empty());
        const auto reaching = forged_from(ro_mr, true);
        segs_[2] = {&reaching, 0, part_len};
        REMORA_ASSERT_OK(gather(&ctx_[0]));
        expect_one_success(collect(client().cq(), 2, false, 2s), op::write, &ctx_[0]);
        EXPECT_TRUE(eventually([&] {
            return std::all_of(ro.bytes.begin(), ro.bytes.begin() + part_len,
                               [](std::byte b) { return b == std::byte{3}; });
        })) << "part 2 did not land in the read-only region";
        return;
    }
    if (GetParam() != "sockets") {
        // Seen here (libfabric 1.17): each reports the part as a success.
        GTEST_SKIP() << "tcp, tcp;ofi_rxm and net complete a write once sent (the target's "
                        "refusal cannot fail that part); shm's fast path (CMA) writes to the "
                        "address without checking the key's access";
    }
    REMORA_ASSERT_OK(gather(&ctx_[0]));
    auto got = collect(client().cq(), 2, false, 5s);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, make_error_code(errc::access_denied)) << got[0].status.message();
    EXPECT_EQ(got[0].failed_part, 2u);
}

TEST_P(multi_key_test, a_failed_post_is_returned_and_nothing_is_reported) {
    open({.sq_size = 8});
    fault::arm(remora::detail::fabric_call::post_write, -FI_EIO, 1);
    auto r = gather(&ctx_[0]);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message().find("part 0"), std::string::npos) << r.error().what();
    EXPECT_EQ(client().in_flight(), 0u);
    EXPECT_TRUE(collect(client().cq(), 1, false, 300ms).empty());
    REMORA_ASSERT_OK(gather(&ctx_[1]));
    EXPECT_EQ(collect(client().cq(), 1, true).size(), 1u);
}

TEST_P(multi_key_test, bad_segments_are_refused_before_anything_is_taken) {
    open({.sq_size = 8});
    remote_segment bad[2] = {segs_[0], {&descs_[1], 4096 - 8, 64}};
    EXPECT_ERRC(client().gather_write(bad, *smr_, 0), errc::out_of_range);
    bad[1] = {nullptr, 0, 8};
    EXPECT_ERRC(client().gather_write(bad, *smr_, 0), errc::invalid_argument);
    bad[1] = {&descs_[1], 0, 0};
    EXPECT_ERRC(client().gather_write(bad, *smr_, 0), errc::invalid_argument);
    EXPECT_ERRC(client().gather_write({}, *smr_, 0), errc::invalid_argument);
    EXPECT_ERRC(client().gather_write(segs_, *smr_, src_.bytes.size()), errc::out_of_range);
    EXPECT_ERRC(client().gather_write(segs_, *smr_, 0, {.report = completion_mode::at_post}),
                errc::invalid_argument);
    std::vector<remote_segment> many(9, segs_[0]);
    EXPECT_ERRC(client().gather_write(many, *smr_, 0), errc::too_large);  // > sq_size
    EXPECT_EQ(client().in_flight(), 0u);
}

namespace {
std::atomic<int> gather_in_callback{-1};
std::atomic<int> gather_done{0};
connection* cb_conn = nullptr;
const remote_segment* cb_segs = nullptr;
const memory_region* cb_src = nullptr;
}  // namespace

TEST_P(multi_key_test, a_gather_write_posted_from_a_callback_does_not_park) {
    open({.sq_size = 4});
    cb_conn = &client();
    cb_segs = segs_;
    cb_src = &*smr_;
    gather_in_callback = -1;
    gather_done = 0;
    // Two writes hold two of four entries; the first's callback asks for four, parked: refused
    // at once (would_block), since the callback runs on the thread that gives entries back.
    REMORA_ASSERT_OK(client().write(descs_[0], 0, *smr_, 0, 8, {.callback = [](const completion&) {
                                        auto r =
                                            cb_conn->gather_write({cb_segs, parts}, *cb_src, 0,
                                                                  {.park_until = clk::now() + 20s});
                                        gather_in_callback = r ? 0 : r.error().code().value();
                                    }}));
    REMORA_ASSERT_OK(client().write(descs_[0], 0, *smr_, 0, 8,
                                    {.callback = [](const completion&) { ++gather_done; }}));
    // One completion a poll: callbacks run once the poll's reads are done (after the CQ's lock),
    // so a poll that read both would have given both entries back before the first callback.
    ASSERT_TRUE(eventually([&] {
        completion c[1];
        (void)client().cq().poll(c);
        return gather_in_callback.load() != -1 && gather_done.load() == 1;
    }));
    EXPECT_EQ(gather_in_callback.load(), static_cast<int>(errc::would_block));
    EXPECT_EQ(client().in_flight(), 0u);
}

namespace {
std::atomic<int> queued_calls{0};
std::error_code queued_status;
void* queued_context = nullptr;
void on_queued(const completion& c) {
    queued_status = c.status;
    queued_context = c.context;
    ++queued_calls;
}
}  // namespace

// park_mode::queue: a gather_write whose entries are taken returns at once and is posted, all
// parts together, when they come back; its callback reports it once.
TEST_P(multi_key_test, a_queued_gather_write_posts_all_its_parts_once_admitted) {
    open({.sq_size = parts});
    queued_calls = 0;
    REMORA_ASSERT_OK(gather(&ctx_[0]));  // every entry
    REMORA_ASSERT_OK(client().gather_write(segs_, *smr_, 0,
                                           {.context = &ctx_[1],
                                            .callback = on_queued,
                                            .park_until = clk::now() + 10s,
                                            .park = park_mode::queue}));
    EXPECT_EQ(client().parked(), 1u);
    auto first = collect(client().cq(), 1, false);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].context, &ctx_[0]);
    ASSERT_TRUE(eventually([&] {
        completion c[4];
        (void)client().cq().poll(c);
        return queued_calls.load() == 1;
    }));
    EXPECT_FALSE(queued_status) << queued_status.message();
    EXPECT_EQ(queued_context, &ctx_[1]);
    EXPECT_EQ(client().parked(), 0u);
    EXPECT_TRUE(eventually([&] { return client().in_flight() == 0; }));
    EXPECT_EQ(queued_calls.load(), 1);
}

// A connection destroyed with a gather_write and a scatter_read in flight frees their state: no
// part may complete after that (its private CQ goes with it).
TEST_P(multi_key_test, destroying_the_connection_with_multi_key_operations_in_flight_frees_them) {
    open({.sq_size = 8});
    const std::size_t before = remora::detail::multi_ops_alive();
    REMORA_ASSERT_OK(gather(&ctx_[0]));
    EXPECT_EQ(remora::detail::multi_ops_alive(), before + 1);
    REMORA_ASSERT_OK(scatter(&ctx_[1]));
    EXPECT_EQ(remora::detail::multi_ops_alive(), before + 2);
    pair_->client.reset();  // its completions never read
    EXPECT_EQ(remora::detail::multi_ops_alive(), before);
}

// The same on a shared CQ, which drops a destroyed connection's completions: the operation's
// state goes with the connection, and the CQ's reader never sees the operation.
TEST_P(multi_key_test, a_gather_write_on_a_shared_cq_is_freed_with_its_connection) {
    if (is_rdm(GetParam())) {
        GTEST_SKIP() << "the shared-CQ case is shown on connected endpoints (server_side)";
    }
    auto s = server_side::open(GetParam());
    auto shared = must(shared_completion_queue::create(s.dom, {.size = 64}));
    auto conn = std::make_optional(must(s.add({.sq_size = 8, .rq_size = 8, .shared_cq = shared})));
    std::vector<buffer> targets;
    std::vector<memory_region> tmrs;
    std::vector<remote_region> descs;
    for (std::size_t i = 0; i < parts; ++i) {
        targets.emplace_back(4096);
    }
    for (std::size_t i = 0; i < parts; ++i) {
        tmrs.push_back(
            must(memory_region::create(s.client_dom, targets[i].span(), usage::write_destination)));
        descs.push_back(must(tmrs.back().describe()));
    }
    remote_segment segs[parts];
    for (std::size_t i = 0; i < parts; ++i) {
        segs[i] = {&descs[i], 0, part_len};
    }
    auto smr = must(memory_region::create(s.dom, src_.span(), usage::write_source));
    const std::size_t before = remora::detail::multi_ops_alive();
    REMORA_ASSERT_OK(conn->gather_write(segs, smr, 0, {.context = &ctx_[0]}));
    EXPECT_EQ(remora::detail::multi_ops_alive(), before + 1);
    conn.reset();  // its completions, in the shared CQ or still to come, are dropped
    EXPECT_EQ(remora::detail::multi_ops_alive(), before);
    auto got = collect(shared.queue(), 1, false, 500ms);
    EXPECT_TRUE(got.empty()) << "a destroyed connection's operation reached the shared CQ's reader";
}

// ---- scatter_read: the read-side twin ----

TEST_P(multi_key_test, a_scatter_read_lands_every_part_in_order_and_completes_once) {
    open({.sq_size = 8});
    seed_targets();
    REMORA_ASSERT_OK(scatter(&ctx_[0]));
    EXPECT_EQ(client().in_flight(), parts);
    expect_one_success(reap(2, 2s), op::read, &ctx_[0]);
    // Part i at read_at + i * part_len, nothing outside the local range touched.
    for (std::size_t i = 0; i < parts; ++i) {
        for (std::size_t b = 0; b < part_len; ++b) {
            ASSERT_EQ(dst_.bytes[read_at + i * part_len + b], target_byte(i, b))
                << "part " << i << " byte " << b;
        }
    }
    for (std::size_t b = 0; b < read_at; ++b) {
        EXPECT_EQ(dst_.bytes[b], std::byte{0}) << "before the local range: byte " << b;
    }
    for (std::size_t b = read_at + parts * part_len; b < dst_.bytes.size(); ++b) {
        EXPECT_EQ(dst_.bytes[b], std::byte{0}) << "after the local range: byte " << b;
    }
}

TEST_P(multi_key_test, a_scatter_read_that_cannot_get_every_entry_or_unit_takes_none) {
    auto pool = must(slot_pool::create({.capacity = units{}.with(unit::sq, 8).with(unit::cq, 8),
                                        .policy = exhaustion::backpressure}));
    open({.sq_size = 4, .slots = pool});
    REMORA_ASSERT_OK(client().read(*dmr_, 0, descs_[0], 0, 8));  // 3 entries left of 4
    EXPECT_ERRC(scatter(&ctx_[0]), errc::would_block);
    EXPECT_EQ(client().in_flight(), 1u) << "a refused scatter_read kept entries";
    EXPECT_EQ(pool->available()[unit::sq], 7u) << "a refused scatter_read kept units";
    EXPECT_EQ(reap(1).size(), 1u);
    REMORA_ASSERT_OK(scatter(&ctx_[0]));  // all four free now
    EXPECT_EQ(pool->available()[unit::sq], 4u);
    EXPECT_EQ(reap(1).size(), 1u);
    EXPECT_EQ(client().in_flight(), 0u);
    EXPECT_EQ(pool->available(), pool->capacity());
}

TEST_P(multi_key_test, a_parked_scatter_read_waits_for_all_its_entries_at_once) {
    open({.sq_size = 4});
    REMORA_ASSERT_OK(client().read(*dmr_, 0, descs_[0], 0, 8, {.context = &ctx_[1]}));
    EXPECT_ERRC(scatter(&ctx_[0], clk::now() + 100ms), errc::timed_out);
    auto p = std::async(std::launch::async, [&] { return scatter(&ctx_[0], clk::now() + 10s); });
    ASSERT_TRUE(eventually([&] { return client().parked() == 1; }));
    EXPECT_EQ(client().in_flight(), 1u) << "a parked scatter_read holds entries";
    auto first = reap(1);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].context, &ctx_[1]);
    REMORA_ASSERT_OK(p.get());
    auto got = reap(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx_[0]);
    EXPECT_EQ(got[0].op, op::read);
    EXPECT_EQ(client().in_flight(), 0u);
}

TEST_P(multi_key_test, an_error_in_one_scatter_read_part_is_reported_once_with_the_part) {
    open({.sq_size = 8});
    fault::arm_error_entry(FI_EIO, 1);  // the first part read comes back as an error
    REMORA_ASSERT_OK(scatter(&ctx_[0]));
    auto got = reap(2, 2s, 1);
    ASSERT_EQ(got.size(), 1u) << "reported more than once";
    EXPECT_FALSE(got[0].ok());
    EXPECT_EQ(got[0].op, op::read);
    EXPECT_EQ(got[0].failed_part, 0u);
    EXPECT_EQ(got[0].context, &ctx_[0]);
    EXPECT_EQ(client().in_flight(), 0u);
}

TEST_P(multi_key_test, a_scatter_read_part_refused_by_the_target_is_named) {
    if (GetParam() == "rdm:shm") {  // seen here (libfabric 1.17): the part reads as a success
        GTEST_SKIP() << "shm's fast path (CMA) reads the address without checking the key's "
                        "access";
    }
    open({.sq_size = 8});
    // Part 2's descriptor claims read access its key was never registered for.
    buffer wo(4096);
    auto wo_mr =
        must(memory_region::create(pair_->server_domain, wo.span(), usage::write_destination));
    const auto forged = forged_from(wo_mr);
    segs_[2] = {&forged, 0, part_len};
    if (client().same_host()) {
        // Over shared memory no key or access right is checked (docs/concepts.md): the target
        // refuses nothing. A forged descriptor made without a same-host address is refused
        // before anything is posted, naming its part; one carrying it reads the region.
        auto r = scatter(&ctx_[0]);
        ASSERT_FALSE(r.has_value());
        EXPECT_TRUE(r.error() == errc::not_supported) << r.error().what();
        EXPECT_NE(r.error().message().find("part 2"), std::string::npos) << r.error().what();
        EXPECT_EQ(client().in_flight(), 0u);
        EXPECT_TRUE(reap(1, 300ms).empty());
        std::memset(wo.bytes.data(), 0x5a, part_len);
        const auto reaching = forged_from(wo_mr, true);
        segs_[2] = {&reaching, 0, part_len};
        REMORA_ASSERT_OK(scatter(&ctx_[0]));
        expect_one_success(reap(2, 2s), op::read, &ctx_[0]);
        for (std::size_t b = 0; b < part_len; ++b) {
            ASSERT_EQ(dst_.bytes[read_at + 2 * part_len + b], std::byte{0x5a}) << "byte " << b;
        }
        return;
    }
    REMORA_ASSERT_OK(scatter(&ctx_[0]));
    auto got = reap(2, 5s);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_FALSE(got[0].ok()) << "the target's refusal of part 2 was not reported";
    EXPECT_EQ(got[0].op, op::read);
    EXPECT_EQ(got[0].failed_part, 2u) << got[0].status.message();
    EXPECT_EQ(client().in_flight(), 0u);
}

TEST_P(multi_key_test,
       a_failed_scatter_read_post_is_returned_naming_its_part_and_nothing_reported) {
    open({.sq_size = 8});
    fault::arm_nth(remora::detail::fabric_call::post_read, -FI_EIO, 3);  // part 2's post
    auto r = scatter(&ctx_[0]);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message().find("scatter_read: part 2"), std::string::npos)
        << r.error().what();
    // Parts 0 and 1 were posted: they complete silently and give their entries back.
    EXPECT_TRUE(reap(1, 500ms).empty());
    EXPECT_TRUE(eventually([&] {
        (void)reap(1, 10ms);
        return client().in_flight() == 0;
    }));
    seed_targets();
    REMORA_ASSERT_OK(scatter(&ctx_[1]));
    auto got = reap(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx_[1]);
    EXPECT_EQ(dst_.bytes[read_at + 3 * part_len], target_byte(3, 0));
}

TEST_P(multi_key_test, bad_scatter_read_segments_are_refused_before_anything_is_taken) {
    open({.sq_size = 8});
    auto expect_part = [](const result<void>& r, errc code, const char* text) {
        ASSERT_FALSE(r.has_value());
        EXPECT_EQ(r.error().code(), make_error_code(code)) << r.error().what();
        EXPECT_NE(r.error().message().find(text), std::string::npos) << r.error().what();
    };
    remote_segment bad[3] = {segs_[0], segs_[1], {&descs_[2], 4096 - 8, 64}};
    expect_part(client().scatter_read(bad, *dmr_, 0), errc::out_of_range, "scatter_read: part 2");
    // A region the target granted writes only: not a read's source.
    buffer wo(4096);
    auto wo_mr =
        must(memory_region::create(pair_->server_domain, wo.span(), usage::write_destination));
    const auto wo_desc = must(wo_mr.describe());
    bad[2] = {&wo_desc, 0, 64};
    expect_part(client().scatter_read(bad, *dmr_, 0), errc::access_denied, "scatter_read: part 2");
    bad[1] = {nullptr, 0, 8};
    expect_part(client().scatter_read(bad, *dmr_, 0), errc::invalid_argument,
                "scatter_read: part 1");
    bad[1] = {&descs_[1], 0, 0};
    expect_part(client().scatter_read(bad, *dmr_, 0), errc::invalid_argument,
                "scatter_read: part 1");
    EXPECT_ERRC(client().scatter_read({}, *dmr_, 0), errc::invalid_argument);
    // The local range: inside the region, and registered for the provider to write into.
    EXPECT_ERRC(client().scatter_read(segs_, *dmr_, dst_.bytes.size() - 8), errc::out_of_range);
    EXPECT_ERRC(client().scatter_read(segs_, *smr_, 0), errc::access_denied);
    EXPECT_ERRC(client().scatter_read(segs_, *dmr_, 0, {.report = completion_mode::at_post}),
                errc::invalid_argument);
    std::vector<remote_segment> many(9, segs_[0]);
    EXPECT_ERRC(client().scatter_read(many, *dmr_, 0), errc::too_large);  // > sq_size
    std::vector<remote_segment> too_many(connection::max_gather_parts + 1, segs_[0]);
    EXPECT_ERRC(client().scatter_read(too_many, *dmr_, 0), errc::too_large);
    EXPECT_EQ(client().in_flight(), 0u);
    EXPECT_TRUE(reap(1, 200ms).empty());
}

// park_mode::queue: queued until its entries come back, then posted whole; one report.
TEST_P(multi_key_test, a_queued_scatter_read_posts_all_its_parts_once_admitted) {
    open({.sq_size = parts});
    seed_targets();
    queued_calls = 0;
    REMORA_ASSERT_OK(scatter(&ctx_[0]));  // every entry
    REMORA_ASSERT_OK(client().scatter_read(segs_, *dmr_, read_at,
                                           {.context = &ctx_[1],
                                            .callback = on_queued,
                                            .park_until = clk::now() + 10s,
                                            .park = park_mode::queue}));
    EXPECT_EQ(client().parked(), 1u);
    auto first = reap(1);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].context, &ctx_[0]);
    ASSERT_TRUE(eventually([&] {
        (void)reap(1, 10ms);
        return queued_calls.load() == 1;
    }));
    EXPECT_FALSE(queued_status) << queued_status.message();
    EXPECT_EQ(queued_context, &ctx_[1]);
    EXPECT_EQ(client().parked(), 0u);
    EXPECT_TRUE(eventually([&] { return client().in_flight() == 0; }));
}

INSTANTIATE_TEST_SUITE_P(providers, multi_key_test, testing::ValuesIn(multi_key_providers()),
                         provider_name);

// gather_write from memory the caller did not register: the registration (through a
// registration_cache) is held by the operation, and with a slot pool it draws {registration 1}
// with the parts' {sq, cq} units, all or nothing, given back when its completion is read.
class registration_units : public multi_key_test {
  protected:
    void open_with(exhaustion policy) {
        pool_ = must(slot_pool::create(
            {.capacity = units{}.with(unit::sq, 16).with(unit::cq, 16).with(unit::registration, 1),
             .policy = policy}));
        open({.sq_size = 16, .slots = pool_});
        cache_.emplace(must(registration_cache::create(pair_->client_domain)));
        for (std::size_t i = 0; i < raw_.bytes.size(); ++i) {
            raw_.bytes[i] = static_cast<std::byte>(i / part_len + 1);
        }
    }
    result<void> gather_raw(void* ctx, clk::time_point park = {}) {
        return remora::gather_write(client(), segs_, raw_.span(), *cache_,
                                    {.context = ctx, .park_until = park});
    }
    std::shared_ptr<slot_pool> pool_;
    std::optional<registration_cache> cache_;
    buffer raw_{parts * part_len};
};

TEST_P(registration_units, an_unregistered_gather_write_holds_a_registration_unit) {
    open_with(exhaustion::backpressure);
    REMORA_ASSERT_OK(gather_raw(&ctx_[0]));
    EXPECT_EQ(pool_->available()[unit::registration], 0u);
    EXPECT_EQ(pool_->available()[unit::sq], 16 - parts);
    const auto before = pool_->available();
    // The second finds no registration unit: refused, having taken nothing.
    EXPECT_ERRC(gather_raw(&ctx_[1]), errc::would_block);
    EXPECT_EQ(pool_->available(), before) << "a refused gather_write kept units";
    EXPECT_EQ(client().in_flight(), parts) << "a refused gather_write kept records";
    auto got = collect(client().cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(got[0].context, &ctx_[0]);
    EXPECT_EQ(pool_->available(), pool_->capacity()) << "the registration unit was not returned";
    REMORA_ASSERT_OK(gather_raw(&ctx_[1]));
    got = collect(client().cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(pool_->available(), pool_->capacity());
    EXPECT_EQ(cache_->stats().misses, 1u) << "the second reused the cached registration";
    EXPECT_TRUE(eventually([&] {
        completion c[4];
        (void)pair_->server->cq().poll(c);
        for (std::size_t i = 0; i < parts; ++i) {
            if (!landed(i))
                return false;
        }
        return true;
    }));
}

TEST_P(registration_units, under_forbid_a_missing_registration_unit_is_a_sizing_error) {
    open_with(exhaustion::forbid);
    REMORA_ASSERT_OK(gather_raw(&ctx_[0]));
    const auto before = pool_->available();
    auto r = gather_raw(&ctx_[1]);
    ASSERT_ERRC(r, errc::bad_state);
    EXPECT_NE(r.error().message().find("registration"), std::string::npos) << r.error().what();
    EXPECT_EQ(pool_->available(), before);
    EXPECT_EQ(collect(client().cq(), 1, true).size(), 1u);
    EXPECT_EQ(pool_->available(), pool_->capacity());
}

TEST_P(registration_units, a_parked_unregistered_gather_write_waits_for_the_registration_unit) {
    open_with(exhaustion::backpressure);
    REMORA_ASSERT_OK(gather_raw(&ctx_[0]));
    EXPECT_ERRC(gather_raw(&ctx_[1], clk::now() + 100ms), errc::timed_out);
    auto p = std::async(std::launch::async, [&] { return gather_raw(&ctx_[1], clk::now() + 10s); });
    ASSERT_TRUE(eventually([&] { return client().parked() == 1; }));
    auto first = collect(client().cq(), 1, true);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].context, &ctx_[0]);
    REMORA_ASSERT_OK(p.get());
    auto got = collect(client().cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &ctx_[1]);
    EXPECT_EQ(pool_->available(), pool_->capacity());
}

TEST_P(registration_units, bad_input_is_refused_before_anything_is_taken) {
    open_with(exhaustion::backpressure);
    auto other = must(
        domain::open({.provider = is_rdm(GetParam()) ? GetParam().substr(4) : GetParam(),
                      .endpoint = is_rdm(GetParam()) ? endpoint_type::rdm : endpoint_type::msg}));
    auto foreign = must(registration_cache::create(other));
    EXPECT_ERRC(remora::gather_write(client(), segs_, raw_.span(), foreign),
                errc::invalid_argument);
    EXPECT_ERRC(remora::gather_write(client(), segs_, std::span<std::byte>{}, *cache_),
                errc::invalid_argument);
    EXPECT_EQ(pool_->available(), pool_->capacity());
    EXPECT_EQ(client().in_flight(), 0u);
}

// scatter_read into memory the caller did not register: the same registration unit, held until
// the completion, and the bytes in order in the caller's memory.
TEST_P(registration_units, an_unregistered_scatter_read_lands_and_holds_a_registration_unit) {
    open_with(exhaustion::backpressure);
    seed_targets();
    std::memset(raw_.bytes.data(), 0, raw_.bytes.size());
    REMORA_ASSERT_OK(
        remora::scatter_read(client(), segs_, raw_.span(), *cache_, {.context = &ctx_[0]}));
    EXPECT_EQ(pool_->available()[unit::registration], 0u);
    EXPECT_ERRC(remora::scatter_read(client(), segs_, raw_.span(), *cache_), errc::would_block);
    expect_one_success(reap(2, 2s), op::read, &ctx_[0]);
    EXPECT_EQ(pool_->available(), pool_->capacity()) << "the registration unit was not returned";
    for (std::size_t i = 0; i < parts; ++i) {
        for (std::size_t b = 0; b < part_len; ++b) {
            ASSERT_EQ(raw_.bytes[i * part_len + b], target_byte(i, b)) << "part " << i;
        }
    }
    EXPECT_ERRC(remora::scatter_read(client(), segs_, std::span<std::byte>{}, *cache_),
                errc::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(providers, registration_units, testing::ValuesIn(multi_key_providers()),
                         provider_name);

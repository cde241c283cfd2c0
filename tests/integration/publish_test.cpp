// SPDX-License-Identifier: BSD-3-Clause
// connection::publish: data writes, their flush and the 8-byte atomic that publishes them,
// admitted together (records, slot units, service requests), the atomic posted only after the
// writes and the flush completed, one completion naming the failed part; parked like any post.
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include <remora/target_service.hpp>

#include "core/connection_impl.hpp"
#include "fabric/fault.hpp"
#include "persist/service.hpp"
#include "support.hpp"

using namespace remora;
using namespace remora::test;
namespace fault = remora::detail::fabric_fault;

namespace {

using clk = std::chrono::steady_clock;

std::vector<std::string> publish_providers() {
    auto all = providers();
    for (auto& p : rdm_providers())
        all.push_back(p);
    return all;
}

constexpr std::size_t parts = 3;
constexpr std::size_t part_len = 512;
constexpr std::uint64_t flag_at = 64;
constexpr std::uint64_t published = 0x1122334455667788ull;

class publish_test : public testing::TestWithParam<std::string> {
  protected:
    void TearDown() override { fault::disarm(); }
    bool rdm() const { return is_rdm(GetParam()); }
    // A target with a data region and a flag region; on tcp and sockets both are exposed
    // through a target_service (GPSPM, service atomics) unless `expose_data` is false. RDM
    // connections carry no service here (connect_pair's warm-up is a send): native atomics.
    void open(std::uint32_t sq_size = 8, std::shared_ptr<budget> slots = {},
              bool expose_data = true, bool server_progress = true) {
        connection_config server_cfg{.progress_thread = server_progress};
        connection_config client_cfg{.sq_size = sq_size, .slots = slots};
        if (!rdm()) {
            server_cfg.addons = {persistence_config{.service_depth = 4}};
            client_cfg.addons = {persistence_config{.service_depth = 4}};
        }
        pair_.emplace(must(connect_pair(GetParam(), server_cfg, client_cfg)));
        std::memset(target_.bytes.data(), 0, target_.bytes.size());
        std::memset(flag_.bytes.data(), 0, flag_.bytes.size());
        tmr_.emplace(must(memory_region::create(
            pair_->server_domain, target_.span(),
            usage::write_destination | usage::read_source | usage::flush_target)));
        fmr_.emplace(must(memory_region::create(pair_->server_domain, flag_.span(),
                                                usage::atomic_target | usage::read_source)));
        if (!rdm()) {
            service_.emplace(must(target_service::create()));
            data_ = expose_data ? must(service_->expose(*tmr_)) : must(tmr_->describe());
            flag_desc_ = must(service_->expose(*fmr_));
            REMORA_ASSERT_OK(service_->serve(*pair_->server));
        } else {
            data_ = must(tmr_->describe());
            flag_desc_ = must(fmr_->describe());
        }
        for (std::size_t i = 0; i < src_.bytes.size(); ++i) {
            src_.bytes[i] = static_cast<std::byte>(i / part_len + 1);
        }
        smr_.emplace(
            must(memory_region::create(pair_->client_domain, src_.span(), usage::write_source)));
        for (std::size_t i = 0; i < parts; ++i) {
            segs_[i] = {&data_, 1024 * i, part_len};
        }
    }
    connection& client() { return *pair_->client; }
    // The connection's first service use also sends the client's hello (serve_wait): done here,
    // and answered, so that a fault armed next meets the operation under test.
    void first_service_use() {
        if (rdm()) {
            return;  // these RDM pairs carry no target service
        }
        REMORA_ASSERT_OK(
            remora::flush(client(), data_, 0, 8,
                          {.type = flush_type::visibility, .method = flush_method::gpspm}));
        auto got = collect(client().cq(), 1, true, 10s);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_TRUE(got[0].ok()) << got[0].status.message();
        // The requests' own send completions (the hello's, the flush's) and the target's
        // replies' may follow the reply (sockets): all read before a fault turns the next entry
        // read into an error.
        EXPECT_TRUE(eventually([&] {
            completion none[4];
            EXPECT_EQ(client().cq().poll(none).value_or(0), 0u);
            using remora::detail::impl_of, remora::detail::queue;
            return impl_of(client())->ops.in_use(queue::service) == 0 &&
                   impl_of(*pair_->server)->ops.in_use(queue::service) == 0;
        }));
    }
    // Send-queue entries a read-after-write publish takes: the writes, the flush and a native
    // atomic.
    std::uint32_t raw_need() {
        return parts + 1 + (remora::atomics(client()) == atomic_path::native ? 1 : 0);
    }
    // net has no native atomics, and these RDM pairs carry no target service: publish is
    // refused there, naming the atomic part (checked here), and the test is skipped.
    bool atomics_or_skip() {
        if (remora::atomics(client()) == atomic_path::none) {
            auto r = publish({});
            EXPECT_FALSE(r.has_value());
            if (!r) {
                EXPECT_TRUE(r.error() == errc::not_supported) << r.error().what();
                EXPECT_NE(r.error().message().find("(atomic)"), std::string::npos);
            }
            EXPECT_EQ(client().in_flight(), 0u);
            return false;
        }
        return true;
    }
    result<void> publish(op_options opts, flush_options how = {}) {
        return remora::publish(client(), segs_, *smr_, 0, flag_desc_, flag_at, published, how,
                               opts);
    }
    std::uint64_t flag_word() const {
        return std::atomic_ref<const std::uint64_t>(
                   *reinterpret_cast<const std::uint64_t*>(flag_.bytes.data() + flag_at))
            .load(std::memory_order_acquire);
    }
    bool data_landed() const {
        for (std::size_t i = 0; i < parts; ++i) {
            for (std::size_t b = 0; b < part_len; ++b) {
                if (target_.bytes[1024 * i + b] != static_cast<std::byte>(i + 1))
                    return false;
            }
        }
        return true;
    }
    // Every entry given back and the operation's state freed.
    void expect_settled(std::size_t alive_before) {
        EXPECT_TRUE(eventually([&] { return client().in_flight() == 0; }))
            << client().in_flight() << " still in flight";
        EXPECT_EQ(remora::detail::publish_ops_alive(), alive_before);
    }

    // The memory outlives the connections: a progress thread may still be in the provider with
    // it when the test ends (ASan's sendmsg check).
    buffer target_{4096};
    buffer flag_{4096};
    buffer src_{parts * part_len};
    std::optional<connected_pair> pair_;
    std::optional<memory_region> tmr_, fmr_;
    std::optional<target_service> service_;
    remote_region data_, flag_desc_;
    std::optional<memory_region> smr_;
    remote_segment segs_[parts];
};

int ctx_[4];

// One completion, read one provider entry a poll (an armed error entry lands on part 0).
std::vector<completion> collect_one_by_one(connection& c, std::size_t n,
                                           std::chrono::milliseconds limit) {
    std::vector<completion> out;
    const auto deadline = clk::now() + limit;
    while (out.size() < n && clk::now() < deadline) {
        completion got[1];
        for (completion_queue* q : {&c.cq(), c.rcq()}) {
            if (q == nullptr)
                continue;
            auto r = q->poll(got);
            if (!r) {
                ADD_FAILURE() << r.error().what();
                return out;
            }
            if (*r == 1)
                out.push_back(got[0]);
        }
    }
    return out;
}

}  // namespace

// The happy path, with each flush method the provider offers: the data is at the target when
// the flag word changes (a thread on the target watches the word and checks the data at once),
// and the operation completes once, as op::publish.
TEST_P(publish_test, the_flag_is_written_after_the_data_and_the_operation_completes_once) {
    open();
    if (!atomics_or_skip())
        GTEST_SKIP() << GetParam() << " has no atomic path here (refusal checked)";
    std::vector<flush_method> methods{flush_method::read_after_write};
    if (!rdm())
        methods.push_back(flush_method::gpspm);
    for (flush_method m : methods) {
        SCOPED_TRACE(to_string(m));
        std::memset(target_.bytes.data(), 0, target_.bytes.size());
        std::memset(flag_.bytes.data(), 0, flag_.bytes.size());
        const std::size_t alive = remora::detail::publish_ops_alive();
        std::atomic<int> seen{-1};  // -1 not yet, 1 data complete when the flag appeared, 0 not
        std::thread watcher([&] {
            const auto deadline = clk::now() + 10s;
            while (clk::now() < deadline) {
                if (flag_word() == published) {
                    seen = data_landed() ? 1 : 0;
                    return;
                }
                std::this_thread::yield();
            }
        });
        REMORA_ASSERT_OK(publish({.context = &ctx_[0]}, {.method = m}));
        auto got = collect(client().cq(), 1, false, 10s);
        const std::uint64_t flag_at_completion = flag_word();
        EXPECT_TRUE(collect(client().cq(), 1, false, 2s).empty()) << "a second completion";
        watcher.join();
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(flag_at_completion, published) << "the publish completed before its flag";
        EXPECT_TRUE(got[0].ok()) << got[0].status.message() << " part " << got[0].failed_part;
        EXPECT_EQ(got[0].op, op::publish);
        EXPECT_EQ(got[0].context, &ctx_[0]);
        EXPECT_EQ(got[0].bytes, parts * part_len);
        EXPECT_TRUE(data_landed()) << "the flush completed before the data was there";
        EXPECT_EQ(seen.load(), 1) << "the flag appeared before the data (or never: -1)";
        expect_settled(alive);
    }
}

// The atomic is posted only once the flush has completed: a GPSPM flush that the target has not
// answered yet (its service answers only while the target reads its CQs: no progress thread
// here) holds the flag back although the writes have landed. On sockets the writes and the
// native atomic need nothing of the target application, so a flag posted early would show; on
// tcp the service atomic waits for the target too (the case passes trivially there).
TEST_P(publish_test, the_atomic_waits_for_the_flush_to_complete) {
    if (rdm())
        GTEST_SKIP() << "GPSPM needs the target service; these RDM pairs carry none";
    open(8, {}, true, /*server_progress=*/false);
    REMORA_ASSERT_OK(publish({.context = &ctx_[0]}, {.method = flush_method::gpspm}));
    // The flush is not answered while the target does not look: no completion, no flag. (Over
    // the same-host path the target's side always runs the library's progress thread, which
    // answers at once: the target cannot hold the flush back there.)
    if (!client().same_host()) {
        EXPECT_TRUE(collect(client().cq(), 1, false, 500ms).empty());
        EXPECT_EQ(flag_word(), 0u) << "the atomic was posted before the flush completed";
    }
    // The target reads its CQs: the flush is answered, then the atomic lands.
    std::vector<completion> got;
    EXPECT_TRUE(eventually([&] {
        completion c[4];
        (void)pair_->server->cq().poll(c);
        if (auto* r = pair_->server->rcq())
            (void)r->poll(c);
        auto n = client().cq().poll(c);
        if (n && *n > 0)
            got.insert(got.end(), c, c + *n);
        return !got.empty() && flag_word() == published;
    }));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message() << " part " << got[0].failed_part;
    EXPECT_TRUE(data_landed());
}

// A write failing (an error entry for part 0) is reported once with its part, and the atomic is
// never posted: the flag stays 0.
TEST_P(publish_test, a_failed_write_is_named_and_the_flag_is_never_written) {
    open();
    if (!atomics_or_skip())
        GTEST_SKIP() << GetParam() << " has no atomic path here (refusal checked)";
    first_service_use();
    const std::size_t alive = remora::detail::publish_ops_alive();
    fault::arm_error_entry(FI_EIO, 1);
    REMORA_ASSERT_OK(publish({.context = &ctx_[1]}, {.method = flush_method::read_after_write}));
    auto got = collect_one_by_one(client(), 2, 2s);
    ASSERT_EQ(got.size(), 1u) << "reported more than once, or never";
    EXPECT_FALSE(got[0].ok());
    EXPECT_EQ(got[0].op, op::publish);
    EXPECT_EQ(got[0].failed_part, 0u);
    EXPECT_EQ(got[0].context, &ctx_[1]);
    expect_settled(alive);
    EXPECT_EQ(flag_word(), 0u) << "the atomic was posted after a failed write";
}

// The target refuses the flush (GPSPM on a region its service does not expose): part
// parts (the flush) is named, with the target's errc, and the flag is never written.
TEST_P(publish_test, a_flush_refused_by_the_target_stops_the_publication) {
    if (rdm())
        GTEST_SKIP() << "GPSPM needs the target service; these RDM pairs carry none";
    open(8, {}, /*expose_data=*/false);
    const std::size_t alive = remora::detail::publish_ops_alive();
    REMORA_ASSERT_OK(publish({.context = &ctx_[2]}, {.method = flush_method::gpspm}));
    auto got = collect(client().cq(), 2, false, 2s);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, make_error_code(errc::access_denied)) << got[0].status.message();
    EXPECT_EQ(got[0].failed_part, parts);
    expect_settled(alive);
    EXPECT_TRUE(data_landed());  // the writes themselves went through
    EXPECT_EQ(flag_word(), 0u) << "the atomic was posted after a failed flush";
}

// The atomic's post failing (phase 2) is reported once as part parts + 1; data landed, flag not.
TEST_P(publish_test, a_failed_atomic_post_is_named) {
    open();
    if (!atomics_or_skip())
        GTEST_SKIP() << GetParam() << " has no atomic path here (refusal checked)";
    first_service_use();
    const std::size_t alive = remora::detail::publish_ops_alive();
    fault::arm(remora::atomics(client()) == atomic_path::native
                   ? remora::detail::fabric_call::post_atomic
                   : remora::detail::fabric_call::post_send,
               -FI_EIO, 1);
    REMORA_ASSERT_OK(publish({.context = &ctx_[0]}, {.method = flush_method::read_after_write}));
    auto got = collect(client().cq(), 2, false, 2s);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_FALSE(got[0].ok());
    EXPECT_EQ(got[0].failed_part, parts + 1);
    expect_settled(alive);
    EXPECT_EQ(flag_word(), 0u);
}

TEST_P(publish_test, bad_input_is_refused_naming_the_part_before_anything_is_taken) {
    open();
    if (!atomics_or_skip())
        GTEST_SKIP() << GetParam() << " has no atomic path here (refusal checked)";
    auto refused = [&](result<void> r, errc code, const char* names) {
        ASSERT_FALSE(r.has_value());
        EXPECT_TRUE(r.error() == code) << r.error().what();
        EXPECT_NE(r.error().message().find(names), std::string::npos) << r.error().what();
    };
    remote_segment bad[2] = {segs_[0], {&data_, 4096 - 8, 64}};
    refused(remora::publish(client(), bad, *smr_, 0, flag_desc_, flag_at, 1), errc::out_of_range,
            "part 1 (write)");
    remote_segment two_regions[2] = {segs_[0], {&flag_desc_, 0, 8}};
    refused(remora::publish(client(), two_regions, *smr_, 0, flag_desc_, flag_at, 1),
            errc::access_denied,
            "part 1 (write)");        // the flag region grants no write
    const auto data_as_flag = data_;  // no atomic_target
    refused(remora::publish(client(), segs_, *smr_, 0, data_as_flag, flag_at, 1),
            errc::access_denied, "part 4 (atomic)");
    refused(remora::publish(client(), segs_, *smr_, 0, flag_desc_, 4, 1), errc::invalid_argument,
            "part 4 (atomic)");  // not 8-byte aligned
    refused(remora::publish(client(), {}, *smr_, 0, flag_desc_, flag_at, 1), errc::invalid_argument,
            "no remote segment");
    refused(remora::publish(client(), segs_, *smr_, 0, flag_desc_, flag_at, 1, {},
                            {.report = completion_mode::at_post}),
            errc::invalid_argument, "at_post");
    refused(remora::publish(client(), segs_, *smr_, src_.bytes.size(), flag_desc_, flag_at, 1),
            errc::out_of_range, "local range");
    std::vector<remote_segment> many(9, remote_segment{&data_, 0, 8});
    refused(remora::publish(client(), many, *smr_, 0, flag_desc_, flag_at, 1), errc::too_large,
            "send-queue entries");
    EXPECT_EQ(client().in_flight(), 0u);
    EXPECT_EQ(flag_word(), 0u);
}

TEST_P(publish_test, segments_in_two_regions_are_refused) {
    open();
    buffer other(4096);
    auto omr = must(memory_region::create(pair_->server_domain, other.span(),
                                          usage::write_destination | usage::flush_target));
    auto od = must(omr.describe());
    remote_segment two[2] = {segs_[0], {&od, 0, 64}};
    auto r = remora::publish(client(), two, *smr_, 0, flag_desc_, flag_at, 1);
    ASSERT_FALSE(r.has_value());
    EXPECT_TRUE(r.error() == errc::invalid_argument) << r.error().what();
    EXPECT_NE(r.error().message().find("part 0's remote region"), std::string::npos);
    EXPECT_EQ(client().in_flight(), 0u);
}

// All or nothing: with one entry short nothing is taken; parked, it waits for all of them at
// once; its deadline ends it having taken nothing.
TEST_P(publish_test, a_publish_short_of_one_entry_takes_none_and_parks_for_all) {
    open(8);
    if (!atomics_or_skip())
        GTEST_SKIP() << GetParam() << " has no atomic path here (refusal checked)";
    // parts writes + a read-after-write flush (+ a native atomic) of the send queue.
    const std::uint32_t need = raw_need();
    pair_.reset();
    open(need);
    REMORA_ASSERT_OK(client().write(data_, 0, *smr_, 0, 8, {.context = &ctx_[3]}));
    const flush_options raw{.method = flush_method::read_after_write};
    EXPECT_ERRC(publish({.context = &ctx_[0]}, raw), errc::would_block);
    EXPECT_EQ(client().in_flight(), 1u) << "a refused publish kept entries";
    EXPECT_ERRC(publish({.context = &ctx_[0], .park_until = clk::now() + 100ms}, raw),
                errc::timed_out);
    EXPECT_EQ(client().in_flight(), 1u) << "a timed-out publish kept entries";
    auto p = std::async(std::launch::async, [&] {
        return publish({.context = &ctx_[0], .park_until = clk::now() + 10s}, raw);
    });
    ASSERT_TRUE(eventually([&] { return client().parked() == 1; }));
    auto first = collect(client().cq(), 1, true);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].context, &ctx_[3]);
    REMORA_ASSERT_OK(p.get());
    auto got = collect(client().cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(got[0].op, op::publish);
    EXPECT_TRUE(eventually([&] { return flag_word() == published; }));
    EXPECT_TRUE(eventually([&] { return client().in_flight() == 0; }));
}

TEST_P(publish_test, a_publish_short_of_slot_units_takes_none) {
    auto pool = must(slot_pool::create({.capacity = units{}.with(unit::sq, 5).with(unit::cq, 5),
                                        .policy = exhaustion::backpressure}));
    open(16, pool);
    if (!atomics_or_skip())
        GTEST_SKIP() << GetParam() << " has no atomic path here (refusal checked)";
    // One unit short of what the publish needs.
    const std::uint32_t held = 5 - raw_need() + 1;
    for (std::uint32_t i = 0; i < held; ++i)
        REMORA_ASSERT_OK(client().write(data_, 0, *smr_, 0, 8));
    const auto before = pool->available();
    EXPECT_ERRC(publish({}, {.method = flush_method::read_after_write}), errc::would_block);
    EXPECT_EQ(pool->available(), before) << "a refused publish kept units";
    EXPECT_EQ(client().in_flight(), held) << "a refused publish kept records";
    EXPECT_EQ(collect(client().cq(), held, true).size(), held);
    REMORA_ASSERT_OK(publish({}, {.method = flush_method::read_after_write}));
    EXPECT_EQ(collect(client().cq(), 1, true).size(), 1u);
    EXPECT_EQ(pool->available(), pool->capacity());
    EXPECT_TRUE(eventually([&] { return flag_word() == published; }));
}

namespace {
std::atomic<int> queued_calls{0};
std::error_code queued_status;
remora::op queued_op = remora::op::unknown;
void on_queued(const completion& c) {
    queued_status = c.status;
    queued_op = c.op;
    ++queued_calls;
}
}  // namespace

// park_mode::queue: returns at once, posted (all parts) once its entries come back; its
// callback reports it once. A second one queued behind it ends at its deadline, reported.
TEST_P(publish_test, a_queued_publish_is_posted_once_admitted_and_reports_through_its_callback) {
    open(8);
    if (!atomics_or_skip())
        GTEST_SKIP() << GetParam() << " has no atomic path here (refusal checked)";
    const std::uint32_t need = raw_need();
    pair_.reset();
    open(need);
    queued_calls = 0;
    const flush_options raw{.method = flush_method::read_after_write};
    REMORA_ASSERT_OK(client().write(data_, 0, *smr_, 0, 8, {.context = &ctx_[3]}));
    REMORA_ASSERT_OK(publish({.context = &ctx_[1],
                              .callback = on_queued,
                              .park_until = clk::now() + 10s,
                              .park = park_mode::queue},
                             raw));
    EXPECT_EQ(client().parked(), 1u);
    auto first = collect(client().cq(), 1, false);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].context, &ctx_[3]);
    ASSERT_TRUE(eventually([&] {
        completion c[4];
        (void)client().cq().poll(c);
        return queued_calls.load() == 1;
    }));
    EXPECT_FALSE(queued_status) << queued_status.message();
    EXPECT_EQ(queued_op, op::publish);
    EXPECT_TRUE(eventually([&] { return flag_word() == published; }));
    EXPECT_TRUE(eventually([&] { return client().in_flight() == 0; }));
    EXPECT_EQ(queued_calls.load(), 1);
}

// A connection destroyed with a publish in flight (its completions never read) frees its state.
TEST_P(publish_test, destroying_the_connection_with_a_publish_in_flight_frees_it) {
    open();
    if (!atomics_or_skip())
        GTEST_SKIP() << GetParam() << " has no atomic path here (refusal checked)";
    if (client().same_host() || GetParam() == "rdm:shm")
        GTEST_SKIP() << "over shm the target answers the publish's read into the region of a "
                        "client destroyed in the same process, which shm does not survive; "
                        "between processes peer_death_test covers it";
    const std::size_t before = remora::detail::publish_ops_alive();
    REMORA_ASSERT_OK(publish({.context = &ctx_[0]}));
    EXPECT_EQ(remora::detail::publish_ops_alive(), before + 1);
    pair_->client.reset();
    EXPECT_EQ(remora::detail::publish_ops_alive(), before);
}

// A parked publish whose connection is destroyed from another thread ends with disconnected.
TEST_P(publish_test, a_parked_publish_ends_when_its_connection_is_destroyed) {
    open(8);
    if (!atomics_or_skip())
        GTEST_SKIP() << GetParam() << " has no atomic path here (refusal checked)";
    const std::uint32_t need = raw_need();
    pair_.reset();
    open(need);
    REMORA_ASSERT_OK(client().write(data_, 0, *smr_, 0, 8));  // one entry short
    connection* conn = &client();
    auto d = std::async(std::launch::async, [&] {
        return remora::publish(*conn, segs_, *smr_, 0, flag_desc_, flag_at, published,
                               {.method = flush_method::read_after_write},
                               {.park_until = clk::time_point::max()});
    });
    ASSERT_TRUE(eventually([&] { return conn->parked() == 1; }));
    pair_->client.reset();
    EXPECT_ERRC(d.get(), errc::disconnected);
}

// The peer goes away (its side destroyed): a publish posted then ends once, with an error, at
// the call or as its completion; nothing hangs and the flag is never written.
TEST_P(publish_test, peer_death_ends_the_publish_once_with_an_error) {
    if (rdm())
        GTEST_SKIP() << "RDM peers are not connected; a peer destroyed in the same process is "
                        "not a case to rely on (connection.hpp: shm touches its unmapped region)";
    open();
    const std::size_t alive = remora::detail::publish_ops_alive();
    pair_->server.reset();
    // The client notices the close only while it looks (tcp): wait for the event.
    auto ev = client().next_event(10s);
    ASSERT_TRUE(ev.has_value()) << ev.error().what();
    auto r = publish({.context = &ctx_[0]});
    if (r) {
        auto got = collect(client().cq(), 1, false, 10s);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_FALSE(got[0].ok());
        EXPECT_TRUE(collect(client().cq(), 1, false, 300ms).empty());
    } else {
        EXPECT_TRUE(r.error() == errc::disconnected) << r.error().what();
    }
    expect_settled(alive);
}

INSTANTIATE_TEST_SUITE_P(providers, publish_test, testing::ValuesIn(publish_providers()),
                         provider_name);

// SPDX-License-Identifier: BSD-3-Clause
// Failures of libfabric calls, made at the fabric layer's seam (src/fabric/fault.hpp): each call
// that fails gives its caller an exact, named error, leaks no libfabric object, loses no queue
// entry, and leaves the domain, the listener and the connection usable afterwards. An error
// completion without an error code is an error (errc::provider_error), never a success.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <remora/target_service.hpp>

#include "core/connection_impl.hpp"
#include "fabric/fault.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

using detail::fabric_call;
namespace fault = detail::fabric_fault;

// Every test leaves the seam disarmed, whatever it asserted.
struct disarm_at_exit {
    ~disarm_at_exit() { fault::disarm(); }
};

std::error_code fabric_code(int fi_errno) {
    return {fi_errno, fabric_category()};
}

bool names(const error& e, fabric_call call) {
    return e.message().find(detail::to_string(call)) != std::string::npos;
}

class fabric_fault : public testing::TestWithParam<std::string> {
  protected:
    disarm_at_exit guard_;
};

TEST_P(fabric_fault, mr_reg_failure_is_an_exact_error_and_leaks_nothing) {
    // Without shm beside the domain: each region is one registration (same_host_test has the
    // shm one's failures).
    auto dom = must(domain::open({.provider = GetParam(), .same_host = false}));
    buffer mem(4096);
    const long before = fault::open_objects();
    const unsigned fired = fault::fired(fabric_call::mr_reg);

    // An FI_* code remora has no errc for keeps its libfabric code.
    fault::arm(fabric_call::mr_reg, -FI_ENOMEM);
    {
        auto mr = memory_region::create(dom, mem.span(), usage::write_source);
        ASSERT_FALSE(mr.has_value());
        EXPECT_EQ(mr.error().code(), fabric_code(FI_ENOMEM)) << mr.error().what();
        EXPECT_TRUE(names(mr.error(), fabric_call::mr_reg)) << mr.error().what();
        EXPECT_NE(mr.error().message().find("4096 bytes"), std::string::npos) << mr.error().what();
    }
    EXPECT_EQ(fault::fired(fabric_call::mr_reg), fired + 1);
    EXPECT_EQ(fault::open_objects(), before);

    // Those it has map to it.
    fault::arm(fabric_call::mr_reg, -FI_EACCES);
    EXPECT_ERRC(memory_region::create(dom, mem.span(), usage::write_source), errc::access_denied);
    fault::arm(fabric_call::mr_reg, -FI_EINVAL);
    EXPECT_ERRC(memory_region::create(dom, mem.span(), usage::write_source),
                errc::invalid_argument);
    EXPECT_EQ(fault::open_objects(), before);

    // Armed once means once: the next registration works, and closes what it opened.
    fault::arm(fabric_call::mr_reg, -FI_ENOMEM, 1);
    EXPECT_FALSE(memory_region::create(dom, mem.span(), usage::write_source).has_value());
    {
        auto mr = memory_region::create(dom, mem.span(), usage::write_source);
        REMORA_ASSERT_OK(mr);
        EXPECT_EQ(fault::open_objects(), before + 1);
    }
    EXPECT_EQ(fault::open_objects(), before);
}

TEST_P(fabric_fault, getinfo_failure_fails_open_listen_and_connect_clearly) {
    fault::arm(fabric_call::getinfo, -FI_ENODATA);
    {
        auto d = domain::open({.provider = GetParam()});
        ASSERT_FALSE(d.has_value());
        EXPECT_NE(d.error().message().find("no provider offers connected endpoints"),
                  std::string::npos)
            << d.error().what();
    }
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    fault::arm(fabric_call::getinfo, -FI_ENODATA);
    EXPECT_ERRC(listener::create(sd, "127.0.0.1", 0), errc::unreachable);
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    fault::arm(fabric_call::getinfo, -FI_ENODATA);
    EXPECT_ERRC(connection::connect(cd, "127.0.0.1", lst.port()), errc::unreachable);

    // Nothing armed: the same calls work.
    auto client = std::async(std::launch::async,
                             [&] { return connection::connect(cd, "127.0.0.1", lst.port()); });
    auto req = request_while_connecting(lst, client);
    REMORA_ASSERT_OK(req);
    REMORA_ASSERT_OK(req->accept({}));
    REMORA_ASSERT_OK(client.get());
}

// The calls that set up a connection's endpoint, on either side.
const fabric_call setup_calls[] = {fabric_call::eq_open, fabric_call::cq_open,
                                   fabric_call::endpoint, fabric_call::enable};

TEST_P(fabric_fault, connect_fails_cleanly_when_its_endpoint_cannot_be_set_up) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    const long before = fault::open_objects();

    for (fabric_call call : setup_calls) {
        SCOPED_TRACE(detail::to_string(call));
        const unsigned fired = fault::fired(call);
        fault::arm(call, -FI_ENOMEM);
        auto c = connection::connect(cd, "127.0.0.1", lst.port());
        ASSERT_FALSE(c.has_value());
        EXPECT_EQ(c.error().code(), fabric_code(FI_ENOMEM)) << c.error().what();
        EXPECT_TRUE(names(c.error(), call)) << c.error().what();
        EXPECT_EQ(fault::fired(call), fired + 1);
        EXPECT_EQ(fault::open_objects(), before) << "the failed connect leaked";
    }
    // fi_connect itself refused: the errc of its code.
    fault::arm(fabric_call::connect, -FI_ECONNREFUSED);
    {
        auto c = connection::connect(cd, "127.0.0.1", lst.port());
        ASSERT_FALSE(c.has_value());
        EXPECT_TRUE(c.error() == errc::connection_refused) << c.error().what();
        EXPECT_TRUE(names(c.error(), fabric_call::connect)) << c.error().what();
    }
    EXPECT_EQ(fault::open_objects(), before);
    // The listener saw none of them; a following connect succeeds, and the pair works.
    EXPECT_ERRC(lst.get_request(0ms), errc::timed_out);
    auto client = std::async(std::launch::async,
                             [&] { return connection::connect(cd, "127.0.0.1", lst.port()); });
    auto req = request_while_connecting(lst, client);
    REMORA_ASSERT_OK(req);
    auto s = req->accept({});
    REMORA_ASSERT_OK(s);
    auto c = client.get();
    REMORA_ASSERT_OK(c);
    EXPECT_TRUE(c->is_open());
}

// Accepts one request on `lst` with `call` armed to fail: accept() reports it by name and closes
// what it opened; the client's connect fails too, within a few seconds (before the endpoint takes
// the request, remora rejects it: errc::rejected).
void accept_with_failure(listener& lst, domain& cd, fabric_call call, long before) {
    connection_config client_cfg;
    client_cfg.connect_timeout = 5s;
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(cd, "127.0.0.1", lst.port(), client_cfg);
    });
    auto req = request_while_connecting(lst, client);
    ASSERT_TRUE(req.has_value()) << req.error().what();
    const unsigned fired = fault::fired(call);
    fault::arm(call, -FI_ENOMEM);
    auto s = req->accept({});
    ASSERT_FALSE(s.has_value());
    EXPECT_EQ(fault::fired(call), fired + 1);
    EXPECT_EQ(s.error().code(), fabric_code(FI_ENOMEM)) << s.error().what();
    EXPECT_TRUE(names(s.error(), call)) << s.error().what();
    const auto t0 = std::chrono::steady_clock::now();
    auto c = client.get();
    EXPECT_FALSE(c.has_value()) << "the client connected to an endpoint that failed";
    if (!c && call != fabric_call::enable && call != fabric_call::accept) {
        EXPECT_TRUE(c.error() == errc::rejected) << c.error().what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s) << "the client waited for its timeout";
    EXPECT_EQ(fault::open_objects(), before) << "the failed accept leaked";
    EXPECT_ERRC(req->accept({}), errc::bad_state);  // a request answered stays answered
}

// The listener keeps working after failed accepts: the next connection carries data.
void accept_and_write(listener& lst, domain& sd, domain& cd) {
    auto client = std::async(std::launch::async,
                             [&] { return connection::connect(cd, "127.0.0.1", lst.port()); });
    auto req = request_while_connecting(lst, client);
    REMORA_ASSERT_OK(req);
    auto s = req->accept({});
    REMORA_ASSERT_OK(s);
    auto c = client.get();
    REMORA_ASSERT_OK(c);
    buffer src(64), dst(64);
    auto smr = must(memory_region::create(cd, src.span(), usage::write_source));
    auto dmr = must(memory_region::create(sd, dst.span(), usage::write_destination));
    std::memset(src.bytes.data(), 0x5a, 64);
    REMORA_ASSERT_OK(c->write(must(dmr.describe()), 0, smr, 0, 64));
    auto done = collect(c->cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok());
}

TEST_P(fabric_fault, accept_fails_cleanly_and_the_listener_keeps_working) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    const long before = fault::open_objects();
    for (fabric_call call : setup_calls) {
        SCOPED_TRACE(detail::to_string(call));
        accept_with_failure(lst, cd, call, before);
        if (HasFatalFailure()) {
            return;
        }
    }
    accept_and_write(lst, sd, cd);
}

TEST_P(fabric_fault, a_failed_fi_accept_is_reported_and_the_listener_keeps_working) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    accept_with_failure(lst, cd, fabric_call::accept, fault::open_objects());
    if (HasFatalFailure()) {
        return;
    }
    accept_and_write(lst, sd, cd);
}

// A connected pair with one-entry queues and registered buffers for every kind of operation.
connection_config one_entry() {
    connection_config c;
    c.sq_size = 1;
    c.rq_size = 1;
    return c;
}
// The target side drives its own progress (tcp serves reads only while it is called into).
connection_config target() {
    connection_config c = one_entry();
    c.progress_thread = true;
    return c;
}
constexpr usage all_uses = usage::read_source | usage::read_destination | usage::write_source |
                           usage::write_destination | usage::send | usage::receive |
                           usage::atomic_target;

struct pair_with_buffers {
    explicit pair_with_buffers(const std::string& provider)
        : p(must(connect_pair(provider, target(), one_entry()))),
          lmr(must(memory_region::create(p.client_domain, local.span(), all_uses))),
          rmr(must(memory_region::create(p.server_domain, remote.span(), all_uses))),
          desc(must(rmr.describe())) {}
    connection& client() { return *p.client; }
    connection& server() { return *p.server; }

    connected_pair p;
    buffer local{4096}, remote{4096};
    memory_region lmr, rmr;
    remote_region desc;
};

TEST_P(fabric_fault, a_post_that_would_block_gives_back_its_queue_entry) {
    pair_with_buffers b(GetParam());
    connection& c = b.client();
    const memory_region& l = b.lmr;

    struct kind {
        fabric_call call;
        std::function<result<void>()> post;
    };
    std::vector<kind> kinds = {
        {fabric_call::post_write, [&] { return c.write(b.desc, 0, l, 0, 8); }},
        {fabric_call::post_read, [&] { return c.read(l, 0, b.desc, 0, 8); }},
        {fabric_call::post_send, [&] { return c.send(l, 0, 8); }},
        {fabric_call::post_recv, [&] { return c.recv(l, 64, 8); }},
    };
    if (remora::atomics(c) == atomic_path::native) {
        kinds.push_back(
            {fabric_call::post_atomic, [&] { return remora::atomic_write(c, b.desc, 0, 7); }});
        kinds.push_back({fabric_call::post_fetch_atomic,
                         [&] { return remora::fetch_add(c, b.desc, 0, 1, l, 128); }});
        kinds.push_back({fabric_call::post_compare_atomic,
                         [&] { return remora::compare_swap(c, b.desc, 0, 8, 9, l, 128); }});
    }
    for (const kind& k : kinds) {
        SCOPED_TRACE(detail::to_string(k.call));
        if (k.call == fabric_call::post_send) {
            REMORA_ASSERT_OK(b.server().recv(b.rmr, 256, 8));  // room for it at the peer
        }
        const unsigned fired = fault::fired(k.call);
        fault::arm(k.call, -FI_EAGAIN);
        EXPECT_ERRC(k.post(), errc::would_block);
        EXPECT_EQ(fault::fired(k.call), fired + 1);
        EXPECT_EQ(c.in_flight(), 0u) << "the failed post kept its queue entry";
        // The queue has one entry: the same post is admitted again, and completes.
        REMORA_ASSERT_OK(k.post());
        EXPECT_EQ(c.in_flight(), 1u);
        if (k.call == fabric_call::post_recv) {
            REMORA_ASSERT_OK(b.server().send(b.rmr, 0, 8));
            auto rc = collect(c.cq(), 1, true);
            ASSERT_EQ(rc.size(), 1u);
            EXPECT_TRUE(rc[0].ok());
            EXPECT_EQ(rc[0].op, op::recv);
            ASSERT_EQ(collect(b.server().cq(), 1, true).size(), 1u);
        } else {
            auto done = collect(c.cq(), 1, true);
            ASSERT_EQ(done.size(), 1u);
            EXPECT_TRUE(done[0].ok()) << done[0].status.message();
            if (k.call == fabric_call::post_send) {
                ASSERT_EQ(collect(b.server().cq(), 1, true).size(), 1u);
            }
        }
        EXPECT_EQ(c.in_flight(), 0u);
    }
}

TEST_P(fabric_fault, an_error_entry_without_a_code_is_a_provider_error_not_a_success) {
    pair_with_buffers b(GetParam());
    connection& c = b.client();
    int ctx = 0;
    fault::arm_error_entry(0);
    REMORA_ASSERT_OK(c.write(b.desc, 0, b.lmr, 0, 8, {.context = &ctx}));
    auto done = collect(c.cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_FALSE(done[0].ok()) << "an error entry became a successful completion";
    EXPECT_EQ(done[0].status, make_error_code(errc::provider_error)) << done[0].status.message();
    EXPECT_EQ(done[0].context, &ctx);
    EXPECT_EQ(done[0].op, op::write);
    EXPECT_EQ(c.in_flight(), 0u);

    // An entry with a code keeps its mapping.
    fault::arm_error_entry(FI_ECANCELED);
    REMORA_ASSERT_OK(c.write(b.desc, 0, b.lmr, 0, 8, {.context = &ctx}));
    done = collect(c.cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, make_error_code(errc::canceled));

    // Nothing armed: writes succeed again.
    REMORA_ASSERT_OK(c.write(b.desc, 0, b.lmr, 0, 8));
    done = collect(c.cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok());
}

TEST_P(fabric_fault, a_failed_cq_readerr_is_reported_and_the_entry_is_read_later) {
    pair_with_buffers b(GetParam());
    connection& c = b.client();
    fault::arm_error_entry(FI_ECANCELED);
    fault::arm(fabric_call::cq_readerr, -FI_EIO);
    REMORA_ASSERT_OK(c.write(b.desc, 0, b.lmr, 0, 8));
    completion buf[4];
    bool failed = false;
    std::vector<completion> got;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (got.empty() && std::chrono::steady_clock::now() < deadline) {
        auto r = c.cq().poll(buf);
        if (!r) {
            EXPECT_FALSE(failed) << "failed twice";
            EXPECT_TRUE(r.error() == errc::disconnected) << r.error().what();
            EXPECT_TRUE(names(r.error(), fabric_call::cq_readerr)) << r.error().what();
            failed = true;
            continue;
        }
        got.insert(got.end(), buf, buf + *r);
    }
    EXPECT_TRUE(failed);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, make_error_code(errc::canceled));
    EXPECT_EQ(c.in_flight(), 0u);
}

TEST(fabric_fault_seam, calls_are_addressed_by_name_and_ordinal_and_counted) {
    disarm_at_exit guard;
    fabric_call c{};
    ASSERT_TRUE(detail::from_string("fi_cq_read", &c));
    EXPECT_EQ(c, fabric_call::cq_read);
    for (std::size_t i = 0; i < detail::fabric_call_count; ++i) {
        const auto call = static_cast<fabric_call>(i);
        ASSERT_TRUE(detail::from_string(detail::to_string(call), &c)) << i;
        EXPECT_EQ(c, call);
    }
    EXPECT_FALSE(detail::from_string("fi_nothing", &c));
    EXPECT_FALSE(detail::from_string(nullptr, &c));

    // The 3rd registration from now fails, once; the calls around it are counted (one
    // registration a region: no shm beside the domain).
    auto dom = must(domain::open({.provider = "tcp", .same_host = false}));
    buffer mem(4096);
    fault::start_counting();
    fault::arm_nth(fabric_call::mr_reg, -FI_ENOMEM, 3);
    std::vector<bool> ok;
    for (int i = 0; i < 5; ++i) {
        ok.push_back(memory_region::create(dom, mem.span(), usage::write_source).has_value());
    }
    fault::stop_counting();
    EXPECT_EQ(ok, (std::vector<bool>{true, true, false, true, true}));
    EXPECT_EQ(fault::calls(fabric_call::mr_reg), 5u);
    EXPECT_EQ(fault::calls(fabric_call::cq_read), 0u);
    // Counting off: nothing more is counted, and nothing is left armed.
    EXPECT_TRUE(memory_region::create(dom, mem.span(), usage::write_source).has_value());
    EXPECT_EQ(fault::calls(fabric_call::mr_reg), 5u);
    EXPECT_FALSE(fault::armed());
}

// A target service whose reply cannot be posted (twice: the post is retried once) keeps its
// receive depth: the request's receive is posted again at once. The client's request, which
// gets no reply, completes exactly once when the connection closes. (It was lost: the service
// silently served one request fewer at a time.)
TEST_P(fabric_fault, a_target_service_whose_reply_fails_keeps_its_depth) {
    constexpr std::uint32_t depth = 2;
    // The target is driven by this thread alone (no progress thread): the fault is armed
    // between the client's post and the target's reading of the request. The client sends no
    // hello (serve_wait 0), so the fault meets the request's reply. The service has a receive
    // for each request and one for a client's hello.
    constexpr std::size_t receives = depth + 1;
    auto p = must(connect_pair(
        GetParam(), {.addons = {remora::persistence_config{.service_depth = depth}}},
        {.addons = {remora::persistence_config{.service_depth = depth, .serve_wait = 0ms}}}));
    buffer mem(4096);
    auto mr = must(memory_region::create(p.server_domain, mem.span(),
                                         usage::write_destination | usage::flush_target));
    auto svc = must(target_service::create());
    auto desc = must(svc.expose(mr));
    REMORA_ASSERT_OK(svc.serve(*p.server));
    detail::connection_impl& target = *detail::impl_of(*p.server);
    ASSERT_EQ(target.ops.in_use(detail::queue::recv), receives);

    int ctx = 0;
    const flush_options gpspm{.type = flush_type::visibility, .method = flush_method::gpspm};
    REMORA_ASSERT_OK(remora::flush(*p.client, desc, 0, 8, gpspm, {.context = &ctx}));
    fault::arm(fabric_call::post_send, -FI_ENOMEM, 2);
    completion buf[4];
    ASSERT_TRUE(eventually([&] {
        (void)p.server->cq().poll(buf);
        return svc.requests() == 1;
    })) << "the target never read the request";
    fault::disarm();
    EXPECT_EQ(fault::fired(fabric_call::post_send) >= 2, true);
    EXPECT_EQ(target.ops.in_use(detail::queue::recv), receives) << "the service lost a receive";
    EXPECT_EQ(svc.refused(), 1u);

    // The service still answers `depth` requests at once (on a fresh client slot: one is held
    // by the unanswered request).
    std::vector<int> ctxs(depth - 1);
    for (int& c : ctxs) {
        REMORA_ASSERT_OK(remora::flush(*p.client, desc, 0, 8, gpspm, {.context = &c}));
    }
    std::size_t answered = 0;
    ASSERT_TRUE(eventually([&] {
        (void)p.server->cq().poll(buf);
        auto n = p.client->cq().poll(buf);
        for (std::size_t i = 0; n && i < *n; ++i) {
            if (buf[i].context != &ctx) {
                EXPECT_TRUE(buf[i].ok()) << buf[i].status.message();
                ++answered;
            } else {
                ADD_FAILURE() << "the unanswered request completed early";
            }
        }
        return answered == ctxs.size();
    }));
    // (a receive is posted again once its reply's send completion is read)
    EXPECT_TRUE(eventually([&] {
        (void)p.server->cq().poll(buf);
        return target.ops.in_use(detail::queue::recv) == receives;
    })) << "the service lost a receive: "
        << target.ops.in_use(detail::queue::recv);

    // Close: the unanswered request completes once, with an error; nothing stays in flight.
    REMORA_ASSERT_OK(p.client->close());
    int seen = 0;
    ASSERT_TRUE(eventually([&] {
        auto n = p.client->cq().poll(buf);
        for (std::size_t i = 0; n && i < *n; ++i) {
            if (buf[i].context == &ctx) {
                ++seen;
                EXPECT_FALSE(buf[i].ok());
            }
        }
        return seen >= 1 && p.client->in_flight() == 0;
    }));
    EXPECT_EQ(seen, 1);
}

INSTANTIATE_TEST_SUITE_P(providers, fabric_fault, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

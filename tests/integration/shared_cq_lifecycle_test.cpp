// SPDX-License-Identifier: BSD-3-Clause
// The life cycle of connections on a shared_completion_queue, against what the headers promise:
// a destroyed connection's completions are dropped wherever they wait, other connections'
// callbacks keep running on the CQ's reader, setups that fail give their reservation back, and
// per-connection calls on other threads do not steal the shared CQ's wake-ups.
#include <poll.h>
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

class shared_cq_lifecycle_test : public testing::TestWithParam<std::string> {};

// A destroyed connection's completions are dropped also when the library has already read them
// out of the provider's CQ (into the CQ's ready ring, by the progress thread or a wait()): none
// reaches the application after the connection is gone, with its tag and a context that may be
// gone.
TEST_P(shared_cq_lifecycle_test, completions_already_read_are_dropped_with_their_connection) {
    for (bool progress : {false, true}) {
        SCOPED_TRACE(progress ? "progress thread" : "application waits");
        auto s = server_side::open(GetParam());
        auto shared =
            must(shared_completion_queue::create(s.dom, {.size = 32, .progress_thread = progress}));
        std::optional<connection> a =
            must(s.add({.sq_size = 4, .rq_size = 4, .tag = 1, .shared_cq = shared}));
        connection b = must(s.add({.sq_size = 4, .rq_size = 4, .tag = 2, .shared_cq = shared}));
        buffer inbox(256);
        auto in_mr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
        REMORA_ASSERT_OK(a->recv(in_mr, 0, 32, {.context = &a}));
        REMORA_ASSERT_OK(b.recv(in_mr, 64, 32, {.context = &b}));
        buffer out(32);
        auto out_mr = must(memory_region::create(s.client_dom, out.span(), usage::send));
        REMORA_ASSERT_OK(s.clients[0].send(out_mr, 0, 16));  // to a
        ASSERT_EQ(collect(s.clients[0].cq(), 1, true).size(), 1u);
        // wait() reports a completion ready without handing it out (it is in the CQ's ready ring,
        // read by the wait or by the progress thread).
        const auto until = std::chrono::steady_clock::now() + 5s;
        std::size_t ready = 0;
        while (ready == 0 && std::chrono::steady_clock::now() < until) {
            auto w = shared.queue().wait(100ms);
            ready = w ? *w : 0;
        }
        ASSERT_EQ(ready, 1u);
        a.reset();  // destroyed before its completion was polled
        // A message to b after it: the shared CQ delivers in order, so a completion of a's still
        // queued would come first. b's is the only one.
        REMORA_ASSERT_OK(s.clients[1].send(out_mr, 0, 16));  // to b
        ASSERT_EQ(collect(s.clients[1].cq(), 1, true).size(), 1u);
        auto got = collect(shared.queue(), 1, true);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].tag, 2u) << "a completion of the destroyed connection (context "
                                  << got[0].context << ") was delivered after its destroy";
        EXPECT_EQ(got[0].context, &b);
        completion extra[4];
        EXPECT_EQ(must(shared.queue().poll(extra)), 0u);
    }
}

// op_options::callback: "it runs exactly once, on the thread that reads the CQ". A connection
// destroyed on another thread drains the shared CQ, but other connections' callbacks still run
// on the CQ's reader, never on the destroying thread (which may hold the application's locks).
std::atomic<std::thread::id> callback_thread{};
std::atomic<int> callback_runs{0};
std::thread::id destroyer{};
std::mutex* registry = nullptr;
std::atomic<bool> registry_would_deadlock{false};

TEST_P(shared_cq_lifecycle_test, other_connections_callbacks_stay_on_the_cqs_reader) {
    auto s = server_side::open(GetParam());
    auto shared = must(shared_completion_queue::create(s.dom, {.size = 32}));
    std::optional<connection> a =
        must(s.add({.sq_size = 4, .rq_size = 4, .tag = 1, .shared_cq = shared}));
    connection b = must(s.add({.sq_size = 4, .rq_size = 4, .tag = 2, .shared_cq = shared}));
    buffer inbox(256);
    auto in_mr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
    callback_runs = 0;
    callback_thread = std::thread::id{};
    registry_would_deadlock = false;
    std::mutex reg;
    registry = &reg;
    REMORA_ASSERT_OK(b.recv(in_mr, 64, 32, {.callback = [](const completion&) {
                                callback_thread = std::this_thread::get_id();
                                ++callback_runs;
                                // An application callback that looks its
                                // connection up in a registry.
                                if (std::this_thread::get_id() == destroyer) {
                                    registry_would_deadlock = true;  // held here
                                    return;
                                }
                                std::lock_guard g(*registry);
                            }}));
    buffer out(32);
    auto out_mr = must(memory_region::create(s.client_dom, out.span(), usage::send));
    REMORA_ASSERT_OK(s.clients[1].send(out_mr, 0, 16));  // to b
    ASSERT_EQ(collect(s.clients[1].cq(), 1, true).size(), 1u);
    // Land b's completion in the provider's CQ without reading it: next_event drives the
    // provider (tcp progresses inside its calls) until the CQ says it holds a completion:
    // arm() refuses to arm (tcp), or fd() is readable (sockets signals it per completion).
    bool landed = false;
    const auto land_by = std::chrono::steady_clock::now() + 10s;
    while (!landed && std::chrono::steady_clock::now() < land_by) {
        (void)b.next_event(1ms);
        pollfd pfd{shared.queue().fd(), POLLIN, 0};
        landed = !must(shared.queue().arm()) || ::poll(&pfd, 1, 0) == 1;
    }
    ASSERT_TRUE(landed) << "b's completion never reached the shared CQ";
    ASSERT_EQ(callback_runs.load(), 0);
    // Another thread removes `a` from the application's registry and destroys it, as a server
    // does when a peer leaves.
    std::thread t([&] {
        destroyer = std::this_thread::get_id();
        std::lock_guard g(reg);
        a.reset();
    });
    t.join();
    // The application's poller reads the shared CQ: b's callback belongs here.
    completion got[4];
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (callback_runs.load() == 0 && std::chrono::steady_clock::now() < until) {
        (void)shared.queue().poll(got);
    }
    ASSERT_EQ(callback_runs.load(), 1);
    EXPECT_EQ(callback_thread.load(), std::this_thread::get_id())
        << "b's callback ran on the thread that destroyed a";
    EXPECT_FALSE(registry_would_deadlock.load())
        << "b's callback ran while the destroying thread held the application's registry lock "
           "(a std::mutex there self-deadlocks)";
}

// A connection destroyed with large writes still in flight while the shared CQ keeps being
// polled: no completion of its records may be read after it is freed (ASan would report the
// op_record read in finish()).
TEST_P(shared_cq_lifecycle_test, destroy_with_writes_in_flight_then_keep_polling) {
    if (GetParam() == "sockets") {
        // Reported as a skip (ctest lists it), not a pass: on sockets this test stalls (another
        // connection's write never completes after the destroy) and, once in a fresh-clone
        // release run and once under ASan, hung past ctest's 120 s. Open in the trust issue.
        GTEST_SKIP() << "sockets: a destroy with large writes in flight stalls or hangs the "
                        "domain (known, open in the trust issue)";
    }
    auto s = server_side::open(GetParam());
    auto shared = must(shared_completion_queue::create(s.client_dom, {.size = 256}));
    constexpr std::size_t chunk = 256 * 1024;
    buffer target(4 * chunk);
    auto tmr = must(memory_region::create(s.dom, target.span(), usage::write_destination));
    const auto dst = must(tmr.describe());
    buffer local(4 * chunk);
    auto lmr = must(memory_region::create(s.client_dom, local.span(), usage::write_source));
    std::vector<connection> server_conns;
    // A connection that stays: a write of its, posted after each destroy, is the marker the
    // poller reads last (its endpoint reports in order; the destroyed one's are gone by then).
    // The marker lands in bytes of its own: in `target` it would race (TSan) with the destroyed
    // connection's writes, which the server's provider may still be placing.
    buffer marker_bytes(8);
    auto marker_target = server_side::open(GetParam());
    auto marker_tmr = must(
        memory_region::create(marker_target.dom, marker_bytes.span(), usage::write_destination));
    const auto marker_dst = must(marker_tmr.describe());
    auto marker_client = std::async(std::launch::async, [&] {
        return connection::connect(s.client_dom, "127.0.0.1", marker_target.lst.port(),
                                   {.sq_size = 4, .rq_size = 4, .tag = 2u, .shared_cq = shared});
    });
    auto marker_req = request_while_connecting(marker_target.lst, marker_client);
    ASSERT_TRUE(marker_req.has_value()) << marker_req.error().what();
    connection marker_server = must(marker_req->accept({.progress_thread = true}));
    connection marker = must(marker_client.get());
    for (int round = 0; round < 6; ++round) {
        server_conns.push_back(
            must(s.add({.progress_thread = true},
                       {.sq_size = 64, .rq_size = 4, .tag = 1u, .shared_cq = shared})));
        connection& c = s.clients.back();
        for (int i = 0; i < 64; ++i) {
            if (!c.write(dst, (i % 4) * chunk, lmr, (i % 4) * chunk, chunk, {.context = &c})) {
                break;
            }
        }
        std::atomic<bool> seen_marker{false};
        std::thread poller([&] {
            completion got[16];
            const auto until = std::chrono::steady_clock::now() + 20s;
            while (!seen_marker.load() && std::chrono::steady_clock::now() < until) {
                auto n = shared.queue().poll(got);
                for (std::size_t i = 0; n && i < *n; ++i) {
                    if (got[i].context == &marker) {
                        seen_marker = true;
                    }
                }
            }
        });
        s.clients.pop_back();  // destroyed with writes in flight, while the poller reads
        EXPECT_EQ(shared.reserved(), 8u);  // the marker's
        REMORA_ASSERT_OK(marker.write(marker_dst, 0, lmr, 0, 8, {.context = &marker}));
        poller.join();
        EXPECT_TRUE(seen_marker.load())
            << "round " << round << ": the marker never completed (in flight " << marker.in_flight()
            << ")";
    }
}

// Failed setups after a reservation give it back.
TEST_P(shared_cq_lifecycle_test, failed_setups_return_their_reservation) {
    auto s = server_side::open(GetParam());
    auto shared = must(shared_completion_queue::create(s.dom, {.size = 32}));
    auto small = must(shared_completion_queue::create(s.dom, {.size = 4}));
    auto r =
        s.add({.sq_size = 4, .rq_size = 8, .tag = 1, .shared_cq = shared, .shared_rcq = small});
    EXPECT_ERRC(r, errc::too_large);  // the shared RCQ of 4 cannot take 8 receives
    EXPECT_EQ(shared.reserved(), 0u);
    EXPECT_EQ(shared.connections(), 0u);
    auto client_shared = must(shared_completion_queue::create(s.client_dom, {.size = 32}));
    auto nobody = connection::connect(s.client_dom, "127.0.0.1", 1,
                                      {.sq_size = 4, .rq_size = 4, .shared_cq = client_shared});
    EXPECT_ERRC(nobody, errc::connection_refused);
    EXPECT_EQ(client_shared.reserved(), 0u);
}

// connection_config::progress_thread promises that the target service's requests are answered
// while the application sleeps: on a shared CQ that the progress thread does not read it could
// not be kept, so it is refused; on one it reads, it is kept.
TEST_P(shared_cq_lifecycle_test, progress_thread_needs_a_progress_read_shared_cq) {
    auto s = server_side::open(GetParam());
    auto plain = must(shared_completion_queue::create(s.dom, {.size = 64}));
    auto driven =
        must(shared_completion_queue::create(s.dom, {.size = 64, .progress_thread = true}));
    const std::string path =
        "/tmp/shared_cq_review_" + GetParam() + "_" + std::to_string(::getpid());
    auto region =
        must(persistent_region::open(s.dom, {.path = path, .size = 4096, .create = true}));
    auto svc = must(target_service::create());
    auto desc = must(svc.expose(region));
    auto refused = s.add({.sq_size = 4,
                          .progress_thread = true,
                          .shared_cq = plain,
                          .addons = {remora::persistence_config{.service_depth = 4}}},
                         {.addons = {remora::persistence_config{.service_depth = 4}}});
    ASSERT_ERRC(refused, errc::invalid_argument);
    EXPECT_EQ(plain.reserved(), 0u);
    auto server = s.add({.sq_size = 4,
                         .progress_thread = true,
                         .shared_cq = driven,
                         .addons = {remora::persistence_config{.service_depth = 4}}},
                        {.addons = {remora::persistence_config{.service_depth = 4}}});
    ASSERT_TRUE(server.has_value()) << server.error().what();
    REMORA_ASSERT_OK(svc.serve(*server));
    REMORA_ASSERT_OK(remora::flush(s.clients.back(), desc, 0, 8, {}));
    auto got = collect(s.clients.back().cq(), 1, true);  // the server application sleeps
    ASSERT_EQ(got.size(), 1u) << "the target service's request was not answered";
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    std::remove(path.c_str());
}

// completion_queue.hpp: one poller or waiter per CQ. connection::next_event() on a connection
// attached to a shared CQ must not drive or arm (fi_trywait) the shared CQ from its thread: that
// would reset the CQ's wait signal under the shared CQ's blocked waiter and lose its wake-up.
// A lost wake-up shows as a wait that sleeps through a ready completion to its timeout: each
// wait here has 10 s, and returns as soon as the message arrives when nothing is lost. (On
// sockets a shared CQ's wait wakes every liveness interval to read its connections' events, so
// a lost wake-up costs it at most that slice: only tcp can show one here.)
void waits_return_with_the_message(const std::string& provider, bool with_events);
TEST_P(shared_cq_lifecycle_test, next_event_does_not_steal_the_shared_cqs_wakeups) {
    {
        SCOPED_TRACE("control: no next_event thread");
        waits_return_with_the_message(GetParam(), false);
    }
    SCOPED_TRACE("next_event on another thread");
    waits_return_with_the_message(GetParam(), true);
}
void waits_return_with_the_message(const std::string& provider, bool with_events) {
    auto s = server_side::open(provider);
    auto shared = must(shared_completion_queue::create(s.dom, {.size = 64}));
    connection a = must(s.add({.sq_size = 4, .rq_size = 16, .tag = 1, .shared_cq = shared}));
    completion_queue& q = shared.queue();
    buffer inbox(64);
    auto in_mr = must(memory_region::create(s.dom, inbox.span(), usage::receive));
    buffer out(32);
    auto out_mr = must(memory_region::create(s.client_dom, out.span(), usage::send));
    std::atomic<bool> stop{false};
    std::thread events([&] {
        while (with_events && !stop.load()) {
            (void)a.next_event(0ms);  // per-connection code watching for a disconnect
        }
    });
    for (int i = 0; i < 40; ++i) {
        REMORA_ASSERT_OK(a.recv(in_mr, 0, 32, {.context = &inbox}));
        // The message is sent while the application is (most likely) blocked in wait().
        std::thread sender([&] {
            std::this_thread::sleep_for(5ms);
            if (s.clients[0].send(out_mr, 0, 16)) {
                (void)collect(s.clients[0].cq(), 1, false);
            }
        });
        std::size_t got = 0;
        completion c[4];
        bool lost = false;
        // wait() may return 0 (a no_completion wake-up): poll and wait again.
        while (got == 0) {
            auto w = q.wait(10s);
            if (!w) {
                EXPECT_ERRC(w, errc::timed_out);
                lost = true;
                break;
            }
            got = must(q.poll(c));
        }
        sender.join();
        if (lost) {
            ADD_FAILURE() << "round " << i << ": the wait slept 10 s through the message";
            break;
        }
        ASSERT_EQ(got, 1u) << "round " << i;
        EXPECT_EQ(c[0].op, op::recv);
        EXPECT_EQ(c[0].context, &inbox);
        EXPECT_EQ(c[0].tag, 1u);
    }
    stop = true;
    events.join();
}

INSTANTIATE_TEST_SUITE_P(providers, shared_cq_lifecycle_test, testing::ValuesIn(providers()),
                         provider_name);

}  // namespace
}  // namespace remora::test

// SPDX-License-Identifier: BSD-3-Clause
// Asynchronous connection setup (connection::connect_async, connection_request::accept_async):
// the outcome as a connection event and through a shared completion channel, the failures
// (nobody listening, rejected with private data, timed out), destruction and close during setup,
// receives kept from before establishment, other operations refused until then.
#include "support.hpp"

#include <dirent.h>
#include <poll.h>

#include <atomic>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <thread>

namespace remora::test {
namespace {

class async_connect : public testing::TestWithParam<std::string> {};

// Open file descriptors of this process (an endpoint, EQ or CQ holds some).
std::size_t open_fds() {
    std::size_t n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d) != nullptr) {
            ++n;
        }
        ::closedir(d);
    }
    return n;
}

// Waits on `ch` until `n` setup outcomes arrived (CQ wake-ups are skipped); tag -> outcome.
std::map<std::uint64_t, conn_event> setups(completion_channel& ch, std::size_t n,
                                           std::chrono::milliseconds limit = 20s) {
    std::map<std::uint64_t, conn_event> out;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
        auto e = ch.wait(std::chrono::ceil<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now()));
        if (!e) {
            ADD_FAILURE() << "channel wait: " << e.error().what();
            break;
        }
        if (e->setup) {
            EXPECT_EQ(e->cq, nullptr);
            EXPECT_TRUE(out.emplace(e->tag, *e->setup).second) << "tag " << e->tag << " twice";
        }
    }
    return out;
}

// One client thread sets up many connections at once through one channel; the server accepts
// them asynchronously on one channel of its own. Every one is established once, then carries a
// message both ways.
TEST_P(async_connect, many_connects_from_one_thread_through_a_channel) {
    constexpr std::size_t n = 24;
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    auto server_ch = must(completion_channel::create());
    std::vector<connection> accepted;
    std::map<std::uint64_t, conn_event> server_outcomes;
    std::thread server([&] {
        for (std::size_t i = 0; i < n; ++i) {
            auto req = lst.get_request(20s);
            if (!req) {
                ADD_FAILURE() << "get_request: " << req.error().what();
                return;
            }
            auto c = req->accept_async(
                {.channel = channel_mode::shared, .shared_channel = server_ch, .tag = 1000 + i});
            if (!c) {
                ADD_FAILURE() << "accept_async: " << c.error().what();
                return;
            }
            accepted.push_back(std::move(*c));
        }
        server_outcomes = setups(server_ch, n);
    });
    auto ch = must(completion_channel::create());
    std::vector<connection> conns;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < n; ++i) {
        conns.push_back(must(connection::connect_async(
            cd, "127.0.0.1", lst.port(),
            {.channel = channel_mode::shared, .shared_channel = ch, .tag = i})));
        EXPECT_TRUE(conns.back().is_connecting());
        EXPECT_FALSE(conns.back().is_open());
    }
    // connect_async returned at once for all of them: far less than one blocking setup each.
    auto outcomes = setups(ch, n);
    server.join();
    ASSERT_EQ(outcomes.size(), n);
    for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(outcomes[i], conn_event::established) << "connection " << i;
        EXPECT_TRUE(conns[i].is_open());
        EXPECT_FALSE(conns[i].is_connecting());
        EXPECT_TRUE(conns[i].setup_status().has_value());
        // next_event reports the same outcome once too.
        auto e = conns[i].next_event(0ms);
        ASSERT_TRUE(e.has_value()) << e.error().what();
        EXPECT_EQ(*e, conn_event::established);
        EXPECT_ERRC(conns[i].next_event(0ms), errc::timed_out);
    }
    ASSERT_EQ(server_outcomes.size(), n);
    for (const auto& [tag, e] : server_outcomes) {
        EXPECT_EQ(e, conn_event::established) << "server connection " << tag;
    }
    (void)t0;
    // Each connection carries a message: every server connection receives one client's index.
    buffer inbox(8 * n), outbox(8 * n);
    auto rmr = must(memory_region::create(sd, inbox.span(), usage::receive));
    auto smr = must(memory_region::create(cd, outbox.span(), usage::send));
    for (std::size_t j = 0; j < n; ++j) {
        REMORA_ASSERT_OK(accepted[j].recv(rmr, 8 * j, 8));
    }
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t v = i;
        std::memcpy(outbox.bytes.data() + 8 * i, &v, 8);
        REMORA_ASSERT_OK(conns[i].send(smr, 8 * i, 8));
    }
    std::set<std::uint64_t> seen;
    for (std::size_t j = 0; j < n; ++j) {
        auto got = collect(accepted[j].cq(), 1, false);
        ASSERT_EQ(got.size(), 1u) << "server connection " << j;
        EXPECT_TRUE(got[0].ok()) << got[0].status.message();
        std::uint64_t v = 0;
        std::memcpy(&v, inbox.bytes.data() + 8 * j, 8);
        seen.insert(v);
    }
    EXPECT_EQ(seen.size(), n);
    for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(collect(conns[i].cq(), 1, false).size(), 1u);
    }
}

// Nobody listens: the failure arrives as an event, with its error in setup_status().
TEST_P(async_connect, nobody_listening_is_an_error_event) {
    auto cd = must(domain::open({.provider = GetParam()}));
    auto started = connection::connect_async(cd, "127.0.0.1", 1, {.connect_timeout = 10s});
    if (!started) {
        // sockets refuses inside the connect call itself: the error comes back at once.
        EXPECT_EQ(GetParam(), "sockets");
        ASSERT_ERRC(started, errc::connection_refused);
        return;
    }
    auto& c = *started;
    auto e = c.next_event(15s);
    ASSERT_TRUE(e.has_value()) << e.error().what();
    // tcp and sockets both hear ECONNREFUSED at once on loopback.
    EXPECT_EQ(*e, conn_event::refused) << to_string(*e);
    EXPECT_ERRC(c.setup_status(), errc::connection_refused);
    EXPECT_FALSE(c.is_connecting());
    EXPECT_FALSE(c.is_open());
    EXPECT_ERRC(c.next_event(0ms), errc::timed_out);  // reported once
}

// A rejection carries the peer's private data; the channel reports it too.
TEST_P(async_connect, rejection_is_an_error_event_with_private_data) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    auto ch = must(completion_channel::create());
    auto c = must(connection::connect_async(
        cd, "127.0.0.1", lst.port(),
        {.channel = channel_mode::shared, .shared_channel = ch, .tag = 7}, bytes_of("let me in")));
    // tcp sends the request while the connection is looked at: the channel wait, here.
    auto waiter = std::async(std::launch::async, [&] { return setups(ch, 1); });
    auto req = must(lst.get_request(10s));
    EXPECT_EQ(string_of(req.private_data()), "let me in");
    REMORA_ASSERT_OK(req.reject(bytes_of("full: try port 4242")));
    auto outcomes = waiter.get();
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[7], conn_event::rejected);
    auto e = c.next_event(0ms);
    ASSERT_TRUE(e.has_value()) << e.error().what();
    EXPECT_EQ(*e, conn_event::rejected);
    auto st = c.setup_status();
    ASSERT_ERRC(st, errc::rejected);
    EXPECT_EQ(string_of(st.error().data()), "full: try port 4242");
}

// A listener that never answers: the deadline ends the setup (errc::timed_out, event
// unreachable), noticed by a channel wait although no fd fires, and by next_event.
TEST_P(async_connect, unanswered_request_times_out) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    auto ch = must(completion_channel::create());
    const auto t0 = std::chrono::steady_clock::now();
    auto a = must(connection::connect_async(cd, "127.0.0.1", lst.port(),
                                            {.channel = channel_mode::shared,
                                             .shared_channel = ch,
                                             .connect_timeout = 300ms,
                                             .tag = 1}));
    auto b =
        must(connection::connect_async(cd, "127.0.0.1", lst.port(), {.connect_timeout = 300ms}));
    EXPECT_GE(a.setup_deadline(), t0 + 300ms);
    auto wa = std::async(std::launch::async, [&] { return setups(ch, 1, 10s); });
    auto wb = std::async(std::launch::async, [&] { return b.next_event(10s); });
    auto ra = must(lst.get_request(10s));  // kept unanswered
    auto rb = must(lst.get_request(10s));
    auto outcomes = wa.get();
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[1], conn_event::unreachable);
    EXPECT_GE(std::chrono::steady_clock::now(), t0 + 300ms);  // never before the deadline
    EXPECT_ERRC(a.setup_status(), errc::timed_out);
    auto e = wb.get();
    ASSERT_TRUE(e.has_value()) << e.error().what();
    EXPECT_EQ(*e, conn_event::unreachable);
    EXPECT_ERRC(b.setup_status(), errc::timed_out);
    EXPECT_FALSE(b.is_open());
    EXPECT_LT(std::chrono::steady_clock::now(), t0 + 5s);
}

// Destroying or closing a connection being set up: at once, no descriptor left behind, the
// receives posted early come back, and the listener keeps serving.
TEST_P(async_connect, destroy_and_close_while_connecting) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    buffer inbox(64);
    auto rmr = must(memory_region::create(cd, inbox.span(), usage::receive));
    const std::size_t before = open_fds();
    const auto t0 = std::chrono::steady_clock::now();
    for (int round = 0; round < 20; ++round) {
        auto c = must(connection::connect_async(cd, "127.0.0.1", lst.port()));
        REMORA_ASSERT_OK(c.recv(rmr, 0, 64));
        if (round % 2 == 1) {
            REMORA_ASSERT_OK(c.close());
            EXPECT_FALSE(c.is_connecting());
            auto e = c.next_event(0ms);
            ASSERT_TRUE(e.has_value()) << e.error().what();
            EXPECT_EQ(*e, conn_event::closed);
            EXPECT_ERRC(c.setup_status(), errc::canceled);
            EXPECT_ERRC(c.send(rmr, 0, 8), errc::disconnected);
        }
    }  // destroyed while connecting (or closed)
    // The requests that reached the listener are dropped (rejected) by their destructors.
    while (true) {
        auto r = lst.get_request(200ms);
        if (!r) {
            break;
        }
    }
    EXPECT_LT(std::chrono::steady_clock::now(), t0 + 10s);
    EXPECT_LE(open_fds(), before + 2) << "descriptors leaked by destroyed setups";
    // The listener still serves a normal connection.
    auto client = std::async(std::launch::async,
                             [&] { return connection::connect(cd, "127.0.0.1", lst.port()); });
    auto req = request_while_connecting(lst, client);
    ASSERT_TRUE(req.has_value()) << req.error().what();
    auto s = req->accept();
    REMORA_ASSERT_OK(s);
    REMORA_ASSERT_OK(client.get());
}

// Receives posted before establishment are kept and take the first messages, on both sides
// (rpma_conn_req_recv); other operations are refused until established.
TEST_P(async_connect, receives_posted_early_get_the_first_messages) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    buffer cin(64), sin(64), cout(64), sout(64);
    auto crmr = must(memory_region::create(cd, cin.span(), usage::receive));
    auto csmr = must(memory_region::create(cd, cout.span(), usage::send));
    auto srmr = must(memory_region::create(sd, sin.span(), usage::receive));
    auto ssmr = must(memory_region::create(sd, sout.span(), usage::send));
    std::memcpy(sout.bytes.data(), "hello from the server", 21);
    std::memcpy(cout.bytes.data(), "hello from the client", 21);

    auto c = must(connection::connect_async(cd, "127.0.0.1", lst.port()));
    REMORA_ASSERT_OK(c.recv(crmr, 0, 64, {.context = &cin}));
    EXPECT_EQ(c.in_flight(), 1u);
    EXPECT_ERRC(c.send(csmr, 0, 21), errc::bad_state);  // not established: refused, nothing taken
    EXPECT_EQ(c.in_flight(), 1u);
    // The client is driven the way an application with its own epoll does it: block on
    // event_fd() (bounded by the setup deadline), then next_event(0ms).
    auto client_setup = std::async(std::launch::async, [&]() -> result<conn_event> {
        for (;;) {
            pollfd p{c.event_fd(), POLLIN, 0};
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(
                c.setup_deadline() - std::chrono::steady_clock::now());
            ::poll(&p, 1, static_cast<int>(std::max<long>(left.count(), 0)));
            auto e = c.next_event(0ms);
            if (e || !(e.error() == errc::timed_out) ||
                std::chrono::steady_clock::now() > c.setup_deadline() + 1s) {
                return e;
            }
        }
    });
    auto req = must(lst.get_request(10s));
    auto s = must(req.accept_async());
    REMORA_ASSERT_OK(s.recv(srmr, 0, 64, {.context = &sin}));
    // The server's first message goes out the moment it is established, before the client
    // necessarily looked at its own events.
    auto se = s.next_event(10s);
    ASSERT_TRUE(se.has_value()) << se.error().what();
    ASSERT_EQ(*se, conn_event::established);
    REMORA_ASSERT_OK(s.send(ssmr, 0, 21));
    auto ce = client_setup.get();
    ASSERT_TRUE(ce.has_value()) << ce.error().what();
    ASSERT_EQ(*ce, conn_event::established);
    REMORA_ASSERT_OK(c.send(csmr, 0, 21));
    auto cgot = collect(c.cq(), 2, false);
    ASSERT_EQ(cgot.size(), 2u);
    auto sgot = collect(s.cq(), 2, false);
    ASSERT_EQ(sgot.size(), 2u);
    for (const auto& got : {cgot, sgot}) {
        for (const auto& x : got) {
            EXPECT_TRUE(x.ok()) << x.status.message();
            if (x.op == op::recv) {
                EXPECT_EQ(x.bytes, 21u);
            }
        }
    }
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(cin.bytes.data()), 21),
              "hello from the server");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(sin.bytes.data()), 21),
              "hello from the client");
}

std::atomic<int> queued_reports{0};
std::error_code queued_status;
void on_queued_send(const completion& c) {
    queued_status = c.status;
    ++queued_reports;
}

// Parked posts (park_until, blocking or park_mode::queue) made while the setup is under way wait
// for it, having taken nothing, and go once it is established; a post that does not park is
// still refused (bad_state).
TEST_P(async_connect, parked_posts_wait_for_establishment) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    buffer sin(128), cout(64);
    auto srmr = must(memory_region::create(sd, sin.span(), usage::receive));
    auto csmr = must(memory_region::create(cd, cout.span(), usage::send));
    std::memcpy(cout.bytes.data(), "parked-1queued-2", 16);
    queued_reports = 0;

    auto c = must(connection::connect_async(cd, "127.0.0.1", lst.port()));
    int blocking_ctx = 0;
    auto blocking = std::async(std::launch::async, [&] {
        return c.send(
            csmr, 0, 8,
            {.context = &blocking_ctx, .park_until = std::chrono::steady_clock::now() + 20s});
    });
    ASSERT_TRUE(eventually([&] { return c.parked() == 1; }));
    REMORA_ASSERT_OK(c.send(csmr, 8, 8,
                            {.callback = on_queued_send,
                             .park_until = std::chrono::steady_clock::now() + 20s,
                             .park = park_mode::queue}));
    EXPECT_EQ(c.parked(), 2u);
    EXPECT_EQ(c.in_flight(), 0u) << "a post parked for the setup took entries";
    EXPECT_ERRC(c.send(csmr, 0, 8), errc::bad_state);  // not parked: refused as before
    EXPECT_EQ(queued_reports.load(), 0);

    auto client_setup = std::async(std::launch::async, [&] { return c.next_event(10s); });
    auto req = must(lst.get_request(10s));
    auto s = must(req.accept_async());
    REMORA_ASSERT_OK(s.recv(srmr, 0, 64));
    REMORA_ASSERT_OK(s.recv(srmr, 64, 64));
    auto se = s.next_event(10s);
    ASSERT_TRUE(se.has_value()) << se.error().what();
    ASSERT_EQ(*se, conn_event::established);
    auto ce = client_setup.get();
    ASSERT_TRUE(ce.has_value()) << ce.error().what();
    ASSERT_EQ(*ce, conn_event::established);
    REMORA_ASSERT_OK(blocking.get());
    // Both are posted now: the blocking one reports through poll, the queued one its callback.
    std::vector<completion> got;
    EXPECT_TRUE(eventually([&] {
        completion buf[4];
        if (auto n = c.cq().poll(buf); n)
            got.insert(got.end(), buf, buf + *n);
        return got.size() == 1 && queued_reports.load() == 1;
    }));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(got[0].context, &blocking_ctx);
    EXPECT_FALSE(queued_status) << queued_status.message();
    auto sgot = collect(s.cq(), 2, false);
    ASSERT_EQ(sgot.size(), 2u);
    std::string arrived(reinterpret_cast<const char*>(sin.bytes.data()), 8);
    arrived += std::string(reinterpret_cast<const char*>(sin.bytes.data() + 64), 8);
    EXPECT_TRUE(arrived == "parked-1queued-2" || arrived == "queued-2parked-1") << arrived;
    EXPECT_EQ(c.parked(), 0u);
}

// A setup that fails ends the posts parked for it with its error, once, having taken nothing:
// the blocking one returns it, the queued one's callback gets it. close() during the setup
// ends them with canceled.
TEST_P(async_connect, parked_posts_end_with_the_setup_error) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    buffer cout(64);
    auto csmr = must(memory_region::create(cd, cout.span(), usage::send));
    for (int round = 0; round < 2; ++round) {
        const bool reject = round == 0;
        SCOPED_TRACE(reject ? "rejected" : "closed");
        queued_reports = 0;
        queued_status = {};
        auto c = must(connection::connect_async(cd, "127.0.0.1", lst.port()));
        auto blocking = std::async(std::launch::async, [&] {
            return c.send(csmr, 0, 8, {.park_until = std::chrono::steady_clock::now() + 20s});
        });
        ASSERT_TRUE(eventually([&] { return c.parked() == 1; }));
        REMORA_ASSERT_OK(c.send(csmr, 0, 8,
                                {.callback = on_queued_send,
                                 .park_until = std::chrono::steady_clock::now() + 20s,
                                 .park = park_mode::queue}));
        ASSERT_EQ(c.parked(), 2u);
        const errc want = reject ? errc::rejected : errc::canceled;
        if (reject) {
            auto client_setup = std::async(std::launch::async, [&] { return c.next_event(10s); });
            auto req = must(lst.get_request(10s));
            REMORA_ASSERT_OK(req.reject());
            auto ce = client_setup.get();
            ASSERT_TRUE(ce.has_value()) << ce.error().what();
            EXPECT_EQ(*ce, conn_event::rejected);
        } else {
            REMORA_ASSERT_OK(c.close());
        }
        EXPECT_ERRC(blocking.get(), want);
        ASSERT_TRUE(eventually([&] { return queued_reports.load() == 1; }));
        EXPECT_EQ(queued_status, make_error_code(want)) << queued_status.message();
        EXPECT_EQ(c.parked(), 0u);
        EXPECT_EQ(c.in_flight(), 0u);
        if (!reject) {
            while (lst.get_request(200ms)) {
            }
        }
    }
    EXPECT_EQ(queued_reports.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(providers, async_connect, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

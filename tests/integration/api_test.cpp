// SPDX-License-Identifier: BSD-3-Clause
// Public API no other test calls, each held to its header's contract on tcp and sockets:
// connection::event_fd() and listener::fd() readiness, receive_pool immediate data and FIFO
// fairness, multi-segment write_with_imm / send_with_imm / recv, target_service::expose on
// plain registered memory, automatic provider choice, co_op over send and recv, and the
// registration cache under concurrent use.
#include <poll.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "support.hpp"

namespace remora::test {
namespace {

// Whether `fd` is readable within `timeout` (0: right now).
bool readable(int fd, std::chrono::milliseconds timeout) {
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    return n == 1 && (p.revents & POLLIN) != 0;
}

std::string fill(std::size_t n, char first) {
    std::string s(n, ' ');
    for (std::size_t i = 0; i < n; ++i)
        s[i] = static_cast<char>(first + i % 26);
    return s;
}

void put(buffer& b, std::size_t offset, const std::string& s) {
    std::memcpy(b.bytes.data() + offset, s.data(), s.size());
}
std::string at(const buffer& b, std::size_t offset, std::size_t n) {
    return {reinterpret_cast<const char*>(b.bytes.data()) + offset, n};
}

// ============================================================ event fds

class event_fds : public testing::TestWithParam<std::string> {};

// listener.hpp: fd() is "readable when a request may be waiting". Not before anyone connects;
// readable once a client connects, and the request is then taken by get_request(0ms), which
// never blocks, each time the fd fires (a wake-up may come before the request is complete).
TEST_P(event_fds, listener_fd_is_readable_when_a_request_is_pending) {
    auto sd = must(domain::open({.provider = GetParam()}));
    auto cd = must(domain::open({.provider = GetParam()}));
    auto lst = must(listener::create(sd, "127.0.0.1", 0));
    ASSERT_GE(lst.fd(), 0);
    EXPECT_FALSE(readable(lst.fd(), 0ms)) << "readable before any client connected";
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(cd, "127.0.0.1", lst.port(), {}, bytes_of("hi"));
    });
    std::optional<connection_request> req;
    while (!req) {
        ASSERT_TRUE(readable(lst.fd(), 10s)) << "a client connects, the listener's fd never fires";
        auto r = lst.get_request(0ms);
        if (r) {
            req.emplace(std::move(*r));
        } else {
            ASSERT_ERRC(r, errc::timed_out);
        }
    }
    EXPECT_EQ(string_of(req->private_data()), "hi");
    REMORA_ASSERT_OK(req->accept());
    REMORA_ASSERT_OK(client.get());
}

// Whether the connection's event fd is quiet now, and next_event(0ms) agrees.
void expect_no_event(connection& c) {
    EXPECT_FALSE(readable(c.event_fd(), 0ms)) << "event fd readable with no event pending";
    EXPECT_ERRC(c.next_event(0ms), errc::timed_out);
    EXPECT_FALSE(readable(c.event_fd(), 0ms)) << "event fd readable after next_event found none";
}

// connection.hpp: event_fd() is readable when a connection event is pending: not on a freshly
// established connection (neither side), nor after next_event() found none.
TEST_P(event_fds, connection_event_fd_is_quiet_while_no_event_is_pending) {
    auto p = must(connect_pair(GetParam()));
    ASSERT_GE(p.client->event_fd(), 0);
    ASSERT_GE(p.server->event_fd(), 0);
    expect_no_event(*p.client);
    expect_no_event(*p.server);
}

// connection.hpp: with the library's progress thread driving the connection, event_fd() fires
// when the peer closes, and next_event(0ms) then returns conn_event::closed at once.
TEST_P(event_fds, connection_event_fd_fires_when_the_peer_closes) {
    auto p = must(connect_pair(GetParam(), {}, {.progress_thread = true}));
    expect_no_event(*p.client);
    REMORA_ASSERT_OK(p.server->close());
    ASSERT_TRUE(readable(p.client->event_fd(), 10s)) << "the peer closed, the fd never fired";
    auto ev = p.client->next_event(0ms);
    ASSERT_TRUE(ev.has_value()) << "fd fired but no event was ready: " << ev.error().what();
    EXPECT_EQ(*ev, conn_event::closed);
}

// connection.hpp: an application that drives the connection itself blocks on event_fd() and its
// CQ's fd (armed, completion_queue.hpp) together; when the peer closes, event_fd() fires and
// next_event(0ms) returns conn_event::closed at once.
TEST_P(event_fds, connection_event_fd_fires_beside_an_armed_cq_when_the_peer_closes) {
    auto p = must(connect_pair(GetParam()));
    expect_no_event(*p.client);
    REMORA_ASSERT_OK(p.server->close());
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    for (;;) {
        ASSERT_TRUE(std::chrono::steady_clock::now() < deadline) << "no event within 10 s";
        auto armed = p.client->cq().arm();
        REMORA_ASSERT_OK(armed);
        pollfd fds[2] = {{p.client->event_fd(), POLLIN, 0},
                         {*armed ? p.client->cq().fd() : -1, POLLIN, 0}};
        const int n = ::poll(fds, 2, *armed ? 10000 : 0);
        ASSERT_GE(n, 0);
        if (fds[0].revents & POLLIN) {
            auto ev = p.client->next_event(0ms);
            ASSERT_TRUE(ev.has_value()) << "fd fired but no event was ready: " << ev.error().what();
            EXPECT_EQ(*ev, conn_event::closed);
            break;
        }
        completion buf[4];
        EXPECT_EQ(must(p.client->cq().poll(buf)), 0u);  // nothing was posted
    }
}

INSTANTIATE_TEST_SUITE_P(providers, event_fds, testing::ValuesIn(providers()), provider_name);

// ============================================================ receive_pool

class pool_api : public testing::TestWithParam<std::string> {};

// The next message from `pool`, driving the connections the documented way without a progress
// thread: poll each connection's CQ (the pool's completions do not appear there), then
// next(0ms). next(0ms) never moves receives between connections, so the order is the pool's.
result<message> next_driven(receive_pool& pool, const std::vector<connection*>& conns,
                            std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        for (connection* c : conns) {
            completion buf[4];
            auto n = c->cq().poll(buf);
            EXPECT_TRUE(n.has_value() && *n == 0) << "the pool's completion reached the CQ";
        }
        auto m = pool.next(0ms);
        if (m || !(m.error() == errc::timed_out) || std::chrono::steady_clock::now() > deadline)
            return m;
        std::this_thread::yield();
    }
}

// receive_pool.hpp: a message carries its sender's immediate data (imm(), has_imm()) and the
// connection's tag; a plain send has none.
TEST_P(pool_api, message_carries_the_senders_immediate_data) {
    auto p = must(connect_pair(GetParam(), {.rq_size = 4, .progress_thread = true, .tag = 77}));
    const std::uint64_t imm =
        p.client->dom().caps().cq_data_size >= 8 ? 0x0123456789abcdefull : 0x89abcdefull;
    auto pool = must(receive_pool::create(p.server_domain,
                                          {.buffers = 4, .buffer_size = 64, .per_connection = 2}));
    REMORA_ASSERT_OK(pool.attach(*p.server));
    buffer out(64);
    put(out, 0, "with-imm");
    put(out, 8, "plain");
    auto mr = must(memory_region::create(p.client_domain, out.span(), usage::send));
    REMORA_ASSERT_OK(p.client->send_with_imm(mr, 0, 8, imm));
    REMORA_ASSERT_OK(p.client->send(mr, 8, 5));
    auto first = pool.next(10s);
    REMORA_ASSERT_OK(first);
    EXPECT_EQ(string_of(first->data()), "with-imm");
    EXPECT_TRUE(first->has_imm());
    EXPECT_EQ(first->imm(), imm);
    EXPECT_EQ(first->tag(), 77u);
    auto second = pool.next(10s);
    REMORA_ASSERT_OK(second);
    EXPECT_EQ(string_of(second->data()), "plain");
    EXPECT_FALSE(second->has_imm());
    EXPECT_EQ(second->imm(), 0u);
    EXPECT_EQ(collect(p.client->cq(), 2, true).size(), 2u);
}

// receive_pool.hpp: a released slot is posted again on the connection that has waited longest
// for one (FIFO, round-robin). With one slot and three connections that each sent two messages
// up front, the messages come in the order the connections joined the line, round after round,
// whatever order the clients sent in.
TEST_P(pool_api, released_slot_goes_to_the_connection_waiting_longest) {
    auto s = server_side::open(GetParam());
    std::vector<connection> servers;
    for (std::uint64_t tag = 1; tag <= 3; ++tag)
        servers.push_back(must(s.add({.rq_size = 2, .tag = tag})));
    auto pool =
        must(receive_pool::create(s.dom, {.buffers = 1, .buffer_size = 64, .per_connection = 1}));
    for (auto& c : servers)
        REMORA_ASSERT_OK(pool.attach(c));  // joins the line: 1 (posted), 2, 3 (owed)
    EXPECT_EQ(pool.stats().posted, 1u);
    EXPECT_EQ(pool.stats().owed, 2u);
    buffer out(64);
    std::vector<memory_region> mrs;
    for (auto& c : s.clients)
        mrs.push_back(must(memory_region::create(c.dom(), out.span(), usage::send)));
    // Sent last to first, second round before the first round is read.
    const char* names = "abc";
    for (int round = 0; round < 2; ++round) {
        for (int i = 2; i >= 0; --i) {
            const std::size_t off = static_cast<std::size_t>(round * 3 + i) * 2;
            put(out, off, std::string{names[i], static_cast<char>('0' + round)});
            REMORA_ASSERT_OK(s.clients[i].send(mrs[i], off, 2));
        }
    }
    std::vector<connection*> conns;
    for (auto& c : servers)
        conns.push_back(&c);
    std::vector<std::string> got;
    std::vector<std::uint64_t> tags;
    for (int k = 0; k < 6; ++k) {
        auto m = next_driven(pool, conns);
        ASSERT_TRUE(m.has_value()) << "message " << k << ": " << m.error().what();
        EXPECT_LE(pool.stats().posted, 1u);
        got.push_back(string_of(m->data()));
        tags.push_back(m->tag());
        m->release();  // the slot goes to the next connection in line
    }
    EXPECT_EQ(tags, (std::vector<std::uint64_t>{1, 2, 3, 1, 2, 3}));
    EXPECT_EQ(got, (std::vector<std::string>{"a0", "b0", "c0", "a1", "b1", "c1"}));
    for (auto& c : s.clients)
        EXPECT_EQ(collect(c.cq(), 2, true).size(), 2u);
}

// receive_pool.hpp: never more than per_connection receives posted on one connection, however
// many slots are free.
TEST_P(pool_api, never_posts_more_than_per_connection_on_one_connection) {
    auto p = must(connect_pair(GetParam(), {.rq_size = 8, .progress_thread = true}));
    auto pool = must(receive_pool::create(p.server_domain,
                                          {.buffers = 8, .buffer_size = 64, .per_connection = 3}));
    REMORA_ASSERT_OK(pool.attach(*p.server));
    EXPECT_EQ(pool.stats().posted, 3u);
    EXPECT_EQ(pool.stats().owed, 0u);
    buffer out(64);
    auto mr = must(memory_region::create(p.client_domain, out.span(), usage::send));
    put(out, 0, "x");
    REMORA_ASSERT_OK(p.client->send(mr, 0, 1));
    auto m = pool.next(10s);
    REMORA_ASSERT_OK(m);
    // The message's slot is held and the connection owed one in its place (posted when the
    // pool's reader gets to it): never more than per_connection between them.
    auto st = pool.stats();
    EXPECT_EQ(st.held, 1u);
    EXPECT_EQ(st.posted + st.owed, 3u);
    m->release();  // posts what the connection is owed, at most per_connection
    st = pool.stats();
    EXPECT_EQ(st.posted, 3u);
    EXPECT_EQ(st.owed, 0u);
    EXPECT_EQ(st.held, 0u);
}

// receive_pool.hpp: destroying the pool detaches its connections. Their receives are canceled
// and come back as the progress thread reads them (the pool's memory lives until then), and the
// connection goes on working with receives of its own.
TEST_P(pool_api, destroying_the_pool_first_detaches_its_connections) {
    auto p = must(connect_pair(GetParam(), {.rq_size = 8, .progress_thread = true}));
    {
        auto pool = must(receive_pool::create(
            p.server_domain, {.buffers = 8, .buffer_size = 64, .per_connection = 3}));
        REMORA_ASSERT_OK(pool.attach(*p.server));
        EXPECT_EQ(pool.stats().posted, 3u);
        EXPECT_EQ(p.server->in_flight(), 3u);
    }
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (p.server->in_flight() != 0 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(1ms);  // paces the check; the bound is the assertion's
    }
    ASSERT_EQ(p.server->in_flight(), 0u) << "the pool's canceled receives never came back";
    buffer in(64), out(64);
    auto imr = must(memory_region::create(p.server_domain, in.span(), usage::receive));
    auto omr = must(memory_region::create(p.client_domain, out.span(), usage::send));
    int ctx = 0;
    REMORA_ASSERT_OK(p.server->recv(imr, 0, 64, {.context = &ctx}));
    put(out, 0, "after");
    REMORA_ASSERT_OK(p.client->send(omr, 0, 5));
    auto c = p.server->cq().next(10s);
    REMORA_ASSERT_OK(c);
    EXPECT_EQ(c->context, &ctx);
    EXPECT_EQ(c->bytes, 5u);
    EXPECT_EQ(at(in, 0, 5), "after");
}

INSTANTIATE_TEST_SUITE_P(providers, pool_api, testing::ValuesIn(providers()), provider_name);

// ============================================================ multi-segment operations

class segments : public testing::TestWithParam<std::string> {
  protected:
    std::uint32_t sge() const {
        auto d = must(domain::open({.provider = GetParam()}));
        return static_cast<std::uint32_t>(std::min<std::size_t>(d.caps().iov_limit, 3));
    }
};

// Three pieces of `local` at scattered offsets, lengths 5, 11 and 40; `expect` is their bytes
// in order.
std::vector<local_segment> three_pieces(buffer& local, const memory_region& mr,
                                        std::string& expect) {
    const std::size_t offs[] = {300, 17, 1000}, lens[] = {5, 11, 40};
    std::vector<local_segment> segs;
    for (int i = 0; i < 3; ++i) {
        const std::string piece = fill(lens[i], static_cast<char>('A' + 10 * i));
        put(local, offs[i], piece);
        expect += piece;
        segs.push_back({&mr, offs[i], lens[i]});
    }
    return segs;
}

// connection.hpp: write_with_imm from several local segments places their bytes, in order,
// contiguously at the destination, and the peer's op::remote_write completion carries `imm` and
// (completion_queue.hpp) what the provider reports in bytes: the write's length on sockets and
// on the same-host path (shm reports it), 0 on tcp 1.17.
TEST_P(segments, write_with_imm_gathers_segments_in_order) {
    const auto n = sge();
    ASSERT_EQ(n, 3u);
    buffer target(4096), local(4096);
    std::memset(target.bytes.data(), '.', target.bytes.size());
    auto p = must(connect_pair(GetParam(), {}, {.max_sge = n}));
    auto tmr = must(memory_region::create(p.server_domain, target.span(),
                                          usage::write_destination | usage::receive));
    auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::write_source));
    std::string expect;
    auto segs = three_pieces(local, lmr, expect);
    REMORA_ASSERT_OK(p.server->recv(tmr, 3000, 64));  // for providers that consume one
    REMORA_ASSERT_OK(p.client->write_with_imm(must(tmr.describe()), 128, segs, 0xabcdef));
    auto w = collect(p.client->cq(), 1, true);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].op, op::write);
    EXPECT_TRUE(w[0].ok()) << w[0].status.message();
    auto got = collect(p.server->cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(got[0].op, op::remote_write);
    EXPECT_TRUE(got[0].has_imm);
    EXPECT_EQ(got[0].imm, 0xabcdefu);
    EXPECT_EQ(got[0].bytes, GetParam() == "sockets" || p.server->same_host() ? expect.size() : 0u);
    EXPECT_EQ(at(target, 128, expect.size()), expect);
    EXPECT_EQ(at(target, 127, 1), ".");
    EXPECT_EQ(at(target, 128 + expect.size(), 1), ".");
}

// connection.hpp: send_with_imm from several local segments arrives as one message: the
// receive's completion has bytes = the total, the immediate data, and the bytes in order.
TEST_P(segments, send_with_imm_gathers_segments_into_one_message) {
    const auto n = sge();
    ASSERT_EQ(n, 3u);
    buffer in(4096), local(4096);
    auto p = must(connect_pair(GetParam(), {}, {.max_sge = n}));
    auto imr = must(memory_region::create(p.server_domain, in.span(), usage::receive));
    auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::send));
    std::string expect;
    auto segs = three_pieces(local, lmr, expect);
    REMORA_ASSERT_OK(p.server->recv(imr, 64, 512));
    REMORA_ASSERT_OK(p.client->send_with_imm(segs, 0x5151));
    auto got = collect(p.server->cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(got[0].op, op::recv);
    EXPECT_EQ(got[0].bytes, expect.size());
    EXPECT_TRUE(got[0].has_imm);
    EXPECT_EQ(got[0].imm, 0x5151u);
    EXPECT_EQ(at(in, 64, expect.size()), expect);
    auto s = collect(p.client->cq(), 1, true);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].op, op::send);
    EXPECT_TRUE(s[0].ok());
}

// connection.hpp: recv into several local segments scatters one message across them in order,
// filling each before the next; the completion's bytes is the message's total length.
TEST_P(segments, recv_scatters_one_message_across_segments_in_order) {
    const auto n = sge();
    ASSERT_EQ(n, 3u);
    buffer in(4096), out(4096);
    std::memset(in.bytes.data(), '.', in.bytes.size());
    auto p = must(connect_pair(GetParam(), {.max_sge = n}, {}));
    auto imr = must(memory_region::create(p.server_domain, in.span(), usage::receive));
    auto omr = must(memory_region::create(p.client_domain, out.span(), usage::send));
    const std::string msg = fill(5 + 7 + 20, 'a');
    put(out, 0, msg);
    const std::vector<local_segment> segs{{&imr, 2000, 5}, {&imr, 100, 7}, {&imr, 3000, 64}};
    REMORA_ASSERT_OK(p.server->recv(segs));
    REMORA_ASSERT_OK(p.client->send(omr, 0, msg.size()));
    auto got = collect(p.server->cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(got[0].op, op::recv);
    EXPECT_EQ(got[0].bytes, msg.size());
    EXPECT_EQ(at(in, 2000, 5), msg.substr(0, 5));
    EXPECT_EQ(at(in, 100, 7), msg.substr(5, 7));
    EXPECT_EQ(at(in, 3000, 20), msg.substr(12));
    EXPECT_EQ(at(in, 3020, 1), ".");
    EXPECT_EQ(collect(p.client->cq(), 1, true).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(providers, segments, testing::ValuesIn(providers()), provider_name);

// ============================================================
// target_service::expose(memory_region)

class expose_plain : public testing::TestWithParam<std::string> {
  protected:
    static constexpr usage all_remote =
        usage::write_destination | usage::read_source | usage::atomic_target | usage::flush_target;

    // A target serving `region_uses` memory through a target_service, and a client of it.
    void open(usage region_uses) {
        pair_ = must(connect_pair(
            GetParam(),
            {.progress_thread = true, .addons = {remora::persistence_config{.service_depth = 4}}},
            {.addons = {remora::persistence_config{.service_depth = 4}}}));
        region_.emplace(
            must(memory_region::create(pair_->server_domain, target_.span(), region_uses)));
        desc_ = must(service_.expose(*region_));
        REMORA_ASSERT_OK(service_.serve(*pair_->server));
    }
    connection& client() { return *pair_->client; }
    // The client's one completion (flushes and service atomics complete on its CQ).
    completion one() {
        auto got = collect(client().cq(), 1, true);
        EXPECT_EQ(got.size(), 1u);
        return got.empty() ? completion{} : got[0];
    }
    // A descriptor of the same memory granting `uses` the target never registered, and
    // optionally a length beyond the region: what a buggy or hostile client could send (with
    // the region's same-host address, as a descriptor from the wire carries it: a same-host
    // connection reaches nothing without one).
    remote_region forged(usage uses, std::uint64_t length = 0) const {
        auto d =
            must(remote_region::make(desc_.address(), length ? length : desc_.length(), desc_.key(),
                                     uses, desc_.virtual_addressing(), desc_.same_host_address()));
        return d;
    }

    buffer target_{4096};
    target_service service_ = must(target_service::create());
    std::optional<connected_pair> pair_;
    std::optional<memory_region> region_;
    remote_region desc_;
};

// target_service.hpp: expose(memory_region) returns the region's descriptor (no persistence
// claim) and serves visibility flushes (GPSPM) and, where the provider has no native atomics,
// service atomics on it.
TEST_P(expose_plain, serves_visibility_flushes_and_atomics_it_grants) {
    open(all_remote);
    EXPECT_EQ(desc_, must(region_->describe()));
    EXPECT_EQ(desc_.persistence(), persistence::none);
    buffer local(64);
    auto lmr = must(memory_region::create(pair_->client_domain, local.span(),
                                          usage::write_source | usage::read_destination));
    put(local, 0, "visible!");
    REMORA_ASSERT_OK(client().write(desc_, 256, lmr, 0, 8));
    ASSERT_TRUE(one().ok());
    REMORA_ASSERT_OK(remora::flush(
        client(), desc_, 256, 8, {.type = flush_type::visibility, .method = flush_method::gpspm}));
    auto f = one();
    EXPECT_EQ(f.op, op::flush);
    EXPECT_TRUE(f.ok()) << f.status.message();
    EXPECT_EQ(at(target_, 256, 8), "visible!");  // the service answered after placing them
    EXPECT_EQ(service_.requests(), 1u);
    EXPECT_EQ(service_.refused(), 0u);
    // fetch_add: through the service on tcp, native on sockets; either way it lands.
    std::uint64_t word = 40;
    std::memcpy(target_.bytes.data() + 512, &word, 8);
    REMORA_ASSERT_OK(remora::fetch_add(client(), desc_, 512, 2, lmr, 16));
    auto a = one();
    EXPECT_EQ(a.op, op::atomic);
    EXPECT_TRUE(a.ok()) << a.status.message();
    std::uint64_t old = 0;
    std::memcpy(&old, local.bytes.data() + 16, 8);
    EXPECT_EQ(old, 40u);
    std::memcpy(&word, target_.bytes.data() + 512, 8);
    EXPECT_EQ(word, 42u);
    EXPECT_EQ(service_.requests(), remora::atomics(client()) == atomic_path::service ? 2u : 1u);
}

// target_service.hpp: plain memory offers visibility only: a persistence flush is refused by the
// client (its descriptor claims no persistence) and, forged, by the service: not_supported.
TEST_P(expose_plain, refuses_persistence_with_not_supported) {
    open(all_remote);
    EXPECT_ERRC(remora::flush(client(), desc_, 0, 8, {.type = flush_type::persistence}),
                errc::not_supported);
    auto claims = must(desc_.with_persistence(persistence::persistent | persistence::gpspm));
    REMORA_ASSERT_OK(remora::flush(client(), claims, 0, 8, {.type = flush_type::persistence}));
    auto f = one();
    EXPECT_EQ(f.op, op::flush);
    EXPECT_EQ(f.status, make_error_code(errc::not_supported)) << f.status.message();
    EXPECT_EQ(service_.refused(), 1u);
}

// connection.hpp: the default flush_type (strongest) is visibility on plain memory, so the obvious
// flush(desc, offset, n) is not refused; on a descriptor stating persistence it is persistence,
// never silently weakened: here the claim is forged, and the service refuses to persist memory.
TEST_P(expose_plain, default_flush_is_the_strongest_the_descriptor_offers) {
    open(all_remote);
    buffer local(64);
    auto lmr = must(memory_region::create(pair_->client_domain, local.span(), usage::write_source));
    put(local, 0, "default!");
    REMORA_ASSERT_OK(client().write(desc_, 128, lmr, 0, 8));
    ASSERT_TRUE(one().ok());
    EXPECT_EQ(must(remora::flush_method_for(client(), desc_)), flush_method::read_after_write);
    REMORA_ASSERT_OK(remora::flush(client(), desc_, 128, 8));
    auto f = one();
    EXPECT_EQ(f.op, op::flush);
    EXPECT_TRUE(f.ok()) << f.status.message();
    EXPECT_EQ(at(target_, 128, 8), "default!");
    EXPECT_EQ(service_.requests(), 0u);  // read-after-write: one-sided
    auto claims = must(desc_.with_persistence(persistence::persistent | persistence::gpspm));
    EXPECT_EQ(must(remora::flush_method_for(client(), claims)), flush_method::gpspm);
    REMORA_ASSERT_OK(remora::flush(client(), claims, 0, 8));
    auto p = one();
    EXPECT_EQ(p.op, op::flush);
    EXPECT_EQ(p.status, make_error_code(errc::not_supported)) << p.status.message();
    EXPECT_EQ(service_.refused(), 1u);
    EXPECT_ERRC(remora::flush(client(), desc_, 0, 8, {.type = static_cast<flush_type>(7)}),
                errc::invalid_argument);
}

// target_service.hpp: every request is checked against the region: a usage it was not
// registered for is access_denied, a range beyond it out_of_range, though the descriptor the
// client used claims both.
TEST_P(expose_plain, refuses_usage_and_range_it_does_not_grant) {
    open(usage::write_destination | usage::read_source);  // no flush_target, no atomic_target
    const auto visibility =
        flush_options{.type = flush_type::visibility, .method = flush_method::gpspm};
    REMORA_ASSERT_OK(remora::flush(client(), forged(all_remote), 0, 8, visibility));
    EXPECT_EQ(one().status, make_error_code(errc::access_denied));
    REMORA_ASSERT_OK(remora::flush(client(), forged(all_remote, 8192), 4096, 8, visibility));
    EXPECT_EQ(one().status, make_error_code(errc::out_of_range));
    std::uint64_t refused = 2;
    if (remora::atomics(client()) == atomic_path::service) {
        REMORA_ASSERT_OK(remora::atomic_write(client(), forged(all_remote), 0, 7));
        EXPECT_EQ(one().status, make_error_code(errc::access_denied));
        ++refused;
    }
    EXPECT_EQ(service_.refused(), refused);
    EXPECT_EQ(service_.requests(), refused);
}

INSTANTIATE_TEST_SUITE_P(providers, expose_plain, testing::ValuesIn(providers()), provider_name);

// ============================================================ automatic provider choice

// domain.hpp: with no provider configured and FI_PROVIDER unset, open() takes the first of
// verbs, tcp, sockets that offers connected endpoints on the address, and caps().provider says
// which. Run in a child process: libfabric reads FI_PROVIDER once, at its first call.
TEST(provider_choice, open_without_a_provider_takes_the_first_usable_of_verbs_tcp_sockets) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            ::unsetenv("FI_PROVIDER");
            std::string first;
            for (const char* p : {"verbs", "tcp", "sockets"}) {
                if (domain::open({.provider = p})) {
                    first = p;
                    break;
                }
            }
            auto d = domain::open();
            if (!d) {
                std::fprintf(stderr, "open() failed: %s\n", d.error().what().c_str());
                std::exit(2);
            }
            std::fprintf(stderr, "open() picked '%s'; first usable '%s'\n",
                         d->caps().provider.c_str(), first.c_str());
            std::exit(!first.empty() && d->caps().provider == first ? 0 : 1);
        },
        testing::ExitedWithCode(0), "picked");
}

class provider_env : public testing::TestWithParam<std::string> {};

// domain.hpp: with no provider configured, FI_PROVIDER (libfabric's filter) decides.
TEST_P(provider_env, open_without_a_provider_follows_fi_provider) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const std::string want = GetParam();
    EXPECT_EXIT(
        {
            ::setenv("FI_PROVIDER", want.c_str(), 1);
            auto d = domain::open();
            if (!d) {
                std::fprintf(stderr, "open() failed: %s\n", d.error().what().c_str());
                std::exit(2);
            }
            std::fprintf(stderr, "open() picked '%s'\n", d->caps().provider.c_str());
            std::exit(d->caps().provider == want ? 0 : 1);
        },
        testing::ExitedWithCode(0), "picked");
}

INSTANTIATE_TEST_SUITE_P(providers, provider_env, testing::ValuesIn(providers()), provider_name);

// ============================================================ co_op over send and recv

class coro_msgs : public testing::TestWithParam<std::string> {};

struct exchange {
    result<std::size_t> sent = fail(errc::bad_state, "not run");
    result<std::size_t> received = fail(errc::bad_state, "not run");
};

// Awaits a send of `send_len` bytes, then a receive into a 256-byte buffer.
task send_then_recv(connection& c, const memory_region& out, std::size_t send_len,
                    const memory_region& in, exchange& x) {
    x.sent = co_await co_op([&](op_options o) { return c.send(out, 0, send_len, o); });
    x.received = co_await co_op([&](op_options o) { return c.recv(in, 0, 256, o); });
}
// Awaits a receive, then answers with a send of `send_len` bytes.
task recv_then_send(connection& c, const memory_region& in, const memory_region& out,
                    std::size_t send_len, exchange& x) {
    x.received = co_await co_op([&](op_options o) { return c.recv(in, 0, 256, o); });
    x.sent = co_await co_op([&](op_options o) { return c.send(out, 0, send_len, o); });
}

// Awaits one receive into a 256-byte buffer.
task recv_only(connection& c, const memory_region& in, exchange& x) {
    x.received = co_await co_op([&](op_options o) { return c.recv(in, 0, 256, o); });
}

// coro.hpp: co_op yields the completion's byte count: a coroutine awaiting a receive gets the
// bytes that arrived; one awaiting a send resumes with success once its send completed.
TEST_P(coro_msgs, awaited_send_and_recv_yield_their_byte_counts) {
    auto p = must(connect_pair(GetParam()));
    buffer cin(256), cout(256), sin(256), sout(256);
    auto cin_mr = must(memory_region::create(p.client_domain, cin.span(), usage::receive));
    auto cout_mr = must(memory_region::create(p.client_domain, cout.span(), usage::send));
    auto sin_mr = must(memory_region::create(p.server_domain, sin.span(), usage::receive));
    auto sout_mr = must(memory_region::create(p.server_domain, sout.span(), usage::send));
    put(cout, 0, "question?");
    put(sout, 0, "an answer of 27 bytes......");
    exchange cx, sx;
    auto server = recv_then_send(*p.server, sin_mr, sout_mr, 27, sx);
    auto client = send_then_recv(*p.client, cout_mr, 9, cin_mr, cx);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!(server.done() && client.done()) && std::chrono::steady_clock::now() < deadline) {
        completion buf[4];
        // The coroutines resume here, inside the polls; callbacks take every completion.
        EXPECT_EQ(must(p.server->cq().poll(buf)), 0u);
        EXPECT_EQ(must(p.client->cq().poll(buf)), 0u);
        std::this_thread::yield();
    }
    ASSERT_TRUE(server.done() && client.done()) << "a coroutine was never resumed";
    ASSERT_TRUE(sx.received.has_value()) << sx.received.error().what();
    EXPECT_EQ(*sx.received, 9u);
    EXPECT_EQ(at(sin, 0, 9), "question?");
    ASSERT_TRUE(cx.received.has_value()) << cx.received.error().what();
    EXPECT_EQ(*cx.received, 27u);
    EXPECT_EQ(at(cin, 0, 27), "an answer of 27 bytes......");
    EXPECT_TRUE(cx.sent.has_value()) << cx.sent.error().what();
    EXPECT_TRUE(sx.sent.has_value()) << sx.sent.error().what();
    EXPECT_EQ(p.client->in_flight(), 0u);
    EXPECT_EQ(p.server->in_flight(), 0u);
}

// coro.hpp: an operation that completes with an error resumes the coroutine with that error: a
// receive awaited on a connection that is then closed yields errc::canceled.
TEST_P(coro_msgs, awaited_recv_flushed_by_close_yields_its_error) {
    auto p = must(connect_pair(GetParam()));
    buffer in(256);
    auto in_mr = must(memory_region::create(p.server_domain, in.span(), usage::receive));
    exchange x;
    auto t = recv_only(*p.server, in_mr, x);
    EXPECT_FALSE(t.done());
    REMORA_ASSERT_OK(p.server->close());
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!t.done() && std::chrono::steady_clock::now() < deadline) {
        completion buf[4];
        EXPECT_EQ(must(p.server->cq().poll(buf)), 0u);
        std::this_thread::yield();
    }
    ASSERT_TRUE(t.done());
    EXPECT_ERRC(x.received, errc::canceled);
}

INSTANTIATE_TEST_SUITE_P(providers, coro_msgs, testing::ValuesIn(providers()), provider_name);

// ============================================================ registration_cache, concurrently

class cache_threads : public testing::TestWithParam<std::string> {};

// registration_cache.hpp: "every call may run concurrently". Threads look up overlapping ranges
// of one buffer with mixed usages while another reads stats() and invalidates a slice: every
// lookup returns a registration covering its range with the usages asked for; the counters
// add up; once idle, the cache is back within capacity and invalidation empties it.
TEST_P(cache_threads, overlapping_lookups_from_many_threads_stay_consistent) {
    auto dom = must(domain::open({.provider = GetParam()}));
    constexpr std::size_t capacity = 8, page = 4096;
    auto cache = must(registration_cache::create(dom, capacity));
    buffer mem(64 * page);
    constexpr int workers = 4, rounds = 5000;
    const usage kinds[] = {usage::send, usage::write_source, usage::send | usage::write_source};
    std::atomic<int> bad{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < workers; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937 rng(static_cast<unsigned>(t + 1));
            std::vector<cached_region> held;  // a few handles held a while: not evictable
            for (int i = 0; i < rounds; ++i) {
                const std::size_t first = rng() % 60, pages = 1 + rng() % 4;
                const std::size_t skew = rng() % 100, off = first * page + skew;
                const std::size_t len = pages * page - skew - rng() % 100;
                const usage uses = kinds[rng() % 3];
                std::span<std::byte> want(mem.bytes.data() + off, len);
                auto h = cache.get(want, uses);
                if (!h || !*h) {
                    ++bad;
                    continue;
                }
                const memory_region& r = h->region();
                const bool covers = r.data() + h->offset() == want.data() &&
                                    h->offset() + len <= r.size() && has_all(r.usages(), uses);
                if (!covers)
                    ++bad;
                held.push_back(std::move(*h));
                if (held.size() > 2)
                    held.erase(held.begin());
            }
        });
    }
    std::thread watcher([&] {
        registration_cache_stats last{};
        while (!stop.load()) {
            const auto st = cache.stats();
            if (st.hits < last.hits || st.misses < last.misses || st.evictions < last.evictions ||
                st.entries > st.misses - st.evictions)
                ++bad;
            last = st;
            // Pages 12-13 are invalidated now and then, under the workers' feet.
            cache.invalidate({mem.bytes.data() + 12 * page, 2 * page});
            std::this_thread::yield();
        }
    });
    for (auto& t : threads)
        t.join();
    stop = true;
    watcher.join();
    EXPECT_EQ(bad.load(), 0);
    const auto st = cache.stats();
    EXPECT_EQ(st.hits + st.misses, static_cast<std::uint64_t>(workers * rounds));
    EXPECT_GT(st.hits, 0u);
    EXPECT_LE(st.entries, st.misses - st.evictions);
    // Every handle is gone: one more registration evicts the idle ones down to capacity.
    buffer other(page);
    auto last = must(cache.get(other.span(), usage::send));
    EXPECT_LE(cache.stats().entries, capacity);
    cache.invalidate(mem.bytes);
    cache.invalidate(other.bytes);
    EXPECT_EQ(cache.stats().entries, 0u);
    EXPECT_EQ(last.region().size(), page);  // a held handle outlives its invalidation
}

INSTANTIATE_TEST_SUITE_P(providers, cache_threads, testing::ValuesIn(providers()), provider_name);

}  // namespace
}  // namespace remora::test

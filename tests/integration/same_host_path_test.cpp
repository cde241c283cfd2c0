// SPDX-License-Identifier: BSD-3-Clause
// The same-host path: a connection set up over tcp or sockets to a peer on this host moves its
// operations to shared memory (libfabric's shm provider) by itself, with the same results, and
// ends as a connection over the provider does.
#include <atomic>
#include <cstring>
#include <thread>

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <remora/persistence.hpp>

#include "support.hpp"

namespace remora::test {
namespace {

class same_host_path : public testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        if (!same_host_attachable())
            GTEST_SKIP() << "the kernel would not let a peer of this user attach to this process "
                            "(Yama, not dumpable, set-id or capabilities): no same-host path here";
    }
};

// A pair on loopback, each side in a domain of its own; `on` turns the path on in both configs.
connected_pair pair_of(const std::string& provider, bool client_on = true, bool server_on = true) {
    connection_config s, c;
    s.same_host = server_on;
    s.progress_thread = true;  // the client's one-sided operations land while the test waits
    c.same_host = client_on;
    return must(connect_pair(provider, s, c));
}

// A write from the client lands in the target's memory. Over the provider a write's completion
// says only that its source may be reused: the byte lands a little later.
void write_lands(connected_pair& p, std::byte value) {
    buffer target(64), local(64);
    auto tmr =
        must(memory_region::create(p.server_domain, target.span(), usage::write_destination));
    auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::write_source));
    local.bytes[0] = value;
    REMORA_ASSERT_OK(p.client->write(must(tmr.describe(0, 64)), 0, lmr, 0, 8));
    auto done = collect(p.client->cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok()) << done[0].status.message();
    EXPECT_TRUE(eventually([&] { return std::atomic_ref(target.bytes[0]).load() == value; }));
}

TEST_P(same_host_path, a_loopback_connection_takes_it_and_every_operation_lands) {
    auto p = pair_of(GetParam());
    ASSERT_TRUE(p.client->same_host());
    ASSERT_TRUE(p.server->same_host());
    buffer target(4096), local(4096);
    auto tmr = must(memory_region::create(
        p.server_domain, target.span(),
        usage::write_destination | usage::read_source | usage::atomic_target | usage::receive));
    auto lmr =
        must(memory_region::create(p.client_domain, local.span(),
                                   usage::write_source | usage::read_destination | usage::send));
    auto desc = must(tmr.describe(0, 4096));
    ASSERT_NE(desc.same_host_address(), 0u);
    // A write, then a read of what it wrote, 3000 bytes past the start.
    std::memset(local.bytes.data(), 0x5a, 64);
    REMORA_ASSERT_OK(p.client->write(desc, 3000, lmr, 0, 64));
    auto done = collect(p.client->cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    ASSERT_TRUE(done[0].ok()) << done[0].status.message();
    EXPECT_EQ(target.bytes[3000], std::byte{0x5a});
    EXPECT_EQ(target.bytes[3063], std::byte{0x5a});
    EXPECT_EQ(target.bytes[3064], std::byte{0});
    REMORA_ASSERT_OK(p.client->read(lmr, 1000, desc, 3000, 64));
    done = collect(p.client->cq(), 1, true);
    ASSERT_EQ(done.size(), 1u);
    ASSERT_TRUE(done[0].ok()) << done[0].status.message();
    EXPECT_EQ(local.bytes[1000], std::byte{0x5a});
    // A message with immediate data.
    REMORA_ASSERT_OK(p.server->recv(tmr, 0, 16));
    REMORA_ASSERT_OK(p.client->send_with_imm(lmr, 0, 16, 0x1234));
    auto got = collect(p.server->cq(), 1, true);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok());
    EXPECT_EQ(got[0].bytes, 16u);
    EXPECT_EQ(got[0].imm, 0x1234u);
    EXPECT_EQ(target.bytes[0], std::byte{0x5a});
    EXPECT_EQ(collect(p.client->cq(), 1, true).size(), 1u);
}

TEST_P(same_host_path, turned_off_on_either_side_the_provider_carries_it) {
    for (auto [c, s] : {std::pair{false, true}, std::pair{true, false}}) {
        auto p = pair_of(GetParam(), c, s);
        EXPECT_FALSE(p.client->same_host());
        EXPECT_FALSE(p.server->same_host());
        write_lands(p, std::byte{7});
    }
}

TEST_P(same_host_path, a_process_its_peer_could_not_attach_to_stays_on_the_provider) {
    // Over the path a peer reaches all of this process's memory: it is taken only when the kernel
    // would let the peer attach to it anyway (ptrace's rules), never for a process that is not
    // dumpable or whose user or group ids differ (a set-id program).
    {
        SCOPED_TRACE("not dumpable");
        ASSERT_EQ(::prctl(PR_SET_DUMPABLE, 0), 0);
        auto p = pair_of(GetParam());
        ASSERT_EQ(::prctl(PR_SET_DUMPABLE, 1), 0);
        EXPECT_FALSE(p.client->same_host());
        EXPECT_FALSE(p.server->same_host());
        write_lands(p, std::byte{42});
    }
    if (::geteuid() == 0) {
        SCOPED_TRACE("a saved group id of its own");
        gid_t rg, eg, sg;
        ASSERT_EQ(::getresgid(&rg, &eg, &sg), 0);
        if (::setresgid(-1, -1, sg + 1) != 0)
            GTEST_SKIP() << "this root may not change its group ids: " << std::strerror(errno);
        auto p = pair_of(GetParam());
        ASSERT_EQ(::setresgid(-1, -1, sg), 0);
        EXPECT_FALSE(p.client->same_host());
        EXPECT_FALSE(p.server->same_host());
        write_lands(p, std::byte{42});
    }
    auto p = pair_of(GetParam());
    EXPECT_TRUE(p.client->same_host());
    EXPECT_TRUE(p.server->same_host());
    write_lands(p, std::byte{42});
}

// The thread that ran the last receive callback.
std::atomic<std::thread::id> callback_thread{};
void note_thread(const completion&) {
    callback_thread = std::this_thread::get_id();
}

TEST_P(same_host_path, a_target_without_a_progress_thread_reads_its_completions_itself) {
    // As over tcp: the peer's queued operations land while the target's application does not
    // read (a library thread drives shm), but the target's completions stay its own to read,
    // and their callbacks run on the thread that reads them.
    buffer target(4096), local(4096), inbox(64);  // outlive the pair
    connection_config plain;                      // no progress thread on either side
    plain.same_host = true;
    auto p = must(connect_pair(GetParam(), plain, plain));
    ASSERT_TRUE(p.server->same_host());
    auto tmr = must(
        memory_region::create(p.server_domain, target.span(),
                              usage::write_destination | usage::read_source | usage::flush_target));
    auto imr = must(memory_region::create(p.server_domain, inbox.span(), usage::receive));
    auto lmr = must(
        memory_region::create(p.client_domain, local.span(), usage::write_source | usage::send));
    auto desc = must(tmr.describe(0, 4096));
    REMORA_ASSERT_OK(p.server->recv(imr, 0, 64, {.callback = &note_thread}));
    const std::uint64_t v = 0x5eed;
    std::memcpy(local.bytes.data(), &v, 8);
    // The flush comes back once the write with immediate data before it was placed: only the
    // target's progress places it, and the target's application is not reading.
    REMORA_ASSERT_OK(p.client->write_with_imm(desc, 64, lmr, 0, 8, 7));
    REMORA_ASSERT_OK(
        remora::flush(*p.client, desc, 64, 8, {.method = flush_method::read_after_write}));
    auto done = collect(p.client->cq(), 2, true, 10s);
    ASSERT_EQ(done.size(), 2u);
    std::uint64_t now = 0;
    std::memcpy(&now, target.bytes.data() + 64, 8);
    EXPECT_EQ(now, v);
    REMORA_ASSERT_OK(p.client->send(lmr, 0, 8));
    ASSERT_EQ(collect(p.client->cq(), 1, true, 10s).size(), 1u);
    // Nobody reads the target's CQ: the message waits there for its application (a thread
    // that read it would have run the receive's callback by now).
    EXPECT_FALSE(eventually([&] { return p.server->in_flight() == 0; }, 200ms));
    callback_thread = std::thread::id{};
    auto got = collect(p.server->cq(), 1, true, 10s);  // the write's immediate data
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].op, op::remote_write);
    EXPECT_TRUE(eventually([&] {
        completion c[4];
        (void)p.server->cq().poll(c);
        return callback_thread.load() != std::thread::id{};
    }));
    EXPECT_EQ(callback_thread.load(), std::this_thread::get_id());
}

// Waits up to `ms` for fd to become readable.
bool readable(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) == 1;
}

TEST_P(same_host_path, a_cq_fd_wakes_an_epoll_loop_as_over_the_provider) {
    // shm's CQs have no wait fd; on the path a CQ's fd() is one a library thread signals, so a
    // program that arms and blocks on it works as over tcp, on both sides.
    buffer in(64), out(64);  // outlive the pair
    connection_config plain;
    plain.same_host = true;
    auto p = must(connect_pair(GetParam(), plain, plain));
    ASSERT_TRUE(p.client->same_host());
    auto imr = must(memory_region::create(p.client_domain, in.span(), usage::receive));
    auto omr = must(memory_region::create(p.server_domain, out.span(), usage::send));
    for (connection* c : {&*p.client, &*p.server}) {
        SCOPED_TRACE(c == &*p.client ? "client" : "server");
        completion_queue& q = c->cq();
        ASSERT_GE(q.fd(), 0);
        EXPECT_EQ(q.fd(), q.fd());
        auto armed = q.arm();
        REMORA_ASSERT_OK(armed);
        EXPECT_TRUE(*armed);  // nothing there: block on it
        EXPECT_FALSE(readable(q.fd(), 50));
    }
    completion_queue& q = p.client->cq();
    REMORA_ASSERT_OK(p.client->recv(imr, 0, 64));
    auto armed = q.arm();
    REMORA_ASSERT_OK(armed);
    ASSERT_TRUE(*armed);
    REMORA_ASSERT_OK(p.server->send(omr, 0, 8));
    ASSERT_TRUE(readable(q.fd(), 5000)) << "the message arrived but the fd stayed quiet";
    auto got = collect(q, 1, false, 1s);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].op, op::recv);
    // Entries waiting: arm says so instead of letting the caller sleep.
    REMORA_ASSERT_OK(p.client->recv(imr, 0, 64));
    REMORA_ASSERT_OK(p.server->send(omr, 0, 8));
    ASSERT_TRUE(eventually([&] { return !*q.arm(); }));
    EXPECT_EQ(collect(q, 1, false, 1s).size(), 1u);
    // A wait reads what is there into the CQ's own buffer; a poll that takes less leaves the
    // rest there, and arm says so too.
    (void)collect(p.server->cq(), 2, false, 1s);  // the sends so far
    for (int i = 0; i < 3; ++i) {
        REMORA_ASSERT_OK(p.client->recv(imr, 0, 64));
        REMORA_ASSERT_OK(p.server->send(omr, 0, 8));
    }
    ASSERT_EQ(collect(p.server->cq(), 3, true, 5s).size(), 3u);
    auto w = q.wait(1s);
    REMORA_ASSERT_OK(w);
    ASSERT_EQ(*w, 3u);  // the three messages, read into the CQ's buffer
    completion one[1];
    ASSERT_EQ(*q.poll(one), 1u);
    EXPECT_FALSE(*q.arm()) << "two completions wait in the CQ's buffer";
    EXPECT_EQ(collect(q, 2, false, 1s).size(), 2u);
}

TEST_P(same_host_path, a_descriptor_without_a_same_host_address_is_refused) {
    auto p = pair_of(GetParam());
    ASSERT_TRUE(p.client->same_host());
    buffer local(64);
    auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::write_source));
    auto bare = must(remote_region::make(0, 64, 1, usage::write_destination, false));
    EXPECT_ERRC(p.client->write(bare, 0, lmr, 0, 8), errc::not_supported);
    EXPECT_EQ(p.client->in_flight(), 0u);
}

TEST_P(same_host_path, a_region_of_another_domain_is_refused) {
    auto p = pair_of(GetParam());
    buffer target(64), local(64);
    auto tmr = must(memory_region::create(p.server_domain, target.span(),
                                          usage::write_destination | usage::write_source));
    // The server's region is no local buffer of the client's domain.
    EXPECT_ERRC(p.client->write(must(tmr.describe(0, 64)), 0, tmr, 0, 8), errc::invalid_argument);
}

TEST_P(same_host_path, the_peers_close_ends_it_and_its_operations) {
    auto p = pair_of(GetParam());
    ASSERT_TRUE(p.client->same_host());
    buffer local(64);
    auto lmr = must(memory_region::create(p.client_domain, local.span(), usage::receive));
    REMORA_ASSERT_OK(p.client->recv(lmr, 0, 8));
    REMORA_ASSERT_OK(p.server->close());
    auto ev = p.client->next_event(5s);
    REMORA_ASSERT_OK(ev);
    EXPECT_EQ(*ev, conn_event::closed);
    EXPECT_FALSE(p.client->is_open());
    EXPECT_ERRC(p.client->recv(lmr, 8, 8), errc::disconnected);
    // The receive outstanding at the close completes (not successfully) once the endpoint goes.
    auto done = collect(p.client->cq(), 1, true, 5s);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_FALSE(done[0].ok());
    EXPECT_EQ(p.client->in_flight(), 0u);
}

// Waits on a's shared completion channel until the receive a posted completes (10 s at most).
std::vector<completion> wait_on_channel(connection& a) {
    std::vector<completion> got;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (got.empty() && std::chrono::steady_clock::now() < deadline) {
        auto ev = a.wait(1s);
        if (!ev) {
            continue;  // timed out: wait again until the deadline
        }
        completion buf[4];
        if (ev->cq != nullptr) {
            if (auto n = ev->cq->poll(buf); n) {
                got.insert(got.end(), buf, buf + *n);
            }
        }
    }
    return got;
}

TEST_P(same_host_path, a_completion_channel_wait_notices_the_peers_end) {
    // Each side in turn waits on its connection's shared channel, with a receive outstanding,
    // while the other closes: the wait reports the receive's CQ with it ended.
    for (bool client_waits : {true, false}) {
        SCOPED_TRACE(client_waits ? "the client waits" : "the target waits");
        connection_config s, c;
        s.channel = channel_mode::shared;
        c.channel = channel_mode::shared;
        auto p = must(connect_pair(GetParam(), s, c));
        ASSERT_TRUE(p.client->same_host());
        connection& waiter = client_waits ? *p.client : *p.server;
        connection& closer = client_waits ? *p.server : *p.client;
        buffer local(64);
        auto lmr = must(memory_region::create(client_waits ? p.client_domain : p.server_domain,
                                              local.span(), usage::receive));
        REMORA_ASSERT_OK(waiter.recv(lmr, 0, 8));
        REMORA_ASSERT_OK(closer.close());
        auto done = wait_on_channel(waiter);
        ASSERT_EQ(done.size(), 1u);
        EXPECT_FALSE(done[0].ok());
        EXPECT_FALSE(waiter.is_open());
        EXPECT_EQ(waiter.in_flight(), 0u);
        // With the connection ended (no more looks due), a wait still keeps its timeout.
        const auto start = std::chrono::steady_clock::now();
        (void)waiter.wait(200ms);
        EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    }
}

TEST_P(same_host_path, a_peer_process_that_dies_ends_the_operations_it_held) {
    // The target runs in a child forked before this process opens anything (no thread holds a
    // lock the child would inherit); it accepts, says whether it took the path, and waits to be
    // killed while the client waits for a message from it.
    int pipe_fd[2];
    ASSERT_EQ(::pipe(pipe_fd), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(pipe_fd[0]);
        auto sd = domain::open({.provider = GetParam()});
        auto l = sd ? listener::create(*sd, "127.0.0.1", 0) : fail(sd.error());
        if (!l)
            ::_exit(2);
        const std::uint16_t port = l->port();
        if (::write(pipe_fd[1], &port, sizeof port) != sizeof port)
            ::_exit(3);
        auto req = l->get_request(10s);
        auto s = req ? req->accept({}) : fail(req.error());
        const char took = s && s->same_host() ? 1 : 0;
        [[maybe_unused]] auto w = ::write(pipe_fd[1], &took, 1);
        ::pause();
        ::_exit(0);
    }
    ::close(pipe_fd[1]);
    auto reap = [&] {
        ::kill(child, SIGKILL);
        int status = 0;
        while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
        remove_shm_regions_of(child);
    };
    std::uint16_t port = 0;
    char took = 0;
    if (!read_all(pipe_fd[0], &port, sizeof port)) {
        reap();
        FAIL() << "the child did not listen";
    }
    auto cd = must(domain::open({.provider = GetParam()}));
    auto c = connection::connect(cd, "127.0.0.1", port);
    const bool told = read_all(pipe_fd[0], &took, 1);
    ::close(pipe_fd[0]);
    if (!c || !told) {
        reap();
        FAIL() << "connect: " << (c ? "the child did not answer" : c.error().what());
    }
    EXPECT_TRUE(c->same_host());
    EXPECT_EQ(took, 1);
    buffer local(64);
    auto lmr = must(memory_region::create(cd, local.span(), usage::receive));
    REMORA_ASSERT_OK(c->recv(lmr, 0, 8));
    reap();
    // Its end reaches the client without next_event: the outstanding receive completes as the
    // client waits on its CQ.
    auto done = collect(c->cq(), 1, true, 10s);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_FALSE(done[0].ok());
    EXPECT_FALSE(c->is_open());
}

INSTANTIATE_TEST_SUITE_P(providers, same_host_path, testing::Values("tcp", "sockets"),
                         provider_name);

}  // namespace
}  // namespace remora::test

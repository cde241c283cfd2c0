// SPDX-License-Identifier: BSD-3-Clause
// RDM peer liveness (connection_config::liveness): a peer process killed with SIGKILL, or stopped
// with SIGSTOP, is reported once as conn_event::lost on the survivor's event_fd(); the
// survivor's outstanding operations then complete with errc::disconnected and later posts fail
// with it. A live peer (its progress thread answering) is not reported lost.
//
// The peer runs in a child process that re-executes this binary (a disabled test), so it shares
// no state (threads, locks) with the parent.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "support.hpp"

namespace remora::test {
namespace {

using clock = std::chrono::steady_clock;

// The peer process: an RDM endpoint whose progress thread answers the parent's probes, attached
// to the parent, idle until its input pipe ends (or it is killed).
TEST(liveness_child, DISABLED_peer_process) {
    const char* prov = std::getenv("REMORA_LV_CHILD");
    if (prov == nullptr)
        GTEST_SKIP() << "the peer process of the liveness tests: runs only from them";
    const int in = 100, out = 101;
    auto d = must(domain::open({.provider = prov, .endpoint = endpoint_type::rdm}));
    auto c = must(connection::open_peer(d, {.progress_thread = true}));
    const auto n = static_cast<std::uint32_t>(c.local_address().size());
    ASSERT_TRUE(write_all(out, &n, 4) && write_all(out, c.local_address().data(), n));
    std::uint32_t m = 0;
    ASSERT_TRUE(read_all(in, &m, 4) && m < 4096);
    std::vector<std::byte> peer(m);
    ASSERT_TRUE(read_all(in, peer.data(), m));
    REMORA_ASSERT_OK(c.attach(peer));
    const char ready = 'r';
    ASSERT_TRUE(write_all(out, &ready, 1));
    char byte = 0;
    while (::read(in, &byte, 1) > 0) {  // until the parent closes the pipe or goes
    }
}

// The peer process, attached to `conn` (opened by the caller); killed and reaped at the end.
class peer_process {
  public:
    explicit peer_process(const std::string& provider) {
        int to[2], from[2];
        if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0)
            return;
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
            const int null = ::open("/dev/null", O_WRONLY);
            ::dup2(null, 1);
            ::dup2(to[0], 100);  // survive exec (O_CLOEXEC)
            ::dup2(from[1], 101);
            ::setenv("REMORA_LV_CHILD", provider.c_str(), 1);
            ::execl("/proc/self/exe", "liveness_test", "--gtest_also_run_disabled_tests",
                    "--gtest_filter=liveness_child.DISABLED_peer_process",
                    static_cast<char*>(nullptr));
            ::_exit(127);
        }
        ::close(to[0]);
        ::close(from[1]);
        to_ = to[1];
        from_ = from[0];
    }
    ~peer_process() {
        kill();
        if (to_ >= 0)
            ::close(to_);
        if (from_ >= 0)
            ::close(from_);
    }
    // Exchanges addresses with the child and waits until it has attached `conn`.
    bool attach(connection& conn) {
        std::uint32_t n = 0;
        if (pid_ <= 0 || !read_all(from_, &n, 4) || n >= 4096)
            return false;
        std::vector<std::byte> peer(n);
        if (!read_all(from_, peer.data(), n))
            return false;
        const auto m = static_cast<std::uint32_t>(conn.local_address().size());
        if (!write_all(to_, &m, 4) || !write_all(to_, conn.local_address().data(), m))
            return false;
        if (!conn.attach(peer))
            return false;
        char ready = 0;
        return read_all(from_, &ready, 1) && ready == 'r';
    }
    // SIGSTOPs the child and returns once it is stopped.
    bool stop() const { return stop_process(pid_); }
    void kill() {
        if (pid_ > 0) {  // never kill(-1, ...)
            ::kill(pid_, SIGKILL);
            while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
            }
            remove_shm_regions_of(pid_);
            pid_ = -1;
        }
    }

  private:
    pid_t pid_ = -1;
    int to_ = -1;
    int from_ = -1;
};

bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
}

// Reads the connection's CQ with blocking waits (which look at the peer's liveness) until its
// event_fd() is readable or `limit` passed; what it reads goes to `got`. True once readable.
bool read_until_event(connection& c, std::vector<completion>& got,
                      std::chrono::milliseconds limit) {
    const auto deadline = clock::now() + limit;
    completion buf[8];
    while (clock::now() < deadline) {
        if (readable(c.event_fd()))
            return true;
        (void)c.cq().wait(20ms);
        while (auto r = c.cq().poll(buf)) {
            if (*r == 0)
                break;
            got.insert(got.end(), buf, buf + *r);
        }
    }
    return readable(c.event_fd());
}

// Reads the CQ until nothing is in flight (or `limit`).
void drain(connection& c, std::vector<completion>& got, std::chrono::milliseconds limit) {
    const auto deadline = clock::now() + limit;
    completion buf[8];
    while (c.in_flight() != 0 && clock::now() < deadline) {
        (void)c.cq().wait(20ms);
        while (auto r = c.cq().poll(buf)) {
            if (*r == 0)
                break;
            got.insert(got.end(), buf, buf + *r);
        }
    }
}

// What a lost peer leaves: the receive posted before completed with errc::disconnected, nothing
// in flight, posts refused with it, the event reported once (close() adds none).
void expect_lost_and_ended(connection& c, const memory_region& mr, std::vector<completion>& got) {
    EXPECT_FALSE(c.is_open());
    drain(c, got, 10s);
    EXPECT_EQ(c.in_flight(), 0u);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].op, op::recv);
    EXPECT_EQ(got[0].context, &got);
    EXPECT_TRUE(got[0].status == errc::disconnected) << got[0].status.message();
    auto refused = c.recv(mr, 0, 64);
    ASSERT_FALSE(refused.has_value());
    EXPECT_TRUE(refused.error() == errc::disconnected) << refused.error().what();
    std::printf("[%s] %s\n", c.dom().caps().provider.c_str(), refused.error().what().c_str());
    EXPECT_ERRC(c.send(mr, 0, 64), errc::disconnected);
    EXPECT_ERRC(c.next_event(0ms), errc::timed_out);
    REMORA_ASSERT_OK(c.close());
    EXPECT_ERRC(c.next_event(0ms), errc::timed_out);
}

class liveness : public testing::TestWithParam<std::string> {};

// SIGKILL: the survivor, reading its CQ, learns of it within the liveness time (and a probe
// interval or two) on a quiet machine; the bound here is generous.
TEST_P(liveness, killed_peer_is_reported_lost_and_its_operations_end) {
    const std::string p = GetParam().substr(4);
    buffer mem(1 << 12);  // outlives the endpoint
    peer_process child(p);
    auto d = must(domain::open({.provider = p, .endpoint = endpoint_type::rdm}));
    auto c = must(connection::open_peer(d, {.liveness = 200ms}));
    ASSERT_TRUE(child.attach(c));
    auto mr = must(memory_region::create(d, mem.span(), usage::receive | usage::send));
    std::vector<completion> got;
    REMORA_ASSERT_OK(c.recv(mr, 0, 64, {.context = &got}));  // outstanding: the child sends none
    EXPECT_FALSE(read_until_event(c, got, 300ms)) << "a live peer was reported lost";
    EXPECT_TRUE(got.empty());

    child.kill();
    ASSERT_TRUE(read_until_event(c, got, 20s)) << "no event for the killed peer";
    auto e = c.next_event(0ms);
    ASSERT_TRUE(e.has_value()) << e.error().what();
    EXPECT_EQ(*e, conn_event::lost);
    expect_lost_and_ended(c, mr, got);
}

// SIGSTOP: alive for several probe intervals first (its progress thread answers), then silent:
// lost once the liveness time passed without an answer. The survivor runs the progress thread,
// which looks at the peer's liveness: the test only waits for event_fd() to become readable.
TEST_P(liveness, stopped_peer_is_lost_after_the_liveness_time_and_not_before) {
    const std::string p = GetParam().substr(4);
    constexpr auto limit = 400ms;
    buffer mem(1 << 12);  // outlives the endpoint
    peer_process child(p);
    auto d = must(domain::open({.provider = p, .endpoint = endpoint_type::rdm}));
    auto c = must(connection::open_peer(d, {.liveness = limit, .progress_thread = true}));
    ASSERT_TRUE(child.attach(c));
    auto mr = must(memory_region::create(d, mem.span(), usage::receive | usage::send));
    std::vector<completion> got;
    REMORA_ASSERT_OK(c.recv(mr, 0, 64, {.context = &got}));
    // Five probe intervals (limit / 4 each) of a live peer: no event.
    pollfd pfd{c.event_fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&pfd, 1, static_cast<int>((5 * limit / 4).count())), 0);
    EXPECT_TRUE(c.is_open());

    ASSERT_TRUE(child.stop());
    const auto stopped = clock::now();
    ASSERT_EQ(::poll(&pfd, 1, 20000), 1) << "event_fd() did not become readable";
    auto e = c.next_event(0ms);
    ASSERT_TRUE(e.has_value()) << e.error().what();
    EXPECT_EQ(*e, conn_event::lost);
    // The last probe answered may have gone out up to one interval before the stop.
    EXPECT_GE(clock::now() - stopped, limit / 2);
    expect_lost_and_ended(c, mr, got);
}

// In one process: the probe's send-queue entry is its own (the application's whole sq_size is
// still free, and in_flight() does not count the probe), and an address without the word
// liveness reads is refused by attach.
TEST_P(liveness, probe_takes_no_entry_of_the_application_and_needs_the_peers_word) {
    const std::string p = GetParam().substr(4);
    buffer mem(1 << 12), target(1 << 12);  // outlive the endpoints (and the peer's thread)
    auto pair = attach_rdm_pair(p, {.sq_size = 4, .liveness = 100ms}, {.progress_thread = true});
    ASSERT_TRUE(pair.has_value()) << pair.error().what();
    connection& a = *pair->a;
    auto mr = must(memory_region::create(pair->a_dom, mem.span(), usage::read_destination));
    auto tmr = must(memory_region::create(pair->b_dom, target.span(), usage::read_source));
    const auto desc = must(tmr.describe());
    completion buf[8];
    // Several probe intervals of traffic: four reads at a time, the whole send queue.
    const auto until = clock::now() + 500ms;
    std::size_t done = 0;
    while (clock::now() < until) {
        for (int i = 0; i < 4; ++i) {
            auto r = a.read(mr, 64 * i, desc, 0, 64);
            if (!r && r.error() == errc::would_block)
                break;  // the provider still sets up its path to the peer
            ASSERT_TRUE(r.has_value()) << r.error().what();
        }
        const auto deadline = clock::now() + 10s;
        while (a.in_flight() != 0 && clock::now() < deadline) {
            (void)a.cq().wait(20ms);
            auto n = must(a.cq().poll(buf));
            for (std::size_t i = 0; i < n; ++i) {
                ASSERT_TRUE(buf[i].ok()) << buf[i].status.message();
                ++done;
            }
        }
        ASSERT_EQ(a.in_flight(), 0u);
    }
    EXPECT_GT(done, 0u);
    EXPECT_TRUE(a.is_open());
    EXPECT_ERRC(a.next_event(0ms), errc::timed_out);

    // The word is named at the end of the peer's address: without it, attach refuses.
    auto q = must(connection::open_peer(pair->a_dom, {.liveness = 100ms}));
    const auto full = pair->b->local_address();
    EXPECT_ERRC(q.attach(full.first(full.size() - 20)), errc::invalid_argument);
    REMORA_ASSERT_OK(q.attach(full));
}

// sockets' RDM endpoints too (tests/support.hpp's list is shm, tcp;ofi_rxm, net).
std::vector<std::string> liveness_providers() {
    auto v = rdm_providers();
    v.push_back("rdm:sockets");
    return v;
}
INSTANTIATE_TEST_SUITE_P(rdm, liveness, testing::ValuesIn(liveness_providers()), provider_name);

// Connected (MSG) endpoints learn of their peer's end from the provider: liveness is refused.
TEST(liveness_msg, refused_on_a_connected_endpoint) {
    auto d = must(domain::open({.provider = "tcp"}));
    EXPECT_ERRC(connection::connect(d, "127.0.0.1", 1, {.liveness = 100ms}), errc::not_supported);
}

}  // namespace
}  // namespace remora::test

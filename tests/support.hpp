// SPDX-License-Identifier: BSD-3-Clause
// tests/support.hpp — helpers shared by remora's tests: providers to run on, connected pairs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <remora/remora.hpp>

namespace remora::test {

using namespace std::chrono_literals;

// The providers every integration test runs on.
inline std::vector<std::string> providers() {
    return {"tcp", "sockets"};
}

// The RDM providers a test parametrised over connect_pair() may add: "rdm:<provider>" makes
// connect_pair open two attached RDM peers instead of a listener and a connection.
inline std::vector<std::string> rdm_providers() {
    return {"rdm:shm", "rdm:tcp;ofi_rxm", "rdm:net"};
}
inline bool is_rdm(const std::string& provider) {
    return provider.rfind("rdm:", 0) == 0;
}

// A test name for a provider parameter ("rdm:tcp;ofi_rxm" -> "rdm_tcp_ofi_rxm").
inline std::string provider_name(const testing::TestParamInfo<std::string>& p) {
    std::string n = p.param;
    for (char& ch : n) {
        if (ch == ';' || ch == ':')
            ch = '_';
    }
    return n;
}

// Unwraps a result or fails the test with its message.
#define REMORA_ASSERT_OK(expr)                                                           \
    do {                                                                                 \
        auto&& remora_r_ = (expr);                                                       \
        ASSERT_TRUE(remora_r_.has_value()) << #expr << ": " << remora_r_.error().what(); \
    } while (0)

// The call failed with exactly `code` (never calls error() on a value) and said why.
#define EXPECT_ERRC(expr, code)                                                        \
    do {                                                                               \
        auto&& r_ = (expr);                                                            \
        if (r_.has_value()) {                                                          \
            ADD_FAILURE() << #expr << " succeeded; expected " << #code;                \
        } else {                                                                       \
            EXPECT_TRUE(r_.error() == (code)) << #expr << ": " << r_.error().what();   \
            EXPECT_FALSE(r_.error().message().empty()) << #expr << " gave no message"; \
        }                                                                              \
    } while (0)
// The same, ending the test on a mismatch.
#define ASSERT_ERRC(expr, code)                                                    \
    do {                                                                           \
        auto&& r_ = (expr);                                                        \
        ASSERT_FALSE(r_.has_value()) << #expr << " succeeded; expected " << #code; \
        ASSERT_TRUE(r_.error() == (code)) << #expr << ": " << r_.error().what();   \
        EXPECT_FALSE(r_.error().message().empty()) << #expr << " gave no message"; \
    } while (0)

template <class T>
T must(result<T> r, const char* what = "result") {
    if (!r) {
        ADD_FAILURE() << what << ": " << r.error().what();
        std::abort();
    }
    return std::move(*r);
}

// A process killed with SIGKILL cannot close its shm endpoints: their regions (16 MiB each)
// stay in /dev/shm, named after its process id. Call once it is reaped.
inline void remove_shm_regions_of(pid_t pid) {
    const std::string prefix = "remora_" + std::to_string(pid) + "_";
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator("/dev/shm", ec)) {
        if (f.path().filename().string().starts_with(prefix)) {
            std::filesystem::remove(f.path(), ec);
        }
    }
}

inline std::span<const std::byte> bytes_of(const std::string& s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
inline std::string string_of(std::span<const std::byte> b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Two connected endpoints on loopback, each with its own domain.
struct connected_pair {
    domain server_domain;
    domain client_domain;
    std::optional<listener> lst;
    std::optional<connection> server;
    std::optional<connection> client;
};

// Waits for a connection request on `lst` while a client connects in `client` (a future): returns
// as soon as the request arrives, or, when the client's connect fails first (a local refusal, a
// rejected or unreachable peer), at once with no request, so a failed connect never costs the
// caller a whole request timeout.
template <class Client>
result<connection_request> request_while_connecting(listener& lst, Client& client,
                                                    std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        auto req = lst.get_request(20ms);
        if (req || !(req.error() == errc::timed_out))
            return req;
        if (client.wait_for(0s) == std::future_status::ready ||
            std::chrono::steady_clock::now() >= deadline)
            return req;
    }
}

inline std::vector<completion> collect(completion_queue& cq, std::size_t n, bool blocking,
                                       std::chrono::milliseconds limit = 10s);

// Two RDM peers attached to each other, each in a domain of its own (as two processes would
// be): `a` opened with `a_cfg` in `a_dom` (opened with `a_domain`, whose provider and endpoint
// type are set here), `b` with `b_cfg` in `b_dom`. Nothing is sent yet, so the provider may still
// set up its path on the first operation.
struct rdm_pair {
    domain a_dom;
    domain b_dom;
    std::optional<connection> a;
    std::optional<connection> b;
};

inline result<rdm_pair> attach_rdm_pair(const std::string& provider,
                                        const connection_config& a_cfg = {},
                                        const connection_config& b_cfg = {},
                                        domain_config a_domain = {}) {
    a_domain.provider = provider;
    a_domain.endpoint = endpoint_type::rdm;
    auto ad = domain::open(a_domain);
    if (!ad)
        return fail(ad.error());
    auto bd = domain::open({.provider = provider, .endpoint = endpoint_type::rdm});
    if (!bd)
        return fail(bd.error());
    auto a = connection::open_peer(*ad, a_cfg);
    if (!a)
        return fail(a.error());
    auto b = connection::open_peer(*bd, b_cfg);
    if (!b)
        return fail(b.error());
    if (auto r = a->attach(b->local_address()); !r)
        return fail(r.error());
    if (auto r = b->attach(a->local_address()); !r)
        return fail(r.error());
    return rdm_pair{*ad, *bd, std::move(*a), std::move(*b)};
}

// connect_pair for "rdm:<provider>": attach_rdm_pair with `server` as `a`, running the library's
// progress thread (an RDM target progresses only while someone reads its CQ, and these tests'
// targets are idle). One message from the client sets up the provider's path (shm maps the peer,
// tcp;ofi_rxm connects), as a first exchange of descriptors does in an application, so the test's
// posts meet no path setup (only a send: a client drawing on a slot pool may have no receive
// units). `server_domain`, when given, opens the server's domain.
inline result<connected_pair> connect_rdm_pair(const std::string& provider,
                                               connection_config server_cfg,
                                               const connection_config& client_cfg,
                                               domain_config server_domain = {}) {
    server_cfg.progress_thread = true;
    auto p = attach_rdm_pair(provider, server_cfg, client_cfg, std::move(server_domain));
    if (!p)
        return fail(p.error());
    connection& s = *p->a;
    connection& c = *p->b;
    std::vector<std::byte> sm(64), cm(64);
    auto smr = memory_region::create(p->a_dom, sm, usage::receive);
    auto cmr = memory_region::create(p->b_dom, cm, usage::send);
    if (!smr || !cmr)
        return fail(!smr ? smr.error() : cmr.error());
    if (auto r = s.recv(*smr, 0, 8); !r)
        return fail(r.error());
    completion_queue& sq = s.rcq() != nullptr ? *s.rcq() : s.cq();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    result<void> sent = fail(errc::would_block, "warm-up send not posted");
    std::size_t received = 0;
    while (!sent && sent.error() == errc::would_block &&
           std::chrono::steady_clock::now() < deadline) {
        sent = c.send(*cmr, 0, 8);
        completion buf[4];
        if (auto n = sq.poll(buf); n)  // the receiver progresses meanwhile
            received += *n;
    }
    if (!sent)
        return fail(sent.error());
    if (received == 0)
        received = collect(sq, 1, false, 10s).size();
    if (received != 1 || collect(c.cq(), 1, false, 10s).size() != 1)
        return fail(errc::timed_out, "RDM warm-up: the first message did not arrive in 10 s");
    connected_pair cp{std::move(p->a_dom), std::move(p->b_dom), std::nullopt, std::move(p->a),
                      std::move(p->b)};
    return cp;
}

// Whether the kernel would let another process of this user attach to this one (ptrace's rules,
// which the same-host path follows): no Yama restriction, dumpable, one user id and one group
// id, and no capabilities unless root's.
inline bool same_host_attachable() {
    static constexpr char yama_path[] = "/proc/sys/kernel/yama/ptrace_scope";
    std::ifstream yama(yama_path);
    if (!yama && ::access(yama_path, F_OK) == 0)
        return false;  // Yama there but unreadable: counted as restricted
    int scope = 0;
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if ((yama && !((yama >> scope) && scope == 0)) || ::prctl(PR_GET_DUMPABLE) != 1 ||
        ::getresuid(&ru, &eu, &su) != 0 || ::getresgid(&rg, &eg, &sg) != 0 || ru != eu ||
        ru != su || rg != eg || rg != sg)
        return false;
    std::ifstream status("/proc/self/status");
    for (std::string line; ru != 0 && std::getline(status, line);)
        if (line.rfind("CapPrm:", 0) == 0)
            return line.find_first_not_of("0\t ", 7) == std::string::npos;
    return true;
}

// Whether a pair set up over `provider` with these configurations must take the same-host path:
// under REMORA_SAME_HOST=process (the same_host label's rows, the same-host tests) a tcp or
// sockets pair on loopback whose configurations allow it (connection_config::same_host) must,
// so a row that fell back to the provider fails instead of testing the provider again.
inline bool same_host_expected(const std::string& provider, const connection_config& s,
                               const connection_config& c, std::size_t private_data = 0) {
    const char* env = std::getenv("REMORA_SAME_HOST");
    if (env == nullptr || std::string(env) != "process")
        return false;  // (before anything opens: tests that fork want nothing open yet)
    const char* only = std::getenv("FI_PROVIDER");
    const char* rules = std::getenv("REMORA_RULES");
    // shm's own limit on segments: a configuration beyond it stays on the provider.
    static const std::size_t shm_sge = [] {
        auto d = domain::open({.provider = "shm", .endpoint = endpoint_type::rdm});
        return d ? d->caps().iov_limit : 0;
    }();
    auto allows = [](const connection_config& k) {
        return k.same_host && !k.shared_cq && !k.shared_rcq && !k.srq && k.liveness.count() == 0 &&
               k.max_sge <= shm_sge;
    };
    return (provider == "tcp" || provider == "sockets") && only == nullptr &&
           (rules == nullptr || std::string(rules) == "native") && allows(s) && allows(c) &&
           private_data <= 128 &&  // the offer (about 80 bytes) fits beside it in 256
           same_host_attachable();
}

// Fails a pair that did not take the path it was expected to (same_host_expected).
inline result<void> check_same_host(const std::string& provider, const connection_config& s,
                                    const connection_config& c, const connection& server,
                                    const connection& client, std::size_t private_data = 0) {
    if (same_host_expected(provider, s, c, private_data) &&
        !(server.same_host() && client.same_host()))
        return fail(errc::invalid_argument,
                    "REMORA_SAME_HOST=process: this pair should be on the same-host path but is "
                    "not (server " +
                        std::to_string(server.same_host()) + ", client " +
                        std::to_string(client.same_host()) + ")");
    return {};
}

inline result<connected_pair> connect_pair(const std::string& provider,
                                           const connection_config& server_cfg = {},
                                           const connection_config& client_cfg = {},
                                           std::span<const std::byte> client_data = {},
                                           std::span<const std::byte> server_data = {}) {
    if (is_rdm(provider)) {
        if (!client_data.empty() || !server_data.empty())
            return fail(errc::not_supported, "RDM peers exchange no private data");
        return connect_rdm_pair(provider.substr(4), server_cfg, client_cfg);
    }
    auto sd = domain::open({.provider = provider});
    if (!sd)
        return fail(sd.error());
    auto cd = domain::open({.provider = provider});
    if (!cd)
        return fail(cd.error());
    auto l = listener::create(*sd, "127.0.0.1", 0);
    if (!l)
        return fail(l.error());
    auto client = std::async(std::launch::async, [&] {
        return connection::connect(*cd, "127.0.0.1", l->port(), client_cfg, client_data);
    });
    auto req = request_while_connecting(*l, client);
    result<connection> s = req ? req->accept(server_cfg, server_data) : fail(req.error());
    auto c = client.get();
    if (!c)
        return fail(c.error());
    if (!s)
        return fail(s.error());
    if (auto r = check_same_host(provider, server_cfg, client_cfg, *s, *c,
                                 std::max(client_data.size(), server_data.size()));
        !r)
        return fail(r.error());
    connected_pair p{*sd, *cd, std::move(*l), std::move(*s), std::move(*c)};
    return p;
}

// A server domain with a listener, and clients (in a domain of their own) connecting to it one
// at a time: add() connects one and returns the server side's accepted connection.
struct server_side {
    domain dom;
    listener lst;
    domain client_dom;
    std::vector<connection> clients;
    std::string provider;

    static server_side open(const std::string& provider) {
        auto d = must(domain::open({.provider = provider}));
        auto l = must(listener::create(d, "127.0.0.1", 0));
        auto cd = must(domain::open({.provider = provider}));
        return server_side{d, std::move(l), cd, {}, provider};
    }
    result<connection> add(const connection_config& server_cfg,
                           const connection_config& client_cfg = {}) {
        auto client = std::async(std::launch::async, [&] {
            return connection::connect(client_dom, "127.0.0.1", lst.port(), client_cfg);
        });
        auto req = request_while_connecting(lst, client);
        if (!req) {
            if (auto c = client.get(); !c)
                return fail(c.error());
            return fail(req.error());
        }
        auto accepted = req->accept(server_cfg);
        auto c = client.get();
        if (accepted && c) {
            if (auto r = check_same_host(provider, server_cfg, client_cfg, *accepted, *c); !r)
                return fail(r.error());
            clients.push_back(std::move(*c));
        }
        return accepted;
    }
};

// Allocates page-aligned memory for registration (FI_MR_ALLOCATED-friendly).
struct buffer {
    explicit buffer(std::size_t n) : bytes(n) {}
    std::vector<std::byte> bytes;
    std::span<std::byte> span() { return bytes; }
};

// Polls (busy) or waits (blocking, completion_queue::next) until n completions arrive on cq or
// the deadline passes (10 s unless given).
inline std::vector<completion> collect(completion_queue& cq, std::size_t n, bool blocking,
                                       std::chrono::milliseconds limit) {
    std::vector<completion> out;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    completion buf[16];
    while (out.size() < n) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (blocking) {
            auto c = cq.next(std::max(left, 0ms));
            if (!c) {
                if (!(c.error() == errc::timed_out))
                    ADD_FAILURE() << "next: " << c.error().what();
                break;
            }
            out.push_back(*c);
            continue;
        }
        if (left <= 0ms)
            break;
        auto r = cq.poll(std::span(buf, std::min<std::size_t>(16, n - out.size())));
        if (!r) {
            ADD_FAILURE() << "poll: " << r.error().what();
            break;
        }
        out.insert(out.end(), buf, buf + *r);
    }
    return out;
}

// Waits (bounded) until `pred` holds, looking every millisecond: for a state with no event to wait
// on (a post parked in a gate, a thread entering a wait). The limit is an upper bound for
// "it never happened", not a timing assumption.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

// Writes or reads all n bytes through fd (a pipe to a forked peer process); false when it ends
// first or fails.
inline bool write_all(int fd, const void* p, std::size_t n) {
    const auto* b = static_cast<const char*>(p);
    while (n != 0) {
        const ssize_t w = ::write(fd, b, n);
        if (w <= 0)
            return false;
        b += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}
inline bool read_all(int fd, void* p, std::size_t n) {
    auto* b = static_cast<char*>(p);
    while (n != 0) {
        const ssize_t r = ::read(fd, b, n);
        if (r <= 0)
            return false;
        b += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

// SIGSTOPs the process `pid` (a forked peer) and returns once it is stopped (kill() alone
// returns before that); false when it could not.
inline bool stop_process(pid_t pid) {
    if (pid <= 0 || ::kill(pid, SIGSTOP) != 0)
        return false;
    int status = 0;
    pid_t r;
    while ((r = ::waitpid(pid, &status, WUNTRACED)) < 0 && errno == EINTR) {
    }
    return r == pid && WIFSTOPPED(status);
}

}  // namespace remora::test

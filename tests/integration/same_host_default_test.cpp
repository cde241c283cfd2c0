// SPDX-License-Identifier: BSD-3-Clause
// The same-host path is on by default: two processes of one host and user that open their
// domains and connections with the defaults take it, and a message crosses it. Either side
// keeps it off with domain_config::same_host = false, connection_config::same_host = false or
// REMORA_SAME_HOST=off; two connections of one process stay on their provider. Each test clears
// REMORA_SAME_HOST before it opens anything, so the defaults decide.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.hpp"

namespace remora::test {
namespace {

// One side's configuration, and whether it runs with REMORA_SAME_HOST=off.
struct side_config {
    domain_config dom{};
    connection_config conn{};
    bool env_off = false;
};

// What the two ends of a connection between two processes said.
struct outcome {
    bool target = false;  // the target's connection took the path
    bool client = false;  // the client's did
    char received = 0;    // the first byte of the message the client sent, as the target got it
};

bool shm_available() {
    const auto names = domain::providers(endpoint_type::rdm);
    return std::find(names.begin(), names.end(), "shm") != names.end();
}

class same_host_default : public testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        ::unsetenv("REMORA_SAME_HOST");  // the defaults decide (before anything opens)
        if (!shm_available())
            GTEST_SKIP() << "libfabric offers no shm provider here (FI_PROVIDER?)";
        const char* rules = std::getenv("REMORA_RULES");
        if (rules != nullptr && *rules != '\0' && std::string(rules) != "native")
            GTEST_SKIP() << "REMORA_RULES=" << rules << ": no same-host path under provider rules";
    }
};

// The target's side, in a child forked before the parent opens anything: listens, writes its
// port, accepts one connection, writes whether it took the path, receives one message and writes
// its first byte, then waits for the parent to close the pipe. Exits 0, or the step that failed.
[[noreturn]] void run_target(const std::string& provider, const side_config& t, int to_parent,
                             int from_parent) {
    if (t.env_off)
        ::setenv("REMORA_SAME_HOST", "off", 1);
    int code = 0;
    {
        domain_config dc = t.dom;
        dc.provider = provider;
        auto sd = domain::open(dc);
        auto l = sd ? listener::create(*sd, "127.0.0.1", 0) : fail(sd.error());
        if (!l)
            ::_exit(2);
        const std::uint16_t port = l->port();
        if (::write(to_parent, &port, sizeof port) != sizeof port)
            ::_exit(3);
        auto req = l->get_request(10s);
        auto s = req ? req->accept(t.conn) : fail(req.error());
        const char took = s && s->same_host() ? 1 : 0;
        if (::write(to_parent, &took, 1) != 1)
            ::_exit(4);
        buffer in(64);
        auto mr = s ? memory_region::create(*sd, in.span(), usage::receive) : fail(s.error());
        char got = 0;
        if (mr && s->recv(*mr, 0, 8)) {
            auto done = s->cq().next(10s);
            if (done && done->ok())
                got = static_cast<char>(in.bytes[0]);
        }
        if (::write(to_parent, &got, 1) != 1)
            code = 5;
        char none = 0;
        while (::read(from_parent, &none, 1) > 0) {
        }
    }
    ::_exit(code);
}

// A connection from this process (the client, `c`) to a target forked with `t`, which reports
// back; the client sends one message. Fails the test when a side cannot set up.
outcome connect_apart(const std::string& provider, const side_config& t, const side_config& c) {
    outcome out;
    int up[2], down[2];
    if (::pipe(up) != 0 || ::pipe(down) != 0) {
        ADD_FAILURE() << "pipe: " << std::strerror(errno);
        return out;
    }
    const pid_t child = ::fork();
    if (child < 0) {
        ADD_FAILURE() << "fork: " << std::strerror(errno);
        return out;
    }
    if (child == 0) {
        ::close(up[0]);
        ::close(down[1]);
        run_target(provider, t, up[1], down[0]);
    }
    ::close(up[1]);
    ::close(down[0]);
    if (c.env_off)
        ::setenv("REMORA_SAME_HOST", "off", 1);
    {
        std::uint16_t port = 0;
        char took = 0;
        std::optional<domain> cd;
        std::optional<connection> conn;
        if (!read_all(up[0], &port, sizeof port)) {
            ADD_FAILURE() << "the target did not listen";
        } else {
            domain_config dc = c.dom;
            dc.provider = provider;
            cd.emplace(must(domain::open(dc)));
            auto cn = connection::connect(*cd, "127.0.0.1", port, c.conn);
            if (!cn)
                ADD_FAILURE() << "connect: " << cn.error().what();
            else if (!read_all(up[0], &took, 1))
                ADD_FAILURE() << "the target did not say whether it took the path";
            else
                conn.emplace(std::move(*cn));
        }
        if (conn) {
            out.client = conn->same_host();
            out.target = took == 1;
            buffer msg(64);
            msg.bytes[0] = std::byte{'d'};
            auto mr = must(memory_region::create(*cd, msg.span(), usage::send));
            auto sent = conn->send(mr, 0, 8);
            EXPECT_TRUE(sent) << sent.error().what();
            auto done = conn->cq().next(10s);
            EXPECT_TRUE(done && done->ok())
                << (done ? done->status.message() : done.error().what());
            EXPECT_TRUE(read_all(up[0], &out.received, 1)) << "the target did not report";
        }
    }
    ::unsetenv("REMORA_SAME_HOST");
    ::close(down[1]);  // the target closes and exits
    ::close(up[0]);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (::waitpid(child, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(child, SIGKILL);
            ::waitpid(child, &status, 0);
            ADD_FAILURE() << "the target did not exit";
            break;
        }
        ::poll(nullptr, 0, 10);
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "target status " << status;
    remove_shm_regions_of(child);
    return out;
}

TEST_P(same_host_default, two_processes_with_the_defaults_take_it) {
    if (!same_host_attachable())
        GTEST_SKIP() << "the kernel would not let a peer of this user attach to this process "
                        "(Yama, not dumpable, set-id or capabilities): no same-host path here";
    const outcome o = connect_apart(GetParam(), {}, {});
    EXPECT_TRUE(o.target);
    EXPECT_TRUE(o.client);
    EXPECT_EQ(o.received, 'd');
}

TEST_P(same_host_default, either_side_keeps_it_off) {
    struct variant {
        const char* name;
        side_config target, client;
    };
    side_config no_shm, no_path, env_off;
    no_shm.dom.same_host = false;
    no_path.conn.same_host = false;
    env_off.env_off = true;
    const variant variants[] = {
        {"target domain_config::same_host false", no_shm, {}},
        {"client domain_config::same_host false", {}, no_shm},
        {"target connection_config::same_host false", no_path, {}},
        {"client connection_config::same_host false", {}, no_path},
        {"target REMORA_SAME_HOST=off", env_off, {}},
        {"client REMORA_SAME_HOST=off", {}, env_off},
    };
    for (const variant& v : variants) {
        SCOPED_TRACE(v.name);
        const outcome o = connect_apart(GetParam(), v.target, v.client);
        EXPECT_FALSE(o.target);
        EXPECT_FALSE(o.client);
        EXPECT_EQ(o.received, 'd');  // over the provider
    }
}

TEST_P(same_host_default, two_connections_of_one_process_stay_on_the_provider) {
    auto p = must(connect_pair(GetParam()));
    EXPECT_TRUE(p.server_domain.caps().same_host);  // shm is open beside both domains
    EXPECT_TRUE(p.client_domain.caps().same_host);
    EXPECT_FALSE(p.server->same_host());
    EXPECT_FALSE(p.client->same_host());
}

INSTANTIATE_TEST_SUITE_P(providers, same_host_default, testing::Values("tcp", "sockets"),
                         provider_name);

}  // namespace
}  // namespace remora::test

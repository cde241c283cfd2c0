// SPDX-License-Identifier: BSD-3-Clause
// `remora serve`, `remora put` and `remora get`: a target exposing one region, and the clients
// that copy bytes into and out of it.
#include "serve.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <optional>
#include <vector>

#include "common.hpp"

namespace remora::tool {
namespace {

using namespace std::chrono_literals;

volatile sig_atomic_t stop_requested = 0;
void on_signal(int) {
    stop_requested = 1;
}

// "64M", "4096", "1G" -> bytes.
result<std::size_t> parse_size(const std::string& s) {
    std::size_t used = 0;
    unsigned long long v = 0;
    try {
        v = std::stoull(s, &used);
    } catch (const std::exception&) {
        return fail(errc::invalid_argument, "size '" + s + "' is not a number");
    }
    const std::string suffix = s.substr(used);
    unsigned shift = 0;
    if (suffix == "K" || suffix == "k")
        shift = 10;
    else if (suffix == "M" || suffix == "m")
        shift = 20;
    else if (suffix == "G" || suffix == "g")
        shift = 30;
    else if (!suffix.empty())
        return fail(errc::invalid_argument, "size '" + s + "': unknown suffix (K, M or G)");
    if (v == 0 || v > (1ull << (40 - shift)))
        return fail(errc::invalid_argument, "size '" + s + "' must be 1 byte .. 1 TiB");
    return static_cast<std::size_t>(v << shift);
}

result<persistent_region_config> parse_region(const std::string& spec, bool create) {
    persistent_region_config cfg;
    cfg.create = create;
    if (spec.rfind("mem:", 0) == 0) {
        auto n = parse_size(spec.substr(4));
        if (!n)
            return fail(n.error());
        cfg.size = *n;
        return cfg;
    }
    if (spec.rfind("file:", 0) == 0) {
        std::string rest = spec.substr(5);
        const auto colon = rest.rfind(':');
        if (colon != std::string::npos) {
            auto n = parse_size(rest.substr(colon + 1));
            if (!n)
                return fail(n.error());
            cfg.size = *n;
            rest = rest.substr(0, colon);
        }
        if (rest.empty())
            return fail(errc::invalid_argument, "region '" + spec + "': empty path");
        cfg.path = rest;
        return cfg;
    }
    return fail(errc::invalid_argument,
                "region '" + spec + "' must be mem:SIZE or file:PATH[:SIZE]");
}

// Only this host can reach an address of the loopback network.
bool is_loopback(const std::string& host) {
    return host.rfind("127.", 0) == 0 || host == "localhost" || host == "::1";
}

void log_line(const std::string& s) {
    std::fprintf(stdout, "%s\n", s.c_str());
    std::fflush(stdout);
}

// Waits for one completion on `conn`'s CQ, at most `limit`.
result<completion> await_one(connection& conn, std::chrono::milliseconds limit) {
    auto c = conn.cq().next(limit);
    if (!c && c.error() == errc::timed_out) {
        return fail(errc::timed_out, "the target did not answer within " +
                                         std::to_string(limit.count() / 1000) + " s");
    }
    return c;
}

// Copies between `buf` and [offset, +len) of the target, in chunks the provider accepts, with a
// few operations in flight.
result<void> transfer(target_link& t, memory_region& buf, std::uint64_t offset, bool write) {
    const std::size_t len = buf.size();
    const std::size_t chunk = std::min<std::size_t>(t.dom.caps().max_msg_size, 1 << 20);
    const std::size_t depth = std::min<std::size_t>(t.conn.config().sq_size, 8);
    const std::size_t chunks = (len + chunk - 1) / chunk;
    std::size_t posted = 0, completed = 0;
    while (completed < chunks) {
        while (posted < chunks && posted - completed < depth) {
            const std::size_t at = posted * chunk;
            const std::size_t n = std::min(chunk, len - at);
            auto r = write ? t.conn.write(t.info.region, offset + at, buf, at, n)
                           : t.conn.read(buf, at, t.info.region, offset + at, n);
            if (!r)
                return fail(r.error());
            ++posted;
        }
        auto c = await_one(t.conn, 10s);
        if (!c)
            return fail(c.error());
        if (!c->ok())
            return fail(c->status, write ? "write" : "read");
        ++completed;
    }
    return {};
}

}  // namespace

int run_serve(const serve_options& o) {
    auto cfg = parse_region(o.region, o.create);
    if (!cfg)
        return report("serve", cfg.error());
    auto addr = split_address(o.listen);
    if (!addr)
        return report("serve", addr.error());
    auto dom = domain::open({.provider = o.provider, .node = addr->first});
    if (!dom)
        return report("serve", dom.error());
    auto region = persistent_region::open(*dom, *cfg);
    if (!region)
        return report("serve", region.error());
    auto service = target_service::create();
    if (!service)
        return report("serve", service.error());
    auto desc = service->expose(*region);
    if (!desc)
        return report("serve", desc.error());
    std::optional<admission_gate> gate;
    if (!o.key_file.empty()) {
        auto key = admission_key::load(o.key_file);
        if (!key)
            return report("serve", key.error());
        auto g = admission_gate::create(std::move(*key));
        if (!g)
            return report("serve", g.error());
        gate.emplace(std::move(*g));
    }
    auto lst = listener::create(*dom, addr->first, addr->second);
    if (!lst)
        return report("serve", lst.error());
    if (!gate && !is_loopback(addr->first))
        std::fprintf(stderr,
                     "remora serve: WARNING: listening on %s without --key-file: anyone who "
                     "reaches this port may read and write the whole region\n",
                     addr->first.c_str());
    const auto handshake =
        std::chrono::milliseconds(static_cast<std::int64_t>(o.handshake_timeout * 1000));

    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);

    const std::string what = region->is_persistent()
                                 ? "file " + region->path() + ", persistent (flush: gpspm)"
                                 : std::string("memory, volatile (flush: visibility only)");
    log_line(fmt::format("remora serve: listening on {}:{} ({}), region of {} bytes in {}, {}",
                         addr->first, lst->port(), dom->caps().provider, region->memory().size(),
                         what, gate ? "admission by key" : "no admission (no --key-file)"));
    struct client {
        std::uint64_t id;
        connection conn;
    };
    std::vector<client> clients;
    std::uint64_t next_id = 1;
    while (!stop_requested) {
        auto req = lst->get_request(100ms);
        if (req) {
            if (clients.size() >= o.max_clients) {
                (void)req->reject(admission_reject_data(admission_refusal::overloaded));
                log_line(fmt::format("rejected a client: {} clients connected (--max-clients)",
                                     clients.size()));
                continue;
            }
            std::span<const std::byte> data = req->private_data();
            std::string who;
            std::vector<std::byte> payload;
            if (gate) {
                auto admitted = gate->admit(*req);
                if (!admitted) {
                    log_line(fmt::format("refused a client: {}", admitted.error().message()));
                    continue;
                }
                who = std::move(admitted->identity);
                payload = std::move(admitted->payload);
                data = payload;
            }
            const std::uint16_t want = parse_depth_request(data);
            if (want == 0 || want > o.depth) {
                (void)req->reject();
                log_line(fmt::format("rejected a client asking for service depth {} (max {})", want,
                                     o.depth));
                continue;
            }
            const auto hello = make_hello(want, *desc);
            auto conn = req->accept(
                {.connect_timeout = handshake, .progress_thread = true, .service_depth = want},
                hello);
            if (!conn) {
                log_line(fmt::format("accept failed: {}", conn.error().what()));
                continue;
            }
            if (auto r = service->serve(*conn); !r) {
                log_line(fmt::format("serve failed: {}", r.error().what()));
                continue;
            }
            log_line(fmt::format("client {} connected ({} connected{})", next_id,
                                 clients.size() + 1, gate ? "; identity " + who : ""));
            clients.push_back({next_id++, std::move(*conn)});
        } else if (!(req.error() == errc::timed_out) && !stop_requested) {
            log_line(fmt::format("listener: {}", req.error().what()));
        }
        for (auto it = clients.begin(); it != clients.end();) {
            auto ev = it->conn.next_event(0ms);
            if (ev && (*ev == conn_event::closed || *ev == conn_event::lost)) {
                log_line(fmt::format("client {} {}", it->id, to_string(*ev)));
                it = clients.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& c : clients)
        (void)c.conn.close();
    clients.clear();
    if (region->is_persistent()) {
        if (auto r = region->persist(0, region->memory().size()); !r)
            return report("serve", r.error());
    }
    log_line(fmt::format("remora serve: stopped after {} service requests ({} refused){}",
                         service->requests(), service->refused(),
                         region->is_persistent() ? "; region persisted" : ""));
    return 0;
}

// The client's side of connect_target: the key from --key-file, and who we say we are.
result<target_link> connect_with_options(const transfer_options& o) {
    if (o.key_file.empty())
        return connect_target(o.provider, o.target);
    auto key = admission_key::load(o.key_file);
    if (!key)
        return fail(key.error());
    char host[256] = "unknown";
    (void)gethostname(host, sizeof host - 1);
    const char* user = std::getenv("USER");
    std::string identity = std::string(user != nullptr ? user : "remora") + "@" + host;
    identity.resize(std::min(identity.size(), admission_max_identity));
    return connect_target(o.provider, o.target, default_service_depth, &*key, identity);
}

int run_put(const transfer_options& o) {
    std::vector<char> in((std::istreambuf_iterator<char>(std::cin)),
                         std::istreambuf_iterator<char>());
    auto t = connect_with_options(o);
    if (!t)
        return report("put", t.error());
    const remote_region& r = t->info.region;
    if (in.empty()) {
        std::fprintf(stderr, "remora put: nothing on stdin, nothing written\n");
        return 0;
    }
    if (o.offset > r.length() || in.size() > r.length() - o.offset)
        return report("put", error(errc::out_of_range,
                                   fmt::format("{} bytes at offset {} do not fit the region of {} "
                                               "bytes",
                                               in.size(), o.offset, r.length())));
    auto buf = memory_region::create(t->dom, {reinterpret_cast<std::byte*>(in.data()), in.size()},
                                     usage::write_source);
    if (!buf)
        return report("put", buf.error());
    if (auto w = transfer(*t, *buf, o.offset, true); !w)
        return report("put", w.error());
    if (o.no_flush) {
        std::fprintf(stderr, "remora put: %zu bytes written at offset %llu (not flushed)\n",
                     in.size(), static_cast<unsigned long long>(o.offset));
        return 0;
    }
    const bool persistent = any(r.persistence() & persistence::persistent);
    const flush_options how{.type = persistent ? flush_type::persistence : flush_type::visibility};
    auto method = t->conn.flush_method_for(r, how);
    if (!method)
        return report("put", method.error());
    if (auto f = t->conn.flush(r, o.offset, in.size(), how); !f)
        return report("put", f.error());
    auto c = await_one(t->conn, 10s);
    if (!c)
        return report("put", c.error());
    if (!c->ok())
        return report("put", error(c->status, "flush"));
    if (!persistent) {
        std::fprintf(stderr,
                     "remora put: %zu bytes written and visible, NOT durable: the target's region "
                     "is volatile\n",
                     in.size());
        return 2;
    }
    std::fprintf(stderr, "remora put: %zu bytes at offset %llu, durable (%s)\n", in.size(),
                 static_cast<unsigned long long>(o.offset), to_string(*method));
    return 0;
}

int run_get(const transfer_options& o) {
    auto t = connect_with_options(o);
    if (!t)
        return report("get", t.error());
    const remote_region& r = t->info.region;
    if (o.offset >= r.length())
        return report("get", error(errc::out_of_range,
                                   fmt::format("offset {} is beyond the region of {} bytes",
                                               o.offset, r.length())));
    const std::uint64_t len = o.length == 0 ? r.length() - o.offset : o.length;
    if (len > r.length() - o.offset)
        return report("get", error(errc::out_of_range,
                                   fmt::format("{} bytes at offset {} exceed the region of {} "
                                               "bytes",
                                               len, o.offset, r.length())));
    std::vector<std::byte> out(len);
    auto buf = memory_region::create(t->dom, out, usage::read_destination);
    if (!buf)
        return report("get", buf.error());
    if (auto g = transfer(*t, *buf, o.offset, false); !g)
        return report("get", g.error());
    if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size())
        return report("get", error(errc::invalid_argument, "cannot write to stdout"));
    return 0;
}

int run_keygen(const std::string& path) {
    auto key = admission_key::generate();
    if (!key)
        return report("keygen", key.error());
    if (auto r = key->save(path); !r)
        return report("keygen", r.error());
    std::fprintf(stderr, "remora keygen: wrote a new 32-byte admission key to %s (mode 0600)\n",
                 path.c_str());
    return 0;
}

}  // namespace remora::tool

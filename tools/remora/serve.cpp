// SPDX-License-Identifier: BSD-3-Clause
// `remora serve`, `remora put` and `remora get`: a target exposing one region, and the clients
// that copy bytes into and out of it.
#include "serve.hpp"

#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include "args.hpp"
#include "common.hpp"

namespace remora::tool {
namespace {

using namespace std::chrono_literals;

volatile sig_atomic_t stop_requested = 0;
void on_signal(int) {
    stop_requested = 1;
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

namespace {

// One admission key and the role it grants.
struct role_key {
    bool rw = false;
    std::string file;
    admission_gate gate;
};

// "[ro=|rw=]FILE" -> role and file.
result<std::pair<bool, std::string>> parse_key_spec(const std::string& spec) {
    if (spec.rfind("ro=", 0) == 0)
        return std::pair{false, spec.substr(3)};
    if (spec.rfind("rw=", 0) == 0)
        return std::pair{true, spec.substr(3)};
    if (spec.empty())
        return fail(errc::invalid_argument, "--key-file: empty path");
    return std::pair{true, spec};
}

// File descriptors this process may still open (RLIMIT_NOFILE minus those open now).
long fds_left() {
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return std::numeric_limits<long>::max();
    DIR* d = opendir("/proc/self/fd");
    if (d == nullptr)
        return 0;  // not even one fd left to look
    long open_now = 0;
    while (readdir(d) != nullptr)
        ++open_now;
    closedir(d);
    open_now -= 3;  // ".", ".." and the directory's own fd
    return static_cast<long>(rl.rlim_cur) - open_now;
}

}  // namespace

int run_serve(const serve_options& o) {
    auto cfg = parse_region(o.region, o.create);
    if (!cfg)
        return report("serve", cfg.error());
    cfg->exclusive = !o.unguarded;
    auto addr = split_address(o.listen);
    if (!addr)
        return report("serve", addr.error());
    if (o.access != "ro" && o.access != "rw")
        return report("serve", error(errc::invalid_argument, "--access must be ro or rw"));
    std::vector<role_key> keys;
    for (const auto& spec : o.key_files) {
        auto ks = parse_key_spec(spec);
        if (!ks)
            return report("serve", ks.error());
        auto key = admission_key::load(ks->second);
        if (!key)
            return report("serve", key.error());
        auto g = admission_gate::create(std::move(*key));
        if (!g)
            return report("serve", g.error());
        keys.push_back({ks->first, ks->second, std::move(*g)});
    }
    const bool any_ro = keys.empty()
                            ? o.access == "ro"
                            : std::any_of(keys.begin(), keys.end(), [](auto& k) { return !k.rw; });
    const bool any_rw = keys.empty()
                            ? o.access == "rw"
                            : std::any_of(keys.begin(), keys.end(), [](auto& k) { return k.rw; });
    auto dom = domain::open(
        {.provider = o.provider, .node = addr->first, .same_host = o.same_host == "on"});
    if (!dom)
        return report_line("serve", listen_failure(o.listen, dom.error()));
    auto region = persistent_region::open(*dom, *cfg);
    if (!region)
        return report("serve", region.error());
    if (struct stat st{}; region->is_persistent() && ::stat(region->path().c_str(), &st) == 0 &&
                          (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
        std::fprintf(stderr,
                     "remora serve: WARNING: %s is open to other users (mode %03o): they can "
                     "read the region, and opening the file stops this target\n",
                     region->path().c_str(), static_cast<unsigned>(st.st_mode & 0777));
    auto service = target_service::create();
    if (!service)
        return report("serve", service.error());
    // Per-client access: read-write clients get the persistent region's own registration
    // (remote write, atomics, flush); read-only clients a second registration of the same
    // memory for remote read only, with its own key. The service answers each client only for
    // the registration it was handed (serve with a grant).
    std::optional<remote_region> rw_desc, ro_desc;
    std::optional<memory_region> ro_mr;
    if (any_rw) {
        auto d = service->expose(*region);
        if (!d)
            return report("serve", d.error());
        rw_desc = *d;
    }
    if (any_ro) {
        auto mr = memory_region::create(*dom, region->memory(), usage::read_source);
        if (!mr)
            return report("serve", mr.error());
        ro_mr.emplace(std::move(*mr));
        auto d = service->expose(*ro_mr);
        if (!d)
            return report("serve", d.error());
        ro_desc = *d;
    }
    auto lst = listener::create(*dom, addr->first, addr->second);
    if (!lst)
        return report_line("serve", listen_failure(o.listen, lst.error()));
    // Plain TCP connects that never send hold nothing here: the kernel keeps them until their
    // first byte, and drops them after the handshake timeout.
    const bool deferred = static_cast<bool>(lst->defer_silent_connects(
        std::chrono::milliseconds(static_cast<std::int64_t>(o.handshake_timeout * 1000))));
    if (keys.empty() && !is_loopback(addr->first))
        std::fprintf(stderr,
                     "remora serve: WARNING: listening on %s without --key-file: anyone who "
                     "reaches this port may %s the whole region\n",
                     addr->first.c_str(), any_rw ? "read and write" : "read");
    const auto handshake =
        std::chrono::milliseconds(static_cast<std::int64_t>(o.handshake_timeout * 1000));
    const auto idle = std::chrono::milliseconds(static_cast<std::int64_t>(o.idle_timeout * 1000));
    const auto reply_limit =
        std::chrono::milliseconds(static_cast<std::int64_t>(o.reply_timeout * 1000));

    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);

    const std::string what = region->is_persistent()
                                 ? "file " + region->path() + ", persistent (flush: gpspm)"
                                 : std::string("memory, volatile (flush: visibility only)");
    std::string admission;
    if (keys.empty()) {
        admission = fmt::format("no admission (no --key-file), every client {}",
                                any_rw ? "read-write" : "read-only");
    } else {
        admission = "admission by key (";
        for (std::size_t i = 0; i < keys.size(); ++i)
            admission += fmt::format("{}{}", i ? ", " : "", keys[i].rw ? "rw" : "ro");
        admission += ")";
    }
    log_line(fmt::format("remora serve: listening on {}:{} ({}), region of {} bytes in {}, {}{}",
                         addr->first, lst->port(), dom->caps().provider, region->memory().size(),
                         what, admission,
                         deferred ? "" : "; silent TCP connects are not bounded on this provider"));
    struct client {
        std::uint64_t id;
        connection conn;
        std::chrono::steady_clock::time_point last_seen;
        std::uint64_t requests = 0;
    };
    std::vector<client> clients;
    std::uint64_t next_id = 1;
    // Back-off after a failing listener (e.g. out of file descriptors): no spinning.
    auto backoff = 0ms;
    bool trim_pending = false;
    bool revoked = false;
    auto last_silent_sweep = std::chrono::steady_clock::now();
    while (!stop_requested) {
        // Another process opened or is truncating the region's file: it waits until the
        // region is closed, so stop now, before the file can change under the mapping.
        if (region->revoked()) {
            revoked = true;
            log_line(
                fmt::format("remora serve: another process opened {}; stopping before the "
                            "file can change under the region",
                            region->path()));
            break;
        }
        auto req = lst->get_request(100ms);
        if (req) {
            backoff = 0ms;
            const long left = fds_left();
            if (clients.size() >= o.max_clients || left < static_cast<long>(o.fd_reserve)) {
                (void)req->reject(admission_reject_data(admission_refusal::overloaded));
                if (clients.size() >= o.max_clients)
                    log_line(fmt::format("rejected a client: {} clients connected (--max-clients)",
                                         clients.size()));
                else
                    log_line(
                        fmt::format("rejected a client: out of file descriptors ({} left, "
                                    "{} reserved; raise `ulimit -n`)",
                                    left, o.fd_reserve));
                continue;
            }
            std::span<const std::byte> data = req->private_data();
            std::string who;
            std::vector<std::byte> payload;
            bool rw = any_rw;
            if (!keys.empty()) {
                // The key that verifies decides the role; a token that is malformed, stale or
                // replayed is refused as such whichever key it names.
                std::optional<result<admitted_peer>> admitted;
                for (auto& k : keys) {
                    auto a = k.gate.check(data);
                    const bool next_key =
                        !a && admission_refusal_of(a.error()) == admission_refusal::bad_proof;
                    admitted.emplace(std::move(a));
                    if (!next_key) {
                        rw = k.rw;
                        break;
                    }
                }
                if (!*admitted) {
                    const auto why = admission_refusal_of(admitted->error());
                    (void)req->reject(
                        admission_reject_data(why.value_or(admission_refusal::malformed)));
                    log_line(fmt::format("refused a client: {}", admitted->error().message()));
                    continue;
                }
                who = std::move((*admitted)->identity);
                payload = std::move((*admitted)->payload);
                data = payload;
            }
            const auto want = parse_depth_request(data);
            if (!want || *want > o.depth) {
                (void)req->reject();
                log_line(want ? fmt::format("rejected a client asking for service depth {} "
                                            "(max {})",
                                            *want, o.depth)
                              : fmt::format("rejected a client: {}", want.error().message()));
                continue;
            }
            const remote_region& desc = rw ? *rw_desc : *ro_desc;
            const auto hello = make_hello(*want, desc);
            // A same-host path checks no memory keys: only a read-write client may take one.
            auto conn = req->accept({.connect_timeout = handshake,
                                     .progress_thread = true,
                                     .addons = {remora::persistence_config{.service_depth = *want}},
                                     .same_host = rw},
                                    hello);
            if (!conn) {
                log_line(fmt::format("accept failed: {}", conn.error().what()));
                trim_pending = true;
                continue;
            }
            if (auto r = service->serve(*conn, std::span(&desc, 1)); !r) {
                log_line(fmt::format("serve failed: {}", r.error().what()));
                continue;
            }
            log_line(fmt::format("client {} connected ({} connected; {}{}{})", next_id,
                                 clients.size() + 1, rw ? "read-write" : "read-only",
                                 conn->same_host() ? "; same host, shared memory" : "",
                                 keys.empty() ? "" : "; identity " + who));
            clients.push_back({next_id++, std::move(*conn), std::chrono::steady_clock::now()});
        } else if (!(req.error() == errc::timed_out) && !stop_requested) {
            // Not a request: the provider's listener failed (typically accepting a socket
            // without a free fd). Log once per streak and back off up to 1 s.
            if (backoff == 0ms)
                log_line(fmt::format("listener: {} (backing off)", req.error().what()));
            backoff = std::clamp(backoff * 2, 10ms, 1000ms);
            std::this_thread::sleep_for(backoff);
        }
        const auto now = std::chrono::steady_clock::now();
        for (auto it = clients.begin(); it != clients.end();) {
            auto ev = it->conn.next_event(0ms);
            if (ev && (*ev == conn_event::closed || *ev == conn_event::lost)) {
                log_line(fmt::format("client {} {}", it->id, to_string(*ev)));
                it = clients.erase(it);
                trim_pending = true;
                continue;
            }
            if (const auto n = service->requests(it->conn); n != it->requests) {
                it->requests = n;
                it->last_seen = now;
            }
            // A client that takes no replies (no receives posted, or stopped reading) holds
            // its slot and the target's send queue for good otherwise: closed, and told so in
            // the log (it reads nothing, so nothing sent would reach it).
            if (const auto waited = service->reply_wait(it->conn); waited >= reply_limit) {
                log_line(
                    fmt::format("client {} closed: a reply waited {:.1f} s for it to take "
                                "it (--reply-timeout)",
                                it->id, std::chrono::duration<double>(waited).count()));
                (void)it->conn.close();
                it = clients.erase(it);
                trim_pending = true;
                continue;
            }
            if (idle > 0ms && now - it->last_seen >= idle) {
                log_line(
                    fmt::format("client {} evicted: no service request for {} s "
                                "(--idle-timeout)",
                                it->id, o.idle_timeout));
                (void)it->conn.close();
                it = clients.erase(it);
                trim_pending = true;
                continue;
            }
            ++it;
        }
        // Silent TCP connects the kernel handed over once the deferral ran out: a socket
        // handed over without a byte has been silent for the whole handshake timeout already.
        if (deferred && now - last_silent_sweep >= 250ms) {
            last_silent_sweep = now;
            if (auto n = lst->drop_silent_connects(1ms); n && *n > 0)
                log_line(fmt::format("dropped {} TCP connects silent for {} s", *n,
                                     o.handshake_timeout));
        }
        // Give the memory of departed clients back to the system (glibc keeps freed heap in
        // its arenas otherwise: RSS grew by ~150 MB over rounds of 300 clients).
        if (trim_pending) {
            malloc_trim(0);
            trim_pending = false;
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
    return revoked ? 1 : 0;
}

// The client's side of connect_target: the key from --key-file, and who we say we are.
result<target_link> connect_with_options(const transfer_options& o, const std::string& address,
                                         std::uint16_t depth, const domain* shared, bool progress) {
    if (o.key_file.empty())
        return connect_target(o.provider, address, depth, nullptr, {}, shared, progress);
    auto key = admission_key::load(o.key_file);
    if (!key)
        return fail(key.error());
    char host[256] = "unknown";
    (void)gethostname(host, sizeof host - 1);
    const char* user = std::getenv("USER");
    std::string identity = std::string(user != nullptr ? user : "remora") + "@" + host;
    identity.resize(std::min(identity.size(), admission_max_identity));
    return connect_target(o.provider, address, depth, &*key, identity, shared, progress);
}

int run_put(const transfer_options& o) {
    std::vector<char> in((std::istreambuf_iterator<char>(std::cin)),
                         std::istreambuf_iterator<char>());
    auto t = connect_with_options(o, o.target);
    if (!t)
        return report_line("put", t.error().message());
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
    auto method = remora::flush_method_for(t->conn, r, how);
    if (!method)
        return report("put", method.error());
    if (auto f = remora::flush(t->conn, r, o.offset, in.size(), how); !f)
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
    auto t = connect_with_options(o, o.target);
    if (!t)
        return report_line("get", t.error().message());
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

// `remora bench`: workloads against a loopback target started in this process.
//
// Operations: write, read (one-sided, `qd` in flight), send (ping-pong: the target echoes), gpspm
// (write, then a flush request message the target answers, written with send/recv: librpma's
// GPSPM request/response, the completion-channel workload), and through remora's persistence
// layer: flush-raw (write, then a read-after-write flush for visibility), flush-gpspm (write,
// then connection::flush to persistence through the target service: the append-log workload),
// atomic-write, cas, fetch-add (native atomics where the provider has them, else the service).
// Completions are reaped by busy polling or blocking waits, with separate or shared completion
// channels, receives on the CQ or a separate receive CQ. Figures: operations/s, MiB/s, latency
// percentiles (post to completion; request to reply), and process CPU time per operation.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_internal.hpp"
#include "serve.hpp"

namespace remora::tool {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

constexpr std::size_t request_size = 16;  // gpspm flush request: offset + length

}  // namespace

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

result<figures> summarize(std::vector<std::uint32_t>& lat, double seconds, double cpu,
                          std::size_t size) {
    if (lat.empty())
        return fail(errc::timed_out, "no operation completed");
    std::sort(lat.begin(), lat.end());
    auto pct = [&](double p) {
        const auto i = static_cast<std::size_t>(p * static_cast<double>(lat.size()));
        return lat[std::min(lat.size() - 1, i)] / 1e3;
    };
    figures f;
    f.ops = lat.size();
    f.seconds = seconds;
    f.ops_per_s = static_cast<double>(f.ops) / seconds;
    f.mib_per_s = f.ops_per_s * static_cast<double>(size) / (1024.0 * 1024.0);
    f.p50_us = pct(0.50);
    f.p99_us = pct(0.99);
    f.p999_us = pct(0.999);
    f.cpu_us_per_op = cpu * 1e6 / static_cast<double>(f.ops);
    return f;
}

namespace {

connection_config config_for(const setup& s, bool target) {
    connection_config c;
    c.sq_size = std::max(16u, s.qd * 2);
    c.rq_size = std::max(16u, s.qd * 2);
    c.rcq = s.rcq;
    c.channel = s.channel == "shared" ? channel_mode::shared : channel_mode::separate;
    // Only one-sided workloads leave the target's application idle: there the library's
    // progress thread serves the peer. Two-sided targets progress as they poll or wait.
    c.progress_thread = target && (s.op == "write" || s.op == "read" || persistence_op(s.op));
    // One service request per operation in flight (a flush or an atomic without native support).
    if (persistence_op(s.op))
        c.service_depth = std::max(1u, s.qd);
    return c;
}

// Reaps completions of one connection the configured way; returns how many it wrote into out.
result<std::size_t> reap(connection& c, const setup& s, bool want_recv, std::span<completion> out) {
    std::size_t n = 0;
    auto poll_into = [&](completion_queue& q) -> result<void> {
        auto r = q.poll(out.subspan(n));
        if (!r)
            return fail(r.error());
        n += *r;
        return {};
    };
    if (s.wait == "blocking") {
        if (c.config().channel == channel_mode::shared) {
            auto ev = c.wait(100ms);
            if (!ev && !(ev.error() == errc::timed_out))
                return fail(ev.error());
        } else {
            completion_queue& q = want_recv && c.rcq() != nullptr ? *c.rcq() : c.cq();
            auto w = q.wait(100ms);
            if (!w && !(w.error() == errc::timed_out))
                return fail(w.error());
        }
    }
    if (auto r = poll_into(c.cq()); !r)
        return fail(r.error());
    if (c.rcq() != nullptr && n < out.size()) {
        if (auto r = poll_into(*c.rcq()); !r)
            return fail(r.error());
    }
    return n;
}

// The loopback target: accepts the connections, exposes one region, answers send/gpspm.
class target {
  public:
    result<void> start(const setup& s) {
        auto d = domain::open({.provider = s.provider});
        if (!d)
            return fail(d.error());
        dom_ = std::move(*d);
        auto l = listener::create(*dom_, "127.0.0.1", 0);
        if (!l)
            return fail(l.error());
        lst_ = std::move(*l);
        mem_.resize(std::max<std::size_t>(s.size * s.qd, 4096));
        if (persistence_op(s.op)) {
            // A file-backed region in $TMPDIR, exposed through the target service.
            const char* tmp = std::getenv("TMPDIR");
            std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/remora-bench-XXXXXX";
            const int fd = ::mkstemp(path.data());
            if (fd < 0)
                return fail(errc::invalid_argument, "bench: cannot create a file in " + path);
            ::close(fd);
            auto pr = persistent_region::open(
                *dom_,
                {.path = path, .size = std::max<std::size_t>(s.size * s.qd, 4096), .create = true});
            ::unlink(path.c_str());  // the mapping keeps it alive
            if (!pr)
                return fail(pr.error());
            region_ = std::move(*pr);
            auto svc = target_service::create();
            if (!svc)
                return fail(svc.error());
            service_ = std::move(*svc);
            auto d = service_->expose(*region_);
            if (!d)
                return fail(d.error());
            desc_ = *d;
            return {};
        }
        auto mr = memory_region::create(
            *dom_, mem_,
            usage::write_destination | usage::read_source | usage::send | usage::receive);
        if (!mr)
            return fail(mr.error());
        mr_ = std::move(*mr);
        msg_.resize(std::max<std::size_t>(s.size, request_size) * s.qd * 2 * s.connections);
        auto mm = memory_region::create(*dom_, msg_, usage::send | usage::receive);
        if (!mm)
            return fail(mm.error());
        msg_mr_ = std::move(*mm);
        return {};
    }
    std::uint16_t port() const { return lst_->port(); }

    // Accepts one connection (the client connects concurrently) and serves it on a thread.
    result<void> accept_and_serve(const setup& s, unsigned index) {
        auto req = lst_->get_request(10s);
        if (!req)
            return fail(req.error());
        auto desc = service_ ? result<remote_region>(desc_) : mr_->describe();
        if (!desc)
            return fail(desc.error());
        const auto bytes = desc->serialize();
        auto c = req->accept(config_for(s, true), bytes);
        if (!c)
            return fail(c.error());
        if (service_) {
            if (auto r = service_->serve(*c); !r)
                return fail(r.error());
        }
        conns_.push_back(std::make_unique<connection>(std::move(*c)));
        connection* conn = conns_.back().get();
        if (s.op == "send" || s.op == "gpspm") {
            threads_.emplace_back([this, conn, s, index] { serve(*conn, s, index); });
        }
        return {};
    }

    void stop() {
        stop_ = true;
        for (auto& t : threads_)
            t.join();
        threads_.clear();
        conns_.clear();
        service_.reset();
        region_.reset();
    }
    ~target() { stop(); }

  private:
    void serve(connection& c, const setup& s, unsigned index) {
        const std::size_t slot = std::max(s.size, request_size);
        const std::size_t base = static_cast<std::size_t>(index) * s.qd * 2 * slot;
        for (unsigned i = 0; i < s.qd; ++i) {
            (void)c.recv(*msg_mr_, base + i * slot, slot,
                         {.context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(i))});
        }
        completion done[16];
        while (!stop_ && c.is_open()) {
            auto n = reap(c, s, true, done);
            if (!n)
                return;
            for (std::size_t i = 0; i < *n; ++i) {
                if (done[i].op != op::recv || !done[i].ok())
                    continue;
                const auto k = reinterpret_cast<std::uintptr_t>(done[i].context);
                // gpspm: the range would be persisted here (a memory region is volatile).
                const std::size_t reply = s.op == "send" ? s.size : 8;
                (void)c.send(*msg_mr_, base + (s.qd + k) * slot, reply,
                             {.completion = completion_mode::on_error});
                (void)c.recv(*msg_mr_, base + k * slot, slot, {.context = done[i].context});
            }
        }
    }

    std::optional<domain> dom_;
    std::optional<listener> lst_;
    std::vector<std::byte> mem_, msg_;
    std::optional<memory_region> mr_, msg_mr_;
    std::optional<persistent_region> region_;
    std::optional<target_service> service_;
    remote_region desc_;
    std::vector<std::unique_ptr<connection>> conns_;
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
};

struct client_result {
    std::vector<std::uint32_t> lat_ns;
    std::uint64_t ops = 0;
    std::optional<error> failure;
    void fail(const error& e) { failure = e; }
};

// Callback mode: each completion lands here, on the thread that polls (the client's own).
thread_local std::vector<completion>* callback_sink = nullptr;
void to_sink(const completion& c) {
    callback_sink->push_back(c);
}

// Coroutine mode: one coroutine per slot of the queue depth, each awaiting its operations in a
// loop; they resume on this thread, inside the CQ polls below.
template <class PostWith>
task slot_loop(connection& c, unsigned k, clock::time_point end, client_result& out,
               std::vector<clock::time_point>& started, PostWith& post_with) {
    for (;;) {
        auto r = co_await co_op(c, [&](op_options o) { return post_with(k, o); });
        const auto now = clock::now();
        if (!r) {
            out.fail(r.error());
            co_return;
        }
        out.lat_ns.push_back(static_cast<std::uint32_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - started[k]).count()));
        ++out.ops;
        if (now >= end)
            co_return;
    }
}

template <class PostWith>
void run_coroutines(connection& c, const setup& s, clock::time_point end, client_result& out,
                    std::vector<clock::time_point>& started, PostWith& post_with) {
    out.lat_ns.reserve(1 << 20);
    std::vector<task> tasks;
    for (unsigned k = 0; k < s.qd; ++k)
        tasks.push_back(slot_loop(c, k, end, out, started, post_with));
    completion done[16];
    auto all_done = [&] {
        return std::all_of(tasks.begin(), tasks.end(), [](const task& t) { return t.done(); });
    };
    while (!all_done()) {
        auto n = reap(c, s, false, done);  // completions go to the coroutines' callbacks
        if (!n) {
            out.fail(n.error());
            return;
        }
        if (clock::now() > end + 10s) {
            out.fail(error(errc::timed_out, "operations did not complete"));
            return;
        }
    }
}

void run_client(connection& c, const remote_region& remote, const setup& s, clock::time_point end,
                client_result& out) {
    std::vector<completion> sink;
    sink.reserve(static_cast<std::size_t>(s.qd) * 2);
    callback_sink = &sink;
    void (*const callback)(const completion&) = s.callbacks ? &to_sink : nullptr;
    const std::size_t slot = std::max(s.size, request_size);
    std::vector<std::byte> buf(slot * s.qd * 2 + std::max<std::size_t>(s.size, 8) * s.qd);
    auto mr = memory_region::create(
        c.dom(), buf, usage::write_source | usage::read_destination | usage::send | usage::receive);
    if (!mr) {
        out.fail(mr.error());
        return;
    }
    const std::size_t data_base = slot * s.qd * 2;
    std::vector<clock::time_point> started(s.qd);
    const bool two_sided = s.op == "send" || s.op == "gpspm";
    // Service replies arrive where receives complete: the RCQ when there is one.
    const bool on_rcq =
        two_sided || (c.rcq() != nullptr &&
                      (s.op == "flush-gpspm" || (persistence_op(s.op) && s.op != "flush-raw" &&
                                                 c.atomics() == atomic_path::service)));
    // Registration of the local buffer per operation: none (registered once, above), a fresh
    // registration each time (held until the operation completes), or the registration cache.
    std::optional<registration_cache> cache;
    if (s.registration == "cache") {
        auto rc = registration_cache::create(c.dom(), 64);
        if (!rc) {
            out.fail(rc.error());
            return;
        }
        cache = std::move(*rc);
    }
    std::vector<std::optional<memory_region>> fresh(s.qd);
    std::vector<cached_region> cached(s.qd);
    auto local = [&](unsigned k) -> result<std::pair<const memory_region*, std::size_t>> {
        const std::size_t at = data_base + k * s.size;
        const usage u = s.op == "read" ? usage::read_destination : usage::write_source;
        if (s.registration == "per-op") {
            fresh[k].reset();  // the previous operation of this slot has completed
            auto r = memory_region::create(c.dom(), std::span(buf).subspan(at, s.size), u);
            if (!r)
                return fail(r.error());
            fresh[k] = std::move(*r);
            return std::pair{&*fresh[k], std::size_t{0}};
        }
        if (cache) {
            auto r = cache->get(std::span(buf).subspan(at, s.size), u);
            if (!r)
                return fail(r.error());
            cached[k] = *r;
            return std::pair{&cached[k].region(), cached[k].offset()};
        }
        return std::pair{&*mr, at};
    };
    auto post_with = [&](unsigned k, const op_options& done) -> result<void> {
        started[k] = clock::now();
        const std::uint64_t roff = (k * s.size) % remote.length();
        if (s.op == "write" || s.op == "read") {
            auto l = local(k);
            if (!l)
                return fail(l.error());
            const auto [region, at] = *l;
            return s.op == "write" ? c.write(remote, roff, *region, at, s.size, done)
                                   : c.read(*region, at, remote, roff, s.size, done);
        }
        const std::uint64_t word = (static_cast<std::uint64_t>(k) * 8) % remote.length();
        if (s.op == "flush-raw" || s.op == "flush-gpspm") {
            // The write completes silently; the flush completes the operation.
            if (auto r = c.write(remote, roff, *mr, data_base + k * s.size, s.size,
                                 {.completion = completion_mode::on_error});
                !r)
                return r;
            const flush_options how =
                s.op == "flush-raw"
                    ? flush_options{flush_type::visibility, flush_method::read_after_write}
                    : flush_options{flush_type::persistence, flush_method::gpspm};
            return c.flush(remote, roff, s.size, how, done);
        }
        if (s.op == "atomic-write")
            return c.atomic_write(remote, word, k, done);
        if (s.op == "cas")
            return c.compare_swap(remote, word, 0, 0, *mr, data_base + k * 8, done);
        if (s.op == "fetch-add")
            return c.fetch_add(remote, word, 1, *mr, data_base + k * 8, done);
        if (s.op == "gpspm") {
            // The write completes silently; the flush request's reply completes the operation.
            if (auto r = c.write(remote, roff, *mr, data_base + k * s.size, s.size,
                                 {.completion = completion_mode::on_error});
                !r)
                return r;
            std::uint64_t req[2] = {roff, s.size};
            std::memcpy(buf.data() + (s.qd + k) * slot, req, sizeof(req));
            return c.send(*mr, (s.qd + k) * slot, request_size,
                          {.completion = completion_mode::on_error});
        }
        return c.send(*mr, (s.qd + k) * slot, s.size, {.completion = completion_mode::on_error});
    };
    auto post = [&](unsigned k) -> result<void> {
        void* ctx = reinterpret_cast<void*>(static_cast<std::uintptr_t>(k));
        return post_with(k, {.context = ctx, .callback = callback});
    };
    if (s.coroutines) {
        run_coroutines(c, s, end, out, started, post_with);
        return;
    }
    for (unsigned k = 0; k < s.qd; ++k) {
        if (two_sided) {
            auto r = c.recv(*mr, k * slot, slot,
                            {.context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(k))});
            if (!r) {
                out.fail(r.error());
                return;
            }
        }
        if (auto r = post(k); !r) {
            out.fail(r.error());
            return;
        }
    }
    out.lat_ns.reserve(1 << 20);
    unsigned in_flight = s.qd;
    completion done[32];  // 16 from poll, and as many from callbacks at most
    while (in_flight > 0) {
        auto n = reap(c, s, on_rcq, std::span(done, 16));
        if (!n) {
            out.fail(n.error());
            return;
        }
        std::size_t total = *n;
        for (const completion& cb : sink) {
            done[total++] = cb;
        }
        sink.clear();
        const auto now = clock::now();
        for (std::size_t i = 0; i < total; ++i) {
            const completion& d = done[i];
            if (!d.ok()) {
                out.fail(error(d.status, std::string(to_string(d.op)) + " failed"));
                return;
            }
            if (two_sided && d.op != op::recv)
                continue;
            const auto k = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(d.context));
            out.lat_ns.push_back(static_cast<std::uint32_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(now - started[k]).count()));
            ++out.ops;
            if (now >= end) {
                --in_flight;
                continue;
            }
            if (two_sided) {
                if (auto r = c.recv(*mr, k * slot, slot, {.context = d.context}); !r) {
                    out.fail(r.error());
                    return;
                }
            }
            if (auto r = post(k); !r) {
                out.fail(r.error());
                return;
            }
        }
    }
}

// Connects the clients: to the in-process loopback target, or to a `remora serve` at s.target
// (which sends its region's descriptor in a hello and serves flushes and atomics).
result<void> connect_all(const setup& s, target* t, domain& cd, std::vector<connection>& conns,
                         std::vector<remote_region>& remotes) {
    for (unsigned i = 0; i < s.connections; ++i) {
        if (t == nullptr) {
            auto hp = split_address(s.target);
            if (!hp)
                return fail(hp.error());
            connection_config cfg = config_for(s, false);
            cfg.service_depth = std::max(1u, s.qd);
            const std::array<std::byte, 2> want{static_cast<std::byte>(cfg.service_depth & 0xff),
                                                static_cast<std::byte>(cfg.service_depth >> 8)};
            auto c = connection::connect(cd, hp->first, hp->second, cfg, want);
            if (!c)
                return fail(c.error());
            auto h = parse_hello(c->peer_private_data());
            if (!h)
                return fail(h.error());
            conns.push_back(std::move(*c));
            remotes.push_back(h->region);
            continue;
        }
        result<void> served;
        std::thread acceptor([&] { served = t->accept_and_serve(s, i); });
        auto c = connection::connect(cd, "127.0.0.1", t->port(), config_for(s, false));
        acceptor.join();
        if (!c)
            return fail(c.error());
        if (!served)
            return fail(served.error());
        auto remote = remote_region::parse(c->peer_private_data());
        if (!remote)
            return fail(remote.error());
        conns.push_back(std::move(*c));
        remotes.push_back(*remote);
    }
    return {};
}

// A progress bar on a terminal for runs of a couple of seconds or more.
void show_progress(const setup& s, clock::time_point t0, clock::time_point end,
                   const std::atomic<bool>& finished) {
    if (!::isatty(STDERR_FILENO) || s.duration < 2.0)
        return;
    const double total = std::chrono::duration<double>(end - t0).count();
    while (!finished.load()) {
        const double done =
            std::min(1.0, std::chrono::duration<double>(clock::now() - t0).count() / total);
        const int width = 30;
        const int filled = static_cast<int>(done * width);
        fmt::print(stderr, "\r{} {}B qd{} [{}{}] {:3.0f}%", s.op, s.size, s.qd,
                   std::string(static_cast<std::size_t>(filled), '#'),
                   std::string(static_cast<std::size_t>(width - filled), ' '), done * 100);
        std::fflush(stderr);
        std::this_thread::sleep_for(200ms);
    }
    fmt::print(stderr, "\r{}\r", std::string(60, ' '));
}

result<figures> run_one(const setup& s) {
    if (s.coroutines && (s.op == "send" || s.op == "gpspm"))
        return fail(errc::invalid_argument,
                    "--completion coroutine covers one-sided, flush and atomic operations");
    if (s.registration != "pre" && s.op != "write" && s.op != "read")
        return fail(errc::invalid_argument, "--registration applies to write and read");
    std::optional<target> t;
    if (s.target.empty()) {
        t.emplace();
        if (auto r = t->start(s); !r)
            return fail(r.error());
    } else if (s.op == "send" || s.op == "gpspm") {
        return fail(errc::invalid_argument,
                    "op " + s.op +
                        " needs the loopback target (a `remora serve` target carries "
                        "only its service's messages)");
    }
    std::optional<domain> cd;
    if (auto d = domain::open({.provider = s.provider}); d)
        cd = std::move(*d);
    else
        return fail(d.error());
    std::vector<connection> conns;
    std::vector<remote_region> remotes;
    if (auto r = connect_all(s, t ? &*t : nullptr, *cd, conns, remotes); !r)
        return fail(r.error());
    std::vector<client_result> results(s.connections);
    const double cpu0 = cpu_seconds();
    const auto t0 = clock::now();
    const auto end =
        t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s.duration));
    std::vector<std::thread> clients;
    for (unsigned i = 0; i < s.connections; ++i) {
        clients.emplace_back([&, i] { run_client(conns[i], remotes[i], s, end, results[i]); });
    }
    std::atomic<bool> finished{false};
    std::thread bar([&] { show_progress(s, t0, end, finished); });
    for (auto& th : clients)
        th.join();
    finished = true;
    bar.join();
    const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
    const double cpu = cpu_seconds() - cpu0;
    std::vector<std::uint32_t> lat;
    for (auto& r : results) {
        if (r.failure)
            return fail(*r.failure);
        lat.insert(lat.end(), r.lat_ns.begin(), r.lat_ns.end());
    }
    for (auto& c : conns)
        (void)c.close();
    if (t)
        t->stop();
    return summarize(lat, seconds, cpu, s.size);
}

std::vector<setup> suite(const bench_options& o) {
    std::vector<setup> out;
    auto base = [&] {
        setup s;
        s.provider = o.provider;
        s.op = o.ops.front();
        s.wait = o.wait;
        s.channel = o.channel;
        s.rcq = o.rcq;
        s.callbacks = o.completion == "callback";
        s.coroutines = o.completion == "coroutine";
        s.registration = o.registration;
        s.connections = o.connections;
        s.qd = o.qd;
        s.size = o.sizes.front();
        s.duration = o.duration;
        s.target = o.target;
        return s;
    };
    if (o.suite == "channels") {
        // GPSPM request/response with CQ + RCQ, blocking waits on both sides: the completion
        // channel question librpma left open, at 1 and 8 connections.
        for (unsigned conns : {1u, 8u}) {
            for (const char* ch : {"separate", "shared"}) {
                setup s = base();
                s.op = "gpspm";
                s.wait = "blocking";
                s.rcq = true;
                s.channel = ch;
                s.connections = conns;
                s.qd = 1;
                out.push_back(s);
            }
        }
    } else if (o.suite == "slots") {
        // The same 8-byte write through poll(), per-operation callbacks and coroutines; then
        // 4 KiB writes whose buffer is registered once, per operation, or through the cache.
        for (const char* how : {"poll", "callback", "coroutine"}) {
            setup s = base();
            s.op = "write";
            s.size = 8;
            s.qd = 1;
            s.connections = 1;
            s.wait = "busy";
            s.callbacks = std::string(how) == "callback";
            s.coroutines = std::string(how) == "coroutine";
            s.registration = "pre";
            out.push_back(s);
        }
        for (const char* reg : {"pre", "per-op", "cache"}) {
            setup s = base();
            s.op = "write";
            s.size = 4096;
            s.qd = 4;
            s.connections = 1;
            s.wait = "busy";
            s.callbacks = false;
            s.coroutines = false;
            s.registration = reg;
            out.push_back(s);
        }
    } else if (o.suite == "persistence") {
        // Flush latency by method and each atomic path side by side, then the append log: a
        // record written and flushed to persistence (GPSPM) at sizes 64 B .. 64 KiB.
        for (const char* op : {"flush-raw", "flush-gpspm", "atomic-write", "cas", "fetch-add"}) {
            setup s = base();
            s.op = op;
            s.size = 8;
            s.qd = 1;
            s.connections = 1;
            s.wait = "blocking";
            out.push_back(s);
        }
        for (std::size_t size : {64, 1024, 16384, 65536}) {
            setup s = base();
            s.op = "flush-gpspm";
            s.size = size;
            s.qd = 1;
            s.connections = 1;
            s.wait = "blocking";
            out.push_back(s);
        }
    } else if (o.suite == "default") {
        for (const char* op : {"write", "read", "send", "gpspm", "flush-gpspm"}) {
            setup s = base();
            s.op = op;
            s.size = 8;
            s.qd = 1;
            s.connections = 1;
            // Two-sided operations block: two busy pollers on a 2-core machine starve the
            // kernel's loopback delivery and measure the scheduler, not the fabric.
            const std::string name = op;
            s.wait =
                name == "send" || name == "gpspm" || name == "flush-gpspm" ? "blocking" : "busy";
            out.push_back(s);
        }
        setup bw = base();
        bw.op = "write";
        bw.size = 65536;
        bw.qd = 16;
        bw.connections = 1;
        out.push_back(bw);
    } else {
        for (const std::string& op : o.ops) {
            for (std::size_t size : o.sizes) {
                setup s = base();
                s.op = op;
                s.size = size;
                out.push_back(s);
            }
        }
    }
    return out;
}

// The op column: the operation, how it completes, how its buffer is registered.
std::string label(const setup& s) {
    std::string l = s.op;
    if (s.callbacks)
        l += "+cb";
    if (s.coroutines)
        l += "+co";
    if (s.registration == "per-op")
        l += "+reg";
    if (s.registration == "cache")
        l += "+rc";
    return l;
}

// Draws ops/s and latency (p50, p99) per result into a PNG with gnuplot.
result<void> plot(const std::vector<std::pair<setup, figures>>& rows, const std::string& png) {
    const char* tmp = std::getenv("TMPDIR");
    std::string data = std::string(tmp != nullptr ? tmp : "/tmp") + "/remora-plot-XXXXXX";
    const int fd = ::mkstemp(data.data());
    if (fd < 0)
        return fail(errc::invalid_argument, "cannot create a temporary file for the plot data");
    std::string text;
    for (const auto& [s, f] : rows) {
        text += fmt::format("\"{} {}B qd{}{}\" {:.0f} {:.2f} {:.2f}\n", label(s), s.size, s.qd,
                            s.connections > 1 ? fmt::format(" x{}", s.connections) : "",
                            f.ops_per_s, f.p50_us, f.p99_us);
    }
    const bool wrote = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!wrote)
        return fail(errc::invalid_argument, "cannot write the plot data");
    const std::string script = fmt::format(
        "set terminal pngcairo size 1200,800 font ',10'; set output '{}';"
        "set multiplot layout 2,1 title 'remora bench';"
        "set style data histograms; set style histogram clustered; set style fill solid 0.8;"
        "set xtics rotate by -30; set grid ytics; set key top left;"
        "set logscale y; set yrange [1:*];"
        "set ylabel 'operations/s'; plot '{}' using 2:xtic(1) title 'ops/s';"
        "set ylabel 'latency (us)';"
        "plot '{}' using 3:xtic(1) title 'p50', '' using 4 title 'p99';"
        "unset multiplot",
        png, data, data);
    const std::string cmd = "gnuplot -e \"" + script + "\" 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    if (p != nullptr) {
        char buf[256];
        while (std::fgets(buf, sizeof(buf), p) != nullptr)
            out += buf;
    }
    const int status = p != nullptr ? ::pclose(p) : -1;
    ::unlink(data.c_str());
    if (status != 0)
        return fail(errc::not_supported,
                    "gnuplot failed (install gnuplot-nox): " + out.substr(0, out.find('\n')));
    return {};
}

}  // namespace

int run_bench(const bench_options& o) {
    bench_options resolved = o;
    if (resolved.provider.empty()) {
        // Name the provider the automatic choice lands on, in the table and for the baseline.
        auto d = domain::open({});
        if (!d)
            return report("bench", d.error());
        resolved.provider = d->caps().provider;
    }
    const auto setups = suite(resolved);
    if (!o.json) {
        fmt::print(
            "{:<8} {:<12} {:>7} {:>3} {:>5} {:<9} {:<8} {:>4} {:>11} {:>9} {:>8} {:>8} {:>8} "
            "{:>9}\n",
            "provider", "op", "size", "qd", "conns", "wait", "channel", "rcq", "ops/s", "MiB/s",
            "p50 us", "p99 us", "p99.9 us", "cpu us/op");
    }
    auto row = [&](const std::string& prov, const setup& s, const figures& f) {
        fmt::print(
            "{:<8} {:<12} {:>7} {:>3} {:>5} {:<9} {:<8} {:>4} {:>11.0f} {:>9.1f} {:>8.1f} {:>8.1f} "
            "{:>8.1f} {:>9.2f}\n",
            prov, label(s), s.size, s.qd, s.connections, s.wait, s.channel, s.rcq ? "yes" : "no",
            f.ops_per_s, f.mib_per_s, f.p50_us, f.p99_us, f.p999_us, f.cpu_us_per_op);
    };
    auto as_json = [](const figures& f) {
        return nlohmann::json{{"ops", f.ops},
                              {"seconds", f.seconds},
                              {"ops_per_s", f.ops_per_s},
                              {"mib_per_s", f.mib_per_s},
                              {"p50_us", f.p50_us},
                              {"p99_us", f.p99_us},
                              {"p999_us", f.p999_us},
                              {"cpu_us_per_op", f.cpu_us_per_op}};
    };
    std::vector<std::pair<setup, figures>> plotted;
    for (const setup& s : setups) {
        auto f = run_one(s);
        if (!f)
            return report("bench", f.error());
        plotted.emplace_back(s, *f);
        const std::string& prov = s.provider;
        // The baseline covers what plain libfabric code in baseline.cpp does.
        std::optional<figures> base;
        if (o.baseline && (s.op == "write" || s.op == "read" || s.op == "send") &&
            s.connections == 1 && !s.rcq && s.channel == "separate") {
            auto b = run_baseline(s);
            if (!b)
                return report("bench --baseline", b.error());
            base = *b;
        }
        if (o.json) {
            nlohmann::json j = {{"provider", prov},
                                {"op", s.op},
                                {"size", s.size},
                                {"qd", s.qd},
                                {"connections", s.connections},
                                {"wait", s.wait},
                                {"channel", s.channel},
                                {"rcq", s.rcq}};
            j["completion"] = s.callbacks ? "callback" : s.coroutines ? "coroutine" : "poll";
            j["registration"] = s.registration;
            j.update(as_json(*f));
            if (base) {
                j["baseline"] = as_json(*base);
                j["ratio_ops_per_s"] = f->ops_per_s / base->ops_per_s;
                j["ratio_p50"] = f->p50_us / base->p50_us;
            }
            fmt::print("{}\n", j.dump());
        } else {
            row(prov, s, *f);
            if (base) {
                setup plain = s;  // the baseline reads its CQ directly, registers once
                plain.callbacks = false;
                plain.coroutines = false;
                plain.registration = "pre";
                row("fi:" + prov, plain, *base);
                fmt::print("{:<8} remora/baseline: ops/s x{:.3f}, p50 x{:.3f}, p99 x{:.3f}\n",
                           "ratio", f->ops_per_s / base->ops_per_s, f->p50_us / base->p50_us,
                           f->p99_us / base->p99_us);
            }
        }
        std::fflush(stdout);
    }
    if (!o.plot.empty()) {
        if (auto r = plot(plotted, o.plot); !r)
            return report("bench --plot", r.error());
    }
    return 0;
}

}  // namespace remora::tool

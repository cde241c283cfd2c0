// SPDX-License-Identifier: BSD-3-Clause
// `remora bench`: workloads against a loopback target started in this process.
//
// Operations: write, read (one-sided, `qd` in flight), send (ping-pong: the target echoes), gpspm
// (write, then a flush request message the target answers, written with send/recv: librpma's
// GPSPM request/response, the completion-channel workload), and through remora's persistence
// layer: flush-raw (write, then a read-after-write flush for visibility), flush-gpspm (write,
// then connection::flush to persistence through the target service: the append-log workload),
// atomic-write, cas, fetch-add (native atomics where the provider has them, else the service).
// Completions are reaped by busy polling or blocking waits, with separate or shared completion
// channels, receives on the CQ or a separate receive CQ, a CQ per connection or one shared CQ
// (--shared-cq), every write/send signalled or one in N (--signal-every). Figures: operations/s,
// MiB/s, latency percentiles (post to completion; request to reply; none for unsignalled
// writes), and process CPU time per operation.
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
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

pinned::pinned(const setup& s, side who) {
    static_assert(sizeof(saved_) == sizeof(cpu_set_t));
    if (!s.pin)
        return;
    auto* saved = reinterpret_cast<cpu_set_t*>(saved_);
    if (pthread_getaffinity_np(pthread_self(), sizeof(cpu_set_t), saved) != 0)
        return;
    const int cpus = std::max(1, CPU_COUNT(saved));
    // The n-th CPU the thread may run on: 0 for the target, 1 for the client.
    const int want = who == side::target ? 0 : std::min(1, cpus - 1);
    int seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, saved))
            continue;
        if (seen++ == want) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pinned_ = pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
            return;
        }
    }
}

pinned::~pinned() {
    if (pinned_)
        pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t),
                               reinterpret_cast<cpu_set_t*>(saved_));
}

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

result<figures> summarize(std::vector<std::uint32_t>& lat, double seconds, double cpu,
                          std::size_t size) {
    return summarize(lat, lat.size(), seconds, cpu, size);
}

result<figures> summarize(std::vector<std::uint32_t>& lat, std::uint64_t ops, double seconds,
                          double cpu, std::size_t size) {
    if (ops == 0)
        return fail(errc::timed_out, "no operation completed");
    figures f;
    f.ops = ops;
    f.seconds = seconds;
    f.ops_per_s = static_cast<double>(f.ops) / seconds;
    f.mib_per_s = f.ops_per_s * static_cast<double>(size) / (1024.0 * 1024.0);
    f.cpu_us_per_op = cpu * 1e6 / static_cast<double>(f.ops);
    f.has_latency = !lat.empty();
    if (f.has_latency) {
        std::sort(lat.begin(), lat.end());
        auto pct = [&](double p) {
            const auto i = static_cast<std::size_t>(p * static_cast<double>(lat.size()));
            return lat[std::min(lat.size() - 1, i)] / 1e3;
        };
        f.p50_us = pct(0.50);
        f.p99_us = pct(0.99);
        f.p999_us = pct(0.999);
    }
    return f;
}

// One read of the connection's CQs (and first a wait, when blocking).
result<std::size_t> reaper::operator()(bool want_recv, std::span<completion> out) {
    std::size_t n = 0;
    auto poll_into = [&](completion_queue& q) -> result<void> {
        auto r = q.poll(out.subspan(n));
        if (!r)
            return fail(r.error());
        n += *r;
        return {};
    };
    if (blocking_) {
        if (shared_channel_) {
            auto ev = c_.wait(100ms);
            if (!ev && !(ev.error() == errc::timed_out))
                return fail(ev.error());
        } else {
            completion_queue& q = want_recv && rcq_ != nullptr ? *rcq_ : cq_;
            auto w = q.wait(100ms);
            if (!w && !(w.error() == errc::timed_out))
                return fail(w.error());
        }
    }
    if (auto r = poll_into(cq_); !r)
        return fail(r.error());
    if (rcq_ != nullptr && n < out.size()) {
        if (auto r = poll_into(*rcq_); !r)
            return fail(r.error());
    }
    return n;
}

namespace {

bool rdm(const setup& s) {
    return s.endpoint == "rdm";
}

endpoint_type endpoint_of(const std::string& e) {
    return e == "rdm" ? endpoint_type::rdm : endpoint_type::msg;
}

// The loopback target's progress policy (--target-progress; the library default when unset).
progress_policy target_policy(const setup& s) {
    if (s.target_progress == "busy")
        return progress_policy::busy;
    if (s.target_progress == "blocking")
        return progress_policy::blocking;
    if (s.target_progress == "adaptive")
        return progress_policy::adaptive;
    return domain_config{}.progress;
}

connection_config config_for(const setup& s, bool target) {
    connection_config c;
    c.sq_size = std::max({16u, s.qd * 2, s.parts});  // --op gather: a write per part at once
    c.rq_size = std::max(16u, s.qd * 2);
    if (!target && s.shared_cq && s.connections > 16 && (s.op == "write" || s.op == "read")) {
        // One shared CQ holds every connection's entries, at most the provider's CQ depth (tcp:
        // 512): one-sided clients need no receives, and qd * 2 send entries.
        c.sq_size = std::max(4u, s.qd * 2);
        c.rq_size = 4;
    }
    c.rcq = s.rcq;
    c.channel = s.channel == "shared" ? channel_mode::shared : channel_mode::separate;
    // Only one-sided workloads leave the target's application idle: there the library's
    // progress thread serves the peer. Two-sided targets progress as they poll or wait. An RDM
    // target busy-polls its CQ on a thread of its own for one-sided workloads too (see class
    // target), as the plain libfabric baseline does; the service's requests still need the
    // progress thread.
    c.progress_thread =
        target && (persistence_op(s.op) ||
                   (!rdm(s) && (s.op == "write" || s.op == "read" || s.op == "gather")));
    // One service request per operation in flight (a flush or an atomic without native support).
    if (persistence_op(s.op))
        c.service_depth = std::max(1u, s.qd);
    if (s.signal_every > 1 && (!target || s.op == "send")) {
        // Room for up to N - 1 unsignalled operations awaiting reclaim besides the qd in flight
        // (sends are counted by their replies, not by their entries). A send target signals
        // one reply in N too, as plain libfabric's target (the baseline) signals none.
        c.signal_every = s.signal_every;
        c.sq_size = std::max(c.sq_size, s.qd + s.signal_every);
    }
    return c;
}

// A client connection's configuration: to the loopback target, or to a `remora serve`
// (remote), which serves flushes and atomics to one request per operation in flight.
connection_config client_config(const setup& s, bool remote) {
    connection_config c = config_for(s, false);
    if (remote)
        c.service_depth = std::max(1u, s.qd);
    return c;
}

// Writes under --signal-every N > 1: posted with completion_mode::on_error, up to N - 1 in a row
// without a completion (see class client below).
bool quiet_writes(const setup& s) {
    return s.signal_every > 1 && s.op == "write";
}

// What an RDM target hands its client: its peer address and its region's descriptor.
struct peer_offer {
    std::vector<std::byte> address, descriptor;
};

// The loopback target: accepts the connections (MSG) or opens a peer for each client (RDM),
// exposes one region, answers send/gpspm. An RDM target's thread busy-polls its CQ whatever
// the operation: shm and rxm move one-sided traffic only when the target calls into the
// provider, and a busy poller is the fastest way to do that (the baseline does the same).
class target {
  public:
    result<void> start(const setup& s) {
        domain_config dc{.provider = s.provider, .endpoint = endpoint_of(s.endpoint)};
        dc.progress = target_policy(s);
        if (s.target_spin_us != 0)
            dc.progress_spin = std::chrono::microseconds(s.target_spin_us);
        auto d = domain::open(dc);
        if (!d)
            return fail(d.error());
        dom_ = std::move(*d);
        if (!rdm(s)) {
            auto l = listener::create(*dom_, "127.0.0.1", 0);
            if (!l)
                return fail(l.error());
            lst_ = std::move(*l);
        }
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
        if (s.op == "gather") {
            // A region of its own per part: each part of a gather_write carries another key.
            segment_mem_.resize(s.parts);
            for (auto& m : segment_mem_) {
                m.resize(s.size);
                auto r = memory_region::create(*dom_, m, usage::write_destination);
                if (!r)
                    return fail(r.error());
                segment_mr_.push_back(std::move(*r));
            }
        }
        msg_.resize(std::max<std::size_t>(s.size, request_size) * s.qd * 2 * s.connections);
        auto mm = memory_region::create(*dom_, msg_, usage::send | usage::receive);
        if (!mm)
            return fail(mm.error());
        msg_mr_ = std::move(*mm);
        return {};
    }
    std::uint16_t port() const { return lst_->port(); }

    // --op gather: the descriptors of the part regions, handed over in memory (the connection's
    // private data carries one descriptor), as the user's own exchange would carry them.
    result<std::vector<remote_region>> segments() const {
        std::vector<remote_region> out;
        for (const memory_region& m : segment_mr_) {
            auto d = m.describe();
            if (!d)
                return fail(d.error());
            out.push_back(*d);
        }
        return out;
    }

    // Accepts one connection (the client connects concurrently) and serves it on a thread.
    result<void> accept_and_serve(const setup& s, unsigned index) {
        auto req = lst_->get_request(10s);
        if (!req)
            return fail(req.error());
        auto desc = descriptor();
        if (!desc)
            return fail(desc.error());
        auto c = req->accept(config_for(s, true), desc->serialize());
        if (!c)
            return fail(c.error());
        return adopt(std::move(*c), s, index);
    }

    // RDM: opens a peer for the client at `client_address`, serves it on a thread, and returns
    // what the client needs to reach it.
    result<peer_offer> open_peer_for(const setup& s, unsigned index,
                                     std::span<const std::byte> client_address) {
        auto desc = descriptor();
        if (!desc)
            return fail(desc.error());
        auto c = connection::open_peer(*dom_, config_for(s, true));
        if (!c)
            return fail(c.error());
        if (auto r = c->attach(client_address); !r)
            return fail(r.error());
        const auto local = c->local_address();
        peer_offer offer{{local.begin(), local.end()}, {}};
        const auto bytes = desc->serialize();
        offer.descriptor.assign(bytes.begin(), bytes.end());
        if (auto r = adopt(std::move(*c), s, index); !r)
            return fail(r.error());
        return offer;
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
    result<remote_region> descriptor() const {
        return service_ ? result<remote_region>(desc_) : mr_->describe();
    }

    // Serves a new connection: through the service (persistence ops), and on a thread that
    // answers sends (send, gpspm) or, over RDM, busy-polls to drive progress.
    result<void> adopt(connection c, const setup& s, unsigned index) {
        if (service_) {
            if (auto r = service_->serve(c); !r)
                return fail(r.error());
        }
        conns_.push_back(std::make_unique<connection>(std::move(c)));
        connection* conn = conns_.back().get();
        if (s.op == "send" || s.op == "gpspm" || (rdm(s) && !persistence_op(s.op))) {
            setup served = s;
            if (rdm(s))
                served.wait = "busy";
            threads_.emplace_back([this, conn, served, index] { serve(*conn, served, index); });
        }
        return {};
    }

    void serve(connection& c, const setup& s, unsigned index) {
        const pinned on(s, side::target);
        const std::size_t slot = std::max(s.size, request_size);
        const std::size_t base = static_cast<std::size_t>(index) * s.qd * 2 * slot;
        const bool two_sided = s.op == "send" || s.op == "gpspm";
        for (unsigned i = 0; two_sided && i < s.qd; ++i) {
            (void)c.recv(*msg_mr_, base + i * slot, slot,
                         {.context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(i))});
        }
        completion done[16];
        reaper reap(c, s);
        // Replies the provider could not take yet (would_block: an RDM provider still setting
        // up its path to the peer, shm mapping it or rxm connecting); sent again after a reap.
        std::vector<std::uintptr_t> later;
        const std::size_t reply = s.op == "send" ? s.size : 8;
        auto answer = [&](std::uintptr_t k) {
            auto r = c.send(*msg_mr_, base + (s.qd + k) * slot, reply,
                            {.report = completion_mode::on_error});
            return r || !(r.error() == errc::would_block);
        };
        while (!stop_ && c.is_open()) {
            if (!later.empty())
                std::erase_if(later, answer);
            auto n = reap(true, done);
            if (!n)
                return;
            for (std::size_t i = 0; i < *n; ++i) {
                if (done[i].op != op::recv || !done[i].ok())
                    continue;
                const auto k = reinterpret_cast<std::uintptr_t>(done[i].context);
                // gpspm: the range would be persisted here (a memory region is volatile).
                if (!answer(k))
                    later.push_back(k);
                (void)c.recv(*msg_mr_, base + k * slot, slot, {.context = done[i].context});
            }
        }
    }

    std::optional<domain> dom_;
    std::optional<listener> lst_;
    std::vector<std::byte> mem_, msg_;
    std::optional<memory_region> mr_, msg_mr_;
    std::vector<std::vector<std::byte>> segment_mem_;  // --op gather: a buffer per part
    std::vector<memory_region> segment_mr_;
    std::optional<persistent_region> region_;
    std::optional<target_service> service_;
    remote_region desc_;
    std::vector<std::unique_ptr<connection>> conns_;
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
};

// Callback mode: each completion lands here, on the thread that polls (the client's own).
thread_local std::vector<completion>* callback_sink = nullptr;
void to_sink(const completion& c) {
    callback_sink->push_back(c);
}

// The completions a poll wrote into done[0, n), followed by those callbacks left in `sink`
// (which is emptied); returns the total.
std::size_t append_callbacks(completion* done, std::size_t n, std::vector<completion>& sink) {
    for (const completion& cb : sink) {
        done[n++] = cb;
    }
    sink.clear();
    return n;
}

// True (and the run failed) once operations are still outstanding 10 s after the run's end or,
// under --count, once no completion came for 10 s (`last`: the latest one, or the start).
bool overdue(const setup& s, clock::time_point now, clock::time_point end, clock::time_point last,
             client_result& out) {
    if (s.count != 0 && now > last + 10s) {
        out.fail(error(errc::timed_out, "no operation completed for 10 s"));
        return true;
    }
    if (now <= end + 10s)
        return false;
    out.fail(error(errc::timed_out, "operations did not complete"));
    return true;
}

// Coroutine mode: one coroutine per slot of the queue depth, each awaiting its operations in a
// loop; they resume on this thread, inside the CQ polls below. `posts_left`: the connection's
// --count budget, shared by its coroutines.
template <class PostWith>
task slot_loop(connection& c, unsigned k, clock::time_point end, client_result& out,
               std::vector<clock::time_point>& started, PostWith& post_with,
               std::uint64_t& posts_left) {
    for (;;) {
        if (posts_left == 0)
            co_return;
        --posts_left;
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
                    std::vector<clock::time_point>& started, PostWith& post_with,
                    std::uint64_t budget) {
    out.lat_ns.reserve(1 << 20);
    std::vector<task> tasks;
    std::uint64_t posts_left = budget;
    for (unsigned k = 0; k < s.qd; ++k)
        tasks.push_back(slot_loop(c, k, end, out, started, post_with, posts_left));
    completion done[16];
    reaper reap(c, s);
    auto all_done = [&] {
        return std::all_of(tasks.begin(), tasks.end(), [](const task& t) { return t.done(); });
    };
    auto last = clock::now();
    std::uint64_t seen = out.ops;
    while (!all_done()) {
        auto n = reap(false, done);  // completions go to the coroutines' callbacks
        if (!n) {
            out.fail(n.error());
            return;
        }
        const auto now = clock::now();
        if (out.ops != seen) {
            seen = out.ops;
            last = now;
        }
        if (overdue(s, now, end, last, out))
            return;
    }
}

// One client connection's workload: keeps s.qd operations in flight and counts those whose
// completion is known. Driven by run_client (the connection's own CQs, a thread per connection)
// or run_shared (one thread reading the shared CQ of every connection).
//
// Selective signalling (--signal-every N > 1) on writes ("quiet" mode): every write is posted
// with completion_mode::on_error and no context, so the library leaves up to N - 1 in a row
// unsignalled (all are signalled above caps().inject_size), and poll() reports no success at
// all: the library reads the signalled ones itself. A write counts as done when its entry is
// reclaimed: connection::in_flight() drops when the library reads a signalled completion, which
// frees that write and every unsignalled one posted before it, so the writes known complete are
// those posted minus in_flight(). The client keeps qd writes posted and not yet reclaimed (qd
// is raised to N when smaller: with fewer, no write would ever be signalled). Which write is
// signalled is the library's choice, so no per-operation latency is measured (the table prints
// "-"). After the end, it reads completions until fewer than N remain in flight: those trailing
// unsignalled writes wait for a signal that never comes and are not counted. Sends under
// --signal-every are counted as before, by the target's reply: their latency stays meaningful.
class client {
  public:
    client(connection& c, const remote_region& remote, const setup& s, clock::time_point end,
           client_result& out, void (*callback)(const completion&), std::uint64_t budget)
        : c_(c),
          remote_(remote),
          s_(s),
          end_(end),
          budget_(budget),
          out_(out),
          callback_(callback),
          slot_(std::max(s.size, request_size)),
          data_base_(slot_ * s.qd * 2),
          kind_(kind_of(s.op)),
          per_op_registration_(s.registration == "per-op"),
          two_sided_(s.op == "send" || s.op == "gpspm"),
          quiet_(quiet_writes(s)),
          started_(s.qd),
          fresh_(s.qd),
          cached_(s.qd) {}

    // Registers the buffers; false (with out.failure set) when that fails.
    bool init() {
        buf_.resize(slot_ * s_.qd * 2 + std::max<std::size_t>(s_.size, 8) * s_.qd);
        auto mr = memory_region::create(
            c_.dom(), buf_,
            usage::write_source | usage::read_destination | usage::send | usage::receive);
        if (!mr)
            return failed(mr.error());
        mr_ = std::move(*mr);
        // Service replies arrive where receives complete: the RCQ when there is one.
        on_rcq_ = two_sided_ ||
                  (c_.rcq() != nullptr &&
                   (s_.op == "flush-gpspm" || (persistence_op(s_.op) && s_.op != "flush-raw" &&
                                               c_.atomics() == atomic_path::service)));
        if (s_.registration == "cache") {
            auto rc = registration_cache::create(c_.dom(), 64);
            if (!rc)
                return failed(rc.error());
            cache_ = std::move(*rc);
        }
        out_.lat_ns.reserve(quiet_ ? 0 : 1 << 20);
        return true;
    }

    // The first qd operations (and the receives for their replies).
    bool start() {
        if (quiet_)
            return refill();
        for (unsigned k = 0; k < s_.qd && posts_ < budget_; ++k) {
            if (two_sided_) {
                auto r = c_.recv(*mr_, k * slot_, slot_, {.context = context(k)});
                if (!r)
                    return failed(r.error());
            }
            if (!post_or_defer(k))
                return false;
            ++posts_;
            ++in_flight_;
        }
        return true;
    }

    // A completion of this connection, read at `now`.
    bool handle(const completion& d, clock::time_point now) {
        if (!d.ok())
            return failed(error(d.status, std::string(to_string(d.op)) + " failed"));
        if (quiet_ || (two_sided_ && d.op != op::recv))
            return true;  // quiet: successes are not reported; two-sided: the reply counts
        const auto k = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(d.context));
        out_.lat_ns.push_back(static_cast<std::uint32_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - started_[k]).count()));
        ++out_.ops;
        if (now >= end_ || posts_ >= budget_) {
            --in_flight_;
            return true;
        }
        if (two_sided_) {
            if (auto r = c_.recv(*mr_, k * slot_, slot_, {.context = d.context}); !r)
                return failed(r.error());
        }
        ++posts_;
        return post_or_defer(k);
    }

    // After each read of the CQ: posts refused before are tried again. Quiet mode: count what
    // was reclaimed and post up to qd again.
    bool settle(clock::time_point now) {
        if (!deferred_.empty()) {
            const std::vector<unsigned> again = std::exchange(deferred_, {});
            for (unsigned k : again) {
                if (!post_or_defer(k))
                    return false;
            }
        }
        if (!quiet_)
            return true;
        out_.ops = posted_ - c_.in_flight();
        if (now < end_ && posted_ < budget_)
            return refill();
        // Fewer than N in flight: none of them is signalled (at most N - 1 in a row are not).
        // Under --count the last write was signalled: all are reclaimed once it completes.
        quiet_done_ =
            posted_ >= budget_ ? c_.in_flight() == 0 : c_.in_flight() < c_.config().signal_every;
        return true;
    }

    [[nodiscard]] bool finished() const { return quiet_ ? quiet_done_ : in_flight_ == 0; }
    // settle() has work after a read that found nothing: quiet mode counts reclaimed writes,
    // and refused posts wait to be tried again.
    [[nodiscard]] bool settles_idle() const { return quiet_ || !deferred_.empty(); }
    [[nodiscard]] bool on_rcq() const { return on_rcq_; }
    std::vector<clock::time_point>& started() { return started_; }

    // Posts the operation of slot k with these options.
    result<void> post_with(unsigned k, const op_options& done) {
        started_[k] = clock::now();
        const std::uint64_t roff = (k * s_.size) % remote_.length();
        const memory_region& mr = *mr_;
        if (kind_ == kind::write || kind_ == kind::read) {
            auto l = local(k);
            if (!l)
                return fail(l.error());
            const auto [region, at] = *l;
            return kind_ == kind::write ? c_.write(remote_, roff, *region, at, s_.size, done)
                                        : c_.read(*region, at, remote_, roff, s_.size, done);
        }
        const std::uint64_t word = (static_cast<std::uint64_t>(k) * 8) % remote_.length();
        if (kind_ == kind::flush_raw || kind_ == kind::flush_gpspm) {
            // The write completes silently; the flush completes the operation.
            if (auto r = c_.write(remote_, roff, mr, data_base_ + k * s_.size, s_.size,
                                  {.report = completion_mode::on_error});
                !r)
                return r;
            const flush_options how =
                kind_ == kind::flush_raw
                    ? flush_options{flush_type::visibility, flush_method::read_after_write}
                    : flush_options{flush_type::persistence, flush_method::gpspm};
            return c_.flush(remote_, roff, s_.size, how, done);
        }
        if (kind_ == kind::atomic_write)
            return c_.atomic_write(remote_, word, k, done);
        if (kind_ == kind::cas)
            return c_.compare_swap(remote_, word, 0, 0, mr, data_base_ + k * 8, done);
        if (kind_ == kind::fetch_add)
            return c_.fetch_add(remote_, word, 1, mr, data_base_ + k * 8, done);
        if (kind_ == kind::gpspm) {
            // The write completes silently; the flush request's reply completes the operation.
            if (auto r = c_.write(remote_, roff, mr, data_base_ + k * s_.size, s_.size,
                                  {.report = completion_mode::on_error});
                !r)
                return r;
            std::uint64_t req[2] = {roff, s_.size};
            std::memcpy(buf_.data() + (s_.qd + k) * slot_, req, sizeof(req));
            return c_.send(mr, (s_.qd + k) * slot_, request_size,
                           {.report = completion_mode::on_error});
        }
        return c_.send(mr, (s_.qd + k) * slot_, s_.size, {.report = completion_mode::on_error});
    }

  private:
    // The operation, parsed once from setup::op (post_with runs once per operation).
    enum class kind {
        write,
        read,
        flush_raw,
        flush_gpspm,
        atomic_write,
        cas,
        fetch_add,
        gpspm,
        send
    };
    static kind kind_of(const std::string& op) {
        static const std::pair<const char*, kind> names[] = {{"write", kind::write},
                                                             {"read", kind::read},
                                                             {"flush-raw", kind::flush_raw},
                                                             {"flush-gpspm", kind::flush_gpspm},
                                                             {"atomic-write", kind::atomic_write},
                                                             {"cas", kind::cas},
                                                             {"fetch-add", kind::fetch_add},
                                                             {"gpspm", kind::gpspm}};
        for (const auto& [name, k] : names) {
            if (op == name)
                return k;
        }
        return kind::send;
    }

    bool failed(const error& e) {
        out_.fail(e);
        return false;
    }
    static void* context(unsigned k) {
        return reinterpret_cast<void*>(static_cast<std::uintptr_t>(k));
    }
    result<void> post(unsigned k) {
        return post_with(k, {.context = context(k), .callback = callback_, .more = more_});
    }

  public:
    // --more: the next post is followed at once by another (the loop sets it for every
    // completion of a read but the last, whose repost ends the burst).
    void set_more(bool more) { more_ = more; }

  private:
    // Posts slot k's operation; when the provider cannot take it yet (would_block: an RDM
    // provider still setting up its path to the peer), settle() posts it again after a reap.
    bool post_or_defer(unsigned k) {
        auto r = post(k);
        if (r)
            return true;
        if (r.error() == errc::would_block) {
            deferred_.push_back(k);
            return true;
        }
        return failed(r.error());
    }

    // Quiet mode: posts writes until qd are posted and not yet reclaimed (or, under --count,
    // the budget is posted: the last write is signalled, so every one before it is reclaimed).
    bool refill() {
        while (c_.in_flight() < s_.qd && posted_ < budget_) {
            const auto k = static_cast<unsigned>(posted_ % s_.qd);
            auto r = post_with(k, posted_ + 1 == budget_
                                      ? op_options{}
                                      : op_options{.report = completion_mode::on_error});
            if (!r && r.error() == errc::would_block)
                return true;  // again at the next settle
            if (!r)
                return failed(r.error());
            ++posted_;
        }
        return true;
    }

    // Registration of the local buffer per operation: none (registered once, in init), a fresh
    // registration each time (held until the operation completes), or the registration cache.
    result<std::pair<const memory_region*, std::size_t>> local(unsigned k) {
        const std::size_t at = data_base_ + k * s_.size;
        const usage u = kind_ == kind::read ? usage::read_destination : usage::write_source;
        if (per_op_registration_) {
            fresh_[k].reset();  // the previous operation of this slot has completed
            auto r = memory_region::create(c_.dom(), std::span(buf_).subspan(at, s_.size), u);
            if (!r)
                return fail(r.error());
            fresh_[k] = std::move(*r);
            return std::pair{&*fresh_[k], std::size_t{0}};
        }
        if (cache_) {
            auto r = cache_->get(std::span(buf_).subspan(at, s_.size), u);
            if (!r)
                return fail(r.error());
            cached_[k] = *r;
            return std::pair{&cached_[k].region(), cached_[k].offset()};
        }
        return std::pair{&*mr_, at};
    }

    connection& c_;
    const remote_region& remote_;
    const setup& s_;
    const clock::time_point end_;
    const std::uint64_t budget_;  // operations to post (--count; otherwise no limit)
    client_result& out_;
    void (*const callback_)(const completion&);
    const std::size_t slot_, data_base_;
    const kind kind_;
    const bool per_op_registration_;
    const bool two_sided_, quiet_;
    bool on_rcq_ = false;
    std::vector<std::byte> buf_;
    std::optional<memory_region> mr_;
    std::optional<registration_cache> cache_;
    std::vector<clock::time_point> started_;
    std::vector<std::optional<memory_region>> fresh_;
    std::vector<cached_region> cached_;
    std::vector<unsigned> deferred_;  // slots whose post would have blocked, posted in settle()
    unsigned in_flight_ = 0;          // operations posted and not yet completed (not quiet mode)
    std::uint64_t posts_ = 0;         // operations posted (not quiet mode)
    std::uint64_t posted_ = 0;        // quiet mode: writes posted
    bool quiet_done_ = false;         // quiet mode: past the end, no signalled write left in flight
    bool more_ = false;               // --more: op_options::more on the next post
};

// A connection with CQs of its own, on its own thread.
void run_client(connection& c, const remote_region& remote, const setup& s, clock::time_point end,
                client_result& out, std::uint64_t budget) {
    const pinned on(s, side::client);
    std::vector<completion> sink;
    sink.reserve(static_cast<std::size_t>(s.qd) * 2);
    callback_sink = &sink;
    client cl(c, remote, s, end, out, s.callbacks ? &to_sink : nullptr, budget);
    if (!cl.init())
        return;
    if (s.coroutines) {
        auto post_with = [&](unsigned k, const op_options& o) { return cl.post_with(k, o); };
        run_coroutines(c, s, end, out, cl.started(), post_with, budget);
        return;
    }
    if (!cl.start())
        return;
    completion done[32];  // 16 from poll, and as many from callbacks at most
    reaper reap(c, s);
    auto last = clock::now();
    unsigned idle = 0;
    while (!cl.finished()) {
        auto n = reap(cl.on_rcq(), std::span(done, 16));
        if (!n) {
            out.fail(n.error());
            return;
        }
        const std::size_t total = append_callbacks(done, *n, sink);
        if (total == 0 && !cl.settles_idle() && (++idle & 255) != 0) {
            continue;  // as the baseline's loop: a read that found nothing reads no clock
        }
        const auto now = clock::now();
        for (std::size_t i = 0; i < total; ++i) {
            cl.set_more(s.more && i + 1 < total);
            if (!cl.handle(done[i], now))
                return;
        }
        cl.set_more(false);
        if (!cl.settle(now))
            return;
        if (total > 0 || *n > 0)
            last = now;
        if (overdue(s, now, end, last, out))
            return;
    }
}

// --shared-cq: every client connection completes on one shared CQ, read by this one thread,
// which hands each completion to its connection by completion::tag (the connection's index).
void run_shared(std::vector<connection>& conns, const std::vector<remote_region>& remotes,
                const shared_completion_queue& scq, const setup& s, clock::time_point end,
                std::vector<client_result>& results) {
    const pinned on(s, side::client);
    std::vector<completion> sink;
    sink.reserve(32);
    callback_sink = &sink;
    std::vector<std::unique_ptr<client>> clients;
    for (std::size_t i = 0; i < conns.size(); ++i) {
        clients.push_back(std::make_unique<client>(conns[i], remotes[i], s, end, results[i],
                                                   s.callbacks ? &to_sink : nullptr,
                                                   op_budget(s, static_cast<unsigned>(i))));
        if (!clients.back()->init())
            return;
    }
    for (auto& cl : clients) {
        if (!cl->start())
            return;
    }
    client_result& out = results.front();  // failures of the shared CQ itself
    completion_queue& q = scq.queue();
    auto all_finished = [&] {
        return std::all_of(clients.begin(), clients.end(),
                           [](const auto& cl) { return cl->finished(); });
    };
    // One read takes up to 64: with many connections in flight a smaller read costs one
    // provider progress call (tcp: an epoll_wait over every socket) per 16 completions.
    completion done[128];  // 64 from poll, and as many from callbacks at most
    auto last = clock::now();
    while (!all_finished()) {
        if (s.wait == "blocking") {
            auto w = q.wait(100ms);
            if (!w && !(w.error() == errc::timed_out)) {
                out.fail(w.error());
                return;
            }
        }
        auto n = q.poll(std::span(done, 64));
        if (!n) {
            out.fail(n.error());
            return;
        }
        const std::size_t total = append_callbacks(done, *n, sink);
        const auto now = clock::now();
        for (std::size_t i = 0; i < total; ++i) {
            if (done[i].tag >= clients.size()) {
                out.fail(error(errc::invalid_argument,
                               fmt::format("completion with an unknown tag {}", done[i].tag)));
                return;
            }
            if (!clients[done[i].tag]->handle(done[i], now))
                return;
        }
        for (auto& cl : clients) {
            if (!cl->settle(now))
                return;
        }
        if (total > 0)
            last = now;
        if (overdue(s, now, end, last, out))
            return;
    }
}

// --suite fanin's third arrangement: every connection keeps a CQ of its own (poll, busy), and
// this one thread reads them all in turn, handing each completion to its connection.
void run_one_reader(std::vector<connection>& conns, const std::vector<remote_region>& remotes,
                    const setup& s, clock::time_point end, std::vector<client_result>& results) {
    const pinned on(s, side::client);
    std::vector<std::unique_ptr<client>> clients;
    for (std::size_t i = 0; i < conns.size(); ++i) {
        clients.push_back(std::make_unique<client>(conns[i], remotes[i], s, end, results[i],
                                                   nullptr,
                                                   op_budget(s, static_cast<unsigned>(i))));
        if (!clients.back()->init() || !clients.back()->start())
            return;
    }
    completion done[64];
    auto last = clock::now();
    for (;;) {
        bool all = true;
        bool any = false;
        for (std::size_t i = 0; i < conns.size(); ++i) {
            client& cl = *clients[i];
            if (cl.finished())
                continue;
            all = false;
            auto n = conns[i].cq().poll(done);
            if (!n) {
                results[i].fail(n.error());
                return;
            }
            const auto now = clock::now();
            for (std::size_t k = 0; k < *n; ++k) {
                if (!cl.handle(done[k], now))
                    return;
            }
            if (!cl.settle(now))
                return;
            any = any || *n > 0;
        }
        if (all)
            return;
        const auto now = clock::now();
        if (any)
            last = now;
        if (overdue(s, now, end, last, results.front()))
            return;
    }
}

// Connects the clients: to the in-process loopback target, or to a `remora serve` at s.target
// (which sends its region's descriptor in a hello and serves flushes and atomics).
// With a shared CQ, every connection completes there, tagged with its index.
result<void> connect_all(const setup& s, target* t, domain& cd, const shared_completion_queue& scq,
                         std::vector<connection>& conns, std::vector<remote_region>& remotes) {
    for (unsigned i = 0; i < s.connections; ++i) {
        connection_config cfg = client_config(s, t == nullptr);
        cfg.tag = i;
        cfg.shared_cq = scq;
        if (t == nullptr) {
            auto hp = split_address(s.target);
            if (!hp)
                return fail(hp.error());
            const std::array<std::byte, 2> want{static_cast<std::byte>(cfg.service_depth & 0xff),
                                                static_cast<std::byte>(cfg.service_depth >> 8)};
            std::optional<admission_key> key;
            if (!s.key_file.empty()) {
                auto k = admission_key::load(s.key_file);
                if (!k)
                    return fail(k.error());
                key.emplace(std::move(*k));
            }
            auto c =
                key ? connect_admitted(cd, hp->first, hp->second, *key, "remora-bench", cfg, want)
                    : connection::connect(cd, hp->first, hp->second, cfg, want);
            if (!c) {
                if (!key && admission_refusal_of(c.error()) == admission_refusal::malformed)
                    return fail(errc::rejected,
                                "the target requires admission: pass --key-file with its key");
                return fail(c.error());
            }
            auto h = parse_hello(c->peer_private_data());
            if (!h)
                return fail(h.error());
            conns.push_back(std::move(*c));
            remotes.push_back(h->region);
            continue;
        }
        if (rdm(s)) {
            // Both sides open a peer and attach the other's address; the descriptor is handed
            // over in memory, as the user's own exchange would carry it.
            auto c = connection::open_peer(cd, cfg);
            if (!c)
                return fail(c.error());
            auto offer = t->open_peer_for(s, i, c->local_address());
            if (!offer)
                return fail(offer.error());
            if (auto r = c->attach(offer->address); !r)
                return fail(r.error());
            auto remote = remote_region::parse(offer->descriptor);
            if (!remote)
                return fail(remote.error());
            conns.push_back(std::move(*c));
            remotes.push_back(*remote);
            continue;
        }
        result<void> served;
        std::thread acceptor([&] { served = t->accept_and_serve(s, i); });
        auto c = connection::connect(cd, "127.0.0.1", t->port(), cfg);
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
    if (!::isatty(STDERR_FILENO) || s.duration < 2.0 || s.count != 0)
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

// What run_one measured: the result and, for --op gather, the two it is compared with, measured
// in the same run.
struct measured {
    figures f;
    std::optional<figures> together, one;  // --op gather: its writes posted together; one write
};

result<measured> run_one(const setup& s) {
    const bool gathering = s.op == "gather";
    if (gathering && (s.qd != 1 || s.connections != 1 || s.callbacks || s.coroutines ||
                      s.shared_cq || !s.target.empty()))
        return fail(errc::invalid_argument,
                    "--op gather times one operation at a time (--qd 1), on one connection to "
                    "the loopback target, read by poll()");
    if (s.coroutines && (s.op == "send" || s.op == "gpspm"))
        return fail(errc::invalid_argument,
                    "--completion coroutine covers one-sided, flush and atomic operations");
    if (s.registration != "pre" && s.op != "write" && s.op != "read")
        return fail(errc::invalid_argument, "--registration applies to write and read");
    if (s.signal_every > 1) {
        if (s.op != "write" && s.op != "send")
            return fail(errc::invalid_argument, "--signal-every applies to write and send");
        if (s.callbacks || s.coroutines)
            return fail(errc::invalid_argument,
                        "--signal-every needs --completion poll (operations with a callback are "
                        "always signalled)");
        if (s.registration != "pre")
            return fail(errc::invalid_argument, "--signal-every needs --registration pre");
    }
    if (s.shared_cq) {
        if (s.coroutines)
            return fail(errc::invalid_argument,
                        "--shared-cq covers --completion poll and callback");
        if (s.rcq || s.channel == "shared")
            return fail(errc::invalid_argument,
                        "--shared-cq takes every completion: no --rcq, no --channel shared");
    }
    if (rdm(s) && !s.target.empty())
        return fail(errc::invalid_argument,
                    "--endpoint rdm runs against a target in this process (no --target)");
    if (s.count != 0 && s.count < s.connections)
        return fail(errc::invalid_argument,
                    fmt::format("--count {} gives each of the {} connections no operation", s.count,
                                s.connections));
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
    if (auto d = domain::open({.provider = s.provider, .endpoint = endpoint_of(s.endpoint)}); d)
        cd = std::move(*d);
    else
        return fail(d.error());
    // --shared-cq: one CQ for every client connection, sized to all their queue entries.
    shared_completion_queue scq;
    if (s.shared_cq) {
        const connection_config c = client_config(s, !t);
        const std::uint32_t per = c.sq_size + c.service_depth + c.rq_size;
        auto q = shared_completion_queue::create(
            *cd, {.size = per * s.connections, .tag = std::uint64_t{s.connections}});
        if (!q)
            return fail(q.error());
        scq = std::move(*q);
    }
    std::vector<connection> conns;
    std::vector<remote_region> remotes;
    if (auto r = connect_all(s, t ? &*t : nullptr, *cd, scq, conns, remotes); !r)
        return fail(r.error());
    std::vector<remote_region> segments;  // --op gather: a region per part
    if (gathering) {
        auto g = t->segments();
        if (!g)
            return fail(g.error());
        segments = std::move(*g);
    }
    std::vector<client_result> results(s.connections);
    gather_result gathered;
    const double cpu0 = cpu_seconds();
    const auto t0 = clock::now();
    const auto end = t0 + std::chrono::duration_cast<clock::duration>(
                              std::chrono::duration<double>(run_limit_s(s)));
    std::vector<std::thread> clients;
    if (gathering) {
        clients.emplace_back(
            [&] { run_gather(conns.front(), segments, s, end, op_budget(s), gathered); });
    } else if (s.shared_cq) {
        clients.emplace_back([&] { run_shared(conns, remotes, scq, s, end, results); });
    } else if (s.one_reader) {
        clients.emplace_back([&] { run_one_reader(conns, remotes, s, end, results); });
    } else {
        for (unsigned i = 0; i < s.connections; ++i) {
            clients.emplace_back(
                [&, i] { run_client(conns[i], remotes[i], s, end, results[i], op_budget(s, i)); });
        }
    }
    std::atomic<bool> finished{false};
    std::thread bar([&] { show_progress(s, t0, end, finished); });
    for (auto& th : clients)
        th.join();
    finished = true;
    bar.join();
    const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
    const double cpu = cpu_seconds() - cpu0;
    for (auto& c : conns)
        (void)c.close();
    if (t)
        t->stop();
    if (gathering)
        results.front() = std::move(gathered.timed[gather_all]);
    std::vector<std::uint32_t> lat;
    std::uint64_t ops = 0;
    for (auto& r : results) {
        if (r.failure)
            return fail(*r.failure);
        lat.insert(lat.end(), r.lat_ns.begin(), r.lat_ns.end());
        ops += r.ops;
    }
    if (s.count != 0 && ops != s.count)
        return fail(errc::timed_out, fmt::format("--count {}: {} operations completed in {:.0f} s",
                                                 s.count, ops, seconds));
    if (!gathering) {
        auto f = summarize(lat, ops, seconds, cpu, s.size);
        if (!f)
            return fail(f.error());
        return measured{.f = *f, .together = {}, .one = {}};
    }
    // --op gather: each kind's figures over the time it ran (QD 1: ops/s is 1 / mean latency).
    measured m;
    for (std::size_t k = 0; k < gather_kinds; ++k) {
        client_result& r = k == gather_all ? results.front() : gathered.timed[k];
        if (r.failure)
            return fail(*r.failure);
        auto f = summarize(r.lat_ns, gathered.wall_s[k], gathered.cpu_s[k],
                           k == one_write ? s.size : s.size * s.parts);
        if (!f)
            return fail(f.error());
        if (k == gather_all)
            m.f = *f;
        else
            (k == writes_together ? m.together : m.one) = *f;
    }
    return m;
}

std::vector<setup> suite(const bench_options& o) {
    std::vector<setup> out;
    auto base = [&] {
        setup s;
        s.provider = o.provider;
        s.endpoint = o.endpoint;
        s.pin = o.pin;
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
        s.count = o.count;
        s.target = o.target;
        s.key_file = o.key_file;
        s.target_progress = o.target_progress;
        s.target_spin_us = o.target_spin_us;
        s.more = o.more;
        s.parts = o.parts;
        // The suites choose their own signalling and CQs (the slots suite compares them).
        s.signal_every = o.suite.empty() ? o.signal_every : 1;
        s.shared_cq = o.suite.empty() && o.shared_cq;
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
        // Selective signalling: 8-byte writes at qd 16 with a completion each, then one per 16
        // (counted as their entries are reclaimed); and 8 connections with a CQ (and a thread)
        // each, then one shared CQ read by one thread. The second of each pair prints the ratio.
        auto polled_write = [&](unsigned qd, unsigned connections) {
            setup s = base();
            s.op = "write";
            s.size = 8;
            s.qd = qd;
            s.connections = connections;
            s.wait = "busy";
            s.callbacks = false;
            s.coroutines = false;
            s.registration = "pre";
            return s;
        };
        for (unsigned every : {1u, 16u}) {
            setup s = polled_write(16, 1);
            s.signal_every = every;
            if (every > 1)
                s.versus = "signal_every 16 / 1";
            out.push_back(s);
        }
        for (bool shared : {false, true}) {
            setup s = polled_write(1, 8);
            s.shared_cq = shared;
            if (shared)
                s.versus = "shared CQ / CQ per connection";
            out.push_back(s);
        }
    } else if (o.suite == "fanin") {
        // Many connections, one reader (issue 11 item 4): 8-byte writes at qd 4 over 1, 8 and 32
        // connections, each with a CQ and a client thread of its own, then all on one shared CQ
        // read by one thread, then each with a CQ of its own but one thread reading them all in
        // turn (the second and third print the ratio to the one before). cpu_us_per_op is the
        // whole process's (client threads, the loopback target and its progress thread).
        for (unsigned conns : {1u, 8u, 32u}) {
            for (int how = 0; how < 3; ++how) {  // a CQ and thread each; shared; one reader
                const bool shared = how == 1;
                setup s = base();
                s.op = "write";
                s.size = 8;
                s.qd = 4;
                s.connections = conns;
                s.wait = "busy";
                s.callbacks = false;
                s.coroutines = false;
                s.registration = "pre";
                s.signal_every = 1;
                s.shared_cq = shared;
                s.one_reader = how == 2;
                if (shared)
                    s.versus = "shared CQ / CQ per connection";
                if (how == 2)
                    s.versus = "one reader of every CQ / shared CQ";
                out.push_back(s);
            }
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
    if (s.op == "gather")
        l += fmt::format(" x{}", s.parts);
    if (s.callbacks)
        l += "+cb";
    if (s.coroutines)
        l += "+co";
    if (s.registration == "per-op")
        l += "+reg";
    if (s.registration == "cache")
        l += "+rc";
    if (s.signal_every > 1)
        l += fmt::format("+s{}", s.signal_every);
    if (s.shared_cq)
        l += "+scq";
    if (s.one_reader)
        l += "+1r";
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
        // gnuplot skips NaN: no latency bars for results without latencies.
        // A copy, not the binding: clang 14 cannot capture structured bindings.
        const bool has_latency = f.has_latency;
        auto us = [&](double v) { return has_latency ? fmt::format("{:.2f}", v) : "NaN"; };
        text += fmt::format("\"{} {}B qd{}{}\" {:.0f} {} {}\n", label(s), s.size, s.qd,
                            s.connections > 1 ? fmt::format(" x{}", s.connections) : "",
                            f.ops_per_s, us(f.p50_us), us(f.p99_us));
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
        auto d = domain::open({.provider = "", .endpoint = endpoint_of(o.endpoint)});
        if (!d)
            return report("bench", d.error());
        resolved.provider = d->caps().provider;
    }
    if (o.count != 0 && o.count < o.connections)
        return report("bench", error(errc::invalid_argument,
                                     fmt::format("--count {} gives each of the {} connections no "
                                                 "operation",
                                                 o.count, o.connections)));
    const auto setups = suite(resolved);
    // The provider column fits "fi:" and the longest name (tcp;ofi_rxm).
    const std::size_t pw = std::max<std::size_t>(8, 3 + resolved.provider.size());
    if (!o.json && o.target.empty() && o.endpoint != "rdm") {
        setup first;
        first.target_progress = o.target_progress;
        const progress_policy pol = target_policy(first);
        const auto spin =
            o.target_spin_us != 0 ? o.target_spin_us : domain_config{}.progress_spin.count();
        fmt::print("target progress: {} ({}the loopback target's progress thread)\n",
                   to_string(pol),
                   pol == progress_policy::adaptive ? fmt::format("spin {} us; ", spin) : "");
    }
    if (!o.json) {
        if (o.endpoint == "rdm")
            fmt::print("endpoint: rdm (peers over an address vector)\n");
        fmt::print(
            "{:<{}} {:<12} {:>7} {:>3} {:>5} {:<9} {:<8} {:>4} {:>11} {:>9} {:>8} {:>8} {:>8} "
            "{:>9}\n",
            "provider", pw, "op", "size", "qd", "conns", "wait", "channel", "rcq", "ops/s", "MiB/s",
            "p50 us", "p99 us", "p99.9 us", "cpu us/op");
    }
    // Latency columns print "-" (JSON null) where no operation's own completion was timed.
    bool no_latency = false;
    auto row = [&](const std::string& prov, const setup& s, const figures& f) {
        auto us = [&](double v) {
            return f.has_latency ? fmt::format("{:.1f}", v) : std::string("-");
        };
        no_latency = no_latency || !f.has_latency;
        fmt::print(
            "{:<{}} {:<12} {:>7} {:>3} {:>5} {:<9} {:<8} {:>4} {:>11.0f} {:>9.1f} {:>8} {:>8} "
            "{:>8} {:>9.2f}\n",
            prov, pw, label(s), s.size, s.qd, s.connections, s.wait, s.channel,
            s.rcq ? "yes" : "no", f.ops_per_s, f.mib_per_s, us(f.p50_us), us(f.p99_us),
            us(f.p999_us), f.cpu_us_per_op);
    };
    auto as_json = [](const figures& f) {
        auto us = [&](double v) { return f.has_latency ? nlohmann::json(v) : nlohmann::json(); };
        return nlohmann::json{{"ops", f.ops},
                              {"seconds", f.seconds},
                              {"ops_per_s", f.ops_per_s},
                              {"mib_per_s", f.mib_per_s},
                              {"p50_us", us(f.p50_us)},
                              {"p99_us", us(f.p99_us)},
                              {"p999_us", us(f.p999_us)},
                              {"cpu_us_per_op", f.cpu_us_per_op}};
    };
    std::vector<std::pair<setup, figures>> plotted;
    for (setup s : setups) {
        if (s.signal_every > 1 && s.op == "write" && s.qd < s.signal_every) {
            // Writes left unsignalled stay in flight until a signalled one completes: fewer
            // than N in flight would never reach one.
            fmt::print(stderr,
                       "remora bench: --signal-every {} keeps {} writes in flight (qd {})\n",
                       s.signal_every, s.signal_every, s.qd);
            s.qd = s.signal_every;
        }
        auto m = run_one(s);
        if (!m)
            return report("bench", m.error());
        const figures* f = &m->f;
        // A paired result (the slots suite): the ratio to the result before it.
        std::optional<figures> versus;
        if (!s.versus.empty() && !plotted.empty())
            versus = plotted.back().second;
        plotted.emplace_back(s, *f);
        const std::string& prov = s.provider;
        // The baselines cover what plain libfabric code in baseline.cpp (MSG) and
        // baseline_rdm.cpp (RDM) does. MSG: two, the target as remora's in this run and
        // busy-polling; RDM: one, its target busy-polls. Its sends ask for no completion, so a
        // send under --signal-every compares too (a write there is timed without latency).
        std::optional<figures> base, busy_base;
        if (o.baseline && (s.op == "write" || s.op == "read" || s.op == "send") &&
            s.connections == 1 && !s.rcq && s.channel == "separate" &&
            (s.signal_every == 1 || s.op == "send") && !s.shared_cq) {
            auto b = rdm(s) ? run_baseline_rdm(s) : run_baseline(s, false);
            if (!b)
                return report("bench --baseline", b.error());
            base = *b;
            if (!rdm(s)) {
                auto bb = run_baseline(s, true);
                if (!bb)
                    return report("bench --baseline", bb.error());
                busy_base = *bb;
            }
        }
        if (o.json) {
            nlohmann::json j = {{"provider", prov}, {"endpoint", s.endpoint},
                                {"op", s.op},       {"size", s.size},
                                {"qd", s.qd},       {"connections", s.connections},
                                {"wait", s.wait},   {"channel", s.channel},
                                {"rcq", s.rcq}};
            j["completion"] = s.callbacks ? "callback" : s.coroutines ? "coroutine" : "poll";
            j["registration"] = s.registration;
            j["signal_every"] = s.signal_every;
            j["shared_cq"] = s.shared_cq;
            j["one_reader"] = s.one_reader;
            j.update(as_json(*f));
            if (versus) {
                j["versus"] = {{"what", s.versus},
                               {"ratio_ops_per_s", f->ops_per_s / versus->ops_per_s},
                               {"ratio_cpu_us_per_op", f->cpu_us_per_op / versus->cpu_us_per_op}};
                if (f->has_latency && versus->has_latency)
                    j["versus"]["ratio_p50"] = f->p50_us / versus->p50_us;
            }
            if (s.target.empty() && !rdm(s)) {
                j["target_progress"] = to_string(target_policy(s));
                if (target_policy(s) == progress_policy::adaptive)
                    j["target_spin_us"] = s.target_spin_us != 0
                                              ? std::int64_t{s.target_spin_us}
                                              : std::int64_t{domain_config{}.progress_spin.count()};
            }
            if (m->together) {
                j["parts"] = s.parts;
                j["writes_together"] = as_json(*m->together);
                j["one_write"] = as_json(*m->one);
                j["ratio_p50_writes_together"] = f->p50_us / m->together->p50_us;
                j["ratio_p99_writes_together"] = f->p99_us / m->together->p99_us;
                j["ratio_p50_one_write"] = f->p50_us / m->one->p50_us;
                j["ratio_p99_one_write"] = f->p99_us / m->one->p99_us;
            }
            if (base) {
                j["baseline"] = as_json(*base);
                j["ratio_ops_per_s"] = f->ops_per_s / base->ops_per_s;
                j["ratio_p50"] = f->p50_us / base->p50_us;
            }
            if (busy_base) {
                j["baseline_busy_target"] = as_json(*busy_base);
                j["ratio_busy_target_ops_per_s"] = f->ops_per_s / busy_base->ops_per_s;
                j["ratio_busy_target_p50"] = f->p50_us / busy_base->p50_us;
            }
            fmt::print("{}\n", j.dump());
        } else {
            row(prov, s, *f);
            if (m->together) {
                // --op gather: its writes posted together, then one write, from the same run.
                setup plain = s;
                plain.op = fmt::format("write x{}", s.parts);
                row(prov, plain, *m->together);
                plain.op = "write x1";
                row(prov, plain, *m->one);
                auto ratio = [&](const std::string& what, const figures& b) {
                    fmt::print("{:<{}} {} / {}: p50 x{:.3f}, p99 x{:.3f}\n", "ratio", pw, label(s),
                               what, f->p50_us / b.p50_us, f->p99_us / b.p99_us);
                };
                ratio(fmt::format("write x{} together (its slowest part)", s.parts), *m->together);
                ratio("write x1", *m->one);
            }
            if (base) {
                // The baseline reads its CQ directly, registers once, and asks for no send
                // completion (selective completion), whatever --signal-every says.
                setup plain = s;
                plain.callbacks = false;
                plain.coroutines = false;
                plain.registration = "pre";
                plain.signal_every = 1;
                plain.op = s.op + "/same";
                row("fi:" + prov, plain, *base);
                plain.op = s.op + "/busy";
                if (busy_base)
                    row("fi:" + prov, plain, *busy_base);
                auto ratio = [&](const char* what, const figures& b) {
                    fmt::print(
                        "{:<{}} remora/baseline ({}): ops/s x{:.3f}, p50 x{:.3f}, p99 x{:.3f}\n",
                        "ratio", pw, what, f->ops_per_s / b.ops_per_s, f->p50_us / b.p50_us,
                        f->p99_us / b.p99_us);
                };
                ratio(rdm(s) ? "/same: RDM target busy-polls" : "/same: target as remora's", *base);
                if (busy_base)
                    ratio("/busy: target busy-polls", *busy_base);
            }
            if (versus) {
                fmt::print("{:<{}} {}: ops/s x{:.3f}, p50 {}, cpu us/op x{:.3f}\n", "ratio", pw,
                           s.versus, f->ops_per_s / versus->ops_per_s,
                           f->has_latency && versus->has_latency
                               ? fmt::format("x{:.3f}", f->p50_us / versus->p50_us)
                               : std::string("-"),
                           f->cpu_us_per_op / versus->cpu_us_per_op);
            }
        }
        std::fflush(stdout);
    }
    if (no_latency) {
        fmt::print(
            "-: no latency: under --signal-every writes complete unsignalled; they are counted "
            "when their entries are reclaimed\n");
    }
    if (!o.plot.empty()) {
        if (auto r = plot(plotted, o.plot); !r)
            return report("bench --plot", r.error());
    }
    return 0;
}

}  // namespace remora::tool

// SPDX-License-Identifier: BSD-3-Clause
// `remora bench`: the loops that drive the client connections (bench_client.hpp): a thread per
// connection (poll, callbacks or coroutines), one thread reading a shared CQ, or one thread
// reading every connection's own CQ; each ends a run that overstays.
#include <algorithm>
#include <chrono>
#include <memory>
#include <span>

#include "bench_client.hpp"

namespace remora::tool {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

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
task slot_loop(unsigned k, clock::time_point end, client_result& out,
               std::vector<clock::time_point>& started, PostWith& post_with,
               std::uint64_t& posts_left) {
    for (;;) {
        if (posts_left == 0)
            co_return;
        --posts_left;
        auto r = co_await co_op([&](op_options o) { return post_with(k, o); });
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
        tasks.push_back(slot_loop(k, end, out, started, post_with, posts_left));
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

}  // namespace

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
        if (blocking_wait(s)) {
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

}  // namespace remora::tool

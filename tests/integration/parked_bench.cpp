// SPDX-License-Identifier: BSD-3-Clause
// Overload through back-pressure (issue 12's figures, printed, not asserted as timings): 32
// client threads post parked writes over 8 connections into one shared slot pool of 8 writes,
// while a reader per connection reaps completions. Phases beside it separate its costs: 1 poster
// on 8 connections, 8 and 32 posters on 8 connections with an ample budget (no shared
// back-pressure), and 32 posters on 1 connection. Asserted: no post fails, every posted write
// completes exactly once (none lost or duplicated), every unit comes back. Printed: operations,
// CPU and context switches per operation (whole process, and the posters' and readers' own)
// and their ratios to one uncontended poster, and fairness (max/min operations per client). A
// second test runs the 32 clients as queued posts (park_mode::queue, no thread each).
// REMORA_BENCH_SECONDS sets each phase's length (default 2); REMORA_BENCH_PHASE runs only the
// phases whose name contains it (and the uncontended one).
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace remora;
using namespace remora::test;

namespace {

using clk = std::chrono::steady_clock;

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Context switches of the whole process: all, and the voluntary ones (a thread slept: parked,
// waiting for a completion), which depend less on what else runs on the machine.
struct switches {
    double all = 0;
    double voluntary = 0;
};
switches context_switches() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return {static_cast<double>(u.ru_nvcsw + u.ru_nivcsw), static_cast<double>(u.ru_nvcsw)};
}

// The calling thread's context switches (for the split between posters, readers and the rest).
double thread_switches() {
    rusage u{};
    getrusage(RUSAGE_THREAD, &u);
    return static_cast<double>(u.ru_nvcsw + u.ru_nivcsw);
}

std::chrono::milliseconds phase_length() {
    const char* s = std::getenv("REMORA_BENCH_SECONDS");
    const int secs = s != nullptr ? std::atoi(s) : 2;
    return std::chrono::milliseconds(1000 * (secs > 0 ? secs : 2));
}

struct phase_result {
    std::uint64_t ops = 0;
    std::uint64_t failures = 0;
    std::uint64_t lost_or_duplicated = 0;
    double cpu_per_op_us = 0;
    double switches_per_op = 0;
    double voluntary_per_op = 0;
    double poster_switches_per_op = 0;  // the posting threads' own (parking, being woken)
    double reader_switches_per_op = 0;  // the completion readers'
    std::uint64_t min_ops = 0;
    std::uint64_t max_ops = 0;
    double wall_s = 0;
};

class parked_bench : public testing::TestWithParam<std::string> {
  protected:
    static constexpr std::size_t connections = 8;
    static constexpr std::uint32_t budget_writes = 8;
    static constexpr std::uint32_t sq_size = 64;
    // Client connections [0, connections) draw on pool_ (8 writes: the back-pressure);
    // [connections, 2 * connections) on ample_ (every connection's whole queue: a poster there
    // waits only for its own connection's 64 entries); [2 * connections, 3 * connections) on
    // pool_ too, completing on one shared CQ (one reader for the 8).
    static constexpr std::size_t ample = connections;
    static constexpr std::size_t on_shared_cq = 2 * connections;

    static std::shared_ptr<slot_pool> make_pool(std::uint32_t writes) {
        return must(
            slot_pool::create({.capacity = units{}.with(unit::sq, writes).with(unit::cq, writes),
                               .policy = exhaustion::backpressure}));
    }

    void SetUp() override {
        pool_ = make_pool(budget_writes);
        ample_ = make_pool(sq_size * connections);
        side_.emplace(server_side::open(GetParam()));
        for (std::size_t i = 0; i < 2 * connections; ++i) {
            servers_.push_back(
                must(side_->add({.progress_thread = true},
                                {.sq_size = sq_size, .slots = i < connections ? pool_ : ample_})));
        }
        // A connection reserves its send and receive queues on the shared CQ (tcp's has 512
        // entries at most): 32 and 1 here, ample beside the budget of 8.
        connection_config cfg{.sq_size = 32, .rq_size = 1, .slots = pool_};
        shared_ = must(shared_completion_queue::create(side_->client_dom, {.size = 1024}));
        cfg.shared_cq = shared_;
        for (std::size_t i = 0; i < connections; ++i) {
            servers_.push_back(must(side_->add({.progress_thread = true}, cfg)));
        }
        tmr_.emplace(
            must(memory_region::create(side_->dom, target_.span(), usage::write_destination)));
        desc_ = must(tmr_->describe());
        smr_.emplace(
            must(memory_region::create(side_->client_dom, src_.span(), usage::write_source)));
    }

    // The end of a phase: waits (at most 10 s) until every posted write has completed, stops the
    // completion readers, and tallies per-client counts (`counts(i)`: {posted, completed}) with the
    // process's CPU time and context switches since cpu0/csw0.
    template <class Counts>
    static phase_result settle(std::size_t clients, Counts counts, clk::time_point t0, double cpu0,
                               switches csw0, std::atomic<bool>& readers_stop,
                               std::vector<std::thread>& readers) {
        auto all_done = [&] {
            for (std::size_t i = 0; i < clients; ++i) {
                const auto [p, d] = counts(i);
                if (d < p)
                    return false;
            }
            return true;
        };
        const auto drain_deadline = clk::now() + std::chrono::seconds(10);
        while (!all_done() && clk::now() < drain_deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const double wall = std::chrono::duration<double>(clk::now() - t0).count();
        const double cpu = cpu_seconds() - cpu0;
        const switches csw1 = context_switches();
        readers_stop = true;
        for (auto& th : readers) {
            th.join();
        }
        phase_result res;
        res.min_ops = ~std::uint64_t{0};
        for (std::size_t i = 0; i < clients; ++i) {
            const auto [p, d] = counts(i);
            res.ops += p;
            res.lost_or_duplicated += p > d ? p - d : d - p;
            res.min_ops = std::min(res.min_ops, p);
            res.max_ops = std::max(res.max_ops, p);
        }
        res.cpu_per_op_us = res.ops != 0 ? cpu * 1e6 / static_cast<double>(res.ops) : 0;
        if (res.ops != 0) {
            res.switches_per_op = (csw1.all - csw0.all) / static_cast<double>(res.ops);
            res.voluntary_per_op = (csw1.voluntary - csw0.voluntary) / static_cast<double>(res.ops);
        }
        res.wall_s = wall;
        return res;
    }

    // `posters` threads for `length`; poster t's k-th write goes on client connection
    // first + (t + k * posters) % `conns` (a poster of its own connection when there are as many
    // posters as connections or more; 1 poster turns through them all).
    phase_result run(std::size_t posters, std::size_t conns, std::chrono::milliseconds length,
                     std::size_t first = 0) {
        std::vector<std::atomic<std::uint64_t>> posted(posters), completed(posters);
        std::atomic<std::uint64_t> failures{0};
        std::atomic<bool> stop{false};
        std::atomic<bool> readers_stop{false};
        std::atomic<std::uint64_t> poster_switches{0};
        std::atomic<std::uint64_t> reader_switches{0};
        std::vector<std::thread> readers;
        const bool shared = first == on_shared_cq;
        for (std::size_t c = 0; c < (shared ? 1 : conns); ++c) {
            readers.emplace_back([&, c] {
                const double s0 = thread_switches();
                auto& cq = shared ? shared_.queue() : side_->clients[first + c].cq();
                while (!readers_stop.load()) {
                    auto got = cq.next(std::chrono::milliseconds(20));
                    if (!got) {
                        if (!(got.error() == errc::timed_out)) {
                            ++failures;
                        }
                        continue;
                    }
                    if (!got->ok()) {
                        ++failures;
                    }
                    ++completed[reinterpret_cast<std::uintptr_t>(got->context)];
                }
                reader_switches += static_cast<std::uint64_t>(thread_switches() - s0);
            });
        }
        const double cpu0 = cpu_seconds();
        const switches csw0 = context_switches();
        const auto t0 = clk::now();
        std::vector<std::thread> threads;
        for (std::size_t t = 0; t < posters; ++t) {
            threads.emplace_back([&, t] {
                const double s0 = thread_switches();
                for (std::size_t k = 0; !stop.load(std::memory_order_relaxed); ++k) {
                    connection& conn = side_->clients[first + (t + k * posters) % conns];
                    auto r = conn.write(desc_, 64 * (t % 64), *smr_, 0, 64,
                                        {.context = reinterpret_cast<void*>(t),
                                         .park_until = clk::now() + std::chrono::seconds(10)});
                    if (!r) {
                        ++failures;
                        std::fprintf(stderr, "poster %zu: %s\n", t, r.error().what().c_str());
                        return;
                    }
                    ++posted[t];
                }
                poster_switches += static_cast<std::uint64_t>(thread_switches() - s0);
            });
        }
        std::this_thread::sleep_for(length);  // the measured phase (a benchmark, not a sync)
        stop = true;
        for (auto& th : threads) {
            th.join();
        }
        phase_result res = settle(
            posters,
            [&](std::size_t t) {
                return std::pair{posted[t].load(), completed[t].load()};
            },
            t0, cpu0, csw0, readers_stop, readers);
        res.failures = failures.load();
        if (res.ops != 0) {
            res.poster_switches_per_op =
                static_cast<double>(poster_switches.load()) / static_cast<double>(res.ops);
            // Readers run until after the drain: a little outside the measured window.
            res.reader_switches_per_op =
                static_cast<double>(reader_switches.load()) / static_cast<double>(res.ops);
        }
        return res;
    }

    // `clients` without a thread each (park_mode::queue): every client keeps one write posted or
    // queued; its callback, on its connection's reader, counts it and posts the client's next.
    // Client c is on connection c % `conns`.
    struct queued_client;
    struct queued_shared {
        parked_bench* bench;
        std::atomic<bool> stop{false};
        std::atomic<std::uint64_t> failures{0};
    };
    struct queued_client {
        queued_shared* shared;
        connection* conn;
        std::size_t id;
        std::atomic<std::uint64_t> posted{0};
        std::atomic<std::uint64_t> completed{0};
    };
    static void post_queued(queued_client& q) {
        auto r =
            q.conn->write(q.shared->bench->desc_, 64 * (q.id % 64), *q.shared->bench->smr_, 0, 64,
                          {.context = &q,
                           .callback = &queued_done,
                           .park_until = clk::now() + std::chrono::seconds(10),
                           .park = park_mode::queue});
        if (!r) {
            ++q.shared->failures;
            std::fprintf(stderr, "client %zu: %s\n", q.id, r.error().what().c_str());
            return;
        }
        ++q.posted;
    }
    static void queued_done(const completion& c) {
        auto& q = *static_cast<queued_client*>(c.context);
        if (!c.ok()) {
            ++q.shared->failures;
            std::fprintf(stderr, "client %zu: completion %s\n", q.id, c.status.message().c_str());
        }
        ++q.completed;
        if (!q.shared->stop.load()) {
            post_queued(q);
        }
    }
    phase_result run_queued(std::size_t clients, std::size_t conns,
                            std::chrono::milliseconds length) {
        queued_shared shared{this};
        std::vector<queued_client> qs(clients);
        std::atomic<bool> readers_stop{false};
        std::atomic<std::uint64_t> reader_switches{0};
        std::vector<std::thread> readers;
        for (std::size_t c = 0; c < conns; ++c) {
            readers.emplace_back([&, c] {
                const double s0 = thread_switches();
                auto& cq = side_->clients[c].cq();
                while (!readers_stop.load()) {
                    // Callbacks run in here; nothing is reported (every write has one).
                    auto got = cq.next(std::chrono::milliseconds(20));
                    if (!got && !(got.error() == errc::timed_out)) {
                        ++shared.failures;
                    }
                }
                reader_switches += static_cast<std::uint64_t>(thread_switches() - s0);
            });
        }
        const double cpu0 = cpu_seconds();
        const switches csw0 = context_switches();
        const auto t0 = clk::now();
        for (std::size_t t = 0; t < clients; ++t) {
            qs[t].shared = &shared;
            qs[t].conn = &side_->clients[t % conns];
            qs[t].id = t;
            post_queued(qs[t]);
        }
        std::this_thread::sleep_for(length);  // the measured phase (a benchmark, not a sync)
        shared.stop = true;
        phase_result res = settle(
            qs.size(),
            [&](std::size_t i) {
                return std::pair{qs[i].posted.load(), qs[i].completed.load()};
            },
            t0, cpu0, csw0, readers_stop, readers);
        res.failures = shared.failures.load();
        res.reader_switches_per_op = res.ops != 0 ? static_cast<double>(reader_switches.load()) /
                                                        static_cast<double>(res.ops)
                                                  : 0;
        return res;
    }

    std::shared_ptr<slot_pool> pool_;
    std::shared_ptr<slot_pool> ample_;
    shared_completion_queue shared_;
    std::optional<server_side> side_;
    std::vector<connection> servers_;
    buffer target_{4096};
    buffer src_{64};
    std::optional<memory_region> tmr_;
    std::optional<memory_region> smr_;
    remote_region desc_;
};

void print(const char* name, const std::string& provider, const phase_result& r,
           const phase_result* alone = nullptr) {
    std::printf(
        "[parked_bench %s] %s: %llu writes in %.2f s (%.0f/s), cpu %.2f us/op, "
        "%.2f context switches/op (%.2f voluntary; posters %.2f, readers %.2f), per client min "
        "%llu max %llu, "
        "failures %llu, lost or duplicated %llu\n",
        provider.c_str(), name, static_cast<unsigned long long>(r.ops), r.wall_s,
        static_cast<double>(r.ops) / r.wall_s, r.cpu_per_op_us, r.switches_per_op,
        r.voluntary_per_op, r.poster_switches_per_op, r.reader_switches_per_op,
        static_cast<unsigned long long>(r.min_ops), static_cast<unsigned long long>(r.max_ops),
        static_cast<unsigned long long>(r.failures),
        static_cast<unsigned long long>(r.lost_or_duplicated));
    if (alone != nullptr) {
        std::printf(
            "[parked_bench %s] %s / uncontended: cpu per op x%.2f, switches per op x%.2f "
            "(voluntary x%.2f); "
            "fairness max/min: %.2f\n",
            provider.c_str(), name, r.cpu_per_op_us / alone->cpu_per_op_us,
            r.switches_per_op / alone->switches_per_op,
            r.voluntary_per_op / alone->voluntary_per_op,
            r.min_ops != 0 ? static_cast<double>(r.max_ops) / static_cast<double>(r.min_ops) : 0.0);
    }
}

// REMORA_BENCH_PHASE, when set, runs only the phases whose name contains it (beside the
// uncontended baseline): to count one phase's system calls (strace -f -c) or instructions.
bool selected(const char* name) {
    const char* only = std::getenv("REMORA_BENCH_PHASE");
    return only == nullptr || std::string(name).find(only) != std::string::npos;
}

// Correctness, the only thing asserted: no post failed, every posted write completed once, every
// client posted, and every unit came back.
void check(const phase_result& r, const slot_pool& pool) {
    EXPECT_EQ(r.failures, 0u);
    EXPECT_EQ(r.lost_or_duplicated, 0u);
    EXPECT_GT(r.min_ops, 0u) << "a client never got a slot";
    EXPECT_EQ(pool.available(), pool.capacity());
}

}  // namespace

// The phases separate what the loaded case (32 posters, 8 connections, budget 8) adds to the
// uncontended one: connections alone (1 poster on 8), posters without the budget's back-pressure
// (8, then 32, on 8 connections whose budget covers their queues: a poster waits only for its
// own connection's 64 entries), then the budget of 8 (32 posters on 8 connections, the same 8
// completing on one shared CQ read by one thread, and all 32 on 1 connection).
TEST_P(parked_bench, thirty_two_clients_through_a_budget_of_eight) {
    const auto length = phase_length();
    const phase_result alone = run(1, 1, length);
    print("uncontended (1 poster, 1 connection)", GetParam(), alone);
    check(alone, *pool_);

    struct phase {
        const char* name;
        std::size_t posters;
        std::size_t conns;
        std::size_t first;
    };
    const phase phases[] = {
        {"(a) 1 poster, 8 connections, ample budget", 1, connections, ample},
        {"(b) 8 posters, 8 connections, ample budget", 8, connections, ample},
        {"(c) 32 posters, 8 connections, ample budget", 32, connections, ample},
        {"32 posters, 8 connections, budget 8", 32, connections, 0},
        {"(d) 32 posters, 8 connections on one shared CQ, budget 8", 32, connections, on_shared_cq},
        // One reader reaping batches instead of eight waking per completion.
        {"32 posters, 1 connection, budget 8", 32, 1, 0},
    };
    for (const phase& p : phases) {
        if (!selected(p.name)) {
            continue;
        }
        const phase_result r = run(p.posters, p.conns, length, p.first);
        print(p.name, GetParam(), r, &alone);
        check(r, p.first == ample ? *ample_ : *pool_);
    }
}

// The same 32 clients over 8 connections without a thread each (park_mode::queue): they wait in
// the budget's FIFO as queued posts, posted by the gate's one thread or by the callback that
// frees a unit; separates the cost of 32 sleeping threads from the back-pressure's.
TEST_P(parked_bench, thirty_two_queued_clients_through_a_budget_of_eight) {
    const auto length = phase_length();
    const phase_result alone = run(1, 1, length);
    print("uncontended (1 poster, 1 connection)", GetParam(), alone);
    check(alone, *pool_);

    const char* name = "32 queued clients, 8 connections, budget 8";
    if (selected(name)) {
        const phase_result queued = run_queued(32, connections, length);
        print(name, GetParam(), queued, &alone);
        check(queued, *pool_);
    }
}

INSTANTIATE_TEST_SUITE_P(providers, parked_bench, testing::ValuesIn(providers()), provider_name);

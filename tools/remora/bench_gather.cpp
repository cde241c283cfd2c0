// SPDX-License-Identifier: BSD-3-Clause
// `remora bench --op gather`: is a multi-key write as fast as its slowest part?
//
// One connection, one operation at a time (QD 1), in rounds of three timed operations, each
// post to completion: (a) one connection::gather_write of `parts` segments of `size` bytes, each
// segment a region of its own on the target (so each part carries another key); (b) the same
// `parts` plain writes posted back to back, timed until the last of them completes: the latency
// of the slowest part when the parts run together; (c) one plain write of `size` bytes. The
// order of the three turns by one each round, so none always runs first or after the same one.
#include <chrono>
#include <vector>

#include "bench_internal.hpp"

namespace remora::tool {

using namespace std::chrono_literals;

void run_gather(connection& c, std::span<const remote_region> segments, const setup& s,
                std::chrono::steady_clock::time_point end, std::uint64_t budget,
                gather_result& out) {
    using clock = std::chrono::steady_clock;
    const pinned on(s, side::client);
    const std::size_t n = segments.size();
    std::vector<std::byte> buf(n * s.size, std::byte{0x5a});
    auto mr = memory_region::create(c.dom(), buf, usage::write_source);
    if (!mr) {
        out.timed[gather_all].fail(mr.error());
        return;
    }
    std::vector<remote_segment> parts;
    for (const remote_region& r : segments)
        parts.push_back({.region = &r, .offset = 0, .length = s.size});
    for (client_result& t : out.timed)
        t.lat_ns.reserve(std::min<std::uint64_t>(budget, 1 << 20));
    reaper reap(c, s);
    completion done[16];
    // Times one operation of kind k: posts (again after a read when the provider answers
    // would_block) and reads completions until it is complete; false (the failure recorded) when
    // a post or a completion fails, or none comes for 10 s.
    auto timed = [&](gather_kind k) {
        client_result& res = out.timed[k];
        auto failed = [&](const error& e) {
            res.fail(e);
            return false;
        };
        const std::size_t want = k == writes_together ? n : 1;
        std::size_t posted = 0;
        std::size_t completed = 0;
        const double cpu0 = cpu_seconds();
        const auto t0 = clock::now();
        auto last = t0;
        while (completed < want) {
            for (; posted < want; ++posted) {
                auto r = k == gather_all
                             ? c.gather_write(parts, *mr, 0)
                             : c.write(segments[posted], 0, *mr, posted * s.size, s.size);
                if (!r && r.error() == errc::would_block)
                    break;  // again after the next read
                if (!r)
                    return failed(r.error());
            }
            auto got = reap(false, done);
            if (!got)
                return failed(got.error());
            for (std::size_t i = 0; i < *got; ++i) {
                if (!done[i].ok())
                    return failed(error(done[i].status,
                                        k == gather_all ? "gather_write failed" : "write failed"));
            }
            completed += *got;
            const auto now = clock::now();
            if (*got > 0)
                last = now;
            else if (now > last + 10s)
                return failed(error(errc::timed_out, "no operation completed for 10 s"));
        }
        const auto t1 = clock::now();
        out.cpu_s[k] += cpu_seconds() - cpu0;
        out.wall_s[k] += std::chrono::duration<double>(t1 - t0).count();
        res.lat_ns.push_back(static_cast<std::uint32_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
        ++res.ops;
        return true;
    };
    for (std::uint64_t round = 0; round < budget; ++round) {
        for (std::uint64_t j = 0; j < gather_kinds; ++j) {
            if (!timed(static_cast<gather_kind>((round + j) % gather_kinds)))
                return;
        }
        if (clock::now() >= end)
            return;
    }
}

}  // namespace remora::tool

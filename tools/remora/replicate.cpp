// SPDX-License-Identifier: BSD-3-Clause
// `remora put --replicas A,B,C --quorum K`: stdin written to every target and flushed, each
// write acknowledged once K of them made it durable (replica_set.hpp); with --record-size, stdin
// is a stream of records appended in order, one line "acked INDEX OFFSET" per durable record.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "common.hpp"

namespace remora::tool {

namespace {

struct put_events {
    const std::vector<std::string>* names = nullptr;
};

void on_event(const replica_event& e) {
    const auto* ev = static_cast<const put_events*>(e.context);
    const std::string& name = (*ev->names)[e.index];
    switch (e.kind) {
        case replica_event_kind::dropped:
            fmt::print(stderr, "remora put: replica {} dropped: {}\n", name, e.status.message());
            break;
        case replica_event_kind::quorum_lost:
            fmt::print(stderr, "remora put: fewer live replicas than the quorum: writes stop\n");
            break;
        default:
            break;
    }
}

// Reads up to n bytes from stdin (fewer only at its end).
std::size_t read_stdin(std::byte* p, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r = ::read(STDIN_FILENO, p + got, n - got);
        if (r == 0)
            break;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        got += static_cast<std::size_t>(r);
    }
    return got;
}

std::string outcomes(const replica_completion& c, const std::vector<std::string>& names) {
    std::string s;
    for (std::uint32_t m = 0; m < c.replicas; ++m) {
        static constexpr const char* word[] = {"not written", "pending", "durable", "failed"};
        s += fmt::format("{}{} {}", m == 0 ? "" : ", ", names[m],
                         word[static_cast<int>(c.outcome[m])]);
    }
    return s;
}

}  // namespace

int run_put_replicated(const transfer_options& o) {
    const auto n = static_cast<std::uint32_t>(o.replicas.size());
    const std::uint32_t quorum = o.quorum == 0 ? n / 2 + 1 : o.quorum;
    if (quorum > n) {
        fmt::print(stderr, "remora put: --quorum {} with {} replicas\n", quorum, n);
        return 64;
    }
    std::optional<domain> dom;
    std::vector<target_link> links;
    std::vector<std::string> names;
    for (const std::string& a : o.replicas) {
        auto t = connect_with_options(o, a, static_cast<std::uint16_t>(o.depth),
                                      dom ? &*dom : nullptr, true);
        if (!t) {
            fmt::print(stderr, "remora put: replica {}: {}\n", a, t.error().message());
            continue;
        }
        if (!dom)
            dom = t->dom;
        links.push_back(std::move(*t));
        names.push_back(a);
    }
    if (links.size() < quorum)
        return report_line("put", fmt::format("{} of {} replicas reachable, fewer than the "
                                              "quorum {}: nothing written",
                                              links.size(), n, quorum));
    bool persistent = true;
    std::vector<replica> members;
    for (auto& l : links) {
        members.push_back({&l.conn, l.info.region});
        persistent = persistent && any(l.info.region.persistence() & persistence::persistent);
    }
    put_events events{&names};
    const flush_options how{.type = persistent ? flush_type::persistence : flush_type::visibility};
    auto set = replica_set::create(members, {.quorum = quorum,
                                             .depth = o.depth,
                                             .how = how,
                                             .on_event = &on_event,
                                             .event_context = &events});
    if (!set)
        return report("put", set.error());

    // One write of all of stdin, or records of record_size through depth slots.
    std::vector<std::byte> whole;
    if (o.record_size == 0) {
        whole.resize(1 << 16);
        std::size_t len = 0;
        for (std::size_t got; (got = read_stdin(whole.data() + len, whole.size() - len)) > 0;) {
            len += got;
            if (len == whole.size())
                whole.resize(whole.size() * 2);
        }
        whole.resize(len);
        if (whole.empty()) {
            std::fprintf(stderr, "remora put: nothing on stdin, nothing written\n");
            return 0;
        }
    }
    const std::size_t record = o.record_size == 0 ? whole.size() : o.record_size;
    const std::uint32_t slots = o.record_size == 0 ? 1 : o.depth;
    std::vector<std::byte> ring(o.record_size == 0 ? 0 : record * slots);
    auto src = memory_region::create(*dom, o.record_size == 0 ? whole : ring, usage::write_source);
    if (!src)
        return report("put", src.error());

    std::vector<bool> busy(slots, false);
    std::uint64_t written = 0, completed = 0, acked = 0, bytes = 0;
    std::optional<replica_completion> failed;
    auto reap = [&](bool block) {
        replica_completion c[16];
        if (block && !set->wait(std::chrono::seconds(60)))
            return false;
        const std::size_t got = set->poll(c);
        for (std::size_t i = 0; i < got; ++i) {
            const auto index = reinterpret_cast<std::uintptr_t>(c[i].context);
            busy[index % slots] = false;
            ++completed;
            if (!c[i].ok()) {
                if (!failed)
                    failed = c[i];
                continue;
            }
            ++acked;
            if (o.record_size != 0)
                std::printf("acked %llu %llu\n", static_cast<unsigned long long>(index),
                            static_cast<unsigned long long>(c[i].offset));
        }
        std::fflush(stdout);
        return true;
    };
    for (std::uint64_t index = 0; !failed; ++index) {
        const std::size_t slot = index % slots;
        while (busy[slot] && !failed)
            if (!reap(true))
                return report_line("put", "no completion in 60 s");
        if (failed)
            break;
        std::size_t len = record;
        if (o.record_size != 0) {
            len = read_stdin(ring.data() + slot * record, record);
            if (len == 0)
                break;
        } else if (index > 0) {
            break;
        }
        const std::uint64_t at = o.offset + index * record;
        if (at > set->range() || len > set->range() - at) {
            failed.emplace();
            failed->status = make_error_code(errc::out_of_range);
            fmt::print(stderr,
                       "remora put: record {} at offset {} does not fit the {} bytes of "
                       "the replicas' regions\n",
                       index, at, set->range());
            break;
        }
        busy[slot] = true;
        auto w =
            set->write(at, *src, slot * record, len,
                       {.context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(index)),
                        .park_until = std::chrono::steady_clock::now() + std::chrono::seconds(60)});
        if (!w) {
            busy[slot] = false;
            (void)set->drain(std::chrono::seconds(60));
            reap(false);
            return report("put", w.error());
        }
        ++written;
        bytes += len;
        reap(false);
    }
    while (completed < written && reap(true)) {
    }
    if (failed) {
        fmt::print(stderr, "remora put: a write at offset {} failed: {} ({})\n", failed->offset,
                   failed->status.message(), outcomes(*failed, names));
        return 1;
    }
    if (completed < written)
        return report_line("put", "writes did not complete in 60 s");
    if (!persistent) {
        fmt::print(stderr,
                   "remora put: {} bytes written and visible on at least {} of {} replicas, NOT "
                   "durable: a region is volatile\n",
                   bytes, quorum, n);
        return 2;
    }
    fmt::print(stderr,
               "remora put: {} bytes in {} write(s) at offset {}, durable on at least {} of "
               "{} replicas ({} live)\n",
               bytes, written, o.offset, quorum, n, set->live());
    return 0;
}

}  // namespace remora::tool

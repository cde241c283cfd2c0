// SPDX-License-Identifier: BSD-3-Clause
// examples/replicated_log — a log whose every record is durable on two of three targets, that
// loses a target and brings it back.
//
// Three targets (here threads of one process, standing in for three machines) each map a file
// as a persistent_region, expose it through a target_service and accept clients. The client
// connects to all three from one domain and forms a replica_set with quorum 2: each record is
// written and flushed to persistence (GPSPM) on every live target, and acknowledged once two
// have it durable.
//
// After a third of the records, target 2 fails (its side of the connection closes): the set
// drops it on its next write, says so, and goes on with the other two. After two thirds, target
// 2 is back: the client connects to it again and rejoins it; the set copies the records it
// missed from a live target while the appends go on, and says when it counts again. At the end
// every target's file holds every record, each checked by its sequence number and checksum.
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <remora/remora.hpp>

#include "example_common.hpp"

namespace {

using namespace std::chrono_literals;
using example::die;
using example::must;

constexpr std::size_t region_size = 256 * 1024;
constexpr std::size_t slot = 256;  // each record at seq * slot
constexpr std::uint32_t records = 192;
constexpr std::uint32_t depth = 8;

struct record {
    std::uint32_t seq;
    std::uint32_t length;
    std::uint64_t checksum;  // FNV-1a of the text
    char text[slot - 16];
};

std::uint64_t fnv1a(const char* p, std::size_t n) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::size_t i = 0; i < n; ++i) {
        h = (h ^ static_cast<unsigned char>(p[i])) * 0x100000001b3ull;
    }
    return h;
}

record make_record(std::uint32_t seq) {
    record r{};
    r.seq = seq;
    const std::string text = "record " + std::to_string(seq) + " of the replicated log";
    r.length = static_cast<std::uint32_t>(text.size());
    std::memcpy(r.text, text.data(), text.size());
    r.checksum = fnv1a(r.text, r.length);
    return r;
}

// A target: its region in a file, its service, its listener, and its side of each connection.
struct target {
    remora::domain dom;
    remora::persistent_region region;
    remora::target_service service;
    remora::remote_region desc;
    remora::listener lst;
    std::deque<remora::connection> conns;
};

target open_target(const std::string& path) {
    auto dom = must(remora::domain::open(), "target: open domain");
    auto region = must(
        remora::persistent_region::open(dom, {.path = path, .size = region_size, .create = true}),
        "target: open " + path);
    auto service = must(remora::target_service::create(), "target: create service");
    auto desc = must(service.expose(region), "target: expose");
    auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "target: listen");
    return {std::move(dom), std::move(region), std::move(service), desc, std::move(lst), {}};
}

const remora::connection_config config{
    .progress_thread = true,  // the target's service and the set's callbacks run there
    .addons = {remora::persistence_config{.service_depth = depth}}};

// A connection from `dom` to target `t`, accepted and served on the target's side.
remora::connection connect(const remora::domain& dom, target& t) {
    auto accepted = std::async(std::launch::async, [&] {
        auto req = must(t.lst.get_request(10s), "target: get_request");
        t.conns.push_back(must(req.accept(config, t.desc.serialize()), "target: accept"));
        must(t.service.serve(t.conns.back()), "target: serve");
    });
    auto conn = must(remora::connection::connect(dom, "127.0.0.1", t.lst.port(), config),
                     "client: connect");
    accepted.get();
    return conn;
}

void on_event(const remora::replica_event& e) {
    std::printf("client: target %u %s%s%s\n", e.index, remora::to_string(e.kind),
                e.status ? ": " : "", e.status ? e.status.message().c_str() : "");
}

}  // namespace

int main() {
    example::program_name = "example_replicated_log";
    const example::temp_dir dir;
    std::deque<target> targets;
    for (int i = 0; i < 3; ++i) {
        targets.push_back(open_target(dir.file(("log" + std::to_string(i) + ".bin").c_str())));
    }
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s\n", dom.caps().provider.c_str());
    std::deque<remora::connection> conns;
    std::vector<remora::replica> members;
    for (auto& t : targets) {
        conns.push_back(connect(dom, t));
        members.push_back({&conns.back(), t.desc});
    }
    auto set = must(
        remora::replica_set::create(members, {.quorum = 2, .depth = depth, .on_event = &on_event}),
        "client: form the set");

    std::vector<record> staged(records);
    auto staged_mr =
        must(remora::memory_region::create(
                 dom, {reinterpret_cast<std::byte*>(staged.data()), staged.size() * sizeof(record)},
                 remora::usage::write_source),
             "client: register");
    const auto append = [&](std::uint32_t seq) {
        staged[seq] = make_record(seq);
        must(set.write(seq * slot, staged_mr, seq * sizeof(record), sizeof(record),
                       {.park_until = std::chrono::steady_clock::now() + 10s}),
             "client: append record " + std::to_string(seq));
        remora::replica_completion c;
        if (!set.wait(10s) || set.poll({&c, 1}) != 1) {
            die("client: record " + std::to_string(seq) + " was not acknowledged in 10 s");
        }
        if (!c.ok()) {
            die("client: record " + std::to_string(seq) + " failed: " + c.status.message());
        }
    };
    std::uint32_t seq = 0;
    for (; seq < records / 3; ++seq) {
        append(seq);
    }
    std::printf("client: %u records durable on at least 2 of 3; target 2 fails now\n", seq);
    static_cast<void>(targets[2].conns.back().close());
    for (; seq < 2 * records / 3; ++seq) {
        append(seq);
    }
    std::printf("client: %u records, %zu targets live, target 2 misses %llu bytes; it is back\n",
                seq, set.live(), static_cast<unsigned long long>(set.missing(2)));
    conns.push_back(connect(dom, targets[2]));
    must(set.rejoin(2, conns.back(), targets[2].desc), "client: rejoin target 2");
    for (; seq < records; ++seq) {
        append(seq);
    }
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (set.state(2) != remora::replica_state::live) {
        if (std::chrono::steady_clock::now() > deadline) {
            die("client: target 2 did not catch up in 20 s");
        }
        std::this_thread::sleep_for(1ms);
    }
    must(set.drain(10s), "client: drain");
    std::printf("client: %u records appended, %zu targets live\n", seq, set.live());

    // Every target's file holds every record.
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const std::byte* log = targets[i].region.memory().data();
        for (std::uint32_t s = 0; s < records; ++s) {
            record r;
            std::memcpy(&r, log + s * slot, sizeof r);
            if (r.seq != s || r.length >= sizeof r.text || r.checksum != fnv1a(r.text, r.length)) {
                die("target " + std::to_string(i) + ": record " + std::to_string(s) +
                    " is missing or damaged");
            }
        }
        std::printf("target %zu: all %u records intact\n", i, records);
    }
    return 0;
}

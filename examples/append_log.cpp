// SPDX-License-Identifier: BSD-3-Clause
// examples/append_log — an append-only log in the target's file that survives a target crash.
//
// The target maps a file as a persistent_region and exposes it through a target_service. The
// file's first 8 bytes are the log's tail (how many bytes of records are committed); records
// follow from byte 64. The client appends each record in two durable steps:
//   1. write the record past the tail, and flush it to persistence (GPSPM: the target's service
//      msyncs the range; the flush request travels behind the write, so it covers it);
//   2. publish the new tail with atomic_write (the provider's atomics on sockets, the target's
//      service on tcp: connection::atomics() says which), and flush the tail to persistence.
// A record is committed once step 2 completes. A crash between the steps leaves bytes past the
// tail, which readers ignore: the client's last append writes and persists a record but never
// publishes it, as if it died there.
//
// After the client has gone, the target "crashes" (drops its connection, service and region
// without persisting anything itself), reopens the same file in a new persistent_region as
// after a restart, and replays the log up to the tail, checking every record's sequence number,
// length, checksum and text, and that the unpublished record is beyond the tail.
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <initializer_list>
#include <string>
#include <vector>

#include <remora/remora.hpp>

#include "example_common.hpp"

namespace {

using namespace std::chrono_literals;
using example::die;
using example::must;
using example::next_completion;
using remora::flush_type;
using remora::usage;

constexpr std::size_t region_size = 64 * 1024;
constexpr std::size_t tail_at = 0;       // the committed tail: an 8-byte word
constexpr std::size_t log_start = 64;    // records from here
constexpr std::uint32_t committed = 16;  // records the client commits, then one it does not
constexpr std::uint32_t service_depth = 4;

struct record_header {
    std::uint32_t seq;
    std::uint32_t length;    // of the text
    std::uint64_t checksum;  // FNV-1a of the text
};

std::string text_of_record(std::uint32_t seq) {
    return "record " + std::to_string(seq) + " " +
           std::string(5 + seq * 7 % 40, static_cast<char>('a' + seq % 26));
}
std::uint64_t fnv1a(const std::string& s) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const char c : s) {
        h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    }
    return h;
}
std::size_t record_size(std::uint32_t seq) {  // header + text, padded to 8 bytes
    return (sizeof(record_header) + text_of_record(seq).size() + 7) / 8 * 8;
}

void run_server(std::promise<std::uint16_t>& port, const std::string& path,
                std::promise<void>& served) {
    auto dom = must(remora::domain::open(), "server: open domain");
    {
        auto region = must(remora::persistent_region::open(
                               dom, {.path = path, .size = region_size, .create = true}),
                           "server: open " + path);
        auto service = must(remora::target_service::create(), "server: create service");
        const auto wire = must(service.expose(region), "server: expose").serialize();
        auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
        port.set_value(lst.port());
        auto req = must(lst.get_request(10s), "server: get_request");
        auto conn = must(
            req.accept({.progress_thread = true,
                        .addons = {remora::persistence_config{.service_depth = service_depth}}},
                       wire),
            "server: accept");
        must(service.serve(conn), "server: serve");
        served.set_value();
        example::wait_for_close(conn, "server");
        std::printf("server: the client is gone after %llu service requests; crashing\n",
                    static_cast<unsigned long long>(service.requests()));
    }  // the "crash": connection, service and region go away; nothing is persisted here

    auto region = must(remora::persistent_region::open(dom, {.path = path}), "server: reopen");
    const std::byte* log = region.memory().data();
    std::uint64_t tail;
    std::memcpy(&tail, log + tail_at, 8);
    if (tail > region.memory().size() - log_start) {
        die("server: the tail " + std::to_string(tail) + " is past the end of the file");
    }
    std::uint64_t pos = 0;
    std::uint32_t seq = 0;
    for (; pos < tail; ++seq) {
        record_header h;
        std::memcpy(&h, log + log_start + pos, sizeof h);
        const std::string text = text_of_record(seq);
        if (h.seq != seq || h.length != text.size() || h.checksum != fnv1a(text) ||
            std::memcmp(log + log_start + pos + sizeof h, text.data(), text.size()) != 0) {
            die("server: record " + std::to_string(seq) + " at " + std::to_string(pos) +
                " is damaged");
        }
        pos += record_size(seq);
    }
    if (pos != tail || seq != committed) {
        die("server: replayed " + std::to_string(seq) + " records ending at " +
            std::to_string(pos) + ", tail " + std::to_string(tail));
    }
    record_header torn;
    std::memcpy(&torn, log + log_start + tail, sizeof torn);
    if (torn.seq != committed) {
        die("server: the unpublished record is not past the tail");
    }
    std::printf(
        "server: reopened %s: replayed %u records up to tail %llu, all intact; record %u "
        "past the tail was never published and is ignored\n",
        path.c_str(), seq, static_cast<unsigned long long>(tail), torn.seq);
}

// Waits for `n` completions, each of one of the ops in `ops`.
void reap(remora::connection& conn, int n, std::initializer_list<remora::op> ops) {
    for (int i = 0; i < n; ++i) {
        const remora::op got = next_completion(conn.cq(), "client").op;
        if (std::find(ops.begin(), ops.end(), got) == ops.end()) {
            die(std::string("client: unexpected ") + remora::to_string(got) + " completion");
        }
    }
}

}  // namespace

int main() {
    example::program_name = "example_append_log";
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s\n", dom.caps().provider.c_str());

    const example::temp_dir dir;
    const std::string path = dir.file("log.bin");
    std::promise<void> served;
    example::server_thread server(run_server, std::cref(path), std::ref(served));
    auto conn = must(remora::connection::connect(
                         dom, "127.0.0.1", server.port(),
                         {.addons = {remora::persistence_config{.service_depth = service_depth}}}),
                     "client: connect");
    const remora::remote_region log =
        must(remora::remote_region::parse(conn.peer_private_data()), "client: parse descriptor");
    std::printf(
        "client: atomics go %s; persistence flushes by %s\n",
        remora::to_string(remora::atomics(conn)),
        remora::to_string(must(remora::flush_method_for(conn, log), "client: flush method")));

    // Start once the server serves the connection: a request sent earlier would wait in the
    // provider until serve() posts the service's receives (it is not lost, only delayed).
    served.get_future().wait();

    // Staging: the records at the offsets they get in the log, and the tail read back.
    std::vector<std::byte> local(region_size);
    auto local_mr = must(
        remora::memory_region::create(dom, local, usage::write_source | usage::read_destination),
        "client: reg");
    must(conn.read(local_mr, tail_at, log, tail_at, 8), "client: read tail");
    reap(conn, 1, {remora::op::read});
    std::uint64_t tail;
    std::memcpy(&tail, local.data() + tail_at, 8);

    const remora::flush_options durable{.type = flush_type::persistence};
    const auto start = std::chrono::steady_clock::now();
    for (std::uint32_t seq = 0; seq <= committed; ++seq) {
        const std::string text = text_of_record(seq);
        const record_header h{seq, static_cast<std::uint32_t>(text.size()), fnv1a(text)};
        const std::size_t at = log_start + tail;
        const std::size_t size = record_size(seq);
        if (at + size > region_size) {
            die("client: the log is full");
        }
        std::memcpy(local.data() + at, &h, sizeof h);
        std::memcpy(local.data() + at + sizeof h, text.data(), text.size());
        // Step 1: the record, durable. The flush is ordered behind the write: post both at once.
        must(conn.write(log, at, local_mr, at, size), "client: write record");
        must(remora::flush(conn, log, at, size, durable), "client: flush record");
        reap(conn, 2, {remora::op::write, remora::op::flush});
        if (seq == committed) {
            break;  // the client "dies" before publishing this one
        }
        // Step 2: commit it by publishing the new tail, durable too.
        tail += size;
        must(remora::atomic_write(conn, log, tail_at, tail), "client: publish tail");
        reap(conn, 1, {remora::op::atomic});
        must(remora::flush(conn, log, tail_at, 8, durable), "client: flush tail");
        reap(conn, 1, {remora::op::flush});
    }
    const auto took = std::chrono::steady_clock::now() - start;
    std::printf(
        "client: committed %u records (tail %llu) in %.1f ms, then wrote record %u "
        "without publishing it\n",
        committed, static_cast<unsigned long long>(tail),
        std::chrono::duration<double, std::milli>(took).count(), committed);

    must(conn.close(), "client: close");
    server.join();
    std::printf("append_log: ok\n");
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
// examples/write — a one-sided RDMA write into the server's memory.
//
// The server registers a buffer that peers may write into (usage::write_destination), describes
// it (memory_region::describe) and hands the 40-byte serialised descriptor to the client as the
// private data of its accept. The client parses it (remote_region::parse), writes into the
// server's buffer without the server's CPU taking part, then sends a short "done" message. The
// server waits for that message, checks the bytes and answers "ok"; then the client closes.
//
// Ordering: a connection delivers a send posted after a write after the write (tcp and sockets
// run one ordered stream per connection; verbs RC orders a send after a write the same way), so
// when "done" arrives the written bytes are in place.
//
// Progress: on tcp the target's provider moves one-sided traffic only when the target calls into
// libfabric. Here the server blocks in a wait on its own CQ for the "done" message, and that wait
// drives the provider, so the write lands without a progress thread. A server that does not
// touch its CQ (examples/read) asks for connection_config::progress_thread instead.
//
// The provider is FI_PROVIDER if set, else remora's default choice. Exits 0 on success, 1 with a
// one-line message on stderr otherwise.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <span>
#include <string>
#include <vector>

#include <remora/remora.hpp>

#include "example_common.hpp"

namespace {

using namespace std::chrono_literals;
using example::die;
using example::must;
using example::next_completion;
using example::text_of;
using remora::usage;

constexpr std::size_t region_size = 4096;
constexpr std::size_t write_offset = 512;  // where in the server's region the client writes
constexpr std::size_t write_length = 1024;

std::byte pattern(std::size_t i) {
    return static_cast<std::byte>((i * 7 + 3) & 0xff);
}

void run_server(std::promise<std::uint16_t>& port) {
    auto dom = must(remora::domain::open(), "server: open domain");

    // The memory peers write into, and a small buffer for the client's "done" ([0, 4)) and our
    // "ok" ([4, 6)).
    std::vector<std::byte> target(region_size);  // zero-filled
    std::vector<std::byte> notes(8);
    std::memcpy(notes.data() + 4, "ok", 2);
    auto target_mr =
        must(remora::memory_region::create(dom, target, usage::write_destination), "server: reg");
    auto notes_mr = must(remora::memory_region::create(dom, notes, usage::receive | usage::send),
                         "server: reg");

    // The descriptor grants only what the region was registered for: remote writes, here.
    const remora::remote_region desc = must(target_mr.describe(), "server: describe");
    const auto wire = desc.serialize();  // 40 bytes, fits any provider's private data

    auto lst = must(remora::listener::create(dom, "127.0.0.1", 0), "server: listen");
    port.set_value(lst.port());
    auto req = must(lst.get_request(10s), "server: get_request");
    auto conn = must(req.accept({}, wire), "server: accept");
    std::printf("server: accepted, sent a %zu-byte descriptor of %zu bytes (key %llu)\n",
                wire.size(), target.size(), static_cast<unsigned long long>(desc.key()));

    // Wait for "done"; the write landed before it.
    must(conn.recv(notes_mr, 0, 4), "server: recv");
    const remora::completion done = next_completion(conn.cq(), "server");
    if (done.op != remora::op::recv) {
        die(std::string("server: expected a recv completion, got ") + remora::to_string(done.op));
    }

    for (std::size_t i = 0; i < region_size; ++i) {
        const bool written = i >= write_offset && i < write_offset + write_length;
        const std::byte want = written ? pattern(i - write_offset) : std::byte{0};
        if (target[i] != want) {
            die("server: byte " + std::to_string(i) + " is wrong after the write");
        }
    }
    std::printf("server: %zu bytes at offset %zu hold the client's data; the rest is untouched\n",
                write_length, write_offset);
    must(conn.send(notes_mr, 4, 2), "server: send");
    if (next_completion(conn.cq(), "server").op != remora::op::send) {
        die("server: unexpected completion for the send");
    }

    example::wait_for_close(conn, "server");
}

}  // namespace

int main() {
    example::program_name = "example_write";
    auto dom = must(remora::domain::open(), "client: open domain");
    std::printf("provider: %s\n", dom.caps().provider.c_str());

    example::server_thread server(run_server);
    auto conn =
        must(remora::connection::connect(dom, "127.0.0.1", server.port()), "client: connect");

    // Everything from the wire is validated: size, version, usage bits, range.
    const remora::remote_region remote =
        must(remora::remote_region::parse(conn.peer_private_data()), "client: parse descriptor");
    std::printf("client: server region of %llu bytes, writable: %s\n",
                static_cast<unsigned long long>(remote.length()),
                remora::has_all(remote.usages(), usage::write_destination) ? "yes" : "no");

    // Local memory: the source of the write, then "done" and room for the server's answer.
    std::vector<std::byte> local(write_length + 8);
    for (std::size_t i = 0; i < write_length; ++i) {
        local[i] = pattern(i);
    }
    std::memcpy(local.data() + write_length, "done", 4);
    auto local_mr = must(remora::memory_region::create(
                             dom, local, usage::write_source | usage::send | usage::receive),
                         "client: reg");

    int write_ctx = 0;  // any pointer identifies the operation in its completion
    must(conn.write(remote, write_offset, local_mr, 0, write_length, {.context = &write_ctx}),
         "client: write");
    const remora::completion w = next_completion(conn.cq(), "client");
    if (w.op != remora::op::write || w.context != &write_ctx) {
        die("client: unexpected completion for the write");
    }
    std::printf("client: wrote %zu bytes at offset %zu of the server's region\n", write_length,
                write_offset);

    // "done", and wait for the answer (its receive posted first) before closing.
    must(conn.recv(local_mr, write_length + 4, 4), "client: recv");
    must(conn.send(local_mr, write_length, 4), "client: send");
    bool sent = false;
    std::size_t answer = 0;  // bytes of the answer
    while (!sent || answer == 0) {
        const remora::completion c = next_completion(conn.cq(), "client");
        if (c.op == remora::op::send) {
            sent = true;
        } else if (c.op == remora::op::recv) {
            answer = c.bytes;
        } else {
            die(std::string("client: unexpected ") + remora::to_string(c.op) + " completion");
        }
    }
    const std::string verdict = text_of(std::span(local).subspan(write_length + 4, answer));
    std::printf("client: the server answered \"%s\"\n", verdict.c_str());
    if (verdict != "ok") {
        die("client: the server did not confirm the write");
    }
    must(conn.close(), "client: close");

    server.join();
    std::printf("write: ok\n");
    return 0;
}

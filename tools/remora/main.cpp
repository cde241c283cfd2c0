// SPDX-License-Identifier: BSD-3-Clause
// The `remora` command: info, serve, put, get and bench.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "args.hpp"
#include "common.hpp"

namespace {

// A hidden option that only says where a habit from another tool went (exit 64).
void moved(CLI::App* app, const std::string& name, const std::string& why) {
    app->add_option(name)->group("")->check(
        CLI::Validator([why](std::string&) { return why; }, ""));
}

// --size's words: "all" or "all:MAX" (powers of two from 2 B to MAX, 8 MiB by default), else a
// size; every size becomes its number of bytes.
constexpr std::uint64_t bench_most = std::uint64_t{1} << 26;  // the bench's buffers
CLI::Validator bench_size_arg() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            if (text == "all")
                return {};
            const bool all = text.rfind("all:", 0) == 0;
            std::string n = all ? text.substr(4) : text;
            const std::string e =
                remora::tool::size_arg(all ? 2 : 1, bench_most, "the bench's buffers")(n);
            if (!e.empty())
                return e;
            text = all ? "all:" + n : n;
            return {};
        },
        "SIZE|all[:MAX]");
}

// The sizes --size names: "all[:MAX]" expands to 2, 4, ... MAX (perftest's -a).
remora::endpoint_type endpoint_named(const std::string& e) {
    return e == "rdm" ? remora::endpoint_type::rdm : remora::endpoint_type::msg;
}

std::vector<std::size_t> bench_sizes(const std::vector<std::string>& words) {
    std::vector<std::size_t> out;
    for (const auto& w : words) {
        if (w.rfind("all", 0) != 0) {
            out.push_back(std::stoull(w));
            continue;
        }
        const std::size_t most = w == "all" ? std::size_t{1} << 23 : std::stoull(w.substr(4));
        for (std::size_t n = 2; n <= most; n *= 2)
            out.push_back(n);
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace remora::tool;
    using remora::endpoint_type;
    // `remora bench` re-executed to run its plain-libfabric baseline in a process of its own.
    if (argc == 3 && std::string_view(argv[1]) == baseline_verb)
        return run_baseline_child(argv[2]);
    CLI::App app{"remora: remote memory access over fabrics (libfabric)"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("remora ") + remora::version(),
                         "Print the version of remora and exit");
    app.footer(
        "Examples:\n"
        "  remora info                      providers usable here and what remora does on them\n"
        "  remora serve --region file:/tmp/r.bin:64M --create   a target on 127.0.0.1:7471\n"
        "  echo hello | remora put --offset 0                   copy stdin in, flush to "
        "durability\n"
        "  remora get --offset 0 --length 5                     print a range of the region\n"
        "  remora keygen k.key; remora serve --key-file k.key   admit only holders of the key\n"
        "  remora bench                     the default suite on loopback\n"
        "  remora bench --suite channels    separate vs shared completion channels (GPSPM)\n"
        "  remora bench --suite fanin       1/8/32 connections: a CQ each vs one shared CQ\n"
        "Sizes, lengths and offsets: a number of bytes, or with K, M, G, T (KiB, MiB, GiB,\n"
        "TiB): powers of 1024, as perftest and fio read 4K; 1.5M is written 1536K.\n"
        "A short option means one thing in every subcommand: -p provider, -e endpoint, -t\n"
        "target; -o bench's --op (fabtests' -o), -a bench's all sizes (perftest's -a), -l get's\n"
        "--length. So put/get's offset is --offset, serve's --listen and info's --address have\n"
        "no short form.\n"
        "Exit status: 0 done, 1 a failed run (one line on stderr says why), 64 a bad argument,\n"
        "found before anything is opened (put also exits 2 when the bytes are written but not\n"
        "durable).\n");

    info_options io;
    auto* info = app.add_subcommand(
        "info", "Providers and NICs usable here, and what remora can do on each");
    info->add_option("-p,--provider", io.provider,
                     "Only this provider (msg: verbs, tcp, sockets; rdm: shm, tcp;ofi_rxm, net, "
                     "verbs;ofi_rxm, efa, sockets)");
    info->add_option("-e,--endpoint", io.endpoint,
                     "Only this endpoint type: msg (connections) or rdm (peers over an address "
                     "vector); default both")
        ->check(CLI::IsMember({"msg", "rdm"}));
    info->add_option("--address", io.address, "Local address selecting the NIC")
        ->capture_default_str();
    moved(info, "-a",
          "-a: the local address is --address (-a is bench's all sizes, as perftest's -a)");
    info->add_flag("--json", io.json, "One JSON array instead of a table");
    info->footer(
        "Examples:\n  remora info\n  remora info --provider tcp --json\n"
        "  remora info --endpoint rdm --provider shm\n");

    serve_options so;
    auto* serve = app.add_subcommand(
        "serve", "Expose a region (memory or a file) to clients until SIGINT/SIGTERM");
    serve->add_option("-p,--provider", so.provider, "Provider (default: automatic)");
    serve->add_option("--listen", so.listen, "HOST:PORT to listen on (port 0: any free port)")
        ->check(address_arg(true))
        ->capture_default_str();
    moved(serve, "-l", "-l: serve listens at --listen HOST:PORT (-l is get's --length)");
    serve
        ->add_option("-r,--region", so.region,
                     "mem:SIZE or file:PATH[:SIZE], 1 byte to 1 TiB (memory: no more than this "
                     "machine has); SIZE in bytes or K, M, G, T (powers of 1024)")
        ->check(region_arg())
        ->capture_default_str();
    serve->add_flag("--create", so.create,
                    "Create the file, or extend a short one (never truncates)");
    serve->add_flag("--unguarded", so.unguarded,
                    "Neither lock the region file nor hold its lease (file systems without "
                    "leases): a truncation by another process then kills serve with SIGBUS");
    serve->add_option("--depth", so.depth, "Most service requests in flight per client")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    serve
        ->add_option(
            "--key-file", so.key_files,
            "[ro=|rw=]FILE: admit clients proving this 32-byte key (remora keygen FILE; mode 0600) "
            "with that role: ro reads only, rw (the default) reads, writes, flushes and runs "
            "atomics. Repeat for several keys")
        ->check(key_spec_arg());
    serve
        ->add_option("--access", so.access,
                     "Without --key-file: the role every client gets, ro or rw")
        ->check(CLI::IsMember({"ro", "rw"}))
        ->capture_default_str();
    serve
        ->add_option("--max-clients", so.max_clients, "Clients connected at once; more are refused")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    serve
        ->add_option("--handshake-timeout", so.handshake_timeout,
                     "Seconds an admitted client has to complete its connection")
        ->check(CLI::Range(0.1, 600.0))
        ->capture_default_str();
    serve
        ->add_option("--idle-timeout", so.idle_timeout,
                     "Evict a client after this many seconds without a service request (flush, "
                     "atomic); one-sided reads and writes are invisible to the target. 0: off")
        ->check(CLI::Range(0.0, 86400.0))
        ->capture_default_str();
    serve
        ->add_option("--reply-timeout", so.reply_timeout,
                     "Close a client whose oldest service reply has waited this many seconds for "
                     "it to take it (it posts no receives, or has stopped reading)")
        ->check(CLI::Range(0.1, 86400.0))
        ->capture_default_str();
    serve
        ->add_option("--same-host", so.same_host,
                     "on: a read-write client in another process of this host and user moves its "
                     "operations to shared memory once connected, unless its own domain keeps it "
                     "off (REMORA_SAME_HOST=off); such a client can reach all of serve's memory, "
                     "not only the region (shared memory checks no keys), as its user could "
                     "through ptrace anyway. off: every client stays on the provider. Read-only "
                     "clients always stay")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    serve
        ->add_option("--fd-reserve", so.fd_reserve,
                     "Refuse new clients as overloaded when fewer file descriptors are left "
                     "(a client holds about 8)")
        ->check(CLI::Range(8, 65536))
        ->capture_default_str();
    serve->footer(
        "Without --key-file anyone who reaches the port may read (and with --access rw, the\n"
        "default, write) the whole region; serve warns when it listens beyond loopback without\n"
        "a key. Each role has its own registration of the region with its own random key: a\n"
        "read-only client's descriptor allows remote reads only, and the target service\n"
        "refuses its flushes and atomics. Admission does not encrypt the traffic: see\n"
        "docs/security.md.\n"
        "Limits: --max-clients, --handshake-timeout, --idle-timeout, --reply-timeout,\n"
        "--fd-reserve; a client refused for load is told \"the target is at its limit\".\n"
        "SIGINT/SIGTERM close the connections, persist the region and exit 0.\n"
        "Clients get the region's descriptor when they connect. A file region is persistent:\n"
        "clients flush to durability through the service (GPSPM, msync).\n"
        "Examples:\n"
        "  remora serve --region mem:64M\n"
        "  remora serve --key-file rw=writer.key --key-file ro=reader.key\n"
        "  remora serve --listen 127.0.0.1:0 --region file:/var/tmp/log.bin:1G --create\n");

    transfer_options to;
    auto add_transfer = [&](CLI::App* c) {
        c->add_option("-p,--provider", to.provider, "Provider (default: automatic)");
        c->add_option("-t,--target", to.target, "HOST:PORT of a `remora serve`")
            ->check(address_arg(false))
            ->capture_default_str();
        c->add_option("--offset", to.offset,
                      std::string("Offset in the region: ") + size_units +
                          ". No -o: -o is bench's --op, as fabtests' -o")
            ->transform(size_arg(0, UINT64_MAX))
            ->capture_default_str();
        moved(c, "-o",
              "-o: the offset is --offset (-o is bench's --op, the operation, as fabtests' -o)");
        c->add_option("--key-file", to.key_file, "The target's admission key (its --key-file)")
            ->check(CLI::ExistingFile);
    };
    auto* put = app.add_subcommand(
        "put", "Copy stdin into the served region at an offset, then flush it to durability");
    add_transfer(put);
    auto* no_flush =
        put->add_flag("--no-flush", to.no_flush, "Do not flush (the bytes may not be durable)");
    auto* replicas =
        put->add_option("--replicas", to.replicas,
                        "HOST:PORT,... of several `remora serve` targets: write to all of them, "
                        "each write acknowledged once --quorum of them made it durable")
            ->delimiter(',')
            ->check(address_arg(false))
            ->excludes(no_flush);
    put->add_option("--quorum", to.quorum,
                    "With --replicas: targets a write must be durable on (default: a majority)")
        ->check(CLI::Range(1, 16))
        ->needs(replicas);
    put->add_option("--record-size", to.record_size,
                    std::string("With --replicas: cut stdin into records of this size, appended in "
                                "order as they arrive, one line `acked INDEX OFFSET` each: ") +
                        size_units)
        ->transform(size_arg(1, UINT64_MAX))
        ->needs(replicas);
    put->add_option("--depth", to.depth, "With --replicas: records in flight")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str()
        ->needs(replicas);
    put->footer(
        "Exit status: 0 written (and durable unless --no-flush), 1 error, 2 written but not\n"
        "durable (the region is volatile), 64 a bad argument.\n"
        "With --replicas, a target that fails is dropped (a line says so) and the writes go on\n"
        "while --quorum targets remain; with fewer, put stops with status 1.\n"
        "Examples:\n"
        "  echo hello | remora put --offset 4096\n"
        "  remora put --target 10.0.0.2:7471 --offset 0 < record.bin\n"
        "  remora put --replicas a:7471,b:7471,c:7471 --quorum 2 --record-size 4K < log.bin\n");
    auto* get = app.add_subcommand("get", "Print a range of the served region to stdout");
    add_transfer(get);
    get->add_option("-l,--length", to.length,
                    std::string("Bytes to print, 1 or more (default: to the end of the region): ") +
                        size_units + ". -l, not -n: bench's -n is a count of operations")
        ->transform(size_arg(1, UINT64_MAX));
    moved(get, "-n", "-n: get's length is -l/--length (-n is bench's count of operations)");
    get->footer(
        "Examples:\n  remora get --offset 4096 --length 5\n"
        "  remora get --target 10.0.0.2:7471 --offset 0 -l 1M > copy.bin\n");

    std::string keygen_path;
    auto* keygen = app.add_subcommand(
        "keygen", "Write a new random admission key to a file (mode 0600, never overwritten)");
    keygen->add_option("FILE", keygen_path, "Where to write the key")->required();
    keygen->footer(
        "Examples:\n  remora keygen ~/.remora.key\n"
        "  remora serve --key-file ~/.remora.key   and   remora get --key-file ~/.remora.key\n");

    bench_options bo;
    std::vector<std::string> sizes;
    bool all_sizes = false;
    bool report_gbits = false;
    auto* bench =
        app.add_subcommand("bench", "Run a workload against a loopback target started here");
    bench->add_option("-p,--provider", bo.provider,
                      "Provider (default: automatic, verbs before tcp)");
    bench
        ->add_option("-e,--endpoint", bo.endpoint,
                     "Endpoint type: msg (a listener and connections) or rdm (peers over an "
                     "address vector: shm, tcp;ofi_rxm, net)")
        ->check(CLI::IsMember({"msg", "rdm"}))
        ->capture_default_str();
    std::vector<std::string> ops;
    bench
        ->add_option("-o,--op", ops,
                     "Operation(s): write, read, send (ping-pong), gpspm (send/recv flush "
                     "request), flush-raw (write + read-after-write flush), flush-gpspm (write + "
                     "flush to persistence through the target service), atomic-write, cas, "
                     "fetch-add, gather (gather_write of --parts segments, each a region of its "
                     "own, timed in the same run against its writes posted together and one "
                     "write; QD 1). -o as fabtests' fi_rma_bw -o")
        ->check(CLI::IsMember(bench_ops()));
    bench
        ->add_option("-s,-S,--size", sizes,
                     std::string("Transfer size(s), 1 byte to 64 MiB: ") + size_units +
                         "; all: powers of two from 2 B to 8 MiB (perftest's -a; fabtests' -S "
                         "all), all:MAX to MAX")
        ->transform(bench_size_arg());
    bench->add_flag("-a,--all-sizes", all_sizes, "--size all, as perftest's -a");
    bench->add_flag("--report_gbits", report_gbits,
                    "Accepted for perftest's habit: the table always has a Gb/s column (10^9 "
                    "bits/s) beside MiB/s");
    bench
        ->add_option("--parts", bo.parts,
                     "--op gather: remote segments per gather_write, --size bytes each")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    bench
        ->add_option("--qd", bo.qd,
                     "Operations in flight per connection (perftest's -t tx-depth; no -q: "
                     "perftest's -q counts QPs, which are -c here)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    moved(bench, "-q",
          "-q: remora has no -q: perftest's -q QPS is -c/--connections here (a QP each), and its "
          "-t TX_DEPTH is --qd");
    bench
        ->add_option("-c,--connections", bo.connections,
                     "Connections, one QP and client thread each (perftest's -q)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    auto* duration_opt =
        bench
            ->add_option("-d,-D,--duration", bo.duration,
                         "Seconds per result (-D as perftest's; -d kept for existing scripts: "
                         "perftest's -d DEVICE is -p PROVIDER here)")
            ->check(CLI::Validator(
                [](std::string& t) {
                    char* end = nullptr;
                    (void)std::strtod(t.c_str(), &end);
                    return !t.empty() && *end == '\0'
                               ? std::string()
                               : "'" + t +
                                     "' is not a number of seconds (-d is the duration here; "
                                     "perftest's -d DEVICE is -p PROVIDER)";
                },
                ""))
            ->check(CLI::Range(0.05, 3600.0))
            ->capture_default_str();
    bench
        ->add_option("-n,-I,--count", bo.count,
                     "Operations per result instead of a duration, as perftest's -n and "
                     "fabtests' -I (split over the connections; fails when they have not "
                     "completed within an hour, or when none completes for 10 s)")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40))
        ->excludes(duration_opt);
    bench->add_option("-w,--wait", bo.wait, "How completions are reaped")
        ->check(CLI::IsMember({"busy", "blocking"}))
        ->capture_default_str();
    bench
        ->add_option("--channel", bo.channel,
                     "Completion channels of each connection: separate, shared, or none (CQs "
                     "without a wait object, as a busy-polling libfabric program opens them; the "
                     "default with --wait busy, else separate)")
        ->check(CLI::IsMember({"separate", "shared", "none"}));
    bench->add_flag("--rcq", bo.rcq, "Receives complete on a separate receive CQ");
    bench
        ->add_option("--completion", bo.completion,
                     "How the client gets completions: from poll(), per-operation callbacks, or "
                     "coroutines awaiting each operation")
        ->check(CLI::IsMember({"poll", "callback", "coroutine"}))
        ->capture_default_str();
    bench
        ->add_option("--registration", bo.registration,
                     "Local buffer of write/read: registered once (pre), per operation (per-op), "
                     "or through a registration cache")
        ->check(CLI::IsMember({"pre", "per-op", "cache"}))
        ->capture_default_str();
    bench
        ->add_option("--signal-every", bo.signal_every,
                     "Selective signalling: a completion for one write/send in N (for --op "
                     "send and gpspm on both sides, the target's replies too); writes are "
                     "counted as reclaimed, without latency")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    bench->add_flag("--shared-cq", bo.shared_cq,
                    "Client connections complete on one shared CQ, read by one thread");
    bench->add_option("--suite", bo.suite, "A predefined set of results")
        ->check(CLI::IsMember(bench_suites()));
    bench
        ->add_option("--setups", bo.setups,
                     "--suite connect: connections set up at once from one thread (connect_async)")
        ->check(CLI::Range(1, 8192))
        ->capture_default_str();
    bool loopback = false;
    auto* target_opt =
        bench
            ->add_option("-t,--target", bo.target,
                         "HOST:PORT of a `remora serve` to run against (one-sided, flush and "
                         "atomic ops; perftest's -t tx-depth is --qd)")
            ->check(address_arg(false));
    bench
        ->add_option("--key-file", bo.key_file,
                     "With --target: the serve's admission key (its --key-file; an ro key "
                     "allows only --op read)")
        ->check(CLI::ExistingFile)
        ->needs(target_opt);
    bench
        ->add_flag("--loopback", loopback,
                   "Start a target in this process on loopback (the default without --target)")
        ->excludes(target_opt);
    bench->add_flag("--more", bo.more,
                    "The operations reposted after one CQ read go as one burst: op_options::more "
                    "(FI_MORE) on all but the last");
    bench->add_flag("--pin", bo.pin,
                    "Pin the target's threads to one CPU and the client's to another (two busy "
                    "pollers sharing a CPU take turns at the scheduler's tick)");
    bench->add_option("--plot", bo.plot, "Draw the results into this PNG file (gnuplot)");
    bench->add_flag("--json", bo.json, "One JSON object per result");
    bench->add_flag("--baseline", bo.baseline,
                    "Also run write/read/send through plain libfabric, with its target as "
                    "remora's and busy-polling, each in a process of its own, and print "
                    "remora/baseline for both (the default suite always does)");
    bench->add_flag("--baseline-in-process", bo.baseline_in_process,
                    "Run --baseline's plain libfabric in this process, after remora's result "
                    "(default: a process of its own)");
    bench
        ->add_option("--anchor", bo.anchors,
                     "Also run this program on send ping-pongs (--qd 1, --wait busy), server and "
                     "client on loopback, and print its figures beside remora's: fi_pingpong "
                     "(libfabric-bin), ucx_perftest (ucx-utils); skipped with a note when not "
                     "installed (the default suite runs fi_pingpong)")
        ->check(CLI::IsMember({"fi_pingpong", "ucx_perftest"}));
    bench
        ->add_option("--target-progress", bo.target_progress,
                     "How the loopback target's progress thread waits (domain_config::progress; "
                     "default adaptive)")
        ->check(CLI::IsMember({"busy", "adaptive", "blocking"}));
    bench
        ->add_option(
            "--same-host", bo.same_host,
            "on: connections to the loopback target, or to a --target on this host, take the "
            "same-host path (shared memory under the connection, as the library does by "
            "default between processes; the loopback target is in this process, which the "
            "library allows here only: REMORA_SAME_HOST=process); off: they measure the "
            "provider asked for")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    bench
        ->add_option("--target-spin", bo.target_spin_us,
                     "Microseconds the adaptive target polls after traffic (progress_spin; "
                     "default 100)")
        ->check(CLI::Range(1, 1000000));
    bench->footer(
        "perftest and fabtests users: -s/-S size (fabtests' -s source address has no option\n"
        "here), -a all sizes, -n/-I iterations, -D duration, -c QPs (perftest's -q), --qd\n"
        "tx-depth (perftest's -t), -p the provider (the port goes in --target HOST:PORT), -o\n"
        "the operation (fabtests' -o write|read).\n"
        "Examples:\n"
        "  remora bench --suite default\n"
        "  remora bench --op write --size 8 --size 64K --qd 16\n"
        "  remora bench --op write --size all -D 0.2     2 B .. 8 MiB, as ib_write_bw -a\n"
        "  remora bench --op write --size 4096 --count 100000\n"
        "  remora bench --op write --op read --op send --baseline\n"
        "  remora bench --op read --target-progress busy --baseline\n"
        "  remora bench --endpoint rdm --provider shm --op write --op send --baseline\n"
        "  remora bench --op gpspm --wait blocking --rcq --channel shared --connections 8\n"
        "  remora bench --op write --qd 16 --signal-every 16\n"
        "  remora bench --op write --connections 8 --shared-cq\n"
        "  remora bench --op gather --parts 4 --size 8 --size 4096\n"
        "  remora bench --suite channels --provider sockets --json\n"
        "  remora bench --suite persistence --plot persistence.png\n"
        "  remora bench --suite connect --setups 500 --provider tcp\n"
        "  remora bench --target 127.0.0.1:7471 --op flush-gpspm --size 4096 -d 5\n");

    // A bad argument: one line, "remora SUBCOMMAND: --option: why", as the command's other
    // errors; --help has the rest.
    app.failure_message([](const CLI::App* a, const CLI::Error& e) {
        const auto subs = a->get_subcommands();
        std::string what = e.what();
        if (what.rfind(": ", 0) == 0)
            what.erase(0, 2);  // a hidden option's message (moved) names the option itself
        return fmt::format("remora{}: {}\n", subs.empty() ? "" : " " + subs.front()->get_name(),
                           what);
    });
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help and --version exit 0; a bad argument exits 64 (EX_USAGE), whatever CLI11's own
        // code for it, so scripts can tell a usage error from a failed run (1).
        return app.exit(e) == 0 ? 0 : 64;
    }
    // A provider this machine does not have is a bad argument too: said with the ones it has.
    auto provider_ok = [](const char* what, const std::string& p,
                          std::optional<endpoint_type> type) {
        auto r = check_provider(p, type);
        if (!r)
            report_line(what, "--provider: " + r.error().message());
        return static_cast<bool>(r);
    };
    if (*info) {
        if (!provider_ok(
                "info", io.provider,
                io.endpoint.empty() ? std::nullopt : std::optional(endpoint_named(io.endpoint))))
            return 64;
        return run_info(io);
    }
    if (*serve)
        return provider_ok("serve", so.provider, endpoint_type::msg) ? run_serve(so) : 64;
    if (*put)
        return provider_ok("put", to.provider, endpoint_type::msg)
                   ? (to.replicas.empty() ? run_put(to) : run_put_replicated(to))
                   : 64;
    if (*get)
        return provider_ok("get", to.provider, endpoint_type::msg) ? run_get(to) : 64;
    if (*keygen)
        return run_keygen(keygen_path);
    if (all_sizes)
        sizes.push_back("all");
    if (!sizes.empty())
        bo.sizes = bench_sizes(sizes);
    if (!ops.empty())
        bo.ops = ops;
    if (bo.suite.empty() && argc == 2)
        bo.suite = "default";  // plain `remora bench`
    if (!provider_ok("bench", bo.provider, endpoint_named(bo.endpoint)))
        return 64;
    (void)report_gbits;  // perftest's flag: the Gb/s column is always there
    return run_bench(bo);
}

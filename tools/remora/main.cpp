// The `remora` command: info and bench (serve, put and get are still to come: see the issues).
#include <CLI/CLI.hpp>

#include "common.hpp"

int main(int argc, char** argv) {
    using namespace remora::tool;
    CLI::App app{"remora: remote memory access over fabrics (libfabric)"};
    app.require_subcommand(1);
    app.footer(
        "Examples:\n"
        "  remora info                      providers usable here and what remora does on them\n"
        "  remora bench                     the default suite on loopback\n"
        "  remora bench --suite channels    separate vs shared completion channels (GPSPM)\n");

    info_options io;
    auto* info = app.add_subcommand(
        "info", "Providers and NICs usable here, and what remora can do on each");
    info->add_option("-p,--provider", io.provider, "Only this provider (tcp, sockets, verbs)");
    info->add_option("-a,--address", io.address, "Local address selecting the NIC")
        ->capture_default_str();
    info->add_flag("--json", io.json, "One JSON array instead of a table");
    info->footer("Examples:\n  remora info\n  remora info --provider tcp --json\n");

    bench_options bo;
    std::vector<std::size_t> sizes;
    auto* bench =
        app.add_subcommand("bench", "Run a workload against a loopback target started here");
    bench->add_option("-p,--provider", bo.provider,
                      "Provider (default: automatic, verbs before tcp)");
    std::vector<std::string> ops;
    bench->add_option("-o,--op", ops, "Operation(s): write, read, send (ping-pong), gpspm")
        ->check(CLI::IsMember({"write", "read", "send", "gpspm"}));
    bench->add_option("-s,--size", sizes, "Transfer size(s) in bytes")
        ->check(CLI::Range(1, 1 << 26));
    bench->add_option("-q,--qd", bo.qd, "Operations in flight per connection")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    bench->add_option("-c,--connections", bo.connections, "Connections (one client thread each)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    bench->add_option("-d,--duration", bo.duration, "Seconds per result")
        ->check(CLI::Range(0.05, 3600.0))
        ->capture_default_str();
    bench->add_option("-w,--wait", bo.wait, "How completions are reaped")
        ->check(CLI::IsMember({"busy", "blocking"}))
        ->capture_default_str();
    bench->add_option("--channel", bo.channel, "Completion channels of each connection")
        ->check(CLI::IsMember({"separate", "shared"}))
        ->capture_default_str();
    bench->add_flag("--rcq", bo.rcq, "Receives complete on a separate receive CQ");
    bench
        ->add_option("--completion", bo.completion,
                     "How the client gets completions: from poll(), or per-operation callbacks")
        ->check(CLI::IsMember({"poll", "callback"}))
        ->capture_default_str();
    bench->add_option("--suite", bo.suite, "A predefined set of results")
        ->check(CLI::IsMember({"default", "channels"}));
    bench->add_flag("--json", bo.json, "One JSON object per result");
    bench->add_flag("--baseline", bo.baseline,
                    "Also run write/read/send through plain libfabric and print remora/baseline");
    bench->footer(
        "Examples:\n"
        "  remora bench --suite default\n"
        "  remora bench --op write --size 8 --size 65536 --qd 16\n"
        "  remora bench --op write --op read --op send --baseline\n"
        "  remora bench --op gpspm --wait blocking --rcq --channel shared --connections 8\n"
        "  remora bench --suite channels --provider sockets --json\n");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (*info)
        return run_info(io);
    if (!sizes.empty())
        bo.sizes = sizes;
    if (!ops.empty())
        bo.ops = ops;
    if (bo.suite.empty() && argc == 2)
        bo.suite = "default";  // plain `remora bench`
    return run_bench(bo);
}

// `remora info`: what remora can do on each provider usable here.
#include <nlohmann/json.hpp>

#include "common.hpp"

namespace remora::tool {

namespace {

const char* model(progress_model m) {
    return m == progress_model::automatic ? "auto" : m == progress_model::manual ? "manual" : "-";
}

std::string mr_modes(mr_mode m) {
    std::string s;
    auto add = [&](mr_mode bit, const char* name) {
        if (any(m & bit)) {
            // Appended in order: `"|" + std::string(name)` trips GCC 12's -Wrestrict false
            // positive at -O3 (GCC bug 105329).
            if (!s.empty())
                s += '|';
            s += name;
        }
    };
    add(mr_mode::local, "local");
    add(mr_mode::virt_addr, "virt_addr");
    add(mr_mode::allocated, "allocated");
    add(mr_mode::prov_key, "prov_key");
    add(mr_mode::endpoint, "endpoint");
    return s.empty() ? "none" : s;
}

void print_header() {
    fmt::print("{:<9} {:<8} {:<8} {:>7} {:>7} {:>9} {:>5} {:>4} {:<10} {:<8} {}\n", "provider",
               "nic", "atomics", "inject", "cmdata", "queues", "iov", "imm", "progress", "mr_mode",
               "flush");
}

}  // namespace

int run_info(const info_options& o) {
    std::vector<std::string> names;
    if (!o.provider.empty()) {
        names.push_back(o.provider);
    } else {
        names = {"verbs", "tcp", "sockets"};
    }
    nlohmann::json all = nlohmann::json::array();
    bool any_ok = false;
    for (const auto& name : names) {
        auto dom = domain::open({.provider = name, .node = o.address});
        if (!dom) {
            if (!o.provider.empty()) {
                return report("info", dom.error());
            }
            continue;  // not usable here (no verbs device, ...)
        }
        if (!any_ok && !o.json) {
            print_header();
        }
        any_ok = true;
        const provider_caps& c = dom->caps();
        // Flush methods remora can offer on this provider today: read-after-write (visibility).
        const std::string flush = "read-after-write";
        if (o.json) {
            all.push_back({{"provider", c.provider},
                           {"fabric", c.fabric},
                           {"nic", c.nic},
                           {"atomics", c.native_atomics ? "native" : "none"},
                           {"inject_size", c.inject_size},
                           {"private_data", c.cm_data_size},
                           {"tx_size", c.tx_size},
                           {"rx_size", c.rx_size},
                           {"iov_limit", c.iov_limit},
                           {"immediate_bytes", c.cq_data_size},
                           {"control_progress", model(c.control_progress)},
                           {"data_progress", model(c.data_progress)},
                           {"target_needs_progress", c.target_needs_progress},
                           {"mr_mode", mr_modes(c.mr_mode)},
                           {"rma_pmem", c.rma_pmem},
                           {"flush", {flush}}});
        } else {
            fmt::print(
                "{:<9} {:<8} {:<8} {:>7} {:>7} {:>9} {:>5} {:>4} {:<10} {:<8} {}\n", c.provider,
                c.nic, c.native_atomics ? "native" : "none", c.inject_size, c.cm_data_size,
                fmt::format("{}/{}", c.tx_size, c.rx_size), c.iov_limit, c.cq_data_size,
                std::string(model(c.data_progress)) + (c.target_needs_progress ? "+thread" : ""),
                mr_modes(c.mr_mode), flush);
        }
    }
    if (o.json) {
        fmt::print("{}\n", all.dump(2));
    }
    if (!any_ok) {
        fmt::print(stderr, "remora info: no provider offers connected endpoints on {}\n",
                   o.address);
        return 1;
    }
    return 0;
}

}  // namespace remora::tool

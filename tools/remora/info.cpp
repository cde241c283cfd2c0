// SPDX-License-Identifier: BSD-3-Clause
// `remora info`: what remora can do on each provider usable here, for each endpoint type: msg
// (connections: a listener and connect) and rdm (peers over an address vector: open_peer and
// attach). The table has one section per type; JSON says it in "endpoint".
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

constexpr const char* row_format =
    "{:<13} {:<8} {:<8} {:>7} {:>7} {:>9} {:>5} {:>4} {:<13} {:<9} {}\n";

void print_header(endpoint_type e) {
    fmt::print("{}\n", e == endpoint_type::rdm
                           ? "rdm endpoints (peers over an address vector: open_peer, attach)"
                           : "msg endpoints (connections: listener, connect)");
    fmt::print(fmt::runtime(row_format), "provider", "nic", "atomics", "inject", "cmdata", "queues",
               "iov", "imm", "progress", "mr_mode", "flush");
}

const char* name_of(endpoint_type e) {
    return e == endpoint_type::rdm ? "rdm" : "msg";
}

// The providers tried for each type when none is named, in the automatic choice's order.
std::vector<std::string> candidates(endpoint_type e) {
    if (e == endpoint_type::rdm)
        return {"verbs;ofi_rxm", "efa", "tcp;ofi_rxm", "net", "shm", "sockets"};
    return {"verbs", "tcp", "sockets"};
}

// One provider's row of the table, or its JSON object.
void add_row(nlohmann::json& all, const domain& dom, endpoint_type type, bool json) {
    const provider_caps& c = dom.caps();
    // Flush methods remora can offer on this provider today: read-after-write (visibility).
    const std::string flush = "read-after-write";
    if (json) {
        all.push_back({{"provider", c.provider},
                       {"endpoint", name_of(type)},
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
                       {"same_host", c.same_host},
                       {"flush", {flush}}});
        return;
    }
    fmt::print(fmt::runtime(row_format), c.provider, c.nic, c.native_atomics ? "native" : "none",
               c.inject_size, c.cm_data_size, fmt::format("{}/{}", c.tx_size, c.rx_size),
               c.iov_limit, c.cq_data_size,
               std::string(model(c.data_progress)) + (c.target_needs_progress ? "+thread" : ""),
               mr_modes(c.mr_mode), flush);
}

}  // namespace

int run_info(const info_options& o) {
    std::vector<endpoint_type> types;
    if (o.endpoint != "rdm")
        types.push_back(endpoint_type::msg);
    if (o.endpoint != "msg")
        types.push_back(endpoint_type::rdm);
    nlohmann::json all = nlohmann::json::array();
    bool any_ok = false;
    std::string refused;  // --provider: why each type refused it
    for (const endpoint_type type : types) {
        const std::vector<std::string> names =
            o.provider.empty() ? candidates(type) : std::vector<std::string>{o.provider};
        bool section = false;
        std::string same_host;  // the MSG providers with shm beside them
        for (const auto& name : names) {
            // caps().same_host: whether shm can open beside it (the report says).
            auto dom = domain::open({.provider = name, .node = o.address, .endpoint = type});
            if (!dom) {
                if (!o.provider.empty()) {
                    // One line: the first type's reason as the library gives it, then the other's.
                    if (!refused.empty())
                        refused += fmt::format("; {}: ", name_of(type));
                    refused += dom.error().what();
                }
                continue;  // not usable here (no verbs device, no efa, ...)
            }
            if (!section && !o.json) {
                if (any_ok)
                    fmt::print("\n");
                print_header(type);
            }
            section = true;
            any_ok = true;
            add_row(all, *dom, type, o.json);
            if (dom->caps().same_host)
                same_host += (same_host.empty() ? "" : ", ") + dom->caps().provider;
        }
        if (!same_host.empty() && !o.json) {
            fmt::print(
                "same host: shm can open beside {} (on by default: a connection to another "
                "process of this host and user moves its operations to shared memory; "
                "domain_config::same_host = false or REMORA_SAME_HOST=off keep it off)\n",
                same_host);
        }
    }
    if (o.json) {
        fmt::print("{}\n", all.dump(2));
    }
    if (!any_ok) {
        if (!o.provider.empty()) {
            fmt::print(stderr, "remora info: {}\n", refused);
            return 1;
        }
        fmt::print(stderr, "remora info: no provider offers {} endpoints on {}\n",
                   o.endpoint.empty() ? "msg or rdm" : o.endpoint, o.address);
        return 1;
    }
    return 0;
}

}  // namespace remora::tool

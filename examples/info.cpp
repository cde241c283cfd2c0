// SPDX-License-Identifier: BSD-3-Clause
// examples/info — opens a domain and prints what remora found the provider can do.
//   info [provider] [address]
#include <cstdio>

#include <remora/remora.hpp>

int main(int argc, char** argv) {
    remora::domain_config cfg;
    if (argc > 1)
        cfg.provider = argv[1];
    if (argc > 2)
        cfg.node = argv[2];
    auto dom = remora::domain::open(cfg);
    if (!dom) {
        std::fprintf(stderr, "info: %s\n", dom.error().what().c_str());
        return 1;
    }
    const auto& c = dom->caps();
    std::printf("provider        %s\nfabric          %s\nnic             %s\n", c.provider.c_str(),
                c.fabric.c_str(), c.nic.c_str());
    std::printf("native atomics  %s\ninject size     %zu\nprivate data    %zu\n",
                c.native_atomics ? "yes" : "no", c.inject_size, c.cm_data_size);
    std::printf("queues          tx %zu, rx %zu, cq %zu\niov limit       %zu (rma %zu)\n",
                c.tx_size, c.rx_size, c.cq_size, c.iov_limit, c.rma_iov_limit);
    std::printf("immediate data  %zu bytes%s\n", c.cq_data_size,
                c.rx_cq_data ? " (consumes a receive)" : "");
    std::printf("mr_mode         0x%x\nprogress        %s%s\n", static_cast<unsigned>(c.mr_mode),
                c.data_progress == remora::progress_model::automatic ? "auto" : "manual",
                c.target_needs_progress ? " (target must drive progress)" : "");
    return 0;
}

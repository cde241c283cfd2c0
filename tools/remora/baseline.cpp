// SPDX-License-Identifier: BSD-3-Clause
// `remora bench --baseline`: the same workload through plain libfabric calls, so remora's
// overhead is a measured ratio. Deliberately written against libfabric directly (the one place
// in the tools that is, with baseline_rdm.cpp); it mirrors bench_target.cpp and bench_client.cpp:
// a loopback target thread that answers sends, and a client that keeps `qd` operations in
// flight. The bench runs it in a process of its own (bench_apart.cpp), so nothing of remora's
// shares its CPU caches, allocator or threads.
//
// It is what a plain libfabric program would write: domains with FI_THREAD_DOMAIN (each used by
// one thread at a time), sends of up to the provider's inject size injected (fi_inject, as
// fi_pingpong does), and a CQ that only a side which blocks gives a wait object (FI_WAIT_FD);
// one that busy-polls has none (FI_WAIT_NONE). The client busy-polls fi_cq_read or blocks in
// fi_cq_sread as the run says. The target runs in one of two arrangements: as remora's (a
// one-sided target blocks: it only drives progress; a send target reaps as the client does), or
// busy-polling its CQ, the fastest plain libfabric offers on a provider whose target must call
// in (tcp).
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "baseline_raw.hpp"
#include "bench_internal.hpp"

namespace remora::tool {
namespace {

using clock = std::chrono::steady_clock;

using raw::raw_error;

struct raw_fabric {
    fi_info* info = nullptr;
    fid_fabric* fabric = nullptr;
    fid_domain* domain = nullptr;
    ~raw_fabric() {
        if (domain)
            fi_close(&domain->fid);
        if (fabric)
            fi_close(&fabric->fid);
        if (info)
            fi_freeinfo(info);
    }
};

fi_info* hints_for(const std::string& prov) {
    fi_info* h = fi_allocinfo();
    h->caps =
        FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
    h->ep_attr->type = FI_EP_MSG;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    if (!prov.empty())
        h->fabric_attr->prov_name = strdup(prov.c_str());
    return h;
}

void open_fabric(raw_fabric& f, const std::string& prov, const char* node, const char* service,
                 std::uint64_t flags) {
    fi_info* h = hints_for(prov);
    int rc = fi_getinfo(FI_VERSION(1, 17), node, service, flags, h, &f.info);
    fi_freeinfo(h);
    if (rc != 0)
        throw raw_error{std::string("fi_getinfo: ") + fi_strerror(-rc)};
    RAW_CHECK(fi_fabric(f.info->fabric_attr, &f.fabric, nullptr));
    RAW_CHECK(fi_domain(f.fabric, f.info, &f.domain, nullptr));
}

struct raw_ep {
    fid_eq* eq = nullptr;
    fid_cq* cq = nullptr;
    fid_ep* ep = nullptr;
    fid_mr* mr = nullptr;
    ~raw_ep() {
        if (ep)
            fi_close(&ep->fid);
        if (mr)
            fi_close(&mr->fid);
        if (cq)
            fi_close(&cq->fid);
        if (eq)
            fi_close(&eq->fid);
    }
};

// blocks: the side waits in fi_cq_sread (its CQ gets a file descriptor to sleep on); otherwise
// it only busy-polls and its CQ has no wait object.
void make_ep(raw_fabric& f, fi_info* info, raw_ep& e, std::vector<std::byte>& mem, bool blocks) {
    fi_eq_attr eqa{};
    eqa.wait_obj = FI_WAIT_UNSPEC;
    RAW_CHECK(fi_eq_open(f.fabric, &eqa, &e.eq, nullptr));
    fi_cq_attr cqa{};
    cqa.size = 128;
    cqa.format = FI_CQ_FORMAT_DATA;
    cqa.wait_obj = blocks ? FI_WAIT_FD : FI_WAIT_NONE;
    RAW_CHECK(fi_cq_open(f.domain, &cqa, &e.cq, nullptr));
    RAW_CHECK(fi_endpoint(f.domain, info, &e.ep, nullptr));
    RAW_CHECK(fi_ep_bind(e.ep, &e.eq->fid, 0));
    RAW_CHECK(fi_ep_bind(e.ep, &e.cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
    RAW_CHECK(fi_enable(e.ep));
    RAW_CHECK(fi_mr_reg(f.domain, mem.data(), mem.size(),
                        FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV,
                        0, 1, 0, &e.mr, nullptr));
}

void await_connected(fid_eq* eq) {
    std::uint32_t event = 0;
    std::vector<std::byte> buf(sizeof(fi_eq_cm_entry) + 256);
    ssize_t n = fi_eq_sread(eq, &event, buf.data(), buf.size(), 10000, 0);
    if (n < 0 || event != FI_CONNECTED)
        throw raw_error{"baseline: connection not established"};
}

struct descriptor {
    std::uint64_t addr, key;
};

// The *msg calls with FI_COMPLETION, as remora posts them (endpoints use selective completion).
void raw_recv(fid_ep* ep, void* buf, std::size_t len, void* desc, void* ctx) {
    iovec iov{buf, len};
    fi_msg msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.context = ctx;
    RAW_CHECK(fi_recvmsg(ep, &msg, FI_COMPLETION));
}

// A send that asks for no completion: injected up to the provider's inject size (the buffer is
// the provider's copy when the call returns), else posted from the registered buffer.
void raw_send(fid_ep* ep, void* buf, std::size_t len, void* desc, std::size_t inject_size) {
    if (len <= inject_size) {
        RAW_CHECK(fi_inject(ep, buf, len, 0));
        return;
    }
    iovec iov{buf, len};
    fi_msg msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    RAW_CHECK(fi_sendmsg(ep, &msg, 0));
}

void raw_rma(fid_ep* ep, bool write, void* buf, std::size_t len, void* desc, std::uint64_t raddr,
             std::uint64_t key, void* ctx) {
    iovec iov{buf, len};
    fi_rma_iov rma{raddr, len, key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = ctx;
    if (write) {
        RAW_CHECK(fi_writemsg(ep, &msg, FI_COMPLETION));
    } else {
        RAW_CHECK(fi_readmsg(ep, &msg, FI_COMPLETION));
    }
}

}  // namespace

result<figures> run_baseline(const setup& s, bool busy_target) {
    try {
        const std::size_t slot = std::max<std::size_t>(s.size, 16);
        // Target: listener, one connection, region, serving thread.
        raw_fabric tf;
        open_fabric(tf, s.provider, "127.0.0.1", "0", FI_SOURCE);
        fid_eq* leq = nullptr;
        fi_eq_attr eqa{};
        eqa.wait_obj = FI_WAIT_UNSPEC;
        RAW_CHECK(fi_eq_open(tf.fabric, &eqa, &leq, nullptr));
        fid_pep* pep = nullptr;
        RAW_CHECK(fi_passive_ep(tf.fabric, tf.info, &pep, nullptr));
        RAW_CHECK(fi_pep_bind(pep, &leq->fid, 0));
        RAW_CHECK(fi_listen(pep));
        sockaddr_in addr{};
        size_t alen = sizeof(addr);
        RAW_CHECK(fi_getname(&pep->fid, &addr, &alen));
        const std::string port = std::to_string(ntohs(addr.sin_port));

        std::vector<std::byte> tmem(std::max<std::size_t>(slot * s.qd * 4, 4096));
        raw_ep te;
        std::atomic<bool> stop{false};
        std::string target_error;
        const bool two_sided = s.op == "send";
        std::thread target([&] {
            const pinned on(s, side::target);
            try {
                std::uint32_t event = 0;
                std::vector<std::byte> buf(sizeof(fi_eq_cm_entry) + 256);
                ssize_t n = fi_eq_sread(leq, &event, buf.data(), buf.size(), 10000, 0);
                if (n < 0 || event != FI_CONNREQ)
                    throw raw_error{"baseline: no connection request"};
                fi_eq_cm_entry entry;
                std::memcpy(&entry, buf.data(), sizeof(entry));
                // As remora's target in the same run (a one-sided target blocks), or
                // busy-polling.
                const bool target_blocks = !(busy_target || (two_sided && s.wait == "busy"));
                make_ep(tf, entry.info, te, tmem, target_blocks);
                const std::size_t inject = entry.info->tx_attr->inject_size;
                fi_freeinfo(entry.info);
                const bool virt = (tf.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
                descriptor d{virt ? reinterpret_cast<std::uintptr_t>(tmem.data()) : 0,
                             fi_mr_key(te.mr)};
                void* desc = fi_mr_desc(te.mr);
                if (two_sided) {
                    for (unsigned k = 0; k < s.qd; ++k) {
                        raw_recv(te.ep, tmem.data() + k * slot, slot, desc,
                                 reinterpret_cast<void*>(static_cast<std::uintptr_t>(k)));
                    }
                }
                RAW_CHECK(fi_accept(te.ep, &d, sizeof(d)));
                await_connected(te.eq);
                fi_cq_data_entry e[16];
                while (!stop) {
                    ssize_t got = target_blocks ? fi_cq_sread(te.cq, e, 16, nullptr, 100)
                                                : fi_cq_read(te.cq, e, 16);
                    for (ssize_t i = 0; i < got; ++i) {
                        if (!(e[i].flags & FI_RECV))
                            continue;
                        const auto k = reinterpret_cast<std::uintptr_t>(e[i].op_context);
                        raw_send(te.ep, tmem.data() + (s.qd + k) * slot, s.size, desc, inject);
                        raw_recv(te.ep, tmem.data() + k * slot, slot, desc, e[i].op_context);
                    }
                }
            } catch (const raw_error& err) {
                target_error = err.what;
            }
        });

        // Client.
        raw_fabric cf;
        open_fabric(cf, s.provider, "127.0.0.1", port.c_str(), 0);
        std::vector<std::byte> cmem(slot * s.qd * 2);
        raw_ep ce;
        make_ep(cf, cf.info, ce, cmem, blocking_wait(s));
        const std::size_t inject = cf.info->tx_attr->inject_size;
        RAW_CHECK(fi_connect(ce.ep, cf.info->dest_addr, nullptr, 0));
        std::uint32_t event = 0;
        std::vector<std::byte> buf(sizeof(fi_eq_cm_entry) + 256);
        ssize_t n = fi_eq_sread(ce.eq, &event, buf.data(), buf.size(), 10000, 0);
        if (n < static_cast<ssize_t>(sizeof(fi_eq_cm_entry) + sizeof(descriptor)) ||
            event != FI_CONNECTED) {
            stop = true;
            target.join();
            throw raw_error{"baseline: connect failed " + target_error};
        }
        descriptor d;
        std::memcpy(&d, buf.data() + sizeof(fi_eq_cm_entry), sizeof(d));
        void* desc = fi_mr_desc(ce.mr);
        std::vector<clock::time_point> started(s.qd);
        auto post = [&](unsigned k) {
            started[k] = clock::now();
            void* ctx = reinterpret_cast<void*>(static_cast<std::uintptr_t>(k));
            std::byte* local = cmem.data() + (s.qd + k) * slot;
            const std::uint64_t raddr = d.addr + (k * s.size) % tmem.size();
            if (s.op == "write" || s.op == "read") {
                raw_rma(ce.ep, s.op == "write", local, s.size, desc, raddr, d.key, ctx);
            } else {
                raw_send(ce.ep, local, s.size, desc, inject);
            }
        };
        const std::uint64_t budget = op_budget(s);  // --count (one connection)
        std::uint64_t posts = 0;
        unsigned in_flight = 0;
        for (unsigned k = 0; k < s.qd && posts < budget; ++k, ++posts, ++in_flight) {
            if (two_sided) {
                raw_recv(ce.ep, cmem.data() + k * slot, slot, desc,
                         reinterpret_cast<void*>(static_cast<std::uintptr_t>(k)));
            }
            post(k);
        }
        const pinned on(s, side::client);
        std::vector<std::uint32_t> lat;
        lat.reserve(1 << 20);
        const double cpu0 = cpu_seconds();
        const auto t0 = clock::now();
        const auto end = t0 + std::chrono::duration_cast<clock::duration>(
                                  std::chrono::duration<double>(run_limit_s(s)));
        fi_cq_data_entry e[16];
        while (in_flight > 0) {
            ssize_t got = blocking_wait(s) ? fi_cq_sread(ce.cq, e, 16, nullptr, 100)
                                           : fi_cq_read(ce.cq, e, 16);
            if (got == -FI_EAGAIN)
                continue;
            if (got < 0)
                throw raw_error{std::string("fi_cq_read: ") + fi_strerror(static_cast<int>(-got))};
            const auto now = clock::now();
            for (ssize_t i = 0; i < got; ++i) {
                if (two_sided && !(e[i].flags & FI_RECV))
                    continue;
                const auto k =
                    static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(e[i].op_context));
                lat.push_back(static_cast<std::uint32_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(now - started[k])
                        .count()));
                if (now >= end || posts >= budget) {
                    --in_flight;
                    continue;
                }
                if (two_sided) {
                    raw_recv(ce.ep, cmem.data() + k * slot, slot, desc, e[i].op_context);
                }
                post(k);
                ++posts;
            }
        }
        const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
        const double cpu = cpu_seconds() - cpu0;
        fi_shutdown(ce.ep, 0);
        stop = true;
        target.join();
        fi_close(&pep->fid);
        fi_close(&leq->fid);
        if (!target_error.empty())
            return fail(errc::provider_error, "baseline target: " + target_error);
        return summarize(lat, seconds, cpu, s.size);
    } catch (const raw_error& e) {
        return fail(errc::provider_error, "baseline: " + e.what);
    }
}

}  // namespace remora::tool

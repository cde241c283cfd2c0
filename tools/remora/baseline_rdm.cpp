// SPDX-License-Identifier: BSD-3-Clause
// `remora bench --endpoint rdm --baseline`: the bench's write, read and send workloads through
// plain libfabric over reliable datagram endpoints (FI_EP_RDM) and an address vector, in the
// same run, so remora's overhead over RDM is a measured ratio. Deliberately written against
// libfabric directly (with baseline.cpp, the only place in the tools that is).
//
// The arrangement is the fastest honest one a plain libfabric program would pick: two endpoints
// in this process, each on its own fabric, domain (FI_THREAD_DOMAIN: one thread uses each), CQ
// and AV (FI_AV_TABLE); the addresses are exchanged by fi_getname and inserted in each other's
// AV; the target's region descriptor is handed over in memory. A target thread busy-polls its
// CQ, which drives the provider's progress (shm and rxm need the target to progress for
// one-sided access too) and echoes each send. The client keeps `qd` operations in flight and
// busy-polls its CQ (FI_WAIT_NONE) or blocks in fi_cq_sread (FI_WAIT_FD, else FI_WAIT_UNSPEC)
// as the run says. Operations are posted with the *msg calls and FI_COMPLETION (the endpoints use
// selective completion), sends without it (injected up to the provider's inject size): a
// ping-pong is timed from send to the echo's receive. The bench runs it in a process of its own
// (bench_apart.cpp).
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "baseline_raw.hpp"
#include "bench_internal.hpp"

namespace remora::tool {
namespace {

using clock = std::chrono::steady_clock;

using raw::raw_error;

void* as_context(std::uintptr_t k) {
    return reinterpret_cast<void*>(k);
}

// One RDM endpoint with everything it needs, on a fabric and domain of its own.
class rdm_side {
  public:
    rdm_side(const std::string& prov, bool blocking, std::vector<std::byte>& mem) {
        fi_info* h = fi_allocinfo();
        h->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ |
                  FI_REMOTE_WRITE;
        h->ep_attr->type = FI_EP_RDM;
        h->domain_attr->mr_mode =
            FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
        h->domain_attr->threading = FI_THREAD_DOMAIN;
        h->domain_attr->av_type = FI_AV_TABLE;
        if (!prov.empty())
            h->fabric_attr->prov_name = strdup(prov.c_str());
        // Address-based providers bind to loopback, any free port; shm names itself.
        const bool named = prov != "shm";
        const int rc = fi_getinfo(FI_VERSION(1, 17), named ? "127.0.0.1" : nullptr,
                                  named ? "0" : nullptr, named ? FI_SOURCE : 0, h, &info_);
        fi_freeinfo(h);
        if (rc != 0)
            throw raw_error{"no RDM endpoint on provider '" + prov + "': " + fi_strerror(-rc)};
        try {
            open(blocking, mem);
        } catch (...) {
            close();
            throw;
        }
    }
    rdm_side(const rdm_side&) = delete;
    rdm_side& operator=(const rdm_side&) = delete;
    ~rdm_side() { close(); }

    std::vector<std::byte> name() const {
        std::vector<std::byte> n(256);
        size_t len = n.size();
        RAW_CHECK(fi_getname(&ep_->fid, n.data(), &len));
        n.resize(len);
        return n;
    }
    fi_addr_t insert(const std::vector<std::byte>& peer) {
        fi_addr_t a = FI_ADDR_UNSPEC;
        const int n = fi_av_insert(av_, peer.data(), 1, &a, 0, nullptr);
        if (n != 1)
            throw raw_error{"fi_av_insert: the peer's address was not inserted"};
        return a;
    }
    // Where a peer addresses byte 0 of the region, and with which key.
    std::uint64_t remote_base(const std::vector<std::byte>& mem) const {
        return (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0
                   ? reinterpret_cast<std::uintptr_t>(mem.data())
                   : 0;
    }
    std::uint64_t key() const { return fi_mr_key(mr_); }
    void* desc() const { return fi_mr_desc(mr_); }
    std::size_t inject_size() const { return info_->tx_attr->inject_size; }
    fid_ep* ep() const { return ep_; }

    // Completions: those set aside while a post waited for room first, then the CQ's (busy:
    // one read; blocking: up to 100 ms in fi_cq_sread). Returns how many, or throws.
    std::size_t read(fi_cq_data_entry* out, std::size_t max, bool block) {
        std::size_t n = 0;
        while (n < max && !spill_.empty()) {
            out[n++] = spill_.front();
            spill_.pop_front();
        }
        if (n > 0)
            return n;
        const ssize_t got =
            block ? fi_cq_sread(cq_, out, max, nullptr, 100) : fi_cq_read(cq_, out, max);
        if (got == -FI_EAGAIN)
            return 0;
        if (got == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            fi_cq_readerr(cq_, &err, 0);
            throw raw_error{std::string("completion error: ") + fi_strerror(err.err)};
        }
        if (got < 0)
            throw raw_error{std::string("reading the CQ: ") + fi_strerror(static_cast<int>(-got))};
        return static_cast<std::size_t>(got);
    }

    // Runs a post until the provider takes it: on -FI_EAGAIN the CQ is read (which drives
    // progress) and its completions kept for read(); gives up after 10 s.
    template <class Post>
    void post(const char* what, Post&& p) {
        const auto give_up = clock::now() + std::chrono::seconds(10);
        for (;;) {
            const ssize_t rc = p();
            if (rc == 0)
                return;
            if (rc != -FI_EAGAIN)
                throw raw_error{std::string(what) + ": " + fi_strerror(static_cast<int>(-rc))};
            if (clock::now() > give_up)
                throw raw_error{std::string(what) + ": no room for 10 s"};
            fi_cq_data_entry e[16];
            const ssize_t got = fi_cq_read(cq_, e, 16);
            for (ssize_t i = 0; i < got; ++i)
                spill_.push_back(e[i]);
        }
    }

  private:
    void open(bool blocking, std::vector<std::byte>& mem) {
        RAW_CHECK(fi_fabric(info_->fabric_attr, &fabric_, nullptr));
        RAW_CHECK(fi_domain(fabric_, info_, &domain_, nullptr));
        fi_av_attr ava{};
        ava.type = FI_AV_TABLE;
        ava.count = 4;
        RAW_CHECK(fi_av_open(domain_, &ava, &av_, nullptr));
        fi_cq_attr cqa{};
        cqa.size = 256;
        cqa.format = FI_CQ_FORMAT_DATA;
        cqa.wait_obj = blocking ? FI_WAIT_FD : FI_WAIT_NONE;
        if (fi_cq_open(domain_, &cqa, &cq_, nullptr) != 0 && blocking) {
            cqa.wait_obj = FI_WAIT_UNSPEC;  // no fd: whatever the provider blocks on
            RAW_CHECK(fi_cq_open(domain_, &cqa, &cq_, nullptr));
        }
        if (cq_ == nullptr)
            throw raw_error{"fi_cq_open: refused"};
        RAW_CHECK(fi_endpoint(domain_, info_, &ep_, nullptr));
        RAW_CHECK(fi_ep_bind(ep_, &av_->fid, 0));
        RAW_CHECK(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
        RAW_CHECK(fi_enable(ep_));
        RAW_CHECK(
            fi_mr_reg(domain_, mem.data(), mem.size(),
                      FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV, 0,
                      1, 0, &mr_, nullptr));
        if ((info_->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0) {
            RAW_CHECK(fi_mr_bind(mr_, &ep_->fid, 0));
            RAW_CHECK(fi_mr_enable(mr_));
        }
    }
    void close() {
        for (fid* f : {ep_ ? &ep_->fid : nullptr, mr_ ? &mr_->fid : nullptr,
                       av_ ? &av_->fid : nullptr, cq_ ? &cq_->fid : nullptr,
                       domain_ ? &domain_->fid : nullptr, fabric_ ? &fabric_->fid : nullptr}) {
            if (f != nullptr)
                fi_close(f);
        }
        ep_ = nullptr;
        mr_ = nullptr;
        av_ = nullptr;
        cq_ = nullptr;
        domain_ = nullptr;
        fabric_ = nullptr;
        if (info_ != nullptr)
            fi_freeinfo(info_);
        info_ = nullptr;
    }

    fi_info* info_ = nullptr;
    fid_fabric* fabric_ = nullptr;
    fid_domain* domain_ = nullptr;
    fid_av* av_ = nullptr;
    fid_cq* cq_ = nullptr;
    fid_ep* ep_ = nullptr;
    fid_mr* mr_ = nullptr;
    std::deque<fi_cq_data_entry> spill_;
};

// One message of one local buffer (`iov`, `desc` must outlive the post call).
fi_msg one_message(iovec& iov, void*& desc, fi_addr_t addr, void* ctx) {
    fi_msg msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = addr;
    msg.context = ctx;
    return msg;
}

ssize_t post_recv(rdm_side& e, void* buf, std::size_t len, void* ctx) {
    iovec iov{buf, len};
    void* desc = e.desc();
    const fi_msg msg = one_message(iov, desc, FI_ADDR_UNSPEC, ctx);
    return fi_recvmsg(e.ep(), &msg, FI_COMPLETION);
}

// A send that asks for no completion: injected up to the provider's inject size, as
// fi_pingpong sends.
ssize_t post_send(rdm_side& e, void* buf, std::size_t len, fi_addr_t to) {
    if (len <= e.inject_size())
        return fi_inject(e.ep(), buf, len, to);
    iovec iov{buf, len};
    void* desc = e.desc();
    const fi_msg msg = one_message(iov, desc, to, nullptr);
    return fi_sendmsg(e.ep(), &msg, 0);
}

ssize_t post_rma(rdm_side& e, bool write, void* buf, std::size_t len, fi_addr_t to,
                 std::uint64_t raddr, std::uint64_t key, void* ctx) {
    iovec iov{buf, len};
    void* desc = e.desc();
    fi_rma_iov rma{raddr, len, key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = to;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = ctx;
    return write ? fi_writemsg(e.ep(), &msg, FI_COMPLETION)
                 : fi_readmsg(e.ep(), &msg, FI_COMPLETION);
}

}  // namespace

result<figures> run_baseline_rdm(const setup& s) {
    if (s.op != "write" && s.op != "read" && s.op != "send")
        return fail(errc::invalid_argument,
                    "baseline: op " + s.op + " is not in write, read, send");
    try {
        const std::size_t slot = std::max<std::size_t>(s.size, 16);
        const bool two_sided = s.op == "send";
        const bool write = s.op == "write";
        const bool blocking = s.wait == "blocking";
        std::vector<std::byte> tmem(std::max<std::size_t>(slot * s.qd * 2, 4096));
        std::vector<std::byte> cmem(slot * s.qd * 2);
        rdm_side target(s.provider, false, tmem);
        rdm_side client(s.provider, blocking, cmem);
        const fi_addr_t to_client = target.insert(client.name());
        const fi_addr_t to_target = client.insert(target.name());
        const std::uint64_t rbase = target.remote_base(tmem);
        const std::uint64_t rkey = target.key();

        // Target: receives posted before the client can send; then a thread busy-polls.
        if (two_sided) {
            for (unsigned k = 0; k < s.qd; ++k) {
                target.post("posting a receive", [&] {
                    return post_recv(target, tmem.data() + k * slot, slot, as_context(k));
                });
            }
        }
        std::atomic<bool> stop{false};
        std::string target_error;
        std::thread serving([&] {
            const pinned on(s, side::target);
            try {
                fi_cq_data_entry e[16];
                while (!stop.load(std::memory_order_relaxed)) {
                    const std::size_t got = target.read(e, 16, false);
                    for (std::size_t i = 0; i < got; ++i) {
                        if ((e[i].flags & FI_RECV) == 0)
                            continue;
                        const auto k = reinterpret_cast<std::uintptr_t>(e[i].op_context);
                        target.post("echoing a send", [&] {
                            return post_send(target, tmem.data() + (s.qd + k) * slot, s.size,
                                             to_client);
                        });
                        target.post("posting a receive", [&] {
                            return post_recv(target, tmem.data() + k * slot, slot, e[i].op_context);
                        });
                    }
                }
            } catch (const raw_error& err) {
                target_error = err.what;
            }
        });

        std::vector<clock::time_point> started(s.qd);
        auto post = [&](unsigned k) {
            started[k] = clock::now();
            std::byte* local = cmem.data() + (s.qd + k) * slot;
            if (two_sided) {
                client.post("posting a send",
                            [&] { return post_send(client, local, s.size, to_target); });
                return;
            }
            const std::uint64_t raddr = rbase + (k * s.size) % (tmem.size() - s.size + 1);
            client.post(write ? "posting a write" : "posting a read", [&] {
                return post_rma(client, write, local, s.size, to_target, raddr, rkey,
                                as_context(k));
            });
        };
        const pinned on(s, side::client);
        std::vector<std::uint32_t> lat;
        lat.reserve(1 << 20);
        double seconds = 0, cpu = 0;
        try {
            const std::uint64_t budget = op_budget(s);  // --count (one peer)
            std::uint64_t posts = 0;
            unsigned in_flight = 0;
            for (unsigned k = 0; k < s.qd && posts < budget; ++k, ++posts, ++in_flight) {
                if (two_sided) {
                    client.post("posting a receive", [&] {
                        return post_recv(client, cmem.data() + k * slot, slot, as_context(k));
                    });
                }
                post(k);
            }
            const double cpu0 = cpu_seconds();
            const auto t0 = clock::now();
            const auto end = t0 + std::chrono::duration_cast<clock::duration>(
                                      std::chrono::duration<double>(run_limit_s(s)));
            fi_cq_data_entry e[16];
            while (in_flight > 0) {
                const std::size_t got = client.read(e, 16, blocking);
                const auto now = clock::now();
                if (got == 0 && now > end + std::chrono::seconds(10))
                    throw raw_error{"operations did not complete within 10 s of the end"};
                for (std::size_t i = 0; i < got; ++i) {
                    if (two_sided && (e[i].flags & FI_RECV) == 0)
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
                    ++posts;
                    if (two_sided) {
                        client.post("posting a receive", [&] {
                            return post_recv(client, cmem.data() + k * slot, slot, e[i].op_context);
                        });
                    }
                    post(k);
                }
            }
            seconds = std::chrono::duration<double>(clock::now() - t0).count();
            cpu = cpu_seconds() - cpu0;
        } catch (...) {
            stop = true;
            serving.join();
            throw;
        }
        stop = true;
        serving.join();
        if (!target_error.empty())
            return fail(errc::provider_error, "baseline target: " + target_error);
        return summarize(lat, seconds, cpu, s.size);
    } catch (const raw_error& e) {
        return fail(errc::provider_error, "baseline (rdm): " + e.what);
    }
}

}  // namespace remora::tool

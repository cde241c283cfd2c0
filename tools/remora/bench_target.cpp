// SPDX-License-Identifier: BSD-3-Clause
// `remora bench`: the loopback target (bench_target.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "bench_target.hpp"

namespace remora::tool {

using namespace std::chrono_literals;

result<void> target::start(const setup& s) {
    const op_info& info = op_of(s.op);
    domain_config dc{.provider = s.provider, .endpoint = endpoint_of(s.endpoint)};
    dc.same_host = s.same_host;
    dc.progress = target_policy(s);
    if (s.target_spin_us != 0)
        dc.progress_spin = std::chrono::microseconds(s.target_spin_us);
    auto d = domain::open(dc);
    if (!d)
        return fail(d.error());
    dom_ = std::move(*d);
    if (!rdm(s)) {
        auto l = listener::create(*dom_, "127.0.0.1", 0);
        if (!l)
            return fail(l.error());
        lst_ = std::move(*l);
    }
    mem_.resize(std::max<std::size_t>(s.size * s.qd, 4096));
    if (info.persistence) {
        // A file-backed region in $TMPDIR, exposed through the target service.
        const char* tmp = std::getenv("TMPDIR");
        std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/remora-bench-XXXXXX";
        const int fd = ::mkstemp(path.data());
        if (fd < 0)
            return fail(errc::invalid_argument, "bench: cannot create a file in " + path);
        ::close(fd);
        auto pr = persistent_region::open(
            *dom_,
            {.path = path, .size = std::max<std::size_t>(s.size * s.qd, 4096), .create = true});
        ::unlink(path.c_str());  // the mapping keeps it alive
        if (!pr)
            return fail(pr.error());
        region_ = std::move(*pr);
        auto svc = target_service::create();
        if (!svc)
            return fail(svc.error());
        service_ = std::move(*svc);
        auto d = service_->expose(*region_);
        if (!d)
            return fail(d.error());
        desc_ = *d;
        return {};
    }
    auto mr = memory_region::create(
        *dom_, mem_, usage::write_destination | usage::read_source | usage::send | usage::receive);
    if (!mr)
        return fail(mr.error());
    mr_ = std::move(*mr);
    if (info.kind == op_kind::gather) {
        // A region of its own per part: each part of a gather_write carries another key.
        segment_mem_.resize(s.parts);
        for (auto& m : segment_mem_) {
            m.resize(s.size);
            auto r = memory_region::create(*dom_, m, usage::write_destination);
            if (!r)
                return fail(r.error());
            segment_mr_.push_back(std::move(*r));
        }
    }
    msg_.resize(std::max<std::size_t>(s.size, request_size) * s.qd * 2 * s.connections);
    auto mm = memory_region::create(*dom_, msg_, usage::send | usage::receive);
    if (!mm)
        return fail(mm.error());
    msg_mr_ = std::move(*mm);
    return {};
}

result<std::vector<remote_region>> target::segments() const {
    std::vector<remote_region> out;
    for (const memory_region& m : segment_mr_) {
        auto d = m.describe();
        if (!d)
            return fail(d.error());
        out.push_back(*d);
    }
    return out;
}

result<void> target::accept_and_serve(const setup& s, unsigned index) {
    auto req = lst_->get_request(10s);
    if (!req)
        return fail(req.error());
    auto desc = descriptor();
    if (!desc)
        return fail(desc.error());
    auto c = req->accept(config_for(s, true), desc->serialize());
    if (!c)
        return fail(c.error());
    return adopt(std::move(*c), s, index);
}

result<peer_offer> target::open_peer_for(const setup& s, unsigned index,
                                         std::span<const std::byte> client_address) {
    auto desc = descriptor();
    if (!desc)
        return fail(desc.error());
    auto c = connection::open_peer(*dom_, config_for(s, true));
    if (!c)
        return fail(c.error());
    if (auto r = c->attach(client_address); !r)
        return fail(r.error());
    const auto local = c->local_address();
    peer_offer offer{{local.begin(), local.end()}, {}};
    const auto bytes = desc->serialize();
    offer.descriptor.assign(bytes.begin(), bytes.end());
    if (auto r = adopt(std::move(*c), s, index); !r)
        return fail(r.error());
    return offer;
}

void target::stop() {
    stop_ = true;
    for (auto& t : threads_)
        t.join();
    threads_.clear();
    conns_.clear();
    service_.reset();
    region_.reset();
}

result<void> target::adopt(connection c, const setup& s, unsigned index) {
    if (service_) {
        if (auto r = service_->serve(c); !r)
            return fail(r.error());
    }
    conns_.push_back(std::make_unique<connection>(std::move(c)));
    connection* conn = conns_.back().get();
    const op_info& info = op_of(s.op);
    if (info.two_sided || (rdm(s) && !info.persistence)) {
        setup served = s;
        if (rdm(s))
            served.wait = "busy";
        threads_.emplace_back([this, conn, served, index] { serve(*conn, served, index); });
    }
    return {};
}

void target::serve(connection& c, const setup& s, unsigned index) {
    const pinned on(s, side::target);
    const std::size_t slot = std::max(s.size, request_size);
    const std::size_t base = static_cast<std::size_t>(index) * s.qd * 2 * slot;
    const op_info& info = op_of(s.op);
    const bool two_sided = info.two_sided;
    // Receives and replies the provider could not take yet (would_block: an RDM provider still
    // setting up its path to the peer, shm mapping it or rxm connecting); posted again after a
    // reap. Any other failure ends the thread and is kept for the client's report (status()).
    std::vector<std::uintptr_t> receives, replies;
    const std::size_t reply = info.kind == op_kind::send ? s.size : 8;
    auto posted = [&](const result<void>& r, const char* what) {
        if (r || r.error() == errc::would_block)
            return r.has_value();
        record(error(r.error().code(), std::string(what) + ": " + r.error().message()));
        return true;
    };
    auto receive = [&](std::uintptr_t k) {
        return posted(
            c.recv(*msg_mr_, base + k * slot, slot, {.context = reinterpret_cast<void*>(k)}),
            "the target's receive");
    };
    auto answer = [&](std::uintptr_t k) {
        return posted(c.send(*msg_mr_, base + (s.qd + k) * slot, reply,
                             {.report = completion_mode::on_error}),
                      "the target's reply");
    };
    for (std::uintptr_t k = 0; two_sided && k < s.qd; ++k) {
        if (!receive(k))
            receives.push_back(k);
    }
    completion done[16];
    reaper reap(c, s);
    while (!stop_ && c.is_open() && !failed_) {
        std::erase_if(receives, receive);
        std::erase_if(replies, answer);
        auto n = reap(true, done);
        if (!n) {
            if (!stop_)
                record(error(n.error().code(), "the target's reap: " + n.error().message()));
            return;
        }
        for (std::size_t i = 0; i < *n; ++i) {
            if (!done[i].ok()) {
                if (!stop_)
                    record(error(done[i].status, std::string("the target's ") +
                                                     std::string(to_string(done[i].op)) +
                                                     " failed"));
                continue;
            }
            if (done[i].op != op::recv)
                continue;
            received_.fetch_add(1, std::memory_order_relaxed);
            const auto k = reinterpret_cast<std::uintptr_t>(done[i].context);
            // gpspm: the range would be persisted here (a memory region is volatile).
            if (!answer(k))
                replies.push_back(k);
            if (!receive(k))
                receives.push_back(k);
        }
    }
}

void target::record(const error& e) {
    std::lock_guard lock(failure_mu_);
    if (!failure_)
        failure_ = e;
    failed_ = true;
}

std::string target::status() const {
    std::lock_guard lock(failure_mu_);
    std::string out = "the target received " + std::to_string(received_.load()) + " messages";
    if (failure_)
        out += "; " + failure_->message();
    return out;
}

}  // namespace remora::tool

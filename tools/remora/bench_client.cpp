// SPDX-License-Identifier: BSD-3-Clause
// `remora bench`: one client connection's workload (bench_client.hpp).
#include <algorithm>
#include <cstring>
#include <span>
#include <string>

#include "bench_client.hpp"

namespace remora::tool {

client::client(connection& c, const remote_region& remote, const setup& s, clock::time_point end,
               client_result& out, void (*callback)(const completion&), std::uint64_t budget)
    : c_(c),
      remote_(remote),
      s_(s),
      end_(end),
      budget_(budget),
      out_(out),
      callback_(callback),
      slot_(std::max(s.size, request_size)),
      data_base_(slot_ * s.qd * 2),
      kind_(op_of(s.op).kind),
      registration_(registration_of(s.registration)),
      two_sided_(op_of(s.op).two_sided),
      quiet_(quiet_writes(s)),
      started_(s.qd),
      fresh_(s.qd),
      cached_(s.qd) {}

bool client::init() {
    buf_.resize(slot_ * s_.qd * 2 + std::max<std::size_t>(s_.size, 8) * s_.qd);
    auto mr = memory_region::create(
        c_.dom(), buf_,
        usage::write_source | usage::read_destination | usage::send | usage::receive);
    if (!mr)
        return failed(mr.error());
    mr_ = std::move(*mr);
    // Service replies arrive where receives complete: the RCQ when there is one.
    on_rcq_ = two_sided_ ||
              (c_.rcq() != nullptr && (kind_ == op_kind::flush_gpspm ||
                                       (op_of(s_.op).persistence && kind_ != op_kind::flush_raw &&
                                        remora::atomics(c_) == atomic_path::service)));
    if (registration_ == registration_mode::cache) {
        auto rc = registration_cache::create(c_.dom(), 64);
        if (!rc)
            return failed(rc.error());
        cache_ = std::move(*rc);
    }
    out_.lat_ns.reserve(quiet_ ? 0 : 1 << 20);
    return true;
}

bool client::start() {
    if (quiet_)
        return refill();
    for (unsigned k = 0; k < s_.qd && posts_ < budget_; ++k) {
        if (two_sided_) {
            auto r = c_.recv(*mr_, k * slot_, slot_, {.context = context(k)});
            if (!r)
                return failed(r.error());
        }
        if (!post_or_defer(k))
            return false;
        ++posts_;
        ++in_flight_;
    }
    return true;
}

bool client::handle(const completion& d, clock::time_point now) {
    if (!d.ok())
        return failed(error(d.status, std::string(to_string(d.op)) + " failed"));
    if (quiet_ || (two_sided_ && d.op != op::recv))
        return true;  // quiet: successes are not reported; two-sided: the reply counts
    const auto k = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(d.context));
    out_.lat_ns.push_back(static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - started_[k]).count()));
    ++out_.ops;
    if (now >= end_ || posts_ >= budget_) {
        --in_flight_;
        return true;
    }
    if (two_sided_) {
        if (auto r = c_.recv(*mr_, k * slot_, slot_, {.context = d.context}); !r)
            return failed(r.error());
    }
    ++posts_;
    return post_or_defer(k);
}

bool client::settle(clock::time_point now) {
    if (!deferred_.empty()) {
        const std::vector<unsigned> again = std::exchange(deferred_, {});
        for (unsigned k : again) {
            if (!post_or_defer(k))
                return false;
        }
    }
    if (!quiet_)
        return true;
    out_.ops = posted_ - c_.in_flight();
    if (now < end_ && posted_ < budget_)
        return refill();
    // Fewer than N in flight: none of them is signalled (at most N - 1 in a row are not).
    // Under --count the last write was signalled: all are reclaimed once it completes.
    quiet_done_ =
        posted_ >= budget_ ? c_.in_flight() == 0 : c_.in_flight() < c_.config().signal_every;
    return true;
}

result<void> client::post_with(unsigned k, const op_options& done) {
    started_[k] = clock::now();
    const std::uint64_t roff = (k * s_.size) % remote_.length();
    const memory_region& mr = *mr_;
    if (kind_ == op_kind::write || kind_ == op_kind::read) {
        auto l = local(k);
        if (!l)
            return fail(l.error());
        const auto [region, at] = *l;
        return kind_ == op_kind::write ? c_.write(remote_, roff, *region, at, s_.size, done)
                                       : c_.read(*region, at, remote_, roff, s_.size, done);
    }
    const std::uint64_t word = (static_cast<std::uint64_t>(k) * 8) % remote_.length();
    if (kind_ == op_kind::flush_raw || kind_ == op_kind::flush_gpspm) {
        // The write completes silently; the flush completes the operation.
        if (auto r = c_.write(remote_, roff, mr, data_base_ + k * s_.size, s_.size,
                              {.report = completion_mode::on_error});
            !r)
            return r;
        const flush_options how =
            kind_ == op_kind::flush_raw
                ? flush_options{flush_type::visibility, flush_method::read_after_write}
                : flush_options{flush_type::persistence, flush_method::gpspm};
        return remora::flush(c_, remote_, roff, s_.size, how, done);
    }
    if (kind_ == op_kind::atomic_write)
        return remora::atomic_write(c_, remote_, word, k, done);
    if (kind_ == op_kind::cas)
        return remora::compare_swap(c_, remote_, word, 0, 0, mr, data_base_ + k * 8, done);
    if (kind_ == op_kind::fetch_add)
        return remora::fetch_add(c_, remote_, word, 1, mr, data_base_ + k * 8, done);
    if (kind_ == op_kind::gpspm) {
        // The write completes silently; the flush request's reply completes the operation.
        if (auto r = c_.write(remote_, roff, mr, data_base_ + k * s_.size, s_.size,
                              {.report = completion_mode::on_error});
            !r)
            return r;
        std::uint64_t req[2] = {roff, s_.size};
        std::memcpy(buf_.data() + (s_.qd + k) * slot_, req, sizeof(req));
        return c_.send(mr, (s_.qd + k) * slot_, request_size,
                       {.report = completion_mode::on_error});
    }
    return c_.send(mr, (s_.qd + k) * slot_, s_.size, {.report = completion_mode::on_error});
}

bool client::post_or_defer(unsigned k) {
    auto r = post(k);
    if (r)
        return true;
    if (r.error() == errc::would_block) {
        deferred_.push_back(k);
        return true;
    }
    return failed(r.error());
}

bool client::refill() {
    while (c_.in_flight() < s_.qd && posted_ < budget_) {
        const auto k = static_cast<unsigned>(posted_ % s_.qd);
        auto r =
            post_with(k, posted_ + 1 == budget_ ? op_options{}
                                                : op_options{.report = completion_mode::on_error});
        if (!r && r.error() == errc::would_block)
            return true;  // again at the next settle
        if (!r)
            return failed(r.error());
        ++posted_;
    }
    return true;
}

result<std::pair<const memory_region*, std::size_t>> client::local(unsigned k) {
    const std::size_t at = data_base_ + k * s_.size;
    const usage u = kind_ == op_kind::read ? usage::read_destination : usage::write_source;
    if (registration_ == registration_mode::per_op) {
        fresh_[k].reset();  // the previous operation of this slot has completed
        auto r = memory_region::create(c_.dom(), std::span(buf_).subspan(at, s_.size), u);
        if (!r)
            return fail(r.error());
        fresh_[k] = std::move(*r);
        return std::pair{&*fresh_[k], std::size_t{0}};
    }
    if (cache_) {
        auto r = cache_->get(std::span(buf_).subspan(at, s_.size), u);
        if (!r)
            return fail(r.error());
        cached_[k] = *r;
        return std::pair{&cached_[k].region(), cached_[k].offset()};
    }
    return std::pair{&*mr_, at};
}

}  // namespace remora::tool

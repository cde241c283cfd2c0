#include <remora/completion_channel.hpp>
#include <remora/completion_queue.hpp>
#include <remora/domain.hpp>

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/impl.hpp"
#include "fabric/cq.hpp"

namespace remora {

const char* to_string(op o) noexcept {
    switch (o) {
        case op::read:
            return "read";
        case op::write:
            return "write";
        case op::send:
            return "send";
        case op::recv:
            return "recv";
        case op::remote_write:
            return "remote_write";
        case op::atomic:
            return "atomic";
        case op::flush:
            return "flush";
        case op::unknown:
            break;
    }
    return "unknown";
}
const char* to_string(cq_kind k) noexcept {
    return k == cq_kind::cq ? "cq" : "rcq";
}

namespace detail {

unique_fd& unique_fd::operator=(unique_fd&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
}
unique_fd::~unique_fd() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

void op_pool::reset(std::size_t sends, std::size_t service, std::size_t recvs) {
    std::lock_guard lock(mu_);
    records_ = std::vector<op_record>(sends + service + recvs);
    sends_ = sends;
    service_ = service;
    for (auto& f : free_) {
        f.clear();
    }
    for (std::size_t i = records_.size(); i-- > 0;) {
        records_[i].owner = this;
        free_[static_cast<std::size_t>(queue_of(i))].push_back(static_cast<std::uint32_t>(i));
    }
}

queue op_pool::queue_of(std::size_t index) const noexcept {
    return index < sends_ ? queue::send : index < sends_ + service_ ? queue::service : queue::recv;
}

op_record* op_pool::take(queue q) {
    std::lock_guard lock(mu_);
    auto& free = free_[static_cast<std::size_t>(q)];
    if (free.empty()) {
        return nullptr;
    }
    op_record* r = &records_[free.back()];
    free.pop_back();
    r->in_use = true;
    r->internal = nullptr;
    r->unsignaled = false;
    r->reclaims = false;
    return r;
}

void op_pool::push_quiet(op_record* r) {
    std::lock_guard lock(mu_);
    if (quiet_.empty()) {
        quiet_.resize(std::max<std::size_t>(2 * sends_, 2));
    }
    if (quiet_count_ == quiet_.size()) {
        // Full of stale entries (records that completed with an error): keep the valid ones.
        std::size_t kept = 0;
        for (std::size_t i = 0; i < quiet_count_; ++i) {
            const quiet_entry e = quiet_[(quiet_head_ + i) % quiet_.size()];
            if (quiet_valid(e)) {
                quiet_[(quiet_head_ + kept++) % quiet_.size()] = e;
            }
        }
        quiet_count_ = kept;
    }
    r->unsignaled = true;
    r->mark = quiet_next_++;
    quiet_[(quiet_head_ + quiet_count_) % quiet_.size()] = {r, r->mark};
    ++quiet_count_;
}

void op_pool::unpush_quiet(op_record* r) {
    std::lock_guard lock(mu_);
    // The newest entry: posts and pushes are serialised, and reclaim takes older ones only.
    if (quiet_count_ != 0 && quiet_[(quiet_head_ + quiet_count_ - 1) % quiet_.size()].rec == r) {
        --quiet_count_;
        --quiet_next_;
    }
    r->unsignaled = false;
}

void op_pool::mark_signalled(op_record* r) {
    std::lock_guard lock(mu_);
    r->reclaims = true;
    r->mark = quiet_next_;
}

void op_pool::reclaim(std::uint64_t mark) {
    // Every unsignalled operation posted before the signalled one whose completion is being read
    // is done (a connection's sends, writes and their completions are ordered): give their
    // records back, and their units outside the lock (a parked acquirer may run).
    for (;;) {
        op_holdings back[16];
        std::size_t n = 0;
        {
            std::lock_guard lock(mu_);
            while (quiet_count_ != 0 && n < 16) {
                const quiet_entry e = quiet_[quiet_head_];
                if (e.mark >= mark) {
                    break;
                }
                quiet_head_ = (quiet_head_ + 1) % quiet_.size();
                --quiet_count_;
                if (quiet_valid(e)) {
                    e.rec->in_use = false;
                    e.rec->unsignaled = false;
                    back[n++] = std::move(e.rec->held);
                    const auto i = static_cast<std::size_t>(e.rec - records_.data());
                    free_[static_cast<std::size_t>(queue_of(i))].push_back(
                        static_cast<std::uint32_t>(i));
                }
            }
            if (n < 16) {
                return;  // `back` releases on the way out
            }
        }
    }
}

void op_pool::give(op_record* r) noexcept {
    std::lock_guard lock(mu_);
    if (!r->in_use) {
        return;
    }
    r->in_use = false;
    const auto i = static_cast<std::size_t>(r - records_.data());
    free_[static_cast<std::size_t>(queue_of(i))].push_back(static_cast<std::uint32_t>(i));
}

std::vector<op_record*> op_pool::posted_recvs() {
    std::lock_guard lock(mu_);
    std::vector<op_record*> out;
    for (std::size_t i = sends_ + service_; i < records_.size(); ++i) {
        if (records_[i].in_use) {
            out.push_back(&records_[i]);
        }
    }
    return out;
}

std::size_t op_pool::in_use(queue q) const {
    std::lock_guard lock(mu_);
    const std::size_t total = q == queue::send      ? sends_
                              : q == queue::service ? service_
                                                    : records_.size() - sends_ - service_;
    return total - free_[static_cast<std::size_t>(q)].size();
}

std::size_t op_pool::in_use() const {
    std::lock_guard lock(mu_);
    return records_.size() - free_[0].size() - free_[1].size() - free_[2].size();
}

namespace {

using clock = std::chrono::steady_clock;
constexpr std::size_t read_batch = 16;  // completions one fi_cq_read takes at most

remora::op op_from_flags(std::uint64_t f) {
    if (f & FI_REMOTE_WRITE)
        return op::remote_write;
    if (f & FI_RECV)
        return op::recv;
    if (f & FI_ATOMIC)
        return op::atomic;
    if (f & FI_READ)
        return op::read;
    if (f & FI_WRITE)
        return op::write;
    if (f & FI_SEND)
        return op::send;
    return op::unknown;
}

}  // namespace

clock::time_point deadline_after(std::chrono::milliseconds timeout) {
    // A year is forever here; it keeps now() + timeout from overflowing.
    constexpr std::chrono::milliseconds cap = std::chrono::hours(24 * 365);
    return clock::now() + std::clamp(timeout, std::chrono::milliseconds(0), cap);
}

namespace {

int remaining_ms(clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    return static_cast<int>(std::max<std::chrono::milliseconds::rep>(0, left.count()));
}

}  // namespace

result<std::shared_ptr<cq_impl>> cq_impl::open(const std::shared_ptr<domain_impl>& dom,
                                               cq_kind kind, std::size_t size, std::uint64_t tag) {
    auto cq = std::make_shared<cq_impl>();
    cq->dom = dom;
    cq->kind = kind;
    cq->size = size;
    cq->tag = tag;
    int ret = cq_open(dom->domain.get(), size, cq->cq);
    if (ret != 0) {
        return fail(fabric_error(ret, std::string("fi_cq_open(") + to_string(kind) + ", size " +
                                          std::to_string(size) + ")"));
    }
    ret = detail::wait_fd(cq->cq.as_fid(), &cq->fd);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_control(FI_GETWAIT) on a CQ"));
    }
    return cq;
}

namespace {

thread_local int completion_depth = 0;

struct in_completion_scope {
    in_completion_scope() noexcept { ++completion_depth; }
    ~in_completion_scope() { --completion_depth; }
};

}  // namespace

bool in_completion() noexcept {
    return completion_depth > 0;
}

namespace {

// Fills `c` from a provider completion and gives its record back. Returns true when the
// completion is for the caller to see (false: delivered to its callback, a success of an
// operation posted with completion_mode::on_error, or one of a connection being destroyed).
bool finish(const cq_impl& cq, completion& c, void* op_context, std::uint64_t flags) {
    auto* rec = static_cast<op_record*>(op_context);
    c.op = (flags & FI_REMOTE_WRITE) != 0 ? op::remote_write
           : rec != nullptr               ? rec->kind
                                          : op_from_flags(flags);
    if (rec == nullptr) {
        c.tag = cq.tag;
        return true;  // a peer's write with immediate data: no local operation
    }
    c.tag = rec->owner->tag;
    // The shared budget's units go back once this function is done, outside the record lock.
    op_holdings units_back = std::move(rec->held);
    if (rec->owner->retired.load(std::memory_order_relaxed)) {
        rec->owner->give(rec);
        return false;
    }
    if (rec->reclaims) {
        rec->owner->reclaim(rec->mark);
    }
    if (rec->internal != nullptr) {
        auto* hook = rec->internal;
        void* context = rec->user_context;
        rec->owner->give(rec);
        in_completion_scope scope;
        return hook(context, c);
    }
    c.context = rec->user_context;
    auto* callback = rec->callback;
    const bool report = rec->report_success || !c.ok();
    rec->owner->give(rec);
    if (callback != nullptr) {
        in_completion_scope scope;
        callback(c);
        return false;
    }
    return report;
}

}  // namespace

namespace {

const op_pool* owner_of(void* op_context) noexcept {
    return op_context != nullptr ? static_cast<op_record*>(op_context)->owner : nullptr;
}

}  // namespace

result<std::size_t> cq_impl::read_provider(completion* out, std::size_t n, std::size_t* consumed,
                                           const op_pool** from) {
    n = std::min(n, read_batch);
    if (backlog_head < backlog.size()) {
        // What a detaching connection's drain read for the others comes first (it is older).
        std::size_t taken = 0;
        std::size_t emitted = 0;
        while (backlog_head < backlog.size() && taken < n) {
            const raw_entry e = backlog[backlog_head++];
            ++taken;
            completion& c = out[emitted];
            c = completion{};
            c.bytes = e.len;
            if (e.err != 0) {
                c.status = status_from_fi(e.err);
            } else {
                c.has_imm = (e.flags & FI_REMOTE_CQ_DATA) != 0;
                c.imm = c.has_imm ? e.data : 0;
            }
            const op_pool* src = owner_of(e.context);
            if (finish(*this, c, e.context, e.flags)) {
                if (from != nullptr) {
                    from[emitted] = src;
                }
                ++emitted;
            }
        }
        if (backlog_head == backlog.size()) {
            backlog.clear();
            backlog_head = 0;
        }
        if (consumed != nullptr) {
            *consumed = taken;
        }
        return emitted;
    }
    fi_cq_data_entry entries[read_batch];
    ssize_t got = cq_read(cq.get(), entries, n);
    if (consumed != nullptr) {
        *consumed = got > 0 ? static_cast<std::size_t>(got) : 0;
    }
    if (got > 0) {
        std::size_t emitted = 0;
        for (ssize_t i = 0; i < got; ++i) {
            const fi_cq_data_entry& e = entries[i];
            completion& c = out[emitted];
            c = completion{};
            c.bytes = e.len;
            c.has_imm = (e.flags & FI_REMOTE_CQ_DATA) != 0;
            c.imm = c.has_imm ? e.data : 0;
            const op_pool* src = owner_of(e.op_context);
            if (finish(*this, c, e.op_context, e.flags)) {
                if (from != nullptr) {
                    from[emitted] = src;
                }
                ++emitted;
            }
        }
        return emitted;
    }
    if (got == -FI_EAGAIN) {
        return 0;
    }
    if (got == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        ssize_t r = cq_readerr(cq.get(), &err);
        if (r == -FI_EAGAIN) {
            return 0;
        }
        if (r < 0) {
            return fail(fabric_error(static_cast<int>(r), "fi_cq_readerr"));
        }
        if (consumed != nullptr) {
            *consumed = 1;
        }
        completion& c = out[0];
        c = completion{};
        c.bytes = err.len;
        c.status = status_from_fi(err.err);
        const op_pool* src = owner_of(err.op_context);
        if (!finish(*this, c, err.op_context, err.flags)) {
            return 0;
        }
        if (from != nullptr) {
            from[0] = src;
        }
        return 1;
    }
    return fail(fabric_error(static_cast<int>(got), "fi_cq_read"));
}

std::size_t cq_impl::owned_ready() {
    std::lock_guard lock(owned_mu);
    return owned_count;
}

bool cq_impl::pump(bool* reaped_out) {
    if (shared && detaching.load() != 0) {
        return false;  // a connection is being destroyed: see retire_connection
    }
    // The ring lock is held across the provider read so completions keep their order when the
    // application's poll reads the provider directly too.
    bool added = false;
    bool reaped_here = false;
    {
        std::lock_guard lock(owned_mu);
        for (;;) {
            const std::size_t room = owned.size() - owned_count;
            if (room == 0) {
                break;  // the application holds a full CQ's worth: the provider's CQ is empty
            }
            completion batch[16];
            const op_pool* from[16];
            std::size_t consumed = 0;
            auto r = read_provider(batch, std::min<std::size_t>(room, 16), &consumed, from);
            if (!r || consumed == 0) {
                break;
            }
            reaped_here = true;
            for (std::size_t i = 0; i < *r; ++i) {
                const std::size_t at = (owned_head + owned_count) % owned.size();
                owned[at] = batch[i];
                if (shared) {
                    owned_from[at] = from[i];
                }
                ++owned_count;
            }
            added = added || *r != 0;
        }
    }
    if (added || reaped_here) {  // a reaped entry without a report wakes waiters too
        std::uint64_t one = 1;
        [[maybe_unused]] ssize_t w = ::write(notify.get(), &one, sizeof(one));
    }
    if (reaped_out != nullptr) {
        *reaped_out = reaped_here;
    }
    return added;
}

void cq_impl::drive() {
    if (!progress_owned()) {
        cq_drive(cq.get());
    }
}

result<std::size_t> cq_impl::fill_stash() {
    reaped = false;
    if (progress_owned()) {
        // Drain the provider into the ring from this thread: safe, since waiters sleep on the
        // eventfd, and it saves the owner thread a wake-up on the way.
        bool r = false;
        pump(&r);
        reaped = r;
        return owned_ready();
    }
    std::unique_lock lock(read_mu, std::defer_lock);
    if (shared) {
        if (detaching.load() != 0) {
            return 0;  // a connection is being destroyed: nothing is lost, ask again
        }
        lock.lock();
    }
    if (stash_count == 0) {
        stash_head = 0;
        std::size_t consumed = 0;
        auto r = read_provider(stash.data(), stash_capacity, &consumed,
                               shared ? stash_from.data() : nullptr);
        if (!r) {
            return r;
        }
        stash_count = *r;
        reaped = consumed != 0;
    }
    return stash_count;
}

result<bool> cq_impl::trywait(bool* notified) {
    if (progress_owned()) {
        pump();  // see fill_stash
        // The eventfd stays readable while the ring holds entries. With the ring empty, clear
        // what a reap that reported nothing left there (or every wait would return at once);
        // anything the thread adds after this signals it again. A signal cleared here is news
        // the caller has not seen (the thread reaped entries since the last look): not armed,
        // and a wait returns it as a no_completion wake-up instead of sleeping through it.
        std::lock_guard lock(owned_mu);
        if (owned_count == 0) {
            std::uint64_t v;
            if (::read(notify.get(), &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v))) {
                if (notified != nullptr) {
                    *notified = true;
                }
                return false;
            }
        }
        return owned_count == 0;
    }
    // A shared CQ arms under its read lock: a drain cannot slip entries into the backlog
    // between the check and the arming.
    std::unique_lock lock(read_mu, std::defer_lock);
    if (shared) {
        if (detaching.load() != 0) {
            return false;  // see fill_stash
        }
        lock.lock();
    }
    if (stash_count != 0 || backlog_head < backlog.size()) {
        return false;
    }
    int ret = detail::trywait(dom->fabric.get(), cq.as_fid());
    if (ret == 0) {
        return true;
    }
    if (ret == -FI_EAGAIN) {
        return false;
    }
    return fail(fabric_error(ret, "fi_trywait"));
}

result<std::size_t> cq_impl::poll(std::span<completion> out) {
    std::size_t n = 0;
    if (progress_owned()) {
        if (shared && detaching.load() != 0) {
            return 0;  // see fill_stash
        }
        // Ring first (older), then the provider directly: a busy-polling application makes
        // progress itself instead of waiting for the thread to be scheduled.
        std::lock_guard lock(owned_mu);
        while (n < out.size() && owned_count != 0) {
            out[n++] = owned[owned_head];
            owned_head = (owned_head + 1) % owned.size();
            --owned_count;
        }
        if (owned_count == 0) {
            std::uint64_t v;
            [[maybe_unused]] ssize_t r = ::read(notify.get(), &v, sizeof(v));
        }
        if (n < out.size()) {
            auto r = read_provider(out.data() + n, out.size() - n);
            if (r) {
                n += *r;
            } else if (n == 0) {
                return r;
            }
        }
        return n;
    }
    std::unique_lock lock(read_mu, std::defer_lock);
    if (shared) {
        if (detaching.load() != 0) {
            return 0;  // see fill_stash
        }
        lock.lock();
    }
    while (n < out.size() && stash_count != 0) {
        out[n++] = stash_pop();
    }
    while (n < out.size()) {
        const std::size_t want = std::min<std::size_t>(out.size() - n, read_batch);
        auto r = read_provider(out.data() + n, want);
        if (!r) {
            return n != 0 ? result<std::size_t>(n) : r;
        }
        n += *r;
        if (*r < want) {
            break;  // drained: another fi_cq_read would only cost a progress call
        }
    }
    return n;
}

result<std::size_t> cq_impl::wait(std::chrono::milliseconds timeout) {
    const auto deadline = deadline_after(timeout);
    for (;;) {
        auto ready = fill_stash();
        if (!ready || *ready != 0 || reaped) {
            // Entries reaped without a completion to report (callbacks, hidden successes,
            // reclaimed unsignalled operations) end the wait too: in_flight() dropped.
            return ready;
        }
        bool notified = false;
        auto armed = trywait(&notified);
        if (!armed) {
            return fail(armed.error());
        }
        if (notified) {
            return std::size_t{0};  // the progress thread reaped since the caller last looked
        }
        if (!*armed) {
            if (clock::now() >= deadline) {
                return fail(errc::timed_out, std::string("no completion on the ") +
                                                 to_string(kind) + " within " +
                                                 std::to_string(timeout.count()) + " ms");
            }
            continue;  // the provider says completions are (about to be) ready: read again
        }
        // The connection's event queue wakes the wait too: a disconnect cancels what the
        // provider did not flush, and those completions then land here. Providers that notice a
        // dead peer only when called into (sockets) get a liveness slice; a shared CQ's wait
        // uses the slice to read its connections' events.
        const bool watch_events = conn != nullptr && dom->watch_disconnects && conn->arm_events();
        pollfd p[2] = {{wait_fd(), POLLIN, 0}, {watch_events ? conn->eq_fd : -1, POLLIN, 0}};
        int wait_ms = remaining_ms(deadline);
        const auto slice = static_cast<int>(dom->liveness_interval.count());
        const bool lively = conn != nullptr || shared;
        if (lively && slice > 0) {
            wait_ms = std::min(wait_ms, slice);
        }
        int rc = ::poll(p, watch_events ? 2 : 1, wait_ms);
        if (rc < 0 && errno != EINTR) {
            return fail(errc::provider_error,
                        std::string("poll on CQ fd: ") + std::strerror(errno));
        }
        if (rc <= 0 && lively && clock::now() < deadline) {
            if (conn != nullptr) {
                conn->drive();
            } else {
                drive_attached();
            }
            continue;
        }
        if (rc <= 0) {
            return fail(errc::timed_out, std::string("no completion on the ") + to_string(kind) +
                                             " within " + std::to_string(timeout.count()) + " ms");
        }
        if (watch_events && (p[1].revents & POLLIN) != 0) {
            conn->poll_events();
            if ((p[0].revents & POLLIN) == 0) {
                continue;
            }
        }
        return fill_stash();  // 0 here is a no_completion wake-up
    }
}

// ---------------------------------------------------------------- shared CQ budget

cq_impl::~cq_impl() {
    if (shared && progress != nullptr) {
        std::lock_guard lock(dom->progress_mu);
        progress->unwatch(this);
    }
}

result<void> cq_impl::attach_connection(connection_impl* c, std::size_t need,
                                        const std::string& what) {
    std::lock_guard lock(budget_mu);
    if (need > size - reserved) {
        return fail(errc::too_large, what + " needs " + std::to_string(need) +
                                         " entries of the shared CQ of " + std::to_string(size) +
                                         ", which has " + std::to_string(size - reserved) +
                                         " free (" + std::to_string(attached.size()) +
                                         " connections attached): it could overflow");
    }
    reserved += need;
    if (std::find(attached.begin(), attached.end(), c) == attached.end()) {
        attached.push_back(c);  // once, also when it is both the connection's CQ and RCQ
    }
    return {};
}

void cq_impl::retire_connection(connection_impl* c) {
    {
        std::lock_guard lock(budget_mu);
        attached.erase(std::remove(attached.begin(), attached.end(), c), attached.end());
    }
    // A reader inside finish() for one of c's records holds this lock: once we have had it,
    // every later completion of c is dropped (its pool is retired), so no hook of c runs.
    // Readers step aside until detach_connection is done: none calls into the provider's CQ
    // while the endpoint closes (sockets could deadlock on that) or holds the lock the drain
    // needs.
    ++detaching;
    { std::lock_guard lock(progress_owned() ? owned_mu : read_mu); }
}

void cq_impl::detach_connection(std::size_t need) {
    const bool owned_here = progress_owned();
    bool pending = false;
    {
        std::lock_guard lock(owned_here ? owned_mu : read_mu);
        // Completions already read and not yet handed out: purge the retired connections'.
        std::vector<completion>& ring = owned_here ? owned : stash;
        std::vector<const op_pool*>& from = owned_here ? owned_from : stash_from;
        std::size_t& head = owned_here ? owned_head : stash_head;
        std::size_t& count = owned_here ? owned_count : stash_count;
        std::size_t kept = 0;
        for (std::size_t i = 0; i < count; ++i) {
            const std::size_t at = (head + i) % ring.size();
            if (from[at] == nullptr || !from[at]->retired.load()) {
                const std::size_t to = (head + kept++) % ring.size();
                ring[to] = ring[at];
                from[to] = from[at];
            }
        }
        count = kept;
        // The backlog's and the provider's entries of retired connections are dropped (their
        // records given back); the others' wait in the backlog for the CQ's reader.
        auto keep_or_drop = [&](const raw_entry& e) {
            const op_pool* src = owner_of(e.context);
            if (src != nullptr && src->retired.load()) {
                completion ignored;
                finish(*this, ignored, e.context, e.flags);
                return false;
            }
            return true;
        };
        std::vector<raw_entry> kept_backlog;
        for (std::size_t i = backlog_head; i < backlog.size(); ++i) {
            if (keep_or_drop(backlog[i])) {
                kept_backlog.push_back(backlog[i]);
            }
        }
        for (;;) {
            fi_cq_data_entry entries[read_batch];
            const ssize_t got = cq_read(cq.get(), entries, read_batch);
            if (got > 0) {
                for (ssize_t i = 0; i < got; ++i) {
                    const fi_cq_data_entry& d = entries[i];
                    const raw_entry e{d.op_context, d.flags, d.len, d.data, 0};
                    if (keep_or_drop(e)) {
                        kept_backlog.push_back(e);
                    }
                }
                continue;
            }
            if (got == -FI_EAVAIL) {
                fi_cq_err_entry err{};
                if (cq_readerr(cq.get(), &err) == 1) {
                    const raw_entry e{err.op_context, err.flags, err.len, err.data, err.err};
                    if (keep_or_drop(e)) {
                        kept_backlog.push_back(e);
                    }
                    continue;
                }
            }
            break;  // dry (or an error reading: nothing more can be read now)
        }
        backlog = std::move(kept_backlog);
        backlog_head = 0;
        pending = !backlog.empty();
    }
    if (pending) {
        // Wake the CQ's reader: its provider CQ may be dry now while the backlog waits.
        if (owned_here) {
            progress->kick(this);
        } else {
            cq_signal(cq.get());
        }
    }
    {
        std::lock_guard budget(budget_mu);
        reserved -= std::min(need, reserved);
    }
    --detaching;  // raised by retire_connection
}

void cq_impl::drive_attached() {
    std::lock_guard lock(budget_mu);
    for (connection_impl* c : attached) {
        c->poll_events();
    }
    drive();
}

// ---------------------------------------------------------------- channel

result<void> channel_impl::attach(cq_impl* cq) {
    std::lock_guard lock(mu);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &cq->source;
    if (epoll_ctl(epfd.get(), EPOLL_CTL_ADD, cq->wait_fd(), &ev) != 0) {
        return fail(errc::provider_error,
                    std::string("completion channel: epoll_ctl ADD: ") + std::strerror(errno));
    }
    cqs.push_back(cq);
    return {};
}

void channel_impl::detach(cq_impl* cq) {
    std::lock_guard lock(mu);
    epoll_ctl(epfd.get(), EPOLL_CTL_DEL, cq->wait_fd(), nullptr);
    cqs.erase(std::remove(cqs.begin(), cqs.end(), cq), cqs.end());
}

result<void> channel_impl::attach_events(connection_impl* conn) {
    std::lock_guard lock(mu);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &conn->source;
    if (epoll_ctl(epfd.get(), EPOLL_CTL_ADD, conn->eq_fd, &ev) != 0) {
        return fail(errc::provider_error,
                    std::string("completion channel: epoll_ctl ADD: ") + std::strerror(errno));
    }
    conns.push_back(conn);
    return {};
}

void channel_impl::detach_events(connection_impl* conn) {
    std::lock_guard lock(mu);
    epoll_ctl(epfd.get(), EPOLL_CTL_DEL, conn->eq_fd, nullptr);
    conns.erase(std::remove(conns.begin(), conns.end(), conn), conns.end());
}

result<channel_event> channel_impl::wait(std::chrono::milliseconds timeout) {
    const auto deadline = deadline_after(timeout);
    auto event_for = [](cq_impl* cq, std::size_t ready) {
        return channel_event{&cq->handle, cq->kind, cq->tag, ready};
    };
    for (;;) {
        {
            // Arm every CQ; one that cannot be armed has completions pending: report it.
            std::lock_guard lock(mu);
            const std::size_t n = cqs.size();
            for (std::size_t i = 0; i < n; ++i) {
                cq_impl* cq = cqs[(next + i) % n];
                auto armed = cq->trywait();
                if (!armed) {
                    return fail(armed.error());
                }
                if (!*armed) {
                    auto ready = cq->fill_stash();
                    if (!ready) {
                        return fail(ready.error());
                    }
                    next = (next + i + 1) % n;
                    return event_for(cq, *ready);
                }
            }
            // Arm the connections' event queues too; pending events are read now, and a
            // disconnect's canceled completions show up on the next arming pass.
            bool events_read = false;
            for (connection_impl* c : conns) {
                events_read = !c->arm_events() || events_read;
            }
            if (events_read) {
                continue;
            }
        }
        if (clock::now() >= deadline && timeout.count() > 0) {
            return fail(errc::timed_out, "no completion channel event within " +
                                             std::to_string(timeout.count()) + " ms");
        }
        epoll_event evs[1];
        int wait_ms = remaining_ms(deadline);
        {
            std::lock_guard lock(mu);
            // Providers that notice a dead peer only when called into get a liveness slice.
            for (connection_impl* c : conns) {
                const auto slice = static_cast<int>(c->dom->liveness_interval.count());
                if (slice > 0) {
                    wait_ms = std::min(wait_ms, slice);
                }
            }
        }
        int rc = epoll_wait(epfd.get(), evs, 1, wait_ms);
        if (rc < 0 && errno == EINTR) {
            continue;
        }
        if (rc == 0 && clock::now() < deadline) {
            std::lock_guard lock(mu);
            for (connection_impl* c : conns) {
                c->drive();
            }
            continue;
        }
        if (rc < 0) {
            return fail(errc::provider_error,
                        std::string("completion channel: epoll_wait: ") + std::strerror(errno));
        }
        if (rc == 0) {
            return fail(errc::timed_out, "no completion channel event within " +
                                             std::to_string(timeout.count()) + " ms");
        }
        std::lock_guard lock(mu);
        // Identify the source by address before touching it: its connection may have been
        // detached and destroyed since epoll_wait returned.
        const void* src = evs[0].data.ptr;
        auto conn_it = std::find_if(conns.begin(), conns.end(),
                                    [&](connection_impl* c) { return &c->source == src; });
        if (conn_it != conns.end()) {
            // A connection event: a disconnect cancels what the provider did not flush; the
            // arming pass above then reports the CQs those completions landed on.
            (*conn_it)->poll_events();
            continue;
        }
        auto cq_it =
            std::find_if(cqs.begin(), cqs.end(), [&](cq_impl* q) { return &q->source == src; });
        if (cq_it == cqs.end()) {
            continue;  // detached meanwhile
        }
        cq_impl* cq = *cq_it;
        auto ready = cq->fill_stash();
        if (!ready) {
            return fail(ready.error());
        }
        return event_for(cq, *ready);
    }
}

// ---------------------------------------------------------------- progress thread

result<std::unique_ptr<progress_engine>> progress_engine::start() {
    std::unique_ptr<progress_engine> e(new progress_engine());
    e->epfd_ = unique_fd(epoll_create1(EPOLL_CLOEXEC));
    e->wake_ = unique_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (e->epfd_.get() < 0 || e->wake_.get() < 0) {
        return fail(errc::provider_error, std::string("progress thread: ") + std::strerror(errno));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    epoll_ctl(e->epfd_.get(), EPOLL_CTL_ADD, e->wake_.get(), &ev);
    e->thread_ = std::thread([p = e.get()] { p->run(); });
    return e;
}

progress_engine::~progress_engine() {
    stop_.store(true);
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_.get(), &one, sizeof(one));
    if (thread_.joinable()) {
        thread_.join();
    }
}

result<void> progress_engine::watch(cq_impl* cq) {
    std::lock_guard lock(mu_);
    cq->owned.assign(cq->size, completion{});
    cq->owned_from.assign(cq->size, nullptr);
    cq->notify = unique_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (cq->notify.get() < 0) {
        return fail(errc::provider_error,
                    std::string("progress thread: eventfd: ") + std::strerror(errno));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = cq;
    if (epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, cq->fd, &ev) != 0) {
        return fail(errc::provider_error,
                    std::string("progress thread: epoll_ctl ADD: ") + std::strerror(errno));
    }
    watched_.push_back(cq);
    cq->progress = this;
    return {};
}

void progress_engine::kick(cq_impl* cq) {
    {
        std::lock_guard lock(kick_mu_);
        if (std::find(kicked_.begin(), kicked_.end(), cq) != kicked_.end()) {
            return;
        }
        kicked_.push_back(cq);
    }
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_.get(), &one, sizeof(one));
}

void progress_engine::unwatch(cq_impl* cq) {
    std::lock_guard lock(mu_);
    {
        std::lock_guard k(kick_mu_);
        kicked_.erase(std::remove(kicked_.begin(), kicked_.end(), cq), kicked_.end());
    }
    epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, cq->fd, nullptr);
    watched_.erase(std::remove(watched_.begin(), watched_.end(), cq), watched_.end());
}

void progress_engine::run() {
    epoll_event evs[16];
    // CQs whose provider kept refusing to arm (fi_trywait: -FI_EAGAIN) although reading them
    // yields nothing: tcp does that while a message waits for a receive the application has not
    // posted yet. They are driven again every millisecond instead of spinning on one of them,
    // which would starve every other CQ of this thread.
    std::vector<cq_impl*> unsettled;
    // This thread is each watched CQ's only reader: read (which drives the provider's progress)
    // until it is empty, then arm it; a failed arm means more arrived, so read again.
    auto drive = [&](cq_impl* cq) {
        for (int round = 0; round < 32; ++round) {
            cq->pump();
            if (detail::trywait(cq->dom->fabric.get(), cq->cq.as_fid()) != -FI_EAGAIN ||
                cq->owned_ready() >= cq->owned.size()) {
                return;
            }
        }
        if (std::find(unsettled.begin(), unsettled.end(), cq) == unsettled.end()) {
            unsettled.push_back(cq);
        }
    };
    auto watched = [&](cq_impl* cq) {
        return std::find(watched_.begin(), watched_.end(), cq) != watched_.end();
    };
    while (!stop_.load()) {
        int n = epoll_wait(epfd_.get(), evs, 16, unsettled.empty() ? -1 : 1);
        std::lock_guard lock(mu_);
        std::vector<cq_impl*> again;
        again.swap(unsettled);
        for (cq_impl* cq : again) {
            if (watched(cq)) {
                drive(cq);
            }
        }
        for (int i = 0; i < n; ++i) {
            auto* cq = static_cast<cq_impl*>(evs[i].data.ptr);
            if (cq == nullptr) {
                // Woken to stop, or to drive CQs kicked from completion hooks.
                std::uint64_t v;
                [[maybe_unused]] ssize_t r = ::read(wake_.get(), &v, sizeof(v));
                std::vector<cq_impl*> kicked;
                {
                    std::lock_guard k(kick_mu_);
                    kicked.swap(kicked_);
                }
                for (cq_impl* q : kicked) {
                    if (watched(q)) {
                        drive(q);
                    }
                }
                continue;
            }
            if (watched(cq)) {
                drive(cq);
            }
        }
    }
}

}  // namespace detail

// ---------------------------------------------------------------- public handles

result<std::size_t> completion_queue::poll(std::span<completion> out) {
    return impl_->poll(out);
}

result<std::size_t> completion_queue::wait(std::chrono::milliseconds timeout) {
    if (impl_->channel) {
        return fail(errc::bad_state,
                    "this CQ's completion channel is shared: wait on the connection or channel");
    }
    return impl_->wait(timeout);
}

result<completion> completion_queue::next(std::chrono::milliseconds timeout) {
    if (impl_->channel) {
        return fail(errc::bad_state,
                    "this CQ's completion channel is shared: wait on the connection or channel");
    }
    const auto deadline = detail::deadline_after(timeout);
    completion c;
    for (;;) {
        auto n = impl_->poll({&c, 1});
        if (!n) {
            return fail(n.error());
        }
        if (*n == 1) {
            return c;
        }
        // Rounded up: a wait of the truncated remainder could end before the deadline.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left <= std::chrono::milliseconds(0)) {
            return fail(errc::timed_out, std::string("no completion on the ") +
                                             to_string(impl_->kind) + " within " +
                                             std::to_string(timeout.count()) + " ms");
        }
        auto w = impl_->wait(left);
        if (!w) {
            return fail(w.error());  // timed_out included: nothing came in time
        }
    }
}

int completion_queue::fd() const noexcept {
    return impl_->wait_fd();
}
result<bool> completion_queue::arm() {
    return impl_->trywait();
}
cq_kind completion_queue::kind() const noexcept {
    return impl_->kind;
}
std::size_t completion_queue::size() const noexcept {
    return impl_->size;
}
std::uint64_t completion_queue::tag() const noexcept {
    return impl_->tag;
}

result<shared_completion_queue> shared_completion_queue::create(const domain& dom,
                                                                const shared_cq_config& cfg) {
    const auto& d = dom.impl();
    if (!d) {
        return fail(errc::bad_state, "shared_completion_queue: empty domain handle");
    }
    if (cfg.size == 0) {
        return fail(errc::invalid_argument, "shared_completion_queue: size must be > 0");
    }
    std::size_t size = cfg.size;
    if (d->caps.cq_size != 0) {
        size = std::min(size, d->caps.cq_size);  // what the provider grants
    }
    auto q = detail::cq_impl::open(d, cq_kind::cq, size, cfg.tag);
    if (!q) {
        return fail(q.error());
    }
    auto& impl = *q;
    impl->shared = true;
    impl->stash_from.assign(impl->stash.size(), nullptr);
    if (cfg.progress_thread) {
        std::lock_guard lock(d->progress_mu);
        if (!d->progress) {
            auto engine = detail::progress_engine::start();
            if (!engine) {
                return fail(engine.error());
            }
            d->progress = std::move(*engine);
        }
        if (auto r = d->progress->watch(impl.get()); !r) {
            return fail(r.error());
        }
    }
    shared_completion_queue out;
    out.impl_ = std::move(impl);
    return out;
}

completion_queue& shared_completion_queue::queue() const noexcept {
    return impl_->handle;
}
std::size_t shared_completion_queue::size() const noexcept {
    return impl_ ? impl_->size : 0;
}
std::size_t shared_completion_queue::reserved() const noexcept {
    if (!impl_) {
        return 0;
    }
    std::lock_guard lock(impl_->budget_mu);
    return impl_->reserved;
}
std::size_t shared_completion_queue::connections() const noexcept {
    if (!impl_) {
        return 0;
    }
    std::lock_guard lock(impl_->budget_mu);
    return impl_->attached.size();
}

result<completion_channel> completion_channel::create() {
    auto impl = std::make_shared<detail::channel_impl>();
    impl->epfd = detail::unique_fd(epoll_create1(EPOLL_CLOEXEC));
    if (impl->epfd.get() < 0) {
        return fail(errc::provider_error,
                    std::string("completion channel: epoll_create1: ") + std::strerror(errno));
    }
    completion_channel ch;
    ch.impl_ = std::move(impl);
    return ch;
}

int completion_channel::fd() const noexcept {
    return impl_ ? impl_->epfd.get() : -1;
}

result<channel_event> completion_channel::wait(std::chrono::milliseconds timeout) {
    if (!impl_) {
        return fail(errc::bad_state, "wait on an empty completion_channel handle");
    }
    return impl_->wait(timeout);
}

std::size_t completion_channel::attached() const noexcept {
    if (!impl_) {
        return 0;
    }
    std::lock_guard lock(impl_->mu);
    return impl_->cqs.size();
}

}  // namespace remora

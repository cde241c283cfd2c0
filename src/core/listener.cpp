// SPDX-License-Identifier: BSD-3-Clause
#include <remora/listener.hpp>

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>  // struct tcp_info with tcpi_bytes_received (glibc's lacks it)
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>

#include "core/impl.hpp"
#include "core/same_host.hpp"
#include "core/same_host_path.hpp"
#include "fabric/cq.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/eq.hpp"
#include "fabric/info.hpp"

namespace remora {

struct listener::impl {};
struct connection_request::impl {};

namespace detail {

struct listener_impl;
struct request_impl;
REMORA_HANDLE_STATE(listener, listener_impl);
REMORA_HANDLE_STATE(connection_request, request_impl);

struct listener_impl : internal_access::opaque<listener> {
    std::shared_ptr<domain_impl> dom;
    // sockets keeps a shallow copy of the fi_info its passive endpoint was opened with and builds
    // connection requests from it: the info must live as long as the listener.
    info_ptr info;
    eq_handle eq;
    int eq_fd = -1;
    pep_handle pep;
    std::uint16_t port = 0;
    // /proc/self/fd, opened by defer_silent_connects and kept: drop_silent_connects must work
    // when the process has no fd left to open it (that is when it is needed most).
    std::unique_ptr<DIR, int (*)(DIR*)> fd_dir{nullptr, closedir};
};

struct request_impl : internal_access::opaque<connection_request> {
    std::shared_ptr<listener_impl> listener;
    info_ptr info;
    std::vector<std::byte> data;         // the client's, without the library's trailer
    std::optional<setup_trailer> offer;  // the trailer, when the client sent one
    bool answered = false;
};

}  // namespace detail

// ---------------------------------------------------------------- connection_request

connection_request::connection_request(std::unique_ptr<impl, impl_deleter> p) noexcept
    : impl_(std::move(p)) {}
void connection_request::impl_deleter::operator()(impl* p) const noexcept {
    internal_access::destroy<connection_request>(p);
}
connection_request::connection_request(connection_request&&) noexcept = default;
connection_request& connection_request::operator=(connection_request&&) noexcept = default;
connection_request::~connection_request() {
    if (impl_ && !detail::impl_of(*this)->answered) {
        (void)reject();
    }
}

std::span<const std::byte> connection_request::private_data() const noexcept {
    return detail::impl_of(*this)->data;
}

namespace {

result<connection> accept_request(detail::request_impl* req, const connection_config& config,
                                  std::span<const std::byte> private_data, bool async) {
    using namespace detail;
    if (req == nullptr || req->answered) {
        return fail(errc::bad_state, "accept: request already answered");
    }
    const provider_caps& caps = req->listener->dom->caps;
    if (private_data.size() > caps.cm_data_size) {
        return fail(errc::too_large, "accept: private data of " +
                                         std::to_string(private_data.size()) +
                                         " bytes exceeds the " + caps.provider + " limit of " +
                                         std::to_string(caps.cm_data_size) + " bytes");
    }
    auto impl = std::make_unique<connection_impl>(req->listener->dom);
    auto reject_now = [&] {
        std::vector<std::byte> marker{reject_marker};
        (void)pep_reject(req->listener->pep.get(), req->info.get(), marker.data(), marker.size());
    };
    if (auto r = impl->setup(req->info.get(), config); !r) {
        // Once the endpoint was opened it took the request's handle, and closing it (setup did,
        // if a later step failed) tells the peer. Who frees the handle then differs (libfabric
        // 1.17): tcp only on accept or reject (so it is rejected: the reject frees it and sends
        // nothing); sockets with the endpoint, so a reject freed it a second time (heap
        // corruption in its CM thread, found by the fault sweep with fi_ep_bind failing on the
        // accepting side). Other providers: not rejected (a leak at worst, not a double free).
        if (!impl->endpoint_opened || caps.provider == "tcp") {
            reject_now();
        }
        req->answered = true;
        return fail(r.error());
    }
    req->answered = true;
    impl->peer_data = req->data;
    // A same-host offer this side can take: its shm peer, attached to the client's and proven
    // before the answer goes (the client progresses its peer while it waits for it).
    std::unique_ptr<connection_impl> shm;
    const auto& id = this_host_identity();
    // The offer's identity is no secret: the request must also come from a socket of this host
    // owned by this user (who could reach this process's memory anyway), or nothing is probed.
    if (!async && req->offer && req->offer->same_host() && req->offer->address_size != 0 && id &&
        req->offer->identity == *id && same_host_eligible(caps) &&
        request_from_this_user(req->info.get())) {
        const auto patience = std::min<std::chrono::milliseconds>(impl->config.connect_timeout / 2,
                                                                  same_host_proof_patience);
        shm = same_host_target_peer(*impl->dom, same_host_sizes(config, impl->config),
                                    req->offer->shm_address(), async,
                                    std::chrono::steady_clock::now() + patience);
    }
    // The application's data, and the library's answer to a same-host offer (taken only with a
    // proven shm peer).
    connection_config answer = impl->config;
    answer.same_host = answer.same_host && shm != nullptr;
    const std::vector<std::byte> data =
        accept_data(caps, answer, req->offer, private_data, impl->same_host_agreed,
                    shm != nullptr ? std::span<const std::byte>(shm->local_addr)
                                   : std::span<const std::byte>());
    if (!impl->same_host_agreed) {
        shm.reset();
    }
    impl->same_host_offered = req->offer && req->offer->same_host();
    if (impl->same_host_offered) {
        impl->setup_nonce = req->offer->nonce;
    }
    if (async) {
        if (auto r = impl->start_async(); !r) {
            return fail(r.error());
        }
    }
    int ret = ep_accept(impl->ep.get(), data.data(), data.size());
    if (ret != 0) {
        impl->connecting = false;
        return fail(fabric_error(ret, "fi_accept"));
    }
    if (!async) {
        if (auto r = impl->await_connected(impl->config.connect_timeout, false); !r) {
            return fail(r.error());
        }
        impl->peer_data = req->data;
    }
    if (shm) {
        if (auto r = adopt_control(*shm, std::move(impl)); !r) {
            return fail(r.error());
        }
        return internal_access::wrap<connection>(std::move(shm));
    }
    return internal_access::wrap<connection>(std::move(impl));
}

}  // namespace

result<connection> connection_request::accept(const connection_config& config,
                                              std::span<const std::byte> private_data) {
    return accept_request(detail::impl_of(*this), config, private_data, false);
}

result<connection> connection_request::accept_async(const connection_config& config,
                                                    std::span<const std::byte> private_data) {
    return accept_request(detail::impl_of(*this), config, private_data, true);
}

result<void> connection_request::reject(std::span<const std::byte> private_data) {
    if (!impl_ || detail::impl_of(*this)->answered) {
        return fail(errc::bad_state, "reject: request already answered");
    }
    const auto& caps = detail::impl_of(*this)->listener->dom->caps;
    if (private_data.size() + 1 > caps.cm_data_size) {
        return fail(errc::too_large, "reject: private data of " +
                                         std::to_string(private_data.size()) +
                                         " bytes exceeds the " + caps.provider + " limit of " +
                                         std::to_string(caps.cm_data_size - 1) +
                                         " bytes (one byte marks a remora reject)");
    }
    detail::impl_of(*this)->answered = true;
    std::vector<std::byte> data;
    data.reserve(private_data.size() + 1);
    data.push_back(detail::reject_marker);
    data.insert(data.end(), private_data.begin(), private_data.end());
    int ret = detail::pep_reject(detail::impl_of(*this)->listener->pep.get(),
                                 detail::impl_of(*this)->info.get(), data.data(), data.size());
    if (ret != 0) {
        return fail(detail::fabric_error(ret, "fi_reject"));
    }
    return {};
}

// ---------------------------------------------------------------- listener

listener::listener(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
listener::listener(listener&&) noexcept = default;
listener& listener::operator=(listener&&) noexcept = default;
listener::~listener() = default;

result<listener> listener::create(const domain& dom, const std::string& host, std::uint16_t port) {
    if (!dom) {
        return fail(errc::bad_state, "listen: the domain handle is empty (closed or moved from)");
    }
    using namespace detail;
    if (dom.caps().endpoint != endpoint_type::msg) {
        return fail(errc::not_supported,
                    "listen: the domain was opened for RDM endpoints (" + dom.caps().provider +
                        "), which have no listener; use connection::open_peer and attach");
    }
    auto impl = std::make_shared<listener_impl>();
    impl->dom = detail::shared_impl_of(dom);
    info_ptr hints = endpoint_hints(impl->dom->info.get());
    if (!hints) {
        return fail(errc::provider_error, "listen: fi_allocinfo failed: out of memory");
    }
    const std::string service = std::to_string(port);
    int ret = getinfo(host.c_str(), service.c_str(), getinfo_source, hints.get(), impl->info);
    if (ret != 0) {
        return fail(errc::unreachable, "listen: cannot use " + host + ":" + service + " on " +
                                           dom.caps().provider +
                                           " (fi_getinfo: " + fabric_strerror(ret) + ")");
    }
    fabric_info* info = impl->info.get();

    ret = eq_open(impl->dom->fabric.get(), 64, impl->eq);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_eq_open"));
    }
    ret = wait_fd(impl->eq.as_fid(), &impl->eq_fd);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_control FI_GETWAIT on the listener's EQ"));
    }
    ret = open_passive_ep(impl->dom->fabric.get(), info, impl->pep);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_passive_ep"));
    }
    ret = pep_bind(impl->pep.get(), impl->eq.as_fid());
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_pep_bind"));
    }
    ret = pep_listen(impl->pep.get());
    if (ret != 0) {
        return fail(fabric_error(ret, "listen on " + host + ":" + service + ": fi_listen failed"));
    }
    sockaddr_storage addr{};
    size_t len = sizeof(addr);
    ret = getname(impl->pep.as_fid(), &addr, &len);
    if (ret != 0) {
        return fail(fabric_error(ret, "fi_getname on the listener"));
    }
    if (addr.ss_family == AF_INET) {
        impl->port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
    } else if (addr.ss_family == AF_INET6) {
        impl->port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
    }
    return internal_access::wrap<listener>(std::move(impl));
}

std::uint16_t listener::port() const noexcept {
    return detail::impl_of(*this)->port;
}
int listener::fd() const noexcept {
    return detail::impl_of(*this)->eq_fd;
}

result<connection_request> listener::get_request(std::chrono::milliseconds timeout) {
    using namespace detail;
    const auto deadline = deadline_after(timeout);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        // Room for the library's same-host trailer beyond the limit: a client whose own limit is
        // larger (another rules profile) may append one to data that fits ours.
        auto ev =
            read_eq(detail::impl_of(*this)->eq.get(), std::max(left, std::chrono::milliseconds(0)),
                    detail::impl_of(*this)->dom->caps.cm_data_size + setup_trailer_size + 1 +
                        max_trailer_address,
                    nullptr);
        if (!ev) {
            return fail(ev.error());
        }
        if (ev->event != cm_event::connreq) {
            info_ptr ignored(ev->info);
            continue;  // not for the listener (should not happen); keep waiting
        }
        auto req = std::make_unique<request_impl>();
        req->listener = detail::shared_impl_of(*this);
        req->info.reset(ev->info);
        req->data = std::move(ev->data);
        req->offer = take_trailer(req->data);  // before anyone (admission, the user) reads it
        return internal_access::wrap<connection_request>(std::move(req));
    }
}

result<void> listener::defer_silent_connects(std::chrono::milliseconds silent) {
    if (silent <= std::chrono::milliseconds(0)) {
        return fail(errc::invalid_argument, "defer_silent_connects: the duration must be > 0");
    }
    const int seconds = static_cast<int>(std::max<std::int64_t>(1, (silent.count() + 999) / 1000));
    // The provider does not hand out its listening socket: find it among this process's fds
    // (a TCP socket in the listening state bound to our port).
    if (!detail::impl_of(*this)->fd_dir) {
        detail::impl_of(*this)->fd_dir.reset(opendir("/proc/self/fd"));
    }
    DIR* d = detail::impl_of(*this)->fd_dir.get();
    if (d == nullptr) {
        return fail(errc::not_supported, "defer_silent_connects: /proc/self/fd is not readable");
    }
    rewinddir(d);
    int found = 0;
    while (dirent* e = readdir(d)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dirfd(d)) {
            continue;
        }
        int listening = 0;
        socklen_t len = sizeof listening;
        if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 ||
            !listening) {
            continue;
        }
        sockaddr_storage addr{};
        socklen_t alen = sizeof addr;
        if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &alen) != 0) {
            continue;
        }
        std::uint16_t p = 0;
        if (addr.ss_family == AF_INET) {
            p = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
        } else if (addr.ss_family == AF_INET6) {
            p = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
        }
        if (p != detail::impl_of(*this)->port) {
            continue;
        }
        if (setsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds,
                       sizeof seconds) == 0) {
            ++found;
        }
    }
    if (found == 0) {
        return fail(errc::not_supported,
                    "defer_silent_connects: no listening TCP socket for port " +
                        std::to_string(detail::impl_of(*this)->port) + " (" +
                        detail::impl_of(*this)->dom->caps.provider +
                        " does not listen on a socket of this process)");
    }
    return {};
}

result<std::size_t> listener::drop_silent_connects(std::chrono::milliseconds silent) {
    if (silent <= std::chrono::milliseconds(0)) {
        return fail(errc::invalid_argument, "drop_silent_connects: the duration must be > 0");
    }
    if (!detail::impl_of(*this)->fd_dir) {
        detail::impl_of(*this)->fd_dir.reset(opendir("/proc/self/fd"));
    }
    DIR* d = detail::impl_of(*this)->fd_dir.get();
    if (d == nullptr) {
        return fail(errc::not_supported, "drop_silent_connects: /proc/self/fd is not readable");
    }
    rewinddir(d);
    std::size_t dropped = 0;
    while (dirent* e = readdir(d)) {
        char* end = nullptr;
        const long fdl = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fdl == dirfd(d)) {
            continue;
        }
        const int fd = static_cast<int>(fdl);
        sockaddr_storage addr{};
        socklen_t alen = sizeof addr;
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) {
            continue;  // not a socket
        }
        std::uint16_t p = 0;
        if (addr.ss_family == AF_INET) {
            p = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
        } else if (addr.ss_family == AF_INET6) {
            p = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
        } else {
            continue;
        }
        if (p != detail::impl_of(*this)->port) {
            continue;
        }
        tcp_info ti{};
        socklen_t tlen = sizeof ti;
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tlen) != 0 ||
            ti.tcpi_state != 1 /* TCP_ESTABLISHED */) {
            continue;  // the listening socket itself, or one already closing
        }
        // No byte received since the connection was established (last_data_recv then counts
        // from the handshake), for at least `silent`.
        if (ti.tcpi_bytes_received == 0 &&
            static_cast<std::int64_t>(ti.tcpi_last_data_recv) >= silent.count()) {
            if (shutdown(fd, SHUT_RDWR) == 0) {
                ++dropped;
            }
        }
    }
    return dropped;
}

}  // namespace remora

#include <remora/listener.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "core/impl.hpp"
#include "fabric/cq.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/eq.hpp"
#include "fabric/info.hpp"

namespace remora {
namespace detail {

struct listener_impl {
    std::shared_ptr<domain_impl> dom;
    // sockets keeps a shallow copy of the fi_info its passive endpoint was opened with and builds
    // connection requests from it: the info must live as long as the listener.
    info_ptr info;
    eq_handle eq;
    int eq_fd = -1;
    pep_handle pep;
    std::uint16_t port = 0;
};

struct request_impl {
    std::shared_ptr<listener_impl> listener;
    info_ptr info;
    std::vector<std::byte> data;
    bool answered = false;
};

}  // namespace detail

// ---------------------------------------------------------------- connection_request

connection_request::connection_request(std::unique_ptr<detail::request_impl> impl)
    : impl_(std::move(impl)) {}
connection_request::connection_request(connection_request&&) noexcept = default;
connection_request& connection_request::operator=(connection_request&&) noexcept = default;
connection_request::~connection_request() {
    if (impl_ && !impl_->answered) {
        (void)reject();
    }
}

std::span<const std::byte> connection_request::private_data() const noexcept {
    return impl_->data;
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
        (void)pep_reject(req->listener->pep.get(), req->info->handle, marker.data(), marker.size());
    };
    if (auto r = impl->setup(req->info.get(), config); !r) {
        if (!impl->ep) {
            reject_now();
        }
        // Otherwise the endpoint took the request's handle: rejecting it now breaks sockets'
        // listener. Closing the endpoint tells the peer.
        req->answered = true;
        return fail(r.error());
    }
    req->answered = true;
    impl->peer_data = req->data;
    if (async) {
        if (auto r = impl->start_async(); !r) {
            return fail(r.error());
        }
    }
    int ret = ep_accept(impl->ep.get(), private_data.data(), private_data.size());
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
    return connection(std::move(impl));
}

}  // namespace

result<connection> connection_request::accept(const connection_config& config,
                                              std::span<const std::byte> private_data) {
    return accept_request(impl_.get(), config, private_data, false);
}

result<connection> connection_request::accept_async(const connection_config& config,
                                                    std::span<const std::byte> private_data) {
    return accept_request(impl_.get(), config, private_data, true);
}

result<void> connection_request::reject(std::span<const std::byte> private_data) {
    if (!impl_ || impl_->answered) {
        return fail(errc::bad_state, "reject: request already answered");
    }
    const auto& caps = impl_->listener->dom->caps;
    if (private_data.size() + 1 > caps.cm_data_size) {
        return fail(errc::too_large, "reject: private data of " +
                                         std::to_string(private_data.size()) +
                                         " bytes exceeds the " + caps.provider + " limit of " +
                                         std::to_string(caps.cm_data_size - 1) +
                                         " bytes (one byte marks a remora reject)");
    }
    impl_->answered = true;
    std::vector<std::byte> data;
    data.reserve(private_data.size() + 1);
    data.push_back(detail::reject_marker);
    data.insert(data.end(), private_data.begin(), private_data.end());
    int ret = detail::pep_reject(impl_->listener->pep.get(), impl_->info->handle, data.data(),
                                 data.size());
    if (ret != 0) {
        return fail(detail::fabric_error(ret, "fi_reject"));
    }
    return {};
}

// ---------------------------------------------------------------- listener

listener::listener(std::shared_ptr<detail::listener_impl> impl) : impl_(std::move(impl)) {}
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
    impl->dom = dom.impl();
    info_ptr hints = endpoint_hints(*impl->dom);
    const std::string service = std::to_string(port);
    int ret = getinfo(host.c_str(), service.c_str(), FI_SOURCE, hints.get(), impl->info);
    if (ret != 0) {
        return fail(errc::unreachable, "listen: cannot use " + host + ":" + service + " on " +
                                           dom.caps().provider + " (" + fabric_strerror(ret) + ")");
    }
    fi_info* info = impl->info.get();

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
        return fail(fabric_error(ret, "listen on " + host + ":" + service));
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
    return listener(std::move(impl));
}

std::uint16_t listener::port() const noexcept {
    return impl_->port;
}
int listener::fd() const noexcept {
    return impl_->eq_fd;
}

result<connection_request> listener::get_request(std::chrono::milliseconds timeout) {
    using namespace detail;
    const auto deadline = deadline_after(timeout);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        auto ev = read_eq(impl_->eq.get(), std::max(left, std::chrono::milliseconds(0)),
                          impl_->dom->caps.cm_data_size, nullptr);
        if (!ev) {
            return fail(ev.error());
        }
        if (ev->event != FI_CONNREQ) {
            info_ptr ignored(ev->info);
            continue;  // not for the listener (should not happen); keep waiting
        }
        auto req = std::make_unique<request_impl>();
        req->listener = impl_;
        req->info.reset(ev->info);
        req->data = std::move(ev->data);
        return connection_request(std::move(req));
    }
}

}  // namespace remora

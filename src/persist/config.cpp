// SPDX-License-Identifier: BSD-3-Clause
// persistence_config as a connection addon: what the connection's setup reserves for the target
// service (its internal sends), and how the persistence layer reads it back.
#include <remora/persistence.hpp>

#include <algorithm>
#include <string>

#include "core/upper.hpp"
#include "persist/service.hpp"

namespace remora {
namespace detail {
namespace {

class persistence_addon final : public connection_addon, public message_router {
  public:
    explicit persistence_addon(const persistence_config& c) : cfg(c) {}
    [[nodiscard]] std::uint32_t internal_sends() const noexcept override {
        return message_slots(cfg.service_depth);  // the requests and the client's hello
    }
    [[nodiscard]] result<void> check() const override {
        if (cfg.service_timeout.count() <= 0) {
            return fail(errc::invalid_argument, "persistence_config: service_timeout must be > 0");
        }
        if (cfg.message_size != 0 && cfg.service_depth == 0) {
            return fail(errc::invalid_argument,
                        "persistence_config: message_size needs a service_depth (without one the "
                        "connection carries the application's messages anyway)");
        }
        if (cfg.serve_wait.count() < 0) {
            return fail(errc::invalid_argument,
                        "persistence_config: serve_wait must be >= 0 (0: no check)");
        }
        return {};
    }
    [[nodiscard]] std::uint32_t application_receives(
        std::uint32_t rq_size) const noexcept override {
        return cfg.message_size == 0 ? 0 : 2 * std::max<std::uint32_t>(rq_size, 1);
    }
    result<void> send(connection_impl& c, std::span<const local_segment> src, bool with_imm,
                      std::uint64_t imm, const op_options& opts) const override {
        return mux_send(c, src, with_imm, imm, opts);
    }
    result<void> recv(connection_impl& c, std::span<const local_segment> dst,
                      const op_options& opts) const override {
        return mux_recv(c, dst, opts);
    }
    persistence_config cfg;
};

const persistence_config default_config{};

}  // namespace

const persistence_config& persistence_of(const connection_impl& c) noexcept {
    for (const auto& a : c.config.addons) {
        if (const auto* p = dynamic_cast<const persistence_addon*>(a.get()); p != nullptr) {
            return p->cfg;
        }
    }
    return default_config;
}

std::string unserved_message(const connection_impl& c) {
    const persistence_config& cfg = persistence_of(c);
    return "the target accepted a service on this connection (tag " + std::to_string(c.config.tag) +
           ") but does not serve it: neither the hello nor any request was answered within "
           "serve_wait (" +
           std::to_string(std::min(cfg.serve_wait, cfg.service_timeout).count()) +
           " ms); the target must call target_service::serve on the accepted connection and read "
           "its CQs (or give it a progress thread)";
}

}  // namespace detail

persistence_config::operator std::shared_ptr<const connection_addon>() const {
    return std::make_shared<const detail::persistence_addon>(*this);
}

persistence_config persistence_config_of(const connection& conn) {
    return detail::persistence_of(*detail::impl_of(conn));
}

}  // namespace remora

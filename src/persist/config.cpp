// SPDX-License-Identifier: BSD-3-Clause
// persistence_config as a connection addon: what the connection's setup reserves for the target
// service (its internal sends), and how the persistence layer reads it back.
#include <remora/persistence.hpp>

#include <string>

#include "core/upper.hpp"
#include "persist/service.hpp"

namespace remora {
namespace detail {
namespace {

class persistence_addon final : public connection_addon {
  public:
    explicit persistence_addon(const persistence_config& c) : cfg(c) {}
    [[nodiscard]] std::uint32_t internal_sends() const noexcept override {
        return cfg.service_depth;
    }
    [[nodiscard]] result<void> check() const override {
        if (cfg.service_timeout.count() <= 0) {
            return fail(errc::invalid_argument, "persistence_config: service_timeout must be > 0");
        }
        return {};
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

}  // namespace detail

persistence_config::operator std::shared_ptr<const connection_addon>() const {
    return std::make_shared<const detail::persistence_addon>(*this);
}

persistence_config persistence_config_of(const connection& conn) {
    return detail::persistence_of(*detail::impl_of(conn));
}

}  // namespace remora

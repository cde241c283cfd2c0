// SPDX-License-Identifier: BSD-3-Clause
// src/capi/resources.cpp — the C API's domains, memory regions, descriptors, persistent regions
// and target services.
#include "capi.hpp"

using namespace remora::capi;
using remora::errc;

// The C enumerations are the C++ ones' values (the conversions below are plain casts).
static_assert(REMORA_E_INVALID == -static_cast<int>(errc::invalid_argument));
static_assert(REMORA_E_MALFORMED_DESCRIPTOR == -static_cast<int>(errc::malformed_descriptor));
static_assert(REMORA_E_PROVIDER == -static_cast<int>(errc::provider_error));
static_assert(REMORA_USAGE_READ_SOURCE == static_cast<unsigned>(remora::usage::read_source));
static_assert(REMORA_USAGE_FLUSH_TARGET == static_cast<unsigned>(remora::usage::flush_target));
static_assert(REMORA_USAGE_ALL == static_cast<unsigned>(remora::all_usages));
static_assert(REMORA_PERSISTENCE_GPSPM == static_cast<unsigned>(remora::persistence::gpspm));
static_assert(REMORA_OP_FLUSH == static_cast<int>(remora::op::flush));
static_assert(REMORA_OP_REMOTE_WRITE == static_cast<int>(remora::op::remote_write));
static_assert(REMORA_RCQ == static_cast<int>(remora::cq_kind::rcq));
static_assert(REMORA_CONN_UNREACHABLE == static_cast<int>(remora::conn_event::unreachable));
static_assert(REMORA_DESCRIPTOR_SIZE == remora::remote_region::serialized_size);

namespace {

int check_usage(const char* fn, unsigned usage) noexcept {
    if (usage == 0 || (usage & ~static_cast<unsigned>(REMORA_USAGE_ALL)) != 0) {
        return fail(REMORA_E_INVALID, fn,
                    "usage " + std::to_string(usage) +
                        " must be a nonzero combination of REMORA_USAGE_* bits");
    }
    return 0;
}

}  // namespace

extern "C" {

// ---- domain

REMORA_API int remora_domain_open(const struct remora_domain_config* cfg, remora_domain** dom) {
    static constexpr const char* fn = "remora_domain_open";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        remora_domain_config c;
        if (int rc = load_cfg(fn, "remora_domain_config", cfg, c)) {
            return rc;
        }
        remora::domain_config dc;
        if (c.provider != nullptr) {
            dc.provider = c.provider;
        }
        if (c.node != nullptr) {
            dc.node = c.node;
        }
        switch (c.endpoint) {
            case REMORA_ENDPOINT_MSG:
                dc.endpoint = remora::endpoint_type::msg;
                break;
            case REMORA_ENDPOINT_RDM:
                dc.endpoint = remora::endpoint_type::rdm;
                break;
            default:
                return fail(REMORA_E_INVALID, fn,
                            "endpoint " + std::to_string(c.endpoint) +
                                " is not REMORA_ENDPOINT_MSG or REMORA_ENDPOINT_RDM");
        }
        switch (c.progress) {
            case REMORA_PROGRESS_DEFAULT:
            case REMORA_PROGRESS_ADAPTIVE:
                dc.progress = remora::progress_policy::adaptive;
                break;
            case REMORA_PROGRESS_BUSY:
                dc.progress = remora::progress_policy::busy;
                break;
            case REMORA_PROGRESS_BLOCKING:
                dc.progress = remora::progress_policy::blocking;
                break;
            default:
                return fail(
                    REMORA_E_INVALID, fn,
                    "progress " + std::to_string(c.progress) + " is not a REMORA_PROGRESS_* value");
        }
        if (c.progress_spin_us != 0) {
            dc.progress_spin = std::chrono::microseconds(c.progress_spin_us);
        }
        if (c.same_host && c.no_same_host) {
            return fail(REMORA_E_INVALID, fn,
                        "same_host (deprecated: the default) and no_same_host are both set");
        }
        dc.same_host = !c.no_same_host;
        return give(fn, remora::domain::open(dc), dom);
    });
}

REMORA_API int remora_domain_close(remora_domain** dom) {
    static constexpr const char* fn = "remora_domain_close";
    return guarded(fn, [&] {
        if (dom == nullptr || *dom == nullptr) {
            return 0;
        }
        if (auto r = (*dom)->d.close(); !r) {
            if (!(*dom)->d) {  // the fabric failed to close after the domain did: handle emptied
                delete *dom;
                *dom = nullptr;
            }
            return fail(r.error(), fn);
        }
        delete *dom;
        *dom = nullptr;
        return 0;
    });
}

REMORA_API void remora_domain_delete(remora_domain* dom) {
    guarded_void([&] { delete dom; });
}

REMORA_API int remora_domain_caps(const remora_domain* dom, struct remora_provider_caps* caps) {
    static constexpr const char* fn = "remora_domain_caps";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, caps);
        remora_provider_caps c;
        if (int rc = load_cfg(fn, "remora_provider_caps", caps, c)) {
            return rc;
        }
        const std::size_t theirs = caps->size;
        const auto& k = dom->d.caps();
        c = remora_provider_caps{};
        c.size = theirs;
        std::snprintf(c.provider, sizeof c.provider, "%s", k.provider.c_str());
        c.endpoint =
            k.endpoint == remora::endpoint_type::rdm ? REMORA_ENDPOINT_RDM : REMORA_ENDPOINT_MSG;
        c.native_atomics = k.native_atomics;
        c.target_needs_progress = k.target_needs_progress;
        c.cq_wait_fd = k.cq_wait_fd;
        c.inject_size = k.inject_size;
        c.cm_data_size = k.cm_data_size;
        c.max_msg_size = k.max_msg_size;
        c.cq_data_size = k.cq_data_size;
        c.same_host = k.same_host;
        std::memcpy(caps, &c, theirs);
        return 0;
    });
}

// ---- memory regions

REMORA_API int remora_memory_region_create(remora_domain* dom, void* addr, size_t len,
                                           unsigned usage, remora_memory_region** mr) {
    static constexpr const char* fn = "remora_memory_region_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, addr);
        REMORA_CAPI_NOT_NULL(fn, mr);
        if (int rc = check_usage(fn, usage)) {
            return rc;
        }
        auto r = remora::memory_region::create(
            dom->d, std::span<std::byte>(static_cast<std::byte*>(addr), len),
            static_cast<remora::usage>(usage));
        if (!r) {
            return fail(r.error(), fn);
        }
        *mr = c_mr(new remora::memory_region(std::move(*r)));
        return 0;
    });
}

REMORA_API void remora_memory_region_delete(remora_memory_region* mr) {
    guarded_void([&] { delete const_cast<remora::memory_region*>(mr_of(mr)); });
}

REMORA_API int remora_memory_region_data(const remora_memory_region* mr, void** addr, size_t* len) {
    static constexpr const char* fn = "remora_memory_region_data";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, mr);
        REMORA_CAPI_NOT_NULL(fn, addr);
        REMORA_CAPI_NOT_NULL(fn, len);
        *addr = mr_of(mr)->data();
        *len = mr_of(mr)->size();
        return 0;
    });
}

REMORA_API int remora_memory_region_describe(const remora_memory_region* mr, size_t offset,
                                             size_t len, remora_remote_region** remote) {
    static constexpr const char* fn = "remora_memory_region_describe";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, mr);
        REMORA_CAPI_NOT_NULL(fn, remote);
        return give(fn, mr_of(mr)->describe(offset, len), remote);
    });
}

// ---- descriptors

REMORA_API int remora_remote_region_parse(const void* bytes_in, size_t len,
                                          remora_remote_region** remote) {
    static constexpr const char* fn = "remora_remote_region_parse";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, bytes_in);
        REMORA_CAPI_NOT_NULL(fn, remote);
        return give(fn, remora::remote_region::parse(bytes(bytes_in, len)), remote);
    });
}

REMORA_API int remora_remote_region_serialize(const remora_remote_region* remote, void* buf,
                                              size_t len) {
    static constexpr const char* fn = "remora_remote_region_serialize";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, remote);
        REMORA_CAPI_NOT_NULL(fn, buf);
        if (len < REMORA_DESCRIPTOR_SIZE) {
            return fail(REMORA_E_TOO_LARGE, fn,
                        "a descriptor takes " + std::to_string(REMORA_DESCRIPTOR_SIZE) +
                            " bytes; the buffer has " + std::to_string(len));
        }
        const auto wire = remote->r.serialize();
        std::memcpy(buf, wire.data(), wire.size());
        return 0;
    });
}

REMORA_API int remora_remote_region_slice(const remora_remote_region* remote, uint64_t offset,
                                          uint64_t len, remora_remote_region** slice) {
    static constexpr const char* fn = "remora_remote_region_slice";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, remote);
        REMORA_CAPI_NOT_NULL(fn, slice);
        return give(fn, remote->r.slice(offset, len), slice);
    });
}

REMORA_API int remora_remote_region_info(const remora_remote_region* remote, uint64_t* len,
                                         unsigned* usage, unsigned* persistence) {
    static constexpr const char* fn = "remora_remote_region_info";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, remote);
        if (len != nullptr) {
            *len = remote->r.length();
        }
        if (usage != nullptr) {
            *usage = static_cast<unsigned>(remote->r.usages());
        }
        if (persistence != nullptr) {
            *persistence = static_cast<unsigned>(remote->r.persistence());
        }
        return 0;
    });
}

REMORA_API void remora_remote_region_delete(remora_remote_region* remote) {
    guarded_void([&] { delete remote; });
}

// ---- persistent regions

REMORA_API int remora_persistent_region_open(remora_domain* dom,
                                             const struct remora_persistent_region_config* cfg,
                                             remora_persistent_region** region) {
    static constexpr const char* fn = "remora_persistent_region_open";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, dom);
        REMORA_CAPI_NOT_NULL(fn, region);
        remora_persistent_region_config c;
        if (int rc = load_cfg(fn, "remora_persistent_region_config", cfg, c)) {
            return rc;
        }
        remora::persistent_region_config pc;
        if (c.path != nullptr) {
            pc.path = c.path;
        }
        pc.size = c.len;
        pc.create = c.create;
        if (c.usage != 0) {
            if (int rc = check_usage(fn, c.usage)) {
                return rc;
            }
            pc.uses = static_cast<remora::usage>(c.usage);
        }
        pc.apm_durable = c.apm_durable;
        pc.exclusive = !c.unguarded;
        return give(fn, remora::persistent_region::open(dom->d, pc), region);
    });
}

REMORA_API void remora_persistent_region_delete(remora_persistent_region* region) {
    guarded_void([&] { delete region; });
}

REMORA_API int remora_persistent_region_region(const remora_persistent_region* region,
                                               const remora_memory_region** mr) {
    return REMORA_CAPI_GET("remora_persistent_region_region", region, mr,
                           reinterpret_cast<const remora_memory_region*>(&region->p.region()));
}

REMORA_API int remora_persistent_region_persist(const remora_persistent_region* region,
                                                uint64_t offset, uint64_t len) {
    static constexpr const char* fn = "remora_persistent_region_persist";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, region);
        if (auto r = region->p.persist(offset, len); !r) {
            return fail(r.error(), fn);
        }
        return 0;
    });
}

REMORA_API int remora_persistent_region_revoked(const remora_persistent_region* region,
                                                bool* revoked) {
    static constexpr const char* fn = "remora_persistent_region_revoked";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, region);
        REMORA_CAPI_NOT_NULL(fn, revoked);
        *revoked = region->p.revoked();
        return 0;
    });
}

REMORA_API int remora_persistent_region_describe(const remora_persistent_region* region,
                                                 size_t offset, size_t len,
                                                 remora_remote_region** remote) {
    static constexpr const char* fn = "remora_persistent_region_describe";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, region);
        REMORA_CAPI_NOT_NULL(fn, remote);
        return give(fn, region->p.describe(offset, len), remote);
    });
}

// ---- target service

REMORA_API int remora_target_service_create(remora_target_service** svc) {
    static constexpr const char* fn = "remora_target_service_create";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, svc);
        return give(fn, remora::target_service::create(), svc);
    });
}

REMORA_API void remora_target_service_delete(remora_target_service* svc) {
    guarded_void([&] { delete svc; });
}

REMORA_API int remora_target_service_expose(remora_target_service* svc,
                                            const remora_memory_region* mr,
                                            const remora_persistent_region* region,
                                            remora_remote_region** remote) {
    static constexpr const char* fn = "remora_target_service_expose";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, svc);
        REMORA_CAPI_NOT_NULL(fn, remote);
        if ((mr == nullptr) == (region == nullptr)) {
            return fail(REMORA_E_INVALID, fn, "give exactly one of mr and region");
        }
        return give(fn, mr != nullptr ? svc->s.expose(*mr_of(mr)) : svc->s.expose(region->p),
                    remote);
    });
}

REMORA_API int remora_target_service_serve(remora_target_service* svc, remora_connection* conn) {
    static constexpr const char* fn = "remora_target_service_serve";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, svc);
        REMORA_CAPI_NOT_NULL(fn, conn);
        if (auto r = svc->s.serve(conn->c); !r) {
            return fail(r.error(), fn);
        }
        return 0;
    });
}

REMORA_API int remora_target_service_stats(const remora_target_service* svc, uint64_t* requests,
                                           uint64_t* refused) {
    static constexpr const char* fn = "remora_target_service_stats";
    return guarded(fn, [&] {
        REMORA_CAPI_NOT_NULL(fn, svc);
        if (requests != nullptr) {
            *requests = svc->s.requests();
        }
        if (refused != nullptr) {
            *refused = svc->s.refused();
        }
        return 0;
    });
}

}  // extern "C"

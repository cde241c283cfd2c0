// SPDX-License-Identifier: BSD-3-Clause
// Provider-rules mode (domain_config::rules, REMORA_RULES): each rule on real providers. A post
// that breaks a rule, made white-box through the one door on a real connection, fails under the
// mode with a message naming the rule and reaches the provider without it; caps() reports verbs'
// limits; keys are the provider's; private data is held to rdma_cm's limit.
#include <cstdlib>
#include <cstring>
#include <optional>

#include <remora/admission.hpp>

#include "core/impl.hpp"
#include "fabric/mr.hpp"
#include "support.hpp"

namespace remora::test {
namespace {

// REMORA_RULES for the scope (the domains opened meanwhile resolve it); restored after.
class rules_env {
  public:
    explicit rules_env(const char* value) {
        if (const char* old = std::getenv("REMORA_RULES"))
            saved_ = old;
        ::setenv("REMORA_RULES", value, 1);
    }
    ~rules_env() {
        if (saved_)
            ::setenv("REMORA_RULES", saved_->c_str(), 1);
        else
            ::unsetenv("REMORA_RULES");
    }

  private:
    std::optional<std::string> saved_;
};

void* desc_of(const memory_region& mr) {
    return detail::impl_of(mr)->desc;
}

struct done_count {
    std::atomic<int> done{0};
    std::atomic<int> failed{0};
};

bool count_done(void* ctx, completion& c, detail::callback_sink*) {
    auto* d = static_cast<done_count*>(ctx);
    if (!c.ok())
        d->failed.fetch_add(1);
    d->done.fetch_add(1);
    return false;
}

// One pair of connected endpoints under `rules` ("verbs" or "native"), with a 4 KiB target
// region on the server and, on the client, regions for each rule's post.
struct bench {
    bench(const std::string& provider, const char* rules) {
        rules_env env(rules);
        auto p = connect_pair(provider);
        if (!p) {
            error = p.error().what();
            return;
        }
        pair.emplace(std::move(*p));
        target_mr.emplace(must(memory_region::create(
            pair->server_domain, target,
            usage::write_destination | usage::read_source | usage::atomic_target)));
        remote.emplace(must(target_mr->describe()));
        source_mr.emplace(
            must(memory_region::create(pair->client_domain, source, usage::write_source)));
        half_mr.emplace(must(memory_region::create(pair->client_domain, std::span(local).first(32),
                                                   usage::write_source | usage::send)));
        result_mr.emplace(
            must(memory_region::create(pair->client_domain, fetched, usage::read_destination)));
    }
    connection& client() { return *pair->client; }
    detail::connection_impl& impl() { return *detail::impl_of(*pair->client); }
    const provider_caps& caps() const { return pair->client_domain.caps(); }

    // Posts `p` through the door with a reserved record whose completion counts in `count`.
    result<void> post(detail::fabric_post p) {
        using namespace detail;
        connection_impl& c = impl();
        const queue q = p.kind == post_kind::recv ? queue::recv : queue::send;
        auto r = reserve_op(c.ops, q, nullptr, units{}, "verbs rules test",
                            q == queue::recv ? c.config.rq_size : c.config.sq_size);
        if (!r)
            return fail(r.error());
        arm_internal(**r, count_done, &count, op::write);
        p.context = *r;
        p.flags |= post_completion;
        return door(c, p, "verbs rules test");
    }
    // Waits for the posted operation's completion; true when it succeeded.
    bool completes() {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        completion buf[4];
        while (count.done.load() == 0 && std::chrono::steady_clock::now() < deadline) {
            (void)client().cq().poll(buf);
            if (pair->server)
                (void)pair->server->cq().poll(buf);
        }
        return count.done.load() == 1 && count.failed.load() == 0;
    }
    detail::remote_iov remote_at(std::uint64_t offset, std::size_t len) const {
        return {remote->address() + offset, len, remote->key()};
    }

    std::string error;
    // The memory outlives the connections: a progress thread may still be in the provider with
    // it when the test ends (ASan's sendmsg check).
    std::vector<std::byte> target = std::vector<std::byte>(4096);
    std::vector<std::byte> source = std::vector<std::byte>(4096);
    std::vector<std::byte> local = std::vector<std::byte>(128);
    std::vector<std::byte> fetched = std::vector<std::byte>(64);
    std::optional<connected_pair> pair;
    std::optional<memory_region> target_mr, source_mr, half_mr, result_mr;
    std::optional<remote_region> remote;
    done_count count;
};

class verbs_rules : public testing::TestWithParam<std::string> {
  protected:
    // Runs `make` (the rule's post) under verbs rules, then natively: the first fails naming the
    // rule, the second is posted and completes (unless `native_ok` says the provider cannot).
    template <class Make>
    void breaks(Make make, const char* rule, bool native_ok = true) {
        {
            bench b(GetParam(), "verbs");
            if (!b.error.empty())
                GTEST_SKIP() << GetParam() << ": " << b.error;
            ASSERT_EQ(b.caps().rules, provider_rules::verbs);
            const unsigned long before = detail::fabric_rules::violations();
            auto r = b.post(make(b));
            ASSERT_FALSE(r) << rule << " was posted under verbs rules";
            EXPECT_TRUE(r.error() == errc::invalid_argument) << r.error().what();
            EXPECT_NE(r.error().message().find("verbs rules"), std::string::npos)
                << r.error().what();
            EXPECT_NE(r.error().message().find(rule), std::string::npos) << r.error().what();
            EXPECT_EQ(detail::fabric_rules::violations(), before + 1);
            EXPECT_EQ(b.count.done.load(), 0);
        }
        if (!native_ok)
            return;
        bench b(GetParam(), "native");
        ASSERT_TRUE(b.error.empty()) << b.error;
        ASSERT_EQ(b.caps().rules, provider_rules::native);
        auto r = b.post(make(b));
        ASSERT_TRUE(r) << rule << " natively: " << r.error().what();
        EXPECT_TRUE(b.completes()) << rule << " natively did not complete";
    }
};

detail::fabric_post write_of(bench& b, iovec* iov, void** desc, std::size_t count,
                             std::size_t bytes) {
    return {.kind = detail::post_kind::write,
            .iov = iov,
            .desc = desc,
            .count = count,
            .remote = b.remote_at(0, bytes)};
}

TEST_P(verbs_rules, a_post_without_a_descriptor_fails) {
    iovec iov{};
    void* desc = nullptr;
    breaks(
        [&](bench& b) {
            iov = {b.source.data(), 64};
            return write_of(b, &iov, &desc, 1, 64);
        },
        "no local descriptor");
}

TEST_P(verbs_rules, a_descriptor_of_another_domain_fails) {
    iovec iov{};
    void* desc = nullptr;
    breaks(
        [&](bench& b) {
            // The server's region: registered in the other domain.
            iov = {b.target.data(), 64};
            desc = desc_of(*b.target_mr);
            return write_of(b, &iov, &desc, 1, 64);
        },
        "another domain");
}

TEST_P(verbs_rules, a_segment_past_its_registration_fails) {
    iovec iov{};
    void* desc = nullptr;
    breaks(
        [&](bench& b) {
            iov = {b.local.data(), 64};  // the registration covers 32 bytes of it
            desc = desc_of(*b.half_mr);
            return write_of(b, &iov, &desc, 1, 64);
        },
        "not inside its registration");
}

TEST_P(verbs_rules, a_destination_without_local_write_fails) {
    iovec iov{};
    void* desc = nullptr;
    breaks(
        [&](bench& b) {
            iov = {b.source.data(), 64};  // registered as a write source only
            desc = desc_of(*b.source_mr);
            detail::fabric_post p = write_of(b, &iov, &desc, 1, 64);
            p.kind = detail::post_kind::read;
            return p;
        },
        "local writes");
}

TEST_P(verbs_rules, more_segments_than_verbs_takes_fail) {
    iovec iov[5];
    void* desc[5];
    std::size_t native_limit = 0;
    {
        rules_env env("native");
        auto d = domain::open(
            {.provider = GetParam().rfind("rdm:", 0) == 0 ? GetParam().substr(4) : GetParam(),
             .endpoint = is_rdm(GetParam()) ? endpoint_type::rdm : endpoint_type::msg});
        if (d)
            native_limit = d->caps().iov_limit;
    }
    breaks(
        [&](bench& b) {
            for (std::size_t i = 0; i < 5; ++i) {
                iov[i] = {b.source.data() + 64 * i, 64};
                desc[i] = desc_of(*b.source_mr);
            }
            return write_of(b, iov, desc, 5, 320);
        },
        "at most 4 (iov_limit)", native_limit >= 5);
}

TEST_P(verbs_rules, an_inject_past_verbs_inline_size_fails) {
    iovec iov{};
    void* desc = nullptr;
    std::size_t native_inject = 0;
    breaks(
        [&](bench& b) {
            iov = {b.source.data(), 512};
            desc = desc_of(*b.source_mr);
            detail::fabric_post p = write_of(b, &iov, &desc, 1, 512);
            p.flags = detail::post_inject;
            native_inject = b.caps().inject_size;
            return p;
        },
        "(inject_size)", false);
    // Natively, where the provider injects 512 bytes, the same write is posted.
    bench b(GetParam(), "native");
    ASSERT_TRUE(b.error.empty()) << b.error;
    if (b.caps().inject_size < 512)
        return;
    iov = {b.source.data(), 512};
    desc = desc_of(*b.source_mr);
    detail::fabric_post p = write_of(b, &iov, &desc, 1, 512);
    p.flags = detail::post_inject;
    ASSERT_TRUE(b.post(p));
    EXPECT_TRUE(b.completes());
    (void)native_inject;
}

TEST_P(verbs_rules, immediate_data_wider_than_4_bytes_fails) {
    iovec iov{};
    void* desc = nullptr;
    breaks(
        [&](bench& b) {
            iov = {b.source.data(), 64};
            desc = desc_of(*b.source_mr);
            detail::fabric_post p = write_of(b, &iov, &desc, 1, 64);
            p.flags = detail::post_remote_data;
            p.data = std::uint64_t{1} << 40;
            return p;
        },
        "(cq_data_size)", false);
}

TEST_P(verbs_rules, a_remote_key_wider_than_32_bits_fails) {
    iovec iov{};
    void* desc = nullptr;
    breaks(
        [&](bench& b) {
            iov = {b.source.data(), 64};
            desc = desc_of(*b.source_mr);
            detail::fabric_post p = write_of(b, &iov, &desc, 1, 64);
            if (b.caps().rules == provider_rules::verbs)
                p.remote.key |= std::uint64_t{1} << 40;  // natively: the region's own key
            return p;
        },
        "(mr_key_size)");
}

TEST_P(verbs_rules, a_post_without_a_context_fails) {
    bench b(GetParam(), "verbs");
    if (!b.error.empty())
        GTEST_SKIP() << GetParam() << ": " << b.error;
    iovec iov{b.source.data(), 64};
    void* desc = desc_of(*b.source_mr);
    detail::fabric_post p = write_of(b, &iov, &desc, 1, 64);
    p.context = nullptr;
    const ssize_t ret = detail::door_post(b.impl(), p);
    EXPECT_EQ(ret, -detail::fabric_errno::invalid);
    EXPECT_NE(detail::fabric_rules::take_message().find("without a context"), std::string::npos);
}

TEST_P(verbs_rules, a_misaligned_atomic_fails) {
    breaks(
        [&](bench& b) {
            detail::fabric_post p{.kind = detail::post_kind::fetch_add,
                                  .remote = b.remote_at(4, 1),
                                  .operands = nullptr,
                                  .result = b.fetched.data(),
                                  .result_desc = desc_of(*b.result_mr)};
            return p;
        },
        "8-byte aligned", false);
}

TEST_P(verbs_rules, keys_are_the_providers_and_a_requested_key_fails) {
    bench b(GetParam(), "verbs");
    if (!b.error.empty())
        GTEST_SKIP() << GetParam() << ": " << b.error;
    EXPECT_TRUE(has_all(b.caps().mr_mode, mr_mode::local | mr_mode::prov_key));
    EXPECT_LE(b.remote->key(), 0xffffffffu);
    EXPECT_NE(b.remote->key(), 0u);
    detail::domain_impl& d = *detail::impl_of(b.pair->client_domain);
    detail::mr_handle mr;
    EXPECT_EQ(detail::mr_reg(d.domain.get(), b.local.data(), 64, detail::mr_access_send, 12345, mr),
              -detail::fabric_errno::invalid);
    EXPECT_FALSE(mr);
    EXPECT_NE(detail::fabric_rules::take_message().find("the provider chooses the keys"),
              std::string::npos);
    // Natively the same registration takes the requested key.
    bench n(GetParam(), "native");
    ASSERT_TRUE(n.error.empty()) << n.error;
    if (has_all(n.caps().mr_mode, mr_mode::prov_key))
        return;
    detail::domain_impl& nd = *detail::impl_of(n.pair->client_domain);
    EXPECT_EQ(
        detail::mr_reg(nd.domain.get(), n.local.data(), 64, detail::mr_access_send, 12345, mr), 0);
}

TEST_P(verbs_rules, caps_report_verbs_limits) {
    bench b(GetParam(), "verbs");
    if (!b.error.empty())
        GTEST_SKIP() << GetParam() << ": " << b.error;
    const provider_caps& c = b.caps();
    EXPECT_LE(c.iov_limit, 4u);
    EXPECT_EQ(c.rma_iov_limit, 1u);
    EXPECT_LE(c.cq_data_size, 4u);
    EXPECT_LE(c.inject_size, 256u);
    EXPECT_LE(c.max_msg_size, std::size_t{1} << 30);
    if (!is_rdm(GetParam())) {
        EXPECT_LE(c.cm_data_size, 55u);
    }
}

// The server's completions until `n` arrived or 10 s passed (the client's CQ is read too: its
// writes and sends complete there).
std::vector<completion> server_completions(bench& b, std::size_t n) {
    std::vector<completion> got;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    completion buf[8];
    while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
        (void)b.client().cq().poll(buf);
        auto r = b.pair->server->cq().poll(buf);
        if (r)
            got.insert(got.end(), buf, buf + *r);
    }
    return got;
}

// verbs delivers a write with immediate data into a posted receive (FI_RX_CQ_DATA): under the
// mode each one takes a posted receive, and a write (or a message) that finds none fails its
// completion at the target, naming the rule. Natively the same writes need no receive.
TEST_P(verbs_rules, writes_with_immediate_data_take_posted_receives) {
    for (const char* rules : {"verbs", "native"}) {
        SCOPED_TRACE(rules);
        const bool verbs = std::strcmp(rules, "verbs") == 0;
        bench b(GetParam(), rules);
        if (!b.error.empty())
            GTEST_SKIP() << GetParam() << ": " << b.error;
        if (b.caps().cq_data_size == 0)
            GTEST_SKIP() << GetParam() << ": no immediate data";
        EXPECT_EQ(b.caps().rx_cq_data, verbs || b.pair->server_domain.caps().rx_cq_data);
        std::vector<std::byte> in(64);
        auto in_mr = must(memory_region::create(b.pair->server_domain, in, usage::receive));
        int recv_ctx = 0;
        REMORA_ASSERT_OK(b.pair->server->recv(in_mr, 0, 64, {.context = &recv_ctx}));
        const unsigned long before = detail::fabric_rules::violations();
        // Two writes with immediate data: the first takes the one receive, the second finds none.
        for (std::uint64_t imm : {1u, 2u}) {
            REMORA_ASSERT_OK(
                b.client().write_with_imm(*b.remote, 8 * imm, *b.source_mr, 0, 8, imm));
            auto got = server_completions(b, 1);
            ASSERT_EQ(got.size(), 1u);
            EXPECT_EQ(got[0].op, op::remote_write);
            EXPECT_EQ(got[0].imm, imm);
            if (verbs && imm == 2) {
                EXPECT_TRUE(got[0].status == errc::invalid_argument) << got[0].status.message();
            } else {
                EXPECT_TRUE(got[0].ok()) << got[0].status.message();
            }
        }
        // A message now: verbs' only receive went to the first write, so it has none either.
        REMORA_ASSERT_OK(b.client().send(*b.half_mr, 0, 16));
        auto got = server_completions(b, 1);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].op, op::recv);
        EXPECT_EQ(got[0].context, &recv_ctx);
        if (verbs) {
            EXPECT_TRUE(got[0].status == errc::invalid_argument) << got[0].status.message();
            EXPECT_EQ(detail::fabric_rules::violations(), before + 2);
        } else {
            EXPECT_TRUE(got[0].ok()) << got[0].status.message();
            EXPECT_EQ(detail::fabric_rules::violations(), before);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(providers, verbs_rules,
                         testing::Values("tcp", "sockets", "rdm:shm", "rdm:tcp;ofi_rxm"),
                         provider_name);

// Connection private data: rdma_cm over InfiniBand leaves 56 bytes in a connect request (55 for
// the application under libfabric's verbs).
class verbs_rules_msg : public testing::TestWithParam<std::string> {};

TEST_P(verbs_rules_msg, private_data_past_the_connect_limit_fails) {
    std::vector<std::byte> data(60, std::byte{7});
    {
        rules_env env("verbs");
        auto p = connect_pair(GetParam(), {}, {}, data);
        ASSERT_FALSE(p) << "60 bytes of private data connected under verbs rules";
        EXPECT_TRUE(p.error() == errc::invalid_argument || p.error() == errc::too_large)
            << p.error().what();
        auto ok = connect_pair(GetParam(), {}, {}, std::span(data).first(55));
        EXPECT_TRUE(ok) << ok.error().what();
    }
    rules_env env("native");
    auto p = connect_pair(GetParam(), {}, {}, data);
    EXPECT_TRUE(p) << p.error().what();
}

TEST_P(verbs_rules_msg, admission_tokens_fit_and_a_longer_identity_fails_clearly) {
    rules_env env("verbs");
    auto d = must(domain::open({.provider = GetParam()}));
    auto key = must(admission_key::generate());
    EXPECT_EQ(admission_connect_room(d), 55u - admission_token_overhead);
    // A 64-byte identity: refused by connect_admitted before anything is sent, naming both sizes.
    const unsigned long before = detail::fabric_rules::violations();
    auto c = connect_admitted(d, "127.0.0.1", 1, key, std::string(64, 'x'));
    ASSERT_ERRC(c, errc::invalid_argument);
    EXPECT_NE(c.error().message().find("102 bytes"), std::string::npos) << c.error().what();
    EXPECT_NE(c.error().message().find("55 bytes"), std::string::npos) << c.error().what();
    EXPECT_EQ(detail::fabric_rules::violations(), before);  // the seam never saw it
    // A token that fits passes the seam: the connect fails only because nobody listens there.
    const std::array<std::byte, 2> depth{std::byte{8}, std::byte{0}};
    auto fits = connect_admitted(d, "127.0.0.1", 1, key, std::string(15, 'x'), {}, depth);
    ASSERT_FALSE(fits);
    EXPECT_FALSE(fits.error() == errc::invalid_argument) << fits.error().what();
    EXPECT_EQ(detail::fabric_rules::violations(), before);
}

// efa's profile (provider_rules::efa, REMORA_RULES=efa) on the RDM providers: the rules it shares
// with verbs fail naming "efa rules", its own limits replace verbs' (8 bytes of immediate data
// that take no receive, an inject size of 3912 bytes), and MSG domains are refused.
class efa_rules : public testing::TestWithParam<std::string> {
  protected:
    // A write of `bytes` from the client's source region with `flags` and immediate data `imm`.
    static detail::fabric_post write_from(bench& b, iovec& iov, void*& desc, std::size_t bytes,
                                          std::uint64_t flags, std::uint64_t imm = 0) {
        iov = {b.source.data(), bytes};
        desc = desc_of(*b.source_mr);
        detail::fabric_post p = write_of(b, &iov, &desc, 1, bytes);
        p.flags = flags;
        p.data = imm;
        return p;
    }
};

TEST_P(efa_rules, caps_report_efa_limits) {
    bench b(GetParam(), "efa");
    if (!b.error.empty())
        GTEST_SKIP() << GetParam() << ": " << b.error;
    bench n(GetParam(), "native");
    ASSERT_TRUE(n.error.empty()) << n.error;
    const provider_caps& c = b.caps();
    EXPECT_EQ(c.rules, provider_rules::efa);
    EXPECT_STREQ(to_string(c.rules), "efa");
    EXPECT_LE(c.iov_limit, 4u);
    EXPECT_EQ(c.rma_iov_limit, 1u);
    EXPECT_EQ(c.cq_data_size, std::min<std::size_t>(n.caps().cq_data_size, 8));
    EXPECT_EQ(c.inject_size, std::min<std::size_t>(n.caps().inject_size, 3912));
    EXPECT_EQ(c.max_msg_size, n.caps().max_msg_size);  // efa's RDM has no message size limit
    EXPECT_LE(c.mr_key_size, 4u);
    EXPECT_TRUE(has_all(c.mr_mode, mr_mode::local | mr_mode::prov_key));
    EXPECT_EQ(c.rx_cq_data, n.caps().rx_cq_data);  // efa's immediate data takes no receive
    EXPECT_LE(b.remote->key(), 0xffffffffu);
}

TEST_P(efa_rules, a_shared_rule_fails_naming_efa) {
    bench b(GetParam(), "efa");
    if (!b.error.empty())
        GTEST_SKIP() << GetParam() << ": " << b.error;
    iovec iov{b.source.data(), 64};
    void* desc = nullptr;
    const unsigned long before = detail::fabric_rules::violations();
    auto r = b.post(write_of(b, &iov, &desc, 1, 64));
    ASSERT_FALSE(r) << "a write without a descriptor was posted under efa rules";
    EXPECT_TRUE(r.error() == errc::invalid_argument) << r.error().what();
    EXPECT_NE(r.error().message().find("efa rules: "), std::string::npos) << r.error().what();
    EXPECT_NE(r.error().message().find("no local descriptor"), std::string::npos)
        << r.error().what();
    EXPECT_EQ(detail::fabric_rules::violations(), before + 1);
}

// 8 bytes of immediate data: efa carries them, verbs refuses them.
TEST_P(efa_rules, eight_bytes_of_immediate_data_pass_where_verbs_refuses) {
    const std::uint64_t imm = 0x0102030405060708u;
    iovec iov{};
    void* desc = nullptr;
    {
        bench b(GetParam(), "efa");
        if (!b.error.empty())
            GTEST_SKIP() << GetParam() << ": " << b.error;
        if (b.caps().cq_data_size < 8)
            GTEST_SKIP() << GetParam() << ": " << b.caps().cq_data_size << " bytes of data";
        ASSERT_TRUE(b.post(write_from(b, iov, desc, 64, detail::post_remote_data, imm)));
        auto got = server_completions(b, 1);  // before completes(), which reads the server's too
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].op, op::remote_write);
        EXPECT_EQ(got[0].imm, imm);
        EXPECT_TRUE(got[0].ok()) << got[0].status.message();
        EXPECT_TRUE(b.completes());
    }
    bench v(GetParam(), "verbs");
    ASSERT_TRUE(v.error.empty()) << v.error;
    auto r = v.post(write_from(v, iov, desc, 64, detail::post_remote_data, imm));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message().find("verbs rules: "), std::string::npos) << r.error().what();
    EXPECT_NE(r.error().message().find("(cq_data_size)"), std::string::npos) << r.error().what();
}

// efa's inject size (3912 bytes) fires where verbs' (256) would, and allows what verbs does not.
TEST_P(efa_rules, an_inject_past_efas_size_fails_and_one_past_verbs_passes) {
    iovec iov{};
    void* desc = nullptr;
    bench b(GetParam(), "efa");
    if (!b.error.empty())
        GTEST_SKIP() << GetParam() << ": " << b.error;
    const unsigned long before = detail::fabric_rules::violations();
    auto r = b.post(write_from(b, iov, desc, 4000, detail::post_inject));
    ASSERT_FALSE(r) << "a 4000-byte inject was posted under efa rules";
    EXPECT_NE(r.error().message().find("efa injects at most 3912 (inject_size)"), std::string::npos)
        << r.error().what();
    EXPECT_EQ(detail::fabric_rules::violations(), before + 1);
    if (b.caps().inject_size < 512)
        return;  // the provider itself injects less
    ASSERT_TRUE(b.post(write_from(b, iov, desc, 512, detail::post_inject)));
    EXPECT_TRUE(b.completes());
    EXPECT_EQ(detail::fabric_rules::violations(), before + 1);
}

// efa hands a write's immediate data to the target without a receive (no FI_RX_CQ_DATA): two
// writes and a message share the one posted receive's account without a violation.
TEST_P(efa_rules, writes_with_immediate_data_take_no_receive) {
    bench b(GetParam(), "efa");
    if (!b.error.empty())
        GTEST_SKIP() << GetParam() << ": " << b.error;
    if (b.caps().cq_data_size == 0)
        GTEST_SKIP() << GetParam() << ": no immediate data";
    std::vector<std::byte> in(64);
    auto in_mr = must(memory_region::create(b.pair->server_domain, in, usage::receive));
    int recv_ctx = 0;
    REMORA_ASSERT_OK(b.pair->server->recv(in_mr, 0, 64, {.context = &recv_ctx}));
    const unsigned long before = detail::fabric_rules::violations();
    for (std::uint64_t imm : {1u, 2u}) {
        REMORA_ASSERT_OK(b.client().write_with_imm(*b.remote, 8 * imm, *b.source_mr, 0, 8, imm));
        auto got = server_completions(b, 1);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].imm, imm);
        EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    }
    REMORA_ASSERT_OK(b.client().send(*b.half_mr, 0, 16));
    auto got = server_completions(b, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].op, op::recv);
    EXPECT_EQ(got[0].context, &recv_ctx);
    EXPECT_TRUE(got[0].ok()) << got[0].status.message();
    EXPECT_EQ(detail::fabric_rules::violations(), before);
}

INSTANTIATE_TEST_SUITE_P(providers, efa_rules, testing::Values("rdm:shm", "rdm:tcp;ofi_rxm"),
                         provider_name);

// efa has no MSG endpoint: a MSG domain under its rules is refused when it opens, naming the
// rule, whether the rules come from domain_config or REMORA_RULES; an RDM domain opens.
TEST(efa_rules_msg, a_msg_domain_is_refused_naming_the_rule) {
    auto d = domain::open({.provider = "tcp", .rules = provider_rules::efa});
    ASSERT_ERRC(d, errc::not_supported);
    EXPECT_NE(d.error().message().find("efa rules: "), std::string::npos) << d.error().what();
    EXPECT_NE(d.error().message().find("(MSG)"), std::string::npos) << d.error().what();
    {
        rules_env env("efa");
        auto e = domain::open({.provider = "sockets"});
        ASSERT_ERRC(e, errc::not_supported);
        EXPECT_NE(e.error().message().find("efa rules: "), std::string::npos) << e.error().what();
        auto r = domain::open({.provider = "shm", .endpoint = endpoint_type::rdm});
        ASSERT_TRUE(r) << r.error().what();
        EXPECT_EQ(r->caps().rules, provider_rules::efa);
    }
    auto n = domain::open({.provider = "tcp", .rules = provider_rules::native});
    EXPECT_TRUE(n) << n.error().what();
}

TEST(verbs_rules_env, an_unknown_value_fails_domain_open) {
    rules_env env("infiniband");
    auto d = domain::open({.provider = "tcp"});
    ASSERT_ERRC(d, errc::invalid_argument);
    EXPECT_NE(d.error().message().find("REMORA_RULES"), std::string::npos);
    auto n = domain::open({.provider = "tcp", .rules = provider_rules::native});
    EXPECT_TRUE(n) << n.error().what();
}

INSTANTIATE_TEST_SUITE_P(providers, verbs_rules_msg, testing::Values("tcp", "sockets"),
                         provider_name);

}  // namespace
}  // namespace remora::test

// SPDX-License-Identifier: BSD-3-Clause
/* tests/c/capi_ext_test.c — the C API's publish, receive pools, registration cache,
 * write_or_copy, admission (the attach handshake of RDM peers too), REMORA_F_MORE, the log
 * function, and callback records of a connection deleted before they ran, on real providers over
 * loopback, in C11.
 *
 *   capi_ext_test NAME    runs one test (ctest runs each on tcp and on sockets: FI_PROVIDER)
 *   capi_ext_test rdm_admission PROVIDER   the RDM attach handshake on shm or tcp;ofi_rxm
 *   capi_ext_test rdm_write_or_copy PROVIDER   remora_write_or_copy between RDM peers
 *
 * callbacks_on_delete proves itself under AddressSanitizer (scripts/test.sh --sanitize): a record
 * left behind is a leak there.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, clock_gettime */

#include <stdalign.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "capi_check.h"

enum { REGION = 4096 };

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A connected pair with a server region described in the accept data (the client parses it). */
static struct {
    struct pair p;
    alignas(64) unsigned char server_mem[REGION];
    alignas(64) unsigned char client_mem[REGION];
    remora_memory_region *server_mr, *client_mr;
    remora_remote_region* remote;
    remora_target_service* svc;
} rp;

static void open_pair(const struct remora_connection_config* scfg,
                      const struct remora_connection_config* ccfg, bool service, bool serve) {
    unsigned char wire[REMORA_DESCRIPTOR_SIZE];
    remora_remote_region* desc = NULL;
    const void* peer = NULL;
    size_t peer_len = 0;
    pair_domains(&rp.p);
    OK(remora_memory_region_create(rp.p.sdom, rp.server_mem, REGION, REMORA_USAGE_ALL,
                                   &rp.server_mr));
    OK(remora_memory_region_create(rp.p.cdom, rp.client_mem, REGION, REMORA_USAGE_ALL,
                                   &rp.client_mr));
    if (service) {
        OK(remora_target_service_create(&rp.svc));
        OK(remora_target_service_expose(rp.svc, rp.server_mr, NULL, &desc));
    } else {
        OK(remora_memory_region_describe(rp.server_mr, 0, 0, &desc));
    }
    OK(remora_remote_region_serialize(desc, wire, sizeof wire));
    remora_remote_region_delete(desc);
    pair_connect(&rp.p, scfg, ccfg, wire, sizeof wire, NULL, 0);
    OK(remora_connection_peer_private_data(rp.p.client, &peer, &peer_len));
    CHECK(peer_len >= sizeof wire);
    OK(remora_remote_region_parse(peer, sizeof wire, &rp.remote));
    if (service && serve) {
        OK(remora_target_service_serve(rp.svc, rp.p.server));
    }
}

static void close_pair(void) {
    remora_remote_region_delete(rp.remote);
    remora_connection_delete(rp.p.client);
    remora_connection_delete(rp.p.server);
    rp.p.client = rp.p.server = NULL;
    remora_target_service_delete(rp.svc);
    rp.svc = NULL;
    remora_memory_region_delete(rp.server_mr);
    remora_memory_region_delete(rp.client_mr);
    pair_close(&rp.p);
}

static const struct remora_connection_config target_cfg = {
    .size = sizeof(struct remora_connection_config), .progress_thread = true};

/* ---- callback records of a connection deleted before they ran */

static int callbacks_ran;
static void count_callback(const struct remora_completion* c) {
    (void)c;
    ++callbacks_ran; /* runs on this thread: nothing else reads the client's CQ */
}

static void test_callbacks_on_delete(void) {
    struct remora_op_options o = {.size = sizeof o, .callback = count_callback};
    int i;
    open_pair(&target_cfg, NULL, false, false);
    for (i = 0; i < 16; ++i) {
        o.context = &rp.client_mem[i];
        OK(remora_write_ex(rp.p.client, rp.remote, (uint64_t)i * 8, rp.client_mr, 0, 8, &o));
    }
    /* Deleted with its callbacks unreaped: they are dropped and their records freed (a leak
     * under ASan otherwise). */
    remora_connection_delete(rp.p.client);
    rp.p.client = NULL;
    CHECK(callbacks_ran == 0);
    close_pair();
}

/* ---- REMORA_F_MORE */

static void test_more(void) {
    remora_completion_queue* cq = NULL;
    int i;
    open_pair(&target_cfg, NULL, false, false);
    OK(remora_connection_cq(rp.p.client, &cq));
    memcpy(rp.client_mem, "batched!", 8);
    /* A burst of four writes: the first three say another post follows. */
    for (i = 0; i < 4; ++i) {
        OK(remora_write(rp.p.client, rp.remote, (uint64_t)i * 8, rp.client_mr, 0, 8,
                        i < 3 ? REMORA_F_MORE : 0, &rp.client_mem[i]));
    }
    for (i = 0; i < 4; ++i) {
        struct remora_completion c;
        OK(remora_completion_queue_next(cq, T_WAIT_MS, &c));
        CHECK(c.op == REMORA_OP_WRITE && c.status == 0);
    }
    /* A read with MORE, ended by a send... of nothing: a read without it ends the burst. */
    OK(remora_read(rp.p.client, rp.client_mr, 100, rp.remote, 0, 8, REMORA_F_MORE, NULL));
    OK(remora_read(rp.p.client, rp.client_mr, 200, rp.remote, 24, 8, 0, NULL));
    expect_completion(cq, REMORA_OP_READ, NULL);
    expect_completion(cq, REMORA_OP_READ, NULL);
    CHECK(memcmp(rp.client_mem + 100, "batched!", 8) == 0);
    CHECK(memcmp(rp.client_mem + 200, "batched!", 8) == 0);
    CHECK(memcmp(rp.server_mem + 24, "batched!", 8) == 0);
    /* Unknown bits are still refused. */
    EXPECT_CODE(remora_write(rp.p.client, rp.remote, 0, rp.client_mr, 0, 8, 1u << 7, NULL),
                REMORA_E_INVALID, "unknown flag bits");
    close_pair();
}

/* ---- publish */

static void test_publish(void) {
    const struct remora_persistence_config pcfg = {.size = sizeof pcfg, .service_depth = 4};
    const struct remora_connection_config scfg = {
        .size = sizeof scfg, .progress_thread = true, .persist = &pcfg};
    const struct remora_connection_config ccfg = {.size = sizeof ccfg, .persist = &pcfg};
    remora_completion_queue* cq = NULL;
    struct remora_remote_segment seg[2];
    struct remora_completion c;
    uint64_t flag = 0;
    open_pair(&scfg, &ccfg, true, true);
    OK(remora_connection_cq(rp.p.client, &cq));
    memcpy(rp.client_mem, "record-one|record-two", 21);
    seg[0] = (struct remora_remote_segment){rp.remote, 64, 11};
    seg[1] = (struct remora_remote_segment){rp.remote, 128, 10};
    OK(remora_publish(rp.p.client, seg, 2, rp.client_mr, 0, rp.remote, 8, 42,
                      REMORA_FLUSH_VISIBILITY, REMORA_FLUSH_AUTOMATIC, NULL));
    /* The flush's or the atomic's reply may complete on the CQ, and the CQ has them all. */
    OK(remora_completion_queue_next(cq, T_WAIT_MS, &c));
    CHECK(c.op == REMORA_OP_PUBLISH && c.status == 0 && c.bytes == 21);
    CHECK(memcmp(rp.server_mem + 64, "record-one|", 11) == 0);
    CHECK(memcmp(rp.server_mem + 128, "record-two", 10) == 0);
    memcpy(&flag, rp.server_mem + 8, 8);
    CHECK(flag == 42);
    /* Checked before anything is taken: a misaligned flag word, a bad type. */
    EXPECT_CODE(remora_publish(rp.p.client, seg, 2, rp.client_mr, 0, rp.remote, 8, 1, 99,
                               REMORA_FLUSH_AUTOMATIC, NULL),
                REMORA_E_INVALID, "flush type 99");
    EXPECT_CODE(remora_publish(rp.p.client, seg, 2, rp.client_mr, 0, NULL, 8, 1,
                               REMORA_FLUSH_VISIBILITY, REMORA_FLUSH_AUTOMATIC, NULL),
                REMORA_E_INVALID, "flag is NULL");
    close_pair();
}

/* ---- receive pools */

static void* accept_one(void* arg) {
    struct pair* p = arg;
    remora_connection_request* req = NULL;
    p->accept_rc = remora_listener_get_request(p->lst, T_WAIT_MS, &req);
    if (p->accept_rc == 0) {
        p->accept_rc = remora_connection_request_accept(req, p->scfg, NULL, 0, &p->server);
        remora_connection_request_delete(req);
    }
    return NULL;
}

static void test_receive_pool(void) {
    const struct remora_receive_pool_config pcfg = {
        .size = sizeof pcfg, .buffers = 4, .buffer_size = 64, .per_connection = 2};
    struct remora_connection_config scfg = {.size = sizeof scfg, .progress_thread = true, .tag = 0};
    remora_receive_pool* pool = NULL;
    remora_connection* clients[2] = {NULL, NULL};
    remora_connection* servers[2] = {NULL, NULL};
    remora_completion_queue* cq = NULL;
    struct remora_receive_pool_stats st;
    remora_message* m = NULL;
    const void* data = NULL;
    size_t len = 0;
    uint64_t tag = 0;
    uint16_t port = 0;
    int i, seen_tags = 0;
    pair_domains(&rp.p);
    OK(remora_receive_pool_create(rp.p.sdom, &pcfg, &pool));
    OK(remora_memory_region_create(rp.p.cdom, rp.client_mem, REGION, REMORA_USAGE_ALL,
                                   &rp.client_mr));
    OK(remora_listener_port(rp.p.lst, &port));
    for (i = 0; i < 2; ++i) {
        pthread_t t;
        scfg.tag = 100 + (uint64_t)i;
        rp.p.scfg = &scfg;
        CHECK(pthread_create(&t, NULL, accept_one, &rp.p) == 0);
        OK(remora_connect(rp.p.cdom, "127.0.0.1", port, NULL, NULL, 0, &clients[i]));
        CHECK(pthread_join(t, NULL) == 0);
        OK(rp.p.accept_rc);
        servers[i] = rp.p.server;
        rp.p.server = NULL;
        OK(remora_receive_pool_attach(pool, servers[i]));
    }
    EXPECT_CODE(remora_receive_pool_attach(pool, servers[0]), REMORA_E_BAD_STATE, "");
    OK(remora_receive_pool_stats(pool, &st));
    CHECK(st.buffers == 4 && st.connections == 2);
    /* One message from each client, taken in arrival order from either connection. */
    for (i = 0; i < 2; ++i) {
        rp.client_mem[i] = (unsigned char)('a' + i);
        OK(remora_send(clients[i], rp.client_mr, (size_t)i, 1, 0, NULL));
        OK(remora_connection_cq(clients[i], &cq));
        expect_completion(cq, REMORA_OP_SEND, NULL);
    }
    for (i = 0; i < 2; ++i) {
        bool has_imm = true;
        OK(remora_receive_pool_next(pool, T_WAIT_MS, &m));
        OK(remora_message_data(m, &data, &len));
        OK(remora_message_info(m, &tag, NULL, &has_imm));
        CHECK(len == 1 && !has_imm && (tag == 100 || tag == 101));
        CHECK(*(const unsigned char*)data == (unsigned char)('a' + (int)(tag - 100)));
        seen_tags |= 1 << (int)(tag - 100);
        OK(remora_receive_pool_stats(pool, &st));
        CHECK(st.held >= 1); /* this one (the next may be delivered already) */
        remora_message_delete(m);
    }
    CHECK(seen_tags == 3);
    OK(remora_receive_pool_stats(pool, &st));
    CHECK(st.received == 2 && st.held == 0);
    EXPECT_CODE(remora_receive_pool_next(pool, 0, &m), REMORA_E_TIMED_OUT, "");
    EXPECT_CODE(remora_receive_pool_next(pool, -1, &m), REMORA_E_INVALID, "timeout_ms");
    OK(remora_receive_pool_detach(pool, servers[1]));
    remora_receive_pool_delete(pool);
    for (i = 0; i < 2; ++i) {
        remora_connection_delete(clients[i]);
        remora_connection_delete(servers[i]);
    }
    remora_memory_region_delete(rp.client_mr);
    pair_close(&rp.p);
}

/* ---- registration cache */

static void test_registration_cache(void) {
    remora_registration_cache* cache = NULL;
    remora_cached_region *a = NULL, *b = NULL;
    const remora_memory_region* mr = NULL;
    struct remora_registration_cache_stats st;
    remora_completion_queue* cq = NULL;
    struct remora_remote_segment seg;
    size_t off = 99;
    static unsigned char data[2 * REGION];
    open_pair(&target_cfg, NULL, false, false);
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_registration_cache_create(rp.p.cdom, 0, &cache));
    OK(remora_registration_cache_get(cache, data, REGION, REMORA_USAGE_WRITE_SOURCE, &a));
    OK(remora_registration_cache_get(cache, data + 16, 32, REMORA_USAGE_WRITE_SOURCE, &b));
    OK(remora_registration_cache_stats(cache, &st));
    CHECK(st.misses == 1 && st.hits == 1 && st.entries == 1);
    OK(remora_cached_region_region(b, &mr, &off));
    CHECK(off == 16);
    memcpy(data + 16, "from the cache", 14);
    OK(remora_write(rp.p.client, rp.remote, 0, mr, off, 14, 0, NULL));
    expect_completion(cq, REMORA_OP_WRITE, NULL);
    /* Unregistered memory through the cache: registered once more, held by the operation. */
    memcpy(data + REGION, "gathered", 8);
    seg = (struct remora_remote_segment){rp.remote, 512, 8};
    OK(remora_gather_write_cached(rp.p.client, &seg, 1, data + REGION, 8, cache, NULL));
    expect_completion(cq, REMORA_OP_WRITE, NULL);
    OK(remora_read(rp.p.client, rp.client_mr, 0, rp.remote, 0, REGION, 0, NULL));
    expect_completion(cq, REMORA_OP_READ, NULL);
    CHECK(memcmp(rp.client_mem, "from the cache", 14) == 0);
    CHECK(memcmp(rp.client_mem + 512, "gathered", 8) == 0);
    /* and read back into unregistered memory the same way */
    memset(data + REGION + 64, 0, 10);
    OK(remora_scatter_read_cached(rp.p.client, &seg, 1, data + REGION + 64, 8, cache, NULL));
    expect_completion(cq, REMORA_OP_READ, NULL);
    CHECK(memcmp(data + REGION + 64, "gathered", 8) == 0 && data[REGION + 72] == 0);
    EXPECT_CODE(remora_scatter_read_cached(rp.p.client, &seg, 1, NULL, 8, cache, NULL),
                REMORA_E_INVALID, "dst is NULL");
    EXPECT_CODE(remora_registration_cache_get(cache, data, 0, REMORA_USAGE_WRITE_SOURCE, &a),
                REMORA_E_INVALID, "len is 0");
    EXPECT_CODE(remora_registration_cache_get(cache, data, 8, 1u << 12, &a), REMORA_E_INVALID,
                "REMORA_USAGE_");
    remora_cached_region_delete(a);
    remora_cached_region_delete(b);
    OK(remora_registration_cache_invalidate(cache, data, sizeof data));
    OK(remora_registration_cache_stats(cache, &st));
    CHECK(st.entries == 0);
    remora_registration_cache_delete(cache);
    close_pair();
}

/* ---- admission */

struct admit_server {
    struct pair* p;
    remora_admission_gate* gate;
    int admit_rc;
    int refusal;
    char identity[80];
    char payload[16];
};

static void* admit_thread(void* arg) {
    struct admit_server* s = arg;
    remora_connection_request* req = NULL;
    remora_admitted_peer* peer = NULL;
    const char* id = NULL;
    const void* pl = NULL;
    size_t pl_len = 0;
    s->p->accept_rc = remora_listener_get_request(s->p->lst, T_WAIT_MS, &req);
    if (s->p->accept_rc != 0) {
        return NULL;
    }
    s->admit_rc = remora_admission_gate_admit(s->gate, req, &peer);
    s->refusal = remora_last_admission_refusal();
    if (s->admit_rc == 0) {
        OK(remora_admitted_peer_identity(peer, &id));
        OK(remora_admitted_peer_payload(peer, &pl, &pl_len));
        snprintf(s->identity, sizeof s->identity, "%s", id);
        CHECK(pl_len < sizeof s->payload);
        memcpy(s->payload, pl, pl_len);
        remora_admitted_peer_delete(peer);
        s->p->accept_rc = remora_connection_request_accept(req, NULL, NULL, 0, &s->p->server);
    }
    remora_connection_request_delete(req);
    return NULL;
}

static void test_admission(void) {
    remora_admission_key *key = NULL, *other = NULL, *loaded = NULL;
    struct admit_server s = {.p = &rp.p};
    unsigned char raw[REMORA_ADMISSION_KEY_SIZE];
    char dir[64] = "/tmp/remora-capi-key-XXXXXX", path[96];
    pthread_t t;
    uint16_t port = 0;
    struct remora_provider_caps caps = {.size = sizeof caps};
    size_t room = 0;
    unsigned char* long_payload = NULL;
    int rc;
    memset(raw, 7, sizeof raw);
    pair_domains(&rp.p);
    OK(remora_admission_key_generate(&key));
    OK(remora_admission_key_from_bytes(raw, sizeof raw, &other));
    EXPECT_CODE(remora_admission_key_from_bytes(raw, 31, &loaded), REMORA_E_INVALID, "");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/key", dir);
    OK(remora_admission_key_save(key, path));
    OK(remora_admission_key_load(path, &loaded));
    EXPECT_CODE(remora_admission_key_save(key, path), REMORA_E_INVALID, "");
    OK(remora_admission_gate_create(loaded, NULL, &s.gate));
    remora_admission_key_delete(loaded); /* the gate keeps its own copy */
    OK(remora_listener_port(rp.p.lst, &port));
    /* The right key: admitted, with its identity and payload. */
    CHECK(pthread_create(&t, NULL, admit_thread, &s) == 0);
    OK(remora_connect_admitted(rp.p.cdom, "127.0.0.1", port, key, "client-1", NULL, "hi", 2,
                               &rp.p.client));
    CHECK(pthread_join(t, NULL) == 0);
    OK(s.admit_rc);
    OK(rp.p.accept_rc);
    CHECK(strcmp(s.identity, "client-1") == 0 && memcmp(s.payload, "hi", 2) == 0);
    remora_connection_delete(rp.p.client);
    remora_connection_delete(rp.p.server);
    rp.p.client = rp.p.server = NULL;
    /* Another key: refused on both sides, with the reason. */
    CHECK(pthread_create(&t, NULL, admit_thread, &s) == 0);
    rc = remora_connect_admitted(rp.p.cdom, "127.0.0.1", port, other, "intruder", NULL, NULL, 0,
                                 &rp.p.client);
    CHECK(rc == REMORA_E_REJECTED);
    CHECK(remora_last_admission_refusal() == REMORA_ADMISSION_BAD_PROOF);
    CHECK(strstr(remora_last_error_message(), "refused admission") != NULL);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(s.admit_rc == REMORA_E_ACCESS_DENIED && s.refusal == REMORA_ADMISSION_BAD_PROOF);
    /* Identity and payload beyond the connect data's room: refused before anything is sent. */
    OK(remora_domain_caps(rp.p.cdom, &caps));
    OK(remora_admission_connect_room(rp.p.cdom, &room));
    CHECK(room == caps.cm_data_size - REMORA_ADMISSION_TOKEN_OVERHEAD);
    long_payload = calloc(room, 1);
    CHECK(long_payload != NULL);
    EXPECT_CODE(remora_connect_admitted(rp.p.cdom, "127.0.0.1", port, key, "x", NULL, long_payload,
                                        room, &rp.p.client),
                REMORA_E_INVALID, "does not fit");
    CHECK(rp.p.client == NULL);
    free(long_payload);
    /* A failure that is not a refusal names none. */
    EXPECT_CODE(remora_admission_gate_check(s.gate, NULL, 3, NULL), REMORA_E_INVALID, "token");
    CHECK(remora_last_admission_refusal() == REMORA_ADMISSION_NONE);
    remora_admission_gate_delete(s.gate);
    remora_admission_key_delete(key);
    remora_admission_key_delete(other);
    unlink(path);
    rmdir(dir);
    pair_close(&rp.p);
}

/* ---- the attach handshake of RDM peers (provider: argv[2], "shm" or "tcp;ofi_rxm") */

static const char* rdm_provider = "shm";

/* Two RDM peers in domains of their own, attached to each other: `target` and `client`. */
static void rdm_peers(remora_domain* tdom, remora_domain* cdom, remora_connection** target,
                      remora_connection** client) {
    const void *ta = NULL, *ca = NULL;
    size_t ta_len = 0, ca_len = 0;
    OK(remora_open_peer(tdom, NULL, target));
    OK(remora_open_peer(cdom, NULL, client));
    OK(remora_connection_local_address(*target, &ta, &ta_len));
    OK(remora_connection_local_address(*client, &ca, &ca_len));
    OK(remora_connection_attach(*client, ta, ta_len));
    OK(remora_connection_attach(*target, ca, ca_len));
}

/* The target's side, on a thread of its own: remora_admit_peer, or step by step with two gates
 * (the first one's key refused, the second admitted) when `second` is set. */
struct rdm_target {
    remora_connection* conn;
    remora_admission_gate* gate;
    remora_admission_gate* second;
    const char* accept_data;
    size_t accept_len;
    int timeout_ms;
    int rc;
    int refusal;
    int first_rc, first_refusal; /* step by step: the first gate's check */
    int again_rc;                /* step by step: a second answer */
    char identity[80];
    char payload[32];
    size_t payload_len;
};

static void keep_peer(struct rdm_target* t, remora_admitted_peer* peer) {
    const char* id = NULL;
    const void* pl = NULL;
    OK(remora_admitted_peer_identity(peer, &id));
    OK(remora_admitted_peer_payload(peer, &pl, &t->payload_len));
    snprintf(t->identity, sizeof t->identity, "%s", id);
    CHECK(t->payload_len <= sizeof t->payload);
    if (t->payload_len > 0) {
        memcpy(t->payload, pl, t->payload_len);
    }
    remora_admitted_peer_delete(peer);
}

static void* rdm_target_thread(void* arg) {
    struct rdm_target* t = arg;
    remora_admitted_peer* peer = NULL;
    remora_attach_request* req = NULL;
    if (t->second == NULL) {
        t->rc = remora_admit_peer(t->conn, t->gate, t->accept_data, t->accept_len, t->timeout_ms,
                                  &peer);
        t->refusal = remora_last_admission_refusal();
        if (t->rc == 0) {
            keep_peer(t, peer);
        }
        return NULL;
    }
    t->rc = remora_attach_request_receive(t->conn, t->timeout_ms, &req);
    if (t->rc != 0) {
        return NULL;
    }
    t->first_rc = remora_attach_request_check(req, t->gate, NULL);
    t->first_refusal = remora_last_admission_refusal();
    t->rc = remora_attach_request_check(req, t->second, &peer);
    if (t->rc == 0) {
        keep_peer(t, peer);
        t->rc = remora_attach_request_accept(req, t->accept_data, t->accept_len);
        t->again_rc = remora_attach_request_reject(req, REMORA_ADMISSION_BAD_PROOF);
    }
    remora_attach_request_delete(req);
    return NULL;
}

static void test_rdm_admission(void) {
    const struct remora_domain_config dcfg = {
        .size = sizeof dcfg, .provider = rdm_provider, .endpoint = REMORA_ENDPOINT_RDM};
    remora_domain *tdom = NULL, *cdom = NULL;
    remora_connection *target = NULL, *client = NULL, *named = NULL;
    remora_admission_key *key = NULL, *other = NULL;
    remora_admission_gate *gate = NULL, *other_gate = NULL;
    remora_memory_region *tmr = NULL, *cmr = NULL;
    remora_completion_queue* cq = NULL;
    struct remora_completion c;
    struct rdm_target t;
    pthread_t th;
    unsigned char accepted[REMORA_ADMISSION_MAX_ACCEPT_DATA];
    unsigned char small[4];
    char big[REMORA_ADMISSION_MAX_ACCEPT_DATA + 1];
    size_t accepted_len = 0;
    int rc;
    memset(big, 'b', sizeof big);
    OK(remora_domain_open(&dcfg, &tdom));
    OK(remora_domain_open(&dcfg, &cdom));
    OK(remora_admission_key_generate(&key));
    OK(remora_admission_key_generate(&other));
    OK(remora_admission_gate_create(key, NULL, &gate));
    OK(remora_admission_gate_create(other, NULL, &other_gate));

    /* The key holder is admitted: the target learns its identity and payload, the client gets
     * the accept data, and the connection then carries the application's messages (the
     * handshake's own never show on the CQs). */
    rdm_peers(tdom, cdom, &target, &client);
    t = (struct rdm_target){.conn = target,
                            .gate = gate,
                            .accept_data = "role: writer",
                            .accept_len = 12,
                            .timeout_ms = T_WAIT_MS};
    CHECK(pthread_create(&th, NULL, rdm_target_thread, &t) == 0);
    OK(remora_prove_admission(client, key, "client-1", "depth=4", 7, T_WAIT_MS, accepted,
                              sizeof accepted, &accepted_len));
    CHECK(pthread_join(th, NULL) == 0);
    OK(t.rc);
    CHECK(accepted_len == 12 && memcmp(accepted, "role: writer", 12) == 0);
    CHECK(strcmp(t.identity, "client-1") == 0);
    CHECK(t.payload_len == 7 && memcmp(t.payload, "depth=4", 7) == 0);
    OK(remora_memory_region_create(tdom, rp.server_mem, REGION, REMORA_USAGE_ALL, &tmr));
    OK(remora_memory_region_create(cdom, rp.client_mem, REGION, REMORA_USAGE_ALL, &cmr));
    OK(remora_recv(target, tmr, 0, 64, 0, &t));
    memcpy(rp.client_mem, "after admission", 15);
    OK(remora_send(client, cmr, 0, 15, 0, &rp));
    OK(remora_connection_cq(target, &cq));
    OK(remora_completion_queue_connection(cq, &named));
    CHECK(named == target);
    OK(remora_completion_queue_next(cq, T_WAIT_MS, &c));
    CHECK(c.op == REMORA_OP_RECV && c.status == 0 && c.context == &t && c.bytes == 15);
    CHECK(memcmp(rp.server_mem, "after admission", 15) == 0);
    OK(remora_connection_cq(client, &cq));
    OK(remora_completion_queue_connection(cq, &named));
    CHECK(named == client);
    OK(remora_completion_queue_next(cq, T_WAIT_MS, &c));
    CHECK(c.op == REMORA_OP_SEND && c.status == 0 && c.context == &rp);
    remora_connection_delete(client);
    remora_connection_delete(target);

    /* Another key: refused on both sides, with the reason. */
    rdm_peers(tdom, cdom, &target, &client);
    t = (struct rdm_target){.conn = target, .gate = gate, .timeout_ms = T_WAIT_MS};
    CHECK(pthread_create(&th, NULL, rdm_target_thread, &t) == 0);
    rc = remora_prove_admission(client, other, "intruder", NULL, 0, T_WAIT_MS, accepted,
                                sizeof accepted, &accepted_len);
    CHECK(rc == REMORA_E_REJECTED);
    CHECK(remora_last_admission_refusal() == REMORA_ADMISSION_BAD_PROOF);
    CHECK(strstr(remora_last_error_message(), "refused admission") != NULL);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(t.rc == REMORA_E_ACCESS_DENIED && t.refusal == REMORA_ADMISSION_BAD_PROOF);
    remora_connection_delete(client);
    remora_connection_delete(target);

    /* Step by step with a gate per role: the first gate refuses, the second admits, and the
     * request answers once. The client's buffer is too small for the accept data: it is told
     * the length it needs. */
    rdm_peers(tdom, cdom, &target, &client);
    t = (struct rdm_target){.conn = target,
                            .gate = gate,
                            .second = other_gate,
                            .accept_data = "role: reader",
                            .accept_len = 12,
                            .timeout_ms = T_WAIT_MS};
    CHECK(pthread_create(&th, NULL, rdm_target_thread, &t) == 0);
    accepted_len = 0;
    EXPECT_CODE(remora_prove_admission(client, other, "reader-7", NULL, 0, T_WAIT_MS, small,
                                       sizeof small, &accepted_len),
                REMORA_E_TOO_LARGE, "REMORA_ADMISSION_MAX_ACCEPT_DATA");
    CHECK(accepted_len == 12);
    CHECK(pthread_join(th, NULL) == 0);
    OK(t.rc);
    CHECK(t.first_rc == REMORA_E_ACCESS_DENIED && t.first_refusal == REMORA_ADMISSION_BAD_PROOF);
    CHECK(t.again_rc == REMORA_E_BAD_STATE);
    CHECK(strcmp(t.identity, "reader-7") == 0 && t.payload_len == 0);
    remora_connection_delete(client);
    remora_connection_delete(target);

    /* A client that never proves anything: the target times out. */
    rdm_peers(tdom, cdom, &target, &client);
    EXPECT_CODE(remora_admit_peer(target, gate, NULL, 0, 200, NULL), REMORA_E_TIMED_OUT,
                "prove_admission");
    remora_connection_delete(client);
    remora_connection_delete(target);

    /* Bad arguments change nothing and send nothing. */
    rdm_peers(tdom, cdom, &target, &client);
    EXPECT_CODE(remora_admit_peer(target, gate, big, sizeof big, T_WAIT_MS, NULL),
                REMORA_E_TOO_LARGE, "at most 512");
    EXPECT_CODE(remora_admit_peer(NULL, gate, NULL, 0, T_WAIT_MS, NULL), REMORA_E_INVALID,
                "conn is NULL");
    EXPECT_CODE(remora_admit_peer(target, gate, NULL, 3, T_WAIT_MS, NULL), REMORA_E_INVALID,
                "accept_data");
    EXPECT_CODE(remora_admit_peer(target, gate, NULL, 0, -1, NULL), REMORA_E_INVALID, "");
    EXPECT_CODE(remora_prove_admission(client, NULL, "x", NULL, 0, T_WAIT_MS, NULL, 0, NULL),
                REMORA_E_INVALID, "key is NULL");
    EXPECT_CODE(remora_prove_admission(client, key, NULL, NULL, 0, T_WAIT_MS, NULL, 0, NULL),
                REMORA_E_INVALID, "identity is NULL");
    EXPECT_CODE(remora_prove_admission(client, key, "x", big, REMORA_ADMISSION_MAX_PEER_PAYLOAD + 1,
                                       T_WAIT_MS, NULL, 0, NULL),
                REMORA_E_INVALID, "at most 256");
    EXPECT_CODE(remora_attach_request_receive(target, T_WAIT_MS, NULL), REMORA_E_INVALID,
                "req is NULL");
    EXPECT_CODE(remora_attach_request_reject(NULL, REMORA_ADMISSION_STALE), REMORA_E_INVALID,
                "req is NULL");
    EXPECT_CODE(remora_attach_request_check(NULL, gate, NULL), REMORA_E_INVALID, "req is NULL");
    remora_attach_request_delete(NULL);
    remora_connection_delete(client);
    remora_connection_delete(target);
    /* Not an attached RDM peer. */
    OK(remora_open_peer(cdom, NULL, &client));
    EXPECT_CODE(remora_prove_admission(client, key, "x", NULL, 0, 100, NULL, 0, NULL),
                REMORA_E_BAD_STATE, "no peer attached");
    remora_connection_delete(client);

    remora_memory_region_delete(tmr);
    remora_memory_region_delete(cmr);
    remora_admission_gate_delete(gate);
    remora_admission_gate_delete(other_gate);
    remora_admission_key_delete(key);
    remora_admission_key_delete(other);
    OK(remora_domain_close(&tdom));
    OK(remora_domain_close(&cdom));
}

/* ---- the log function */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int log_warnings;
static char log_last[512];

static void on_log(int level, const char* line, void* context) {
    CHECK(context == &log_mu);
    pthread_mutex_lock(&log_mu);
    if (level == REMORA_LOG_WARNING) {
        ++log_warnings;
        snprintf(log_last, sizeof log_last, "%s", line);
    }
    pthread_mutex_unlock(&log_mu);
}

static void test_log(void) {
    const struct remora_persistence_config tcfg = {.size = sizeof tcfg, .service_depth = 4};
    /* No serve_wait check: the unserved target's flush ends at its service timeout. */
    const struct remora_persistence_config ccfg_p = {.size = sizeof ccfg_p,
                                                     .service_depth = 4,
                                                     .service_timeout_ms = 200,
                                                     .serve_wait_ms = REMORA_SERVE_WAIT_NONE};
    const struct remora_connection_config scfg = {
        .size = sizeof scfg, .progress_thread = true, .persist = &tcfg};
    const struct remora_connection_config ccfg = {.size = sizeof ccfg, .persist = &ccfg_p};
    remora_completion_queue* cq = NULL;
    struct remora_completion c;
    double t0, took;
    EXPECT_CODE(remora_set_log_threshold(9), REMORA_E_INVALID, "REMORA_LOG_");
    OK(remora_set_log_threshold(REMORA_LOG_WARNING));
    remora_set_log_function(on_log, &log_mu);
    /* The target accepts with a service depth and never calls remora_target_service_serve: the
     * flush ends at the client's service timeout, and the log line says what is likely wrong. */
    open_pair(&scfg, &ccfg, true, false);
    OK(remora_connection_cq(rp.p.client, &cq));
    t0 = now_s();
    OK(remora_flush(rp.p.client, rp.remote, 0, 8, REMORA_FLUSH_VISIBILITY, REMORA_FLUSH_GPSPM, 0,
                    &rp));
    OK(remora_completion_queue_next(cq, T_WAIT_MS, &c));
    took = now_s() - t0;
    CHECK(c.op == REMORA_OP_FLUSH && c.context == &rp && c.status == REMORA_E_TIMED_OUT);
    CHECK(took >= 0.2 && took < 5.0);
    pthread_mutex_lock(&log_mu);
    CHECK(log_warnings == 1 && strstr(log_last, "service_timeout") != NULL &&
          strstr(log_last, "target_service::serve") != NULL);
    pthread_mutex_unlock(&log_mu);
    /* Below the threshold nothing is delivered; NULL stops logging. */
    OK(remora_set_log_threshold(REMORA_LOG_ERROR));
    OK(remora_flush(rp.p.client, rp.remote, 0, 8, REMORA_FLUSH_VISIBILITY, REMORA_FLUSH_GPSPM, 0,
                    &rp));
    OK(remora_completion_queue_next(cq, T_WAIT_MS, &c));
    CHECK(c.status == REMORA_E_TIMED_OUT);
    pthread_mutex_lock(&log_mu);
    CHECK(log_warnings == 1);
    pthread_mutex_unlock(&log_mu);
    remora_set_log_function(NULL, NULL);
    OK(remora_set_log_threshold(REMORA_LOG_NOTICE));
    close_pair();
}

/* ---- a target that accepts a service and does not serve it */

static void test_unserved(void) {
    const struct remora_persistence_config tcfg = {.size = sizeof tcfg, .service_depth = 4};
    const struct remora_persistence_config ccfg_p = {
        .size = sizeof ccfg_p, .service_depth = 4, .serve_wait_ms = 200};
    const struct remora_connection_config scfg = {
        .size = sizeof scfg, .progress_thread = true, .persist = &tcfg};
    const struct remora_connection_config ccfg = {.size = sizeof ccfg, .persist = &ccfg_p};
    remora_completion_queue* cq = NULL;
    struct remora_completion c;
    double t0, took;
    int rc;
    open_pair(&scfg, &ccfg, true, false);
    OK(remora_connection_cq(rp.p.client, &cq));
    /* The flush fails within the serve wait (not the 30 s service timeout), with BAD_STATE. */
    t0 = now_s();
    OK(remora_flush(rp.p.client, rp.remote, 0, 8, REMORA_FLUSH_VISIBILITY, REMORA_FLUSH_GPSPM, 0,
                    &rp));
    OK(remora_completion_queue_next(cq, T_WAIT_MS, &c));
    took = now_s() - t0;
    CHECK(c.op == REMORA_OP_FLUSH && c.context == &rp && c.status == REMORA_E_BAD_STATE);
    CHECK(took >= 0.2 && took < 10.0);
    /* The next one is refused at once, saying what is wrong. */
    EXPECT_CODE(remora_flush(rp.p.client, rp.remote, 0, 8, REMORA_FLUSH_VISIBILITY,
                             REMORA_FLUSH_GPSPM, 0, &rp),
                REMORA_E_BAD_STATE, "does not serve it");
    /* Served late: flushes work again once the target's answer arrives. */
    OK(remora_target_service_serve(rp.svc, rp.p.server));
    t0 = now_s();
    do {
        rc = remora_flush(rp.p.client, rp.remote, 0, 8, REMORA_FLUSH_VISIBILITY, REMORA_FLUSH_GPSPM,
                          0, &rp);
        if (rc == REMORA_E_BAD_STATE) {
            /* reads the client's CQ: the answer arrives there */
            size_t n = 1;
            OK(remora_completion_queue_poll(cq, &c, 1, &n));
            CHECK(n == 0);
        }
    } while (rc == REMORA_E_BAD_STATE && now_s() - t0 < 10.0);
    OK(rc);
    OK(remora_completion_queue_next(cq, T_WAIT_MS, &c));
    CHECK(c.op == REMORA_OP_FLUSH && c.status == 0);
    close_pair();
}

/* ---- remora_write_or_copy (MSG over FI_PROVIDER, or RDM peers on argv[2]) */

/* The client's side of write_or_copy on a connection with max_sge 2 and a bounce pool of one
 * 64-byte buffer: two segments go out as one scatter-gather write straight from them (the pool
 * untouched), three through the bounce buffer (the segments free at once, the buffer held until
 * the completion is read); bad segments are refused, naming them. `remote` is the target's
 * region, read back through the fabric; `foreign` a region of the target's domain. */
static void write_or_copy_checks(remora_domain* dom, remora_connection* client,
                                 remora_buffer_pool* bp, const remora_remote_region* remote,
                                 remora_memory_region* mr, unsigned char* mem,
                                 remora_memory_region* foreign) {
    remora_completion_queue* cq = NULL;
    remora_memory_region* recv_only = NULL;
    size_t avail = 99;
    OK(remora_connection_cq(client, &cq));
    {
        const struct remora_local_segment two[2] = {{mr, 0, 5}, {mr, 100, 5}};
        memcpy(mem, "abcde", 5);
        memcpy(mem + 100, "fghij", 5);
        OK(remora_write_or_copy(client, remote, 300, two, 2, NULL));
        OK(remora_buffer_pool_info(bp, &avail, NULL, NULL));
        CHECK(avail == 1); /* straight from the segments */
        expect_completion(cq, REMORA_OP_WRITE, NULL); /* its bytes: the provider's (maybe 0) */
    }
    {
        const struct remora_local_segment three[3] = {{mr, 10, 3}, {mr, 20, 3}, {mr, 30, 3}};
        memcpy(mem + 10, "123", 3);
        memcpy(mem + 20, "456", 3);
        memcpy(mem + 30, "789", 3);
        OK(remora_write_or_copy(client, remote, 400, three, 3, NULL));
        memset(mem, 'x', 40); /* free at once: copied */
        OK(remora_buffer_pool_info(bp, &avail, NULL, NULL));
        CHECK(avail == 0); /* the bounce buffer, held until the completion is read */
        EXPECT_CODE(remora_write_or_copy(client, remote, 0, three, 3, NULL), REMORA_E_WOULD_BLOCK,
                    "remora_write_or_copy: ");
        expect_completion(cq, REMORA_OP_WRITE, NULL);
        OK(remora_buffer_pool_info(bp, &avail, NULL, NULL));
        CHECK(avail == 1);
    }
    OK(remora_read(client, mr, 1000, remote, 300, 10, 0, NULL));
    expect_completion(cq, REMORA_OP_READ, NULL);
    CHECK(memcmp(mem + 1000, "abcdefghij", 10) == 0);
    OK(remora_read(client, mr, 1100, remote, 400, 9, 0, NULL));
    expect_completion(cq, REMORA_OP_READ, NULL);
    CHECK(memcmp(mem + 1100, "123456789", 9) == 0);
    /* refusals, with nothing posted */
    OK(remora_memory_region_create(dom, mem + 2048, 64, REMORA_USAGE_RECEIVE, &recv_only));
    {
        const struct remora_local_segment no_region[3] = {{mr, 0, 1}, {NULL, 0, 1}, {mr, 0, 1}};
        const struct remora_local_segment other[3] = {{mr, 0, 1}, {mr, 0, 1}, {foreign, 0, 1}};
        const struct remora_local_segment denied[3] = {{recv_only, 0, 1}, {mr, 0, 1}, {mr, 0, 1}};
        const struct remora_local_segment past[3] = {{mr, 0, 1}, {mr, REGION - 1, 2}, {mr, 0, 1}};
        const struct remora_local_segment big[3] = {{mr, 0, 30}, {mr, 0, 30}, {mr, 0, 30}};
        EXPECT_CODE(remora_write_or_copy(client, remote, 0, NULL, 3, NULL), REMORA_E_INVALID,
                    "src is NULL");
        EXPECT_CODE(remora_write_or_copy(client, NULL, 0, big, 3, NULL), REMORA_E_INVALID,
                    "dst is NULL");
        EXPECT_CODE(remora_write_or_copy(client, remote, 0, no_region, 3, NULL), REMORA_E_INVALID,
                    "segment 1: no region");
        EXPECT_CODE(remora_write_or_copy(client, remote, 0, other, 3, NULL), REMORA_E_INVALID,
                    "segment 2: a region of another domain");
        EXPECT_CODE(remora_write_or_copy(client, remote, 0, denied, 3, NULL),
                    REMORA_E_ACCESS_DENIED, "segment 0: ");
        EXPECT_CODE(remora_write_or_copy(client, remote, 0, past, 3, NULL), REMORA_E_OUT_OF_RANGE,
                    "segment 1: ");
        EXPECT_CODE(remora_write_or_copy(client, remote, 0, big, 3, NULL), REMORA_E_TOO_LARGE,
                    "remora_write_or_copy: ");
        /* within max_sge: remora_write_ex's own checks */
        EXPECT_CODE(remora_write_or_copy(client, remote, 0, denied, 1, NULL),
                    REMORA_E_ACCESS_DENIED, "remora_write_or_copy: ");
    }
    OK(remora_buffer_pool_info(bp, &avail, NULL, NULL));
    CHECK(avail == 1);
    remora_memory_region_delete(recv_only);
}

static void test_write_or_copy(void) {
    struct remora_buffer_pool_config bcfg = {.size = sizeof bcfg, .buffers = 1, .buffer_size = 64};
    struct remora_connection_config ccfg = {.size = sizeof ccfg, .max_sge = 2};
    remora_buffer_pool* bp = NULL;
    pair_domains(&rp.p);
    OK(remora_buffer_pool_create(rp.p.cdom, &bcfg, &bp));
    ccfg.bounce = bp;
    rp.remote = pair_connect_region(&rp.p, rp.server_mem, rp.client_mem, REGION, &rp.server_mr,
                                    &rp.client_mr, &target_cfg, &ccfg);
    write_or_copy_checks(rp.p.cdom, rp.p.client, bp, rp.remote, rp.client_mr, rp.client_mem,
                         rp.server_mr);
    CHECK(memcmp(rp.server_mem + 400, "123456789", 9) == 0);
    remora_buffer_pool_delete(bp);
    close_pair();
}

static void test_rdm_write_or_copy(void) {
    const struct remora_domain_config dcfg = {
        .size = sizeof dcfg, .provider = rdm_provider, .endpoint = REMORA_ENDPOINT_RDM};
    struct remora_buffer_pool_config bcfg = {.size = sizeof bcfg, .buffers = 1, .buffer_size = 64};
    struct remora_connection_config ccfg = {.size = sizeof ccfg, .max_sge = 2};
    remora_domain *tdom = NULL, *cdom = NULL;
    remora_connection *target = NULL, *client = NULL;
    remora_memory_region *tmr = NULL, *cmr = NULL;
    remora_remote_region* desc = NULL;
    remora_buffer_pool* bp = NULL;
    OK(remora_domain_open(&dcfg, &tdom));
    OK(remora_domain_open(&dcfg, &cdom));
    OK(remora_buffer_pool_create(cdom, &bcfg, &bp));
    ccfg.bounce = bp;
    OK(remora_open_peer(tdom, &target_cfg, &target));
    OK(remora_open_peer(cdom, &ccfg, &client));
    attach_each_other(target, client);
    OK(remora_memory_region_create(tdom, rp.server_mem, REGION, REMORA_USAGE_ALL, &tmr));
    OK(remora_memory_region_create(cdom, rp.client_mem, REGION, REMORA_USAGE_ALL, &cmr));
    OK(remora_memory_region_describe(tmr, 0, 0, &desc));
    write_or_copy_checks(cdom, client, bp, desc, cmr, rp.client_mem, tmr);
    CHECK(memcmp(rp.server_mem + 400, "123456789", 9) == 0);
    remora_remote_region_delete(desc);
    remora_connection_delete(client);
    remora_connection_delete(target);
    remora_buffer_pool_delete(bp);
    remora_memory_region_delete(tmr);
    remora_memory_region_delete(cmr);
    OK(remora_domain_close(&cdom));
    OK(remora_domain_close(&tdom));
}

static const struct {
    const char* name;
    void (*run)(void);
} tests[] = {
    {"callbacks_on_delete", test_callbacks_on_delete},
    {"more", test_more},
    {"publish", test_publish},
    {"receive_pool", test_receive_pool},
    {"registration_cache", test_registration_cache},
    {"admission", test_admission},
    {"rdm_admission", test_rdm_admission},
    {"log", test_log},
    {"unserved", test_unserved},
    {"write_or_copy", test_write_or_copy},
    {"rdm_write_or_copy", test_rdm_write_or_copy},
};

int main(int argc, char** argv) {
    size_t i;
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: capi_ext_test NAME [RDM-PROVIDER]\n");
        return 2;
    }
    if (argc == 3) {
        rdm_provider = argv[2];
    }
    for (i = 0; i < sizeof tests / sizeof tests[0]; ++i) {
        if (strcmp(argv[1], tests[i].name) == 0) {
            tests[i].run();
            printf("capi_ext_test %s: ok\n", argv[1]);
            return 0;
        }
    }
    fprintf(stderr, "capi_ext_test: no test named %s\n", argv[1]);
    return 2;
}

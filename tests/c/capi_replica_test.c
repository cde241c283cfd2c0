// SPDX-License-Identifier: BSD-3-Clause
/* tests/c/capi_replica_test.c — the C API's replica set (remora_replica.h) on real providers over
 * loopback, in C11: three targets set up in C (a domain, a listener and a region each, with a
 * target service for GPSPM), one client domain with a connection to each, a set of quorum 2.
 *
 *   capi_replica_test NAME    runs one test (ctest runs each on tcp and on sockets: FI_PROVIDER)
 *
 * quorum       writes complete at the quorum, polled and through callbacks, and land on every
 *              target; a member dropped by the application leaves the set, which goes on; it
 *              rejoins over a new connection and catches up (the ranges it missed, then its
 *              whole range for a target that lost its memory)
 * gpspm        the same through each target's service (flush_method REMORA_FLUSH_GPSPM)
 * failure      a member whose connection ends is dropped at its next write, the quorum goes on;
 *              with fewer live than the quorum a write fails and more are refused; a rejoin
 *              brings the quorum back
 * bad_arguments NULL pointers, a quorum above the members, sizes, ranges, a full set, no such
 *              member: each its REMORA_E_* code, and nothing changes
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */

#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "capi_check.h"

enum { REGION = 256 * 1024, TARGETS = 3, MAX_CONNS = 4, DEPTH = 8 };

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void nap(void) {
    const struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
}

/* A target: its domain, listener and memory; with a service, its region is exposed through it
 * (GPSPM). `conns` are its side of every connection made to it. */
struct target {
    remora_domain* dom;
    remora_listener* lst;
    unsigned char* mem;
    remora_memory_region* mr;
    remora_target_service* svc;
    unsigned char wire[REMORA_DESCRIPTOR_SIZE]; /* its region's descriptor, sent in accept */
    remora_connection* conns[MAX_CONNS];
    size_t nconns;
};

static struct {
    bool gpspm;
    remora_domain* cdom;
    struct target t[TARGETS];
    /* the client's connections and parsed descriptors, every one made */
    remora_connection* clients[TARGETS * MAX_CONNS];
    remora_remote_region* descs[TARGETS * MAX_CONNS];
    size_t nclients;
    unsigned char* src;
    remora_memory_region* src_mr;
    unsigned char* expected; /* what every live target should hold */
} g;

static struct remora_connection_config conn_cfg(struct remora_persistence_config* pcfg) {
    struct remora_connection_config c = {.size = sizeof c, .progress_thread = true};
    if (g.gpspm) {
        *pcfg = (struct remora_persistence_config){.size = sizeof *pcfg, .service_depth = DEPTH};
        c.persist = pcfg;
    }
    return c;
}

/* A new connection from the client domain to target i, and the target's descriptor as the
 * client parsed it (both deleted by teardown()). */
static remora_connection* connect_target(size_t i, remora_remote_region** desc) {
    struct target* t = &g.t[i];
    struct remora_persistence_config pcfg;
    const struct remora_connection_config cfg = conn_cfg(&pcfg);
    struct pair p;
    const void* peer = NULL;
    size_t peer_len = 0;
    CHECK(t->nconns < MAX_CONNS);
    memset(&p, 0, sizeof p);
    p.sdom = t->dom;
    p.cdom = g.cdom;
    p.lst = t->lst;
    pair_connect(&p, &cfg, &cfg, t->wire, sizeof t->wire, NULL, 0);
    if (t->svc != NULL) {
        OK(remora_target_service_serve(t->svc, p.server));
    }
    t->conns[t->nconns++] = p.server;
    OK(remora_connection_peer_private_data(p.client, &peer, &peer_len));
    CHECK(peer_len == REMORA_DESCRIPTOR_SIZE);
    OK(remora_remote_region_parse(peer, peer_len, desc));
    g.clients[g.nclients] = p.client;
    g.descs[g.nclients] = *desc;
    ++g.nclients;
    return p.client;
}

/* Refills the source with a pattern of `seed` (only with nothing in flight). */
static void fill_src(unsigned seed) {
    size_t i;
    for (i = 0; i < REGION; ++i) {
        g.src[i] = (unsigned char)((i * 7 + seed * 13 + 3) & 0xff);
    }
}

/* Three targets, the client domain and source, and a connection to each target: `members`. */
static void setup(bool gpspm, struct remora_replica* members) {
    size_t i;
    memset(&g, 0, sizeof g);
    g.gpspm = gpspm;
    OK(remora_domain_open(NULL, &g.cdom));
    g.src = malloc(REGION);
    g.expected = calloc(1, REGION);
    CHECK(g.src != NULL && g.expected != NULL);
    fill_src(1);
    OK(remora_memory_region_create(g.cdom, g.src, REGION, REMORA_USAGE_WRITE_SOURCE, &g.src_mr));
    for (i = 0; i < TARGETS; ++i) {
        struct target* t = &g.t[i];
        remora_remote_region* desc = NULL;
        OK(remora_domain_open(NULL, &t->dom));
        OK(remora_listener_create(t->dom, "127.0.0.1", 0, &t->lst));
        t->mem = calloc(1, REGION);
        CHECK(t->mem != NULL);
        OK(remora_memory_region_create(
            t->dom, t->mem, REGION,
            REMORA_USAGE_WRITE_DESTINATION | REMORA_USAGE_READ_SOURCE | REMORA_USAGE_FLUSH_TARGET,
            &t->mr));
        if (gpspm) {
            OK(remora_target_service_create(&t->svc));
            OK(remora_target_service_expose(t->svc, t->mr, NULL, &desc));
        } else {
            OK(remora_memory_region_describe(t->mr, 0, 0, &desc));
        }
        OK(remora_remote_region_serialize(desc, t->wire, sizeof t->wire));
        remora_remote_region_delete(desc);
        members[i].conn = connect_target(i, &desc);
        members[i].region = desc;
    }
}

/* Everything setup() and connect_target() made, the domains closed (refused if anything of
 * theirs were left). */
static void teardown(void) {
    size_t i, k;
    for (i = 0; i < g.nclients; ++i) {
        remora_connection_delete(g.clients[i]);
        remora_remote_region_delete(g.descs[i]);
    }
    for (i = 0; i < TARGETS; ++i) {
        struct target* t = &g.t[i];
        for (k = 0; k < t->nconns; ++k) {
            remora_connection_delete(t->conns[k]);
        }
        remora_target_service_delete(t->svc);
        remora_memory_region_delete(t->mr);
        remora_listener_delete(t->lst);
        OK(remora_domain_close(&t->dom));
        free(t->mem);
    }
    remora_memory_region_delete(g.src_mr);
    OK(remora_domain_close(&g.cdom));
    free(g.src);
    free(g.expected);
}

static bool holds_expected(size_t i) {
    return memcmp(g.t[i].mem, g.expected, REGION) == 0;
}

/* Writes [off, off + len) from the same offset of the source, and polls its completion (which
 * must be the write's); on success the range is expected on every live target. */
static struct remora_replica_completion write_and_wait(remora_replica_set* set, uint64_t off,
                                                       size_t len) {
    struct remora_replica_completion c;
    size_t n = 0;
    OK(remora_replica_set_write(set, off, g.src_mr, (size_t)off, len, &g, NULL, T_WAIT_MS));
    OK(remora_replica_set_wait(set, T_WAIT_MS));
    OK(remora_replica_set_poll(set, &c, 1, &n));
    CHECK(n == 1);
    CHECK(c.context == &g && c.offset == off && c.length == len && c.replicas == TARGETS);
    if (c.status == 0) {
        memcpy(g.expected + off, g.src + off, len);
    }
    return c;
}

static int state_of(const remora_replica_set* set, size_t i) {
    int s = -1;
    OK(remora_replica_set_state(set, i, &s));
    return s;
}

static size_t live_of(const remora_replica_set* set) {
    size_t n = 0;
    OK(remora_replica_set_live(set, &n));
    return n;
}

static uint64_t missing_of(const remora_replica_set* set, size_t i) {
    uint64_t n = 0;
    OK(remora_replica_set_missing(set, i, &n));
    return n;
}

static size_t pending_of(const remora_replica_set* set, size_t i) {
    size_t n = 0;
    OK(remora_replica_set_pending(set, i, &n));
    return n;
}

/* Waits (20 s at most) until member i is in `state`. */
static void until_state(const remora_replica_set* set, size_t i, int state) {
    const double deadline = now_s() + 20;
    while (state_of(set, i) != state && now_s() < deadline) {
        nap();
    }
    if (state_of(set, i) != state) {
        fprintf(stderr, "member %zu is in state %d, not %d; missing %llu\n", i, state_of(set, i),
                state, (unsigned long long)missing_of(set, i));
        exit(1);
    }
}

/* ---- events and callbacks, as the set reports them (from its threads) */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
    struct remora_replica_event e[64];
    size_t n;
} events;

static void on_event(const struct remora_replica_event* e) {
    pthread_mutex_lock(&mu);
    CHECK(e->context == &events);
    if (events.n < sizeof events.e / sizeof events.e[0]) {
        events.e[events.n++] = *e;
    }
    pthread_mutex_unlock(&mu);
}

/* Events of `kind` for member `index` (any member for SIZE_MAX); the last one's status. */
static size_t count_events(int kind, size_t index, int* status) {
    size_t i, n = 0;
    pthread_mutex_lock(&mu);
    for (i = 0; i < events.n; ++i) {
        if (events.e[i].kind == kind && (index == SIZE_MAX || events.e[i].index == index)) {
            ++n;
            if (status != NULL) {
                *status = events.e[i].status;
            }
        }
    }
    pthread_mutex_unlock(&mu);
    return n;
}

static struct { int ok, failed, wrong; } tally;

static void on_durable(const struct remora_replica_completion* c) {
    uint32_t m, durable = 0;
    pthread_mutex_lock(&mu);
    for (m = 0; m < c->replicas; ++m) {
        durable += c->outcome[m] == REMORA_REPLICA_DURABLE;
    }
    if (c->context != &tally || c->replicas != TARGETS || durable != c->durable) {
        ++tally.wrong;
    } else if (c->status == 0 && c->durable >= 2) {
        ++tally.ok;
    } else {
        ++tally.failed;
    }
    pthread_mutex_unlock(&mu);
}

static struct remora_replica_set_config set_cfg(void) {
    struct remora_replica_set_config c = {.size = sizeof c,
                                          .quorum = 2,
                                          .depth = DEPTH,
                                          .copy_chunk = 16384,
                                          .on_event = on_event,
                                          .event_context = &events};
    if (g.gpspm) {
        c.flush_method = REMORA_FLUSH_GPSPM;
    }
    return c;
}

/* ---- quorum, gpspm */

static void quorum_scenario(bool gpspm) {
    struct remora_replica members[TARGETS];
    struct remora_replica_set_config cfg;
    remora_replica_set* set = NULL;
    remora_remote_region* desc = NULL;
    remora_connection* again = NULL;
    struct remora_replica_completion c;
    size_t n = 0, i;
    uint32_t q = 0;
    uint64_t range = 0, off;
    int status = 0;
    double deadline;
    setup(gpspm, members);
    cfg = set_cfg();
    OK(remora_replica_set_create(members, TARGETS, &cfg, &set));
    OK(remora_replica_set_size(set, &n));
    CHECK(n == TARGETS);
    OK(remora_replica_set_quorum(set, &q));
    CHECK(q == 2);
    OK(remora_replica_set_range(set, &range));
    CHECK(range == REGION);
    CHECK(live_of(set) == TARGETS);
    for (i = 0; i < TARGETS; ++i) {
        CHECK(state_of(set, i) == REMORA_REPLICA_LIVE);
    }

    /* Polled: each write completes at the quorum and says what each member did. */
    for (off = 0; off < REGION; off += 16384) {
        c = write_and_wait(set, off, 4096 + (size_t)off / 64);
        CHECK(c.status == 0);
        CHECK(c.durable >= 2);
        for (i = 0; i < TARGETS; ++i) {
            CHECK(c.outcome[i] == REMORA_REPLICA_DURABLE || c.outcome[i] == REMORA_REPLICA_PENDING);
        }
    }
    /* Through callbacks, up to `depth` in flight (a full set parks the post). */
    OK(remora_replica_set_drain(set, T_WAIT_MS));
    fill_src(2);
    for (i = 0; i < 32; ++i) {
        off = (uint64_t)i * 8192;
        OK(remora_replica_set_write(set, off, g.src_mr, (size_t)off, 8192, &tally, on_durable,
                                    T_WAIT_MS));
    }
    OK(remora_replica_set_drain(set, T_WAIT_MS));
    pthread_mutex_lock(&mu);
    CHECK(tally.ok == 32 && tally.failed == 0 && tally.wrong == 0);
    pthread_mutex_unlock(&mu);
    memcpy(g.expected, g.src, 32 * 8192);
    OK(remora_replica_set_in_flight(set, &n));
    CHECK(n == 0);
    for (i = 0; i < TARGETS; ++i) {
        CHECK(holds_expected(i));
    }

    /* The application drops member 2: the set goes on with 0 and 1. */
    OK(remora_replica_set_drop(set, 2));
    EXPECT_CODE(remora_replica_set_drop(set, 2), REMORA_E_BAD_STATE, "dropped already");
    CHECK(state_of(set, 2) == REMORA_REPLICA_DROPPED);
    CHECK(live_of(set) == 2);
    CHECK(count_events(REMORA_REPLICA_EVENT_DROPPED, 2, &status) == 1);
    CHECK(status == REMORA_E_BAD_STATE);
    fill_src(3);
    for (off = 0; off < REGION; off += 24576) {
        c = write_and_wait(set, off, 8192);
        CHECK(c.status == 0 && c.durable == 2);
        CHECK(c.outcome[2] == REMORA_REPLICA_NOT_WRITTEN);
    }
    OK(remora_replica_set_drain(set, T_WAIT_MS));
    CHECK(missing_of(set, 2) > 0);
    CHECK(holds_expected(0) && holds_expected(1) && !holds_expected(2));
    CHECK(count_events(REMORA_REPLICA_EVENT_QUORUM_LOST, SIZE_MAX, NULL) == 0);

    /* It rejoins over a new connection and catches up while writes go on. */
    again = connect_target(2, &desc);
    EXPECT_CODE(remora_replica_set_rejoin(set, 0, again, desc, false), REMORA_E_BAD_STATE, "live");
    OK(remora_replica_set_rejoin(set, 2, again, desc, false));
    off = 0;
    deadline = now_s() + 20;
    while (state_of(set, 2) == REMORA_REPLICA_CATCHING_UP && now_s() < deadline) {
        off = (off + 12288) % (REGION - 8192);
        c = write_and_wait(set, off, 8192);
        CHECK(c.status == 0);
    }
    until_state(set, 2, REMORA_REPLICA_LIVE);
    CHECK(count_events(REMORA_REPLICA_EVENT_REJOINED, 2, NULL) == 1);
    CHECK(live_of(set) == TARGETS);
    CHECK(missing_of(set, 2) == 0);
    c = write_and_wait(set, 0, 4096);
    CHECK(c.status == 0);
    OK(remora_replica_set_drain(set, T_WAIT_MS));
    for (i = 0; i < TARGETS; ++i) {
        CHECK(holds_expected(i));
    }

    /* Member 1 is dropped too and writes go on; then its target loses its memory, and it rejoins
     * with the whole range. */
    OK(remora_replica_set_drop(set, 1));
    fill_src(4);
    for (off = 4096; off < REGION; off += 32768) {
        c = write_and_wait(set, off, 8192);
        CHECK(c.status == 0 && c.outcome[1] == REMORA_REPLICA_NOT_WRITTEN);
    }
    deadline = now_s() + 20;
    while (pending_of(set, 1) != 0 && now_s() < deadline) {
        nap();
    }
    CHECK(pending_of(set, 1) == 0);
    OK(remora_replica_set_drain(set, T_WAIT_MS));
    CHECK(holds_expected(0) && holds_expected(2) && !holds_expected(1));
    memset(g.t[1].mem, 0, REGION);
    again = connect_target(1, &desc);
    OK(remora_replica_set_rejoin(set, 1, again, desc, true));
    until_state(set, 1, REMORA_REPLICA_LIVE);
    OK(remora_replica_set_drain(set, T_WAIT_MS));
    CHECK(holds_expected(1));
    CHECK(count_events(REMORA_REPLICA_EVENT_REJOINED, 1, NULL) == 1);
    remora_replica_set_delete(set);
    teardown();
}

static void test_quorum(void) {
    quorum_scenario(false);
}

static void test_gpspm(void) {
    quorum_scenario(true);
}

/* ---- failure */

static void test_failure(void) {
    struct remora_replica members[TARGETS];
    struct remora_replica_set_config cfg;
    remora_replica_set* set = NULL;
    remora_remote_region* desc = NULL;
    remora_connection* again = NULL;
    struct remora_replica_completion c;
    int status = 0;
    setup(false, members);
    cfg = set_cfg();
    OK(remora_replica_set_create(members, TARGETS, &cfg, &set));
    CHECK(write_and_wait(set, 0, 4096).status == 0);
    OK(remora_replica_set_drain(set, T_WAIT_MS));

    /* Member 1's connection ends under the set (as a link that fails): dropped at its next
     * write, which completes at the quorum of the other two. */
    OK(remora_connection_close(members[1].conn));
    c = write_and_wait(set, 4096, 4096);
    CHECK(c.status == 0);
    CHECK(c.outcome[0] == REMORA_REPLICA_DURABLE && c.outcome[2] == REMORA_REPLICA_DURABLE);
    CHECK(c.outcome[1] == REMORA_REPLICA_FAILED);
    CHECK(state_of(set, 1) == REMORA_REPLICA_DROPPED);
    CHECK(live_of(set) == 2);
    CHECK(count_events(REMORA_REPLICA_EVENT_DROPPED, 1, &status) == 1);
    CHECK(status != 0);
    CHECK(write_and_wait(set, 8192, 4096).status == 0);
    OK(remora_replica_set_drain(set, T_WAIT_MS));

    /* Member 2's too: fewer live than the quorum. The write that cannot reach it fails, and
     * later ones are refused. */
    OK(remora_connection_close(members[2].conn));
    c = write_and_wait(set, 12288, 4096);
    CHECK(c.status != 0);
    CHECK(c.outcome[2] == REMORA_REPLICA_FAILED);
    CHECK(count_events(REMORA_REPLICA_EVENT_QUORUM_LOST, SIZE_MAX, &status) == 1);
    CHECK(status != 0);
    EXPECT_CODE(remora_replica_set_write(set, 16384, g.src_mr, 16384, 4096, NULL, NULL, 0),
                REMORA_E_BAD_STATE, "quorum");
    OK(remora_replica_set_drain(set, T_WAIT_MS));
    CHECK(live_of(set) == 1);

    /* Member 2 comes back: once caught up the quorum is live again and writes are taken. */
    until_state(set, 2, REMORA_REPLICA_DROPPED);
    again = connect_target(2, &desc);
    OK(remora_replica_set_rejoin(set, 2, again, desc, false));
    until_state(set, 2, REMORA_REPLICA_LIVE);
    CHECK(count_events(REMORA_REPLICA_EVENT_QUORUM_REGAINED, SIZE_MAX, &status) == 1);
    CHECK(status == 0);
    c = write_and_wait(set, 16384, 4096);
    CHECK(c.status == 0 && c.outcome[0] == REMORA_REPLICA_DURABLE &&
          c.outcome[2] == REMORA_REPLICA_DURABLE && c.outcome[1] == REMORA_REPLICA_NOT_WRITTEN);
    OK(remora_replica_set_drain(set, T_WAIT_MS));
    /* The failed write's range may have landed anywhere: compare the rest. */
    CHECK(memcmp(g.t[0].mem, g.expected, 12288) == 0);
    CHECK(memcmp(g.t[2].mem, g.expected, 12288) == 0);
    CHECK(memcmp(g.t[0].mem + 16384, g.expected + 16384, REGION - 16384) == 0);
    CHECK(memcmp(g.t[2].mem + 16384, g.expected + 16384, REGION - 16384) == 0);
    remora_replica_set_delete(set);
    teardown();
}

/* ---- bad arguments */

static void test_bad_arguments(void) {
    struct remora_replica members[TARGETS], bad[TARGETS];
    struct remora_replica_set_config cfg = {.size = sizeof cfg, .quorum = 1, .depth = 2};
    struct remora_replica_set_config wrong;
    remora_replica_set* set = NULL;
    struct remora_replica_completion got[4];
    remora_domain* other_dom = NULL;
    remora_memory_region *foreign = NULL, *read_only = NULL;
    unsigned char* other = NULL;
    size_t n = 0;
    int st = 0;
    uint64_t bytes = 0;
    setup(false, members);

    /* Forming a set. */
    EXPECT_CODE(remora_replica_set_create(members, TARGETS, &cfg, NULL), REMORA_E_INVALID,
                "set is NULL");
    EXPECT_CODE(remora_replica_set_create(NULL, TARGETS, &cfg, &set), REMORA_E_INVALID,
                "members is NULL");
    EXPECT_CODE(remora_replica_set_create(members, 0, &cfg, &set), REMORA_E_INVALID, "");
    EXPECT_CODE(remora_replica_set_create(members, REMORA_MAX_REPLICAS + 1, &cfg, &set),
                REMORA_E_INVALID, "REMORA_MAX_REPLICAS");
    memcpy(bad, members, sizeof bad);
    bad[1].conn = NULL;
    EXPECT_CODE(remora_replica_set_create(bad, TARGETS, &cfg, &set), REMORA_E_INVALID,
                "members[1].conn is NULL");
    memcpy(bad, members, sizeof bad);
    bad[2].region = NULL;
    EXPECT_CODE(remora_replica_set_create(bad, TARGETS, &cfg, &set), REMORA_E_INVALID,
                "members[2].region is NULL");
    wrong = cfg;
    wrong.quorum = TARGETS + 1;
    EXPECT_CODE(remora_replica_set_create(members, TARGETS, &wrong, &set), REMORA_E_INVALID,
                "quorum");
    wrong = cfg;
    wrong.depth = 64; /* a member's send queue (64) holds 32 */
    EXPECT_CODE(remora_replica_set_create(members, TARGETS, &wrong, &set), REMORA_E_TOO_LARGE, "");
    wrong = cfg;
    wrong.flush_type = 7;
    EXPECT_CODE(remora_replica_set_create(members, TARGETS, &wrong, &set), REMORA_E_INVALID,
                "flush type 7");
    wrong = cfg;
    wrong.flush_method = REMORA_FLUSH_GPSPM; /* no service depth */
    EXPECT_CODE(remora_replica_set_create(members, TARGETS, &wrong, &set), REMORA_E_NOT_SUPPORTED,
                "GPSPM");
    wrong = cfg;
    wrong.size = sizeof wrong + 8;
    EXPECT_CODE(remora_replica_set_create(members, TARGETS, &wrong, &set), REMORA_E_INVALID,
                "larger than this library's");
    wrong.size = 2;
    EXPECT_CODE(remora_replica_set_create(members, TARGETS, &wrong, &set), REMORA_E_INVALID,
                "smaller than its size field");
    CHECK(set == NULL); /* untouched by every failure */
    /* An older header's size: the fields past it take their defaults (quorum: all members). */
    wrong = cfg;
    wrong.size = offsetof(struct remora_replica_set_config, quorum);
    OK(remora_replica_set_create(members, TARGETS, &wrong, &set));
    {
        uint32_t q = 0;
        OK(remora_replica_set_quorum(set, &q));
        CHECK(q == TARGETS);
    }
    remora_replica_set_delete(set);
    set = NULL;
    OK(remora_replica_set_create(members, TARGETS, NULL, &set)); /* the defaults */
    {
        uint32_t q = 0;
        OK(remora_replica_set_quorum(set, &q));
        CHECK(q == TARGETS);
    }
    remora_replica_set_delete(set);
    remora_replica_set_delete(NULL);
    set = NULL;
    OK(remora_replica_set_create(members, TARGETS, &cfg, &set));

    /* Writing. */
    EXPECT_CODE(remora_replica_set_write(NULL, 0, g.src_mr, 0, 4096, NULL, NULL, 0),
                REMORA_E_INVALID, "set is NULL");
    EXPECT_CODE(remora_replica_set_write(set, 0, NULL, 0, 4096, NULL, NULL, 0), REMORA_E_INVALID,
                "src is NULL");
    EXPECT_CODE(remora_replica_set_write(set, 0, g.src_mr, 0, 0, NULL, NULL, 0), REMORA_E_INVALID,
                "length");
    EXPECT_CODE(remora_replica_set_write(set, REGION - 10, g.src_mr, 0, 4096, NULL, NULL, 0),
                REMORA_E_OUT_OF_RANGE, "past the set's");
    EXPECT_CODE(remora_replica_set_write(set, 0, g.src_mr, REGION - 10, 4096, NULL, NULL, 0),
                REMORA_E_OUT_OF_RANGE, "source range");
    EXPECT_CODE(remora_replica_set_write(set, 0, g.src_mr, 0, 4096, NULL, on_durable, -1),
                REMORA_E_INVALID, "park_ms");
    other = calloc(1, 4096);
    CHECK(other != NULL);
    OK(remora_memory_region_create(g.cdom, other, 4096, REMORA_USAGE_READ_DESTINATION, &read_only));
    EXPECT_CODE(remora_replica_set_write(set, 0, read_only, 0, 4096, NULL, on_durable, 0),
                REMORA_E_ACCESS_DENIED, "write_source");
    OK(remora_domain_open(NULL, &other_dom));
    OK(remora_memory_region_create(other_dom, other, 4096, REMORA_USAGE_WRITE_SOURCE, &foreign));
    EXPECT_CODE(remora_replica_set_write(set, 0, foreign, 0, 4096, NULL, on_durable, 0),
                REMORA_E_INVALID, "domain");
    /* Two completions not yet polled hold the depth: full, then parked until the timeout. */
    OK(remora_replica_set_write(set, 0, g.src_mr, 0, 4096, &got[0], NULL, 0));
    OK(remora_replica_set_write(set, 4096, g.src_mr, 4096, 4096, &got[1], NULL, 0));
    OK(remora_replica_set_drain(set, T_WAIT_MS));
    EXPECT_CODE(remora_replica_set_write(set, 8192, g.src_mr, 8192, 4096, NULL, on_durable, 0),
                REMORA_E_WOULD_BLOCK, "depth");
    EXPECT_CODE(remora_replica_set_write(set, 8192, g.src_mr, 8192, 4096, NULL, on_durable, 50),
                REMORA_E_TIMED_OUT, "park");

    /* Polling and waiting. */
    EXPECT_CODE(remora_replica_set_poll(NULL, got, 4, &n), REMORA_E_INVALID, "set is NULL");
    EXPECT_CODE(remora_replica_set_poll(set, NULL, 4, &n), REMORA_E_INVALID, "out is NULL");
    EXPECT_CODE(remora_replica_set_poll(set, got, 4, NULL), REMORA_E_INVALID, "n is NULL");
    EXPECT_CODE(remora_replica_set_wait(set, -1), REMORA_E_INVALID, "timeout_ms");
    EXPECT_CODE(remora_replica_set_drain(set, -1), REMORA_E_INVALID, "timeout_ms");
    OK(remora_replica_set_wait(set, 0));
    OK(remora_replica_set_poll(set, got, 4, &n));
    CHECK(n == 2);
    CHECK(got[0].status == 0 && got[0].offset == 0 && got[0].context == &got[0]);
    CHECK(got[1].status == 0 && got[1].offset == 4096 && got[1].context == &got[1]);
    memcpy(g.expected, g.src, 8192);
    OK(remora_replica_set_poll(set, got, 4, &n));
    CHECK(n == 0);
    EXPECT_CODE(remora_replica_set_wait(set, 0), REMORA_E_TIMED_OUT, "no completion");
    pthread_mutex_lock(&mu);
    CHECK(tally.ok == 0 && tally.failed == 0); /* no refused write's callback ran */
    pthread_mutex_unlock(&mu);

    /* Members by index. */
    EXPECT_CODE(remora_replica_set_drop(set, TARGETS), REMORA_E_INVALID, "no member 3");
    EXPECT_CODE(remora_replica_set_drop(NULL, 0), REMORA_E_INVALID, "set is NULL");
    EXPECT_CODE(remora_replica_set_rejoin(set, TARGETS, members[0].conn, members[0].region, false),
                REMORA_E_INVALID, "no member 3");
    EXPECT_CODE(remora_replica_set_rejoin(set, 0, NULL, members[0].region, false), REMORA_E_INVALID,
                "conn is NULL");
    EXPECT_CODE(remora_replica_set_rejoin(set, 0, members[0].conn, NULL, false), REMORA_E_INVALID,
                "region is NULL");
    EXPECT_CODE(remora_replica_set_rejoin(set, 1, members[1].conn, members[1].region, false),
                REMORA_E_BAD_STATE, "live");
    EXPECT_CODE(remora_replica_set_state(set, TARGETS, &st), REMORA_E_INVALID,
                "no member 3 (the set has 3)");
    EXPECT_CODE(remora_replica_set_state(set, 0, NULL), REMORA_E_INVALID, "state is NULL");
    EXPECT_CODE(remora_replica_set_pending(set, TARGETS, &n), REMORA_E_INVALID, "no member 3");
    EXPECT_CODE(remora_replica_set_missing(set, TARGETS, &bytes), REMORA_E_INVALID, "no member 3");
    EXPECT_CODE(remora_replica_set_size(NULL, &n), REMORA_E_INVALID, "set is NULL");
    EXPECT_CODE(remora_replica_set_live(set, NULL), REMORA_E_INVALID, "n is NULL");
    EXPECT_CODE(remora_replica_set_range(set, NULL), REMORA_E_INVALID, "bytes is NULL");
    EXPECT_CODE(remora_replica_set_quorum(NULL, NULL), REMORA_E_INVALID, "set is NULL");
    EXPECT_CODE(remora_replica_set_in_flight(set, NULL), REMORA_E_INVALID, "n is NULL");

    /* Nothing changed: every member live, nothing in flight, and a write goes through. */
    CHECK(live_of(set) == TARGETS);
    OK(remora_replica_set_in_flight(set, &n));
    CHECK(n == 0);
    CHECK(pending_of(set, 0) == 0 && missing_of(set, 0) == 0);
    CHECK(write_and_wait(set, 8192, 4096).status == 0);
    OK(remora_replica_set_drain(set, T_WAIT_MS));
    CHECK(holds_expected(0) && holds_expected(1) && holds_expected(2));
    remora_replica_set_delete(set);
    remora_memory_region_delete(foreign);
    remora_memory_region_delete(read_only);
    OK(remora_domain_close(&other_dom));
    free(other);
    teardown();
}

static const struct {
    const char* name;
    void (*run)(void);
} tests[] = {
    {"quorum", test_quorum},
    {"gpspm", test_gpspm},
    {"failure", test_failure},
    {"bad_arguments", test_bad_arguments},
};

int main(int argc, char** argv) {
    size_t i;
    if (argc != 2) {
        fprintf(stderr, "usage: capi_replica_test NAME\n");
        return 2;
    }
    /* sockets' own thread may write to a pipe of an endpoint the set just closed
     * (docs/providers.md): the broken pipe must not end the test. */
    signal(SIGPIPE, SIG_IGN);
    for (i = 0; i < sizeof tests / sizeof tests[0]; ++i) {
        if (strcmp(argv[1], tests[i].name) == 0) {
            tests[i].run();
            printf("capi_replica_test %s: ok\n", argv[1]);
            return 0;
        }
    }
    fprintf(stderr, "capi_replica_test: no test named %s\n", argv[1]);
    return 2;
}

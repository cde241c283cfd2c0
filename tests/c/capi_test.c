// SPDX-License-Identifier: BSD-3-Clause
/* tests/c/capi_test.c — the C API on real providers over loopback, in C11.
 *
 *   capi_test NAME    runs one test (ctest runs each on tcp and on sockets through FI_PROVIDER)
 *
 * Each test asserts the documented outcome: data written then read back and seen in the peer's
 * memory, atomics' values, immediate data, each flush method and type (or its exact refusal),
 * which CQ a channel wait names, and every error path with its exact code and message.
 */
#define _GNU_SOURCE /* mkstemp, pread, poll; getresuid, getresgid */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "capi_check.h"

enum { REGION = 4096 };

static const struct remora_connection_config default_cfg = {
    .size = sizeof(struct remora_connection_config)};

/* A server region described in the accept's private data; the client parses it. */
struct remote_pair {
    struct pair p;
    alignas(64) unsigned char server_mem[REGION];
    alignas(64) unsigned char client_mem[REGION];
    remora_memory_region *server_mr, *client_mr;
    remora_remote_region* remote; /* the client's copy, parsed from the accept data */
};

static void remote_pair_open(struct remote_pair* rp, const struct remora_connection_config* scfg,
                             const struct remora_connection_config* ccfg,
                             remora_target_service* svc) {
    unsigned char wire[REMORA_DESCRIPTOR_SIZE];
    remora_remote_region* desc = NULL;
    const void* peer = NULL;
    size_t peer_len = 0;
    pair_domains(&rp->p);
    OK(remora_memory_region_create(rp->p.sdom, rp->server_mem, REGION, REMORA_USAGE_ALL,
                                   &rp->server_mr));
    OK(remora_memory_region_create(rp->p.cdom, rp->client_mem, REGION, REMORA_USAGE_ALL,
                                   &rp->client_mr));
    if (svc != NULL) {
        OK(remora_target_service_expose(svc, rp->server_mr, NULL, &desc));
    } else {
        OK(remora_memory_region_describe(rp->server_mr, 0, 0, &desc));
    }
    OK(remora_remote_region_serialize(desc, wire, sizeof wire));
    remora_remote_region_delete(desc);
    pair_connect(&rp->p, scfg, ccfg, wire, sizeof wire, "hello", 5);
    /* each side read the other's private data */
    CHECK(rp->p.request_len == 5 && memcmp(rp->p.request_data, "hello", 5) == 0);
    OK(remora_connection_peer_private_data(rp->p.client, &peer, &peer_len));
    CHECK(peer_len >= sizeof wire); /* tcp may pad private data */
    OK(remora_remote_region_parse(peer, sizeof wire, &rp->remote));
    if (svc != NULL) {
        OK(remora_target_service_serve(svc, rp->p.server));
    }
}

static void remote_pair_close(struct remote_pair* rp) {
    remora_remote_region_delete(rp->remote);
    remora_connection_delete(rp->p.client);
    remora_connection_delete(rp->p.server);
    rp->p.client = rp->p.server = NULL;
    remora_memory_region_delete(rp->server_mr);
    remora_memory_region_delete(rp->client_mr);
    pair_close(&rp->p);
}

static struct remote_pair rp; /* large: static, one test a process */

/* Server side with a progress thread, so one-sided access lands on tcp while it sleeps. */
static const struct remora_connection_config target_cfg = {
    .size = sizeof(struct remora_connection_config), .progress_thread = true};

/* Whether the kernel would let another process of this user attach to this one (ptrace's
 * rules, which the same-host path follows): no Yama restriction, dumpable, one user id and one
 * group id, no capabilities unless root's. */
static bool same_host_attachable(void) {
    FILE* f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = 0;
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    char line[256];
    bool caps = false;
    if (f != NULL) {
        const bool got = fscanf(f, "%d", &scope) == 1;
        fclose(f);
        if (!got || scope != 0)
            return false;
    } else if (access("/proc/sys/kernel/yama/ptrace_scope", F_OK) == 0) {
        return false; /* Yama there but unreadable: counted as restricted */
    }
    if (prctl(PR_GET_DUMPABLE) != 1 || getresuid(&ru, &eu, &su) != 0 ||
        getresgid(&rg, &eg, &sg) != 0 || ru != eu || ru != su || rg != eg || rg != sg)
        return false;
    f = fopen("/proc/self/status", "r");
    while (ru != 0 && f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "CapPrm:", 7) == 0)
            caps = strspn(line + 7, "0\t \n") != strlen(line + 7);
    if (f != NULL)
        fclose(f);
    return !caps;
}

static void test_write_read(void) {
    remora_completion_queue* cq = NULL;
    uint64_t len = 0;
    unsigned usage = 0;
    remote_pair_open(&rp, &target_cfg, &default_cfg, NULL);
    OK(remora_remote_region_info(rp.remote, &len, &usage, NULL));
    CHECK(len == REGION);
    CHECK(usage == (REMORA_USAGE_READ_SOURCE | REMORA_USAGE_WRITE_DESTINATION |
                    REMORA_USAGE_ATOMIC_TARGET | REMORA_USAGE_FLUSH_TARGET));
    OK(remora_connection_cq(rp.p.client, &cq));
    memcpy(rp.client_mem, "remora from C", 13);
    OK(remora_write(rp.p.client, rp.remote, 100, rp.client_mr, 0, 13, 0, &rp));
    expect_completion(cq, REMORA_OP_WRITE, &rp);
    OK(remora_read(rp.p.client, rp.client_mr, 1000, rp.remote, 100, 13, 0, rp.client_mem));
    expect_completion(cq, REMORA_OP_READ, rp.client_mem);
    CHECK(memcmp(rp.client_mem + 1000, "remora from C", 13) == 0);
    /* the read behind the write made it visible in the server's memory */
    CHECK(memcmp(rp.server_mem + 100, "remora from C", 13) == 0);
    remote_pair_close(&rp);
}

static void test_atomics(void) {
    const struct remora_persistence_config pcfg = {.size = sizeof pcfg, .service_depth = 4};
    const struct remora_connection_config scfg = {
        .size = sizeof scfg, .progress_thread = true, .persist = &pcfg};
    const struct remora_connection_config ccfg = {.size = sizeof ccfg, .persist = &pcfg};
    remora_target_service* svc = NULL;
    remora_completion_queue* cq = NULL;
    uint64_t word = 0, result = 0, requests = 0;
    OK(remora_target_service_create(&svc));
    remote_pair_open(&rp, &scfg, &ccfg, svc);
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_atomic_write(rp.p.client, rp.remote, 64, 40, 0, NULL));
    expect_completion(cq, REMORA_OP_ATOMIC, NULL);
    OK(remora_fetch_add(rp.p.client, rp.remote, 64, 2, rp.client_mr, 8, 0, NULL));
    expect_completion(cq, REMORA_OP_ATOMIC, NULL);
    memcpy(&result, rp.client_mem + 8, 8);
    CHECK(result == 40);
    /* a compare-and-swap that does not match leaves the word */
    OK(remora_compare_swap(rp.p.client, rp.remote, 64, 7, 99, rp.client_mr, 16, 0, NULL));
    expect_completion(cq, REMORA_OP_ATOMIC, NULL);
    memcpy(&result, rp.client_mem + 16, 8);
    CHECK(result == 42);
    OK(remora_compare_swap(rp.p.client, rp.remote, 64, 42, 99, rp.client_mr, 24, 0, NULL));
    expect_completion(cq, REMORA_OP_ATOMIC, NULL);
    memcpy(&result, rp.client_mem + 24, 8);
    CHECK(result == 42);
    /* read the word back through the fabric, and see it in the server's memory */
    OK(remora_read(rp.p.client, rp.client_mr, 32, rp.remote, 64, 8, 0, NULL));
    expect_completion(cq, REMORA_OP_READ, NULL);
    memcpy(&result, rp.client_mem + 32, 8);
    memcpy(&word, rp.server_mem + 64, 8);
    CHECK(result == 99 && word == 99);
    /* a misaligned word is refused */
    EXPECT_CODE(remora_fetch_add(rp.p.client, rp.remote, 65, 1, rp.client_mr, 8, 0, NULL),
                REMORA_E_INVALID, "remora_fetch_add: ");
    /* a connection to a service carries only the service's messages */
    EXPECT_CODE(remora_send(rp.p.client, rp.client_mr, 0, 8, 0, NULL), REMORA_E_BAD_STATE,
                "service_depth");
    OK(remora_target_service_stats(svc, &requests, NULL));
    {
        /* native atomics (sockets) or the service answered all four (tcp) */
        struct remora_provider_caps caps = {.size = sizeof caps};
        OK(remora_domain_caps(rp.p.cdom, &caps));
        CHECK(requests == (caps.native_atomics ? 0u : 4u));
    }
    remote_pair_close(&rp);
    remora_target_service_delete(svc);
}

/* GPSPM and the application's messages on one connection (message_size on both sides): a
 * message sent before its receive waits for it while a flush is answered; each reaches only its
 * consumer; a send longer than message_size and message_size without a service depth are
 * refused. */
static void test_service_messages(void) {
    const struct remora_persistence_config pcfg = {
        .size = sizeof pcfg, .service_depth = 4, .message_size = 64};
    const struct remora_persistence_config no_depth = {.size = sizeof no_depth, .message_size = 64};
    const struct remora_connection_config scfg = {
        .size = sizeof scfg, .progress_thread = true, .persist = &pcfg};
    const struct remora_connection_config ccfg = {.size = sizeof ccfg, .persist = &pcfg};
    const struct remora_connection_config bad = {.size = sizeof bad, .persist = &no_depth};
    remora_target_service* svc = NULL;
    remora_completion_queue *cq = NULL, *scq = NULL;
    remora_connection* conn = NULL;
    struct remora_completion c;
    uint64_t requests = 0, refused = 0;
    uint16_t port = 0;
    OK(remora_target_service_create(&svc));
    remote_pair_open(&rp, &scfg, &ccfg, svc);
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_connection_cq(rp.p.server, &scq));
    memcpy(rp.client_mem, "early bird", 10);
    OK(remora_send(rp.p.client, rp.client_mr, 0, 10, 0, (void*)1));
    expect_completion(cq, REMORA_OP_SEND, (void*)1);
    memcpy(rp.client_mem + 64, "flushed!", 8);
    OK(remora_write(rp.p.client, rp.remote, 128, rp.client_mr, 64, 8, 0, NULL));
    expect_completion(cq, REMORA_OP_WRITE, NULL);
    OK(remora_flush(rp.p.client, rp.remote, 128, 8, REMORA_FLUSH_VISIBILITY, REMORA_FLUSH_GPSPM, 0,
                    (void*)2));
    expect_completion(cq, REMORA_OP_FLUSH, (void*)2);
    CHECK(memcmp(rp.server_mem + 128, "flushed!", 8) == 0);
    /* the receive comes late: the message waited for it */
    OK(remora_recv(rp.p.server, rp.server_mr, 512, 64, 0, (void*)3));
    c = expect_completion(scq, REMORA_OP_RECV, (void*)3);
    CHECK(c.bytes == 10 && memcmp(rp.server_mem + 512, "early bird", 10) == 0);
    /* and a reply the other way */
    OK(remora_recv(rp.p.client, rp.client_mr, 1024, 64, 0, (void*)4));
    memcpy(rp.server_mem + 2048, "pong", 4);
    OK(remora_send(rp.p.server, rp.server_mr, 2048, 4, 0, NULL));
    c = expect_completion(cq, REMORA_OP_RECV, (void*)4);
    CHECK(c.bytes == 4 && memcmp(rp.client_mem + 1024, "pong", 4) == 0);
    OK(remora_target_service_stats(svc, &requests, &refused));
    CHECK(requests == 1 && refused == 0); /* no application message reached the service */
    EXPECT_CODE(remora_send(rp.p.client, rp.client_mr, 0, 65, 0, NULL), REMORA_E_TOO_LARGE,
                "message_size");
    OK(remora_listener_port(rp.p.lst, &port));
    EXPECT_CODE(remora_connect(rp.p.cdom, "127.0.0.1", port, &bad, NULL, 0, &conn),
                REMORA_E_INVALID, "message_size needs a service_depth");
    CHECK(conn == NULL);
    remote_pair_close(&rp);
    remora_target_service_delete(svc);
}

static void test_send_recv_imm(void) {
    const struct remora_connection_config scfg = {.size = sizeof scfg, .rcq = true, .tag = 7};
    remora_completion_queue *rcq = NULL, *cq = NULL, *scq = NULL;
    struct remora_completion c;
    remote_pair_open(&rp, &scfg, &default_cfg, NULL);
    OK(remora_connection_rcq(rp.p.server, &rcq));
    OK(remora_connection_cq(rp.p.server, &scq));
    CHECK(rcq != NULL && rcq != scq);
    OK(remora_connection_rcq(rp.p.client, &cq));
    CHECK(cq == NULL); /* the client has no receive CQ */
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_recv(rp.p.server, rp.server_mr, 0, 256, 0, (void*)1));
    OK(remora_recv(rp.p.server, rp.server_mr, 256, 256, 0, (void*)2));
    memcpy(rp.client_mem, "message with imm", 16);
    OK(remora_send_with_imm(rp.p.client, rp.client_mr, 0, 16, 0x1234, 0, NULL));
    expect_completion(cq, REMORA_OP_SEND, NULL);
    c = expect_completion(rcq, REMORA_OP_RECV, (void*)1);
    CHECK(c.has_imm && c.imm == 0x1234 && c.bytes == 16 && c.tag == 7);
    CHECK(memcmp(rp.server_mem, "message with imm", 16) == 0);
    /* a plain send carries no immediate data */
    OK(remora_send(rp.p.client, rp.client_mr, 0, 7, 0, NULL));
    expect_completion(cq, REMORA_OP_SEND, NULL);
    c = expect_completion(rcq, REMORA_OP_RECV, (void*)2);
    CHECK(!c.has_imm && c.bytes == 7);
    /* a write with immediate data: the server sees it arrive with its imm. A receive is posted
     * for it, as verbs consumes one (FI_RX_CQ_DATA); tcp and sockets leave it posted */
    OK(remora_recv(rp.p.server, rp.server_mr, 512, 256, 0, (void*)3));
    memcpy(rp.client_mem, "imm write", 9);
    OK(remora_write_with_imm(rp.p.client, rp.remote, 2048, rp.client_mr, 0, 9, 0xbeef, 0, NULL));
    expect_completion(cq, REMORA_OP_WRITE, NULL);
    for (;;) {
        OK(remora_completion_queue_next(rcq, T_WAIT_MS, &c));
        if (c.op == REMORA_OP_REMOTE_WRITE) {
            break;
        }
    }
    CHECK(c.status == 0 && c.has_imm && c.imm == 0xbeef);
    CHECK(memcmp(rp.server_mem + 2048, "imm write", 9) == 0);
    remote_pair_close(&rp);
}

static char pfile[64];

/* Each flush method and type on a file-backed and a volatile region served by a target service.
 * Their two descriptors do not fit in one accept's private data under verbs (55 bytes): the
 * file's travels in the accept, the volatile region's in a message beside the service
 * (message_size). */
static void test_flush(void) {
    const struct remora_persistence_config pcfg = {
        .size = sizeof pcfg, .service_depth = 4, .message_size = REMORA_DESCRIPTOR_SIZE};
    const struct remora_connection_config scfg = {
        .size = sizeof scfg, .progress_thread = true, .persist = &pcfg};
    const struct remora_connection_config ccfg = {.size = sizeof ccfg, .persist = &pcfg};
    remora_target_service* svc = NULL;
    remora_persistent_region *file = NULL, *mem = NULL;
    remora_remote_region *fdesc = NULL, *mdesc = NULL, *cfile = NULL, *cmem = NULL;
    static unsigned char wire[REMORA_DESCRIPTOR_SIZE], mwire[REMORA_DESCRIPTOR_SIZE],
        inbox[REMORA_DESCRIPTOR_SIZE];
    remora_memory_region *mwire_mr = NULL, *inbox_mr = NULL;
    remora_completion_queue* scq = NULL;
    struct remora_completion c;
    const void* peer = NULL;
    size_t peer_len = 0;
    unsigned persistence = 0;
    int method = -1;
    remora_completion_queue* cq = NULL;
    remora_memory_region* src = NULL;
    char ondisk[16] = {0};
    int fd = -1;
    strcpy(pfile, "/tmp/remora-capi-XXXXXX");
    fd = mkstemp(pfile);
    CHECK(fd >= 0);
    pair_domains(&rp.p);
    {
        /* unguarded: this test reads the file through its own descriptor while it is served */
        const struct remora_persistent_region_config fcfg = {
            .size = sizeof fcfg, .path = pfile, .len = 8192, .create = true, .unguarded = true};
        const struct remora_persistent_region_config mcfg = {.size = sizeof mcfg, .len = 8192};
        OK(remora_persistent_region_open(rp.p.sdom, &fcfg, &file));
        OK(remora_persistent_region_open(rp.p.sdom, &mcfg, &mem));
    }
    {
        /* guarded (the default): the file held alone; another open breaks the lease, and the
         * region says so before that open can complete */
        char gfile[64] = "/tmp/remora-capi-guard-XXXXXX";
        int gfd = mkstemp(gfile);
        CHECK(gfd >= 0);
        close(gfd);
        const struct remora_persistent_region_config gcfg = {
            .size = sizeof gcfg, .path = gfile, .len = 4096, .create = true};
        remora_persistent_region* guarded = NULL;
        remora_persistent_region* second = NULL;
        bool revoked = true;
        OK(remora_persistent_region_open(rp.p.sdom, &gcfg, &guarded));
        OK(remora_persistent_region_revoked(guarded, &revoked));
        CHECK(!revoked);
        EXPECT_CODE(remora_persistent_region_open(rp.p.sdom, &gcfg, &second), REMORA_E_BAD_STATE,
                    "is already served by another region");
        OK(remora_persistent_region_revoked(guarded, &revoked));
        CHECK(!revoked);
        CHECK(open(gfile, O_RDONLY | O_NONBLOCK) == -1 && errno == EWOULDBLOCK);
        OK(remora_persistent_region_revoked(guarded, &revoked));
        CHECK(revoked);
        remora_persistent_region_delete(guarded);
        unlink(gfile);
    }
    OK(remora_target_service_create(&svc));
    OK(remora_target_service_expose(svc, NULL, file, &fdesc));
    OK(remora_target_service_expose(svc, NULL, mem, &mdesc));
    OK(remora_remote_region_serialize(fdesc, wire, sizeof wire));
    OK(remora_remote_region_serialize(mdesc, mwire, sizeof mwire));
    pair_connect(&rp.p, &scfg, &ccfg, wire, sizeof wire, NULL, 0);
    OK(remora_target_service_serve(svc, rp.p.server));
    OK(remora_connection_peer_private_data(rp.p.client, &peer, &peer_len));
    CHECK(peer_len >= sizeof wire);
    OK(remora_remote_region_parse(peer, REMORA_DESCRIPTOR_SIZE, &cfile));
    /* the volatile region's descriptor: a message from registered memory on each side */
    OK(remora_memory_region_create(rp.p.cdom, inbox, sizeof inbox, REMORA_USAGE_RECEIVE,
                                   &inbox_mr));
    OK(remora_memory_region_create(rp.p.sdom, mwire, sizeof mwire, REMORA_USAGE_SEND, &mwire_mr));
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_connection_cq(rp.p.server, &scq));
    OK(remora_recv(rp.p.client, inbox_mr, 0, sizeof inbox, 0, inbox));
    OK(remora_send(rp.p.server, mwire_mr, 0, sizeof mwire, 0, mwire));
    expect_completion(scq, REMORA_OP_SEND, mwire);
    c = expect_completion(cq, REMORA_OP_RECV, inbox);
    CHECK(c.bytes == REMORA_DESCRIPTOR_SIZE);
    OK(remora_remote_region_parse(inbox, c.bytes, &cmem));
    OK(remora_remote_region_info(cfile, NULL, NULL, &persistence));
    CHECK(persistence == (REMORA_PERSISTENCE_PERSISTENT | REMORA_PERSISTENCE_GPSPM));
    OK(remora_remote_region_info(cmem, NULL, NULL, &persistence));
    CHECK(persistence == REMORA_PERSISTENCE_NONE);
    OK(remora_memory_region_create(rp.p.cdom, rp.client_mem, REGION, REMORA_USAGE_WRITE_SOURCE,
                                   &src));

    /* persistence by GPSPM (named explicitly), then read from the file itself */
    memcpy(rp.client_mem, "durable record", 14);
    OK(remora_write(rp.p.client, cfile, 256, src, 0, 14, 0, NULL));
    expect_completion(cq, REMORA_OP_WRITE, NULL);
    OK(remora_flush(rp.p.client, cfile, 256, 14, REMORA_FLUSH_PERSISTENCE, REMORA_FLUSH_GPSPM, 0,
                    (void*)3));
    expect_completion(cq, REMORA_OP_FLUSH, (void*)3);
    CHECK(pread(fd, ondisk, 14, 256) == 14 && memcmp(ondisk, "durable record", 14) == 0);
    /* the strongest flush of a persistent region is persistence, by GPSPM here */
    OK(remora_flush_method_for(rp.p.client, cfile, REMORA_FLUSH_STRONGEST, REMORA_FLUSH_AUTOMATIC,
                               &method));
    CHECK(method == REMORA_FLUSH_GPSPM);
    OK(remora_flush(rp.p.client, cfile, 256, 14, REMORA_FLUSH_STRONGEST, REMORA_FLUSH_AUTOMATIC, 0,
                    NULL));
    expect_completion(cq, REMORA_OP_FLUSH, NULL);
    /* persistence by read-after-write: the target did not declare placed writes durable */
    EXPECT_CODE(remora_flush(rp.p.client, cfile, 256, 14, REMORA_FLUSH_PERSISTENCE,
                             REMORA_FLUSH_READ_AFTER_WRITE, 0, NULL),
                REMORA_E_NOT_SUPPORTED, "remora_flush: ");
    /* visibility by read-after-write */
    memcpy(rp.client_mem, "visible note", 12);
    OK(remora_write(rp.p.client, cfile, 4096, src, 0, 12, REMORA_F_ON_ERROR, NULL));
    OK(remora_flush(rp.p.client, cfile, 4096, 12, REMORA_FLUSH_VISIBILITY,
                    REMORA_FLUSH_READ_AFTER_WRITE, 0, NULL));
    expect_completion(cq, REMORA_OP_FLUSH, NULL);
    {
        void* fmem = NULL;
        size_t flen = 0;
        const remora_memory_region* fmr = NULL;
        OK(remora_persistent_region_region(file, &fmr));
        OK(remora_memory_region_data(fmr, &fmem, &flen));
        CHECK(flen == 8192 && memcmp((char*)fmem + 4096, "visible note", 12) == 0);
    }
    /* the volatile region: persistence refused, visibility by GPSPM and by default works */
    EXPECT_CODE(remora_flush(rp.p.client, cmem, 0, 8, REMORA_FLUSH_PERSISTENCE,
                             REMORA_FLUSH_AUTOMATIC, 0, NULL),
                REMORA_E_NOT_SUPPORTED, "remora_flush: ");
    memcpy(rp.client_mem, "volatile bytes", 14);
    OK(remora_write(rp.p.client, cmem, 128, src, 0, 14, 0, NULL));
    expect_completion(cq, REMORA_OP_WRITE, NULL);
    OK(remora_flush(rp.p.client, cmem, 128, 14, REMORA_FLUSH_VISIBILITY, REMORA_FLUSH_GPSPM, 0,
                    NULL));
    expect_completion(cq, REMORA_OP_FLUSH, NULL);
    OK(remora_flush(rp.p.client, cmem, 128, 14, REMORA_FLUSH_STRONGEST, REMORA_FLUSH_AUTOMATIC, 0,
                    NULL));
    expect_completion(cq, REMORA_OP_FLUSH, NULL);
    {
        void* vmem = NULL;
        size_t vlen = 0;
        const remora_memory_region* vmr = NULL;
        OK(remora_persistent_region_region(mem, &vmr));
        OK(remora_memory_region_data(vmr, &vmem, &vlen));
        CHECK(memcmp((char*)vmem + 128, "volatile bytes", 14) == 0);
    }
    EXPECT_CODE(remora_persistent_region_persist(mem, 0, 8), REMORA_E_NOT_SUPPORTED,
                "remora_persistent_region_persist: ");
    OK(remora_persistent_region_persist(file, 0, 8));
    /* bad flush arguments */
    EXPECT_CODE(remora_flush(rp.p.client, cfile, 0, 8, 9, REMORA_FLUSH_AUTOMATIC, 0, NULL),
                REMORA_E_INVALID, "flush type 9");
    EXPECT_CODE(remora_flush(rp.p.client, cfile, 0, 8, REMORA_FLUSH_VISIBILITY, 9, 0, NULL),
                REMORA_E_INVALID, "flush method 9");

    remora_remote_region_delete(cfile);
    remora_remote_region_delete(cmem);
    remora_remote_region_delete(fdesc);
    remora_remote_region_delete(mdesc);
    remora_connection_delete(rp.p.client);
    remora_connection_delete(rp.p.server);
    rp.p.client = rp.p.server = NULL;
    remora_target_service_delete(svc);
    remora_memory_region_delete(src);
    remora_memory_region_delete(inbox_mr);
    remora_memory_region_delete(mwire_mr);
    remora_persistent_region_delete(file);
    remora_persistent_region_delete(mem);
    pair_close(&rp.p);
    close(fd);
    unlink(pfile);
}

/* Two client connections share one channel: a wait names the connection (tag) and its CQ. */
static void test_channel(void) {
    remora_completion_channel* ch = NULL;
    struct remora_connection_config c1 = {.size = sizeof c1, .channel_shared = true, .tag = 1};
    struct remora_connection_config c2 = {.size = sizeof c2, .channel_shared = true, .tag = 2};
    remora_connection *second_server = NULL, *second = NULL;
    remora_completion_queue *cq2 = NULL, *cq1 = NULL;
    struct remora_channel_event ev;
    struct remora_completion c;
    size_t n = 0, ready = 0;
    int fd = -1;
    OK(remora_completion_channel_create(&ch));
    OK(remora_completion_channel_fd(ch, &fd));
    CHECK(fd >= 0);
    c1.shared_channel = ch;
    c2.shared_channel = ch;
    remote_pair_open(&rp, &target_cfg, &c1, NULL);
    second_server = rp.p.server;
    second = rp.p.client;
    /* a second connection from the same client domain, on the same channel */
    rp.p.server = rp.p.client = NULL;
    pair_connect(&rp.p, &target_cfg, &c2, NULL, 0, NULL, 0);
    OK(remora_connection_cq(rp.p.client, &cq2));
    OK(remora_connection_cq(second, &cq1));
    /* the CQ of a shared channel is not waited on by itself */
    EXPECT_CODE(remora_completion_queue_wait(cq2, 0, &ready), REMORA_E_BAD_STATE,
                "remora_completion_queue_wait: ");
    memcpy(rp.client_mem, "via tag 2", 9);
    OK(remora_write(rp.p.client, rp.remote, 0, rp.client_mr, 0, 9, 0, (void*)22));
    for (;;) {
        OK(remora_completion_channel_wait(ch, T_WAIT_MS, &ev));
        if (ev.ready > 0) {
            break; /* 0: a no_completion wake-up, wait again */
        }
    }
    CHECK(ev.tag == 2 && ev.cq == cq2 && ev.kind == REMORA_CQ);
    OK(remora_completion_queue_poll(ev.cq, &c, 1, &n));
    CHECK(n == 1 && c.op == REMORA_OP_WRITE && c.context == (void*)22 && c.tag == 2);
    /* the first connection: remora_connection_wait on the shared channel names its CQ */
    OK(remora_write(second, rp.remote, 16, rp.client_mr, 0, 9, 0, (void*)11));
    for (;;) {
        OK(remora_connection_wait(second, T_WAIT_MS, &ev));
        if (ev.ready > 0) {
            break;
        }
    }
    CHECK(ev.tag == 1 && ev.cq == cq1);
    OK(remora_completion_queue_poll(ev.cq, &c, 1, &n));
    CHECK(n == 1 && c.context == (void*)11 && c.tag == 1);
    remora_connection_delete(second);
    remora_connection_delete(second_server);
    remora_completion_channel_delete(ch);
    remote_pair_close(&rp);
}

/* One connection's CQ and RCQ share its own channel: the wait names the RCQ for a receive. */
static void test_channel_rcq(void) {
    const struct remora_connection_config scfg = {
        .size = sizeof scfg, .rcq = true, .channel_shared = true, .tag = 9};
    remora_completion_queue *rcq = NULL, *cq = NULL;
    struct remora_channel_event ev;
    struct remora_completion c;
    size_t n = 0;
    remote_pair_open(&rp, &scfg, &default_cfg, NULL);
    OK(remora_connection_rcq(rp.p.server, &rcq));
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_recv(rp.p.server, rp.server_mr, 0, 64, 0, (void*)8));
    memcpy(rp.client_mem, "to the rcq", 10);
    OK(remora_send(rp.p.client, rp.client_mr, 0, 10, 0, NULL));
    expect_completion(cq, REMORA_OP_SEND, NULL);
    for (;;) {
        OK(remora_connection_wait(rp.p.server, T_WAIT_MS, &ev));
        if (ev.ready > 0) {
            break; /* 0: a no_completion wake-up (tcp signals both CQs), wait again */
        }
    }
    CHECK(ev.kind == REMORA_RCQ && ev.cq == rcq && ev.tag == 9);
    OK(remora_completion_queue_poll(ev.cq, &c, 1, &n));
    CHECK(n == 1 && c.op == REMORA_OP_RECV && c.context == (void*)8 && c.bytes == 10);
    CHECK(memcmp(rp.server_mem, "to the rcq", 10) == 0);
    remote_pair_close(&rp);
}

/* Separate channels: the CQ's fd in the caller's own poll(2), armed first. */
static void test_cq_fd(void) {
    remora_completion_queue* cq = NULL;
    struct remora_completion c;
    size_t n = 0;
    int fd = -1, rounds = 0;
    struct remora_channel_event ev;
    remote_pair_open(&rp, &target_cfg, &default_cfg, NULL);
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_completion_queue_fd(cq, &fd));
    CHECK(fd >= 0);
    /* waiting on the connection is for shared channels only */
    EXPECT_CODE(remora_connection_wait(rp.p.client, 0, &ev), REMORA_E_BAD_STATE,
                "remora_connection_wait: ");
    OK(remora_write(rp.p.client, rp.remote, 0, rp.client_mr, 0, 64, 0, (void*)5));
    for (;;) {
        bool armed = false;
        OK(remora_completion_queue_poll(cq, &c, 1, &n));
        if (n == 1) {
            break;
        }
        OK(remora_completion_queue_arm(cq, &armed));
        if (armed) {
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            CHECK(poll(&pfd, 1, T_WAIT_MS) == 1);
        }
        CHECK(++rounds < 1000);
    }
    CHECK(c.op == REMORA_OP_WRITE && c.status == 0 && c.context == (void*)5);
    remote_pair_close(&rp);
}

/* no_channel: the CQ has no fd, a write completes through the (polling) wait, and it contradicts
 * channel_shared. */
static void test_no_channel(void) {
    remora_completion_queue* cq = NULL;
    struct remora_completion c;
    size_t n = 0, ready = 0;
    int fd = 0, rounds = 0;
    struct remora_connection_config cfg = {.size = sizeof cfg, .no_channel = true};
    struct remora_connection_config both = {
        .size = sizeof both, .no_channel = true, .channel_shared = true};
    remote_pair_open(&rp, &target_cfg, &cfg, NULL);
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_completion_queue_fd(cq, &fd));
    CHECK(fd == -1);
    OK(remora_write(rp.p.client, rp.remote, 0, rp.client_mr, 0, 64, 0, (void*)6));
    do {
        OK(remora_completion_queue_wait(cq, T_WAIT_MS, &ready));
        OK(remora_completion_queue_poll(cq, &c, 1, &n));
        CHECK(++rounds < 1000);
    } while (n == 0);
    CHECK(c.op == REMORA_OP_WRITE && c.status == 0 && c.context == (void*)6);
    remora_connection* none = NULL;
    EXPECT_CODE(remora_connect(rp.p.cdom, "127.0.0.1", 1, &both, NULL, 0, &none), REMORA_E_INVALID,
                "no_channel and channel_shared");
    CHECK(none == NULL);
    remote_pair_close(&rp);
}

/* Two connections complete on one shared CQ; their tags tell them apart. */
static void test_shared_cq(void) {
    remora_shared_completion_queue* scq = NULL;
    remora_completion_queue *q = NULL, *own = NULL;
    struct remora_connection_config c1 = {.size = sizeof c1, .tag = 1};
    struct remora_connection_config c2 = {.size = sizeof c2, .tag = 2};
    remora_connection *first = NULL, *first_server = NULL;
    struct remora_completion c;
    unsigned seen = 0;
    int i;
    pair_domains(&rp.p);
    OK(remora_shared_completion_queue_create(rp.p.cdom, NULL, &scq));
    OK(remora_shared_completion_queue_queue(scq, &q));
    c1.shared_cq = scq;
    c2.shared_cq = scq;
    OK(remora_memory_region_create(rp.p.sdom, rp.server_mem, REGION, REMORA_USAGE_ALL,
                                   &rp.server_mr));
    OK(remora_memory_region_create(rp.p.cdom, rp.client_mem, REGION, REMORA_USAGE_ALL,
                                   &rp.client_mr));
    OK(remora_memory_region_describe(rp.server_mr, 0, 0, &rp.remote));
    pair_connect(&rp.p, &target_cfg, &c1, NULL, 0, NULL, 0);
    first = rp.p.client;
    first_server = rp.p.server;
    pair_connect(&rp.p, &target_cfg, &c2, NULL, 0, NULL, 0);
    OK(remora_connection_cq(first, &own));
    CHECK(own == q); /* the connection's CQ is the shared one */
    OK(remora_write(first, rp.remote, 0, rp.client_mr, 0, 8, 0, NULL));
    OK(remora_write(rp.p.client, rp.remote, 8, rp.client_mr, 0, 8, 0, NULL));
    for (i = 0; i < 2; ++i) {
        OK(remora_completion_queue_next(q, T_WAIT_MS, &c));
        CHECK(c.op == REMORA_OP_WRITE && c.status == 0 && (c.tag == 1 || c.tag == 2));
        seen |= 1u << c.tag;
    }
    CHECK(seen == 6);
    remora_connection_delete(first);
    remora_connection_delete(first_server);
    remora_shared_completion_queue_delete(scq);
    remote_pair_close(&rp);
}

/* From a CQ back to its connection: each connection's own CQ and RCQ name it, a shared
 * channel's event names the connection that fired, a shared CQ names none. */
static void test_cq_connection(void) {
    remora_completion_channel* ch = NULL;
    remora_shared_completion_queue* scq = NULL;
    remora_completion_queue *q = NULL, *rq = NULL;
    remora_connection* servers[2];
    remora_connection* clients[2];
    remora_connection* named = NULL;
    struct remora_connection_config scfg[2] = {
        {.size = sizeof scfg[0], .channel_shared = true, .tag = 10},
        {.size = sizeof scfg[1], .channel_shared = true, .rcq = true, .tag = 11}};
    struct remora_channel_event ev;
    struct remora_completion c;
    size_t n = 0;
    unsigned seen = 0;
    int i;
    pair_domains(&rp.p);
    OK(remora_completion_channel_create(&ch));
    OK(remora_memory_region_create(rp.p.sdom, rp.server_mem, REGION, REMORA_USAGE_ALL,
                                   &rp.server_mr));
    OK(remora_memory_region_create(rp.p.cdom, rp.client_mem, REGION, REMORA_USAGE_ALL,
                                   &rp.client_mr));
    for (i = 0; i < 2; ++i) {
        scfg[i].shared_channel = ch;
        pair_connect(&rp.p, &scfg[i], NULL, NULL, 0, NULL, 0);
        servers[i] = rp.p.server;
        clients[i] = rp.p.client;
        OK(remora_recv(servers[i], rp.server_mr, (size_t)i * 64, 64, 0, NULL));
    }
    for (i = 0; i < 2; ++i) {
        OK(remora_connection_cq(servers[i], &q));
        OK(remora_completion_queue_connection(q, &named));
        CHECK(named == servers[i]);
        OK(remora_connection_rcq(servers[i], &rq));
        CHECK((rq != NULL) == (i == 1));
        if (rq != NULL) {
            named = NULL;
            OK(remora_completion_queue_connection(rq, &named));
            CHECK(named == servers[i]);
        }
        OK(remora_connection_cq(clients[i], &q));
        OK(remora_completion_queue_connection(q, &named));
        CHECK(named == clients[i]);
    }
    /* Each client sends one message: the channel's event names the server that received it. */
    for (i = 0; i < 2; ++i) {
        OK(remora_send(clients[i], rp.client_mr, 0, 16, 0, NULL));
        OK(remora_connection_cq(clients[i], &q));
        expect_completion(q, REMORA_OP_SEND, NULL);
    }
    while (seen != 3) {
        OK(remora_completion_channel_wait(ch, T_WAIT_MS, &ev));
        CHECK(ev.tag == 10 || ev.tag == 11);
        OK(remora_completion_queue_connection(ev.cq, &named));
        CHECK(named == servers[ev.tag - 10]);
        OK(remora_completion_queue_poll(ev.cq, &c, 1, &n));
        if (n == 1) {
            CHECK(c.op == REMORA_OP_RECV && c.status == 0 && c.tag == ev.tag);
            seen |= 1u << (ev.tag - 10);
        }
    }
    /* A shared CQ names no connection (its completions' tags do). */
    OK(remora_shared_completion_queue_create(rp.p.sdom, NULL, &scq));
    OK(remora_shared_completion_queue_queue(scq, &q));
    named = servers[0];
    OK(remora_completion_queue_connection(q, &named));
    CHECK(named == NULL);
    EXPECT_CODE(remora_completion_queue_connection(NULL, &named), REMORA_E_INVALID, "cq is NULL");
    EXPECT_CODE(remora_completion_queue_connection(q, NULL), REMORA_E_INVALID, "conn is NULL");
    remora_shared_completion_queue_delete(scq);
    for (i = 0; i < 2; ++i) {
        remora_connection_delete(clients[i]);
        remora_connection_delete(servers[i]);
    }
    rp.p.client = rp.p.server = NULL;
    remora_completion_channel_delete(ch);
    remora_memory_region_delete(rp.server_mr);
    remora_memory_region_delete(rp.client_mr);
    pair_close(&rp.p);
}

/* Descriptor bytes from a peer are validated field by field. */
static void test_bad_descriptor(void) {
    remora_domain* dom = NULL;
    remora_memory_region* mr = NULL;
    remora_remote_region *r = NULL, *s = NULL;
    unsigned char wire[REMORA_DESCRIPTOR_SIZE], bad[REMORA_DESCRIPTOR_SIZE];
    OK(remora_domain_open(NULL, &dom));
    OK(remora_memory_region_create(dom, rp.server_mem, REGION, REMORA_USAGE_WRITE_DESTINATION,
                                   &mr));
    OK(remora_memory_region_describe(mr, 0, 0, &r));
    OK(remora_remote_region_serialize(r, wire, sizeof wire));
    EXPECT_CODE(remora_remote_region_serialize(r, wire, 39), REMORA_E_TOO_LARGE, "takes 40 bytes");
    remora_remote_region_delete(r);
    r = NULL;
    /* short */
    EXPECT_CODE(remora_remote_region_parse(wire, 31, &r), REMORA_E_MALFORMED_DESCRIPTOR,
                "remora_remote_region_parse: ");
    CHECK(r == NULL);
    /* wrong version */
    memcpy(bad, wire, sizeof bad);
    bad[0] = 9;
    EXPECT_CODE(remora_remote_region_parse(bad, sizeof bad, &r), REMORA_E_MALFORMED_DESCRIPTOR,
                "version");
    /* reserved bytes set */
    memcpy(bad, wire, sizeof bad);
    bad[31] = 1;
    EXPECT_CODE(remora_remote_region_parse(bad, sizeof bad, &r), REMORA_E_MALFORMED_DESCRIPTOR,
                "reserved");
    /* zero length */
    memcpy(bad, wire, sizeof bad);
    memset(bad + 12, 0, 8);
    EXPECT_CODE(remora_remote_region_parse(bad, sizeof bad, &r), REMORA_E_MALFORMED_DESCRIPTOR,
                "length");
    CHECK(r == NULL);
    EXPECT_CODE(remora_remote_region_parse(NULL, 32, &r), REMORA_E_INVALID, "bytes_in is NULL");
    /* the good bytes parse, and a slice grants nothing beyond its range */
    OK(remora_remote_region_parse(wire, sizeof wire, &r));
    EXPECT_CODE(remora_remote_region_slice(r, REGION - 8, 16, &s), REMORA_E_OUT_OF_RANGE,
                "remora_remote_region_slice: ");
    EXPECT_CODE(remora_remote_region_slice(r, 0, 0, &s), REMORA_E_INVALID,
                "remora_remote_region_slice: ");
    OK(remora_remote_region_slice(r, 8, 16, &s));
    remora_remote_region_delete(s);
    remora_remote_region_delete(r);
    /* describing beyond the region */
    EXPECT_CODE(remora_memory_region_describe(mr, REGION, 1, &r), REMORA_E_OUT_OF_RANGE,
                "remora_memory_region_describe: ");
    /* the domain refuses to close under its region, and says how many hold it */
    EXPECT_CODE(remora_domain_close(&dom), REMORA_E_BAD_STATE, "remora_domain_close: ");
    CHECK(dom != NULL);
    remora_memory_region_delete(mr);
    OK(remora_domain_close(&dom));
    CHECK(dom == NULL);
}

/* Operations: bounds, usages, flags, NULLs, timeouts; nothing is posted. */
static void test_bad_operations(void) {
    remora_memory_region* ro = NULL;
    remora_remote_region* read_only = NULL;
    remora_completion_queue* cq = NULL;
    size_t n = 99, inflight = 99;
    struct remora_completion c;
    remote_pair_open(&rp, &target_cfg, &default_cfg, NULL);
    OK(remora_connection_cq(rp.p.client, &cq));
    EXPECT_CODE(remora_write(rp.p.client, rp.remote, REGION - 4, rp.client_mr, 0, 8, 0, NULL),
                REMORA_E_OUT_OF_RANGE, "remora_write: ");
    EXPECT_CODE(remora_read(rp.p.client, rp.client_mr, REGION - 4, rp.remote, 0, 8, 0, NULL),
                REMORA_E_OUT_OF_RANGE, "remora_read: ");
    /* a descriptor that grants reads only */
    OK(remora_memory_region_create(rp.p.sdom, rp.server_mem, REGION, REMORA_USAGE_READ_SOURCE,
                                   &ro));
    OK(remora_memory_region_describe(ro, 0, 0, &read_only));
    EXPECT_CODE(remora_write(rp.p.client, read_only, 0, rp.client_mr, 0, 8, 0, NULL),
                REMORA_E_ACCESS_DENIED, "remora_write: ");
    EXPECT_CODE(remora_flush(rp.p.client, read_only, 0, 8, REMORA_FLUSH_VISIBILITY,
                             REMORA_FLUSH_AUTOMATIC, 0, NULL),
                REMORA_E_ACCESS_DENIED, "remora_flush: ");
    EXPECT_CODE(remora_write(rp.p.client, rp.remote, 0, rp.client_mr, 0, 8, 8u, NULL),
                REMORA_E_INVALID, "unknown flag bits 8");
    EXPECT_CODE(remora_write(rp.p.client, rp.remote, 0, rp.client_mr, 0, 8,
                             REMORA_F_ON_ERROR | REMORA_F_AT_POST, NULL),
                REMORA_E_INVALID, "exclude each other");
    EXPECT_CODE(remora_write(NULL, rp.remote, 0, rp.client_mr, 0, 8, 0, NULL), REMORA_E_INVALID,
                "remora_write: conn is NULL");
    EXPECT_CODE(remora_write(rp.p.client, NULL, 0, rp.client_mr, 0, 8, 0, NULL), REMORA_E_INVALID,
                "remora_write: dst is NULL");
    EXPECT_CODE(remora_read(rp.p.client, NULL, 0, rp.remote, 0, 8, 0, NULL), REMORA_E_INVALID,
                "remora_read: dst is NULL");
    EXPECT_CODE(remora_completion_queue_poll(cq, NULL, 1, &n), REMORA_E_INVALID, "out is NULL");
    EXPECT_CODE(remora_completion_queue_next(cq, -1, &c), REMORA_E_INVALID, "timeout_ms is -1");
    EXPECT_CODE(remora_memory_region_create(rp.p.cdom, rp.client_mem, REGION, 0, &ro),
                REMORA_E_INVALID, "REMORA_USAGE_");
    EXPECT_CODE(remora_memory_region_create(rp.p.cdom, rp.client_mem, REGION, 0x100, &ro),
                REMORA_E_INVALID, "usage 256");
    EXPECT_CODE(remora_memory_region_create(rp.p.cdom, NULL, REGION, REMORA_USAGE_SEND, &ro),
                REMORA_E_INVALID, "addr is NULL");
    /* nothing was posted: no completion, nothing in flight */
    OK(remora_connection_in_flight(rp.p.client, &inflight));
    CHECK(inflight == 0);
    EXPECT_CODE(remora_completion_queue_next(cq, 0, &c), REMORA_E_TIMED_OUT,
                "remora_completion_queue_next: ");
    /* the error message stays until the next failure */
    OK(remora_connection_in_flight(rp.p.client, &inflight));
    CHECK(strstr(remora_last_error_message(), "remora_completion_queue_next: ") != NULL);
    remora_remote_region_delete(read_only);
    remora_memory_region_delete(ro);
    remote_pair_close(&rp);
}

/* Connection setup: private data limits, refusal, rejection with data. */
static void test_bad_connect(void) {
    struct remora_provider_caps caps = {.size = sizeof caps};
    unsigned char big[4096];
    remora_connection* conn = NULL;
    remora_connection_request* req = NULL;
    uint16_t port = 0, dead_port = 0;
    remora_listener* dead = NULL;
    memset(big, 'x', sizeof big);
    pair_domains(&rp.p);
    OK(remora_domain_caps(rp.p.cdom, &caps));
    CHECK(caps.cm_data_size > 0 && caps.cm_data_size < sizeof big);
    CHECK(caps.provider[0] != '\0' && caps.endpoint == REMORA_ENDPOINT_MSG);
    OK(remora_listener_port(rp.p.lst, &port));
    EXPECT_CODE(
        remora_connect(rp.p.cdom, "127.0.0.1", port, NULL, big, caps.cm_data_size + 1, &conn),
        REMORA_E_TOO_LARGE, "remora_connect: ");
    CHECK(conn == NULL);
    EXPECT_CODE(remora_connect(rp.p.cdom, "127.0.0.1", port, NULL, NULL, 5, &conn),
                REMORA_E_INVALID, "pdata is NULL with a length of 5");
    EXPECT_CODE(remora_connect(rp.p.cdom, NULL, port, NULL, NULL, 0, &conn), REMORA_E_INVALID,
                "host is NULL");
    /* nobody listens on a port a closed listener had */
    OK(remora_listener_create(rp.p.sdom, "127.0.0.1", 0, &dead));
    OK(remora_listener_port(dead, &dead_port));
    remora_listener_delete(dead);
    EXPECT_CODE(remora_connect(rp.p.cdom, "127.0.0.1", dead_port, NULL, NULL, 0, &conn),
                REMORA_E_CONNECTION_REFUSED, "remora_connect: ");
    /* no request within the timeout */
    EXPECT_CODE(remora_listener_get_request(rp.p.lst, 0, &req), REMORA_E_TIMED_OUT,
                "remora_listener_get_request: ");
    EXPECT_CODE(remora_listener_get_request(rp.p.lst, -5, &req), REMORA_E_INVALID,
                "timeout_ms is -5");
    OK(remora_domain_close(&rp.p.cdom));
    /* the listener still holds the server domain */
    EXPECT_CODE(remora_domain_close(&rp.p.sdom), REMORA_E_BAD_STATE, "remora_domain_close: ");
    CHECK(rp.p.sdom != NULL);
    remora_listener_delete(rp.p.lst);
    OK(remora_domain_close(&rp.p.sdom));
}

/* A server that rejects with data: the client reads it from remora_last_error_data; an
 * oversize accept leaves the request answerable. */
struct rejecter {
    remora_listener* lst;
    int rc_accept, rc_reject;
};

static void* reject_thread(void* arg) {
    struct rejecter* r = arg;
    remora_connection_request* req = NULL;
    remora_connection* conn = NULL;
    unsigned char big[4096];
    memset(big, 'y', sizeof big);
    OK(remora_listener_get_request(r->lst, T_WAIT_MS, &req));
    r->rc_accept = remora_connection_request_accept(req, NULL, big, sizeof big, &conn);
    r->rc_reject = remora_connection_request_reject(req, "go away", 7);
    remora_connection_request_delete(req);
    return NULL;
}

static void test_reject(void) {
    struct rejecter r = {0};
    remora_domain* dom = NULL;
    remora_connection* conn = NULL;
    uint16_t port = 0;
    pthread_t t;
    const void* data = NULL;
    size_t len = 0;
    OK(remora_domain_open(NULL, &dom));
    OK(remora_listener_create(dom, "127.0.0.1", 0, &r.lst));
    OK(remora_listener_port(r.lst, &port));
    CHECK(pthread_create(&t, NULL, reject_thread, &r) == 0);
    EXPECT_CODE(remora_connect(dom, "127.0.0.1", port, NULL, NULL, 0, &conn), REMORA_E_REJECTED,
                "remora_connect: ");
    remora_last_error_data(&data, &len);
    CHECK(len >= 7 && memcmp(data, "go away", 7) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(r.rc_accept == REMORA_E_TOO_LARGE);
    CHECK(r.rc_reject == 0);
    remora_listener_delete(r.lst);
    OK(remora_domain_close(&dom));
}

/* Sized configuration structs: older (smaller) sizes work, larger and tiny ones are refused. */
static void test_config_size(void) {
    struct {
        struct remora_connection_config cfg;
        char newer_fields[16];
    } newer;
    struct remora_connection_config old = {0};
    struct remora_domain_config dcfg = {.size = sizeof dcfg + 8};
    struct remora_provider_caps caps = {.size = sizeof caps + 1};
    remora_domain* dom = NULL;
    remora_connection* conn = NULL;
    uint16_t port = 0;
    EXPECT_CODE(remora_domain_open(&dcfg, &dom), REMORA_E_INVALID, "larger than this library's");
    dcfg.size = 4;
    EXPECT_CODE(remora_domain_open(&dcfg, &dom), REMORA_E_INVALID, "smaller than its size field");
    dcfg.size = sizeof dcfg;
    dcfg.endpoint = 7;
    EXPECT_CODE(remora_domain_open(&dcfg, &dom), REMORA_E_INVALID, "endpoint 7");
    CHECK(dom == NULL);
    EXPECT_CODE(remora_domain_open(NULL, NULL), REMORA_E_INVALID, "dom is NULL");
    pair_domains(&rp.p);
    EXPECT_CODE(remora_domain_caps(rp.p.cdom, &caps), REMORA_E_INVALID,
                "struct remora_provider_caps");
    /* a caps struct from an older header: only its first fields are written */
    {
        struct remora_provider_caps small;
        memset(&small, 0xab, sizeof small);
        small.size = offsetof(struct remora_provider_caps, endpoint);
        OK(remora_domain_caps(rp.p.cdom, &small));
        CHECK(small.provider[0] != '\0' &&
              small.size == offsetof(struct remora_provider_caps, endpoint));
        CHECK(((unsigned char*)&small)[offsetof(struct remora_provider_caps, endpoint)] == 0xab);
    }
    OK(remora_listener_port(rp.p.lst, &port));
    memset(&newer, 0, sizeof newer);
    newer.cfg.size = sizeof newer;
    EXPECT_CODE(remora_connect(rp.p.cdom, "127.0.0.1", port, &newer.cfg, NULL, 0, &conn),
                REMORA_E_INVALID, "struct remora_connection_config size");
    CHECK(conn == NULL);
    /* an older header's struct ended before rcq: the rest takes defaults; it connects */
    old.size = offsetof(struct remora_connection_config, rcq);
    old.sq_size = 8;
    old.tag = 12345; /* past the old size: ignored */
    pair_connect(&rp.p, NULL, &old, NULL, 0, NULL, 0);
    {
        remora_completion_queue* cq = NULL;
        uint64_t tag = 1;
        int kind = -1;
        OK(remora_connection_cq(rp.p.client, &cq));
        OK(remora_completion_queue_info(cq, &kind, &tag));
        CHECK(tag == 0 && kind == REMORA_CQ);
    }
    pair_close(&rp.p);
}

static void test_strerror(void) {
    int code;
    CHECK(strcmp(remora_strerror(0), "success") == 0);
    CHECK(strcmp(remora_strerror(REMORA_E_INVALID), "invalid argument") == 0);
    CHECK(strcmp(remora_strerror(REMORA_E_MALFORMED_DESCRIPTOR), "malformed descriptor") == 0);
    CHECK(strcmp(remora_strerror(REMORA_E_UNKNOWN), "unknown failure") == 0);
    CHECK(strcmp(remora_strerror(-1000), "unknown error code") == 0);
    CHECK(strcmp(remora_strerror(1), "unknown error code") == 0);
    for (code = REMORA_E_UNKNOWN; code < 0; ++code) {
        CHECK(strcmp(remora_strerror(code), "unknown error code") != 0);
    }
}

/* RDM peers on shm: exchange addresses, attach, write and read back. */
static void test_rdm_shm(void) {
    const struct remora_domain_config dcfg = {
        .size = sizeof dcfg, .provider = "shm", .endpoint = REMORA_ENDPOINT_RDM};
    const struct remora_connection_config tcfg = {.size = sizeof tcfg, .progress_thread = true};
    remora_domain* dom = NULL;
    remora_connection *a = NULL, *b = NULL;
    const void *addr_a = NULL, *addr_b = NULL;
    size_t len_a = 0, len_b = 0;
    remora_memory_region *amr = NULL, *bmr = NULL;
    remora_remote_region* desc = NULL;
    remora_completion_queue* cq = NULL;
    OK(remora_domain_open(&dcfg, &dom));
    OK(remora_open_peer(dom, &tcfg, &a));
    OK(remora_open_peer(dom, NULL, &b));
    OK(remora_connection_local_address(a, &addr_a, &len_a));
    OK(remora_connection_local_address(b, &addr_b, &len_b));
    CHECK(len_a > 0 && len_b > 0);
    EXPECT_CODE(remora_connection_attach(b, "junk", 4), REMORA_E_INVALID,
                "remora_connection_attach: ");
    OK(remora_connection_attach(a, addr_b, len_b));
    OK(remora_connection_attach(b, addr_a, len_a));
    OK(remora_memory_region_create(dom, rp.server_mem, REGION, REMORA_USAGE_ALL, &amr));
    OK(remora_memory_region_create(dom, rp.client_mem, REGION, REMORA_USAGE_ALL, &bmr));
    OK(remora_memory_region_describe(amr, 0, 0, &desc));
    OK(remora_connection_cq(b, &cq));
    memcpy(rp.client_mem, "over shm", 8);
    OK(remora_write(b, desc, 40, bmr, 0, 8, 0, NULL));
    expect_completion(cq, REMORA_OP_WRITE, NULL);
    OK(remora_read(b, bmr, 100, desc, 40, 8, 0, NULL));
    expect_completion(cq, REMORA_OP_READ, NULL);
    CHECK(memcmp(rp.client_mem + 100, "over shm", 8) == 0);
    CHECK(memcmp(rp.server_mem + 40, "over shm", 8) == 0);
    remora_remote_region_delete(desc);
    remora_connection_delete(b);
    remora_connection_delete(a);
    remora_memory_region_delete(amr);
    remora_memory_region_delete(bmr);
    OK(remora_domain_close(&dom));
}

/* A tcp or sockets MSG domain opens shm beside it by default (unless no_same_host): its regions'
 * descriptors (version 3) carry their virtual address for a peer on the same host. Version 2's
 * 32 bytes still parse. Run without FI_PROVIDER, which would leave shm out, and without
 * REMORA_SAME_HOST, which would decide instead. */
static void test_same_host(void) {
    const char* const provs[] = {"tcp", "sockets"};
    size_t i;
    unsetenv("REMORA_SAME_HOST");
    for (i = 0; i < 2; ++i) {
        int off;
        for (off = 0; off < 2; ++off) {
            const struct remora_domain_config dcfg = {
                .size = sizeof dcfg, .provider = provs[i], .no_same_host = off != 0};
            struct remora_provider_caps caps = {.size = sizeof caps};
            remora_domain* dom = NULL;
            remora_memory_region* mr = NULL;
            remora_remote_region *desc = NULL, *old = NULL;
            unsigned char wire[REMORA_DESCRIPTOR_SIZE];
            const uint64_t want = off ? 0 : (uint64_t)(uintptr_t)(rp.server_mem + 64);
            uint64_t got = 0;
            int b;
            OK(remora_domain_open(&dcfg, &dom));
            OK(remora_domain_caps(dom, &caps));
            CHECK(caps.same_host == !off);
            OK(remora_memory_region_create(dom, rp.server_mem, REGION,
                                           REMORA_USAGE_WRITE_DESTINATION, &mr));
            OK(remora_memory_region_describe(mr, 64, 128, &desc));
            OK(remora_remote_region_serialize(desc, wire, sizeof wire));
            CHECK(sizeof wire == 40 && wire[0] == 3);
            for (b = 7; b >= 0; --b) {
                got = (got << 8) | wire[32 + b];
            }
            CHECK(got == want);
            /* the same descriptor as version 2: read, without a same-host address */
            wire[0] = 2;
            OK(remora_remote_region_parse(wire, 32, &old));
            EXPECT_CODE(remora_remote_region_parse(wire, sizeof wire, &old),
                        REMORA_E_MALFORMED_DESCRIPTOR, "oversize");
            remora_remote_region_delete(old);
            remora_remote_region_delete(desc);
            remora_memory_region_delete(mr);
            OK(remora_domain_close(&dom));
        }
    }
    {
        /* The deprecated same_host asks for the default (on); with no_same_host it is refused.
         * A struct from a header before no_same_host (its size ends before it) gets the
         * default too. */
        const struct remora_domain_config old_on = {
            .size = sizeof old_on, .provider = "tcp", .same_host = true};
        const struct remora_domain_config both = {
            .size = sizeof both, .provider = "tcp", .same_host = true, .no_same_host = true};
        struct remora_domain_config older = {.provider = "tcp", .no_same_host = true};
        struct remora_provider_caps caps = {.size = sizeof caps};
        remora_domain* dom = NULL;
        OK(remora_domain_open(&old_on, &dom));
        OK(remora_domain_caps(dom, &caps));
        CHECK(caps.same_host);
        OK(remora_domain_close(&dom));
        EXPECT_CODE(remora_domain_open(&both, &dom), REMORA_E_INVALID, "no_same_host");
        CHECK(dom == NULL);
        older.size = offsetof(struct remora_domain_config, no_same_host);
        OK(remora_domain_open(&older, &dom));
        OK(remora_domain_caps(dom, &caps));
        CHECK(caps.same_host);
        OK(remora_domain_close(&dom));
        older.size = sizeof older;
        OK(remora_domain_open(&older, &dom));
        OK(remora_domain_caps(dom, &caps));
        CHECK(!caps.same_host);
        OK(remora_domain_close(&dom));
    }
    /* A pair of this process on the same-host path (REMORA_SAME_HOST=process lets two endpoints
     * of one process take it), and again with the client's no_same_host. */
    setenv("REMORA_SAME_HOST", "process", 1);
    for (i = 0; i < 2; ++i) {
        const struct remora_domain_config dcfg = {.size = sizeof dcfg, .provider = "tcp"};
        const struct remora_connection_config off = {.size = sizeof off, .no_same_host = true};
        struct pair p = {0};
        bool on = i == 0;
        OK(remora_domain_open(&dcfg, &p.sdom));
        OK(remora_domain_open(&dcfg, &p.cdom));
        OK(remora_listener_create(p.sdom, "127.0.0.1", 0, &p.lst));
        pair_connect(&p, &default_cfg, i == 0 ? &default_cfg : &off, NULL, 0, NULL, 0);
        OK(remora_connection_same_host(p.client, &on));
        CHECK(on == (i == 0 && same_host_attachable()));
        OK(remora_connection_same_host(p.server, &on));
        CHECK(on == (i == 0 && same_host_attachable()));
        EXPECT_CODE(remora_connection_same_host(NULL, &on), REMORA_E_INVALID, "NULL");
        pair_close(&p);
    }
    unsetenv("REMORA_SAME_HOST");
}

/* RDM peer liveness on shm: the peer endpoint (in this process) never progresses, so it answers
 * no probe: the survivor reports REMORA_CONN_LOST once, its outstanding receive completes with
 * REMORA_E_DISCONNECTED, and later posts fail with it. MSG connections refuse liveness. */
static void test_rdm_liveness(void) {
    const struct remora_domain_config dcfg = {
        .size = sizeof dcfg, .provider = "shm", .endpoint = REMORA_ENDPOINT_RDM};
    const struct remora_domain_config tcp_cfg = {.size = sizeof tcp_cfg, .provider = "tcp"};
    const struct remora_connection_config cfg = {
        .size = sizeof cfg, .connect_timeout_ms = 200, .liveness_ms = 100};
    remora_domain *dom = NULL, *tcp = NULL;
    remora_connection *a = NULL, *b = NULL, *msg = NULL;
    size_t n = 1;
    remora_memory_region* mr = NULL;
    remora_completion_queue* cq = NULL;
    struct remora_completion c;
    int event = -1;
    OK(remora_domain_open(&tcp_cfg, &tcp));
    EXPECT_CODE(remora_connect(tcp, "127.0.0.1", 1, &cfg, NULL, 0, &msg), REMORA_E_NOT_SUPPORTED,
                "liveness");
    OK(remora_domain_close(&tcp));
    OK(remora_domain_open(&dcfg, &dom));
    OK(remora_open_peer(dom, &cfg, &a));
    OK(remora_open_peer(dom, NULL, &b));
    attach_each_other(a, b);
    OK(remora_memory_region_create(dom, rp.client_mem, REGION, REMORA_USAGE_ALL, &mr));
    OK(remora_recv(a, mr, 0, 64, 0, &event));
    OK(remora_connection_next_event(a, T_WAIT_MS, &event));
    CHECK(event == REMORA_CONN_LOST);
    OK(remora_connection_cq(a, &cq));
    OK(remora_completion_queue_next(cq, T_WAIT_MS, &c));
    CHECK(c.op == REMORA_OP_RECV && c.status == REMORA_E_DISCONNECTED && c.context == &event);
    OK(remora_connection_in_flight(a, &n));
    CHECK(n == 0);
    EXPECT_CODE(remora_recv(a, mr, 0, 64, 0, NULL), REMORA_E_DISCONNECTED, "lost");
    EXPECT_CODE(remora_connection_next_event(a, 0, &event), REMORA_E_TIMED_OUT, "");
    remora_connection_delete(b);
    remora_connection_delete(a);
    remora_memory_region_delete(mr);
    OK(remora_domain_close(&dom));
}

/* A shared receive queue on RDM peers (sockets): receives posted once serve two peers, each
 * completing on its peer's own receive CQ with its tag; shm has none and says so. */
static void test_rdm_srq(void) {
    const struct remora_domain_config dcfg = {
        .size = sizeof dcfg, .provider = "sockets", .endpoint = REMORA_ENDPOINT_RDM};
    const struct remora_domain_config shm_cfg = {
        .size = sizeof shm_cfg, .provider = "shm", .endpoint = REMORA_ENDPOINT_RDM};
    struct remora_shared_receive_queue_config qcfg = {.size = sizeof qcfg, .depth = 4, .tag = 9};
    struct remora_connection_config scfg = {.size = sizeof scfg, .rcq = true};
    remora_domain *dom = NULL, *shm = NULL;
    remora_shared_receive_queue *srq = NULL, *none = NULL;
    remora_connection *s[2] = {NULL, NULL}, *c[2] = {NULL, NULL};
    remora_memory_region *smr = NULL, *cmr = NULL;
    remora_completion_queue* rcq = NULL;
    const void* addr = NULL;
    size_t len = 0;
    int i;
    OK(remora_domain_open(&shm_cfg, &shm));
    EXPECT_CODE(remora_shared_receive_queue_create(shm, &qcfg, &none), REMORA_E_NOT_SUPPORTED,
                "shm (RDM endpoints) has no shared receive context; use a receive_pool");
    CHECK(none == NULL);
    OK(remora_domain_close(&shm));
    OK(remora_domain_open(&dcfg, &dom));
    OK(remora_shared_receive_queue_create(dom, &qcfg, &srq));
    scfg.srq = srq;
    for (i = 0; i < 2; ++i) {
        scfg.tag = (uint64_t)i + 1;
        OK(remora_open_peer(dom, &scfg, &s[i]));
        OK(remora_open_peer(dom, NULL, &c[i]));
        OK(remora_connection_local_address(c[i], &addr, &len));
        OK(remora_connection_attach(s[i], addr, len));
        OK(remora_connection_local_address(s[i], &addr, &len));
        OK(remora_connection_attach(c[i], addr, len));
    }
    OK(remora_memory_region_create(dom, rp.server_mem, REGION, REMORA_USAGE_ALL, &smr));
    OK(remora_memory_region_create(dom, rp.client_mem, REGION, REMORA_USAGE_ALL, &cmr));
    OK(remora_shared_receive_queue_recv(srq, smr, 0, 64, 0, (void*)1));
    OK(remora_shared_receive_queue_recv(srq, smr, 64, 64, 0, (void*)2));
    memcpy(rp.client_mem, "peer one", 8);
    memcpy(rp.client_mem + 64, "peer two", 8);
    for (i = 0; i < 2; ++i) {
        struct remora_completion got;
        OK(remora_send(c[i], cmr, (size_t)i * 64, 8, 0, NULL));
        OK(remora_connection_rcq(s[i], &rcq));
        got = expect_completion(rcq, REMORA_OP_RECV, (void*)(uintptr_t)(i + 1));
        CHECK(got.tag == (uint64_t)i + 1 && got.bytes == 8);
        CHECK(memcmp(rp.server_mem + i * 64, i == 0 ? "peer one" : "peer two", 8) == 0);
    }
    for (i = 0; i < 2; ++i) {
        remora_connection_delete(s[i]);
        remora_connection_delete(c[i]);
    }
    remora_shared_receive_queue_delete(srq);
    remora_memory_region_delete(smr);
    remora_memory_region_delete(cmr);
    OK(remora_domain_close(&dom));
}

/* ---- slot pools, parked posts, callbacks, gather_write, copies ---- */

/* What callbacks saw, for the thread that waits for them (bounded by T_WAIT_MS). */
struct seen {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    int status;
    void* context;
    int op;
    remora_held_units* lease;
};
static struct seen seen = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL, 0, NULL};

static void seen_reset(void) {
    pthread_mutex_lock(&seen.mu);
    seen.calls = 0;
    seen.status = 1;
    seen.context = NULL;
    seen.op = 0;
    seen.lease = NULL;
    pthread_mutex_unlock(&seen.mu);
}

/* Waits until `calls` callbacks ran (CHECK fails after T_WAIT_MS). */
static void seen_wait(int calls) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += T_WAIT_MS / 1000;
    pthread_mutex_lock(&seen.mu);
    while (seen.calls < calls) {
        CHECK(pthread_cond_timedwait(&seen.cv, &seen.mu, &until) == 0);
    }
    pthread_mutex_unlock(&seen.mu);
}

static void on_acquire(void* ctx, int status, remora_held_units* lease) {
    pthread_mutex_lock(&seen.mu);
    seen.calls++;
    seen.status = status;
    seen.context = ctx;
    seen.lease = lease;
    pthread_cond_broadcast(&seen.cv);
    pthread_mutex_unlock(&seen.mu);
}

static void on_completion(const struct remora_completion* c) {
    pthread_mutex_lock(&seen.mu);
    seen.calls++;
    seen.status = c->status;
    seen.context = c->context;
    seen.op = c->op;
    pthread_cond_broadcast(&seen.cv);
    pthread_mutex_unlock(&seen.mu);
}

static void test_slot_pool(void) {
    struct remora_slot_pool_config cfg = {.size = sizeof cfg, .capacity = {.sq = 2, .cq = 2}};
    const struct remora_units one = {.sq = 1, .cq = 1}, two = {.sq = 2, .cq = 2};
    const struct remora_units huge = {.sq = 3}, none = {0};
    remora_slot_pool *pool = NULL, *forbid = NULL;
    remora_held_units *a = NULL, *b = NULL, *c = NULL;
    struct remora_units u;
    size_t waiting = 99, n = 99;
    bool parked = false;
    int tag = 0;
    EXPECT_CODE(remora_slot_pool_create(NULL, &pool), REMORA_E_INVALID, "cfg is NULL");
    cfg.capacity.sq = 0;
    cfg.capacity.cq = 0;
    EXPECT_CODE(remora_slot_pool_create(&cfg, &pool), REMORA_E_INVALID, "capacity is empty");
    cfg.capacity = two;
    cfg.policy = 9;
    EXPECT_CODE(remora_slot_pool_create(&cfg, &pool), REMORA_E_INVALID, "policy 9");
    cfg.policy = REMORA_EXHAUSTION_BACKPRESSURE;
    OK(remora_slot_pool_create(&cfg, &pool));
    OK(remora_slot_pool_try_acquire(pool, &one, &a));
    OK(remora_held_units_held(a, &u));
    CHECK(u.sq == 1 && u.cq == 1 && u.recv == 0);
    EXPECT_CODE(remora_slot_pool_try_acquire(pool, &two, &b), REMORA_E_WOULD_BLOCK,
                "remora_slot_pool_try_acquire: ");
    EXPECT_CODE(remora_slot_pool_try_acquire(pool, &huge, &b), REMORA_E_TOO_LARGE,
                "remora_slot_pool_try_acquire: ");
    EXPECT_CODE(remora_slot_pool_try_acquire(pool, &none, &b), REMORA_E_INVALID,
                "remora_slot_pool_try_acquire: ");
    EXPECT_CODE(remora_slot_pool_try_acquire(NULL, &one, &b), REMORA_E_INVALID, "pool is NULL");
    CHECK(b == NULL);
    OK(remora_slot_pool_available(pool, &u, &waiting));
    CHECK(u.sq == 1 && u.cq == 1 && waiting == 0);
    /* acquire: granted at once (its callback ran here), then parked until a release */
    seen_reset();
    OK(remora_slot_pool_acquire(pool, &one, REMORA_NO_DEADLINE, on_acquire, &tag, &parked));
    CHECK(!parked && seen.calls == 1 && seen.status == 0 && seen.context == &tag);
    b = seen.lease;
    seen_reset();
    OK(remora_slot_pool_acquire(pool, &two, REMORA_NO_DEADLINE, on_acquire, &tag, &parked));
    CHECK(parked && seen.calls == 0);
    OK(remora_slot_pool_available(pool, NULL, &waiting));
    CHECK(waiting == 1);
    EXPECT_CODE(remora_slot_pool_try_acquire(pool, &one, &c), REMORA_E_WOULD_BLOCK,
                "remora_slot_pool_try_acquire: "); /* the parked request goes first */
    remora_held_units_delete(a);
    CHECK(seen.calls == 0); /* one unit of each back: not enough yet */
    remora_held_units_delete(b);
    CHECK(seen.calls == 1 && seen.status == 0 && seen.lease != NULL); /* ran in the release */
    OK(remora_held_units_held(seen.lease, &u));
    CHECK(u.sq == 2 && u.cq == 2);
    a = seen.lease;
    /* a deadline fires on its own (the pool's timer thread) */
    seen_reset();
    OK(remora_slot_pool_acquire(pool, &one, 50, on_acquire, NULL, &parked));
    CHECK(parked);
    seen_wait(1);
    CHECK(seen.status == REMORA_E_TIMED_OUT && seen.lease == NULL);
    /* cancel_all ends the parked ones */
    seen_reset();
    OK(remora_slot_pool_acquire(pool, &one, REMORA_NO_DEADLINE, on_acquire, NULL, &parked));
    CHECK(parked);
    OK(remora_slot_pool_cancel_all(pool, &n));
    CHECK(n == 1 && seen.calls == 1 && seen.status == REMORA_E_CANCELED);
    EXPECT_CODE(remora_slot_pool_acquire(pool, &one, -1, on_acquire, NULL, &parked),
                REMORA_E_INVALID, "timeout_ms is -1");
    EXPECT_CODE(remora_slot_pool_acquire(pool, &one, 10, NULL, NULL, &parked), REMORA_E_INVALID,
                "done is NULL");
    EXPECT_CODE(remora_slot_pool_acquire(pool, &huge, 10, on_acquire, NULL, &parked),
                REMORA_E_TOO_LARGE, "remora_slot_pool_acquire: ");
    CHECK(seen.calls == 1); /* refused: no callback */
    remora_held_units_delete(a);
    OK(remora_slot_pool_available(pool, &u, &waiting));
    CHECK(u.sq == 2 && u.cq == 2 && waiting == 0);
    /* forbid: exhaustion is a sizing bug, and nothing parks */
    cfg.policy = REMORA_EXHAUSTION_FORBID;
    OK(remora_slot_pool_create(&cfg, &forbid));
    OK(remora_slot_pool_try_acquire(forbid, &two, &a));
    EXPECT_CODE(remora_slot_pool_try_acquire(forbid, &one, &b), REMORA_E_BAD_STATE,
                "remora_slot_pool_try_acquire: ");
    EXPECT_CODE(remora_slot_pool_acquire(forbid, &one, 10, on_acquire, NULL, &parked),
                REMORA_E_BAD_STATE, "remora_slot_pool_acquire: ");
    remora_held_units_delete(a);
    remora_held_units_delete(NULL);
    remora_slot_pool_delete(forbid);
    remora_slot_pool_delete(pool);
    remora_slot_pool_delete(NULL);
}

/* Parked posts and callbacks on a client drawing on a pool with room for one operation (with
 * `pool`, its units but one are held here meanwhile). */
static void parked_posts(remora_connection* client, remora_completion_queue* cq,
                         const remora_remote_region* remote, const remora_memory_region* mr,
                         remora_slot_pool* pool) {
    struct remora_op_options o = {.size = sizeof o, .context = &rp};
    struct remora_completion c;
    const struct remora_units one = {.sq = 1, .cq = 1};
    remora_held_units* held = NULL;
    size_t n = 99;
    int ctx = 0;
    if (pool != NULL) {
        OK(remora_slot_pool_try_acquire(pool, &one, &held));
    }
    OK(remora_write_ex(client, remote, 0, mr, 0, 8, &o));
    /* the pool's one unit is out until the completion is read */
    EXPECT_CODE(remora_write_ex(client, remote, 0, mr, 0, 8, &o), REMORA_E_WOULD_BLOCK,
                "remora_write_ex: ");
    o.park_ms = 50; /* nobody else reads the CQ: the deadline ends it */
    EXPECT_CODE(remora_read_ex(client, mr, 64, remote, 0, 8, &o), REMORA_E_TIMED_OUT,
                "remora_read_ex: ");
    {
        const struct remora_remote_segment seg = {remote, 16, 8};
        EXPECT_CODE(remora_gather_write(client, &seg, 1, mr, 0, &o), REMORA_E_TIMED_OUT,
                    "remora_gather_write: ");
    }
    OK(remora_connection_parked(client, &n));
    CHECK(n == 0);
    /* queued: returns at once, posted by the library once the unit comes back */
    seen_reset();
    o.park_ms = REMORA_NO_DEADLINE;
    o.park_mode = REMORA_PARK_QUEUE;
    o.callback = on_completion;
    o.context = &ctx;
    OK(remora_write_ex(client, remote, 8, mr, 0, 8, &o));
    OK(remora_connection_parked(client, &n));
    CHECK(n == 1 && seen.calls == 0);
    expect_completion(cq, REMORA_OP_WRITE, &rp); /* gives the unit back */
    for (;;) { /* its callback runs on this thread, the CQ's reader */
        size_t got = 0;
        OK(remora_completion_queue_poll(cq, &c, 1, &got));
        CHECK(got == 0);
        pthread_mutex_lock(&seen.mu);
        n = (size_t)seen.calls;
        pthread_mutex_unlock(&seen.mu);
        if (n == 1) {
            break;
        }
        OK(remora_completion_queue_wait(cq, T_WAIT_MS, &n));
    }
    CHECK(seen.status == 0 && seen.context == &ctx && seen.op == REMORA_OP_WRITE);
    /* cancel_parked ends a queued post: its callback says so */
    seen_reset();
    o.callback = NULL;
    o.park_mode = REMORA_PARK_BLOCK;
    o.park_ms = 0;
    o.context = NULL;
    OK(remora_write_ex(client, remote, 0, mr, 0, 8, &o));
    o.park_ms = REMORA_NO_DEADLINE;
    o.park_mode = REMORA_PARK_QUEUE;
    o.callback = on_completion;
    o.context = &ctx;
    OK(remora_send_ex(client, mr, 0, 8, &o));
    OK(remora_connection_cancel_parked(client, &n));
    CHECK(n == 1);
    seen_wait(1);
    CHECK(seen.status == REMORA_E_CANCELED && seen.context == &ctx && seen.op == REMORA_OP_SEND);
    expect_completion(cq, REMORA_OP_WRITE, NULL);
    /* refusals change nothing */
    o.callback = NULL; /* queued without a callback */
    EXPECT_CODE(remora_write_ex(client, remote, 0, mr, 0, 8, &o), REMORA_E_INVALID,
                "remora_write_ex: ");
    o.park_mode = 7;
    EXPECT_CODE(remora_write_ex(client, remote, 0, mr, 0, 8, &o), REMORA_E_INVALID, "park_mode 7");
    o.park_mode = REMORA_PARK_BLOCK;
    o.park_ms = -5;
    EXPECT_CODE(remora_write_ex(client, remote, 0, mr, 0, 8, &o), REMORA_E_INVALID,
                "park_ms -5 is negative");
    o.park_ms = 0;
    o.size = sizeof o + 8;
    EXPECT_CODE(remora_write_ex(client, remote, 0, mr, 0, 8, &o), REMORA_E_INVALID,
                "remora_op_options");
    EXPECT_CODE(remora_write_ex(NULL, remote, 0, mr, 0, 8, NULL), REMORA_E_INVALID, "conn is NULL");
    EXPECT_CODE(remora_write_ex(client, remote, 4090, mr, 0, 8, NULL), REMORA_E_OUT_OF_RANGE,
                "remora_write_ex: ");
    EXPECT_CODE(remora_connection_parked(client, NULL), REMORA_E_INVALID, "n is NULL");
    OK(remora_connection_in_flight(client, &n));
    CHECK(n == 0);
    remora_held_units_delete(held);
}

static void test_slots_parked(void) {
    struct remora_slot_pool_config pcfg = {.size = sizeof pcfg, .capacity = {.sq = 1, .cq = 1}};
    struct remora_connection_config ccfg = {.size = sizeof ccfg};
    remora_slot_pool* pool = NULL;
    remora_completion_queue* cq = NULL;
    OK(remora_slot_pool_create(&pcfg, &pool));
    ccfg.slots = pool;
    remote_pair_open(&rp, &target_cfg, &ccfg, NULL);
    remora_slot_pool_delete(pool); /* the connection holds it */
    OK(remora_connection_cq(rp.p.client, &cq));
    parked_posts(rp.p.client, cq, rp.remote, rp.client_mr, NULL);
    remote_pair_close(&rp);
}

/* A forbid pool refuses a post beyond its size with BAD_STATE; signal_every > 1 is refused. */
static void test_slots_forbid(void) {
    struct remora_slot_pool_config pcfg = {
        .size = sizeof pcfg, .capacity = {.sq = 1, .cq = 1}, .policy = REMORA_EXHAUSTION_FORBID};
    struct remora_connection_config ccfg = {.size = sizeof ccfg};
    remora_slot_pool* pool = NULL;
    remora_connection* bad = NULL;
    uint16_t port = 0;
    remora_completion_queue* cq = NULL;
    OK(remora_slot_pool_create(&pcfg, &pool));
    ccfg.slots = pool;
    remote_pair_open(&rp, &target_cfg, &ccfg, NULL);
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_write(rp.p.client, rp.remote, 0, rp.client_mr, 0, 8, 0, NULL));
    EXPECT_CODE(remora_write(rp.p.client, rp.remote, 0, rp.client_mr, 0, 8, 0, NULL),
                REMORA_E_BAD_STATE, "remora_write: ");
    expect_completion(cq, REMORA_OP_WRITE, NULL);
    OK(remora_write(rp.p.client, rp.remote, 0, rp.client_mr, 0, 8, 0, NULL));
    expect_completion(cq, REMORA_OP_WRITE, NULL);
    ccfg.signal_every = 4;
    OK(remora_listener_port(rp.p.lst, &port));
    EXPECT_CODE(remora_connect(rp.p.cdom, "127.0.0.1", port, &ccfg, NULL, 0, &bad),
                REMORA_E_INVALID, "remora_connect: ");
    CHECK(bad == NULL);
    remora_slot_pool_delete(pool);
    remote_pair_close(&rp);
}

/* The refusals remora_gather_write and remora_scatter_read share (`call`), nothing posted: its
 * errors start with `name`; `segs_null` is the message for a NULL segment array. */
typedef int (*multi_key_fn)(remora_connection*, const struct remora_remote_segment*, size_t,
                            const remora_memory_region*, size_t, const struct remora_op_options*);
static void multi_key_refusals(multi_key_fn call, const char* name, const char* segs_null,
                               remora_connection* client, const remora_memory_region* mr,
                               const remora_remote_region* s1, const remora_remote_region* s2) {
    struct remora_remote_segment seg[REMORA_MAX_GATHER_PARTS + 1];
    struct remora_op_options o = {.size = sizeof o, .flags = REMORA_F_AT_POST};
    size_t i, n = 99;
    seg[0] = (struct remora_remote_segment){s1, 10, 8};
    seg[1] = (struct remora_remote_segment){NULL, 20, 13};
    EXPECT_CODE(call(client, seg, 0, mr, 0, NULL), REMORA_E_INVALID, name);
    EXPECT_CODE(call(client, seg, 2, mr, 0, NULL), REMORA_E_INVALID, name);
    seg[1] = (struct remora_remote_segment){s2, 500, 13};
    EXPECT_CODE(call(client, seg, 2, mr, 0, NULL), REMORA_E_OUT_OF_RANGE, "part 1");
    seg[1] = (struct remora_remote_segment){s2, 20, 13};
    EXPECT_CODE(call(client, seg, 2, mr, REGION - 8, NULL), REMORA_E_OUT_OF_RANGE, name);
    EXPECT_CODE(call(client, seg, 2, mr, 0, &o), REMORA_E_INVALID, name);
    for (i = 0; i <= REMORA_MAX_GATHER_PARTS; ++i) {
        seg[i] = (struct remora_remote_segment){s1, i, 1};
    }
    EXPECT_CODE(call(client, seg, REMORA_MAX_GATHER_PARTS + 1, mr, 0, NULL), REMORA_E_TOO_LARGE,
                name);
    EXPECT_CODE(call(client, NULL, 2, mr, 0, NULL), REMORA_E_INVALID, segs_null);
    EXPECT_CODE(call(NULL, seg, 2, mr, 0, NULL), REMORA_E_INVALID, "conn is NULL");
    OK(remora_connection_in_flight(client, &n));
    CHECK(n == 0);
}

/* scatter_read of two slices of the peer's memory (in this process: s1 and s2 at 1024 and 3072)
 * into consecutive local bytes, then its refusals. */
static void scatter(remora_connection* client, remora_completion_queue* cq,
                    const remora_remote_region* s1, const remora_remote_region* s2,
                    const remora_memory_region* mr, unsigned char* local, unsigned char* peer_mem) {
    struct remora_remote_segment seg[2] = {{s1, 40, 8}, {s2, 60, 11}};
    struct remora_op_options o = {.size = sizeof o, .context = &seg};
    struct remora_completion c;
    memcpy(peer_mem + 1024 + 40, "scatter-", 8);
    memcpy(peer_mem + 3072 + 60, "read-in-two", 11);
    memset(local + 2490, 0, 40);
    OK(remora_scatter_read(client, seg, 2, mr, 2500, &o));
    c = expect_completion(cq, REMORA_OP_READ, &seg);
    CHECK(c.bytes == 19 && c.failed_part == 0);
    CHECK(memcmp(local + 2500, "scatter-read-in-two", 19) == 0);
    CHECK(local[2499] == 0 && local[2519] == 0);
    multi_key_refusals(remora_scatter_read, "remora_scatter_read: ", "src is NULL", client, mr, s1,
                       s2);
    EXPECT_CODE(remora_scatter_read(client, seg, 2, NULL, 0, NULL), REMORA_E_INVALID,
                "dst is NULL");
}

/* gather_write over two slices of the peer's region, then its refusals; then scatter_read over
 * the same slices. */
static void gather(remora_connection* client, remora_completion_queue* cq,
                   const remora_remote_region* remote, const remora_memory_region* mr,
                   unsigned char* local, unsigned char* peer_mem) {
    remora_remote_region *s1 = NULL, *s2 = NULL;
    struct remora_remote_segment seg[2];
    struct remora_op_options o = {.size = sizeof o, .context = &seg};
    struct remora_completion c;
    OK(remora_remote_region_slice(remote, 1024, 512, &s1));
    OK(remora_remote_region_slice(remote, 3072, 512, &s2));
    memcpy(local, "gathered-in-two-parts", 21);
    seg[0] = (struct remora_remote_segment){s1, 10, 8};
    seg[1] = (struct remora_remote_segment){s2, 20, 13};
    OK(remora_gather_write(client, seg, 2, mr, 0, &o));
    c = expect_completion(cq, REMORA_OP_WRITE, &seg);
    CHECK(c.bytes == 21 && c.failed_part == 0);
    /* a read behind the write makes it visible; then look at the peer's memory */
    OK(remora_read(client, mr, 2048, remote, 1024 + 10, 8, 0, NULL));
    expect_completion(cq, REMORA_OP_READ, NULL);
    OK(remora_read(client, mr, 2100, remote, 3072 + 20, 13, 0, NULL));
    expect_completion(cq, REMORA_OP_READ, NULL);
    CHECK(memcmp(local + 2048, "gathere", 7) == 0 &&
          memcmp(local + 2100, "-in-two-parts", 13) == 0);
    if (peer_mem != NULL) {
        CHECK(memcmp(peer_mem + 1034, "gathered", 8) == 0);
        CHECK(memcmp(peer_mem + 3092, "-in-two-parts", 13) == 0);
    }
    multi_key_refusals(remora_gather_write, "remora_gather_write: ", "dst is NULL", client, mr, s1,
                       s2);
    if (peer_mem != NULL) {
        scatter(client, cq, s1, s2, mr, local, peer_mem);
    }
    remora_remote_region_delete(s1);
    remora_remote_region_delete(s2);
}

static void test_gather_write(void) {
    remora_completion_queue* cq = NULL;
    remote_pair_open(&rp, &target_cfg, &default_cfg, NULL);
    OK(remora_connection_cq(rp.p.client, &cq));
    gather(rp.p.client, cq, rp.remote, rp.client_mr, rp.client_mem, rp.server_mem);
    remote_pair_close(&rp);
}

static void test_scatter_read(void) {
    remora_completion_queue* cq = NULL;
    remora_remote_region *s1 = NULL, *s2 = NULL;
    remote_pair_open(&rp, &target_cfg, &default_cfg, NULL);
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_remote_region_slice(rp.remote, 1024, 512, &s1));
    OK(remora_remote_region_slice(rp.remote, 3072, 512, &s2));
    scatter(rp.p.client, cq, s1, s2, rp.client_mr, rp.client_mem, rp.server_mem);
    remora_remote_region_delete(s1);
    remora_remote_region_delete(s2);
    remote_pair_close(&rp);
}

/* write_copy and send_copy through a pool of one bounce buffer. */
static void test_copy(void) {
    const struct remora_connection_config scfg = {.size = sizeof scfg, .progress_thread = true};
    struct remora_buffer_pool_config bcfg = {.size = sizeof bcfg, .buffers = 1, .buffer_size = 64};
    struct remora_connection_config ccfg = {.size = sizeof ccfg};
    remora_buffer_pool* bp = NULL;
    remora_completion_queue *cq = NULL, *scq = NULL;
    unsigned char big[65] = {0};
    size_t avail = 99, cap = 0, bsize = 0;
    pair_domains(&rp.p);
    bcfg.usage = 0x100;
    EXPECT_CODE(remora_buffer_pool_create(rp.p.cdom, &bcfg, &bp), REMORA_E_INVALID, "usage 256");
    bcfg.usage = 0;
    OK(remora_buffer_pool_create(rp.p.cdom, &bcfg, &bp));
    OK(remora_buffer_pool_info(bp, &avail, &cap, &bsize));
    CHECK(avail == 1 && cap == 1 && bsize == 64);
    EXPECT_CODE(remora_domain_close(&rp.p.cdom), REMORA_E_BAD_STATE, "remora_domain_close: ");
    CHECK(rp.p.cdom != NULL); /* the pool uses it */
    ccfg.bounce = bp;
    rp.remote = pair_connect_region(&rp.p, rp.server_mem, rp.client_mem, REGION, &rp.server_mr,
                                    &rp.client_mr, &scfg, &ccfg);
    remora_buffer_pool_delete(bp); /* the connection holds it */
    OK(remora_connection_cq(rp.p.client, &cq));
    OK(remora_connection_cq(rp.p.server, &scq));
    {
        char data[16] = "copied at post";
        OK(remora_write_copy(rp.p.client, rp.remote, 200, data, 15, NULL));
        memset(data, 'x', sizeof data); /* free at once */
        /* the one buffer is held until the completion is read */
        EXPECT_CODE(remora_write_copy(rp.p.client, rp.remote, 0, data, 4, NULL),
                    REMORA_E_WOULD_BLOCK, "remora_write_copy: ");
        expect_completion(cq, REMORA_OP_WRITE, NULL);
        OK(remora_read(rp.p.client, rp.client_mr, 0, rp.remote, 200, 15, 0, NULL));
        expect_completion(cq, REMORA_OP_READ, NULL);
        CHECK(memcmp(rp.client_mem, "copied at post", 15) == 0);
        OK(remora_recv(rp.p.server, rp.server_mr, 1024, 64, 0, (void*)3));
        OK(remora_send_copy(rp.p.client, "sent copy", 9, NULL));
        expect_completion(cq, REMORA_OP_SEND, NULL);
        CHECK(expect_completion(scq, REMORA_OP_RECV, (void*)3).bytes == 9);
        CHECK(memcmp(rp.server_mem + 1024, "sent copy", 9) == 0);
    }
    EXPECT_CODE(remora_write_copy(rp.p.client, rp.remote, 0, big, sizeof big, NULL),
                REMORA_E_TOO_LARGE, "remora_write_copy: ");
    EXPECT_CODE(remora_send_copy(rp.p.client, NULL, 4, NULL), REMORA_E_INVALID, "data is NULL");
    /* the server has no bounce pool */
    EXPECT_CODE(remora_send_copy(rp.p.server, "x", 1, NULL), REMORA_E_BAD_STATE,
                "remora_send_copy: ");
    remote_pair_close(&rp);
}

/* The same on shm RDM peers in one process: gather_write, scatter_read, and parked posts on a
 * slot pool. */
static void test_rdm_shm_ext(void) {
    const struct remora_domain_config dcfg = {
        .size = sizeof dcfg, .provider = "shm", .endpoint = REMORA_ENDPOINT_RDM};
    const struct remora_connection_config tcfg = {.size = sizeof tcfg, .progress_thread = true};
    struct remora_slot_pool_config pcfg = {.size = sizeof pcfg, .capacity = {.sq = 2, .cq = 2}};
    struct remora_connection_config bcfg = {.size = sizeof bcfg};
    remora_slot_pool* pool = NULL;
    remora_domain* dom = NULL;
    remora_connection *a = NULL, *b = NULL;
    remora_memory_region *amr = NULL, *bmr = NULL;
    remora_remote_region* desc = NULL;
    remora_completion_queue* cq = NULL;
    OK(remora_slot_pool_create(&pcfg, &pool));
    bcfg.slots = pool;
    OK(remora_domain_open(&dcfg, &dom));
    OK(remora_open_peer(dom, &tcfg, &a));
    OK(remora_open_peer(dom, &bcfg, &b));
    attach_each_other(a, b);
    OK(remora_memory_region_create(dom, rp.server_mem, REGION, REMORA_USAGE_ALL, &amr));
    OK(remora_memory_region_create(dom, rp.client_mem, REGION, REMORA_USAGE_ALL, &bmr));
    OK(remora_memory_region_describe(amr, 0, 0, &desc));
    OK(remora_connection_cq(b, &cq));
    parked_posts(b, cq, desc, bmr, pool);
    gather(b, cq, desc, bmr, rp.client_mem, rp.server_mem); /* and scatter_read */
    remora_remote_region_delete(desc);
    remora_connection_delete(b);
    remora_connection_delete(a);
    remora_slot_pool_delete(pool);
    remora_memory_region_delete(amr);
    remora_memory_region_delete(bmr);
    OK(remora_domain_close(&dom));
}

/* The next connection event of conn (bounded by T_WAIT_MS). */
static int next_event(remora_connection* conn) {
    int ev = -1;
    OK(remora_connection_next_event(conn, T_WAIT_MS, &ev));
    return ev;
}

struct async_server {
    remora_listener* lst;
    const struct remora_connection_config* cfg;
    remora_connection* conn;
    int rc;
    atomic_int done;
};

static void* accept_async_thread(void* arg) {
    struct async_server* s = arg;
    remora_connection_request* req = NULL;
    s->rc = remora_listener_get_request(s->lst, T_WAIT_MS, &req);
    if (s->rc == 0) {
        s->rc = remora_connection_request_accept_async(req, s->cfg, "ok", 2, &s->conn);
        remora_connection_request_delete(req);
    }
    atomic_store(&s->done, 1);
    return NULL;
}

/* connect_async and accept_async: each side learns the outcome as an event; then a send lands
 * in a shared receive queue on the server (tcp and sockets have one). */
static void test_async_srq(void) {
    struct remora_shared_receive_queue_config qcfg = {.size = sizeof qcfg, .depth = 4, .tag = 99};
    struct remora_connection_config scfg = {.size = sizeof scfg};
    const struct remora_persistence_config pcfg2 = {.size = sizeof pcfg2, .service_depth = 2};
    struct async_server s = {0};
    remora_shared_receive_queue* srq = NULL;
    remora_completion_queue *qcq = NULL, *ccq = NULL;
    struct remora_completion c;
    const void* pdata = NULL;
    size_t plen = 0, depth = 0, posted = 0, conns = 0;
    uint16_t port = 0;
    pthread_t t;
    pair_domains(&rp.p);
    OK(remora_memory_region_create(rp.p.sdom, rp.server_mem, REGION, REMORA_USAGE_ALL,
                                   &rp.server_mr));
    OK(remora_memory_region_create(rp.p.cdom, rp.client_mem, REGION, REMORA_USAGE_ALL,
                                   &rp.client_mr));
    qcfg.size = sizeof qcfg + 1;
    EXPECT_CODE(remora_shared_receive_queue_create(rp.p.sdom, &qcfg, &srq), REMORA_E_INVALID,
                "remora_shared_receive_queue_config");
    qcfg.size = sizeof qcfg;
    OK(remora_shared_receive_queue_create(rp.p.sdom, &qcfg, &srq));
    OK(remora_shared_receive_queue_cq(srq, &qcq));
    OK(remora_shared_receive_queue_recv(srq, rp.server_mr, 0, 64, 0, (void*)5));
    EXPECT_CODE(remora_shared_receive_queue_recv(srq, rp.server_mr, REGION - 8, 64, 0, NULL),
                REMORA_E_OUT_OF_RANGE, "remora_shared_receive_queue_recv: ");
    EXPECT_CODE(remora_shared_receive_queue_recv(NULL, rp.server_mr, 0, 64, 0, NULL),
                REMORA_E_INVALID, "srq is NULL");
    scfg.srq = srq;
    scfg.persist = &pcfg2;
    OK(remora_listener_port(rp.p.lst, &port));
    s.lst = rp.p.lst;
    s.cfg = &scfg; /* first request: refused (an srq with a service depth) */
    CHECK(pthread_create(&t, NULL, accept_async_thread, &s) == 0);
    OK(remora_connect_async(rp.p.cdom, "127.0.0.1", port, NULL, "hi", 2, &rp.p.client));
    /* while it is set up, only receives may be posted */
    EXPECT_CODE(remora_send(rp.p.client, rp.client_mr, 0, 8, 0, NULL), REMORA_E_BAD_STATE,
                "remora_send: ");
    CHECK(next_event(rp.p.client) == REMORA_CONN_REJECTED);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(s.rc == REMORA_E_INVALID && s.conn == NULL);
    EXPECT_CODE(remora_connection_setup_status(rp.p.client), REMORA_E_REJECTED,
                "remora_connection_setup_status: ");
    remora_connection_delete(rp.p.client);
    scfg.persist = NULL;
    atomic_store(&s.done, 0);
    CHECK(pthread_create(&t, NULL, accept_async_thread, &s) == 0);
    OK(remora_connect_async(rp.p.cdom, "127.0.0.1", port, NULL, "hi", 2, &rp.p.client));
    CHECK(remora_connection_setup_status(rp.p.client) == REMORA_E_WOULD_BLOCK);
    {
        /* tcp progresses an asynchronous setup only while it is looked at: as the header
         * says, poll both event fds and look (next_event 0 ms) at a side whose fd is readable;
         * each poll is bounded, the loop by about T_WAIT_MS */
        int cev = -1, sev = -1, rounds = 0, ev = -1;
        struct pollfd fds[2] = {{.events = POLLIN}, {.events = POLLIN}};
        OK(remora_connection_event_fd(rp.p.client, &fds[0].fd));
        fds[1].fd = -1; /* ignored until the server has accepted */
        while ((cev < 0 || sev < 0) && rounds++ < T_WAIT_MS / 5) {
            if (rp.p.server == NULL && atomic_load(&s.done)) {
                CHECK(pthread_join(t, NULL) == 0);
                OK(s.rc);
                rp.p.server = s.conn;
                OK(remora_connection_event_fd(rp.p.server, &fds[1].fd));
            }
            CHECK(poll(fds, 2, 5) >= 0);
            if (cev < 0 && (fds[0].revents & POLLIN) &&
                remora_connection_next_event(rp.p.client, 0, &ev) == 0) {
                cev = ev;
            }
            if (sev < 0 && (fds[1].revents & POLLIN) &&
                remora_connection_next_event(rp.p.server, 0, &ev) == 0) {
                sev = ev;
            }
        }
        if (cev != REMORA_CONN_ESTABLISHED || sev != REMORA_CONN_ESTABLISHED) {
            fprintf(stderr, "events: client %d server %d after %d looks\n", cev, sev, rounds);
        }
        CHECK(cev == REMORA_CONN_ESTABLISHED && sev == REMORA_CONN_ESTABLISHED);
    }
    OK(remora_connection_setup_status(rp.p.client));
    OK(remora_connection_setup_status(rp.p.server));
    OK(remora_connection_peer_private_data(rp.p.client, &pdata, &plen));
    CHECK(plen >= 2 && memcmp(pdata, "ok", 2) == 0);
    OK(remora_shared_receive_queue_info(srq, &depth, &posted, &conns));
    CHECK(depth >= 1 && posted == 1 && conns == 1);
    /* the server posts no receives of its own */
    EXPECT_CODE(remora_recv(rp.p.server, rp.server_mr, 0, 8, 0, NULL), REMORA_E_BAD_STATE,
                "remora_recv: ");
    OK(remora_connection_cq(rp.p.client, &ccq));
    memcpy(rp.client_mem, "into the srq", 12);
    OK(remora_send(rp.p.client, rp.client_mr, 0, 12, 0, NULL));
    expect_completion(ccq, REMORA_OP_SEND, NULL);
    c = expect_completion(qcq, REMORA_OP_RECV, (void*)5);
    CHECK(c.bytes == 12 && c.tag == 99 && memcmp(rp.server_mem, "into the srq", 12) == 0);
    remora_shared_receive_queue_delete(srq); /* the server connection keeps it */
    remora_memory_region_delete(rp.server_mr);
    remora_memory_region_delete(rp.client_mr);
    pair_close(&rp.p);
}

/* connect_async to a port nobody listens on: refused, as an event (tcp) or at once (sockets). */
static void test_async_refused(void) {
    remora_domain* dom = NULL;
    remora_listener* lst = NULL;
    remora_connection* conn = NULL;
    uint16_t port = 0;
    int rc;
    OK(remora_domain_open(NULL, &dom));
    OK(remora_listener_create(dom, "127.0.0.1", 0, &lst));
    OK(remora_listener_port(lst, &port));
    remora_listener_delete(lst); /* the port is free again */
    rc = remora_connect_async(dom, "127.0.0.1", port, NULL, NULL, 0, &conn);
    if (rc == 0) {
        CHECK(remora_connection_setup_status(conn) == REMORA_E_WOULD_BLOCK ||
              remora_connection_setup_status(conn) == REMORA_E_CONNECTION_REFUSED);
        CHECK(next_event(conn) == REMORA_CONN_REFUSED);
        EXPECT_CODE(remora_connection_setup_status(conn), REMORA_E_CONNECTION_REFUSED,
                    "remora_connection_setup_status: ");
        remora_connection_delete(conn);
    } else {
        CHECK(rc == REMORA_E_CONNECTION_REFUSED && conn == NULL);
    }
    EXPECT_CODE(remora_connect_async(NULL, "127.0.0.1", port, NULL, NULL, 0, &conn),
                REMORA_E_INVALID, "dom is NULL");
    EXPECT_CODE(remora_connect_async(dom, "127.0.0.1", port, NULL, NULL, 3, &conn),
                REMORA_E_INVALID, "pdata");
    EXPECT_CODE(remora_connection_setup_status(NULL), REMORA_E_INVALID, "conn is NULL");
    OK(remora_domain_close(&dom));
}

struct named_test {
    const char* name;
    void (*run)(void);
};

static const struct named_test tests[] = {
    {"write_read", test_write_read},
    {"atomics", test_atomics},
    {"send_recv_imm", test_send_recv_imm},
    {"service_messages", test_service_messages},
    {"flush", test_flush},
    {"channel", test_channel},
    {"channel_rcq", test_channel_rcq},
    {"cq_fd", test_cq_fd},
    {"no_channel", test_no_channel},
    {"shared_cq", test_shared_cq},
    {"cq_connection", test_cq_connection},
    {"bad_descriptor", test_bad_descriptor},
    {"bad_operations", test_bad_operations},
    {"bad_connect", test_bad_connect},
    {"reject", test_reject},
    {"config_size", test_config_size},
    {"strerror", test_strerror},
    {"rdm_shm", test_rdm_shm},
    {"same_host", test_same_host},
    {"rdm_srq", test_rdm_srq},
    {"rdm_liveness", test_rdm_liveness},
    {"slot_pool", test_slot_pool},
    {"slots_parked", test_slots_parked},
    {"slots_forbid", test_slots_forbid},
    {"gather_write", test_gather_write},
    {"scatter_read", test_scatter_read},
    {"copy", test_copy},
    {"rdm_shm_ext", test_rdm_shm_ext},
    {"async_srq", test_async_srq},
    {"async_refused", test_async_refused},
};

int main(int argc, char** argv) {
    size_t i;
    if (argc != 2) {
        fprintf(stderr, "usage: capi_test NAME\n");
        return 2;
    }
    for (i = 0; i < sizeof tests / sizeof tests[0]; ++i) {
        if (strcmp(argv[1], tests[i].name) == 0) {
            tests[i].run();
            printf("capi_test %s: ok\n", argv[1]);
            return 0;
        }
    }
    fprintf(stderr, "capi_test: no test named %s\n", argv[1]);
    return 2;
}

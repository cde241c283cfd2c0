// SPDX-License-Identifier: BSD-3-Clause
/* tests/c/capi_check.h — checks and a connected pair for the C API's tests (C11).
 *
 * Every check prints file:line, the call, its code and remora_last_error_message(), and exits 1.
 */
#ifndef REMORA_TESTS_CAPI_CHECK_H
#define REMORA_TESTS_CAPI_CHECK_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <remora/remora.h>

/* Generous upper bound for every wait (never a sleep). */
#define T_WAIT_MS 10000

#define CHECK(cond)                                                                           \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, __LINE__, \
                    #cond, remora_last_error_message());                                      \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

#define OK(call)                                                                            \
    do {                                                                                    \
        int ok_rc_ = (call);                                                                \
        if (ok_rc_ != 0) {                                                                  \
            fprintf(stderr, "%s:%d: %s = %d (%s): %s\n", __FILE__, __LINE__, #call, ok_rc_, \
                    remora_strerror(ok_rc_), remora_last_error_message());                  \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

/* The call fails with exactly `code` and its message contains `text`. */
#define EXPECT_CODE(call, code, text)                                                              \
    do {                                                                                           \
        int ec_rc_ = (call);                                                                       \
        if (ec_rc_ != (code)) {                                                                    \
            fprintf(stderr, "%s:%d: %s = %d (%s), expected %s: %s\n", __FILE__, __LINE__, #call,   \
                    ec_rc_, remora_strerror(ec_rc_), #code, remora_last_error_message());          \
            exit(1);                                                                               \
        }                                                                                          \
        if (strstr(remora_last_error_message(), (text)) == NULL) {                                 \
            fprintf(stderr, "%s:%d: %s: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, #call, \
                    remora_last_error_message(), (text));                                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* A connected pair over loopback: server and client in domains of their own (the provider is
 * FI_PROVIDER's, or remora's automatic choice). The server accepts on a thread of its own. */
struct pair {
    remora_domain *sdom, *cdom;
    remora_listener* lst;
    remora_connection *server, *client;
    /* what the server saw in the request */
    char request_data[64];
    size_t request_len;
    /* accept's inputs */
    const struct remora_connection_config* scfg;
    const void* accept_data;
    size_t accept_len;
    int accept_rc;
};

static inline void* pair_server(void* arg) {
    struct pair* p = arg;
    remora_connection_request* req = NULL;
    const void* data = NULL;
    p->accept_rc = remora_listener_get_request(p->lst, T_WAIT_MS, &req);
    if (p->accept_rc != 0) {
        return NULL;
    }
    OK(remora_connection_request_private_data(req, &data, &p->request_len));
    CHECK(p->request_len <= sizeof p->request_data);
    if (p->request_len > 0) {
        memcpy(p->request_data, data, p->request_len);
    }
    p->accept_rc =
        remora_connection_request_accept(req, p->scfg, p->accept_data, p->accept_len, &p->server);
    remora_connection_request_delete(req);
    return NULL;
}

static inline void pair_domains(struct pair* p) {
    memset(p, 0, sizeof *p);
    OK(remora_domain_open(NULL, &p->sdom));
    OK(remora_domain_open(NULL, &p->cdom));
    OK(remora_listener_create(p->sdom, "127.0.0.1", 0, &p->lst));
}

/* Connects; the server side answers with accept_data (its configuration scfg). */
static inline void pair_connect(struct pair* p, const struct remora_connection_config* scfg,
                                const struct remora_connection_config* ccfg,
                                const void* accept_data, size_t accept_len,
                                const void* connect_data, size_t connect_len) {
    pthread_t t;
    uint16_t port = 0;
    p->scfg = scfg;
    p->accept_data = accept_data;
    p->accept_len = accept_len;
    OK(remora_listener_port(p->lst, &port));
    CHECK(pthread_create(&t, NULL, pair_server, p) == 0);
    OK(remora_connect(p->cdom, "127.0.0.1", port, ccfg, connect_data, connect_len, &p->client));
    CHECK(pthread_join(t, NULL) == 0);
    OK(p->accept_rc);
}

/* Registers server_mem and client_mem (size bytes each, every usage) in p's domains, connects
 * with the server region's descriptor as the accept data, and returns the client's parsed copy
 * of it. */
static inline remora_remote_region* pair_connect_region(
    struct pair* p, unsigned char* server_mem, unsigned char* client_mem, size_t size,
    remora_memory_region** server_mr, remora_memory_region** client_mr,
    const struct remora_connection_config* scfg, const struct remora_connection_config* ccfg) {
    unsigned char wire[REMORA_DESCRIPTOR_SIZE];
    remora_remote_region* desc = NULL;
    remora_remote_region* remote = NULL;
    const void* peer = NULL;
    size_t peer_len = 0;
    OK(remora_memory_region_create(p->sdom, server_mem, size, REMORA_USAGE_ALL, server_mr));
    OK(remora_memory_region_create(p->cdom, client_mem, size, REMORA_USAGE_ALL, client_mr));
    OK(remora_memory_region_describe(*server_mr, 0, 0, &desc));
    OK(remora_remote_region_serialize(desc, wire, sizeof wire));
    remora_remote_region_delete(desc);
    pair_connect(p, scfg, ccfg, wire, sizeof wire, NULL, 0);
    OK(remora_connection_peer_private_data(p->client, &peer, &peer_len));
    OK(remora_remote_region_parse(peer, sizeof wire, &remote));
    return remote;
}

/* Attaches two RDM peers to each other (each inserts the other's address). */
static inline void attach_each_other(remora_connection* a, remora_connection* b) {
    const void *addr_a = NULL, *addr_b = NULL;
    size_t len_a = 0, len_b = 0;
    OK(remora_connection_local_address(a, &addr_a, &len_a));
    OK(remora_connection_local_address(b, &addr_b, &len_b));
    OK(remora_connection_attach(a, addr_b, len_b));
    OK(remora_connection_attach(b, addr_a, len_a));
}

static inline void pair_close(struct pair* p) {
    remora_connection_delete(p->client);
    remora_connection_delete(p->server);
    remora_listener_delete(p->lst);
    OK(remora_domain_close(&p->cdom));
    OK(remora_domain_close(&p->sdom));
    CHECK(p->sdom == NULL && p->cdom == NULL);
}

/* The next completion on cq, which must be `op` with status 0 and `context`. */
static inline struct remora_completion expect_completion(remora_completion_queue* cq, int op,
                                                         void* context) {
    struct remora_completion c;
    OK(remora_completion_queue_next(cq, T_WAIT_MS, &c));
    if (c.op != op || c.status != 0 || c.context != context) {
        fprintf(stderr, "completion: op %d status %d (%s) context %p; expected op %d context %p\n",
                c.op, c.status, remora_strerror(c.status), c.context, op, context);
        exit(1);
    }
    return c;
}

#endif /* REMORA_TESTS_CAPI_CHECK_H */

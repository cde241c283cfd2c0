// SPDX-License-Identifier: BSD-3-Clause
/* examples/c/client_server.c — remora from C: a server exposes memory, a client writes into it,
 * makes the write visible, bumps a counter atomically and says it is done with a message.
 *
 *   example_c_client_server                 both sides in one process (a server thread)
 *   example_c_client_server server [PORT]   the server alone (prints "port N", serves 1 client)
 *   example_c_client_server client HOST PORT
 *
 * The server registers 4 KiB, exposes it through a target service (so atomics work on providers
 * without native ones, such as tcp) and sends the region's 40-byte descriptor as its accept
 * private data. The client parses it, writes a line at offset 64, flushes it for visibility,
 * fetch-adds 1 to the counter at offset 0 three times, and sends "done", a message of its own on
 * the connection that also carries the service's requests (both sides set the persistence
 * config's message_size). The server receives it and prints the line and the counter.
 *
 * Build: cc -std=c11 example.c $(pkg-config --cflags --libs remora-c) -lpthread
 * The provider is FI_PROVIDER if set, else remora's choice. Exits 0 on success, 1 with a
 * message on stderr otherwise.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <remora/remora.h>

#define TIMEOUT_MS 10000

static void must(int rc, const char* what) {
    if (rc != 0) {
        fprintf(stderr, "%s: %s (%s)\n", what, remora_last_error_message(), remora_strerror(rc));
        exit(1);
    }
}

/* Waits for the next completion on cq and checks it is `op` and succeeded. */
static struct remora_completion next(remora_completion_queue* cq, int op, const char* what) {
    struct remora_completion c;
    must(remora_completion_queue_next(cq, TIMEOUT_MS, &c), what);
    if (c.op != op || c.status != 0) {
        fprintf(stderr, "%s: completion op %d status %s\n", what, c.op, remora_strerror(c.status));
        exit(1);
    }
    return c;
}

struct server {
    remora_domain* dom;
    remora_listener* lst;
    uint16_t port;
    int status;
};

/* GPSPM flushes and service atomics (service requests in flight), and the application's own
 * messages of up to 16 bytes on the same connection: set on both sides. */
static const struct remora_persistence_config persist = {
    .size = sizeof persist, .service_depth = 4, .message_size = 16};

static void* serve(void* arg) {
    struct server* s = arg;
    /* 8-byte aligned: the counter at offset 0 is an atomic target */
    static _Alignas(64) unsigned char mem[4096];
    const struct remora_connection_config cfg = {
        .size = sizeof cfg, .progress_thread = true, .rcq = true, .persist = &persist};
    unsigned char wire[REMORA_DESCRIPTOR_SIZE];
    remora_memory_region* mr = NULL;
    remora_target_service* svc = NULL;
    remora_remote_region* desc = NULL;
    remora_connection_request* req = NULL;
    remora_connection* conn = NULL;
    remora_completion_queue* rcq = NULL;
    struct remora_completion c;
    uint64_t counter = 0;
    must(remora_memory_region_create(s->dom, mem, sizeof mem,
                                     REMORA_USAGE_WRITE_DESTINATION | REMORA_USAGE_READ_SOURCE |
                                         REMORA_USAGE_ATOMIC_TARGET | REMORA_USAGE_FLUSH_TARGET |
                                         REMORA_USAGE_RECEIVE,
                                     &mr),
         "server: register");
    must(remora_target_service_create(&svc), "server: service");
    must(remora_target_service_expose(svc, mr, NULL, &desc), "server: expose");
    must(remora_remote_region_serialize(desc, wire, sizeof wire), "server: descriptor");
    must(remora_listener_get_request(s->lst, TIMEOUT_MS, &req), "server: request");
    must(remora_connection_request_accept(req, &cfg, wire, sizeof wire, &conn), "server: accept");
    remora_connection_request_delete(req);
    must(remora_target_service_serve(svc, conn), "server: serve");
    must(remora_connection_rcq(conn, &rcq), "server: rcq");
    /* The client's "done" arrives on the RCQ (the service's own requests arrive there too, and
     * the library answers them: they are not reported). */
    must(remora_recv(conn, mr, 200, 16, 0, NULL), "server: recv");
    c = next(rcq, REMORA_OP_RECV, "server: done");
    if (c.bytes != 4 || memcmp(mem + 200, "done", 4) != 0) {
        fprintf(stderr, "server: unexpected message (%zu bytes)\n", c.bytes);
        exit(1);
    }
    memcpy(&counter, mem, sizeof counter);
    printf("server: line \"%s\", counter %llu\n", (const char*)mem + 64,
           (unsigned long long)counter);
    s->status = counter == 3 && strcmp((const char*)mem + 64, "hello from C") == 0 ? 0 : 1;
    remora_connection_delete(conn);
    remora_remote_region_delete(desc);
    remora_target_service_delete(svc);
    remora_memory_region_delete(mr);
    return NULL;
}

static int client(const char* host, uint16_t port) {
    static _Alignas(64) unsigned char mem[256];
    /* max_sge 2: a message of the application's takes one entry more (the library's mark) */
    const struct remora_connection_config cfg = {
        .size = sizeof cfg, .max_sge = 2, .persist = &persist};
    remora_domain* dom = NULL;
    remora_connection* conn = NULL;
    remora_memory_region* mr = NULL;
    remora_remote_region* remote = NULL;
    remora_completion_queue* cq = NULL;
    const void* pdata = NULL;
    size_t plen = 0;
    uint64_t before = 0;
    int i;
    must(remora_domain_open(NULL, &dom), "client: domain");
    must(remora_memory_region_create(
             dom, mem, sizeof mem,
             REMORA_USAGE_WRITE_SOURCE | REMORA_USAGE_READ_DESTINATION | REMORA_USAGE_SEND, &mr),
         "client: register");
    must(remora_connect(dom, host, port, &cfg, NULL, 0, &conn), "client: connect");
    must(remora_connection_peer_private_data(conn, &pdata, &plen), "client: private data");
    must(remora_remote_region_parse(
             pdata, plen < REMORA_DESCRIPTOR_SIZE ? plen : REMORA_DESCRIPTOR_SIZE, &remote),
         "client: descriptor");
    must(remora_connection_cq(conn, &cq), "client: cq");

    strcpy((char*)mem, "hello from C");
    must(remora_write(conn, remote, 64, mr, 0, strlen("hello from C") + 1, 0, NULL),
         "client: write");
    next(cq, REMORA_OP_WRITE, "client: write");
    must(remora_flush(conn, remote, 64, 16, REMORA_FLUSH_VISIBILITY, REMORA_FLUSH_AUTOMATIC, 0,
                      NULL),
         "client: flush");
    next(cq, REMORA_OP_FLUSH, "client: flush");
    for (i = 0; i < 3; ++i) {
        must(remora_fetch_add(conn, remote, 0, 1, mr, 128, 0, NULL), "client: fetch_add");
        next(cq, REMORA_OP_ATOMIC, "client: fetch_add");
        memcpy(&before, mem + 128, sizeof before);
        if (before != (uint64_t)i) {
            fprintf(stderr, "client: counter was %llu, expected %d\n", (unsigned long long)before,
                    i);
            return 1;
        }
    }
    memcpy(mem + 200, "done", 4);
    must(remora_send(conn, mr, 200, 4, 0, NULL), "client: done");
    next(cq, REMORA_OP_SEND, "client: done");
    printf("client: wrote, flushed, counted to 3, said done\n");
    remora_remote_region_delete(remote);
    remora_connection_delete(conn);
    remora_memory_region_delete(mr);
    must(remora_domain_close(&dom), "client: close");
    return 0;
}

static void open_server(struct server* s, uint16_t port) {
    memset(s, 0, sizeof *s);
    must(remora_domain_open(NULL, &s->dom), "server: domain");
    must(remora_listener_create(s->dom, "127.0.0.1", port, &s->lst), "server: listen");
    must(remora_listener_port(s->lst, &s->port), "server: port");
}

static int close_server(struct server* s) {
    remora_listener_delete(s->lst);
    must(remora_domain_close(&s->dom), "server: close");
    return s->status;
}

int main(int argc, char** argv) {
    struct server s;
    if (argc >= 2 && strcmp(argv[1], "server") == 0) {
        open_server(&s, argc >= 3 ? (uint16_t)atoi(argv[2]) : 0);
        printf("port %u\n", (unsigned)s.port);
        fflush(stdout);
        serve(&s);
        return close_server(&s);
    }
    if (argc == 4 && strcmp(argv[1], "client") == 0) {
        return client(argv[2], (uint16_t)atoi(argv[3]));
    }
    if (argc == 1) {
        pthread_t t;
        int rc;
        open_server(&s, 0);
        if (pthread_create(&t, NULL, serve, &s) != 0) {
            fprintf(stderr, "cannot start the server thread\n");
            return 1;
        }
        rc = client("127.0.0.1", s.port);
        pthread_join(t, NULL);
        return close_server(&s) != 0 ? 1 : rc;
    }
    fprintf(stderr, "usage: %s [server [PORT] | client HOST PORT]\n", argv[0]);
    return 2;
}

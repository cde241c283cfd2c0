// SPDX-License-Identifier: GPL-2.0-only
/*
 * fio/remora.c — a fio engine over remora's C API (remora.h), loaded by fio as
 *
 *     ioengine=external:/path/to/libremora_fio.so
 *
 * One engine, two roles (option `role`, required), as librpma's client and server engines:
 *
 * role=server: each job (numjobs = expected connections) listens on serverip:port + job index,
 *   accepts one client and exposes to it a region of `size` bytes: volatile memory with
 *   filename=malloc, or the file `filename` mapped (created or extended to `size`), through a
 *   target service that answers GPSPM flush requests. direct_write_to_pmem=1 declares placed
 *   writes durable (the descriptor then states APM, so read-after-write flushes persist; only
 *   true on DAX-mapped persistent memory — remora cannot check it). The connection is driven by
 *   the library's progress thread, which waits busy (busy_wait_polling=1) or adaptively
 *   (busy_wait_polling=0: polls 100 us after traffic, then sleeps). The job ends when its
 *   client disconnects.
 *
 * role=client: each job connects to serverip:port + job index and runs rw=write,
 *   randwrite, read or randread against the server's region with fio's blocksize and iodepth.
 *   Writes are made visible or durable (the strongest the region offers) by a flush
 *   (flush=auto|raw|gpspm: remora's automatic choice, read-after-write, or a GPSPM request):
 *     sync=1          a flush after every write; the write completes with its flush
 *     fsync=N         writes complete on their own completion; every Nth write fio's sync
 *                     flushes the whole region
 *     otherwise       one flush after each batch fio submits (iodepth_batch_submit), and the
 *                     batch's writes complete with it
 *     flush=none      no flush: a write completes when the provider reports it complete (the
 *                     bytes delivered, not known visible or durable); refuses sync=1 and fsync
 *   busy_wait_polling=1 polls the completion queue in a loop; 0 sleeps in the queue's wait.
 *
 * replicas=N (N > 1, writes only): the client job writes to N servers, serverip:port + job index
 *   x N + 0 .. N - 1 (so the server side runs N jobs per client job), through a replica set:
 *   each write is written and flushed on every server and completes once quorum=K of them
 *   (default: a majority) made it durable (sync=1 is implied; fsync io_us complete at once). A
 *   server that fails is dropped and the job goes on while the quorum holds.
 *
 * provider=tcp|sockets|... selects the libfabric provider (default: remora's automatic choice).
 * The engine prints errors only (log_err), so fio's JSON output on stdout stays clean.
 * Build: CMake target remora_fio, against a fio 3.33 source tree (scripts/fio-build.sh).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fio.h"
#include "optgroup.h"

#include "remora/remora.h"

#define RF_DEFAULT_PORT 7204
#define RF_POLL_BATCH 16
/* With operations in flight, no completion for this long fails the job (the server is gone). */
#define RF_STALL_MS 30000
/* How often blocking waits wake up to look at td->terminate. */
#define RF_WAKE_MS 1000
/* Empty busy polls between clock reads (for fio's timeout and the stall limit). */
#define RF_SPINS_PER_CLOCK 1024u

struct rf_options {
    void* pad; /* fio: offset 0 is not an option */
    char* role;
    char* serverip;
    unsigned int port;
    char* provider;
    unsigned int busy_wait_polling;
    unsigned int direct_write_to_pmem;
    char* flush;
    unsigned int replicas;
    unsigned int quorum;
};

static struct fio_option rf_options[] = {
    {
        .name = "role",
        .lname = "remora role",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct rf_options, role),
        .help = "required: client (runs the I/O) or server (exposes memory or a file)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "serverip",
        .lname = "remora server address",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct rf_options, serverip),
        .help = "address the server listens on (client: connects to)",
        .def = "127.0.0.1",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "port",
        .lname = "remora server port",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct rf_options, port),
        .help = "first port: job i of numjobs uses port + i",
        .def = "7204",
        .minval = 1,
        .maxval = 65535,
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "provider",
        .lname = "libfabric provider",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct rf_options, provider),
        .help = "libfabric provider (tcp, sockets, verbs...); empty: automatic",
        .def = "",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "busy_wait_polling",
        .lname = "busy-wait polling",
        .type = FIO_OPT_BOOL,
        .off1 = offsetof(struct rf_options, busy_wait_polling),
        .help = "1: poll completions in a loop; 0: sleep while waiting (less CPU)",
        .def = "1",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "direct_write_to_pmem",
        .lname = "placed writes are durable",
        .type = FIO_OPT_BOOL,
        .off1 = offsetof(struct rf_options, direct_write_to_pmem),
        .help = "server: declare writes placed in the file durable (DAX persistent memory "
                "only): read-after-write flushes then persist",
        .def = "0",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "flush",
        .lname = "flush method",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct rf_options, flush),
        .help = "client: auto, raw (read-after-write), gpspm (the server's service) or none",
        .def = "auto",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "replicas",
        .lname = "remora replicas",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct rf_options, replicas),
        .help = "client: write to this many servers (port + job x replicas + 0..replicas-1) "
                "through a replica set",
        .def = "1",
        .minval = 1,
        .maxval = REMORA_MAX_REPLICAS,
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "quorum",
        .lname = "remora quorum",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct rf_options, quorum),
        .help = "client with replicas: servers a write must be durable on (0: a majority)",
        .def = "0",
        .minval = 0,
        .maxval = REMORA_MAX_REPLICAS,
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = NULL,
    },
};

/* What an operation's context points at: an io_u's record or a batch of writes. */
enum rf_kind { RF_IOU = 1, RF_BATCH = 2 };

/* Per io_u (io_u->engine_data). */
struct rf_iou {
    int kind;          /* RF_IOU */
    struct io_u* io_u; /* back pointer */
    int final_op;      /* the REMORA_OP_* whose completion completes the io_u; 0: a batch's */
    int error;         /* first error seen on any of its operations (errno value) */
};

/* The writes of one commit, completed by one flush. */
struct rf_batch {
    int kind; /* RF_BATCH */
    bool used;
    unsigned n;
    struct io_u** ios; /* iodepth entries */
};

struct rf_client {
    remora_domain* dom;
    remora_connection* conn;
    remora_completion_queue* cq;
    remora_remote_region* remote;
    remora_memory_region* mr;
    uint64_t ws_size;
    int flush_method;
    bool busy;
    bool per_write_flush; /* sync=1 */
    bool fsync_mode;      /* fsync=N / fdatasync=N: fio's sync io_us flush */
    bool no_flush;        /* flush=none: a write completes when the provider reports it done */
    unsigned depth;
    struct io_u** queued; /* queue()d, not yet committed */
    unsigned nqueued;
    struct io_u** ready; /* completed, handed to fio by getevents()/event() */
    unsigned nready, handed;
    struct rf_batch* batches; /* depth of them */
    unsigned in_flight;       /* io_us posted and not yet completed */
    /* replicas > 1: the servers' connections and regions, and the set over them */
    unsigned nrep;
    remora_connection* rconn[REMORA_MAX_REPLICAS];
    remora_remote_region* rremote[REMORA_MAX_REPLICAS];
    remora_replica_set* set;
};

struct rf_server {
    remora_domain* dom;
    remora_listener* lst;
    remora_persistent_region* region;
    remora_target_service* svc;
    remora_connection* conn;
};

static struct rf_options* opts(struct thread_data* td) {
    return td->eo;
}

static bool is_server(struct thread_data* td) {
    return opts(td)->role != NULL && strcmp(opts(td)->role, "server") == 0;
}

/* errno for an io_u from a REMORA_E_* code. */
static int rf_errno(int code) {
    switch (code) {
        case REMORA_E_INVALID:
            return EINVAL;
        case REMORA_E_OUT_OF_RANGE:
            return ERANGE;
        case REMORA_E_ACCESS_DENIED:
            return EACCES;
        case REMORA_E_NOT_SUPPORTED:
            return ENOTSUP;
        case REMORA_E_TOO_LARGE:
            return E2BIG;
        case REMORA_E_WOULD_BLOCK:
            return EAGAIN;
        case REMORA_E_TIMED_OUT:
            return ETIMEDOUT;
        case REMORA_E_CONNECTION_REFUSED:
            return ECONNREFUSED;
        case REMORA_E_REJECTED:
            return ECONNREFUSED;
        case REMORA_E_UNREACHABLE:
            return EHOSTUNREACH;
        case REMORA_E_DISCONNECTED:
            return ECONNRESET;
        case REMORA_E_CANCELED:
            return ECANCELED;
        case REMORA_E_NOMEM:
            return ENOMEM;
        default:
            return EIO;
    }
}

/* Logs a failed remora call: "remora: what: code name: message". */
static int rf_fail(struct thread_data* td, const char* what, int code) {
    log_err("remora: %s: %s: %s\n", what, remora_strerror(code), remora_last_error_message());
    td_vmsg(td, rf_errno(code), remora_last_error_message(), what);
    return 1;
}

static int rf_open_domain(struct thread_data* td, int progress, remora_domain** dom) {
    struct rf_options* o = opts(td);
    struct remora_domain_config dc = {.size = sizeof dc};
    int r;
    dc.provider = o->provider != NULL && o->provider[0] != '\0' ? o->provider : NULL;
    dc.progress = progress;
    r = remora_domain_open(&dc, dom);
    return r == 0 ? 0 : rf_fail(td, "opening the domain", r);
}

static unsigned rf_port(struct thread_data* td) {
    return opts(td)->port + td->subjob_number;
}

/* ---- server ---- */

static int server_init(struct thread_data* td) {
    struct rf_server* s = calloc(1, sizeof *s);
    struct rf_options* o = opts(td);
    int r;
    if (s == NULL) {
        td_verror(td, ENOMEM, "calloc");
        return 1;
    }
    td->io_ops_data = s;
    if (rf_open_domain(td, o->busy_wait_polling ? REMORA_PROGRESS_BUSY : REMORA_PROGRESS_ADAPTIVE,
                       &s->dom))
        return 1;
    if (rf_port(td) > 65535) {
        log_err("remora: port %u + job %d is past 65535\n", o->port, td->subjob_number);
        td_verror(td, EINVAL, "port");
        return 1;
    }
    r = remora_listener_create(s->dom, o->serverip, (uint16_t)rf_port(td), &s->lst);
    if (r != 0)
        return rf_fail(td, "listening", r);
    return 0;
}

static int server_get_file_size(struct thread_data* td, struct fio_file* f) {
    if (td->o.size == 0) {
        log_err("remora: the server needs size= (bytes to expose)\n");
        return 1;
    }
    f->real_file_size = td->o.size;
    fio_file_set_size_known(f);
    return 0;
}

/* Exposes the region and accepts one client (which says its service depth in 2 bytes). */
static int server_open_file(struct thread_data* td, struct fio_file* f) {
    struct rf_server* s = td->io_ops_data;
    struct rf_options* o = opts(td);
    struct remora_persistent_region_config pc = {.size = sizeof pc};
    struct remora_persistence_config persist = {.size = sizeof persist};
    struct remora_connection_config cc = {.size = sizeof cc, .persist = &persist};
    unsigned char desc[REMORA_DESCRIPTOR_SIZE];
    remora_remote_region* remote = NULL;
    remora_connection_request* req = NULL;
    const void* pdata = NULL;
    size_t plen = 0;
    int r;
    if (s->conn != NULL)
        return 0;
    if (f->file_name == NULL || strcmp(f->file_name, "malloc") != 0) {
        pc.path = f->file_name;
        pc.create = true;
    }
    pc.len = td->o.size;
    pc.apm_durable = o->direct_write_to_pmem != 0;
    r = remora_persistent_region_open(s->dom, &pc, &s->region);
    if (r != 0)
        return rf_fail(td, "opening the region", r);
    if ((r = remora_target_service_create(&s->svc)) != 0)
        return rf_fail(td, "creating the target service", r);
    if ((r = remora_target_service_expose(s->svc, NULL, s->region, &remote)) != 0)
        return rf_fail(td, "exposing the region", r);
    r = remora_remote_region_serialize(remote, desc, sizeof desc);
    remora_remote_region_delete(remote);
    if (r != 0)
        return rf_fail(td, "describing the region", r);
    while ((r = remora_listener_get_request(s->lst, RF_WAKE_MS, &req)) == REMORA_E_TIMED_OUT) {
        if (td->terminate)
            return 1;
    }
    if (r != 0)
        return rf_fail(td, "waiting for a client", r);
    if (remora_connection_request_private_data(req, &pdata, &plen) == 0 && plen >= 2) {
        const unsigned char* p = pdata;
        persist.service_depth = (uint32_t)p[0] | (uint32_t)p[1] << 8;
    }
    if (persist.service_depth == 0) {
        remora_connection_request_delete(req);
        log_err("remora: the client sent no service depth (is it this engine's client?)\n");
        td_verror(td, EPROTO, "accept");
        return 1;
    }
    cc.progress_thread = true; /* one-sided access while this thread sleeps */
    r = remora_connection_request_accept(req, &cc, desc, sizeof desc, &s->conn);
    remora_connection_request_delete(req);
    if (r != 0)
        return rf_fail(td, "accepting the client", r);
    if ((r = remora_target_service_serve(s->svc, s->conn)) != 0)
        return rf_fail(td, "serving the client", r);
    return 0;
}

/* The server's only I/O: wait until the client disconnects, then end the job. */
static enum fio_q_status server_queue(struct thread_data* td, struct io_u* io_u) {
    struct rf_server* s = td->io_ops_data;
    int ev = -1;
    while (!td->terminate) {
        int r = remora_connection_next_event(s->conn, RF_WAKE_MS, &ev);
        if (r == REMORA_E_TIMED_OUT)
            continue;
        if (r != 0) {
            rf_fail(td, "waiting for the client to finish", r);
            io_u->error = rf_errno(r);
            break;
        }
        if (ev == REMORA_CONN_CLOSED || ev == REMORA_CONN_LOST)
            break;
    }
    td->done = true;
    return FIO_Q_COMPLETED;
}

static void server_cleanup(struct thread_data* td) {
    struct rf_server* s = td->io_ops_data;
    if (s == NULL)
        return;
    remora_connection_delete(s->conn);
    remora_target_service_delete(s->svc);
    remora_persistent_region_delete(s->region);
    remora_listener_delete(s->lst);
    remora_domain_delete(s->dom);
    free(s);
    td->io_ops_data = NULL;
}

/* ---- client ---- */

/* replicas > 1: connects to each server of this job and forms the replica set over them. */
static int rf_client_init_replicas(struct thread_data* td, struct rf_client* c) {
    struct rf_options* o = opts(td);
    struct remora_persistence_config persist = {.size = sizeof persist};
    struct remora_connection_config cc = {.size = sizeof cc, .persist = &persist};
    struct remora_replica_set_config sc = {.size = sizeof sc};
    struct remora_replica members[REMORA_MAX_REPLICAS];
    unsigned char want[2];
    unsigned i;
    int r;
    if (td_read(td) || td_trim(td) || c->no_flush) {
        log_err("remora: replicas=%u writes and flushes only (rw=write or randwrite, a flush)\n",
                o->replicas);
        td_verror(td, EINVAL, "replicas");
        return 1;
    }
    /* A write and its flush per io_u, and GPSPM requests up to the depth; the set posts with
     * callbacks, so the library's progress thread reads each connection's CQs. */
    cc.sq_size = 2 * c->depth + 2;
    cc.progress_thread = true;
    persist.service_depth = c->depth;
    want[0] = (unsigned char)(persist.service_depth & 0xff);
    want[1] = (unsigned char)(persist.service_depth >> 8);
    c->ws_size = UINT64_MAX;
    for (i = 0; i < o->replicas; ++i) {
        const unsigned port = o->port + (unsigned)td->subjob_number * o->replicas + i;
        const void* pdata = NULL;
        size_t plen = 0;
        uint64_t size = 0;
        unsigned usage = 0, persistence = 0;
        if (port > 65535) {
            log_err("remora: replica port %u is past 65535\n", port);
            td_verror(td, EINVAL, "port");
            return 1;
        }
        r = remora_connect(c->dom, o->serverip, (uint16_t)port, &cc, want, sizeof want,
                           &c->rconn[i]);
        if (r != 0)
            return rf_fail(td, "connecting to a replica's server", r);
        c->nrep = i + 1;
        if ((r = remora_connection_peer_private_data(c->rconn[i], &pdata, &plen)) != 0 ||
            (r = remora_remote_region_parse(pdata, plen, &c->rremote[i])) != 0 ||
            (r = remora_remote_region_info(c->rremote[i], &size, &usage, &persistence)) != 0)
            return rf_fail(td, "reading a replica's descriptor", r);
        if (size < c->ws_size)
            c->ws_size = size;
        members[i].conn = c->rconn[i];
        members[i].region = c->rremote[i];
    }
    sc.quorum = o->quorum;
    sc.depth = c->depth;
    sc.flush_method = c->flush_method;
    r = remora_replica_set_create(members, c->nrep, &sc, &c->set);
    return r == 0 ? 0 : rf_fail(td, "forming the replica set", r);
}

static int client_init(struct thread_data* td) {
    struct rf_options* o = opts(td);
    struct rf_client* c = calloc(1, sizeof *c);
    struct remora_persistence_config persist = {.size = sizeof persist};
    struct remora_connection_config cc = {.size = sizeof cc, .persist = &persist};
    const void* pdata = NULL;
    size_t plen = 0;
    unsigned char want[2];
    unsigned usage = 0, persistence = 0;
    unsigned i;
    int r;
    if (c == NULL) {
        td_verror(td, ENOMEM, "calloc");
        return 1;
    }
    td->io_ops_data = c;
    c->depth = td->o.iodepth > 0 ? td->o.iodepth : 1;
    c->busy = o->busy_wait_polling != 0;
    c->per_write_flush = td->o.sync_io != 0;
    c->fsync_mode = !c->per_write_flush && (td->o.fsync_blocks > 0 || td->o.fdatasync_blocks > 0);
    if (strcmp(o->flush, "auto") == 0) {
        c->flush_method = REMORA_FLUSH_AUTOMATIC;
    } else if (strcmp(o->flush, "raw") == 0) {
        c->flush_method = REMORA_FLUSH_READ_AFTER_WRITE;
    } else if (strcmp(o->flush, "gpspm") == 0) {
        c->flush_method = REMORA_FLUSH_GPSPM;
    } else if (strcmp(o->flush, "none") == 0) {
        c->no_flush = true;
    } else {
        log_err("remora: flush=%s is not auto, raw, gpspm or none\n", o->flush);
        td_verror(td, EINVAL, "flush");
        return 1;
    }
    if (c->no_flush && (c->per_write_flush || c->fsync_mode)) {
        log_err("remora: flush=none cannot honour sync=1, fsync or fdatasync\n");
        td_verror(td, EINVAL, "flush");
        return 1;
    }
    c->queued = calloc(c->depth, sizeof *c->queued);
    c->ready = calloc(c->depth, sizeof *c->ready);
    c->batches = calloc(c->depth, sizeof *c->batches);
    if (c->queued == NULL || c->ready == NULL || c->batches == NULL) {
        td_verror(td, ENOMEM, "calloc");
        return 1;
    }
    for (i = 0; i < c->depth; ++i) {
        c->batches[i].kind = RF_BATCH;
        c->batches[i].ios = calloc(c->depth, sizeof(struct io_u*));
        if (c->batches[i].ios == NULL) {
            td_verror(td, ENOMEM, "calloc");
            return 1;
        }
    }
    if (rf_open_domain(td, REMORA_PROGRESS_DEFAULT, &c->dom))
        return 1;
    if (o->replicas > 1) {
        c->per_write_flush = true; /* each write is flushed on every replica */
        return rf_client_init_replicas(td, c);
    }
    if (rf_port(td) > 65535) {
        log_err("remora: port %u + job %d is past 65535\n", o->port, td->subjob_number);
        td_verror(td, EINVAL, "port");
        return 1;
    }
    /* A write and its flush per io_u, and GPSPM requests up to the depth. */
    cc.sq_size = 2 * c->depth + 2;
    persist.service_depth = c->depth;
    want[0] = (unsigned char)(persist.service_depth & 0xff);
    want[1] = (unsigned char)(persist.service_depth >> 8);
    r = remora_connect(c->dom, o->serverip, (uint16_t)rf_port(td), &cc, want, sizeof want,
                       &c->conn);
    if (r != 0)
        return rf_fail(td, "connecting to the server", r);
    if ((r = remora_connection_peer_private_data(c->conn, &pdata, &plen)) != 0)
        return rf_fail(td, "reading the server's descriptor", r);
    if ((r = remora_remote_region_parse(pdata, plen, &c->remote)) != 0)
        return rf_fail(td, "parsing the server's descriptor", r);
    if ((r = remora_remote_region_info(c->remote, &c->ws_size, &usage, &persistence)) != 0)
        return rf_fail(td, "reading the server's descriptor", r);
    if ((r = remora_connection_cq(c->conn, &c->cq)) != 0)
        return rf_fail(td, "getting the completion queue", r);
    if (td_write(td) && !c->no_flush) {
        int chosen = 0;
        r = remora_flush_method_for(c->conn, c->remote, REMORA_FLUSH_STRONGEST, c->flush_method,
                                    &chosen);
        if (r != 0)
            return rf_fail(td, "choosing the flush", r);
    }
    return 0;
}

/* Registers fio's I/O buffers (allocated after init). */
static int client_post_init(struct thread_data* td) {
    struct rf_client* c = td->io_ops_data;
    int r = remora_memory_region_create(c->dom, td->orig_buffer, td->orig_buffer_size,
                                        REMORA_USAGE_WRITE_SOURCE | REMORA_USAGE_READ_DESTINATION,
                                        &c->mr);
    return r == 0 ? 0 : rf_fail(td, "registering the I/O buffers", r);
}

static int client_get_file_size(struct thread_data* td, struct fio_file* f) {
    struct rf_client* c = td->io_ops_data;
    f->real_file_size = c->ws_size;
    fio_file_set_size_known(f);
    return 0;
}

static int client_io_u_init(struct thread_data* td, struct io_u* io_u) {
    struct rf_iou* x = calloc(1, sizeof *x);
    if (x == NULL)
        return 1;
    x->kind = RF_IOU;
    x->io_u = io_u;
    io_u->engine_data = x;
    return 0;
}

/* Closes the connection and deregisters fio's buffers: before fio frees the io_us and the
 * buffers (its teardown frees them before the engine's cleanup), so no operation or
 * registration outlives the memory it names. Idempotent. */
static void client_teardown(struct rf_client* c) {
    unsigned i;
    /* The set first: it waits for its operations, then the connections it wrote on. */
    remora_replica_set_delete(c->set);
    c->set = NULL;
    for (i = 0; i < c->nrep; ++i) {
        (void)remora_connection_close(c->rconn[i]);
        remora_connection_delete(c->rconn[i]);
        remora_remote_region_delete(c->rremote[i]);
        c->rconn[i] = NULL;
        c->rremote[i] = NULL;
    }
    c->nrep = 0;
    if (c->conn != NULL) {
        /* Operations still in flight (a failed job) complete with errors as it closes. */
        (void)remora_connection_close(c->conn);
        remora_connection_delete(c->conn);
        c->conn = NULL;
    }
    remora_memory_region_delete(c->mr);
    c->mr = NULL;
}

static void client_io_u_free(struct thread_data* td, struct io_u* io_u) {
    if (td->io_ops_data != NULL && !is_server(td))
        client_teardown(td->io_ops_data);
    free(io_u->engine_data);
    io_u->engine_data = NULL;
}

static enum fio_q_status client_queue(struct thread_data* td, struct io_u* io_u) {
    struct rf_client* c = td->io_ops_data;
    fio_ro_check(td, io_u);
    if (io_u->ddir != DDIR_READ && io_u->ddir != DDIR_WRITE && !ddir_sync(io_u->ddir)) {
        log_err("remora: unsupported I/O: %s\n", io_ddir_name(io_u->ddir));
        io_u->error = EINVAL;
        return FIO_Q_COMPLETED;
    }
    if (c->set != NULL && ddir_sync(io_u->ddir))
        return FIO_Q_COMPLETED; /* every write completed durable on the quorum already */
    if (c->nqueued == c->depth)
        return FIO_Q_BUSY;
    c->queued[c->nqueued++] = io_u;
    return FIO_Q_QUEUED;
}

static size_t rf_local(struct thread_data* td, struct io_u* io_u) {
    return (size_t)((char*)io_u->xfer_buf - td->orig_buffer);
}

static struct rf_batch* rf_new_batch(struct rf_client* c) {
    unsigned i;
    for (i = 0; i < c->depth; ++i) {
        if (!c->batches[i].used) {
            c->batches[i].used = true;
            c->batches[i].n = 0;
            return &c->batches[i];
        }
    }
    return NULL; /* cannot happen: a batch holds at least one of depth io_us */
}

/* Posts the io_u's operations; 0 or a REMORA_E_* code (nothing of it left posted but a write
 * whose flush failed to post: the io_u then completes with the flush's error). */
static int rf_post(struct thread_data* td, struct rf_client* c, struct io_u* io_u,
                   struct rf_batch* batch) {
    struct rf_iou* x = io_u->engine_data;
    const size_t local = rf_local(td, io_u);
    x->error = 0;
    if (c->set != NULL) /* a write: completes at the quorum, polled in getevents */
        return remora_replica_set_write(c->set, io_u->offset, c->mr, local, io_u->xfer_buflen, x,
                                        NULL, 0);
    if (io_u->ddir == DDIR_READ) {
        x->final_op = REMORA_OP_READ;
        return remora_read(c->conn, c->mr, local, c->remote, io_u->offset, io_u->xfer_buflen, 0, x);
    }
    if (ddir_sync(io_u->ddir)) {
        x->final_op = REMORA_OP_FLUSH;
        return remora_flush(c->conn, c->remote, 0, c->ws_size, REMORA_FLUSH_STRONGEST,
                            c->flush_method, 0, x);
    }
    if (c->fsync_mode || c->no_flush) {
        x->final_op = REMORA_OP_WRITE;
        return remora_write(c->conn, c->remote, io_u->offset, c->mr, local, io_u->xfer_buflen, 0,
                            x);
    }
    /* The write reports only an error; its flush (or the batch's) completes it. */
    x->final_op = c->per_write_flush ? REMORA_OP_FLUSH : 0;
    {
        int r = remora_write(c->conn, c->remote, io_u->offset, c->mr, local, io_u->xfer_buflen,
                             REMORA_F_ON_ERROR, x);
        if (r != 0)
            return r;
    }
    if (c->per_write_flush)
        return remora_flush(c->conn, c->remote, io_u->offset, io_u->xfer_buflen,
                            REMORA_FLUSH_STRONGEST, c->flush_method, 0, x);
    batch->ios[batch->n++] = io_u;
    return 0;
}

static void rf_ready(struct rf_client* c, struct io_u* io_u) {
    struct rf_iou* x = io_u->engine_data;
    io_u->error = x->error;
    c->ready[c->nready++] = io_u;
    --c->in_flight;
}

static int client_commit(struct thread_data* td) {
    struct rf_client* c = td->io_ops_data;
    struct rf_batch* batch = NULL;
    uint64_t lo = UINT64_MAX, hi = 0;
    struct timespec now;
    const bool fill_time = fio_fill_issue_time(td);
    unsigned i;
    int r;
    if (c->nqueued == 0)
        return 0;
    if (!c->per_write_flush && !c->fsync_mode && !c->no_flush)
        batch = rf_new_batch(c);
    if (fill_time)
        fio_gettime(&now, NULL);
    for (i = 0; i < c->nqueued; ++i) {
        struct io_u* io_u = c->queued[i];
        if (fill_time)
            memcpy(&io_u->issue_time, &now, sizeof(now));
        r = rf_post(td, c, io_u, batch);
        if (r != 0) {
            log_err("remora: posting %s at %llu: %s: %s\n", io_ddir_name(io_u->ddir), io_u->offset,
                    remora_strerror(r), remora_last_error_message());
            /* Not posted: fio gets it back as failed. */
            ((struct rf_iou*)io_u->engine_data)->error = rf_errno(r);
            ++c->in_flight;
            rf_ready(c, io_u);
            continue;
        }
        ++c->in_flight;
        if (io_u->ddir == DDIR_WRITE && batch != NULL) {
            if (io_u->offset < lo)
                lo = io_u->offset;
            if (io_u->offset + io_u->xfer_buflen > hi)
                hi = io_u->offset + io_u->xfer_buflen;
        }
    }
    if (batch != NULL && batch->n == 0)
        batch->used = false;
    else if (batch != NULL) {
        r = remora_flush(c->conn, c->remote, lo, hi - lo, REMORA_FLUSH_STRONGEST, c->flush_method,
                         0, batch);
        if (r != 0) {
            log_err("remora: posting a flush: %s: %s\n", remora_strerror(r),
                    remora_last_error_message());
            for (i = 0; i < batch->n; ++i) {
                ((struct rf_iou*)batch->ios[i]->engine_data)->error = rf_errno(r);
                rf_ready(c, batch->ios[i]);
            }
            batch->used = false;
        }
    }
    /* fio's submission accounting after the posts, so the time between the issue time and the
     * completion is the operations' own (as remora bench times them), not fio's bookkeeping. */
    for (i = 0; i < c->nqueued; ++i)
        io_u_queued(td, c->queued[i]);
    c->nqueued = 0;
    return 0;
}

/* One completion: the io_us it completes go to c->ready. */
static void rf_complete(struct rf_client* c, const struct remora_completion* e) {
    const int kind = e->context != NULL ? *(const int*)e->context : 0;
    const int err = e->status != 0 ? rf_errno(e->status) : 0;
    if (e->status != 0)
        log_err("remora: a completion failed: %s\n", remora_strerror(e->status));
    if (kind == RF_BATCH) {
        struct rf_batch* b = e->context;
        unsigned i;
        for (i = 0; i < b->n; ++i) {
            struct rf_iou* x = b->ios[i]->engine_data;
            if (x->error == 0)
                x->error = err;
            rf_ready(c, b->ios[i]);
        }
        b->used = false;
    } else if (kind == RF_IOU) {
        struct rf_iou* x = e->context;
        if (x->error == 0)
            x->error = err;
        if (e->op == x->final_op)
            rf_ready(c, x->io_u);
    }
}

static long long rf_ms_since(const struct timespec* t0) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)(now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* replicas: takes up to `want` of the set's completions, each completing its io_u. */
static int rf_poll_set(struct rf_client* c, size_t want, size_t* n) {
    struct remora_replica_completion done[RF_POLL_BATCH];
    size_t i;
    int r = remora_replica_set_poll(c->set, done, want, n);
    for (i = 0; r == 0 && i < *n; ++i) {
        struct rf_iou* x = done[i].context;
        if (done[i].status != 0) {
            log_err("remora: a replicated write failed: %s\n", remora_strerror(done[i].status));
            x->error = rf_errno(done[i].status);
        }
        rf_ready(c, x->io_u);
    }
    return r;
}

static int client_getevents(struct thread_data* td, unsigned int min, unsigned int max,
                            const struct timespec* t) {
    struct rf_client* c = td->io_ops_data;
    struct remora_completion done[RF_POLL_BATCH];
    /* Clocks start at the first poll that finds nothing: none is read on the fast path. t0: for
     * fio's timeout; last: since the last completion (or that first empty poll). */
    struct timespec t0, last;
    bool timing = false, since_completion = false;
    unsigned spins = 0;
    const long long limit_ms = t != NULL ? t->tv_sec * 1000 + t->tv_nsec / 1000000 : -1;
    /* Drop what fio took at the last call. */
    if (c->handed > 0) {
        memmove(c->ready, c->ready + c->handed, (c->nready - c->handed) * sizeof *c->ready);
        c->nready -= c->handed;
        c->handed = 0;
    }
    while (c->nready < min || (c->nready == 0 && min == 0)) {
        size_t n = 0, i;
        /* Ask for no more than can come: the C API prepares an entry per one asked for. */
        const size_t want = c->in_flight == 0              ? 1
                            : c->in_flight < RF_POLL_BATCH ? c->in_flight
                                                           : RF_POLL_BATCH;
        int r = c->set != NULL ? rf_poll_set(c, want, &n)
                               : remora_completion_queue_poll(c->cq, done, want, &n);
        if (r != 0) {
            rf_fail(td, "polling completions", r);
            return -rf_errno(r);
        }
        for (i = 0; i < n && c->set == NULL; ++i)
            rf_complete(c, &done[i]);
        if (n > 0) {
            since_completion = false;
            continue;
        }
        if (min == 0 || td->terminate)
            break;
        /* Busy polling reads the clock once every RF_SPINS_PER_CLOCK empty polls, not on every
         * one: a clock read per spin delayed noticing a completion (the limits are coarse). */
        if (c->busy && timing && ++spins % RF_SPINS_PER_CLOCK != 0)
            continue;
        if (!timing) {
            clock_gettime(CLOCK_MONOTONIC, &t0);
            timing = true;
        }
        if (!since_completion) {
            clock_gettime(CLOCK_MONOTONIC, &last);
            since_completion = true;
        }
        if (limit_ms >= 0 && rf_ms_since(&t0) >= limit_ms)
            break;
        if (rf_ms_since(&last) > RF_STALL_MS) {
            log_err("remora: no completion for %d s with %u I/Os in flight\n", RF_STALL_MS / 1000,
                    c->in_flight);
            return -ETIMEDOUT;
        }
        if (!c->busy) {
            size_t got = 0;
            r = c->set != NULL ? remora_replica_set_wait(c->set, RF_WAKE_MS)
                               : remora_completion_queue_wait(c->cq, RF_WAKE_MS, &got);
            if (r != 0 && r != REMORA_E_TIMED_OUT) {
                rf_fail(td, "waiting for completions", r);
                return -rf_errno(r);
            }
        }
    }
    c->handed = c->nready < max ? c->nready : max;
    return (int)c->handed;
}

static struct io_u* client_event(struct thread_data* td, int event) {
    struct rf_client* c = td->io_ops_data;
    return c->ready[event];
}

static void client_cleanup(struct thread_data* td) {
    struct rf_client* c = td->io_ops_data;
    unsigned i;
    if (c == NULL)
        return;
    client_teardown(c);
    remora_remote_region_delete(c->remote);
    remora_domain_delete(c->dom);
    if (c->batches != NULL) {
        for (i = 0; i < c->depth; ++i)
            free(c->batches[i].ios);
    }
    free(c->batches);
    free(c->queued);
    free(c->ready);
    free(c);
    td->io_ops_data = NULL;
}

/* ---- the engine: one set of ops, each dispatching on the role ---- */

static int rf_init(struct thread_data* td) {
    struct rf_options* o = opts(td);
    /* No default: a server job that ran as a client would fail far from the cause. */
    if (o->role == NULL || o->role[0] == '\0') {
        log_err("remora: role is missing: role=server (exposes memory, as librpma_*_server) or "
                "role=client (runs the I/O, as librpma_*_client)\n");
        td_verror(td, EINVAL, "role");
        return 1;
    }
    if (strcmp(o->role, "server") != 0 && strcmp(o->role, "client") != 0) {
        log_err("remora: role=%s is not client or server\n", o->role);
        td_verror(td, EINVAL, "role");
        return 1;
    }
    return is_server(td) ? server_init(td) : client_init(td);
}

static int rf_post_init(struct thread_data* td) {
    return is_server(td) ? 0 : client_post_init(td);
}

static int rf_get_file_size(struct thread_data* td, struct fio_file* f) {
    return is_server(td) ? server_get_file_size(td, f) : client_get_file_size(td, f);
}

static int rf_open_file(struct thread_data* td, struct fio_file* f) {
    return is_server(td) ? server_open_file(td, f) : 0;
}

static int rf_file_nop(struct thread_data* td, struct fio_file* f) {
    return 0;
}

static enum fio_q_status rf_queue(struct thread_data* td, struct io_u* io_u) {
    return is_server(td) ? server_queue(td, io_u) : client_queue(td, io_u);
}

static int rf_commit(struct thread_data* td) {
    return is_server(td) ? 0 : client_commit(td);
}

static int rf_getevents(struct thread_data* td, unsigned int min, unsigned int max,
                        const struct timespec* t) {
    return is_server(td) ? 0 : client_getevents(td, min, max, t);
}

static struct io_u* rf_event(struct thread_data* td, int event) {
    return is_server(td) ? NULL : client_event(td, event);
}

static int rf_io_u_init(struct thread_data* td, struct io_u* io_u) {
    return client_io_u_init(td, io_u);
}

static void rf_io_u_free(struct thread_data* td, struct io_u* io_u) {
    client_io_u_free(td, io_u);
}

static void rf_cleanup(struct thread_data* td) {
    if (td->io_ops_data == NULL)
        return;
    if (is_server(td))
        server_cleanup(td);
    else
        client_cleanup(td);
}

struct ioengine_ops ioengine = {
    .name = "remora",
    .version = FIO_IOOPS_VERSION,
    .init = rf_init,
    .post_init = rf_post_init,
    .get_file_size = rf_get_file_size,
    .open_file = rf_open_file,
    .close_file = rf_file_nop,
    .invalidate = rf_file_nop,
    .queue = rf_queue,
    .commit = rf_commit,
    .getevents = rf_getevents,
    .event = rf_event,
    .io_u_init = rf_io_u_init,
    .io_u_free = rf_io_u_free,
    .cleanup = rf_cleanup,
    .flags = FIO_DISKLESSIO | FIO_NOEXTEND | FIO_ASYNCIO_SETS_ISSUE_TIME,
    .options = rf_options,
    .option_struct_size = sizeof(struct rf_options),
};

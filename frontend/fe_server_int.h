/* fe_server_int.h - the gRPC server's state, shared by fe_server.c (the calls, the
 * completion-queue threads, serving and stopping) and fe_server_listen.c (the
 * listener: descriptor limit, per-connection bounds, channel arguments). Private
 * to frontend/. */
#ifndef HSMCA_FE_SERVER_INT_H
#define HSMCA_FE_SERVER_INT_H

#include <stdatomic.h>

#include <grpc/grpc.h>

#include "fe_app.h"
#include "fe_authpool.h"
#include "fe_connlimit.h"
#include "fe_peercalls.h"
#include "fe_reqlog.h"
#include "log.h"

#define FE_MAX_STREAMS 100
/* A connection holding more calls than this has reset streams to open more than
 * FE_MAX_STREAMS at once (rapid reset, CVE-2023-44487; fe_peercalls.h) and is
 * closed. Twice the stream limit: a client that opens a new stream as soon as one
 * is answered may be a little ahead of our ending the answered call. */
#define FE_MAX_CALLS_PER_CONN (2 * FE_MAX_STREAMS)
/* ... and so is one with more than this many calls cancelled in FE_CANCEL_WINDOW_S:
 * istio-agent cancels none; a client whose deadlines all expire on a stalled front
 * end cancels at most FE_MAX_STREAMS at a time. The cancels are seen in the calls gRPC
 * hands us, behind those it has queued, so a flooding connection still gets many calls
 * in after its first FE_MAX_CANCELS cancels (each dropped cheaply): what gRPC had
 * queued sets how many, not this bound, so a larger one would gain nothing
 * (docs/SECURITY.md §7). */
#define FE_MAX_CANCELS FE_MAX_STREAMS
#define FE_CANCEL_WINDOW_S 10.0

typedef enum { CALL_NEW, CALL_RECV, CALL_AUTH, CALL_SIGNING, CALL_DONE } fe_call_state;

typedef struct {
    grpc_server *server;
    grpc_completion_queue *cq;
    fe_app *app;
    atomic_int active; /* calls received and not yet freed: what a stop waits for,
                          and what server.max_queued_requests bounds */
    grpc_resource_quota *quota;
    log_limiter *busy_log;   /* the "queue full" refusals, one line per window */
    log_limiter *refuse_log; /* the other refusals: garbage costs no line per call */
    /* TokenReview's threads, NULL when it is off */
    fe_authpool *auth_pool;
    fe_connlimit *conns;
    fe_peercalls *peers;    /* calls held per connection */
    log_limiter *reset_log; /* connections closed for rapid reset */
} fe_server;

typedef struct {
    fe_call_state state;
    fe_server *srv;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array request_md;
    grpc_byte_buffer *recv_buf;
    grpc_byte_buffer *send_buf;
    grpc_slice status_details;
    grpc_slice body; /* kept while an authentication thread has the call */
    int cancelled;
    int counted; /* in srv->active */
    char *peer;  /* gRPC's peer string (gpr_free), NULL until received */
    int peer_counted;
    double started; /* monotonic, when the call came (its latency, fe_metrics.h) */
    fe_reqlog rl;   /* its request id and what its final log line says */
    int stage;      /* fe_stage: where a refusal came from */
    int health;     /* a grpc.health.v1.Health/Check call (fe_health.h) */
} fe_call;

struct fe_listener {
    fe_server srv;
};

/* Frees srv's three log limiters (each may be NULL). */
void fe_server_free_limiters(fe_server *srv);

#endif

/* fe_server.c - the gRPC core server for IstioCertificateService.
 *
 * Each call is a small state machine driven by completion-queue events:
 *   NEW  (request_call done)  -> start {RECV_MESSAGE}
 *   RECV (body received)      -> check; refuse at once, or submit to the signer,
 *                                or (a token for TokenReview) hand it to an
 *                                authentication thread, which goes on from there
 *   (signer reply, IPC thread)-> start {SEND_INITIAL_METADATA, SEND_MESSAGE,
 *                                SEND_STATUS, RECV_CLOSE}
 *   DONE (final batch done)   -> free.
 * At most one batch is outstanding per call, so starting the final batch from
 * the IPC thread never races with another batch on the same call. The listener
 * (descriptor limit, per-connection bounds, channel arguments) is set up in
 * fe_server_listen.c. */
#include "fe_server.h"
#include "fe_server_int.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include <openssl/crypto.h>

#include "fe_health.h"
#include "fe_request.h"
#include "fe_metrics.h"
#include "profile.h"
#include "thread_start.h"
#include "util.h"

/* Every call admitted under server.max_queued_requests has a slot in fe_ipc's table. */
_Static_assert(CONFIG_MAX_QUEUED <= FE_IPC_MAX_INFLIGHT, "fe_ipc's table must hold the queue");

#define FE_METHOD "/istio.v1.auth.IstioCertificateService/CreateCertificate"
#define FE_CQ_THREADS 2
/* How long a stop waits for the calls in flight: under the supervisor's 5 s
 * between SIGTERM and SIGKILL. */
#define FE_DRAIN_S 3.0

static grpc_status_code status_for(hsmca_code c)
{
    switch (c) {
    case HSMCA_OK: return GRPC_STATUS_OK;
    case HSMCA_EINVAL: return GRPC_STATUS_INVALID_ARGUMENT;
    case HSMCA_EAUTH: return GRPC_STATUS_UNAUTHENTICATED;
    case HSMCA_EPERM: return GRPC_STATUS_PERMISSION_DENIED;
    case HSMCA_EUNAVAIL: return GRPC_STATUS_UNAVAILABLE;
    case HSMCA_ERATE: return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case HSMCA_ENOTFOUND: return GRPC_STATUS_NOT_FOUND;
    default: return GRPC_STATUS_INTERNAL;
    }
}

static void await_new_call(fe_server *srv)
{
    fe_call *c = calloc(1, sizeof(*c));
    if (!c)
        fatal("out of memory");
    c->srv = srv;
    c->state = CALL_NEW;
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->request_md);
    if (grpc_server_request_call(srv->server, &c->call, &c->details, &c->request_md, srv->cq,
                                 srv->cq, c) != GRPC_CALL_OK)
        log_event(LOG_LVL_ERROR, "grpc_server_request_call failed", NULL, 0);
}

static void free_call(fe_call *c)
{
    if (c->counted)
        atomic_fetch_sub(&c->srv->active, 1);
    if (c->peer_counted)
        fe_peercalls_remove(c->srv->peers, c->peer, util_mono_now());
    gpr_free(c->peer);
    if (c->recv_buf)
        grpc_byte_buffer_destroy(c->recv_buf);
    if (c->send_buf)
        grpc_byte_buffer_destroy(c->send_buf);
    grpc_slice_unref(c->status_details);
    grpc_slice_unref(c->body);
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->request_md);
    if (c->call)
        grpc_call_unref(c->call);
    free(c);
}

/* Sends the initial metadata, the reply (body may be NULL) and the status in one
 * batch; the call ends when it completes. The initial metadata waits for the
 * answer (nothing is sent before it): HEADERS, DATA and trailers then leave in one
 * write and one TLS record instead of two of each, which saves CPU on both sides
 * of every call (docs/PERFORMANCE.md §4). */
static void finish_status(fe_call *c, grpc_status_code status, const char *msg, uint8_t *body,
                          size_t len)
{
    grpc_op ops[4];
    memset(ops, 0, sizeof(ops));
    size_t n = 0;
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (body) {
        grpc_slice s = grpc_slice_from_copied_buffer((const char *)body, len);
        c->send_buf = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->send_buf;
    }
    c->status_details = grpc_slice_from_copied_string(msg ? msg : "");
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = status;
    ops[n++].data.send_status_from_server.status_details = &c->status_details;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
    c->state = CALL_DONE;
    if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK) {
        log_event(LOG_LVL_ERROR, "cannot finish a call", NULL, 0);
        free_call(c);
    }
}

static void finish(fe_call *c, hsmca_code code, const char *msg, uint8_t *body, size_t len)
{
    fe_metrics_observe(FE_HIST_REQUEST, util_mono_now() - c->started);
    if (code == HSMCA_OK)
        fe_metrics_issued(PROFILE_WORKLOAD);
    else
        fe_metrics_refused(c->stage, (int)status_for(code));
    fe_reqlog_final(&c->rl, status_for(code), msg, code == HSMCA_OK ? NULL : c->srv->refuse_log);
    finish_status(c, status_for(code), msg, body, len);
}

void fe_server_free_limiters(fe_server *srv)
{
    log_limiter_free(srv->busy_log);
    log_limiter_free(srv->refuse_log);
    log_limiter_free(srv->reset_log);
}

/* From the IPC thread: the signer answered. */
static void on_signed(void *arg, hsmca_code code, const char *reason, const uint8_t *cert,
                      size_t cert_len)
{
    fe_call *c = arg;
    c->stage = FE_STAGE_SIGNER;
    if (code != HSMCA_OK) {
        char msg[300];
        snprintf(msg, sizeof(msg), "signer refused: %s", reason);
        finish(c, code, code == HSMCA_EUNAVAIL ? reason : msg, NULL, 0);
        return;
    }
    uint8_t *body = NULL;
    size_t len = 0;
    hsmca_err e;
    if (fe_build_response(c->srv->app, cert, cert_len, &body, &len, &e) != HSMCA_OK) {
        finish(c, e.code, e.msg, NULL, 0);
        return;
    }
    finish(c, HSMCA_OK, "", body, len);
    free(body);
}

static const char *find_md(const grpc_metadata_array *md, const char *key, size_t *len)
{
    for (size_t i = 0; i < md->count; i++) {
        if (grpc_slice_str_cmp(md->metadata[i].key, key) == 0) {
            *len = GRPC_SLICE_LENGTH(md->metadata[i].value);
            return (const char *)GRPC_SLICE_START_PTR(md->metadata[i].value);
        }
    }
    *len = 0;
    return NULL;
}

/* The call checked (or refused): to the signer, or the refusal to the caller. */
static void after_check(fe_call *c, hsmca_code rc, fe_checked_request *req, hsmca_err *e)
{
    fe_reqlog_who(&c->rl, req->requester, req->authenticator);
    if (rc != HSMCA_OK) {
        /* The signing log records the front end's refusals too (as its word). */
        fe_ipc_deny(c->srv->app->ipc, req->requester, req->authenticator, rc, e->msg);
        c->stage = req->requester[0] ? FE_STAGE_POLICY : FE_STAGE_AUTH;
        finish(c, rc, e->msg, NULL, 0);
        return;
    }
    c->state = CALL_SIGNING;
    c->stage = FE_STAGE_SIGNER; /* before the submit: the reply may free c at once */
    fe_ipc_caller caller = {req->authenticator, req->token, req->token_len, req->cluster,
                            c->rl.id, req->who.cert_serial, req->who.cert_serial_len,
                            req->who.cert_issuer};
    rc = fe_ipc_submit_as(c->srv->app->ipc, PROFILE_WORKLOAD, req->tbs, req->tbs_len,
                          req->requester, req->csr_sha256, &caller, on_signed, c, e);
    OPENSSL_free(req->tbs);
    req->tbs = NULL;
    if (rc != HSMCA_OK)
        finish(c, rc, e->msg, NULL, 0);
}

/* On an authentication thread: the TokenReview, then the rest of the checks.
 * A call that waited longer than the TokenReview timeout for a thread is
 * answered UNAVAILABLE unsent, so every answer comes within twice it. */
static void tokenreview_job(void *arg, double waited_s, int stopping)
{
    fe_call *c = arg;
    const fe_app *app = c->srv->app;
    fe_auth_creds creds = {.now = util_wall_now(), .may_block = 1};
    creds.authorization = find_md(&c->request_md, "authorization", &creds.authorization_len);
    creds.cluster_id = find_md(&c->request_md, "clusterid", &creds.cluster_id_len);
    grpc_auth_context *peer = grpc_call_auth_context(c->call);
    creds.peer = peer;
    fe_checked_request req;
    memset(&req, 0, sizeof(req));
    req.authenticator = "tokenreview";
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc;
    if (stopping)
        rc = hsmca_fail(&e, HSMCA_EUNAVAIL, "authentication: stopping");
    else if (waited_s >= app->cfg->tr_timeout)
        rc = hsmca_fail(&e, HSMCA_EUNAVAIL,
                        "tokenreview: no authentication thread free within %u s; retry",
                        app->cfg->tr_timeout);
    else
        rc = fe_check_request(app, GRPC_SLICE_START_PTR(c->body), GRPC_SLICE_LENGTH(c->body),
                              &creds, &req, &e);
    grpc_auth_context_release(peer);
    grpc_slice_unref(c->body);
    c->body = grpc_empty_slice();
    after_check(c, rc, &req, &e);
}

/* A Health/Check: answered here, on the completion-queue thread (no I/O). */
static void on_health(fe_call *c, grpc_slice body)
{
    uint8_t out[2];
    size_t n = 0;
    const char *msg;
    int code = fe_health_check(c->srv->app, GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body),
                               out, &n, &msg);
    grpc_slice_unref(body);
    finish_status(c, (grpc_status_code)code, msg, code == 0 ? out : NULL, n);
}

static void on_received(fe_call *c)
{
    if (!c->recv_buf && c->health) {
        finish_status(c, GRPC_STATUS_INVALID_ARGUMENT, "health: no message received", NULL, 0);
        return;
    }
    if (!c->recv_buf) {
        finish(c, HSMCA_EINVAL, "request: no message received", NULL, 0);
        return;
    }
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, c->recv_buf)) {
        finish(c, HSMCA_EINVAL, "request: cannot read the message", NULL, 0);
        return;
    }
    grpc_slice body = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    if (c->health) {
        on_health(c, body);
        return;
    }

    fe_auth_creds creds = {.now = util_wall_now()};
    creds.authorization = find_md(&c->request_md, "authorization", &creds.authorization_len);
    creds.cluster_id = find_md(&c->request_md, "clusterid", &creds.cluster_id_len);
    grpc_auth_context *peer = grpc_call_auth_context(c->call);
    creds.peer = peer;
    fe_checked_request req;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = fe_check_request(c->srv->app, GRPC_SLICE_START_PTR(body),
                                     GRPC_SLICE_LENGTH(body), &creds, &req, &e);
    grpc_auth_context_release(peer);
    if (rc == HSMCA_OK && req.deferred && c->srv->auth_pool) {
        /* A TokenReview: not on this thread, which serves every call. */
        c->body = body;
        c->state = CALL_AUTH;
        rc = fe_authpool_submit(c->srv->auth_pool, tokenreview_job, c, &e);
        if (rc == HSMCA_OK)
            return;
        c->body = grpc_empty_slice();
        c->state = CALL_RECV;
    } else if (rc == HSMCA_OK && req.deferred) {
        rc = hsmca_fail(&e, HSMCA_EINTERNAL, "authentication: no TokenReview threads");
    }
    grpc_slice_unref(body);
    after_check(c, rc, &req, &e);
}

/* server.max_queued_requests: a call beyond it is answered RESOURCE_EXHAUSTED before
 * its body is read or checked, so a flood costs a few microseconds a call and never
 * grows the front end (istio-agent retries with backoff). The count includes streams
 * whose headers came but whose message has not: each holds gRPC core memory outside
 * the memory quota with no deadline, so without this bound held streams alone grow the
 * front end without limit (docs/SECURITY.md §4.12); with no signer connected,
 * UNAVAILABLE just as early (checking a request nobody can sign is wasted work while a
 * restarted signer's clients all retry). 1 when refused. */
static int refuse_when_busy(fe_call *c)
{
    fe_server *srv = c->srv;
    if (!fe_ipc_connected(srv->app->ipc)) {
        if (!c->health)
            fe_metrics_refused(FE_STAGE_LIMIT, GRPC_STATUS_UNAVAILABLE);
        finish_status(c, GRPC_STATUS_UNAVAILABLE, "signer unavailable: not connected", NULL, 0);
        return 1;
    }
    int active = atomic_load(&srv->active);
    unsigned max = srv->app->cfg->max_queued_requests;
    if (active <= (int)max)
        return 0;
    char msg[160];
    snprintf(msg, sizeof(msg),
             "front end busy: %d requests waiting, server.max_queued_requests is %u; retry later",
             active - 1, max);
    if (log_limiter_allow(srv->busy_log, util_mono_now()))
        LOG_EVENT(LOG_LVL_WARN, "refused CreateCertificate", LOG_STR("reason", msg));
    if (!c->health)
        fe_metrics_refused(FE_STAGE_LIMIT, GRPC_STATUS_RESOURCE_EXHAUSTED);
    finish_status(c, GRPC_STATUS_RESOURCE_EXHAUSTED, msg, NULL, 0);
    return 1;
}

static void on_new_call(fe_call *c)
{
    await_new_call(c->srv); /* keep one request_call outstanding */
    fe_reqlog_start(&c->rl);
    c->health = grpc_slice_str_cmp(c->details.method, FE_HEALTH_METHOD) == 0;
    if (refuse_when_busy(c))
        return;
    if (!c->health && grpc_slice_str_cmp(c->details.method, FE_METHOD) != 0) {
        char *m = grpc_slice_to_c_string(c->details.method);
        char msg[300];
        snprintf(msg, sizeof(msg), "method %s is not served here", m);
        gpr_free(m);
        finish_status(c, GRPC_STATUS_UNIMPLEMENTED, msg, NULL, 0);
        return;
    }
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE; /* initial metadata goes with the answer (finish_status) */
    op.data.recv_message.recv_message = &c->recv_buf;
    c->state = CALL_RECV;
    if (grpc_call_start_batch(c->call, &op, 1, c, NULL) != GRPC_CALL_OK) {
        log_event(LOG_LVL_ERROR, "cannot start receiving a call", NULL, 0);
        free_call(c);
    }
}

/* Closes the connection of c, over one of fe_peercalls' bounds (why says which). */
static void close_connection(fe_call *c, const char *why)
{
    fe_server *srv = c->srv;
    struct sockaddr_storage ss;
    socklen_t len;
    hsmca_err e;
    int closed = fe_peer_sockaddr(c->peer, &ss, &len, &e) == HSMCA_OK &&
                 fe_connlimit_close_peer(srv->conns, (struct sockaddr *)&ss, len);
    if (log_limiter_allow(srv->reset_log, util_mono_now()))
        LOG_EVENT(LOG_LVL_WARN,
                  "closing a connection: streams reset before their answer (rapid reset, "
                  "CVE-2023-44487)",
                  LOG_STR("result", closed ? "closed" : "cannot close"), LOG_STR("peer", c->peer),
                  LOG_STR("reason", why), LOG_INT("max_streams", FE_MAX_STREAMS));
}

/* Counts the call against its connection (fe_peercalls.h); closes a connection
 * that holds more calls than its streams allow. 1 when the call's connection has
 * been closed: the caller drops the call (no answer can reach it), which costs one
 * completion instead of three while gRPC hands us what it had queued for it. */
static int hold_for_peer(fe_call *c)
{
    fe_server *srv = c->srv;
    c->peer = grpc_call_get_peer(c->call);
    int over = fe_peercalls_add(srv->peers, c->peer, util_mono_now(), &c->peer_counted);
    if (over == 1) {
        char why[80];
        snprintf(why, sizeof(why), "it holds more than %d calls", FE_MAX_CALLS_PER_CONN);
        close_connection(c, why);
    }
    return over == 2;
}

/* The client cancelled c (reset its stream, or went away) before its answer. */
static void note_cancelled(fe_call *c)
{
    if (c->peer_counted && fe_peercalls_cancelled(c->srv->peers, c->peer, util_mono_now())) {
        char why[80];
        snprintf(why, sizeof(why), "more than %d of its calls cancelled within %.0f s",
                 FE_MAX_CANCELS, FE_CANCEL_WINDOW_S);
        close_connection(c, why);
    }
}

static void *cq_loop(void *arg)
{
    fe_server *srv = arg;
    for (;;) {
        grpc_event ev =
            grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return NULL;
        if (ev.type != GRPC_OP_COMPLETE || !ev.tag)
            continue; /* NULL tag: the shutdown notification */
        fe_call *c = ev.tag;
        switch (c->state) {
        case CALL_NEW:
            if (!ev.success) {
                free_call(c); /* server shutting down */
                break;
            }
            c->counted = 1;
            c->started = util_mono_now();
            c->stage = FE_STAGE_POLICY;
            atomic_fetch_add(&srv->active, 1);
            if (hold_for_peer(c)) {
                /* its connection is closed: no answer can reach it */
                await_new_call(srv);
                free_call(c);
                break;
            }
            on_new_call(c);
            break;
        case CALL_RECV:
            if (!ev.success) {
                /* The client cancelled or went away: no line per call, which a
                 * rapid-reset flood (HEADERS + RST_STREAM) made one per stream. */
                note_cancelled(c);
                free_call(c); /* unref cancels it: nobody is there to answer */
                break;
            }
            on_received(c);
            break;
        case CALL_DONE:
            if (c->cancelled)
                note_cancelled(c);
            free_call(c);
            break;
        case CALL_AUTH:
        case CALL_SIGNING:
            log_event(LOG_LVL_ERROR, "unexpected event while authenticating or signing", NULL, 0);
            break;
        }
    }
}

/* glibc keeps what a burst freed in the threads' arenas, freed chunks between live
 * ones, which only malloc_trim hands back (it madvises free pages inside the heaps,
 * not just the top): after a rapid-reset flood nearly all the front end grew by is
 * such free memory (docs/SECURITY.md §7). At most once a second, and only when more
 * than FE_TRIM_FREE_BYTES lie free: mallinfo2 and the trim take each arena's lock. */
#define FE_TRIM_FREE_BYTES ((size_t)16 << 20)
/* Not while a flood goes on: what it freed would be faulted in again at once. */
#define FE_TRIM_BELOW_CALLS 64

static void give_back_memory(void)
{
    struct mallinfo2 mi = mallinfo2();
    if (mi.fordblks > FE_TRIM_FREE_BYTES)
        malloc_trim(0);
}

int fe_server_serve(fe_listener *l, volatile int *stop)
{
    fe_server *srv = &l->srv;
    grpc_server_start(srv->server);
    for (int i = 0; i < 64; i++)
        await_new_call(srv);
    LOG_EVENT(LOG_LVL_INFO, "serving over TLS", LOG_STR("method", FE_METHOD),
              LOG_STR("listen", srv->app->cfg->listen));

    if (srv->app->tokenreview[0]) {
        /* max_concurrent threads bound the TokenReviews in flight; four calls
         * per thread may wait, more are refused at once (UNAVAILABLE). */
        int n = (int)srv->app->cfg->tr_max_concurrent;
        if (!(srv->auth_pool = fe_authpool_new(n, 4 * n)))
            fatal("cannot start the authentication threads");
    }
    pthread_t th[FE_CQ_THREADS];
    for (int i = 0; i < FE_CQ_THREADS; i++)
        thread_start(&th[i], cq_loop, srv, "completion queue thread");
    double next_tick = util_mono_now() + 1.0;
    while (!*stop) {
        usleep(100 * 1000);
        double now = util_mono_now();
        if (now >= next_tick || now < next_tick - 2.0) {
            next_tick = now + 1.0;
            fe_peercalls_sweep(srv->peers, now);
            if (atomic_load(&srv->active) < FE_TRIM_BELOW_CALLS)
                give_back_memory();
        }
    }

    /* Stop accepting, then let the calls in flight get their answers (the
     * signer's, or UNAVAILABLE when it is gone too) for a bounded time: a
     * valid request must not get a wrong answer because we are stopping. */
    log_event(LOG_LVL_INFO, "shutting down: no new calls, answering those in flight", NULL, 0);
    grpc_server_shutdown_and_notify(srv->server, srv->cq, NULL);
    double until = util_mono_now() + FE_DRAIN_S;
    while (atomic_load(&srv->active) > 0 && util_mono_now() < until)
        usleep(20 * 1000);
    if (atomic_load(&srv->active) > 0)
        LOG_EVENT(LOG_LVL_WARN, "calls still in flight after the stop: cancelling them",
                  LOG_INT("calls", atomic_load(&srv->active)), LOG_INT("after_s", FE_DRAIN_S));
    fe_authpool_stop(srv->auth_pool); /* answers the calls still queued there */
    grpc_server_cancel_all_calls(srv->server);
    grpc_completion_queue_shutdown(srv->cq);
    for (int i = 0; i < FE_CQ_THREADS; i++)
        pthread_join(th[i], NULL);
    grpc_server_destroy(srv->server);
    grpc_completion_queue_destroy(srv->cq);
    grpc_resource_quota_unref(srv->quota);
    fe_server_free_limiters(srv);
    /* srv->peers stays, as the connection cap does: a call the signer has not yet
     * answered may still end after this (on_signed from the IPC thread). */
    free(l);
    return 0;
}

/* loadgen_grpc.c - CreateCertificate over gRPC core with TLS (see loadgen.h).
 *
 * Each worker thread owns a completion queue, its share of the K channels and
 * of the C slots. A slot is one logical request (one pod's) from its first
 * attempt to its final answer: in flight, or waiting out a retry backoff.
 * Closed loop: a slot that ends starts the next request at once. Open loop:
 * requests arrive at t0 + k / rate and take a free slot; an arrival that finds
 * none waits for one, and its latency counts from its scheduled time (no
 * coordinated omission). Retry (istio-agent): UNAVAILABLE and
 * RESOURCE_EXHAUSTED are retried after 500 ms, doubling up to 60 s, each delay
 * jittered by x[0.5, 1.5) and capped at 60 s. */
#include "loadgen.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "fe_grpcrt.h"

#define LG_METHOD "/istio.v1.auth.IstioCertificateService/CreateCertificate"
#define LG_BACKOFF_MIN 0.5
#define LG_BACKOFF_MAX 60.0

enum { SLOT_IDLE, SLOT_FLIGHT, SLOT_WAIT };

typedef struct lg_worker lg_worker;

typedef struct {
    lg_worker *w;
    grpc_call *call;
    grpc_metadata md;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code status;
    grpc_slice details;
    int pod, chan, attempt, state;
    double t_first;
    double t_refused, backoff; /* the last refusal; the backoff slept so far */
} lg_slot;

typedef struct {
    double t;
    int slot;
} lg_timer;

struct lg_worker {
    const lg_opts *o;
    lg_pod *pods;
    lg_stats *st;
    int index;
    grpc_completion_queue *cq;
    grpc_channel **ch;
    int n_ch;
    lg_slot *slots;
    int n_slots;
    int *free_slots, n_free; /* open loop: idle slots */
    lg_timer *heap;          /* retry timers, a binary min-heap */
    int n_heap;
    uint64_t quota, issued; /* requests to start (0: until the deadline) */
    int in_flight, waiting;
    double t0, deadline, next_arrival, period;
    unsigned rnd;
    int failed;
};

static gpr_timespec ts_in(double seconds)
{
    if (seconds < 0)
        seconds = 0;
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_micros((int64_t)(seconds * 1e6), GPR_TIMESPAN));
}

/* ---- retry timers ------------------------------------------------------------------- */

static void heap_push(lg_worker *w, double t, int slot)
{
    int i = w->n_heap++;
    while (i > 0 && w->heap[(i - 1) / 2].t > t) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = (lg_timer){t, slot};
}

static lg_timer heap_pop(lg_worker *w)
{
    lg_timer top = w->heap[0], last = w->heap[--w->n_heap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= w->n_heap)
            break;
        if (c + 1 < w->n_heap && w->heap[c + 1].t < w->heap[c].t)
            c++;
        if (w->heap[c].t >= last.t)
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->n_heap > 0)
        w->heap[i] = last;
    return top;
}

/* ---- one call ----------------------------------------------------------------------- */

static int start_attempt(lg_worker *w, lg_slot *s)
{
    lg_pod *p = &w->pods[s->pod];
    s->call = grpc_channel_create_call(w->ch[s->chan], NULL, GRPC_PROPAGATE_DEFAULTS, w->cq,
                                       grpc_slice_from_static_string(LG_METHOD), NULL,
                                       ts_in(w->o->timeout), NULL);
    s->md.key = grpc_slice_from_static_string("authorization");
    s->md.value = grpc_slice_from_static_string(p->auth);
    grpc_slice body = grpc_slice_from_static_buffer(p->body, p->body_len);
    s->send = grpc_raw_byte_buffer_create(&body, 1);
    s->recv = NULL;
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trail_md);
    s->details = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = 1;
    ops[0].data.send_initial_metadata.metadata = &s->md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &s->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &s->trail_md;
    ops[5].data.recv_status_on_client.status = &s->status;
    ops[5].data.recv_status_on_client.status_details = &s->details;
    s->attempt++;
    w->st->attempts++;
    if (grpc_call_start_batch(s->call, ops, 6, s, NULL) != GRPC_CALL_OK) {
        fprintf(stderr, "loadgen: grpc_call_start_batch failed\n");
        return -1;
    }
    s->state = SLOT_FLIGHT;
    w->in_flight++;
    return 0;
}

/* The call's outcome: its status, or OTHER for an OK without a certificate chain
 * (a response that does not start with field 1, cert_chain). */
static int end_attempt(lg_slot *s)
{
    int code = s->status >= 0 && s->status < LG_CODE_OTHER ? (int)s->status : LG_CODE_OTHER;
    if (code == GRPC_STATUS_OK) {
        grpc_byte_buffer_reader r;
        code = LG_CODE_OTHER;
        if (s->recv && grpc_byte_buffer_reader_init(&r, s->recv)) {
            grpc_slice all = grpc_byte_buffer_reader_readall(&r);
            if (GRPC_SLICE_LENGTH(all) > 2 && GRPC_SLICE_START_PTR(all)[0] == 0x0A)
                code = GRPC_STATUS_OK;
            grpc_slice_unref(all);
            grpc_byte_buffer_reader_destroy(&r);
        }
    }
    grpc_byte_buffer_destroy(s->send);
    if (s->recv)
        grpc_byte_buffer_destroy(s->recv);
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trail_md);
    grpc_slice_unref(s->details);
    grpc_call_unref(s->call);
    s->call = NULL;
    s->state = SLOT_IDLE;
    return code;
}

/* ---- the worker loop ---------------------------------------------------------------- */

static int may_issue(lg_worker *w, double now)
{
    return w->quota ? w->issued < w->quota : now < w->deadline;
}

static int new_request(lg_worker *w, lg_slot *s, double t_first)
{
    int t = w->o->threads;
    s->pod = (int)((w->issued * (uint64_t)t + (uint64_t)w->index) % (uint64_t)w->o->pods);
    s->attempt = 0;
    s->t_first = t_first;
    s->backoff = 0;
    w->issued++;
    w->st->started++;
    return start_attempt(w, s);
}

static double backoff(lg_worker *w, int attempt)
{
    double d = LG_BACKOFF_MIN;
    for (int i = 1; i < attempt && d < LG_BACKOFF_MAX; i++)
        d *= 2;
    d *= 0.5 + (double)rand_r(&w->rnd) / ((double)RAND_MAX + 1.0);
    return d < LG_BACKOFF_MAX ? d : LG_BACKOFF_MAX;
}

static void slot_done(lg_worker *w, lg_slot *s, double now)
{
    int code = end_attempt(s);
    w->in_flight--;
    w->st->t_last = now;
    if (w->o->retry &&
        (code == GRPC_STATUS_UNAVAILABLE || code == GRPC_STATUS_RESOURCE_EXHAUSTED) &&
        (w->quota || now < w->deadline)) {
        w->st->retries++;
        s->t_refused = now;
        s->state = SLOT_WAIT;
        w->waiting++;
        heap_push(w, now + backoff(w, s->attempt), (int)(s - w->slots));
        return;
    }
    w->st->t_final = now;
    w->st->final_backoff = s->backoff;
    w->st->final_attempts = s->attempt;
    if (s->backoff > 0) {
        w->st->backoff_reqs++;
        w->st->backoff_sum += s->backoff;
        if (s->backoff > w->st->backoff_max)
            w->st->backoff_max = s->backoff;
    }
    if (!w->quota && now > w->deadline) {
        w->st->late++;
        w->st->late_ok += code == GRPC_STATUS_OK;
    } else {
        w->st->codes[code]++;
        if (code == GRPC_STATUS_OK) {
            w->st->ok++;
            if (lg_stats_lat(w->st, now - s->t_first) != 0)
                w->failed = 1;
        }
    }
    if (w->o->rate > 0) {
        w->free_slots[w->n_free++] = (int)(s - w->slots);
    } else if (may_issue(w, now) && new_request(w, s, now) != 0) {
        w->failed = 1;
    }
}

/* Starts what is due: retries whose backoff is over, open-loop arrivals. Returns the
 * time of the next thing due (or now + 0.2 s). */
static double start_due(lg_worker *w, double now)
{
    double next = now + 0.2;
    while (w->n_heap > 0 && w->heap[0].t <= now) {
        lg_timer t = heap_pop(w);
        w->waiting--;
        if (!w->quota && now >= w->deadline) {
            w->st->abandoned++; /* its backoff ends after the run */
            w->slots[t.slot].state = SLOT_IDLE;
            if (w->o->rate > 0)
                w->free_slots[w->n_free++] = t.slot;
        } else {
            lg_slot *s = &w->slots[t.slot];
            s->backoff += now - s->t_refused;
            if (start_attempt(w, s) != 0)
                w->failed = 1;
        }
    }
    if (w->n_heap > 0 && w->heap[0].t < next)
        next = w->heap[0].t;
    if (w->o->rate > 0) {
        while (w->n_free > 0 && w->next_arrival <= now && may_issue(w, w->next_arrival)) {
            if (new_request(w, &w->slots[w->free_slots[--w->n_free]], w->next_arrival) != 0)
                w->failed = 1;
            w->next_arrival += w->period;
        }
        /* With every slot taken, the due arrivals wait for a completion, not a timer. */
        if (w->n_free > 0 && may_issue(w, w->next_arrival) && w->next_arrival < next)
            next = w->next_arrival;
    }
    return next;
}

static void abandon_waiting(lg_worker *w)
{
    while (w->n_heap > 0) {
        (void)heap_pop(w);
        w->waiting--;
        w->st->abandoned++;
    }
}

static void *worker_main(void *arg)
{
    lg_worker *w = arg;
    double now = lg_now();
    if (w->o->rate <= 0) {
        for (int i = 0; i < w->n_slots && may_issue(w, now) && !w->failed; i++)
            if (new_request(w, &w->slots[i], now) != 0)
                w->failed = 1;
    }
    while (!w->failed) {
        now = lg_now();
        double next = start_due(w, now);
        int more = may_issue(w, now) && (w->o->rate > 0 || w->in_flight + w->waiting > 0);
        if (!w->quota && now >= w->deadline)
            abandon_waiting(w);
        if (!more && w->in_flight == 0 && w->waiting == 0)
            break;
        grpc_event ev = grpc_completion_queue_next(w->cq, ts_in(next - now), NULL);
        if (ev.type == GRPC_OP_COMPLETE)
            slot_done(w, ev.tag, lg_now());
        else if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
    }
    return NULL;
}

/* ---- setup -------------------------------------------------------------------------- */

static grpc_arg int_arg(const char *key, int v)
{
    grpc_arg a = {.type = GRPC_ARG_INTEGER, .key = (char *)key};
    a.value.integer = v;
    return a;
}

static grpc_channel *make_channel(const lg_opts *o, grpc_channel_credentials *creds, int i)
{
    grpc_arg args[4];
    args[0] = (grpc_arg){.type = GRPC_ARG_STRING, .key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG};
    args[0].value.string = (char *)o->target_name;
    /* Without these, channels with equal arguments share one subchannel: one TCP
     * connection for all K. */
    args[1] = int_arg(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args[2] = int_arg("hsmca.loadgen.channel", i);
    args[3] = int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 1 << 22);
    grpc_channel_args ca = {4, args};
    return grpc_channel_create(o->addr, creds, &ca);
}

/* One call per channel, all at once: the TLS handshakes and HTTP/2 connections are
 * made before the timed phase. Any answer but UNAVAILABLE or DEADLINE_EXCEEDED means
 * the channel is connected. */
static int warm_up(lg_worker *w)
{
    int bad = 0;
    for (int i = 0; i < w->n_ch && i < w->n_slots; i++) {
        lg_slot *s = &w->slots[i];
        s->pod = (w->index + i * w->o->threads) % w->o->pods;
        s->chan = i;
        if (start_attempt(w, s) != 0)
            return -1;
    }
    while (w->in_flight > 0) {
        grpc_event ev = grpc_completion_queue_next(w->cq, ts_in(w->o->timeout + 5), NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            fprintf(stderr, "loadgen: warm-up: no answer within %.0f s\n", w->o->timeout + 5);
            return -1;
        }
        lg_slot *s = ev.tag;
        int code = end_attempt(s);
        w->in_flight--;
        if (code == GRPC_STATUS_UNAVAILABLE || code == GRPC_STATUS_DEADLINE_EXCEEDED)
            bad++;
    }
    if (bad) {
        fprintf(stderr, "loadgen: warm-up: %d of %d channels got no connection to %s\n", bad,
                w->n_ch, w->o->addr);
        return -1;
    }
    return 0;
}

static int worker_init(lg_worker *w, const lg_opts *o, grpc_channel_credentials *creds, int idx,
                       lg_pod *pods, lg_stats *st)
{
    *w = (lg_worker){.o = o, .pods = pods, .st = st, .index = idx};
    w->n_ch = o->connections / o->threads + (idx < o->connections % o->threads);
    w->n_slots = o->concurrency / o->threads + (idx < o->concurrency % o->threads);
    w->quota = lg_share(o->requests, idx, o->threads);
    w->rnd = 0x9e3779b9u * (unsigned)(idx + 1);
    w->cq = grpc_completion_queue_create_for_next(NULL);
    w->ch = calloc((size_t)w->n_ch, sizeof(*w->ch));
    w->slots = calloc((size_t)w->n_slots, sizeof(*w->slots));
    w->free_slots = calloc((size_t)w->n_slots, sizeof(int));
    w->heap = calloc((size_t)w->n_slots, sizeof(*w->heap));
    if (!w->cq || !w->ch || !w->slots || !w->free_slots || !w->heap)
        return -1;
    for (int i = 0; i < w->n_ch; i++)
        if (!(w->ch[i] = make_channel(o, creds, idx + i * o->threads)))
            return -1;
    for (int i = 0; i < w->n_slots; i++) {
        w->slots[i].w = w;
        w->slots[i].chan = i % w->n_ch;
        w->free_slots[w->n_free++] = w->n_slots - 1 - i;
    }
    return 0;
}

static void worker_free(lg_worker *w)
{
    for (int i = 0; w->ch && i < w->n_ch; i++)
        if (w->ch[i])
            grpc_channel_destroy(w->ch[i]);
    if (w->cq) {
        grpc_completion_queue_shutdown(w->cq);
        while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(w->cq);
    }
    free(w->ch);
    free(w->slots);
    free(w->free_slots);
    free(w->heap);
}

int lg_grpc_run(const lg_opts *o, const char *root_pem, lg_pod *pods, lg_stats *stats,
                void (*before)(void *), void *arg, double *t0)
{
    lg_worker w[LG_MAX_THREADS];
    pthread_t th[LG_MAX_THREADS];
    int n = 0, started = 0, bad = 0;
    (void)fe_grpcrt_init(); /* as the front end: abseil's debug bookkeeping off */
    grpc_init();
    grpc_channel_credentials *creds = grpc_ssl_credentials_create(root_pem, NULL, NULL, NULL);
    for (; n < o->threads && !bad; n++)
        bad = worker_init(&w[n], o, creds, n, pods, &stats[n]) != 0;
    for (int i = 0; i < n && !bad && !o->cold; i++)
        bad = warm_up(&w[i]) != 0;
    for (int i = 0; i < n; i++)
        stats[i].attempts = 0; /* the warm-up's */
    if (!bad && o->idle > 0) {
        /* Connected and idle, as istio-agents are between renewals: what they cost. */
        double until = lg_now() + o->idle;
        while (lg_now() < until)
            gpr_sleep_until(ts_in(until - lg_now()));
        before(arg);
        *t0 = lg_now();
    } else if (!bad) {
        before(arg);
        *t0 = lg_now();
        for (int i = 0; i < n; i++) {
            w[i].t0 = *t0;
            w[i].deadline = *t0 + o->seconds;
            w[i].next_arrival = *t0;
            w[i].period = o->rate > 0 ? (double)o->threads / o->rate : 0;
        }
        for (; started < n; started++)
            if (pthread_create(&th[started], NULL, worker_main, &w[started]) != 0)
                break;
        bad = started < n;
        for (int i = 0; i < started; i++) {
            pthread_join(th[i], NULL);
            bad |= w[i].failed;
        }
    }
    for (int i = 0; i < n; i++)
        worker_free(&w[i]);
    grpc_channel_credentials_release(creds);
    grpc_shutdown();
    return bad ? -1 : 0;
}

/* fe_sigstat.c - see fe_sigstat.h.
 *
 * One request at a time: a reply whose id is not the one in flight (a late one, after
 * its timeout) is still taken when newer than the figures held, since the signer's
 * counters only grow; ids come from fe_ipc's one counter, so newer means larger. */
#include "fe_sigstat.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "signer.pb-c.h"
#include "util.h"

struct fe_sigstat {
    fe_ipc *ipc;
    pthread_mutex_t lock; /* everything below; never held across I/O */
    uint64_t asked_id;    /* the request in flight, 0: none */
    double asked_at;      /* monotonic: when it was sent */
    uint64_t got_id;      /* the id of the reply held */
    double got_at;        /* monotonic: when it came; 0: none yet */
    fe_sigstat_figures fig;
};

static void hist_take(metrics_hist_snap *out, const Hsmca__Ipc__Histogram *h)
{
    if (!h) {
        memset(out, 0, sizeof(*out));
        return;
    }
    metrics_hist_from(out, h->bucket, h->n_bucket, h->sum);
}

static void take_arrays(fe_sigstat_figures *f, const Hsmca__Ipc__StatusReply *r)
{
    for (size_t i = 0; i < r->n_issued && i < SIGSTAT_PROFILES; i++)
        f->issued[i] = r->issued[i];
    for (size_t i = 0; i < r->n_refused && i < SIGSTAT_REFUSALS; i++)
        f->refused[i] = r->refused[i];
    f->n_roots = 0;
    for (size_t i = 0; i < r->n_roots_not_after && i < SIGSTAT_ROOTS_MAX; i++)
        f->roots_not_after[f->n_roots++] = r->roots_not_after[i];
}

/* The figures of a reply; a value outside its enum reads as the enum's 0 (none,
 * disabled), which the readiness check takes as not ready. */
static void take(fe_sigstat_figures *f, const Hsmca__Ipc__StatusReply *r)
{
    memset(f, 0, sizeof(*f));
    f->ca_token = r->ca_token < SIGSTAT_TOKEN_STATES ? r->ca_token : 0;
    f->audit_token = r->audit_token < SIGSTAT_TOKEN_STATES ? r->audit_token : 0;
    f->sessions_open = r->sessions_open;
    f->sessions_busy = r->sessions_busy;
    f->reconnects = r->reconnects;
    if (r->ca_key_type)
        snprintf(f->ca_key_type, sizeof(f->ca_key_type), "%s", r->ca_key_type);
    take_arrays(f, r);
    hist_take(&f->c_sign, r->c_sign);
    hist_take(&f->queue_wait, r->queue_wait);
    hist_take(&f->audit_sync, r->audit_sync);
    f->audit_state = r->audit_state < SIGSTAT_AUDIT_STATES ? r->audit_state : 0;
    f->audit_entries = r->audit_entries;
    f->audit_bytes = r->audit_bytes;
    f->checkpoint_size = r->checkpoint_size;
    f->checkpoint_time = r->checkpoint_time;
    f->ca_not_after = r->ca_not_after;
    f->signer_uptime = r->uptime;
    f->ca_closed = r->ca_closed;
    f->ca_closed_seq = r->ca_closed_seq;
}

static void on_reply(void *arg, uint64_t id, const uint8_t *payload, size_t len)
{
    fe_sigstat *st = arg;
    Hsmca__Ipc__StatusReply *r = hsmca__ipc__status_reply__unpack(NULL, len, payload);
    if (!r) {
        LOG_EVENT(LOG_LVL_WARN, "undecodable status reply from the signer",
                  LOG_UINT("request_id", id));
        return;
    }
    fe_sigstat_figures f;
    take(&f, r);
    hsmca__ipc__status_reply__free_unpacked(r, NULL);
    pthread_mutex_lock(&st->lock);
    if (id > st->got_id) {
        uint64_t replies = st->fig.replies + 1;
        st->fig = f;
        st->fig.replies = replies;
        st->fig.valid = 1;
        st->got_id = id;
        st->got_at = util_mono_now();
    }
    if (id == st->asked_id)
        st->asked_id = 0;
    pthread_mutex_unlock(&st->lock);
}

int fe_sigstat_refresh(fe_sigstat *st)
{
    double now = util_mono_now();
    pthread_mutex_lock(&st->lock);
    int waiting = st->asked_id != 0 && now - st->asked_at < FE_SIGSTAT_TIMEOUT_S;
    pthread_mutex_unlock(&st->lock);
    if (waiting)
        return 0;
    uint64_t id;
    hsmca_err e;
    if (fe_ipc_send_status(st->ipc, &id, &e) != HSMCA_OK)
        return -1;
    pthread_mutex_lock(&st->lock);
    if (id > st->got_id) { /* else its reply came already */
        st->asked_id = id;
        st->asked_at = now;
    }
    pthread_mutex_unlock(&st->lock);
    return 0;
}

static void on_tick(void *arg)
{
    fe_sigstat *st = arg;
    pthread_mutex_lock(&st->lock);
    double last = st->asked_id ? st->asked_at : st->got_at;
    int due = util_mono_now() - last >= FE_SIGSTAT_INTERVAL_S;
    pthread_mutex_unlock(&st->lock);
    if (due)
        (void)fe_sigstat_refresh(st);
}

fe_sigstat *fe_sigstat_start(fe_ipc *c)
{
    fe_sigstat *st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->ipc = c;
    pthread_mutex_init(&st->lock, NULL);
    fe_ipc_on_status(c, on_reply, on_tick, st);
    (void)fe_sigstat_refresh(st);
    return st;
}

void fe_sigstat_get(fe_sigstat *st, fe_sigstat_figures *out)
{
    memset(out, 0, sizeof(*out));
    out->age = -1;
    if (!st)
        return;
    int up = fe_ipc_connected(st->ipc);
    pthread_mutex_lock(&st->lock);
    *out = st->fig;
    if (st->got_at > 0)
        out->age = util_mono_now() - st->got_at;
    else
        out->age = -1;
    pthread_mutex_unlock(&st->lock);
    out->connected = up;
}

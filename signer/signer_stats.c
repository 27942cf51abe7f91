/* signer_stats.c - see signer_stats.h. */
#include "signer_stats.h"
#include "signer_ctx.h"
#include "signer_casign.h"

#include <openssl/asn1.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ipc_frame.h"
#include "util.h"

/* Unix seconds of an ASN1_TIME; 0 when it does not convert. */
static int64_t unix_time(const ASN1_TIME *t)
{
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return (int64_t)timegm(&tm);
}

/* "ec-p256", "ec-p384", "ec-other", "rsa-<bits>", "ed25519", else "unknown" (the front end's
 * ca_key label, fe_metrics.c, spells them the same). */
static void key_type(X509 *cert, char *out, size_t sz)
{
    EVP_PKEY *k = cert ? X509_get0_pubkey(cert) : NULL;
    snprintf(out, sz, "unknown");
    if (!k)
        return;
    if (EVP_PKEY_get_base_id(k) == EVP_PKEY_ED25519) {
        snprintf(out, sz, "ed25519");
    } else if (EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA) {
        snprintf(out, sz, "rsa-%d", EVP_PKEY_get_bits(k));
    } else if (EVP_PKEY_get_base_id(k) == EVP_PKEY_EC) {
        char group[32];
        size_t n = 0;
        if (EVP_PKEY_get_utf8_string_param(k, "group", group, sizeof(group), &n) == 1)
            snprintf(out, sz, "%s", strcmp(group, "prime256v1") == 0  ? "ec-p256"
                                    : strcmp(group, "secp384r1") == 0 ? "ec-p384"
                                                                      : "ec-other");
    }
}

/* The notAfter of the first SIGSTAT_ROOTS_MAX certificates of the PEM bundle at path. */
static void read_roots(signer_stats *st, const char *path)
{
    FILE *f = path[0] ? fopen(path, "r") : NULL;
    if (!f) {
        LOG_EVENT(LOG_LVL_WARN,
                  "metrics: the roots' notAfter are not reported: cannot read ca.root_bundle",
                  LOG_STR("path", path));
        return;
    }
    X509 *x;
    while (st->n_roots < SIGSTAT_ROOTS_MAX && (x = PEM_read_X509(f, NULL, NULL, NULL))) {
        st->roots_not_after[st->n_roots++] = unix_time(X509_get0_notAfter(x));
        X509_free(x);
    }
    fclose(f);
}

void signer_stats_start(signer_ctx *s)
{
    signer_stats *st = &s->stats;
    st->started = util_mono_now();
    st->ca_not_after = unix_time(s->ca_cert ? X509_get0_notAfter(s->ca_cert) : NULL);
    key_type(s->ca_cert, st->ca_key_type, sizeof(st->ca_key_type));
    read_roots(st, s->cfg.root_bundle);
}

void signer_stats_issued(signer_stats *st, unsigned what)
{
    if (what < SIGSTAT_PROFILES)
        atomic_fetch_add_explicit(&st->issued[what], 1, memory_order_relaxed);
}

unsigned signer_stats_stage(hsmca_code code, const char *reason)
{
    const char *r = reason ? reason : "";
    if (strstr(r, "queue full"))
        return SIGSTAT_REFUSED_QUEUE;
    if (code == HSMCA_ERATE && strstr(r, "rate limit"))
        return SIGSTAT_REFUSED_RATE;
    if (strncmp(r, "identity binding", 16) == 0)
        return SIGSTAT_REFUSED_BINDING;
    if (strncmp(r, "policy", 6) == 0)
        return SIGSTAT_REFUSED_POLICY;
    if (strncmp(r, "invariant ", 10) == 0 && r[10] >= '1' && r[10] <= '0' + SIGSTAT_INVARIANTS &&
        (r[11] < '0' || r[11] > '9'))
        return SIGSTAT_REFUSED_INVARIANT_1 + (unsigned)(r[10] - '1');
    if (strncmp(r, "audit", 5) == 0)
        return SIGSTAT_REFUSED_AUDIT;
    if (code == HSMCA_EUNAVAIL)
        return SIGSTAT_REFUSED_TOKEN;
    return SIGSTAT_REFUSED_OTHER;
}

void signer_stats_refused(signer_ctx *s, hsmca_code code, const char *reason)
{
    atomic_fetch_add_explicit(&s->stats.refused[signer_stats_stage(code, reason)], 1,
                              memory_order_relaxed);
}

void signer_stats_queue_wait(signer_ctx *s, double seconds)
{
    metrics_hist_observe(&s->stats.queue_wait, seconds);
}

static uint32_t token_state(p11_pool_state st)
{
    return st == P11_POOL_READY          ? SIGSTAT_TOKEN_OK
           : st == P11_POOL_RECONNECTING ? SIGSTAT_TOKEN_RECONNECTING
                                         : SIGSTAT_TOKEN_PIN_REFUSED;
}

/* A histogram's snapshot as the reply carries it (h points into snap). */
static void hist_put(Hsmca__Ipc__Histogram *h, metrics_hist_snap *snap)
{
    hsmca__ipc__histogram__init(h);
    h->bucket = snap->bucket;
    h->n_bucket = METRICS_HIST_BUCKETS;
    h->sum = snap->sum;
    h->count = snap->count;
}

/* What the reply holds besides r: the arrays and histograms it points into. */
typedef struct {
    uint64_t issued[SIGSTAT_PROFILES], refused[SIGSTAT_REFUSALS];
    metrics_hist_snap queue_wait;
    p11_pool_figures ca, audit_key;
    audit_log_figures log;
    Hsmca__Ipc__Histogram h_sign, h_wait, h_sync;
} status_parts;

static void fill_tokens(signer_ctx *s, Hsmca__Ipc__StatusReply *r, status_parts *p)
{
    p11_pool_figures_get(s->pool, &p->ca);
    r->ca_token = token_state(p->ca.state);
    r->sessions_open = p->ca.open;
    r->sessions_busy = p->ca.busy;
    r->reconnects = p->ca.reconnects;
    if (s->audit_key) {
        p11_signkey_figures_get(s->audit_key, &p->audit_key);
        r->audit_token = token_state(p->audit_key.state);
        r->reconnects += p->audit_key.reconnects;
    }
    hist_put(&p->h_sign, &p->ca.sign);
    r->c_sign = &p->h_sign;
}

static void fill_audit(signer_ctx *s, Hsmca__Ipc__StatusReply *r, status_parts *p)
{
    memset(&p->log, 0, sizeof(p->log));
    if (s->audit) {
        audit_log_figures_get(s->audit, &p->log);
        r->audit_state = p->log.failed ? SIGSTAT_AUDIT_FAILING : SIGSTAT_AUDIT_WRITABLE;
        r->audit_entries = p->log.entries;
        r->audit_bytes = p->log.bytes;
    }
    if (s->publish) {
        int64_t t;
        audit_publish_latest_time(s->publish, &r->checkpoint_size, &t);
        r->checkpoint_time = t;
    }
    hist_put(&p->h_sync, &p->log.sync);
    r->audit_sync = &p->h_sync;
}

static void fill_counts(signer_ctx *s, Hsmca__Ipc__StatusReply *r, status_parts *p)
{
    signer_stats *st = &s->stats;
    for (size_t i = 0; i < SIGSTAT_PROFILES; i++)
        p->issued[i] = atomic_load_explicit(&st->issued[i], memory_order_relaxed);
    for (size_t i = 0; i < SIGSTAT_REFUSALS; i++)
        p->refused[i] = atomic_load_explicit(&st->refused[i], memory_order_relaxed);
    r->issued = p->issued;
    r->n_issued = SIGSTAT_PROFILES;
    r->refused = p->refused;
    r->n_refused = SIGSTAT_REFUSALS;
    metrics_hist_read(&st->queue_wait, &p->queue_wait);
    hist_put(&p->h_wait, &p->queue_wait);
    r->queue_wait = &p->h_wait;
    r->ca_key_type = st->ca_key_type;
    r->ca_not_after = st->ca_not_after;
    r->roots_not_after = st->roots_not_after;
    r->n_roots_not_after = (size_t)st->n_roots;
    r->uptime = util_mono_now() - st->started;
    uint64_t closed_seq = 0;
    r->ca_closed = signer_ca_closed(s->ca, &closed_seq);
    r->ca_closed_seq = closed_seq;
}

/* At most SIGNER_STATUS_PER_S answers a second (main thread only). */
static int status_admit(signer_stats *st, double now)
{
    if (now - st->window >= 1.0 || now < st->window) {
        st->window = now;
        st->answered = 0;
    }
    return st->answered++ < SIGNER_STATUS_PER_S;
}

void signer_stats_answer(signer_ctx *s, uint64_t id)
{
    int fd = signer_conn_fd(s);
    if (fd < 0 || !status_admit(&s->stats, util_mono_now()))
        return;
    Hsmca__Ipc__StatusReply r = HSMCA__IPC__STATUS_REPLY__INIT;
    status_parts p;
    fill_tokens(s, &r, &p);
    fill_audit(s, &r, &p);
    fill_counts(s, &r, &p);
    uint8_t buf[SIGSTAT_REPLY_MAX];
    size_t n = hsmca__ipc__status_reply__get_packed_size(&r);
    if (n > sizeof(buf)) {
        LOG_EVENT(LOG_LVL_ERROR, "status reply is over its bound", LOG_UINT("bytes", n),
                  LOG_INT("max", SIGSTAT_REPLY_MAX));
        return;
    }
    hsmca__ipc__status_reply__pack(&r, buf);
    hsmca_err e;
    /* Timeout 0: the main thread never waits for a front end to read figures; one that
     * has no room gets none and asks again. */
    if (ipc_send_within(fd, IPC_STATUS_REPLY, id, buf, n, 0, &e) != HSMCA_OK)
        LOG_EVENT(LOG_LVL_DEBUG, "status reply not sent", LOG_UINT("request_id", id),
                  LOG_STR("error", e.msg));
}

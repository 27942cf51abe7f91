/* fe_metrics.c - see fe_metrics.h: the figures' state. Every writer is a request thread,
 * the IPC thread or the serving certificate's renewal; the one reader is the metrics
 * link's thread. Relaxed atomics: a scrape may see one figure a request newer than
 * another, never a torn one. */
#include "fe_metrics.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "profile.h"
#include "util.h"

static struct {
    const fe_app *app;
    char ca_key[24];
    int64_t ca_not_after, root_not_after;
    _Atomic int64_t serving_not_after;
    atomic_uint_fast64_t issued[2];
    atomic_uint_fast64_t refused[FE_STAGE_N][17];
    metrics_hist hist[FE_HIST_N];
    atomic_uint_fast64_t ctr[FE_CTR_N];
    _Atomic int64_t keys_at_ms[IPC_KEYSETS];
    atomic_uint_fast64_t keys_pushes[IPC_KEYSETS];
    fe_connlimit *_Atomic conns;
} M;

static int64_t not_after_of(const X509 *x)
{
    struct tm tm;
    return x && ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) ? (int64_t)timegm(&tm) : 0;
}

/* The last certificate of the root bundle's PEM (the chain_tail's last element): the
 * root in use during a rotation is the one the operator appended last. */
static int64_t root_not_after(const char *pem)
{
    BIO *b = pem ? BIO_new_mem_buf(pem, -1) : NULL;
    int64_t t = 0;
    X509 *x;
    while (b && (x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        int64_t n = not_after_of(x);
        if (!t || n < t)
            t = n; /* the earliest: what an alert must see first */
        X509_free(x);
    }
    BIO_free(b);
    return t;
}

void fe_metrics_init(const fe_app *app)
{
    M.app = app;
    EVP_PKEY *k = X509_get0_pubkey(app->ca_cert);
    /* Spelled as the signer spells its StatusReply.ca_key_type (signer_stats.c), so both
     * families' ca_key labels match. */
    int id = k ? EVP_PKEY_get_base_id(k) : 0, bits = k ? EVP_PKEY_get_bits(k) : 0;
    char group[32] = "";
    size_t glen = 0;
    if (id == EVP_PKEY_EC && EVP_PKEY_get_group_name(k, group, sizeof(group), &glen) != 1)
        group[0] = '\0';
    if (id == EVP_PKEY_EC)
        snprintf(M.ca_key, sizeof(M.ca_key), "%s",
                 !strcmp(group, "prime256v1")  ? "ec-p256"
                 : !strcmp(group, "secp384r1") ? "ec-p384"
                                               : "ec-other");
    else if (id == EVP_PKEY_RSA)
        snprintf(M.ca_key, sizeof(M.ca_key), "rsa-%d", bits);
    else if (id == EVP_PKEY_ED25519)
        snprintf(M.ca_key, sizeof(M.ca_key), "ed25519");
    else
        snprintf(M.ca_key, sizeof(M.ca_key), "unknown");
    M.ca_not_after = not_after_of(app->ca_cert);
    M.root_not_after =
        app->n_chain_tail ? root_not_after(app->chain_tail[app->n_chain_tail - 1]) : 0;
}

void fe_metrics_set_connlimit(fe_connlimit *l)
{
    atomic_store(&M.conns, l);
}

void fe_metrics_issued(int profile)
{
    atomic_fetch_add_explicit(&M.issued[profile == PROFILE_SERVING], 1, memory_order_relaxed);
}

void fe_metrics_refused(fe_stage stage, int grpc_code)
{
    if ((unsigned)stage < FE_STAGE_N && grpc_code > 0 && grpc_code < 17)
        atomic_fetch_add_explicit(&M.refused[stage][grpc_code], 1, memory_order_relaxed);
}

void fe_metrics_observe(fe_hist h, double seconds)
{
    if ((unsigned)h < FE_HIST_N)
        metrics_hist_observe(&M.hist[h], seconds);
}

void fe_metrics_count(fe_ctr c)
{
    if ((unsigned)c < FE_CTR_N)
        atomic_fetch_add_explicit(&M.ctr[c], 1, memory_order_relaxed);
}

void fe_metrics_keys_loaded(int cluster)
{
    if (cluster < 0 || cluster >= IPC_KEYSETS)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    atomic_store(&M.keys_at_ms[cluster], (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    atomic_fetch_add(&M.keys_pushes[cluster], 1);
}

void fe_metrics_serving(int64_t not_after)
{
    atomic_store(&M.serving_not_after, not_after);
    fe_metrics_issued(PROFILE_SERVING);
}

void fe_metrics_snapshot(fe_metrics_snap *s)
{
    memset(s, 0, sizeof(*s));
    s->app = M.app;
    s->ca_key = M.ca_key;
    s->ca_not_after = M.ca_not_after;
    s->root_not_after = M.root_not_after;
    s->serving_not_after = atomic_load(&M.serving_not_after);
    for (int i = 0; i < 2; i++)
        s->issued[i] = atomic_load(&M.issued[i]);
    for (int st = 0; st < FE_STAGE_N; st++)
        for (int c = 0; c < 17; c++)
            s->refused[st][c] = atomic_load(&M.refused[st][c]);
    for (int h = 0; h < FE_HIST_N; h++)
        metrics_hist_read(&M.hist[h], &s->hist[h]);
    for (int c = 0; c < FE_CTR_N; c++)
        s->ctr[c] = atomic_load(&M.ctr[c]);
    for (int k = 0; k < IPC_KEYSETS; k++) {
        s->keys_at[k] = (double)atomic_load(&M.keys_at_ms[k]) / 1000.0;
        s->keys_pushes[k] = atomic_load(&M.keys_pushes[k]);
    }
    fe_connlimit *l = atomic_load(&M.conns);
    if (l) {
        s->have_conns = 1;
        s->conns_open = fe_connlimit_open(l);
        s->conns_refused = fe_connlimit_refused(l);
    }
}

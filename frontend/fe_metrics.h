/* fe_metrics.h - the front end's figures for the metrics process (docs/ARCHITECTURE.md §5.3): counters
 * and histograms the request path bumps (lock-free atomics, never an identity in a label),
 * rendered on request in the Prometheus text format (fe_metrics_text.c), together with the
 * signer's latest figures. One set per process. */
#ifndef HSMCA_FE_METRICS_H
#define HSMCA_FE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "fe_app.h"
#include "fe_connlimit.h"
#include "metrics_hist.h"

/* Where a CreateCertificate was refused: bounded label values. */
typedef enum {
    FE_STAGE_AUTH,   /* "authentication": no authenticator accepted the caller */
    FE_STAGE_POLICY, /* "policy": the request, its CSR, the SAN and TTL policy */
    FE_STAGE_SIGNER, /* "signer": the signer refused or was unavailable */
    FE_STAGE_LIMIT,  /* "limit": server.max_queued_requests, or no signer to ask */
    FE_STAGE_N
} fe_stage;

/* The front end's latency histograms. */
typedef enum {
    FE_HIST_REQUEST, /* a CreateCertificate from its arrival to its answer */
    FE_HIST_AUTH,    /* the authenticator chain */
    FE_HIST_N
} fe_hist;

/* Plain counters. */
typedef enum {
    FE_CTR_TR_CACHE_HITS, /* TokenReview answers taken from the cache */
    FE_CTR_TR_FAILURES,   /* TokenReviews that got no usable answer (UNAVAILABLE) */
    FE_CTR_TR_REFUSED,    /* tokens the API server said are not authenticated */
    FE_CTR_RENDERS,       /* expositions rendered for the metrics process */
    FE_CTR_N
} fe_ctr;

/* Takes what the figures describe from app (the CA certificate, the root bundle, the key
 * type, the TokenReview clients and issuer keys); call once before any other. */
void fe_metrics_init(const fe_app *app);
/* The listener's connection counter (open, refused by server.max_connections). */
void fe_metrics_set_connlimit(fe_connlimit *l);

void fe_metrics_issued(int profile); /* PROFILE_WORKLOAD or PROFILE_SERVING */
void fe_metrics_refused(fe_stage stage, int grpc_code);
void fe_metrics_observe(fe_hist h, double seconds);
void fe_metrics_count(fe_ctr c);
/* The issuer keys of cluster (0 local, i + 1 auth.clusters[i]) were pushed and loaded. */
void fe_metrics_keys_loaded(int cluster);
/* The serving certificate in use now expires at not_after (Unix time). */
void fe_metrics_serving(int64_t not_after);

/* The exposition text (malloc'd, NUL-terminated, *len bytes), NULL when out of memory. */
char *fe_metrics_render(size_t *len);

/* --- for fe_metrics_text.c and fe_ready.c: a snapshot of the figures --- */

typedef struct {
    const fe_app *app;
    const char *ca_key; /* the CA key type label: "ec-p256", "rsa-3072", ... */
    int64_t ca_not_after, root_not_after, serving_not_after;
    uint64_t issued[2]; /* [0] workload, [1] serving */
    uint64_t refused[FE_STAGE_N][17];
    metrics_hist_snap hist[FE_HIST_N];
    uint64_t ctr[FE_CTR_N];
    double keys_at[IPC_KEYSETS]; /* wall clock of the latest push per cluster; 0: none */
    uint64_t keys_pushes[IPC_KEYSETS];
    unsigned conns_open;
    uint64_t conns_refused;
    int have_conns;
} fe_metrics_snap;

void fe_metrics_snapshot(fe_metrics_snap *s);

#endif

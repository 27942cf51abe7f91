/* signer_stats.h - the signer's figures for the front end's metrics and readiness: the
 * counters kept where the events happen (relaxed atomics, never a lock on the signing
 * path) and the answer to a StatusRequest (proto/signer.proto), built from counters and
 * short reads only: never a token call, never the signing log's sync. Private to signer/. */
#ifndef HSMCA_SIGNER_STATS_H
#define HSMCA_SIGNER_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "hsmca_err.h"
#include "ipc_contract.h"
#include "metrics_hist.h"

typedef struct signer_ctx signer_ctx;

typedef struct {
    _Atomic uint64_t issued[SIGSTAT_PROFILES];
    _Atomic uint64_t refused[SIGSTAT_REFUSALS];
    metrics_hist queue_wait; /* a SignRequest's receipt to the start of its signing */
    double started;          /* monotonic: the signer's start */
    /* Fixed at start: the CA certificate's and the roots' notAfter (Unix seconds). */
    char ca_key_type[SIGSTAT_KEY_TYPE_MAX + 1]; /* "ec-p256", "rsa-2048" */
    int64_t ca_not_after;
    int64_t roots_not_after[SIGSTAT_ROOTS_MAX];
    int n_roots;
    /* StatusReplies sent in the current second (main thread only): a front end that
     * asks faster than SIGNER_STATUS_PER_S gets no more answers that second. */
    double window;
    unsigned answered;
} signer_stats;

/* Status replies per second at most: the front end asks about once a second. */
#define SIGNER_STATUS_PER_S 50

/* At start, once s->ca_cert and s->cfg are set: the start time and the notAfter of the
 * CA certificate and of ca.root_bundle's first SIGSTAT_ROOTS_MAX certificates (a bundle
 * that does not read leaves the roots out, with a warning: the config check refused
 * worse already). */
void signer_stats_start(signer_ctx *s);

/* A signature by the CA key, of what (enum sigstat_profile). */
void signer_stats_issued(signer_stats *st, unsigned what);

/* The stage (enum sigstat_refusal) a refusal's code and reason name. */
unsigned signer_stats_stage(hsmca_code code, const char *reason);
/* A refusal of a signing request: counted under its stage. */
void signer_stats_refused(signer_ctx *s, hsmca_code code, const char *reason);

/* A request's wait from its receipt to the start of its signing, in seconds. */
void signer_stats_queue_wait(signer_ctx *s, double seconds);

/* Answers StatusRequest id on the current front end connection (main thread): never
 * waits for room (an answer the front end has no room for is dropped; it asks again). */
void signer_stats_answer(signer_ctx *s, uint64_t id);

#endif

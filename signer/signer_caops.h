/* signer_caops.h - the CA profile's context: what the CA-profile operations (the
 * intermediates, signer_ica*.c; revocations and the CRL, signer_crl*.c and signer_revoke.c;
 * the CA signing thread, signer_casign.c) hold and read, and nothing else of the signer.
 * signer_ctx holds one (s->ca); the admin socket hands these ops this, not signer_ctx, so
 * what they may change is what is here. Private to signer/. */
#ifndef HSMCA_SIGNER_CAOPS_H
#define HSMCA_SIGNER_CAOPS_H

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>
#include <openssl/x509.h>

#include "audit_log.h"
#include "config.h"
#include "p11.h"
#include "sigalg.h"
#include "signer_limits.h"
#include "signer_stats.h"
#include "signer_tbs.h"

typedef struct signer_caops signer_caops;

struct signer_caops {
    /* The signer's, lent at start (signer_core.c) and never replaced while it runs: the
     * config (signer_ica_load sets audit.origin's default in it), the CA certificate and
     * its key's algorithm, the trust domains (policy), the CA key's pool, the log (NULL:
     * none), the serial set and the counters. */
    hsmca_config *cfg;
    X509 *ca_cert;
    const sigalg *alg;
    const tbs_policy *policy;
    p11_pool *pool;
    audit_log *audit;
    serial_set *serials;
    signer_stats *stats;
    /* Intermediate CA requests (signer_ica.h): rebuilt from the log at start (NULL without
     * one), then the main thread's alone; the PEM text fetch hands out. */
    struct audit_ica *ica;
    char *ica_ca_pem, *ica_chain_pem, *ica_roots_pem;
    /* The CA profile closed (signer_casign.h signer_ca_close): the log breaks a CA-profile
     * rule at seq ca_closed_seq, why in ca_closed_why; workloads are still signed. */
    int ca_closed;
    uint64_t ca_closed_seq;
    char ca_closed_why[512];
    int64_t admin_uid; /* the uid of the admin caller whose op runs now (SO_PEERCRED) */
    /* Revocations and the CA's CRL (signer_crl.h): rebuilt from the log at start, then the
     * main thread's alone; the PEM of the CRL this life signed last (NULL: none yet). */
    struct audit_crl *crl;
    /* crl's revocations, revocations by identity and identity index: the checker reads
     * and notes, the main thread adds (signer_revoke.h); the CRL's own fields are the main
     * thread's alone */
    pthread_mutex_t rev_lock;
    char *crl_pem;
    double crl_next_try; /* monotonic: the tick's next look at the CRL */
    /* The CA profile's signatures off the main loop (signer_casign.h); the reply for the
     * admin caller waiting for one, once it completed (the admin socket sends it). */
    struct signer_casign *casign;
    json_t *ca_reply;
};

/* An empty context (no thread yet, nothing lent); NULL when out of memory. The caller
 * frees it with signer_caops_free. */
signer_caops *signer_caops_new(void);

/* Frees ca and what it holds (intermediates, revocations, CRL, PEM text), not what it was
 * lent; after signer_casign_free. NULL is fine. */
void signer_caops_free(signer_caops *ca);

#endif

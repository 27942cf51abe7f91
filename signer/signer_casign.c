/* signer_casign.c - the CA profile's own signatures (see signer_casign.h).
 *
 * The main loop reads the front end's requests and runs the watchdog that answers a
 * workload request UNAVAILABLE once its token call is past pkcs11.sign_timeout: no token
 * call may run on it, or one hung C_Sign would take issuance down with no answer. So an
 * istiod intermediate (ica-approve, ica-fetch) and the CA's CRL (ca-revoke, the tick) are
 * built and logged on the main loop, and only their digest goes to this one thread, which
 * signs it with the same pool and sessions as the workers (one signing path:
 * p11_pool_sign_digest). The main loop looks at it on every pass (signer_casign_poll):
 * - the signature is back: its completion runs there (verify, assemble, the result or crl
 *   entry, the reply to the admin caller, whose connection waited unread meanwhile);
 * - it is past pkcs11.sign_timeout: the completion runs with UNAVAILABLE (an intermediate's
 *   intent gets its result entry, not signed, as a workload timeout does; the caller is
 *   told to fetch again; a CRL is tried again by the tick), and the signature, when the
 *   token returns it, is discarded here, never assembled or released.
 * One CA signature at a time: while one is out (a hung one included) the next is refused
 * up front with UNAVAILABLE, as it is while the CA key's token is reconnecting; the
 * workers' other sessions go on signing workload certificates meanwhile. */
#include "signer_casign.h"
#include "signer_caops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_contract.h"
#include "log.h"
#include "thread_start.h"
#include "util.h"

enum { CS_IDLE, CS_QUEUED, CS_SIGNING, CS_DONE };

struct signer_casign {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    int state;     /* CS_*, under mu */
    int abandoned; /* answered overdue: the signature, when it comes, is discarded */
    int stop;
    uint8_t md[64];
    size_t md_len;
    uint8_t sig[IPC_SIG_MAX];
    size_t sig_len;
    hsmca_err err;
    double started; /* monotonic: when it was handed over */
    /* The main thread's alone: the completion still to run. */
    signer_casign_done done;
    void *arg;
};

static void *casign_thread(void *arg)
{
    signer_caops *ca = arg;
    struct signer_casign *c = ca->casign;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && c->state != CS_QUEUED)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stop)
            break;
        c->state = CS_SIGNING;
        uint8_t md[64], sig[IPC_SIG_MAX];
        size_t md_len = c->md_len, sig_len = sizeof(sig);
        memcpy(md, c->md, md_len);
        pthread_mutex_unlock(&c->mu);
        hsmca_err e;
        hsmca_err_clear(&e);
        hsmca_code rc = p11_pool_sign_digest(ca->pool, md, md_len, sig, &sig_len, &e);
        pthread_mutex_lock(&c->mu);
        if (c->abandoned) {
            c->abandoned = 0;
            c->state = CS_IDLE;
            log_event(LOG_LVL_WARN,
                      "a CA signature returned after it was answered overdue; discarded", NULL, 0);
            continue;
        }
        c->err = e;
        c->err.code = rc;
        memcpy(c->sig, sig, sig_len);
        c->sig_len = rc == HSMCA_OK ? sig_len : 0;
        c->state = CS_DONE;
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void signer_casign_init(signer_caops *ca)
{
    struct signer_casign *c = calloc(1, sizeof(*c));
    if (!c)
        fatal("out of memory");
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    ca->casign = c;
    thread_start(&c->th, casign_thread, ca, "CA signing thread");
}

int signer_casign_busy(signer_caops *ca)
{
    struct signer_casign *c = ca->casign;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    int busy = c->state != CS_IDLE || c->done;
    pthread_mutex_unlock(&c->mu);
    return busy;
}

void signer_ca_close(signer_caops *ca, uint64_t seq, const char *why)
{
    if (ca->ca_closed)
        return; /* the first broken rule is the one to report */
    ca->ca_closed = 1;
    ca->ca_closed_seq = seq;
    snprintf(ca->ca_closed_why, sizeof(ca->ca_closed_why), "%s", why);
    char sq[24];
    snprintf(sq, sizeof(sq), "%llu", (unsigned long long)seq);
    LOG_EVENT(LOG_LVL_ERROR, "CA profile closed: the signing log breaks a CA-profile rule; "
              "workloads are still signed (docs/OPERATIONS.md)", LOG_STR("seq", sq),
              LOG_STR("reason", why));
}

hsmca_code signer_ca_open(signer_caops *ca, hsmca_err *e)
{
    HSMCA_ENSURE(!ca->ca_closed, e, HSMCA_EPERM,
                 "the CA profile is closed: the signing log breaks a CA-profile rule at seq "
                 "%llu (%s); workloads are still signed, intermediates and CRLs are not "
                 "(docs/OPERATIONS.md)",
                 (unsigned long long)ca->ca_closed_seq, ca->ca_closed_why);
    return HSMCA_OK;
}

int signer_ca_closed(const signer_caops *ca, uint64_t *seq)
{
    *seq = ca->ca_closed_seq;
    return ca->ca_closed;
}

hsmca_code signer_casign_ready(signer_caops *ca, hsmca_err *e)
{
    HSMCA_GUARD(signer_ca_open(ca, e));
    HSMCA_ENSURE(ca->casign, e, HSMCA_EINTERNAL, "no CA signing thread");
    HSMCA_ENSURE(p11_pool_healthy(ca->pool), e, HSMCA_EUNAVAIL,
                 "the CA key's token is reconnecting: not signed now (try again)");
    HSMCA_ENSURE(!signer_casign_busy(ca), e, HSMCA_EUNAVAIL,
                 "the CA key's previous CA signature has not returned (a token call hangs?): "
                 "not signed now (try again)");
    return HSMCA_OK;
}

hsmca_code signer_casign_start(signer_caops *ca, const uint8_t *md, size_t md_len,
                               signer_casign_done done, void *arg, hsmca_err *e)
{
    HSMCA_GUARD(signer_casign_ready(ca, e));
    struct signer_casign *c = ca->casign;
    HSMCA_ENSURE(md_len <= sizeof(c->md), e, HSMCA_EINTERNAL, "digest too long");
    c->done = done;
    c->arg = arg;
    pthread_mutex_lock(&c->mu);
    memcpy(c->md, md, md_len);
    c->md_len = md_len;
    c->started = util_mono_now();
    c->state = CS_QUEUED;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return HSMCA_OK;
}

/* Runs the pending completion with sig (NULL: not signed, why says why). */
static void complete(signer_caops *ca, const uint8_t *sig, size_t sig_len, const hsmca_err *why)
{
    struct signer_casign *c = ca->casign;
    signer_casign_done done = c->done;
    void *arg = c->arg;
    c->done = NULL;
    c->arg = NULL;
    json_t *r = done(ca, arg, sig, sig_len, why);
    if (r) {
        json_decref(ca->ca_reply);
        ca->ca_reply = r;
    }
}

void signer_casign_poll(signer_caops *ca)
{
    struct signer_casign *c = ca->casign;
    if (!c || !c->done)
        return;
    uint8_t sig[IPC_SIG_MAX];
    size_t sig_len = 0;
    hsmca_err why;
    pthread_mutex_lock(&c->mu);
    int st = c->state;
    int overdue = st != CS_DONE && util_mono_now() - c->started > ca->cfg->sign_timeout;
    if (st == CS_DONE) {
        why = c->err;
        sig_len = c->sig_len;
        memcpy(sig, c->sig, sig_len);
        c->state = CS_IDLE;
    } else if (overdue && st == CS_QUEUED) {
        c->state = CS_IDLE; /* the thread never took it */
    } else if (overdue) {
        c->abandoned = 1;
    }
    pthread_mutex_unlock(&c->mu);
    if (st != CS_DONE && !overdue)
        return;
    if (overdue) {
        hsmca_fail(&why, HSMCA_EUNAVAIL,
                   "the token did not answer within pkcs11.sign_timeout (%u s)",
                   ca->cfg->sign_timeout);
        LOG_EVENT(LOG_LVL_WARN, "CA signature failed", LOG_STR("error", why.msg));
    }
    complete(ca, why.code == HSMCA_OK ? sig : NULL, sig_len, &why);
}

int signer_casign_stop(signer_caops *ca, int timeout_s)
{
    struct signer_casign *c = ca->casign;
    if (!c)
        return 1;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_s;
    if (pthread_timedjoin_np(c->th, NULL, &deadline) != 0) {
        LOG_EVENT(LOG_LVL_WARN,
                  "the CA signing thread did not stop within timeout_s (token call hung?); exiting "
                  "without closing the token",
                  LOG_INT("timeout_s", timeout_s));
        return 0;
    }
    return 1;
}

void signer_casign_free(signer_caops *ca)
{
    struct signer_casign *c = ca->casign;
    if (!c)
        return;
    if (c->done) {
        pthread_mutex_lock(&c->mu);
        int st = c->state;
        pthread_mutex_unlock(&c->mu);
        hsmca_err why;
        if (st == CS_DONE)
            why = c->err;
        else
            hsmca_fail(&why, HSMCA_EUNAVAIL, "the signer is stopping; not signed");
        complete(ca, st == CS_DONE && why.code == HSMCA_OK ? c->sig : NULL, c->sig_len, &why);
    }
    json_decref(ca->ca_reply);
    ca->ca_reply = NULL;
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
    ca->casign = NULL;
}

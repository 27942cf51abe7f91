/* signer_probe.c - see signer_probe.h. */
#include "signer_probe.h"
#include "signer_ctx.h"

#include <errno.h>
#include <stdlib.h>

#include "thread_start.h"
#include "util.h"

struct signer_probe {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: the period, the stop, the end */
    pthread_t th;
    int stop, ended; /* under mu */
};

static void *probe_thread(void *arg)
{
    signer_ctx *s = arg;
    struct signer_probe *p = s->probe;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec next = util_mono_deadline(SIGNER_PROBE_S);
        while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &next) != ETIMEDOUT) {
        }
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->mu);
        (void)p11_pool_probe(s->pool);
        if (s->audit_key)
            (void)p11_signkey_probe(s->audit_key);
        pthread_mutex_lock(&p->mu);
    }
    p->ended = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void signer_probe_start(signer_ctx *s)
{
    struct signer_probe *p = calloc(1, sizeof(*p));
    if (!p)
        fatal("out of memory");
    pthread_mutex_init(&p->mu, NULL);
    util_cond_init_monotonic(&p->cv);
    s->probe = p;
    thread_start(&p->th, probe_thread, s, "token probe thread");
}

int signer_probe_stop(signer_ctx *s)
{
    struct signer_probe *p = s->probe;
    if (!p)
        return 1;
    struct timespec end = util_mono_deadline(SIGNER_STOP_TIMEOUT_S);
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    while (!p->ended && pthread_cond_timedwait(&p->cv, &p->mu, &end) != ETIMEDOUT) {
    }
    int ended = p->ended;
    pthread_mutex_unlock(&p->mu);
    if (!ended) {
        log_event(LOG_LVL_WARN,
                  "the token probe is still in a token call: left to the process's exit", NULL, 0);
        return 0;
    }
    pthread_join(p->th, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    s->probe = NULL;
    return 1;
}

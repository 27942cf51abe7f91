/* fe_authpool.c - see fe_authpool.h. A ring of jobs under one mutex. */
#include "fe_authpool.h"

#include <pthread.h>
#include <stdlib.h>

#include "log.h"
#include "thread_start.h"
#include "util.h"

typedef struct {
    fe_authpool_fn fn;
    void *arg;
    double queued;
} ap_job;

struct fe_authpool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ap_job *q;
    int cap, head, n;
    int stopping;
    int n_threads;
    pthread_t *th;
};

static void *worker(void *arg)
{
    fe_authpool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->n == 0 && !p->stopping)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->n == 0)
            break; /* stopping, nothing left */
        ap_job j = p->q[p->head];
        p->head = (p->head + 1) % p->cap;
        p->n--;
        int stopping = p->stopping;
        pthread_mutex_unlock(&p->mu);
        j.fn(j.arg, util_mono_now() - j.queued, stopping);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

fe_authpool *fe_authpool_new(int threads, int queue_max)
{
    if (threads < 1 || queue_max < 1)
        return NULL;
    fe_authpool *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->q = calloc((size_t)queue_max, sizeof(*p->q));
    p->th = calloc((size_t)threads, sizeof(*p->th));
    if (!p->q || !p->th) {
        free(p->q);
        free(p->th);
        free(p);
        return NULL;
    }
    p->cap = queue_max;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (int i = 0; i < threads; i++) {
        thread_start(&p->th[i], worker, p, "authentication thread");
        p->n_threads++;
    }
    return p;
}

hsmca_code fe_authpool_submit(fe_authpool *p, fe_authpool_fn fn, void *arg, hsmca_err *e)
{
    pthread_mutex_lock(&p->mu);
    if (p->stopping || p->n == p->cap) {
        int stopping = p->stopping;
        pthread_mutex_unlock(&p->mu);
        return hsmca_fail(e, HSMCA_EUNAVAIL,
                          stopping ? "authentication: stopping"
                                   : "authentication: too many calls waiting for the "
                                     "Kubernetes API server; retry");
    }
    p->q[(p->head + p->n) % p->cap] = (ap_job){fn, arg, util_mono_now()};
    p->n++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return HSMCA_OK;
}

void fe_authpool_stop(fe_authpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->q);
    free(p->th);
    free(p);
}

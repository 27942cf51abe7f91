/* fe_authpool.h - a small fixed pool of authentication threads with a bounded
 * queue, for authenticators that block on the network (TokenReview): the gRPC
 * completion-queue threads hand such a call over and go back to serving, so a
 * slow API server stalls only the calls that wait for it. The number of
 * threads bounds the requests in flight to the API server; a full queue is
 * refused at once (UNAVAILABLE: the caller retries). */
#ifndef HSMCA_FE_AUTHPOOL_H
#define HSMCA_FE_AUTHPOOL_H

#include "hsmca_err.h"

typedef struct fe_authpool fe_authpool;

/* A job: run(arg, waited_s) on a pool thread, waited_s the seconds it spent
 * queued (a job that waited too long can answer UNAVAILABLE without working);
 * at stop, the jobs still queued run with stopping = 1, and must only answer. */
typedef void (*fe_authpool_fn)(void *arg, double waited_s, int stopping);

/* threads >= 1 threads, at most queue_max jobs waiting. NULL when out of memory or with
 * bad arguments; called at start-up, so a thread that cannot start is fatal (thread_start.h). */
fe_authpool *fe_authpool_new(int threads, int queue_max);

/* Queues a job; HSMCA_EUNAVAIL (the job not taken) when the queue is full or
 * the pool is stopping. */
HSMCA_MUSTCHECK hsmca_code fe_authpool_submit(fe_authpool *p, fe_authpool_fn fn, void *arg,
                                              hsmca_err *e);

/* Runs the queued jobs with stopping = 1, waits for the running ones (each
 * bounded by its own timeout), joins the threads and frees the pool. */
void fe_authpool_stop(fe_authpool *p);

#endif

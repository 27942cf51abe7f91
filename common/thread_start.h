/* thread_start.h - starting a thread, and the one rule for a thread that cannot start
 * (pthread_create fails: a limit on threads, or no memory for its stack). As for memory
 * (hsmca_err.h), it depends on when:
 * - at start-up, before the process serves (thread_start): fatal(), naming the thread.
 *   The process exits 1 and the supervisor restarts it whole: a process never runs
 *   without a thread it was built with, nor with fewer than it asked for.
 * - later, while it serves (thread_start_later): HSMCA_EUNAVAIL naming the thread. The
 *   caller refuses the one thing that needed it and the process goes on. */
#ifndef HSMCA_THREAD_START_H
#define HSMCA_THREAD_START_H

#include <pthread.h>

#include "hsmca_err.h"

/* At start-up: runs fn(arg) on a new thread, *th its handle to join (th NULL: detached);
 * what names it in the fatal line ("CA signing thread"). Returns only when it started. */
void thread_start(pthread_t *th, void *(*fn)(void *), void *arg, const char *what);

/* While serving: as thread_start, but a thread that cannot start is HSMCA_EUNAVAIL in e
 * naming what, and arg stays the caller's. */
HSMCA_MUSTCHECK hsmca_code thread_start_later(pthread_t *th, void *(*fn)(void *), void *arg,
                                              const char *what, hsmca_err *e);

#endif

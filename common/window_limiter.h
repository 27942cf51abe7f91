/* window_limiter.h - at most N events per window, the rest counted for one report. */
#ifndef HSMCA_WINDOW_LIMITER_H
#define HSMCA_WINDOW_LIMITER_H

#include <stdint.h>

/* Flood control by fixed windows: at most per_interval events in each window of
 * interval_s seconds (monotonic time passed in; a window opens at the first call after
 * the previous one ended, or when the clock went back); the rest are dropped and
 * counted, and the caller reports the count once per window (log_limiter logs a
 * summary line; the signer writes a "suppressed" audit entry). Thread-safe. */
typedef struct window_limiter window_limiter;
/* NULL on OOM or when interval_s is not a positive finite number. */
window_limiter *window_limiter_new(unsigned per_interval, double interval_s);
void window_limiter_free(window_limiter *l);
/* 1: go ahead; 0: dropped (counted). *report gets the count dropped in a
 * window that has just ended (the caller reports it first), else 0. */
int window_limiter_allow(window_limiter *l, double now, uint64_t *report);
/* Counts n events dropped elsewhere (the front end's own limit) in this window. */
void window_limiter_add_dropped(window_limiter *l, uint64_t n);
/* For a periodic caller: the count to report when the window that dropped events
 * has ended (it is then reset), else 0. */
uint64_t window_limiter_flush(window_limiter *l, double now);

#endif

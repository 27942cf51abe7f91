/* window_limiter.c - fixed windows, the rest counted (window_limiter.h). */
#include "window_limiter.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

struct window_limiter {
    pthread_mutex_t mu;
    unsigned per;
    double interval;
    double start; /* the current window's; -inf before the first call */
    unsigned used;
    uint64_t dropped; /* in windows not yet reported */
};

window_limiter *window_limiter_new(unsigned per_interval, double interval_s)
{
    if (!(interval_s > 0) || !isfinite(interval_s))
        return NULL;
    window_limiter *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        return NULL;
    }
    l->per = per_interval;
    l->interval = interval_s;
    l->start = -INFINITY;
    return l;
}

void window_limiter_free(window_limiter *l)
{
    if (!l)
        return;
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* A clock that went back also ends the window (a NaN reading does not). Lock held. */
static int window_over(const window_limiter *l, double now)
{
    return now < l->start || now - l->start >= l->interval;
}

/* The dropped count of a window that is over, for its one report; reset. Lock held. */
static uint64_t take_dropped(window_limiter *l)
{
    uint64_t n = l->dropped;
    l->dropped = 0;
    return n;
}

int window_limiter_allow(window_limiter *l, double now, uint64_t *report)
{
    *report = 0;
    pthread_mutex_lock(&l->mu);
    if (window_over(l, now)) { /* a new window opens at this call */
        *report = take_dropped(l);
        l->used = 0;
        l->start = now;
    }
    int ok = l->used < l->per;
    if (ok)
        l->used++;
    else
        l->dropped++;
    pthread_mutex_unlock(&l->mu);
    return ok;
}

void window_limiter_add_dropped(window_limiter *l, uint64_t n)
{
    pthread_mutex_lock(&l->mu);
    l->dropped = n > UINT64_MAX - l->dropped ? UINT64_MAX : l->dropped + n;
    pthread_mutex_unlock(&l->mu);
}

uint64_t window_limiter_flush(window_limiter *l, double now)
{
    pthread_mutex_lock(&l->mu);
    uint64_t report = window_over(l, now) ? take_dropped(l) : 0;
    pthread_mutex_unlock(&l->mu);
    return report;
}

/* metrics_hist.c - see metrics_hist.h. */
#include "metrics_hist.h"

#include <math.h>
#include <string.h>

const double metrics_hist_bound[METRICS_HIST_BOUNDS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

void metrics_hist_init(metrics_hist *h)
{
    for (size_t i = 0; i < METRICS_HIST_BUCKETS; i++)
        atomic_init(&h->bucket[i], 0);
    atomic_init(&h->sum_ns, 0);
}

size_t metrics_hist_index(double seconds)
{
    for (size_t i = 0; i < METRICS_HIST_BOUNDS; i++)
        if (seconds <= metrics_hist_bound[i])
            return i;
    return METRICS_HIST_BOUNDS;
}

void metrics_hist_observe(metrics_hist *h, double seconds)
{
    if (!(seconds > 0)) /* negative, zero or NaN */
        seconds = 0;
    /* Over about 584 years the nanoseconds would not fit: such a figure is a clock's
     * fault, counted as the largest bucket's and summed as 2^63 ns at most. */
    uint64_t ns = seconds < 9.2e9 ? (uint64_t)llround(seconds * 1e9) : (uint64_t)INT64_MAX;
    atomic_fetch_add_explicit(&h->bucket[metrics_hist_index(seconds)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

void metrics_hist_read(const metrics_hist *h, metrics_hist_snap *out)
{
    out->count = 0;
    for (size_t i = 0; i < METRICS_HIST_BUCKETS; i++) {
        out->bucket[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        out->count += out->bucket[i];
    }
    out->sum = (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9;
}

void metrics_hist_from(metrics_hist_snap *out, const uint64_t *bucket, size_t n, double sum)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n && i < METRICS_HIST_BUCKETS; i++) {
        out->bucket[i] = bucket[i];
        out->count += bucket[i];
    }
    out->sum = isfinite(sum) && sum >= 0 ? sum : 0;
}

void metrics_hist_cumulative(const metrics_hist_snap *s, uint64_t cum[METRICS_HIST_BUCKETS])
{
    uint64_t run = 0;
    for (size_t i = 0; i < METRICS_HIST_BUCKETS; i++) {
        run += s->bucket[i];
        cum[i] = run;
    }
}

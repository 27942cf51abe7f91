/* metrics_hist.h - a latency histogram that any thread may add to without a lock, with
 * the one set of bucket bounds every hsmca histogram uses (both processes, the IPC's
 * StatusReply and the Prometheus exposition), so that the bounds are named once.
 *
 * Observations are counted per bucket (not cumulative); a snapshot reads them into
 * plain numbers, and metrics_hist_cumulative turns a snapshot into Prometheus's
 * cumulative `le` counts. The count of a snapshot is the sum of its buckets, so the
 * +Inf bucket and _count always agree even while other threads observe. */
#ifndef HSMCA_METRICS_HIST_H
#define HSMCA_METRICS_HIST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The upper bounds, in seconds, ascending: from half a millisecond (a C_Sign on a fast
 * token, an fdatasync on an SSD) to ten seconds (a request the front end gives up on). */
#define METRICS_HIST_BOUNDS 14
/* Buckets: one per bound, and the last for what is above every bound (+Inf). */
#define METRICS_HIST_BUCKETS (METRICS_HIST_BOUNDS + 1)
extern const double metrics_hist_bound[METRICS_HIST_BOUNDS];

typedef struct {
    _Atomic uint64_t bucket[METRICS_HIST_BUCKETS];
    _Atomic uint64_t sum_ns; /* nanoseconds, so the sum is a lock-free integer add */
} metrics_hist;

/* A histogram read at one time: plain numbers, to copy and send. */
typedef struct {
    uint64_t bucket[METRICS_HIST_BUCKETS]; /* per bucket, not cumulative */
    double sum;                            /* seconds */
    uint64_t count;                        /* the sum of bucket */
} metrics_hist_snap;

/* Zeroes h (a static or calloc'd histogram is zero already). */
void metrics_hist_init(metrics_hist *h);
/* Adds one observation of seconds (a negative or NaN one counts as 0). Lock-free. */
void metrics_hist_observe(metrics_hist *h, double seconds);
/* The bucket index seconds falls in: the first bound >= seconds, else the last. */
size_t metrics_hist_index(double seconds);
/* Reads h into *out. */
void metrics_hist_read(const metrics_hist *h, metrics_hist_snap *out);
/* Sets *out from n per-bucket counts (as a peer sent them: n > METRICS_HIST_BUCKETS is
 * cut, fewer leave the rest 0) and sum; count becomes their sum. */
void metrics_hist_from(metrics_hist_snap *out, const uint64_t *bucket, size_t n, double sum);
/* cum[i]: the observations <= metrics_hist_bound[i]; cum[METRICS_HIST_BOUNDS]: all (+Inf). */
void metrics_hist_cumulative(const metrics_hist_snap *s, uint64_t cum[METRICS_HIST_BUCKETS]);

#endif

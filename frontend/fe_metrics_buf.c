/* fe_metrics_buf.c - see fe_metrics_buf.h. */
#include "fe_metrics_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "mx_contract.h"

int mbuf_init(mbuf *b, size_t cap)
{
    b->len = 0;
    b->oom = 0;
    b->cap = cap;
    b->p = malloc(cap);
    return b->p ? 0 : -1;
}

void mbuf_put(mbuf *b, const char *fmt, ...)
{
    for (int tries = 0; !b->oom && tries < 2; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
        } else if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        } else {
            size_t cap = b->cap * 2 + (size_t)n;
            char *p = cap <= MX_MAX_REPLY ? realloc(b->p, cap) : NULL;
            if (!p)
                b->oom = 1;
            else {
                b->p = p;
                b->cap = cap;
            }
        }
    }
}

char *mbuf_finish(mbuf *b, size_t *len)
{
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    *len = b->len;
    return b->p;
}

void mbuf_family(mbuf *b, const char *name, const char *type, const char *help)
{
    mbuf_put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void mbuf_hist(mbuf *b, const char *name, const char *help, const metrics_hist_snap *h)
{
    mbuf_family(b, name, "histogram", help);
    uint64_t cum[METRICS_HIST_BUCKETS];
    metrics_hist_cumulative(h, cum);
    for (int i = 0; i < METRICS_HIST_BOUNDS; i++)
        mbuf_put(b, "%s_bucket{le=\"%g\"} %llu\n", name, metrics_hist_bound[i],
                 (unsigned long long)cum[i]);
    mbuf_put(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9f\n%s_count %llu\n", name,
             (unsigned long long)cum[METRICS_HIST_BOUNDS], name, h->sum, name,
             (unsigned long long)cum[METRICS_HIST_BOUNDS]);
}

/* fe_metrics_buf.h - a growing text buffer for the exposition format (fe_metrics_text.c). */
#ifndef HSMCA_FE_METRICS_BUF_H
#define HSMCA_FE_METRICS_BUF_H

#include <stddef.h>

#include "fe_metrics.h"

typedef struct {
    char *p;
    size_t len, cap;
    int oom; /* a failed growth: the text is dropped at mbuf_finish */
} mbuf;

int mbuf_init(mbuf *b, size_t cap);
void mbuf_put(mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text (the caller frees) and its length; NULL (and the buffer freed) after a failure. */
char *mbuf_finish(mbuf *b, size_t *len);

/* A family's HELP and TYPE lines. */
void mbuf_family(mbuf *b, const char *name, const char *type, const char *help);
/* A histogram family: cumulative buckets, _sum, _count. */
void mbuf_hist(mbuf *b, const char *name, const char *help, const metrics_hist_snap *h);

#endif

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

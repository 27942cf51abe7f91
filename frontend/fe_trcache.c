/* fe_trcache.c - see fe_trcache.h.
 *
 * A flat array scanned under one mutex: a few thousand entries of 32-byte keys
 * scan in microseconds, far below the TokenReview round trip a hit saves, and
 * the bound on entries is then the bound on memory and on the scan. */
#include "fe_trcache.h"
#include "fe_metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

typedef struct {
    uint8_t key[32];
    int64_t expires;
    fe_tr_identity id;
} trc_entry;

struct fe_trcache {
    pthread_mutex_t mu;
    uint32_t max, n;
    trc_entry *e;
};

fe_trcache *fe_trcache_new(uint32_t max_entries)
{
    fe_trcache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    if (max_entries && !(c->e = calloc(max_entries, sizeof(*c->e)))) {
        free(c);
        return NULL;
    }
    c->max = max_entries;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void fe_trcache_free(fe_trcache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->e);
    free(c);
}

static void drop(fe_trcache *c, uint32_t i)
{
    c->e[i] = c->e[--c->n];
    memset(&c->e[c->n], 0, sizeof(c->e[c->n]));
}

int fe_trcache_get(fe_trcache *c, const uint8_t key[32], int64_t now, fe_tr_identity *id)
{
    int hit = 0;
    pthread_mutex_lock(&c->mu);
    for (uint32_t i = 0; i < c->n; i++) {
        if (CRYPTO_memcmp(c->e[i].key, key, 32) != 0)
            continue;
        if (now < c->e[i].expires) {
            *id = c->e[i].id;
            hit = 1;
        } else {
            drop(c, i);
        }
        break;
    }
    pthread_mutex_unlock(&c->mu);
    if (hit)
        fe_metrics_count(FE_CTR_TR_CACHE_HITS);
    return hit;
}

void fe_trcache_put(fe_trcache *c, const uint8_t key[32], int64_t now, int64_t expires,
                    const fe_tr_identity *id)
{
    if (expires <= now || c->max == 0)
        return;
    pthread_mutex_lock(&c->mu);
    uint32_t slot = c->n, soonest = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        if (memcmp(c->e[i].key, key, 32) == 0) {
            slot = i; /* the same token reviewed twice: refresh */
            break;
        }
        if (c->e[i].expires < c->e[soonest].expires)
            soonest = i;
    }
    if (slot == c->n && c->n == c->max)
        slot = soonest; /* full: an expired entry if any (they expire first), else the next to */
    else if (slot == c->n)
        c->n++;
    memcpy(c->e[slot].key, key, 32);
    c->e[slot].expires = expires;
    c->e[slot].id = *id;
    pthread_mutex_unlock(&c->mu);
}

size_t fe_trcache_size(fe_trcache *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->n;
    pthread_mutex_unlock(&c->mu);
    return n;
}

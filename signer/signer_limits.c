/* signer_limits.c - see signer_limits.h. */
#include "signer_limits.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "siphash.h"

/* ---- serial_set: open addressing, linear probing, keyed hash ----------------------- */

/* Serials are chosen by the front end, which may be hostile: a keyed hash (SipHash-2-4
 * with a random per-process key) keeps it from steering every serial into one probe
 * chain and turning each insert into a linear scan. */
typedef struct {
    int64_t not_after; /* the certificate's: the slot is dropped after it */
    uint8_t len;       /* 0: empty slot */
    uint8_t b[20];
} serial_slot;

struct serial_set {
    pthread_mutex_t mu;
    serial_slot *slots;
    size_t cap; /* power of two */
    size_t count;
    uint8_t key[16];
};

#define SS_MIN_CAP 1024u

uint64_t serial_set_siphash(const uint8_t key[16], const uint8_t *in, size_t n)
{
    return hsmca_siphash24(key, in, n);
}

serial_set *serial_set_new(void)
{
    serial_set *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->cap = SS_MIN_CAP;
    s->slots = calloc(s->cap, sizeof(*s->slots));
    if (!s->slots || RAND_bytes(s->key, sizeof(s->key)) != 1 ||
        pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s->slots);
        free(s);
        return NULL;
    }
    return s;
}

void serial_set_free(serial_set *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->mu);
    free(s->slots);
    OPENSSL_cleanse(s, sizeof(*s));
    free(s);
}

/* The slot holding (b, n), or the empty slot where it belongs. */
static serial_slot *ss_find(serial_slot *slots, size_t cap, const serial_set *s, const uint8_t *b,
                            size_t n)
{
    size_t i = (size_t)serial_set_siphash(s->key, b, n) & (cap - 1);
    for (;; i = (i + 1) & (cap - 1)) {
        serial_slot *sl = &slots[i];
        if (sl->len == 0 || (sl->len == n && memcmp(sl->b, b, n) == 0))
            return sl;
    }
}

/* Rebuilds the table with only the serials still valid at now, at a capacity where
 * they (and one more) fill at most a quarter of it: at least a quarter of the new
 * capacity is then inserted before the next rebuild, so rebuilds cost O(1) per insert
 * amortized, and the table follows the live count (it also shrinks). Lock held. */
static int ss_rebuild(serial_set *s, int64_t now, size_t *dropped)
{
    size_t live = 0;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i].len && s->slots[i].not_after > now)
            live++;
    size_t ncap = SS_MIN_CAP;
    while ((live + 1) * 4 > ncap) {
        if (ncap > SIZE_MAX / 2 / sizeof(serial_slot))
            return -1;
        ncap *= 2;
    }
    serial_slot *ns = calloc(ncap, sizeof(*ns));
    if (!ns)
        return -1;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i].len && s->slots[i].not_after > now)
            *ss_find(ns, ncap, s, s->slots[i].b, s->slots[i].len) = s->slots[i];
    if (dropped)
        *dropped = s->count - live;
    free(s->slots);
    s->slots = ns;
    s->cap = ncap;
    s->count = live;
    return 0;
}

static HSMCA_MUSTCHECK hsmca_code ss_add(serial_set *s, const uint8_t *serial, size_t len,
                                         int64_t not_after, int64_t now, int restore, hsmca_err *e)
{
    if (!s || !serial || len == 0 || len > sizeof(((serial_slot *)0)->b))
        return hsmca_fail(e, HSMCA_EINVAL, "invariant 6: serial of %zu octets", len);
    hsmca_code rc = HSMCA_OK;
    pthread_mutex_lock(&s->mu);
    if ((s->count + 1) * 2 > s->cap && ss_rebuild(s, now, NULL) != 0) {
        rc = hsmca_fail(e, HSMCA_ENOMEM, "invariant 6: serial set cannot grow");
    } else {
        serial_slot *sl = ss_find(s->slots, s->cap, s, serial, len);
        if (sl->len && (sl->not_after > now || restore)) {
            if (restore && not_after > sl->not_after)
                sl->not_after = not_after;
            rc = hsmca_fail(e, HSMCA_EPERM, "invariant 6: serial issued before");
        } else {
            /* An empty slot, or this serial's expired one (not pruned yet). */
            if (!sl->len)
                s->count++;
            sl->len = (uint8_t)len;
            memcpy(sl->b, serial, len);
            sl->not_after = not_after;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

hsmca_code serial_set_insert(serial_set *s, const uint8_t *serial, size_t len, int64_t not_after,
                             int64_t now, hsmca_err *e)
{
    return ss_add(s, serial, len, not_after, now, 0, e);
}

hsmca_code serial_set_restore(serial_set *s, const uint8_t *serial, size_t len, int64_t not_after,
                              int64_t now, hsmca_err *e)
{
    return ss_add(s, serial, len, not_after, now, 1, e); /* a duplicate is already in the set */
}

size_t serial_set_prune(serial_set *s, int64_t now)
{
    size_t dropped = 0;
    pthread_mutex_lock(&s->mu);
    if (ss_rebuild(s, now, &dropped) != 0)
        dropped = 0; /* out of memory: the old table stays, still correct */
    pthread_mutex_unlock(&s->mu);
    return dropped;
}

size_t serial_set_capacity(serial_set *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->cap;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t serial_set_count(serial_set *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->count;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---- rate_limiter: token bucket --------------------------------------------------- */

struct rate_limiter {
    pthread_mutex_t mu;
    double rate, burst;
    double tokens;
    double last; /* time of the last refill; < 0 until the first take */
};

rate_limiter *rate_limiter_new(uint32_t rate, uint32_t burst)
{
    if (rate == 0 || burst == 0)
        return NULL;
    rate_limiter *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        return NULL;
    }
    r->rate = rate;
    r->burst = burst;
    r->tokens = burst; /* a fresh signer may serve a full burst at once */
    r->last = -1;
    return r;
}

void rate_limiter_free(rate_limiter *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->mu);
    free(r);
}

hsmca_code rate_limiter_take(rate_limiter *r, double now, hsmca_err *e)
{
    if (!r)
        return hsmca_fail(e, HSMCA_EINTERNAL, "invariant 7: no rate limiter");
    hsmca_code rc = HSMCA_OK;
    pthread_mutex_lock(&r->mu);
    /* A clock that steps back refills nothing (monotonic should not, but be safe). */
    if (r->last < 0 || now < r->last) {
        r->last = now;
    } else {
        r->tokens += (now - r->last) * r->rate;
        if (r->tokens > r->burst)
            r->tokens = r->burst;
        r->last = now;
    }
    if (r->tokens >= 1.0)
        r->tokens -= 1.0;
    else
        rc = hsmca_fail(e, HSMCA_ERATE, "invariant 7: signing rate limit (%.0f/s, burst %.0f)",
                        r->rate, r->burst);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

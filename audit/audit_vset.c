/* audit_vset.c - the verifier's two sets (audit_verify_int.h): every serial of an intent
 * (an open-addressing table of the serials' bytes, the one thing that grows with the log)
 * and the intents still waiting for their result (few: at most the requests in flight). */
#include "audit_verify_int.h"

#include <stdlib.h>
#include <string.h>

#include "audit_entry.h"
#include "util.h"

#define SERIAL_BYTES (AUDIT_SERIAL_HEX_MAX / 2 + 1) /* length, then the bytes */

typedef struct {
    uint8_t key[SERIAL_BYTES]; /* key[0] = 0: an empty slot */
    uint64_t seq;
} vslot;

struct vset {
    vslot *slots;
    size_t cap, n; /* cap a power of two, kept at least twice n */
};

hsmca_code vset_new(vset **out, hsmca_err *e)
{
    vset *s = calloc(1, sizeof(*s));
    HSMCA_ENSURE(s, e, HSMCA_ENOMEM, "out of memory");
    s->cap = 1024;
    s->slots = calloc(s->cap, sizeof(vslot));
    if (!s->slots) {
        free(s);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    *out = s;
    return HSMCA_OK;
}

void vset_free(vset *s)
{
    if (!s)
        return;
    free(s->slots);
    free(s);
}

static size_t hash_key(const uint8_t *k)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (unsigned i = 0; i <= k[0]; i++)
        h = (h ^ k[i]) * 1099511628211ULL;
    return (size_t)(h ^ (h >> 29));
}

static vslot *find(vslot *slots, size_t cap, const uint8_t *k)
{
    for (size_t i = hash_key(k) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (slots[i].key[0] == 0 || memcmp(slots[i].key, k, (size_t)k[0] + 1) == 0)
            return &slots[i];
}

static HSMCA_MUSTCHECK hsmca_code grow(vset *s, hsmca_err *e)
{
    size_t cap = s->cap * 2;
    vslot *slots = calloc(cap, sizeof(vslot));
    HSMCA_ENSURE(slots, e, HSMCA_ENOMEM, "out of memory (%zu serials)", s->n);
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i].key[0])
            *find(slots, cap, s->slots[i].key) = s->slots[i];
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
    return HSMCA_OK;
}

/* The hex serial as a key: its byte count (1..20, odd digit counts padded in front), then
 * the bytes. The parser has checked the hex. */
static void make_key(const char *serial, uint8_t k[SERIAL_BYTES])
{
    size_t n = strnlen(serial, AUDIT_SERIAL_HEX_MAX), len = 0;
    char even[AUDIT_SERIAL_HEX_MAX + 2] = "0";
    memcpy(even + n % 2, serial, n);
    memset(k, 0, SERIAL_BYTES);
    if (util_unhex(even, n + n % 2, k + 1, SERIAL_BYTES - 1, &len))
        k[0] = (uint8_t)len;
}

hsmca_code vset_add(vset *s, const char *serial, uint64_t seq, int *dup, uint64_t *first,
                    hsmca_err *e)
{
    uint8_t k[SERIAL_BYTES];
    make_key(serial, k);
    *dup = 0;
    if (k[0] == 0)
        return HSMCA_OK;
    if (2 * (s->n + 1) > s->cap)
        HSMCA_GUARD(grow(s, e));
    vslot *sl = find(s->slots, s->cap, k);
    if (sl->key[0]) {
        *dup = 1;
        *first = sl->seq;
        return HSMCA_OK;
    }
    memcpy(sl->key, k, SERIAL_BYTES);
    sl->seq = seq;
    s->n++;
    return HSMCA_OK;
}

/* ---- open intents: sorted by seq (they arrive in order), found by binary search --------- */

typedef struct {
    uint64_t seq, request_id;
} vintent;

struct vopen {
    vintent *v;
    size_t n, cap;
};

hsmca_code vopen_new(vopen **out, hsmca_err *e)
{
    vopen *o = calloc(1, sizeof(*o));
    HSMCA_ENSURE(o, e, HSMCA_ENOMEM, "out of memory");
    *out = o;
    return HSMCA_OK;
}

void vopen_free(vopen *o)
{
    if (!o)
        return;
    free(o->v);
    free(o);
}

hsmca_code vopen_add(vopen *o, uint64_t seq, uint64_t request_id, hsmca_err *e)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 64;
        vintent *v = realloc(o->v, cap * sizeof(vintent));
        HSMCA_ENSURE(v, e, HSMCA_ENOMEM, "out of memory (%zu open intents)", o->n);
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = (vintent){seq, request_id};
    return HSMCA_OK;
}

int vopen_take(vopen *o, uint64_t seq, uint64_t *request_id)
{
    size_t lo = 0, hi = o->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->v[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == o->n || o->v[lo].seq != seq)
        return 0;
    *request_id = o->v[lo].request_id;
    memmove(&o->v[lo], &o->v[lo + 1], (o->n - lo - 1) * sizeof(vintent));
    o->n--;
    return 1;
}

size_t vopen_count(const vopen *o)
{
    return o->n;
}

uint64_t vopen_first(const vopen *o)
{
    return o->v[0].seq;
}

/* tok_cache.c - see tok_cache.h. */
#include "tok_cache.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "util.h"

#define WAYS 4

typedef struct {
    uint8_t key[SHA256_DIGEST_LENGTH]; /* SHA-256 of the token */
    const void *keyset;                /* the key set it verified against */
    int64_t deadline;                  /* usable while now < deadline; 0: empty */
    tok_jwt_identity id;
} entry;

struct tok_cache {
    pthread_mutex_t mu;
    size_t n_sets; /* power of two */
    uint32_t cap;
    entry *slots; /* n_sets * WAYS */
};

hsmca_code tok_cache_new(size_t max_entries, uint32_t cap, tok_cache **out, hsmca_err *e)
{
    *out = NULL;
    HSMCA_ENSURE(cap > 0 && max_entries > 0 && max_entries <= ((size_t)1 << 24), e, HSMCA_EINVAL,
                 "JWT cache: entries must be 1..2^24 and the cap positive");
    size_t sets = 1;
    while (sets * WAYS < max_entries)
        sets <<= 1;
    tok_cache *c = calloc(1, sizeof(*c));
    entry *slots = calloc(sets * WAYS, sizeof(entry));
    if (!c || !slots) {
        free(c);
        free(slots);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory for the JWT cache");
    }
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        free(slots);
        return hsmca_fail(e, HSMCA_EINTERNAL, "JWT cache: cannot make its mutex");
    }
    c->n_sets = sets;
    c->cap = cap;
    c->slots = slots;
    *out = c;
    return HSMCA_OK;
}

void tok_cache_free(tok_cache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    OPENSSL_cleanse(c->slots, c->n_sets * WAYS * sizeof(entry));
    free(c->slots);
    free(c);
}

static entry *set_of(tok_cache *c, const uint8_t key[SHA256_DIGEST_LENGTH])
{
    size_t h = (size_t)key[0] | (size_t)key[1] << 8 | (size_t)key[2] << 16 | (size_t)key[3] << 24;
    return &c->slots[(h & (c->n_sets - 1)) * WAYS];
}

int tok_cache_get(tok_cache *c, const void *keyset, const char *token, size_t len,
                     int64_t now, tok_jwt_identity *id)
{
    if (!c || !token || len == 0 || len > IPC_TOKEN_MAX)
        return 0;
    uint8_t key[SHA256_DIGEST_LENGTH];
    if (!SHA256((const unsigned char *)token, len, key))
        return 0;
    int hit = 0;
    pthread_mutex_lock(&c->mu);
    entry *set = set_of(c, key);
    for (int i = 0; i < WAYS; i++) {
        entry *en = &set[i];
        if (en->deadline == 0 || CRYPTO_memcmp(en->key, key, sizeof(key)) != 0)
            continue;
        if (now < en->deadline && en->keyset == keyset) {
            *id = en->id;
            hit = 1;
        } else {
            memset(en, 0, sizeof(*en)); /* past its deadline, or another key set */
        }
        break;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void tok_cache_put(tok_cache *c, const void *keyset, const char *token, size_t len,
                      int64_t exp, int64_t now, const tok_jwt_identity *id)
{
    if (!c || !token || len == 0 || len > IPC_TOKEN_MAX || !id || exp <= now)
        return;
    uint8_t key[SHA256_DIGEST_LENGTH];
    if (!SHA256((const unsigned char *)token, len, key))
        return;
    /* The earlier of exp and now + cap: never past the token's own expiry. */
    int64_t deadline = exp - now > (int64_t)c->cap ? now + (int64_t)c->cap : exp;
    pthread_mutex_lock(&c->mu);
    entry *set = set_of(c, key), *victim = NULL;
    for (int i = 0; i < WAYS && !victim; i++)
        if (set[i].deadline != 0 && memcmp(set[i].key, key, sizeof(key)) == 0)
            victim = &set[i]; /* the same token again: refresh it */
    for (int i = 0; i < WAYS && !victim; i++)
        if (set[i].deadline == 0 || set[i].deadline <= now)
            victim = &set[i]; /* empty or expired */
    if (!victim) {
        victim = &set[0]; /* full: evict the one that would expire first */
        for (int i = 1; i < WAYS; i++)
            if (set[i].deadline < victim->deadline)
                victim = &set[i];
    }
    memcpy(victim->key, key, sizeof(key));
    victim->keyset = keyset;
    victim->deadline = deadline;
    victim->id = *id;
    pthread_mutex_unlock(&c->mu);
}

size_t tok_cache_count(tok_cache *c)
{
    size_t n = 0;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_sets * WAYS; i++)
        n += c->slots[i].deadline != 0;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* The exp claim of a token tok_jwt_verify accepted (so well formed), rounded down
 * as the claims check does; 0 when it cannot be read (then nothing is cached). */
static int64_t token_exp(const char *token, size_t len)
{
    const char *d1 = memchr(token, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token)) : NULL;
    if (!d2)
        return 0;
    size_t plen = 0;
    uint8_t *payload = util_b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), &plen);
    if (!payload)
        return 0;
    json_error_t jerr;
    json_t *claims = json_loadb((const char *)payload, plen, JSON_REJECT_DUPLICATES, &jerr);
    free(payload);
    json_t *v = json_object_get(claims, "exp");
    int64_t exp = 0;
    if (json_is_integer(v)) {
        exp = (int64_t)json_integer_value(v);
    } else if (json_is_real(v)) {
        double d = floor(json_real_value(v));
        if (d > 0 && d < 9.0e18)
            exp = (int64_t)d;
    }
    json_decref(claims);
    return exp;
}

void tok_cache_record(tok_cache *c, const void *keyset, const char *token, size_t len,
                         int64_t now, const tok_jwt_identity *id)
{
    if (c)
        tok_cache_put(c, keyset, token, len, token_exp(token, len), now, id);
}

void tok_cache_clear(tok_cache *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    OPENSSL_cleanse(c->slots, c->n_sets * WAYS * sizeof(entry));
    pthread_mutex_unlock(&c->mu);
}

/* fe_jwt_cache.h - a bounded cache of bearer tokens that verified, keyed by the
 * SHA-256 of the token (issue 8: an istio-agent sends the same token for every
 * request until it rotates it, and the ES256/RS256 verification plus the JSON
 * would otherwise be paid each time).
 *
 * What a hit means: these exact bytes passed fe_jwt_verify against the same key
 * set, and the entry's deadline has not passed. The deadline is the earlier of
 * the token's exp (without the skew fe_jwt_verify allows) and the time of
 * verification plus a cap, so a cached token is never accepted later than the
 * verifier itself would accept it. nbf and iat only become easier to meet as time
 * goes on, and the issuer and audiences are fixed for a cache's life; the key set is
 * the holder's (fe_keys.c), which clears the cache when a new set replaces it. Bounded: a fixed
 * table of entries, set associative; a full set evicts the entry that expires first. Thread-safe.
 */
#ifndef HSMCA_FE_JWT_CACHE_H
#define HSMCA_FE_JWT_CACHE_H

#include "fe_jwt.h"
#include "hsmca_err.h"
#include <stddef.h>
#include <stdint.h>

#define FE_JWT_CACHE_ENTRIES 4096 /* default bound on cached tokens */
#define FE_JWT_CACHE_CAP 300      /* default seconds a verification is reused at most */

typedef struct fe_jwt_cache fe_jwt_cache;

/* A cache of at most max_entries tokens (rounded up to a power of two, at least 4),
 * each reused for at most cap seconds after its verification (cap > 0). */
HSMCA_MUSTCHECK hsmca_code fe_jwt_cache_new(size_t max_entries, uint32_t cap, fe_jwt_cache **out,
                                            hsmca_err *e);
void fe_jwt_cache_free(fe_jwt_cache *c);

/* 1 and *id when token[0..len) verified against keyset and is still within its
 * deadline at now; 0 otherwise (the caller verifies). */
int fe_jwt_cache_get(fe_jwt_cache *c, const void *keyset, const char *token, size_t len,
                     int64_t now, fe_jwt_identity *id);

/* Records a token that fe_jwt_verify accepted at now, with its exp claim. Nothing is
 * recorded when exp <= now (nothing to reuse). */
void fe_jwt_cache_put(fe_jwt_cache *c, const void *keyset, const char *token, size_t len,
                      int64_t exp, int64_t now, const fe_jwt_identity *id);

/* Entries held (tests). */
size_t fe_jwt_cache_count(fe_jwt_cache *c);

/* fe_jwt_cache_put for a token fe_jwt_verify just accepted, with the exp of its
 * payload. c may be NULL (no cache). */
void fe_jwt_cache_record(fe_jwt_cache *c, const void *keyset, const char *token, size_t len,
                         int64_t now, const fe_jwt_identity *id);

/* Forgets every entry: the key set changed (fe_keys.c), and a set freed may be
 * allocated again at the same address. */
void fe_jwt_cache_clear(fe_jwt_cache *c);

#endif

/* tok_cache.h - a bounded cache of bearer tokens that verified, keyed by the
 * SHA-256 of the token: an istio-agent sends the same token for every request
 * until it rotates it, and the ES256/RS256 verification plus the JSON would
 * otherwise be paid each time.
 *
 * What a hit means: these exact bytes passed tok_jwt_verify against the same key
 * set, and the entry's deadline has not passed. The deadline is the earlier of
 * the token's exp (without the skew tok_jwt_verify allows) and the time of
 * verification plus a cap, so a cached token is never accepted later than the
 * verifier itself would accept it. nbf and iat only become easier to meet as time
 * goes on, and the issuer and audiences are fixed for a cache's life; the key set is
 * the holder's (tok_keys.c), which clears the cache when a new set replaces it. Bounded: a fixed
 * table of entries, set associative; a full set evicts the entry that expires first. Thread-safe.
 */
#ifndef HSMCA_TOK_CACHE_H
#define HSMCA_TOK_CACHE_H

#include "tok_jwt.h"
#include "hsmca_err.h"
#include <stddef.h>
#include <stdint.h>

#define TOK_CACHE_ENTRIES 4096 /* default bound on cached tokens */
#define TOK_CACHE_CAP 300      /* default seconds a verification is reused at most */

typedef struct tok_cache tok_cache;

/* A cache of at most max_entries tokens (rounded up to a power of two, at least 4),
 * each reused for at most cap seconds after its verification (cap > 0). */
HSMCA_MUSTCHECK hsmca_code tok_cache_new(size_t max_entries, uint32_t cap, tok_cache **out,
                                            hsmca_err *e);
void tok_cache_free(tok_cache *c);

/* 1 and *id when token[0..len) verified against keyset and is still within its
 * deadline at now; 0 otherwise (the caller verifies). */
int tok_cache_get(tok_cache *c, const void *keyset, const char *token, size_t len,
                     int64_t now, tok_jwt_identity *id);

/* Records a token that tok_jwt_verify accepted at now, with its exp claim. Nothing is
 * recorded when exp <= now (nothing to reuse). */
void tok_cache_put(tok_cache *c, const void *keyset, const char *token, size_t len,
                      int64_t exp, int64_t now, const tok_jwt_identity *id);

/* Entries held (tests). */
size_t tok_cache_count(tok_cache *c);

/* tok_cache_put for a token tok_jwt_verify just accepted, with the exp of its
 * payload. c may be NULL (no cache). */
void tok_cache_record(tok_cache *c, const void *keyset, const char *token, size_t len,
                         int64_t now, const tok_jwt_identity *id);

/* Forgets every entry: the key set changed (tok_keys.c), and a set freed may be
 * allocated again at the same address. */
void tok_cache_clear(tok_cache *c);

#endif

/* tok_keys.h - an issuer's key set, replaced while calls are in flight: the front
 * end verifies callers' tokens with it, the signer verifies them again (identity
 * binding).
 *
 * Neither child reads a file or opens a connection for keys: the supervisor
 * fetches them (a JWKS file it re-reads when it changes, or an OIDC issuer) and
 * pushes the accepted document over the control channel as a sealed memfd
 * (CTL_KEYS); tok_keys_load_fd parses it here again and swaps it in. */
#ifndef HSMCA_TOK_KEYS_H
#define HSMCA_TOK_KEYS_H

#include "tok_jwt.h"
#include "hsmca_err.h"
#include <stddef.h>
#include <stdint.h>

typedef struct tok_keys tok_keys;

/* An empty holder: verification answers HSMCA_EUNAVAIL until keys arrive. It keeps
 * the tokens that verified against the current set (tok_cache.h: a proxy sends the
 * same token until it rotates it, so it is verified once); NULL when out of memory. */
tok_keys *tok_keys_new(void);

/* Replaces the set with ks (taken over; NULL empties it). The old set is freed once no
 * verification uses it any more: verifications hold a read lock, the swap a write lock. */
void tok_keys_set(tok_keys *k, tok_jwks *ks);

/* Reads the JWKS document in memfd fd (at most TOK_JWKS_MAX_LEN bytes; sealed against
 * writes and size changes, so the sender cannot change it under us), parses it and swaps
 * it in. Does not close fd. On error the current set stays. */
HSMCA_MUSTCHECK hsmca_code tok_keys_load_fd(tok_keys *k, int fd, hsmca_err *e);

/* tok_jwt_verify_kid against the current set; HSMCA_EUNAVAIL while there is none (the
 * supervisor has not got the keys yet: the caller retries). */
HSMCA_MUSTCHECK hsmca_code tok_keys_verify(tok_keys *k, const tok_jwt_rules *rules, const char *token,
                                          size_t len, int64_t now, tok_jwt_identity *id,
                                          int *unknown_kid, hsmca_err *e);

/* How many times a set was swapped in (tests, logs). */
uint64_t tok_keys_generation(tok_keys *k);

/* Frees the holder and its set (no verification may be running). */
void tok_keys_free(tok_keys *k);

#endif

/* fe_keys.h - the issuer's key set the front end verifies tokens with, replaced
 * while calls are in flight.
 *
 * The front end reads no file and opens no connection for keys: the supervisor
 * fetches them (a JWKS file it re-reads when it changes, or an OIDC issuer) and
 * pushes the accepted document over the control channel as a sealed memfd
 * (CTL_KEYS); fe_keys_load_fd parses it here again and swaps it in. */
#ifndef HSMCA_FE_KEYS_H
#define HSMCA_FE_KEYS_H

#include "fe_jwt.h"
#include "hsmca_err.h"
#include <stddef.h>
#include <stdint.h>

typedef struct fe_keys fe_keys;

/* An empty holder: verification answers HSMCA_EUNAVAIL until keys arrive. It keeps
 * the tokens that verified against the current set (fe_jwt_cache.h: a proxy sends the
 * same token until it rotates it, so it is verified once); NULL when out of memory. */
fe_keys *fe_keys_new(void);

/* Replaces the set with ks (taken over; NULL empties it). The old set is freed once no
 * verification uses it any more: verifications hold a read lock, the swap a write lock. */
void fe_keys_set(fe_keys *k, fe_jwks *ks);

/* Reads the JWKS document in memfd fd (at most FE_JWKS_MAX_LEN bytes; sealed against
 * writes and size changes, so the sender cannot change it under us), parses it and swaps
 * it in. Does not close fd. On error the current set stays. */
HSMCA_MUSTCHECK hsmca_code fe_keys_load_fd(fe_keys *k, int fd, hsmca_err *e);

/* fe_jwt_verify_kid against the current set; HSMCA_EUNAVAIL while there is none (the
 * supervisor has not got the keys yet: the caller retries). */
HSMCA_MUSTCHECK hsmca_code fe_keys_verify(fe_keys *k, const fe_jwt_rules *rules, const char *token,
                                          size_t len, int64_t now, fe_jwt_identity *id,
                                          int *unknown_kid, hsmca_err *e);

/* How many times a set was swapped in (tests, logs). */
uint64_t fe_keys_generation(fe_keys *k);

/* Frees the holder and its set (no verification may be running). */
void fe_keys_free(fe_keys *k);

#endif

/* tok_jwks.h - the issuer's JSON Web Key Set: parsing it, and choosing the key for a token.
 *
 * Only RSA (>= 2048 bits) and EC P-256 signing keys are kept; the token never brings a
 * key of its own. Errors name the check and the key's index, never key material. */
#ifndef HSMCA_TOK_JWKS_H
#define HSMCA_TOK_JWKS_H

#include <stddef.h>
#include <openssl/evp.h>
#include "hsmca_err.h"

#define TOK_JWKS_MAX_LEN 65536
#define TOK_SHOWN_LEN 36 /* a kid or alg from a token in a message: 32 characters and "..." */

typedef struct tok_jwks tok_jwks;

/* The key types a token's alg can ask for: RS256 -> RSA, ES256 -> EC (P-256). */
typedef enum { TOK_KTY_RSA, TOK_KTY_EC } tok_kty;

/* Parses {"keys":[...]} into a new set (caller frees with tok_jwks_free); skips other kty/use/alg,
 * refuses a set with no usable key. */
HSMCA_MUSTCHECK hsmca_code tok_jwks_parse(const char *json, size_t len, tok_jwks **out, hsmca_err *e);

/* Frees a set from tok_jwks_parse (NULL is fine). */
void tok_jwks_free(tok_jwks *k);

/* The key for a token: by kid (kid NULL: the set's only key of type kty); *out is borrowed from
 * ks. HSMCA_EAUTH when none fits or it is of the wrong type. */
HSMCA_MUSTCHECK hsmca_code tok_jwks_pick(const tok_jwks *ks, tok_kty kty, const char *kid, EVP_PKEY **out,
                        hsmca_err *e);

/* 1 when ks holds a key with this kid (of any type), else 0. */
int tok_jwks_has_kid(const tok_jwks *ks, const char *kid);

/* The number of usable keys in ks. */
size_t tok_jwks_count(const tok_jwks *ks);

#endif

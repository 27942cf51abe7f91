/* fe_jwt.h - bearer JWT verification against a JWKS, locally (DESIGN.md §3.2).
 *
 * RS256 and ES256 only ("none", HS*, and everything else refused). Checks the
 * signature, iss, aud, exp and nbf (with skew), and maps Kubernetes service
 * account claims to namespace and service account. Errors name the check,
 * never the token. */
#ifndef HSMCA_FE_JWT_H
#define HSMCA_FE_JWT_H

#include <stddef.h>
#include <stdint.h>
#include "fe_jwks.h"
#include "hsmca_err.h"

#define FE_JWT_MAX_LEN 8192   /* a longer token is refused before parsing */

typedef struct {
    const char *issuer;              /* required value of "iss" */
    const char *const *audiences;    /* "aud" (string or array) must contain one of these */
    int n_audiences;
    uint32_t skew;                   /* seconds allowed on exp / nbf / iat */
} fe_jwt_rules;

typedef struct {
    char ns[254]; /* kubernetes.io.namespace, else from sub system:serviceaccount:NS:SA */
    char sa[254]; /* kubernetes.io.serviceaccount.name, else from sub */
} fe_jwt_identity;

/* Verifies a compact JWS of len bytes at time now and fills *id; HSMCA_EAUTH names the failed
 * check. The key comes from keys only (fe_jwks_pick); nothing is allocated for the caller. */
HSMCA_MUSTCHECK hsmca_code fe_jwt_verify(const fe_jwks *keys, const fe_jwt_rules *rules, const char *token,
                         size_t len, int64_t now, fe_jwt_identity *id, hsmca_err *e);

#endif

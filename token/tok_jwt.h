/* tok_jwt.h - bearer JWT verification against a JWKS, locally (docs/ARCHITECTURE.md §4 step 2).
 *
 * RS256 and ES256 only ("none", HS*, and everything else refused). Checks the
 * signature, iss, aud, exp and nbf (with skew), and maps Kubernetes service
 * account claims to namespace and service account. Errors name the check,
 * never the token. */
#ifndef HSMCA_TOK_JWT_H
#define HSMCA_TOK_JWT_H

#include <stddef.h>
#include <stdint.h>
#include "tok_jwks.h"
#include "hsmca_err.h"
#include "ipc_contract.h" /* IPC_TOKEN_MAX: the signer verifies the same token again */

/* A token longer than IPC_TOKEN_MAX is refused before parsing; the front end lets 16 KiB
 * of request metadata through (fe_server.c), so the refusal names this check. A
 * Kubernetes service account token is ~1-2 KiB. */

typedef struct {
    const char *issuer;              /* required value of "iss" */
    const char *const *audiences;    /* "aud" (string or array) must contain one of these */
    int n_audiences;
    uint32_t skew;                   /* seconds allowed on exp / nbf / iat */
} tok_jwt_rules;

#define TOK_K8S_NAME_MAX 254
#define TOK_K8S_UID_MAX 64

/* The Kubernetes service account a token names. Both token shapes are read:
 * projected (kubernetes.io: {namespace, serviceaccount: {name, uid}, pod: {name, uid}})
 * and legacy (kubernetes.io/serviceaccount/namespace, .../service-account.name,
 * .../service-account.uid); sub must be system:serviceaccount:NS:SA and agree. */
typedef struct {
    char ns[TOK_K8S_NAME_MAX];       /* namespace */
    char sa[TOK_K8S_NAME_MAX];       /* service account name */
    char sa_uid[TOK_K8S_UID_MAX];    /* "" when the token has none */
    char pod_name[TOK_K8S_NAME_MAX]; /* "" unless a projected token bound to a pod */
    char pod_uid[TOK_K8S_UID_MAX];   /* "" unless a projected token bound to a pod */
} tok_jwt_identity;

/* Verifies a compact JWS of len bytes at time now and fills *id; HSMCA_EAUTH names the failed
 * check. The key comes from keys only (tok_jwks_pick); nothing is allocated for the caller. */
HSMCA_MUSTCHECK hsmca_code tok_jwt_verify(const tok_jwks *keys, const tok_jwt_rules *rules, const char *token,
                         size_t len, int64_t now, tok_jwt_identity *id, hsmca_err *e);

/* As tok_jwt_verify; also sets *unknown_kid to 1 when the token names a kid the set does not
 * hold (the issuer may have rotated its keys: the caller can ask for a refresh), else 0. */
HSMCA_MUSTCHECK hsmca_code tok_jwt_verify_kid(const tok_jwks *keys, const tok_jwt_rules *rules,
                                             const char *token, size_t len, int64_t now,
                                             tok_jwt_identity *id, int *unknown_kid, hsmca_err *e);

#endif

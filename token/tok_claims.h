/* tok_claims.h - the claims of a bearer JWT whose signature holds: iss, aud,
 * exp/nbf/iat with skew, and the Kubernetes service account they name. */
#ifndef HSMCA_TOK_CLAIMS_H
#define HSMCA_TOK_CLAIMS_H

#include <stddef.h>
#include <stdint.h>
#include "tok_jwt.h"
#include "hsmca_err.h"

/* Checks the payload JSON json[0..len) against r at time now and fills *id (namespace from
 * kubernetes.io, else from sub; both must agree). HSMCA_EAUTH names the failed claim; nothing
 * is allocated for the caller. */
HSMCA_MUSTCHECK hsmca_code tok_claims_check(const char *json, size_t len, const tok_jwt_rules *r, int64_t now,
                               tok_jwt_identity *id, hsmca_err *e);

#endif

/* dev_jwt.h - the development JWT issuer behind `hsmca dev` and `hsmca dev token`.
 *
 * Not used by the front end: it only creates an ES256 key and its JWKS under the
 * dev directory and mints tokens that the front end's JWT authenticator (tok_jwt)
 * accepts when configured with DIR/dev-jwks.json and DEV_JWT_ISSUER. */
#ifndef HSMCA_DEV_JWT_H
#define HSMCA_DEV_JWT_H

#include <stdint.h>
#include "hsmca_err.h"

#define DEV_JWT_ISSUER "https://hsmca.dev.local" /* the dev issuer name ("iss") */
#define DEV_JWT_KEY_FILE "dev-jwt-key.pem"
#define DEV_JWKS_FILE "dev-jwks.json"

/* Creates DIR/dev-jwt-key.pem (EC P-256 private key, PKCS#8 PEM, mode 0600) and
 * DIR/dev-jwks.json ({"keys":[{"kty":"EC","crv":"P-256","x":..,"y":..,"kid":<base64url
 * of first 8 bytes of SHA-256 of the public key DER>,"use":"sig","alg":"ES256"}]}) if
 * they do not exist; reuses them otherwise (the JWKS is rewritten from the key when it
 * is missing or does not match it). */
HSMCA_MUSTCHECK hsmca_code dev_jwt_setup(const char *dir, hsmca_err *e);

/* Mints an ES256 JWT signed with DIR/dev-jwt-key.pem: iss = issuer (NULL means
 * DEV_JWT_ISSUER), aud = [aud], sub = system:serviceaccount:NS:SA, kubernetes.io =
 * {namespace, serviceaccount: {name, uid: random uuid}}, iat/nbf = now, exp = now +
 * ttl, with the kid in the header. Returns a new NUL-terminated string (caller frees)
 * or NULL with *e set. */
char *dev_jwt_mint(const char *dir, const char *issuer, const char *aud, const char *ns,
                   const char *sa, uint32_t ttl, hsmca_err *e);

#endif

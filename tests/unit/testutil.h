/* testutil.h - helpers shared by the unit, hostile and integration C tests. */
#ifndef HSMCA_TESTUTIL_H
#define HSMCA_TESTUTIL_H

#include <stddef.h>

#include "p11.h"
#include <openssl/evp.h>

/* A new empty directory under $HSMCA_TEST_TMP (or /tmp), named after prefix.
 * The base is made 0711 (as root) so that a signer that dropped root reaches a
 * dev CA's token in it; /tmp/hsmca-test when a parent of $HSMCA_TEST_TMP is not
 * searchable by other users. Returns a malloc'd path (caller frees). Aborts on
 * failure. */
char *tu_mkdtemp(const char *prefix);

/* Path of the hsmca binary under test ($HSMCA_BIN, else "hsmca" in PATH). */
const char *tu_hsmca_bin(void);

/* Path of the signer program that hsmca runs: hsmca-signer beside tu_hsmca_bin()
 * (as the supervisor finds it); static storage. */
const char *tu_signer_bin(void);

/* Runs a shell command (printf-style), returns its exit status (or -1). */
int tu_system(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sets up a dev CA in dir with `hsmca dev init --dir DIR --ca-key KEYTYPE`
 * (keytype "ec-p256" or "rsa-2048"): SoftHSM token, CA key, root cert, config.
 * Also exports SOFTHSM2_CONF=DIR/softhsm2.conf into this process's environment.
 * Returns 0 on success. */
int tu_dev_init(const char *dir, const char *keytype);

/* JWK JSON of k's public half, {"kty":"RSA","kid":KID,"use":"sig","n":..,"e":..}: a new
 * string (caller frees). Aborts on failure. */
char *tu_jwk_rsa(EVP_PKEY *k, const char *kid);

/* {"kty":"EC","crv":CRV,"kid":KID,"x":..,"y":..} with x from kx and y from ky (two keys make a
 * point off the curve): a new string (caller frees). Aborts on failure. */
char *tu_jwk_ec(EVP_PKEY *kx, EVP_PKEY *ky, const char *kid, const char *crv);

/* {"keys":[a,b]} (b may be NULL) as a new string (caller frees); frees a and b. */
char *tu_jwks_doc(char *a, char *b);

/* Signs a fresh random digest through the pool and verifies it with OpenSSL
 * (and that a changed digest fails): the pool's code, or HSMCA_EINTERNAL when
 * the signature is wrong. */
HSMCA_MUSTCHECK hsmca_code tu_pool_sign_check(p11_pool *p, hsmca_err *e);

#endif

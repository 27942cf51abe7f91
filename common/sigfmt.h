/* sigfmt.h - signature encodings: ECDSA as raw r||s (PKCS#11 CKM_ECDSA, JWS ES256)
 * or as a DER ECDSA-Sig-Value (X.509, OpenSSL); JWS RS256/ES256 signatures and the
 * base64url key parameters a JWK carries. */
#ifndef HSMCA_SIGFMT_H
#define HSMCA_SIGFMT_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include "hsmca_err.h"

#define SIGFMT_ECDSA_RAW_MAX 132 /* r||s of P-521 */
#define SIGFMT_ECDSA_DER_MAX 141 /* its DER: SEQUENCE (3) of two INTEGERs (2 + 67) */
#define SIGFMT_ES256_LEN 64      /* JWS ES256: r||s, 32 bytes each */

/* r||s (equal halves, 2..132 bytes) as DER into the caller's der; *derlen in: room, out: length. */
HSMCA_MUSTCHECK hsmca_code sigfmt_ecdsa_raw_to_der(const uint8_t *raw, size_t rawlen, uint8_t *der,
                                   size_t *derlen, hsmca_err *e);

/* DER ECDSA-Sig-Value (no trailing bytes) as r||s, each padded to half bytes, into raw (2*half). */
HSMCA_MUSTCHECK hsmca_code sigfmt_ecdsa_der_to_raw(const uint8_t *der, size_t derlen, size_t half, uint8_t *raw,
                                   hsmca_err *e);

/* JWS signature over input (RS256 for RSA, ES256 r||s for EC P-256) as new base64url (caller
 * frees); NULL when the key is neither or signing fails. */
char *sigfmt_jws_sign(EVP_PKEY *key, const char *input, size_t len);

/* The compact JWS base64url(hdr).base64url(payload).signature, signed by key as sigfmt_jws_sign
 * does; a new NUL-terminated string (caller frees), NULL on failure. */
char *sigfmt_jws_compact(EVP_PKEY *key, const void *hdr, size_t hlen, const void *payload,
                         size_t plen);

/* Checks a JWS signature over input: RS256 for an RSA key, ES256 (64-byte r||s) for an EC P-256
 * key. HSMCA_EAUTH names the failed check; nothing is allocated for the caller. */
HSMCA_MUSTCHECK hsmca_code sigfmt_jws_verify(EVP_PKEY *key, const char *input, size_t len, const uint8_t *sig,
                             size_t siglen, hsmca_err *e);

/* A key's big-number parameter (OSSL_PKEY_PARAM_RSA_N, _EC_PUB_X, ...) as new unpadded base64url
 * of width bytes (0: minimal), as in a JWK; caller frees; NULL when absent or wider. */
char *sigfmt_jwk_param(EVP_PKEY *key, const char *param, size_t width);

#endif

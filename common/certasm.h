/* certasm.h - turning a TBS and an HSM signature into a certificate, and the
 * reverse step of preparing an OpenSSL X509 as a TBS to be signed elsewhere. */
#ifndef HSMCA_CERTASM_H
#define HSMCA_CERTASM_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/x509.h>
#include "hsmca_err.h"

/* The signature NID a CA key signs with (common/sigalg.h: ECDSA-SHA256 for
 * P-256, ECDSA-SHA384 for P-384, SHA256-RSA for RSA), NID_undef otherwise. */
int certasm_sig_nid_for_key(const EVP_PKEY *key);

/* Sets x's inner signature algorithm to sig_nid (RSA with NULL params, ECDSA
 * without) and returns its DER TBSCertificate (new buffer, caller OPENSSL_free's). */
HSMCA_MUSTCHECK hsmca_code certasm_tbs_der(X509 *x, int sig_nid, uint8_t **der, size_t *len, hsmca_err *e);

/* SEQUENCE { tbs, AlgorithmIdentifier(sig_nid), BIT STRING sig } as a new buffer
 * (caller OPENSSL_free's). The caller is the one who checked tbs. */
HSMCA_MUSTCHECK hsmca_code certasm_assemble(const uint8_t *tbs, size_t tbs_len, int sig_nid, const uint8_t *sig,
                            size_t sig_len, uint8_t **der, size_t *len, hsmca_err *e);

/* PEM of a DER certificate (64-column base64), ending in "\n" (new NUL-terminated
 * string, caller frees). The DER is not parsed: pass only what the signer produced. */
char *certasm_der_to_pem(const uint8_t *der, size_t len);

/* The first PEM certificate in the file at path (at most 1 MiB); NULL with e. */
X509 *certasm_load_pem(const char *path, hsmca_err *e);

/* Unencrypted PKCS#8 PEM of a private key (new string; the caller wipes it with
 * OPENSSL_cleanse before freeing). NULL on failure. */
char *certasm_key_pem(EVP_PKEY *key);

/* The log's fingerprints: SHA-256 of the key's DER SubjectPublicKeyInfo / of the
 * certificate's DER, in lowercase hex, into hex (65 bytes). 1, or 0 when it does not
 * encode (NULL key or certificate). The ceremony and the signer both write them. */
int certasm_spki_sha256(EVP_PKEY *key, char hex[65]);
int certasm_cert_sha256(X509 *x, char hex[65]);

/* The TBSCertList of a v2 CRL that issuer signs, without its revoked certificates (the
 * caller adds them) or its algorithm: issuer's subject, thisUpdate this_update,
 * nextUpdate next_update, and the extensions authorityKeyIdentifier (issuer's keyid) and
 * cRLNumber number (RFC 5280 5.2.1, 5.2.3). New (caller frees); NULL when out of memory. */
X509_CRL *certasm_crl_new(X509 *issuer, int64_t this_update, const ASN1_TIME *next_update,
                          uint64_t number);

/* Copies what was written to a memory BIO into a new NUL-terminated string and
 * wipes the BIO's buffer (it may hold a key). Caller frees; NULL on failure. */
char *certasm_bio_string(BIO *b);

#endif

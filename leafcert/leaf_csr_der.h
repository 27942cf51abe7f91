/* leaf_csr_der.h - a PKCS#10 CertificationRequest decoded without decoding its key.
 *
 * Why: OpenSSL 3.0's d2i_X509_REQ decodes the SubjectPublicKeyInfo through the
 * generic OSSL_DECODER path (a decoder chain built per call, provider fetches and
 * their locks), a large share of the front end's CPU per request
 * (docs/PERFORMANCE.md §4). This module decodes the same structure with OpenSSL's
 * template decoder (the same DER rules as X509_REQ) but keeps the key as its
 * algorithm and BIT STRING; the key is then built directly for the curves the
 * profile allows (EC P-256 and P-384 with a named curve), and through d2i_PUBKEY
 * for everything else (RSA, refusals). */
#ifndef HSMCA_LEAF_CSR_DER_H
#define HSMCA_LEAF_CSR_DER_H

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stddef.h>
#include <stdint.h>

typedef struct leaf_csr_der leaf_csr_der;

/* The request in der[0..len) (a prefix of it: *used says how many bytes it took),
 * NULL when it is not a DER CertificationRequest. */
leaf_csr_der *leaf_csr_der_decode(const uint8_t *der, size_t len, size_t *used);
void leaf_csr_der_free(leaf_csr_der *r);

/* The version field's value (-1 when it does not fit a long). */
long leaf_csr_der_version(const leaf_csr_der *r);

/* The public key, new (caller frees); NULL when it does not decode. */
EVP_PKEY *leaf_csr_der_pubkey(const leaf_csr_der *r);

/* The SubjectPublicKeyInfo as an X509_PUBKEY holding the same algorithm and key
 * bits (for the TBS builder), new; NULL on failure or an unsupported parameter. */
X509_PUBKEY *leaf_csr_der_spki(const leaf_csr_der *r);

/* 1 when the request's signature verifies under k over the exact bytes received.
 * kctx: a context of k (EVP_PKEY_CTX_new_from_pkey) the verify may use, or NULL. */
int leaf_csr_der_verify(const leaf_csr_der *r, EVP_PKEY *k, EVP_PKEY_CTX *kctx);

/* The attributes (never NULL after a decode; may be empty). */
const STACK_OF(X509_ATTRIBUTE) * leaf_csr_der_attributes(const leaf_csr_der *r);

#endif

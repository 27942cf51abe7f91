/* leaf_tbs.h - building a workload's or a serving certificate's TBSCertificate, which
 * the program that built it sends to the signer (the front end today; any program
 * that issues workload certificates links this library, never the signer, which
 * checks TBSs and builds none). A program that builds TBSs must not fork once it
 * serves: the serial pool is per process (leaf_tbs.c). */
#ifndef HSMCA_LEAF_TBS_H
#define HSMCA_LEAF_TBS_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/x509.h>
#include "hsmca_err.h"

typedef struct {
    X509 *ca_cert;             /* issuer name, AKI from its SKI */
    int sig_nid;               /* the CA key's signature algorithm */
    EVP_PKEY *subject_key;     /* public key to certify, or: */
    const X509_PUBKEY *subject_spki; /* the same as parsed from a CSR: preferred, it is
                                        copied as is (OpenSSL's key encoder is slow) */
    const char *uri_san;       /* workload: the SPIFFE ID (or NULL) */
    const char *const *dns;    /* serving: DNS SANs */
    int n_dns;
    const char *const *ips;    /* serving: IP SANs as text */
    int n_ips;
    int64_t now;               /* notBefore = now - 120 s (clock skew) */
    uint32_t ttl;              /* notAfter = notBefore + ttl, or the CA certificate's
                                  notAfter if that is sooner */
} leaf_tbs_params;

/* Builds a v3 TBS: random 128-bit positive serial, empty subject, critical SAN,
 * KU (critical) digitalSignature for an EC key, digitalSignature|keyEncipherment for
 * an RSA key, EKU serverAuth+clientAuth,
 * critical CA:FALSE, SKI (SHA-1 of the key), AKI (the CA's SKI). Returns a new
 * DER buffer (caller OPENSSL_free's). */
HSMCA_MUSTCHECK hsmca_code leaf_tbs_build(const leaf_tbs_params *p, uint8_t **der, size_t *len, hsmca_err *e);

#endif

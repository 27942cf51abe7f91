/* leaf_csr.h - parsing a PEM PKCS#10 CSR from a workload and proving possession: the
 * CSR half of leafcert/, which the programs that issue workload certificates link. */
#ifndef HSMCA_LEAF_CSR_H
#define HSMCA_LEAF_CSR_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include "hsmca_err.h"

#define LEAF_CSR_MAX_LEN 16384
#define LEAF_CSR_MAX_SANS 8

typedef struct {
    EVP_PKEY *pubkey;                 /* owned; freed by leaf_csr_free */
    X509_PUBKEY *spki;                /* owned: the CSR's SubjectPublicKeyInfo (algorithm
                                         and key bits), which the TBS builder copies */
    char *uris[LEAF_CSR_MAX_SANS];      /* URI SANs, owned */
    int n_uris;
    int n_other_sans;                 /* DNS, IP, email, ...: counted, refused by policy */
    char *dns[LEAF_CSR_MAX_SANS];       /* the DNS SANs among them, owned: the policy file
                                         may grant them (policy/policy_file.h) */
    int n_dns;
    uint8_t der_sha256[32];           /* SHA-256 of the CSR DER, for the log */
} leaf_csr;

/* Parses exactly one PEM CERTIFICATE REQUEST of len bytes (nothing but
 * whitespace around it), verifies its self-signature, checks the key
 * (RSA 2048-8192, EC P-256/P-384) and collects its SANs. HSMCA_EINVAL names
 * the failed check ("CSR signature does not verify"). */
HSMCA_MUSTCHECK hsmca_code leaf_csr_parse(const char *pem, size_t len, leaf_csr *out, hsmca_err *e);
void leaf_csr_free(leaf_csr *c);

#endif

/* fuzz_ca.h - the fixed CA and TBS policy of fuzz_tbs (and of its seed generator). */
#ifndef HSMCA_FUZZ_CA_H
#define HSMCA_FUZZ_CA_H

#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "signer_tbs.h"

/* An EC P-256 CA certificate whose subject, SKI and validity are fixed (only its
 * key is fresh), so TBSs made for it once keep matching issuer and AKI. Sets
 * *key to the CA key when key is not NULL. NULL on failure. Caller frees both. */
X509 *fuzz_ca_new(EVP_PKEY **key);

/* The policy fuzz_tbs validates against: trust domain cluster.local, serving
 * names localhost / hsmca.hsmca-system.svc / 127.0.0.1 / ::1. Borrows ca. */
tbs_policy fuzz_ca_policy(X509 *ca);

#define FUZZ_CA_ISTIOD_KEYS 3

/* Fixed istiod key `which` (EC P-256, 0..FUZZ_CA_ISTIOD_KEYS-1), a CSR for it (CN=istiod,
 * signed by it) and a certificate for it signed by ca_key with serial serial_hex, valid
 * from not_before to not_after, as new DER buffers (OPENSSL_free) and *key
 * (EVP_PKEY_free). 0 on failure. */
int fuzz_ca_intermediate(X509 *ca, EVP_PKEY *ca_key, int which, const char *serial_hex,
                         int64_t not_before, int64_t not_after, EVP_PKEY **key, uint8_t **csr,
                         int *csr_len, uint8_t **cert, int *cert_len);

#endif

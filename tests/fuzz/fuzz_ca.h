/* fuzz_ca.h - the fixed CA and TBS policy of fuzz_tbs (and of its seed generator). */
#ifndef HSMCA_FUZZ_CA_H
#define HSMCA_FUZZ_CA_H

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

#endif

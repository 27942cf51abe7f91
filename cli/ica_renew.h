/* ica_renew.h - the renewal proof of `hsmca intermediate request --renew-with-key K
 * [--renew-with-cert C]` (approval.auto_renew, audit/audit_ica_renew.h): after the signer
 * wrote the request and returned its id and the log's origin, the current intermediate's
 * key, where istiod keeps it, signs audit_ica_renew_message of the origin, the id, the
 * cluster and the CSR; the signer verifies that signature under the current
 * intermediate's certificate before it auto-approves the renewal. The key file never
 * leaves this process. */
#ifndef HSMCA_ICA_RENEW_H
#define HSMCA_ICA_RENEW_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "hsmca_err.h"

/* The private key of key_file, checked to be the key of the certificate in cert_file or,
 * cert_file NULL (a renewal with the same key), of the CSR csr_pem (PEM text); caller
 * frees. NULL with HSMCA_EINVAL naming the file when a check fails. */
EVP_PKEY *ica_renew_key(const char *csr_pem, const char *cert_file, const char *key_file,
                        hsmca_err *e);

/* The proof by k for request id of the log origin, with cluster and CSR csr_pem: base64
 * into a new string *out (caller frees). */
HSMCA_MUSTCHECK hsmca_code ica_renew_proof(EVP_PKEY *k, const char *csr_pem, const char *origin,
                                           uint64_t id, const char *cluster, char **out,
                                           hsmca_err *e);

#endif

/* ica_renew.h - the renewal proof of `hsmca intermediate request --renew-with-cert C
 * --renew-with-key K` (approval.auto_renew, audit/audit_ica.h): the current intermediate's
 * key, where istiod keeps it, signs audit_ica_renewal_message of the cluster and the new
 * CSR, and the signer verifies that signature under the current intermediate's
 * certificate before it auto-approves the renewal. */
#ifndef HSMCA_ICA_RENEW_H
#define HSMCA_ICA_RENEW_H

#include <stddef.h>

#include "hsmca_err.h"

/* The proof for the CSR csr_pem (PEM text) of cluster, by the key in key_file, which must
 * be the private key of the certificate in cert_file: base64 into a new string *out
 * (caller frees). HSMCA_EINVAL naming the file when a check fails. */
HSMCA_MUSTCHECK hsmca_code ica_renew_proof(const char *csr_pem, const char *cluster,
                                           const char *cert_file, const char *key_file,
                                           char **out, hsmca_err *e);

#endif

/* ca_cert_rules.h - what the CA certificate (ca.cert) must be: one rule for serve's
 * signer (its start-up and `hsmca-signer --check`) and for `hsmca ca import`, so that
 * an import accepts nothing serve would refuse. */
#ifndef HSMCA_CA_CERT_RULES_H
#define HSMCA_CA_CERT_RULES_H

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "hsmca_err.h"

/* cert (read from path, named in messages) as the signer takes it: a CA certificate,
 * with a subjectKeyIdentifier, not expired, and, when token_key is not NULL,
 * certifying token_key (the token's CA key). HSMCA_EINVAL with "CA check: ..."
 * naming the rule. */
HSMCA_MUSTCHECK hsmca_code ca_cert_check(X509 *cert, const char *path, EVP_PKEY *token_key,
                                         hsmca_err *e);

#endif

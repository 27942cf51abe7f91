/* ca_cert_rules.c - see ca_cert_rules.h. */
#include "ca_cert_rules.h"

#include <openssl/x509v3.h>

hsmca_code ca_cert_check(X509 *cert, const char *path, EVP_PKEY *token_key, hsmca_err *e)
{
    if (X509_check_ca(cert) != 1)
        return hsmca_fail(e, HSMCA_EINVAL, "CA check: %s is not a CA certificate", path);
    if (!X509_get0_subject_key_id(cert))
        return hsmca_fail(e, HSMCA_EINVAL, "CA check: %s has no subjectKeyIdentifier", path);
    if (X509_cmp_time(X509_get0_notAfter(cert), NULL) <= 0)
        return hsmca_fail(e, HSMCA_EINVAL, "CA check: %s has expired", path);
    if (token_key && EVP_PKEY_eq(token_key, X509_get0_pubkey(cert)) != 1)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "CA check: the key in %s is not the token's CA key (pkcs11.ca_key)",
                          path);
    return HSMCA_OK;
}

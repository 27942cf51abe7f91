/* signer_tokens.c - see signer_tokens.h. */
#include "signer_tokens.h"

#include <string.h>
#include <sys/stat.h>

#include <openssl/x509v3.h>

const char *signer_audit_pin_path(const hsmca_config *cfg)
{
    return cfg->audit_pin_file[0] ? cfg->audit_pin_file : cfg->pin_file;
}

const char *signer_audit_pin_key(const hsmca_config *cfg)
{
    return cfg->audit_pin_file[0] ? "pkcs11.audit_pin_file" : "pkcs11.pin_file";
}

static int same_module(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return strcmp(a, b) == 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

hsmca_code signer_audit_module_load(const hsmca_config *cfg, p11_module *ca_module,
                                    p11_module **own, p11_module **use, hsmca_err *e)
{
    *own = NULL;
    *use = ca_module;
    if (!cfg->audit_module[0] || same_module(cfg->audit_module, cfg->module_path))
        return HSMCA_OK;
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = p11_module_load(cfg->audit_module, own, &why);
    if (rc != HSMCA_OK)
        return hsmca_fail(e, rc, "audit key (pkcs11.audit_module): %s", why.msg);
    *use = *own;
    return HSMCA_OK;
}

hsmca_code signer_ca_cert_check(X509 *cert, const char *path, EVP_PKEY *token_key, hsmca_err *e)
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

/* signer_tokens.c - see signer_tokens.h. */
#include "signer_tokens.h"

#include <string.h>
#include <sys/stat.h>

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

hsmca_code signer_rehearse_recovery(p11_pool *pool, p11_signkey *audit, int audit_own_module,
                                   hsmca_err *e)
{
    hsmca_err why;
    hsmca_err_clear(&why);
    if (p11_pool_reinit_module(pool, &why) != HSMCA_OK)
        return hsmca_fail(e, why.code, "CA key (pkcs11.ca_key): %s", why.msg);
    if (audit && audit_own_module && p11_signkey_reinit_module(audit, &why) != HSMCA_OK)
        return hsmca_fail(e, why.code, "audit key (pkcs11.audit_module): %s", why.msg);
    return HSMCA_OK;
}

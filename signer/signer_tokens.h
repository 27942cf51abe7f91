/* signer_tokens.h - where the signer's keys live and what the CA certificate must be:
 * one set of rules for serve's start-up (signer_core.c) and for `hsmca-signer --check`
 * (signer_check.c), so that the check refuses exactly what serve refuses; the CA
 * certificate's rule is common/ca_cert_rules.h (ca_cert_check). */
#ifndef HSMCA_SIGNER_TOKENS_H
#define HSMCA_SIGNER_TOKENS_H

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "ca_cert_rules.h"
#include "config.h"
#include "hsmca_err.h"
#include "p11.h"

/* The audit key's PIN file (pkcs11.audit_pin_file, else pkcs11.pin_file) and the
 * config key that names it, for messages. */
const char *signer_audit_pin_path(const hsmca_config *cfg);
const char *signer_audit_pin_key(const hsmca_config *cfg);

/* The module to open the audit key in: ca_module when pkcs11.audit_module is unset or
 * names the same file (a symlink or another path to it: dlopen returns the one handle,
 * and a second C_Initialize in one process fails); else pkcs11.audit_module loaded into
 * *own, which the caller unloads after closing the key. *own is NULL when nothing was
 * loaded. A load failure names pkcs11.audit_module. */
HSMCA_MUSTCHECK hsmca_code signer_audit_module_load(const hsmca_config *cfg, p11_module *ca_module,
                                                    p11_module **own, p11_module **use,
                                                    hsmca_err *e);

/* Inside the sandbox, before serving: the recovery from a token fault once for the CA
 * key's module (p11_pool_reinit_module), and for the audit key's when it has its own
 * (audit_own_module), so that a module which could not come back as signer.user under
 * the filter fails at start rather than at its first fault. The first failure is
 * returned, naming the key; the caller's self-test signatures follow. */
HSMCA_MUSTCHECK hsmca_code signer_rehearse_recovery(p11_pool *pool, p11_signkey *audit,
                                                    int audit_own_module, hsmca_err *e);

#endif

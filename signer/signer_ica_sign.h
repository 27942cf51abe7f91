/* signer_ica_sign.h - the intermediate's CA profile and its signing (signer_ica.h's
 * requests reach here once approved), and the one way a step goes into the log. Private
 * to signer/. */
#ifndef HSMCA_SIGNER_ICA_SIGN_H
#define HSMCA_SIGNER_ICA_SIGN_H

#include <jansson.h>

#include <openssl/evp.h>

#include "audit_ica.h"
#include "hsmca_err.h"

typedef struct signer_ctx signer_ctx;

/* The profile request r would be signed with, for show: subject, key, name constraints,
 * path length, validity (not_after as it would be now). */
json_t *signer_ica_profile(signer_ctx *s, const audit_ica_req *r, hsmca_err *e);

/* Signs approved request r (intent entry durable before C_Sign, then the result and the
 * certificate entries), user being who completed the approvals. */
HSMCA_MUSTCHECK hsmca_code signer_ica_issue(signer_ctx *s, const audit_ica_req *r,
                                            const char *user, hsmca_err *e);

/* Checks a CSR's key (RSA 2048..8192 or EC P-256/P-384) and its signature (proof of
 * possession); "" on success, else why not (a static string). */
const char *signer_ica_key_problem(EVP_PKEY *key);

/* One step into the log: appended, durable, then applied to the state. */
HSMCA_MUSTCHECK hsmca_code signer_ica_log(signer_ctx *s, audit_entry *ent, hsmca_err *e);

#endif

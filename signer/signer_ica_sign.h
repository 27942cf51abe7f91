/* signer_ica_sign.h - the intermediate's CA profile and its signing (signer_ica.h's
 * requests reach here once approved), and the one way a step goes into the log. Private
 * to signer/. */
#ifndef HSMCA_SIGNER_ICA_SIGN_H
#define HSMCA_SIGNER_ICA_SIGN_H

#include <jansson.h>

#include <openssl/evp.h>

#include "audit_ica.h"
#include "hsmca_err.h"

typedef struct signer_caops signer_caops;

/* The profile request r would be signed with, for show: subject, key, name constraints,
 * path length, validity (not_after as it would be now). */
json_t *signer_ica_profile(signer_caops *ca, const audit_ica_req *r, hsmca_err *e);

/* An admin op (signer_admin.c's table's shape). */
typedef json_t *(*signer_ica_then)(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);

/* Signs approved request r, user being who completed the approvals: the intent entry
 * durable, then the signature on the CA signing thread (signer_casign.h), then on the main
 * loop the result and the certificate entries and the reply to the caller that waits with
 * request req: then(req) run again once signed (ica-fetch), or with then NULL the
 * approver's reply (state, sign_error). HSMCA_OK: handed over
 * (the op answers SIGNER_REPLY_LATER); otherwise not signed, e says why (a refusal up front
 * logs nothing; a failure after the intent logs its result). */
HSMCA_MUSTCHECK hsmca_code signer_ica_issue(signer_caops *ca, const audit_ica_req *r,
                                            const char *user, json_t *req,
                                            signer_ica_then then, hsmca_err *e);

/* Checks a CSR's key (RSA 2048..8192 or EC P-256/P-384) and its signature (proof of
 * possession); "" on success, else why not (a static string). */
const char *signer_ica_key_problem(EVP_PKEY *key);

/* An entry another path wrote (the config entry, an intent closed at start) applied to the
 * intermediates' state (none without the log); one the state refuses closes the CA profile. */
void signer_ica_follow(signer_caops *ca, const audit_entry *ent);

/* One step into the log: appended, durable, then applied to the state. */
HSMCA_MUSTCHECK hsmca_code signer_ica_log(signer_caops *ca, audit_entry *ent, hsmca_err *e);

#endif

/* signer_ica.h - istiod intermediate CA requests through the admin socket (docs/ARCHITECTURE.md §3.3):
 * request, list, show, approve, deny, fetch. Every step is an audit-log entry, durable
 * before the reply, and the state is rebuilt from the log at start (audit/audit_ica.h,
 * whose rules the signer checks before it writes a step). Once a request has its
 * approval.required approvals from distinct users (not its requester), the signer signs
 * it from the CA profile it builds itself (signer_ica_sign.c): nothing of the CSR but its
 * public key goes into the certificate. Private to signer/; the ops are
 * signer_admin.c's table entries: each returns the reply object, or NULL with e. */
#ifndef HSMCA_SIGNER_ICA_H
#define HSMCA_SIGNER_ICA_H

#include <jansson.h>
#include <stddef.h>

#include <openssl/evp.h>

#include "audit_ica.h"
#include "hsmca_err.h"

typedef struct signer_caops signer_caops;

/* Reads what fetch hands out (ca.cert, ca.chain and ca.root_bundle as PEM text): called at
 * start, before the signer drops privileges (the files may be root's). */
HSMCA_MUSTCHECK hsmca_code signer_ica_load(signer_caops *ca, hsmca_err *e);

/* Requests waiting for approvals (pending, not expired). */
size_t signer_ica_pending(signer_caops *ca);

json_t *signer_ica_request(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);
json_t *signer_ica_list(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);
json_t *signer_ica_show(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);
json_t *signer_ica_approve(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);
json_t *signer_ica_deny(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);
/* ica-renew-proof (id, proof): with approval.auto_renew, the renewal proof of request id
 * (audit_ica_renew.h) checked, then an intermediate-auto-approve entry and the signature. */
json_t *signer_ica_renew_proof(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);
json_t *signer_ica_fetch(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);

#endif

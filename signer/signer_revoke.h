/* signer_revoke.h - what a revocation stops (docs/ARCHITECTURE.md §3.2): the signer refuses a workload
 * TBS while a revocation by identity names its URI SAN, and a client-certificate renewal
 * whose presented certificate (SignRequest.client_serial, client_issuer) it revoked. Both
 * refusals are the signer's own (deny entries), so a compromised front end cannot undo a
 * revocation by identity; omitting the presented serial escapes only the second check.
 *
 * The revocations live in ca->crl (audit/audit_crl.h: rebuilt from the log at start). The
 * checker thread reads them and notes each workload intent in its identity index; the
 * main thread (the admin socket) adds to them: both under ca->rev_lock, which the checker
 * holds from its check through its intent's append, so an intent is either refused by a
 * revocation by identity or found by it (and its serial revoked). Private to signer/. */
#ifndef HSMCA_SIGNER_REVOKE_H
#define HSMCA_SIGNER_REVOKE_H

#include <jansson.h>

#include "hsmca_err.h"
#include "signer.pb-c.h"
#include "signer_tbs.h"

typedef struct signer_caops signer_caops;

/* Under ca->rev_lock (the checker): HSMCA_EPERM naming the revocation when req's presented
 * certificate is revoked or is not of this CA, or a revocation by identity in force names
 * the workload TBS's URI SAN (facts); HSMCA_OK otherwise, and without a signing log. */
HSMCA_MUSTCHECK hsmca_code signer_revoke_check(signer_caops *ca, const Hsmca__Ipc__SignRequest *req,
                                               const tbs_facts *facts, hsmca_err *e);

/* Under ca->rev_lock, after the intent's append: notes a workload certificate under its
 * identity, so a later revocation by identity finds it. */
void signer_revoke_note(signer_caops *ca, const Hsmca__Ipc__SignRequest *req,
                        const tbs_facts *facts);

/* The admin op ca-revoke-identity (admin_contract.h): identity (a SPIFFE ID) or namespace
 * (of issuance.trust_domain), reason (an RFC 5280 name), until (unix seconds; 0: until
 * lifted), or lift: true. A revocation writes its revoke-identity entry, then a revoke
 * entry for every unexpired certificate of that identity the log holds, then a new CRL
 * (the reply waits for it, as ca-revoke's). Checked as the replay checks it, before its
 * entry. */
json_t *signer_revoke_identity(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);

#endif

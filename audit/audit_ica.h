/* audit_ica.h - the state of istiod intermediate CA requests, rebuilt from the signing log
 * (docs/ARCHITECTURE.md §3.3, §7): the signer's replay at start, its admin socket as it goes, and the
 * offline verifier apply the same rules to the same entries, so they cannot disagree
 * about who approved what.
 *
 * The rules (a violation is HSMCA_EPERM naming the log seq and the rule):
 * - a request's id is the seq of its intermediate-request entry;
 * - intermediate-approve and -deny name an earlier request; an approval comes before the
 *   request's `expires`, from a user who is not its requester and has not approved it
 *   already, and never after a denial or the certificate; a denial never after the
 *   certificate or another denial, and never while the request's issue-intent has no
 *   issue-result (a signature in flight: the certificate may already exist);
 * - users are the same when their uids are (entries carry the caller's uid); an entry
 *   without one (an older log) is compared by name;
 * - the approvals a request needs are the larger of its recorded `required` and the
 *   approval.required in force (the latest `config` entry's approval_required, absent
 *   in older logs): raising it reaches waiting requests, lowering never weakens one; a
 *   request whose signature is in flight keeps the count its intent was checked with;
 * - an issue-intent of profile "intermediate" names a request with its `required`
 *   approvals and no denial and no certificate yet: no CA certificate is signed without
 *   its M approvals before it;
 * - an intermediate-cert names such a request after its intent, once, and its
 *   cert_sha256 is the SHA-256 of its certificate;
 * - an intermediate-fetch names a signed request;
 * - a revoke never names the serial of an intermediate whose issue-intent has no
 *   issue-result yet (revoke the certificate once it is issued);
 * - an intermediate-auto-approve (approval.auto_renew) stands for all of a request's
 *   approvals: with an origin, the rule of audit_ica_renew.h (audit_ica_may_renew: the
 *   cluster's current intermediate, no revoked key, a proof of possession bound to this
 *   request of this log); without one (logs written before that rule), it names a pending
 *   request (not expired, not denied, not auto-approved) and the earlier request it
 *   renews, which is issued, for the same cluster, not revoked and its certificate not
 *   expired at the entry's time; and either the two have the same key (key_sha256) and
 *   the entry has no proof, or its proof verifies under the renewed certificate's key over
 *   audit_ica_renewal_message of the renewal's cluster and CSR (audit_ica_may_auto).
 * Any number of requests (the table grows); the CSR of a denied or expired request is
 * freed (csr_b64 NULL). Memory: every request, its certificate, the CSRs still live. */
#ifndef HSMCA_AUDIT_ICA_H
#define HSMCA_AUDIT_ICA_H

#include <stddef.h>
#include <stdint.h>

#include "audit_entry.h"
#include "audit_ica_req.h"
#include "hsmca_err.h"

#define AUDIT_ICA_PROFILE "intermediate"

typedef struct audit_ica audit_ica;

HSMCA_MUSTCHECK hsmca_code audit_ica_new(audit_ica **out, hsmca_err *e);
void audit_ica_free(audit_ica *t);

/* Applies one entry of the log (any kind; those not about intermediates are ignored)
 * at byte off: the rules above. */
HSMCA_MUSTCHECK hsmca_code audit_ica_apply(audit_ica *t, const audit_entry *ent, uint64_t off,
                                           hsmca_err *e);

/* The request id, or NULL. Owned by t, valid until the next apply. */
const audit_ica_req *audit_ica_find(const audit_ica *t, uint64_t id);
size_t audit_ica_count(const audit_ica *t);
const audit_ica_req *audit_ica_at(const audit_ica *t, size_t i);

/* Requests waiting at time now (pending or approved, not signed, not denied, not
 * expired): in all into *all, of user (uid; -1: by name) returned. */
size_t audit_ica_waiting(const audit_ica *t, const char *user, int64_t uid, int64_t now,
                         size_t *all);

/* Checks entry ent (any kind, its seq and time set as it will be written) against the
 * rules above without changing t: HSMCA_OK when audit_ica_apply would accept it, else
 * HSMCA_EPERM (or HSMCA_ENOTFOUND) naming the rule. The signer runs it before it appends
 * a line, so a line the rules reject is never written. */
HSMCA_MUSTCHECK hsmca_code audit_ica_check(const audit_ica *t, const audit_entry *ent,
                                           hsmca_err *e);

/* Whether user (uid, -1 when unknown) may approve request id at time now (the rules
 * above, the same text the verifier gives): HSMCA_OK, HSMCA_ENOTFOUND for no such
 * request, HSMCA_EPERM naming the rule. */
HSMCA_MUSTCHECK hsmca_code audit_ica_may_approve(const audit_ica *t, uint64_t id, const char *user,
                                                 int64_t uid, int64_t now, hsmca_err *e);
/* Whether request id may be denied (not issued, not denied already, no signature in
 * flight). */
HSMCA_MUSTCHECK hsmca_code audit_ica_may_deny(const audit_ica *t, uint64_t id, hsmca_err *e);

/* Whether request id of t may be auto-approved at time now by proof (plen bytes) made for
 * the log of origin: the rule of audit_ica_renew.h (audit_ica_renew_check) on the request
 * and its cluster's current intermediate; *renews gets the current intermediate's id.
 * HSMCA_ENOTFOUND for no such request, HSMCA_EPERM naming the rule. */
HSMCA_MUSTCHECK hsmca_code audit_ica_may_renew(const audit_ica *t, uint64_t id, const char *origin,
                                               const uint8_t *proof, size_t plen, int64_t now,
                                               uint64_t *renews, hsmca_err *e);

/* Whether request id may be auto-approved at time now as the renewal of request renews
 * (proof: the decoded proof, plen 0 when none) by the rule of auto-approvals without an
 * origin (above): only the replay of older logs applies it; HSMCA_EPERM naming it. */
HSMCA_MUSTCHECK hsmca_code audit_ica_may_auto(const audit_ica *t, uint64_t id, uint64_t renews,
                                              const uint8_t *proof, size_t plen, int64_t now,
                                              hsmca_err *e);

/* What a renewal proof without an origin signed (older logs; audit_ica_renew_message is
 * today's): "hsmca intermediate renewal\0" <cluster> "\0" <the new CSR's DER>, with
 * SHA-256 (RSA PKCS#1 v1.5, or ECDSA), by the current intermediate's key: a message no
 * certificate or CRL can be. A new buffer (caller frees), NULL when out of memory. */
uint8_t *audit_ica_renewal_message(const char *cluster, const uint8_t *csr_der, size_t len,
                                   size_t *out_len);

#endif

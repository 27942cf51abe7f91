/* audit_ica_renew.h - the renewal rules of istiod intermediates (approval.auto_renew),
 * applied by the signer before it writes an intermediate-auto-approve entry and by the
 * replay (its start, `hsmca audit verify`) to every such entry, through audit_ica_apply.
 *
 * State kept per log, rebuilt from intermediate-cert and revoke entries:
 * - a cluster's current intermediate: the request whose intermediate-cert came last for
 *   that cluster (CA signatures are one at a time, so the newest issued);
 * - a cluster is stopped once its current intermediate is revoked, until a request of it
 *   is issued with its approvals (not auto-approved);
 * - revoked keys: the key_sha256 (SubjectPublicKeyInfo) of every revoked intermediate.
 *
 * The rule of an auto-approval written with an origin (audit_ica_renew_check, which
 * audit_ica.h's audit_ica_may_renew applies to the request and the current intermediate
 * it looks up): request id is pending; its cluster has a current intermediate, not
 * revoked, not expired at the entry's time, and is not stopped; neither that
 * intermediate's key nor the request's is a revoked key; and the proof verifies under the
 * current intermediate's certificate key over audit_ica_renew_message(origin, id,
 * cluster, the CSR's DER): a proof that only the key's holder can make, after the request
 * exists, for this request of this log only.
 * Auto-approvals without an origin come from logs written before this rule and keep
 * audit_ica_may_auto's. */
#ifndef HSMCA_AUDIT_ICA_RENEW_H
#define HSMCA_AUDIT_ICA_RENEW_H

#include <stddef.h>
#include <stdint.h>

#include "audit_ica_req.h"
#include "hsmca_err.h"

typedef struct audit_ica_renew audit_ica_renew;

/* Empty state (caller frees with audit_ica_renew_free). */
HSMCA_MUSTCHECK hsmca_code audit_ica_renew_new(audit_ica_renew **out, hsmca_err *e);
void audit_ica_renew_free(audit_ica_renew *s);

/* Whether cluster has a current intermediate; *id gets its request id when it has. */
int audit_ica_renew_current(const audit_ica_renew *s, const char *cluster, uint64_t *id);

/* Request r was just issued: the current intermediate of its cluster; issued with its
 * approvals (not auto-approved), its cluster may auto-renew again. */
HSMCA_MUSTCHECK hsmca_code audit_ica_renew_issued(audit_ica_renew *s, const audit_ica_req *r,
                                                  hsmca_err *e);

/* Request r's certificate was just revoked: its key renews nothing, and when it is its
 * cluster's current intermediate the cluster stops auto-renewing. */
HSMCA_MUSTCHECK hsmca_code audit_ica_renew_revoked(audit_ica_renew *s, const audit_ica_req *r,
                                                   hsmca_err *e);

/* The message a renewal proof signs: "hsmca intermediate renewal v2\0" <origin> "\0"
 * <id, decimal> "\0" <cluster> "\0" <the CSR's DER>, with SHA-256 (RSA PKCS#1 v1.5 or
 * ECDSA). A new buffer (caller frees), NULL when out of memory. */
uint8_t *audit_ica_renew_message(const char *origin, uint64_t id, const char *cluster,
                                 const uint8_t *csr_der, size_t len, size_t *out_len);

/* Whether proof (plen bytes) is a SHA-256 signature over msg[0..len) by the key of p's
 * certificate: the one check of a renewal proof, today's message or the older one. */
int audit_ica_renew_verify(const audit_ica_req *p, const uint8_t *msg, size_t len,
                           const uint8_t *proof, size_t plen);

/* Whether request r may be auto-approved at time now by proof (plen bytes) made for the
 * log of origin, p being the request of r's cluster's current intermediate
 * (audit_ica_renew_current; NULL when none): the rule above. HSMCA_EPERM naming the rule;
 * a p that is not that current intermediate is refused too. */
HSMCA_MUSTCHECK hsmca_code audit_ica_renew_check(const audit_ica_renew *s, const audit_ica_req *r,
                                                 const audit_ica_req *p, const char *origin,
                                                 const uint8_t *proof, size_t plen, int64_t now,
                                                 hsmca_err *e);

#endif

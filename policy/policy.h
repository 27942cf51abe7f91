/* policy.h - who may hold which SANs, and for how long. Pure functions, no I/O. */
#ifndef HSMCA_POLICY_H
#define HSMCA_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include "hsmca_err.h"
#include "profile.h"

#define POLICY_MAX_ID 512
#define POLICY_NS_MAX 63  /* a namespace is a DNS-1123 label */
#define POLICY_SA_MAX 253 /* a service account name is a DNS-1123 subdomain */
/* Certificates are backdated 2 minutes inside their TTL (the signer caps
 * notAfter - notBefore), so a short TTL would yield a certificate that is
 * expired or nearly so when issued: refuse those instead. */
#define POLICY_MIN_TTL PROFILE_MIN_TTL_S

typedef struct {
    const char *trust_domain; /* "cluster.local" */
    uint32_t default_ttl;     /* seconds, used when the request asks for 0 or less */
    uint32_t max_ttl;         /* seconds, a longer request is refused */
} policy_rules;

/* spiffe://<td>/ns/<ns>/sa/<sa> into out. Refuses a namespace or service account that is not a
 * Kubernetes name (policy_is_k8s_name) and a bad trust domain with HSMCA_EAUTH. */
HSMCA_MUSTCHECK hsmca_code policy_spiffe_id(const char *td, const char *ns, const char *sa, char *out,
                            size_t outsz, hsmca_err *e);

/* Istio's rule: the CSR must carry exactly one SAN, a URI equal to one of the
 * caller's identities, and nothing else. HSMCA_EPERM names what was refused. */
HSMCA_MUSTCHECK hsmca_code policy_check_sans(const char *const *caller_ids, int n_ids,
                             const char *const *csr_uris, int n_uris, int n_other_sans,
                             hsmca_err *e);

/* TTL: requested seconds (<= 0: default); over max or under POLICY_MIN_TTL ->
 * HSMCA_EPERM. */
HSMCA_MUSTCHECK hsmca_code policy_ttl(const policy_rules *r, int64_t requested, uint32_t *ttl, hsmca_err *e);

/* 1 when s[0..len) is a Kubernetes name of at most max bytes: a DNS-1123 label
 * [a-z0-9]([-a-z0-9]*[a-z0-9])? (namespace, allow_dots 0) or a subdomain of such labels
 * joined by single dots (service account, allow_dots 1); so never '/', ':' or a NUL. */
int policy_is_k8s_name(const char *s, size_t len, size_t max, int allow_dots);


#endif

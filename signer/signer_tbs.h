/* signer_tbs.h - the signer's strict TBSCertificate validator (docs/ARCHITECTURE.md §3.1).
 *
 * Assumes the front end is compromised: parses the DER itself (strict DER only,
 * no trailing bytes) and refuses every TBS outside the profile, naming the
 * invariant that failed. Pure: no I/O, no clock (now is passed in). */
#ifndef HSMCA_SIGNER_TBS_H
#define HSMCA_SIGNER_TBS_H

#include "hsmca_err.h"
#include "profile.h"
#include <openssl/x509.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy_set; /* policy/policy_file.h */

#define TBS_SANS_TEXT_MAX 4096

/* What the signer knows about its CA and profile; built once at startup. */
typedef struct {
    X509 *ca_cert;            /* borrowed: issuer name, SKI, notAfter */
    int ca_sig_nid;           /* the CA key's algorithm (common/sigalg.h) */
    uint32_t max_ttl;         /* workload profile max notAfter - notBefore, seconds */
    uint32_t serving_max_ttl; /* serving profile max */
    const char *trust_domains[PROFILE_MAX_NAMES]; /* allowed SPIFFE trust domains */
    int n_trust_domains;
    const char *serving_dns[PROFILE_MAX_NAMES]; /* DNS SANs the serving profile may hold */
    int n_serving_dns;
    const char *serving_ips[PROFILE_MAX_NAMES]; /* IP SANs as text ("127.0.0.1") */
    int n_serving_ips;
    /* issuance.policy_file as the signer itself loaded it (NULL: none): workload
     * certificates also obey its rules (denied namespaces, namespace TTL caps, DNS
     * SANs granted per identity, key types). The trust domain aliases are in
     * trust_domains already. */
    const struct policy_set *policy_file;
} tbs_policy;

/* What the validator extracted from an accepted TBS (for the log and audit). */
typedef struct {
    uint8_t serial[PROFILE_SERIAL_MAX];
    size_t serial_len;
    int64_t not_before, not_after; /* unix seconds */
    int n_sans;                    /* every SAN of the certificate */
    /* Every SAN as "uri:...", "dns:...", "ip:..." joined by ",": only bytes the
     * profile allows, so safe to log. Truncated at a name boundary when long
     * (sans_truncated); san_sha256 covers the whole SAN extension value. */
    char sans[TBS_SANS_TEXT_MAX];
    bool sans_truncated;
    uint8_t san_sha256[32];
} tbs_facts;

/* Validates tbs (len bytes) against policy for profile at time now, enforcing
 * invariants 1-5 and the form of 6 (positive, 8-20 octets). Serial uniqueness
 * (rest of 6) and rate (7) are checked by the caller (signer_limits.h) with the
 * facts returned. On refusal returns HSMCA_EPERM (profile) or HSMCA_EINVAL (not
 * DER), and e->msg names the invariant and the field: "invariant 3: keyUsage
 * must be critical". facts may be NULL; on refusal *facts is zeroed. A bad
 * policy (no CA certificate, CA without SKI) is HSMCA_EINTERNAL. */
HSMCA_MUSTCHECK hsmca_code tbs_validate(const uint8_t *tbs, size_t len, profile_id profile,
                                        const tbs_policy *policy, int64_t now, tbs_facts *facts,
                                        hsmca_err *e);

#endif

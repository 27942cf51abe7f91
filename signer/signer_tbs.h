/* signer_tbs.h - the signer's strict TBSCertificate validator (DESIGN.md §2).
 *
 * Assumes the front end is compromised: parses the DER itself (strict DER only,
 * no trailing bytes) and refuses every TBS outside the profile, naming the
 * invariant that failed. Pure: no I/O, no clock (now is passed in). */
#ifndef HSMCA_SIGNER_TBS_H
#define HSMCA_SIGNER_TBS_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/x509.h>
#include "hsmca_err.h"

#define TBS_MAX_LEN 16384
#define TBS_MAX_NAMES 32 /* >= CONFIG_MAX_SERVING_NAMES */

typedef enum {
    TBS_PROFILE_WORKLOAD = 1, /* workload leaf: URI SANs in a trust domain only */
    TBS_PROFILE_SERVING = 2,  /* the front end's own TLS cert: DNS/IP SANs from a list */
} tbs_profile;

/* What the signer knows about its CA and profile; built once at startup. */
typedef struct {
    X509 *ca_cert;               /* borrowed: issuer name, SKI, notAfter, key type */
    int ca_sig_nid;              /* NID_ecdsa_with_SHA256 or NID_sha256WithRSAEncryption */
    uint32_t max_ttl;            /* workload profile max notAfter - notBefore, seconds */
    uint32_t serving_max_ttl;    /* serving profile max */
    const char *trust_domains[TBS_MAX_NAMES]; /* allowed SPIFFE trust domains */
    int n_trust_domains;
    const char *serving_dns[TBS_MAX_NAMES];   /* DNS SANs the serving profile may hold */
    int n_serving_dns;
    const char *serving_ips[TBS_MAX_NAMES];   /* IP SANs as text ("127.0.0.1") */
    int n_serving_ips;
} tbs_policy;

/* What the validator extracted from an accepted TBS (for logging / audit). */
typedef struct {
    uint8_t serial[20];
    size_t serial_len;
    int64_t not_before, not_after; /* unix seconds */
    char first_san[256];           /* the first SAN, for the log line */
} tbs_facts;

/* Validates tbs (len bytes) against policy for profile at time now, enforcing
 * invariants 1-5 and the form of 6 (positive, 8-20 octets). Serial uniqueness
 * (rest of 6) and rate (7) are checked by the caller with the facts returned.
 * On refusal returns HSMCA_EPERM (or HSMCA_EINVAL for bad DER) and e->msg names
 * the invariant: "invariant 3: basicConstraints must be critical CA:FALSE".
 * DER framing errors outside any one field (empty, over TBS_MAX_LEN, trailing
 * bytes) are reported as "invariant 0: ..."; errors inside a field carry that
 * field's invariant. facts may be NULL; on refusal *facts is zeroed.
 * A bad policy (no CA certificate, CA without SKI) is HSMCA_EINTERNAL. */
hsmca_code tbs_validate(const uint8_t *tbs, size_t len, tbs_profile profile,
                        const tbs_policy *policy, int64_t now, tbs_facts *facts, hsmca_err *e);

/* A set of issued serials (thread-safe). Insert fails if already present. */
typedef struct serial_set serial_set;
serial_set *serial_set_new(void);
void serial_set_free(serial_set *s);
/* Returns HSMCA_OK and records it, or HSMCA_EPERM when the serial was seen before. */
hsmca_code serial_set_insert(serial_set *s, const uint8_t *serial, size_t len, hsmca_err *e);

/* A token bucket (thread-safe): rate tokens per second, up to burst. */
typedef struct rate_limiter rate_limiter;
/* Starts full (burst tokens). NULL when rate or burst is 0, or out of memory. */
rate_limiter *rate_limiter_new(uint32_t rate, uint32_t burst);
void rate_limiter_free(rate_limiter *r);
/* Takes one token at monotonic time now; HSMCA_ERATE when the bucket is empty. */
hsmca_code rate_limiter_take(rate_limiter *r, double now, hsmca_err *e);

#endif

/* policy_file.h - the SAN policy file (issuance.policy_file): the rules beyond
 * Istio's exact match, and the one implementation of them that both the front
 * end (on the CSR) and the signer (on the TBS) run. Each process loads and
 * parses the file itself: the signer never takes the front end's word for what
 * the policy grants (docs/ARCHITECTURE.md §3.1 invariant 4).
 *
 * The format (YAML, every key optional; docs/AUTH.md "SAN policy file"):
 *
 *   trust_domain_aliases: [old.example]        # Istio's TrustDomainAliases
 *   denied_namespaces: [kube-system]           # never get a certificate
 *   namespace_max_ttl: {payments: 1h}          # caps below issuance.max_ttl
 *   dns_names:                                 # Citadel's custom-dns-names
 *     productpage.bookinfo: [productpage.example.com]   # <sa>.<ns>: [names]
 *   service_dns: true                          # <svc>.<ns>.svc[.<cluster_domain>]
 *   cluster_domain: cluster.local              #   for callers in <ns>
 *   key_types: {rsa_bits: [2048, 3072], ec_curves: [P-256]}
 *
 * A refusal names the rule ("policy rule dns_names: ..."). No file (NULL
 * policy_set) means: no aliases, no denied namespace, no cap, no DNS name, every
 * key of the profile (common/profile.h). */
#ifndef HSMCA_POLICY_FILE_H
#define HSMCA_POLICY_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "hsmca_err.h"

#define POLICY_FILE_MAX (1024 * 1024)
#define POLICY_MAX_ALIASES 16      /* trust_domain_aliases */
#define POLICY_MAX_NAMESPACES 1024 /* denied_namespaces, namespace_max_ttl */
#define POLICY_MAX_ACCOUNTS 1024   /* dns_names entries */
#define POLICY_MAX_DNS 16          /* names per account (a TBS holds at most 32 SANs) */
#define POLICY_DNS_MAX 253         /* bytes of a DNS name */
#define POLICY_MAX_RSA_SIZES 8

typedef struct policy_set policy_set;

/* Parses the YAML policy in buf[0..len). Errors are HSMCA_EINVAL with
 * "NAME:LINE: key 'K': what is wrong". Anchors, aliases, tags, duplicate and
 * unknown keys, a second document are refused. *out is set only on success. */
HSMCA_MUSTCHECK hsmca_code policy_file_parse(const char *name, const char *buf, size_t len,
                                             policy_set **out, hsmca_err *e);
/* Reads path (at most POLICY_FILE_MAX bytes) and parses it; records its SHA-256. */
HSMCA_MUSTCHECK hsmca_code policy_file_load(const char *path, policy_set **out, hsmca_err *e);
/* policy_file_parse, recording the SHA-256 of buf[0..len) as policy_file_load does. */
HSMCA_MUSTCHECK hsmca_code policy_file_load_buf(const char *name, const char *buf, size_t len,
                                                policy_set **out, hsmca_err *e);
/* The same from the file's bytes in fd (a sealed memfd the supervisor sent on SIGHUP: a
 * child in its sandbox cannot open the path), read from offset 0; errors name name. */
HSMCA_MUSTCHECK hsmca_code policy_file_load_fd(const char *name, int fd, policy_set **out,
                                               hsmca_err *e);
void policy_set_free(policy_set *p);

/* SHA-256 of the bytes loaded (zero after policy_file_parse alone). */
const uint8_t *policy_set_sha256(const policy_set *p);
/* The aliases, for the signer's list of trust domains. */
int policy_set_n_aliases(const policy_set *p);
const char *policy_set_alias(const policy_set *p, int i);
/* 1 when the policy could grant a workload any DNS name (dns_names or service_dns). */
int policy_set_grants_dns(const policy_set *p);

/* ---- the rules (policy_rules.c) ------------------------------------------------- */

typedef enum { POLICY_KEY_RSA = 1, POLICY_KEY_P256, POLICY_KEY_P384 } policy_key_type;
typedef struct {
    policy_key_type type;
    unsigned rsa_bits; /* POLICY_KEY_RSA only */
} policy_key;

/* A workload identity split by policy_identity. */
typedef struct {
    char ns[64];
    char sa[254];
} policy_who;

/* With a policy, the URI SAN uri[0..len) must be spiffe://<td>/ns/<ns>/sa/<sa> (the
 * form the rules are written for) with <td> the trust domain or one of its aliases
 * (rule trust_domain_aliases) and <ns> not denied (rule denied_namespaces); *who gets
 * <ns> and <sa>. With p NULL nothing is checked and *who is left empty.
 * HSMCA_EPERM names the rule. */
HSMCA_MUSTCHECK hsmca_code policy_identity(const policy_set *p, const char *td, const char *uri,
                                           size_t len, policy_who *who, hsmca_err *e);

/* Istio's exact match, widened by the aliases as Istio's ExpandWithTrustDomains
 * does: a caller spiffe://<a>/P also holds spiffe://<b>/P for a, b in {td} and the
 * aliases. n_other_sans counts the non-URI SANs the rules below do not grant. */
HSMCA_MUSTCHECK hsmca_code policy_check_sans_aliased(const policy_set *p, const char *td,
                                                     const char *const *caller_ids, int n_ids,
                                                     const char *const *csr_uris, int n_uris,
                                                     int n_other_sans, hsmca_err *e);

/* The DNS name name[0..len) must be granted to who: listed under <sa>.<ns> in
 * dns_names, or, with service_dns, <label>.<ns>.svc or <label>.<ns>.svc.<cluster_domain>.
 * Exact bytes (the policy's names are lowercase). */
HSMCA_MUSTCHECK hsmca_code policy_check_dns(const policy_set *p, const policy_who *who,
                                            const char *name, size_t len, hsmca_err *e);

/* The namespace's cap (namespace_max_ttl), 0 when none. */
uint32_t policy_ns_max_ttl(const policy_set *p, const char *ns);

/* The key must be allowed by key_types (no key_types: every profile key). */
HSMCA_MUSTCHECK hsmca_code policy_check_key(const policy_set *p, policy_key key, hsmca_err *e);

/* "RSA-2048", "EC P-256" into buf. */
const char *policy_key_name(policy_key key, char *buf, size_t bufsz);

#endif

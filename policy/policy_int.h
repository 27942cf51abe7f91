/* policy_int.h - the parsed policy file, shared by its parser (policy_file.c) and
 * its rules (policy_rules.c). Private to policy/. */
#ifndef HSMCA_POLICY_INT_H
#define HSMCA_POLICY_INT_H

#include <stdint.h>

#include "policy_file.h"

typedef struct {
    char *ns;
    uint32_t max_ttl;
} policy_ns_ttl;

typedef struct {
    char *ns, *sa;
    char *names[POLICY_MAX_DNS];
    int n_names;
} policy_grant;

struct policy_set {
    char *aliases[POLICY_MAX_ALIASES];
    int n_aliases;
    char **denied; /* denied_namespaces */
    int n_denied;
    policy_ns_ttl *ttls; /* namespace_max_ttl */
    int n_ttls;
    policy_grant *grants; /* dns_names */
    int n_grants;
    int service_dns;
    char cluster_domain[POLICY_DNS_MAX + 1]; /* default "cluster.local" */
    int keys_set;                            /* key_types given */
    int ec_p256, ec_p384;
    unsigned rsa_bits[POLICY_MAX_RSA_SIZES];
    int n_rsa_bits;
    uint8_t sha256[32];
};

/* A DNS name the policy may hold: lowercase labels [a-z0-9-] (not starting or
 * ending with '-'), joined by single dots, at most POLICY_DNS_MAX bytes; no
 * wildcard. The same test the parser applies to the file and the rules apply to
 * a requested name. */
int policy_is_dns_name(const char *s, size_t len);
/* A SPIFFE trust domain: [a-z0-9._-]+, at most 255 bytes. */
int policy_is_td(const char *s, size_t len);

#endif

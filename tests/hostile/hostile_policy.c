/* hostile_policy.c - the SAN policy file (issuance.policy_file) as the signer
 * enforces it, with its own signer whose config names a policy file. The front end
 * here is the attacker: it builds TBS certificates with DNS SANs the policy does not
 * grant, for denied namespaces, over a namespace's TTL cap, with key types the
 * policy leaves out. The signer loaded the file itself, so it must refuse each,
 * naming the rule, and sign exactly what the policy grants. */
#include "hostile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"

#define TD "spiffe://cluster.local"

/* Grants sleep.default one name, productpage.bookinfo another, services of the
 * caller's namespace; denies kube-system; caps payments at 1 h; P-256 and RSA-3072
 * only. old.example is an alias of cluster.local. */
static const char POLICY[] = "trust_domain_aliases: [old.example]\n"
                             "denied_namespaces: [kube-system]\n"
                             "namespace_max_ttl:\n"
                             "  payments: 1h\n"
                             "dns_names:\n"
                             "  sleep.default: [sleep.example.com]\n"
                             "  productpage.bookinfo: [productpage.example.com]\n"
                             "service_dns: true\n"
                             "key_types:\n"
                             "  rsa_bits: [3072]\n"
                             "  ec_curves: [P-256]\n";

static int policy_prepare(void)
{
    char path[1100];
    hsmca_err e;
    hsmca_err_clear(&e);
    snprintf(path, sizeof(path), "%s/policy.yaml", hf.dir);
    if (util_write_file_atomic(path, POLICY, strlen(POLICY), 0644, &e) != HSMCA_OK) {
        fprintf(stderr, "%s: %s\n", path, e.msg);
        return -1;
    }
    const hf_yaml_kv kv[] = {{"issuance", "policy_file", "policy.yaml"}};
    hsmca_config *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    int rc = -1;
    if (before && after && hf_rewrite_config(kv, 1, before, after) == 0 &&
        !strcmp(after->policy_file, path))
        rc = 0;
    else
        fprintf(stderr, "%s: issuance.policy_file not set to %s\n", hf.conf, path);
    free(before);
    free(after);
    return rc;
}

int hf_policy_group_setup(void **state)
{
    hf_group_teardown(state);
    return hf_start_signer("hostile-policy", policy_prepare);
}

#define DNS_NOT(name, acct)                                                                        \
    "invariant 4: policy rule dns_names: DNS SAN '" name "' is not granted to " acct               \
    " (nor a service of its namespace)"

/* clang-format off */
#define W(nm, c, pre, ...) {.name = (nm), .code = (c), .prefix = (pre), .spec = {__VA_ARGS__}}
static const hf_case policy_cases[] = {
    /* dns_names: exactly what the policy grants that identity, nothing else */
    W("policy: DNS SAN granted to the identity", HSMCA_OK, NULL, .dns = "sleep.example.com"),
    W("policy: DNS SAN not granted to anyone", HSMCA_EPERM,
      DNS_NOT("evil.example.com", "sleep.default"), .dns = "evil.example.com"),
    W("policy: DNS SAN granted to another identity", HSMCA_EPERM,
      DNS_NOT("productpage.example.com", "sleep.default"), .dns = "productpage.example.com"),
    W("policy: the other identity gets its own DNS SAN", HSMCA_OK, NULL,
      .uri = TD "/ns/bookinfo/sa/productpage", .dns = "productpage.example.com"),
    W("policy: granted name with another account of the namespace", HSMCA_EPERM,
      DNS_NOT("sleep.example.com", "admin.default"),
      .uri = TD "/ns/default/sa/admin", .dns = "sleep.example.com"),
    W("policy: DNS SAN in uppercase", HSMCA_EPERM,
      "invariant 4: policy rule dns_names: DNS SAN SLEEP.example.com is not a lowercase DNS name",
      .dns = "SLEEP.example.com"),
    W("policy: DNS SAN without a URI SAN", HSMCA_EPERM,
      "invariant 4: an X509-SVID has exactly one URI SAN", .uri = "", .dns = "sleep.example.com"),
    W("policy: service of the caller's namespace", HSMCA_OK, NULL, .dns = "web.default.svc"),
    W("policy: service of the caller's namespace, long form", HSMCA_OK, NULL,
      .dns = "web.default.svc.cluster.local"),
    W("policy: service of another namespace", HSMCA_EPERM,
      DNS_NOT("web.bookinfo.svc", "sleep.default"), .dns = "web.bookinfo.svc"),
    W("policy: IP SAN is still never granted", HSMCA_EPERM,
      "invariant 4: IP SAN not granted to workload identities", .ip = "10.0.0.1"),
    /* denied_namespaces, trust_domain_aliases, the form the rules need */
    W("policy: denied namespace", HSMCA_EPERM,
      "invariant 4: policy rule denied_namespaces: namespace 'kube-system' may not receive "
      "certificates", .uri = TD "/ns/kube-system/sa/default"),
    W("policy: identity in an alias trust domain", HSMCA_OK, NULL,
      .uri = "spiffe://old.example/ns/default/sa/sleep"),
    W("policy: denied namespace in an alias trust domain", HSMCA_EPERM,
      "invariant 4: policy rule denied_namespaces: namespace 'kube-system'",
      .uri = "spiffe://old.example/ns/kube-system/sa/default"),
    W("policy: trust domain neither ours nor an alias", HSMCA_EPERM,
      "invariant 4: SPIFFE ID: trust domain is not a configured one",
      .uri = "spiffe://evil.example/ns/default/sa/sleep"),
    W("policy: SPIFFE ID not of the ns/sa form", HSMCA_EPERM,
      "invariant 4: policy: URI SAN spiffe://cluster.local/workload/x is not",
      .uri = TD "/workload/x"),
    /* namespace_max_ttl: notBefore is now - 120 s */
    W("policy: namespace TTL cap exactly", HSMCA_OK, NULL,
      .uri = TD "/ns/payments/sa/api", .not_after = 3600 - 120),
    W("policy: namespace TTL cap + 1 s", HSMCA_EPERM,
      "invariant 2: policy rule namespace_max_ttl: validity 3601 s exceeds 3600 s for namespace "
      "'payments'", .uri = TD "/ns/payments/sa/api", .not_after = 3600 - 119),
    W("policy: another namespace keeps the profile max", HSMCA_OK, NULL,
      .uri = TD "/ns/payment/sa/api", .not_after = 86400 - 120),
    /* key_types */
    W("policy: EC P-384 key left out", HSMCA_EPERM,
      "invariant 5: policy rule key_types: EC P-384 keys are not allowed", .key_kind = KEY_P384),
    W("policy: RSA-2048 key left out", HSMCA_EPERM,
      "invariant 5: policy rule key_types: RSA-2048 keys are not allowed", .key_kind = KEY_RSA),
    W("policy: RSA-3072 key listed", HSMCA_OK, NULL, .key_kind = KEY_RSA, .rsa_bits = 3072),
};
/* clang-format on */

const struct CMUnitTest *hf_policy_tests(size_t *n)
{
    enum { N_CASES = sizeof(policy_cases) / sizeof(policy_cases[0]) };
    static struct CMUnitTest all[N_CASES];
    for (size_t i = 0; i < N_CASES; i++)
        all[i] = hf_case_unit_test(&policy_cases[i]);
    *n = N_CASES;
    return all;
}

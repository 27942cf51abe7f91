/* test_policy_file.c - the SAN policy file: its parser (errors name file, line and
 * key) and each of its rules, which must refuse what they should and only that. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "policy.h"
#include "policy_file.h"

#define TD "cluster.local"

static const char FULL[] = "# a policy with every rule\n"
                           "trust_domain_aliases: [old.example, legacy]\n"
                           "denied_namespaces:\n"
                           "  - kube-system\n"
                           "  - istio-system\n"
                           "namespace_max_ttl:\n"
                           "  payments: 1h\n"
                           "  batch: 7200\n"
                           "dns_names:\n"
                           "  productpage.bookinfo: [productpage.example.com, www.example.com]\n"
                           "  sleep.default: [sleep.example.com]\n"
                           "  build.bot.ci: [ci.example.com]\n"
                           "service_dns: true\n"
                           "cluster_domain: mesh.internal\n"
                           "key_types:\n"
                           "  rsa_bits: [3072, 4096]\n"
                           "  ec_curves: [P-256]\n";

static policy_set *parse_ok(const char *text)
{
    policy_set *p = NULL;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = policy_file_parse("policy.yaml", text, strlen(text), &p, &e);
    if (rc != HSMCA_OK)
        fail_msg("refused: %s", e.msg);
    assert_non_null(p);
    return p;
}

/* text must be refused with EINVAL and exactly msg. */
static void parse_refused(const char *text, const char *msg)
{
    policy_set *p = (policy_set *)(uintptr_t)1;
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(policy_file_parse("policy.yaml", text, strlen(text), &p, &e), HSMCA_EINVAL);
    assert_null(p);
    assert_string_equal(e.msg, msg);
}

static void test_parse_full(void **state)
{
    (void)state;
    policy_set *p = parse_ok(FULL);
    assert_int_equal(policy_set_n_aliases(p), 2);
    assert_string_equal(policy_set_alias(p, 0), "old.example");
    assert_string_equal(policy_set_alias(p, 1), "legacy");
    assert_null(policy_set_alias(p, 2));
    assert_true(policy_set_grants_dns(p));
    assert_int_equal(policy_ns_max_ttl(p, "payments"), 3600);
    assert_int_equal(policy_ns_max_ttl(p, "batch"), 7200);
    assert_int_equal(policy_ns_max_ttl(p, "default"), 0);
    policy_set_free(p);
}

static void test_parse_empty(void **state)
{
    (void)state;
    const char *empties[] = {"", "# nothing\n", "{}\n", "dns_names:\ndenied_namespaces: []\n"};
    for (size_t i = 0; i < sizeof(empties) / sizeof(empties[0]); i++) {
        policy_set *p = parse_ok(empties[i]);
        assert_int_equal(policy_set_n_aliases(p), 0);
        assert_false(policy_set_grants_dns(p));
        hsmca_err e;
        assert_int_equal(policy_check_key(p, (policy_key){POLICY_KEY_RSA, 8192}, &e), HSMCA_OK);
        policy_set_free(p);
    }
}

static void test_parse_errors(void **state)
{
    (void)state;
    parse_refused("dns_name: {}\n", "policy.yaml:1: unknown key 'dns_name'");
    parse_refused("service_dns: true\nservice_dns: false\n",
                  "policy.yaml:2: key 'service_dns': given twice");
    parse_refused("service_dns: yes\n", "policy.yaml:1: key 'service_dns': must be true or false");
    parse_refused("trust_domain_aliases: [Old.Example]\n",
                  "policy.yaml:1: key 'trust_domain_aliases': 'Old.Example' is not a trust domain "
                  "([a-z0-9._-], at most 255)");
    parse_refused("trust_domain_aliases: [a, a]\n",
                  "policy.yaml:1: key 'trust_domain_aliases': 'a' is listed twice");
    parse_refused("trust_domain_aliases: a\n",
                  "policy.yaml:1: key 'trust_domain_aliases': must be a list");
    parse_refused("denied_namespaces:\n  - ok\n  - a.b\n",
                  "policy.yaml:3: key 'denied_namespaces': 'a.b' is not a namespace (a DNS-1123 "
                  "label)");
    parse_refused("denied_namespaces: [[x]]\n",
                  "policy.yaml:1: key 'denied_namespaces': must be a list of strings");
    parse_refused("namespace_max_ttl:\n  payments: 5m\n",
                  "policy.yaml:2: key 'namespace_max_ttl': '5m' for 'payments' must be a duration "
                  "(N, Ns, Nm, Nh or Nd) of at least 600s");
    parse_refused("namespace_max_ttl:\n  payments: 1h\n  payments: 2h\n",
                  "policy.yaml:3: key 'namespace_max_ttl': namespace 'payments' is listed twice");
    parse_refused("namespace_max_ttl: [a]\n",
                  "policy.yaml:1: key 'namespace_max_ttl': must be a mapping");
    parse_refused("dns_names:\n  sleep: [a.example]\n",
                  "policy.yaml:2: key 'dns_names': 'sleep' must be <serviceaccount>.<namespace>");
    parse_refused("dns_names:\n  sleep.default:\n    - ok.example\n    - '*.example.com'\n",
                  "policy.yaml:4: key 'dns_names': '*.example.com' is not a lowercase DNS name of "
                  "at most 253 bytes (no wildcard)");
    parse_refused("dns_names:\n  sleep.default: [A.example]\n",
                  "policy.yaml:2: key 'dns_names': 'A.example' is not a lowercase DNS name of at "
                  "most 253 bytes (no wildcard)");
    parse_refused("dns_names:\n  sleep.default: a.example\n",
                  "policy.yaml:2: key 'dns_names': 'sleep.default' must be a list of DNS names");
    parse_refused("dns_names:\n  sleep.default: [a.example]\n  sleep.default: [b.example]\n",
                  "policy.yaml:3: key 'dns_names': 'sleep.default' is listed twice");
    parse_refused("cluster_domain: -bad\n",
                  "policy.yaml:1: key 'cluster_domain': '-bad' is not a lowercase DNS name");
    parse_refused("key_types:\n  rsa_bits: [1024]\n",
                  "policy.yaml:2: key 'key_types.rsa_bits': '1024' must be a modulus size in "
                  "bits, 2048-8192");
    parse_refused("key_types:\n  rsa_bits: [02048]\n",
                  "policy.yaml:2: key 'key_types.rsa_bits': '02048' must be a modulus size in "
                  "bits, 2048-8192");
    parse_refused("key_types:\n  ec_curves: [P-521]\n",
                  "policy.yaml:2: key 'key_types.ec_curves': 'P-521' must be P-256 or P-384");
    parse_refused("key_types:\n  ec_curves: [P-256]\n  ec_curves: [P-384]\n",
                  "policy.yaml:3: key 'key_types': 'ec_curves' given twice");
    parse_refused("key_types:\n  dsa: [1024]\n",
                  "policy.yaml:2: key 'key_types': unknown key 'dsa' (rsa_bits, ec_curves)");
    parse_refused("key_types:\n  rsa_bits: []\n",
                  "policy.yaml:1: key 'key_types': allows no key at all");
    parse_refused("denied_namespaces: &x [a]\n",
                  "policy.yaml:1: anchors and aliases are not allowed in the policy "
                  "file");
    parse_refused("service_dns: !!bool true\n",
                  "policy.yaml:1: YAML tags are not allowed in the policy file");
    parse_refused("- a\n", "policy.yaml:1: the policy must be a mapping");
    parse_refused("service_dns: true\n---\nservice_dns: true\n",
                  "policy.yaml:2: only one YAML document is allowed");
    parse_refused("dns_names: {\n", "policy.yaml:2: YAML syntax error: did not find expected node "
                                    "content");
}

static void test_parse_limits(void **state)
{
    (void)state;
    /* 17 aliases: one too many. */
    char buf[1024] = "trust_domain_aliases: [";
    for (int i = 0; i <= POLICY_MAX_ALIASES; i++)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%st%d", i ? ", " : "", i);
    strcat(buf, "]\n");
    parse_refused(buf, "policy.yaml:1: key 'trust_domain_aliases': more than 16 aliases");
    /* An embedded NUL in a value. */
    static const char nul[] = "cluster_domain: \"a\\0b\"\n";
    parse_refused(nul, "policy.yaml:1: key 'cluster_domain': contains a NUL byte");
    /* A file over the cap is refused before parsing. */
    policy_set *p = NULL;
    hsmca_err e;
    assert_int_equal(policy_file_parse("big.yaml", "", POLICY_FILE_MAX + 1, &p, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "big.yaml: policy file larger than 1048576 bytes");
}

static void test_load(void **state)
{
    (void)state;
    char path[] = "/tmp/hsmca-policy-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, FULL, strlen(FULL)), (ssize_t)strlen(FULL));
    close(fd);
    policy_set *p = NULL;
    hsmca_err e;
    assert_int_equal(policy_file_load(path, &p, &e), HSMCA_OK);
    static const uint8_t zero[32];
    assert_memory_not_equal(policy_set_sha256(p), zero, 32);
    policy_set_free(p);
    unlink(path);
    assert_int_not_equal(policy_file_load(path, &p, &e), HSMCA_OK);
    assert_null(p);
}

/* The shipped example (hsm-config/policy.yaml) must load as it is. */
static void test_example_file(void **state)
{
    (void)state;
    const char *src = __FILE__;
    const char *tail = strstr(src, "tests/unit/test_policy_file.c");
    if (src[0] != '/' || !tail)
        skip(); /* built from a relative path: cannot find the source tree */
    char path[4096];
    snprintf(path, sizeof(path), "%.*shsm-config/policy.yaml", (int)(tail - src), src);
    policy_set *p = NULL;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (policy_file_load(path, &p, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(policy_set_n_aliases(p), 1);
    assert_int_equal(policy_ns_max_ttl(p, "payments"), 3600);
    assert_true(policy_set_grants_dns(p));
    policy_set_free(p);
}

/* ---- the rules ---------------------------------------------------------------------- */

static void refused(hsmca_code rc, const hsmca_err *e, const char *msg)
{
    assert_int_equal(rc, HSMCA_EPERM);
    assert_string_equal(e->msg, msg);
}

static void test_rule_identity(void **state)
{
    (void)state;
    policy_set *p = parse_ok(FULL);
    policy_who who;
    hsmca_err e;
    const char *ok[] = {"spiffe://cluster.local/ns/default/sa/sleep",
                        "spiffe://old.example/ns/default/sa/sleep",
                        "spiffe://legacy/ns/default/sa/sleep"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(policy_identity(p, TD, ok[i], strlen(ok[i]), &who, &e), HSMCA_OK);
        assert_string_equal(who.ns, "default");
        assert_string_equal(who.sa, "sleep");
    }
    const char *sub = "spiffe://cluster.local/ns/kube-systemx/sa/a.b";
    assert_int_equal(policy_identity(p, TD, sub, strlen(sub), &who, &e), HSMCA_OK);
    assert_string_equal(who.ns, "kube-systemx");
    assert_string_equal(who.sa, "a.b");
    const char *denied = "spiffe://cluster.local/ns/kube-system/sa/default";
    refused(policy_identity(p, TD, denied, strlen(denied), &who, &e), &e,
            "policy rule denied_namespaces: namespace 'kube-system' may not receive certificates");
    const char *denied_alias = "spiffe://legacy/ns/istio-system/sa/istiod";
    refused(policy_identity(p, TD, denied_alias, strlen(denied_alias), &who, &e), &e,
            "policy rule denied_namespaces: namespace 'istio-system' may not receive "
            "certificates");
    const char *foreign = "spiffe://evil.example/ns/default/sa/sleep";
    refused(policy_identity(p, TD, foreign, strlen(foreign), &who, &e), &e,
            "policy rule trust_domain_aliases: trust domain of "
            "spiffe://evil.example/ns/default/sa/sleep is neither issuance.trust_domain nor an "
            "alias");
    const char *forms[] = {"spiffe://cluster.local/workload/x", "spiffe://cluster.local/ns/a/sa/",
                           "spiffe://cluster.local/ns//sa/b", "spiffe://cluster.local/ns/a/sa/b/c",
                           "spiffe://cluster.local/ns/A/sa/b"};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        assert_int_equal(policy_identity(p, TD, forms[i], strlen(forms[i]), &who, &e), HSMCA_EPERM);
        assert_non_null(strstr(e.msg, "the form the policy's rules apply to"));
    }
    /* No policy file: nothing to check. */
    assert_int_equal(policy_identity(NULL, TD, foreign, strlen(foreign), &who, &e), HSMCA_OK);
    policy_set_free(p);
}

static void test_rule_aliases_in_san_match(void **state)
{
    (void)state;
    policy_set *p = parse_ok(FULL);
    hsmca_err e;
    const char *me[] = {"spiffe://cluster.local/ns/default/sa/sleep"};
    const char *old[] = {"spiffe://old.example/ns/default/sa/sleep"};
    const char *other[] = {"spiffe://old.example/ns/default/sa/admin"};
    const char *evil[] = {"spiffe://evil.example/ns/default/sa/sleep"};
    /* Exact, and an alias in either direction. */
    assert_int_equal(policy_check_sans_aliased(p, TD, me, 1, me, 1, 0, &e), HSMCA_OK);
    assert_int_equal(policy_check_sans_aliased(p, TD, me, 1, old, 1, 0, &e), HSMCA_OK);
    assert_int_equal(policy_check_sans_aliased(p, TD, old, 1, me, 1, 0, &e), HSMCA_OK);
    /* Another path, a foreign trust domain, a DNS SAN alongside: Istio's refusal. */
    refused(policy_check_sans_aliased(p, TD, me, 1, other, 1, 0, &e), &e,
            "SAN policy: CSR asks for spiffe://old.example/ns/default/sa/admin but the caller is "
            "spiffe://cluster.local/ns/default/sa/sleep");
    refused(policy_check_sans_aliased(p, TD, me, 1, evil, 1, 0, &e), &e,
            "SAN policy: CSR asks for spiffe://evil.example/ns/default/sa/sleep but the caller is "
            "spiffe://cluster.local/ns/default/sa/sleep");
    refused(policy_check_sans_aliased(p, TD, me, 1, old, 1, 1, &e), &e,
            "SAN policy: CSR carries DNS/IP/email SANs, not allowed for workloads");
    /* Without aliases (no file, or none listed) only the exact match holds. */
    assert_int_equal(policy_check_sans_aliased(NULL, TD, me, 1, old, 1, 0, &e), HSMCA_EPERM);
    policy_set *none = parse_ok("service_dns: true\n");
    assert_int_equal(policy_check_sans_aliased(none, TD, me, 1, old, 1, 0, &e), HSMCA_EPERM);
    policy_set_free(none);
    policy_set_free(p);
}

static hsmca_code dns(const policy_set *p, const char *ns, const char *sa, const char *name,
                      hsmca_err *e)
{
    policy_who who;
    memset(&who, 0, sizeof(who));
    snprintf(who.ns, sizeof(who.ns), "%s", ns);
    snprintf(who.sa, sizeof(who.sa), "%s", sa);
    return policy_check_dns(p, &who, name, strlen(name), e);
}

static void test_rule_dns_names(void **state)
{
    (void)state;
    policy_set *p = parse_ok(FULL);
    hsmca_err e;
    assert_int_equal(dns(p, "bookinfo", "productpage", "productpage.example.com", &e), HSMCA_OK);
    assert_int_equal(dns(p, "bookinfo", "productpage", "www.example.com", &e), HSMCA_OK);
    assert_int_equal(dns(p, "ci", "build.bot", "ci.example.com", &e), HSMCA_OK);
    /* Another account of the namespace, the same account in another namespace, a
     * name granted to someone else, a near miss. */
    refused(dns(p, "bookinfo", "reviews", "productpage.example.com", &e), &e,
            "policy rule dns_names: DNS SAN 'productpage.example.com' is not granted to "
            "reviews.bookinfo (nor a service of its namespace)");
    refused(dns(p, "default", "productpage", "productpage.example.com", &e), &e,
            "policy rule dns_names: DNS SAN 'productpage.example.com' is not granted to "
            "productpage.default (nor a service of its namespace)");
    assert_int_equal(dns(p, "default", "sleep", "www.example.com", &e), HSMCA_EPERM);
    assert_int_equal(dns(p, "bookinfo", "productpage", "productpage.example.co", &e), HSMCA_EPERM);
    assert_int_equal(dns(p, "bookinfo", "productpage", "productpage.example.com.", &e),
                     HSMCA_EPERM);
    refused(dns(p, "bookinfo", "productpage", "Productpage.example.com", &e), &e,
            "policy rule dns_names: DNS SAN Productpage.example.com is not a lowercase DNS name");
    refused(dns(p, "bookinfo", "productpage", "*.example.com", &e), &e,
            "policy rule dns_names: DNS SAN *.example.com is not a lowercase DNS name");
    refused(dns(NULL, "bookinfo", "productpage", "productpage.example.com", &e), &e,
            "policy rule dns_names: DNS SAN 'productpage.example.com' is not granted (no "
            "issuance.policy_file)");
    policy_set_free(p);
}

static void test_rule_service_dns(void **state)
{
    (void)state;
    policy_set *p = parse_ok(FULL); /* service_dns: true, cluster_domain: mesh.internal */
    hsmca_err e;
    assert_int_equal(dns(p, "default", "sleep", "web.default.svc", &e), HSMCA_OK);
    assert_int_equal(dns(p, "default", "sleep", "web.default.svc.mesh.internal", &e), HSMCA_OK);
    /* Another namespace, the wrong cluster domain, two labels, no label, a suffix. */
    refused(dns(p, "default", "sleep", "web.payments.svc", &e), &e,
            "policy rule dns_names: DNS SAN 'web.payments.svc' is not granted to sleep.default "
            "(nor a service of its namespace)");
    assert_int_equal(dns(p, "default", "sleep", "web.default.svc.cluster.local", &e), HSMCA_EPERM);
    assert_int_equal(dns(p, "default", "sleep", "a.web.default.svc", &e), HSMCA_EPERM);
    assert_int_equal(dns(p, "default", "sleep", "default.svc", &e), HSMCA_EPERM);
    assert_int_equal(dns(p, "default", "sleep", "web.default.svcx", &e), HSMCA_EPERM);
    assert_int_equal(dns(p, "default", "sleep", "web.default.svc.mesh.internal.evil", &e),
                     HSMCA_EPERM);
    assert_int_equal(dns(p, "def", "sleep", "web.default.svc", &e), HSMCA_EPERM);
    policy_set_free(p);
    /* Off by default; the long form defaults to cluster.local. */
    p = parse_ok("dns_names:\n  sleep.default: [sleep.example.com]\n");
    refused(dns(p, "default", "sleep", "web.default.svc", &e), &e,
            "policy rule dns_names: DNS SAN 'web.default.svc' is not granted to sleep.default");
    policy_set_free(p);
    p = parse_ok("service_dns: true\n");
    assert_true(policy_set_grants_dns(p));
    assert_int_equal(dns(p, "default", "sleep", "web.default.svc.cluster.local", &e), HSMCA_OK);
    policy_set_free(p);
}

static void test_rule_ns_ttl(void **state)
{
    (void)state;
    policy_set *p = parse_ok(FULL);
    assert_int_equal(policy_ns_max_ttl(p, "payments"), 3600);
    assert_int_equal(policy_ns_max_ttl(p, "payment"), 0);
    assert_int_equal(policy_ns_max_ttl(p, "paymentsx"), 0);
    assert_int_equal(policy_ns_max_ttl(NULL, "payments"), 0);
    policy_set_free(p);
}

static void test_rule_key_types(void **state)
{
    (void)state;
    policy_set *p = parse_ok(FULL); /* rsa_bits [3072, 4096], ec_curves [P-256] */
    hsmca_err e;
    assert_int_equal(policy_check_key(p, (policy_key){POLICY_KEY_P256, 0}, &e), HSMCA_OK);
    assert_int_equal(policy_check_key(p, (policy_key){POLICY_KEY_RSA, 3072}, &e), HSMCA_OK);
    assert_int_equal(policy_check_key(p, (policy_key){POLICY_KEY_RSA, 4096}, &e), HSMCA_OK);
    refused(policy_check_key(p, (policy_key){POLICY_KEY_P384, 0}, &e), &e,
            "policy rule key_types: EC P-384 keys are not allowed");
    refused(policy_check_key(p, (policy_key){POLICY_KEY_RSA, 2048}, &e), &e,
            "policy rule key_types: RSA-2048 keys are not allowed");
    refused(policy_check_key(p, (policy_key){0, 0}, &e), &e,
            "policy rule key_types: unknown keys are not allowed");
    policy_set_free(p);
    /* Only curves listed: no RSA at all. */
    p = parse_ok("key_types:\n  ec_curves: [P-384]\n");
    assert_int_equal(policy_check_key(p, (policy_key){POLICY_KEY_P384, 0}, &e), HSMCA_OK);
    assert_int_equal(policy_check_key(p, (policy_key){POLICY_KEY_RSA, 4096}, &e), HSMCA_EPERM);
    policy_set_free(p);
    /* No key_types (or no file): the profile's bounds alone. */
    assert_int_equal(policy_check_key(NULL, (policy_key){POLICY_KEY_P384, 0}, &e), HSMCA_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_full),     cmocka_unit_test(test_parse_empty),
        cmocka_unit_test(test_parse_errors),   cmocka_unit_test(test_parse_limits),
        cmocka_unit_test(test_load),           cmocka_unit_test(test_example_file),
        cmocka_unit_test(test_rule_identity),  cmocka_unit_test(test_rule_aliases_in_san_match),
        cmocka_unit_test(test_rule_dns_names), cmocka_unit_test(test_rule_service_dns),
        cmocka_unit_test(test_rule_ns_ttl),    cmocka_unit_test(test_rule_key_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

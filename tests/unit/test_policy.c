/* test_policy.c - SAN, TTL and SPIFFE ID rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "policy.h"

#define ME "spiffe://cluster.local/ns/default/sa/sleep"

static void assert_refused(hsmca_code rc, const hsmca_err *e, hsmca_code want, const char *msg)
{
    assert_int_equal(rc, want);
    assert_int_equal(e->code, want);
    assert_string_equal(e->msg, msg);
}

/* n copies of c in buf (n + 1 bytes), NUL-terminated; returns buf. */
static char *fill(char *buf, char c, size_t n)
{
    memset(buf, c, n);
    buf[n] = '\0';
    return buf;
}

static void test_spiffe_id_ok(void **state)
{
    (void)state;
    char out[POLICY_MAX_ID];
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(policy_spiffe_id("cluster.local", "default", "sleep", out, sizeof(out), &e),
                     HSMCA_OK);
    assert_string_equal(out, ME);
    assert_int_equal(policy_spiffe_id("td_1-x.y", "a", "b.c-d9", out, sizeof(out), &e), HSMCA_OK);
    assert_string_equal(out, "spiffe://td_1-x.y/ns/a/sa/b.c-d9");
}

static void test_spiffe_id_name_rules(void **state)
{
    (void)state;
    char out[POLICY_MAX_ID], ns63[64], ns64[65], sa253[254], sa254[255];
    hsmca_err e;
    const char *ns_msg = "identity: namespace is not a Kubernetes name of at most 63 bytes";
    const char *sa_msg = "identity: service account is not a Kubernetes name of at most 253 bytes";
    const char *td_msg = "identity: trust domain is not [a-z0-9._-]+";
    const char *bad[] = {"", "-a", "a-", ".a", "a.", "A", "a/b", "a_b", "a b", "a%2f", "é"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_refused(policy_spiffe_id("cluster.local", bad[i], "sa", out, sizeof(out), &e), &e,
                       HSMCA_EAUTH, ns_msg);
        assert_string_equal(out, "");
        assert_refused(policy_spiffe_id("cluster.local", "ns", bad[i], out, sizeof(out), &e), &e,
                       HSMCA_EAUTH, sa_msg);
    }
    assert_refused(policy_spiffe_id("cluster.local", NULL, "sa", out, sizeof(out), &e), &e,
                   HSMCA_EAUTH, ns_msg);
    assert_refused(policy_spiffe_id("Cluster.local", "ns", "sa", out, sizeof(out), &e), &e,
                   HSMCA_EAUTH, td_msg);
    assert_refused(policy_spiffe_id("a/b", "ns", "sa", out, sizeof(out), &e), &e, HSMCA_EAUTH,
                   td_msg);
    assert_refused(policy_spiffe_id("", "ns", "sa", out, sizeof(out), &e), &e, HSMCA_EAUTH, td_msg);

    fill(ns63, 'a', 63);
    fill(ns64, 'a', 64);
    fill(sa253, 'b', 253);
    fill(sa254, 'b', 254);
    assert_int_equal(policy_spiffe_id("td", ns63, sa253, out, sizeof(out), &e), HSMCA_OK);
    assert_int_equal(strlen(out), strlen("spiffe://td/ns//sa/") + 63 + 253);
    assert_refused(policy_spiffe_id("td", ns64, "sa", out, sizeof(out), &e), &e, HSMCA_EAUTH,
                   ns_msg);
    assert_refused(policy_spiffe_id("td", "ns", sa254, out, sizeof(out), &e), &e, HSMCA_EAUTH,
                   sa_msg);
    /* Output too small: refused, never truncated. */
    assert_refused(policy_spiffe_id("cluster.local", "default", "sleep", out, 10, &e), &e,
                   HSMCA_EAUTH, "identity: SPIFFE ID longer than 9 bytes");
    assert_string_equal(out, "");
}

static int k8s(const char *s, size_t max, int dots)
{
    return policy_is_k8s_name(s, s ? strlen(s) : 0, max, dots);
}

static void test_k8s_name(void **state)
{
    (void)state;
    char l63[64], l64[65], d253[254], d254[255];
    fill(l63, 'a', 63);
    fill(l64, 'a', 64);
    fill(d253, 'b', 253)[100] = '.';
    fill(d254, 'b', 254)[100] = '.';

    /* A namespace: one DNS-1123 label. */
    const char *label_ok[] = {"a", "0", "a1", "a-b", "a--b", "1-2-3", l63};
    for (size_t i = 0; i < sizeof(label_ok) / sizeof(label_ok[0]); i++)
        if (!k8s(label_ok[i], POLICY_NS_MAX, 0))
            fail_msg("label refused: %s", label_ok[i]);
    const char *label_bad[] = {"", "-a", "a-", "-", "a.b", "A", "a_b", "a/b", "a:b", "a b", l64};
    for (size_t i = 0; i < sizeof(label_bad) / sizeof(label_bad[0]); i++)
        if (k8s(label_bad[i], POLICY_NS_MAX, 0))
            fail_msg("label accepted: %s", label_bad[i]);

    /* A service account: DNS-1123 labels joined by single dots. */
    const char *sub_ok[] = {"a", "a.b", "a-b.c-d", "b.c-d9", "0.0.0", d253};
    for (size_t i = 0; i < sizeof(sub_ok) / sizeof(sub_ok[0]); i++)
        if (!k8s(sub_ok[i], POLICY_SA_MAX, 1))
            fail_msg("subdomain refused: %s", sub_ok[i]);
    /* "a..b", "a.-b", "a-.b": every label must start and end alphanumeric; both
     * old copies (policy and tok_jwt) accepted these. */
    const char *sub_bad[] = {"", ".", "a..b", ".a", "a.", "a.-b", "a-.b", "-a.b", "a.b-",
                             "A.b", "a/b", "a:b", "a_b.c", d254};
    for (size_t i = 0; i < sizeof(sub_bad) / sizeof(sub_bad[0]); i++)
        if (k8s(sub_bad[i], POLICY_SA_MAX, 1))
            fail_msg("subdomain accepted: %s", sub_bad[i]);

    /* The length is what counts: an embedded NUL is refused, not a terminator. */
    assert_false(policy_is_k8s_name("ab\0c", 4, POLICY_NS_MAX, 0));
    assert_false(policy_is_k8s_name("ab\0c", 4, POLICY_SA_MAX, 1));
    assert_true(policy_is_k8s_name("abc-", 3, POLICY_NS_MAX, 0));
    assert_false(policy_is_k8s_name(NULL, 0, POLICY_NS_MAX, 0));
    assert_false(k8s("abcd", 3, 0)); /* max is the caller's */
}

static void test_spiffe_id_stricter_names(void **state)
{
    (void)state;
    char out[POLICY_MAX_ID];
    hsmca_err e;
    /* The old policy copy took dots in a namespace and empty labels in a service
     * account; the front end's copy refused the former. Both refuse all now. */
    assert_refused(policy_spiffe_id("cluster.local", "a.b", "sa", out, sizeof(out), &e), &e,
                   HSMCA_EAUTH, "identity: namespace is not a Kubernetes name of at most 63 bytes");
    const char *sa_bad[] = {"a..b", "a.-b", "a-.b"};
    for (size_t i = 0; i < sizeof(sa_bad) / sizeof(sa_bad[0]); i++)
        assert_refused(policy_spiffe_id("cluster.local", "ns", sa_bad[i], out, sizeof(out), &e),
                       &e, HSMCA_EAUTH,
                       "identity: service account is not a Kubernetes name of at most 253 bytes");
}

static void test_check_sans(void **state)
{
    (void)state;
    hsmca_err e;
    const char *ids[] = {"spiffe://cluster.local/ns/other/sa/x", ME};
    const char *mine[] = {ME};
    const char *theirs[] = {"spiffe://cluster.local/ns/x/sa/y"};
    const char *two[] = {ME, ME};

    hsmca_err_clear(&e);
    assert_int_equal(policy_check_sans(ids, 2, mine, 1, 0, &e), HSMCA_OK);
    assert_int_equal(policy_check_sans(ids + 1, 1, mine, 1, 0, &e), HSMCA_OK);
    assert_refused(
        policy_check_sans(ids + 1, 1, theirs, 1, 0, &e), &e, HSMCA_EPERM,
        "SAN policy: CSR asks for spiffe://cluster.local/ns/x/sa/y but the caller is " ME);
    assert_refused(policy_check_sans(ids + 1, 1, two, 2, 0, &e), &e, HSMCA_EPERM,
                   "SAN policy: CSR carries 2 URI SANs, Istio allows exactly one");
    assert_refused(policy_check_sans(ids + 1, 1, mine, 1, 1, &e), &e, HSMCA_EPERM,
                   "SAN policy: CSR carries DNS/IP/email SANs, not allowed for workloads");
    assert_refused(policy_check_sans(ids + 1, 1, NULL, 0, 0, &e), &e, HSMCA_EPERM,
                   "SAN policy: CSR has no URI SAN");
    assert_refused(policy_check_sans(NULL, 0, mine, 1, 0, &e), &e, HSMCA_EPERM,
                   "SAN policy: CSR asks for " ME " but the caller has no identity");
    assert_refused(policy_check_sans(ids, 2, theirs, 1, 0, &e), &e, HSMCA_EPERM,
                   "SAN policy: CSR asks for spiffe://cluster.local/ns/x/sa/y but the caller is "
                   "spiffe://cluster.local/ns/other/sa/x (and 1 other identities)");
    /* A prefix or a longer string is not the same identity. */
    const char *prefix[] = {"spiffe://cluster.local/ns/default/sa/slee"};
    const char *longer[] = {ME "p"};
    assert_int_equal(policy_check_sans(ids + 1, 1, prefix, 1, 0, &e), HSMCA_EPERM);
    assert_int_equal(policy_check_sans(ids + 1, 1, longer, 1, 0, &e), HSMCA_EPERM);
    /* Control characters and quotes from a CSR never reach the message (the old
     * copy of the helper let the quotes through). */
    const char *nl[] = {"spiffe://x\n{\"forged\":1}"};
    assert_refused(policy_check_sans(ids + 1, 1, nl, 1, 0, &e), &e, HSMCA_EPERM,
                   "SAN policy: CSR asks for spiffe://x?{?forged?:1} but the caller is " ME);
    /* A long SAN is cut visibly (the old copy cut it silently). */
    char lng[300] = "spiffe://cluster.local/ns/x/sa/";
    fill(lng + strlen(lng), 'y', sizeof(lng) - strlen(lng) - 1);
    const char *lp[] = {lng};
    assert_int_equal(policy_check_sans(ids + 1, 1, lp, 1, 0, &e), HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "yyy... but the caller is " ME));
}

static void test_ttl(void **state)
{
    (void)state;
    policy_rules r = {"cluster.local", 3600, 86400};
    uint32_t ttl = 7;
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(policy_ttl(&r, 0, &ttl, &e), HSMCA_OK);
    assert_int_equal(ttl, 3600);
    assert_int_equal(policy_ttl(&r, -5, &ttl, &e), HSMCA_OK);
    assert_int_equal(ttl, 3600);
    assert_int_equal(policy_ttl(&r, 600, &ttl, &e), HSMCA_OK);
    assert_int_equal(ttl, 600);
    assert_int_equal(policy_ttl(&r, 86400, &ttl, &e), HSMCA_OK);
    assert_int_equal(ttl, 86400);
    assert_refused(policy_ttl(&r, 999999, &ttl, &e), &e, HSMCA_EPERM,
                   "TTL policy: requested 999999s exceeds the maximum 86400s");
    assert_int_equal(ttl, 0);
    assert_refused(policy_ttl(&r, 86401, &ttl, &e), &e, HSMCA_EPERM,
                   "TTL policy: requested 86401s exceeds the maximum 86400s");
    assert_int_equal(policy_ttl(&r, INT64_MAX, &ttl, &e), HSMCA_EPERM);
    assert_refused(policy_ttl(&r, 599, &ttl, &e), &e, HSMCA_EPERM,
                   "TTL policy: requested 599s is below the minimum 600s (certificates are "
                   "backdated 2 minutes)");
    assert_refused(policy_ttl(&r, 1, &ttl, &e), &e, HSMCA_EPERM,
                   "TTL policy: requested 1s is below the minimum 600s (certificates are "
                   "backdated 2 minutes)");
    /* A default above the maximum still yields at most the maximum. */
    policy_rules big = {"cluster.local", 100000, 86400};
    assert_int_equal(policy_ttl(&big, 0, &ttl, &e), HSMCA_OK);
    assert_int_equal(ttl, 86400);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spiffe_id_ok), cmocka_unit_test(test_spiffe_id_name_rules),
        cmocka_unit_test(test_check_sans),   cmocka_unit_test(test_ttl),
        cmocka_unit_test(test_k8s_name),
        cmocka_unit_test(test_spiffe_id_stricter_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

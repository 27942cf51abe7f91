/* test_fe_k8spods.c - the pure parts of ztunnel impersonation
 * (frontend/fe_k8spods.h): the trusted node list, the requested SPIFFE ID, and
 * the Pod / PodList parsers on the Kubernetes API reference's shapes (Pod v1),
 * each refusal differing from an accepted answer in the one way it names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "fe_k8spods.h"

static const char POD[] =
    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"ztunnel-x1\","
    "\"namespace\":\"istio-system\",\"uid\":\"u-1\"},"
    "\"spec\":{\"nodeName\":\"node-a\",\"serviceAccountName\":\"ztunnel\"},"
    "\"status\":{\"phase\":\"Running\"}}";

static void test_trusted(void **state)
{
    (void)state;
    static const char *const t[] = {"istio-system/ztunnel", "kube-system/agent"};
    assert_true(fe_k8s_trusted_node(t, 2, "istio-system", "ztunnel"));
    assert_true(fe_k8s_trusted_node(t, 2, "kube-system", "agent"));
    assert_false(fe_k8s_trusted_node(t, 2, "istio-system", "ztunnel2"));
    assert_false(fe_k8s_trusted_node(t, 2, "istio", "ztunnel"));
    assert_false(fe_k8s_trusted_node(t, 2, "istio-system/ztunnel", ""));
    assert_false(fe_k8s_trusted_node(t, 0, "istio-system", "ztunnel"));
}

static hsmca_code imp(const char *s, char *ns, char *sa, hsmca_err *e)
{
    hsmca_err_clear(e);
    return fe_k8s_parse_impersonated("cluster.local", s, strlen(s), ns, sa, e);
}

static void test_impersonated(void **state)
{
    (void)state;
    char ns[POLICY_NS_MAX + 1], sa[POLICY_SA_MAX + 1];
    hsmca_err e;
    assert_int_equal(imp("spiffe://cluster.local/ns/prod/sa/web.v1", ns, sa, &e), HSMCA_OK);
    assert_string_equal(ns, "prod");
    assert_string_equal(sa, "web.v1");
    static const char *const bad[] = {
        "prod/web",
        "spiffe://other.local/ns/prod/sa/web",
        "spiffe://cluster.localx/ns/prod/sa/web",
        "spiffe://cluster.local/ns/prod/sa/web/extra",
        "spiffe://cluster.local/ns/prod/sa/",
        "spiffe://cluster.local/ns//sa/web",
        "spiffe://cluster.local/ns/Prod/sa/web",
        "spiffe://cluster.local/sa/web/ns/prod",
        "spiffe://cluster.local/ns/prod/sb/web",
        "spiffe://cluster.local",
        "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (imp(bad[i], ns, sa, &e) != HSMCA_EPERM || !strstr(e.msg, "not a SPIFFE ID"))
            fail_msg("accepted or wrong refusal for \"%s\": %s", bad[i], e.msg);
    }
    /* An embedded NUL is not cut off. */
    hsmca_err_clear(&e);
    assert_int_equal(fe_k8s_parse_impersonated(
                         "cluster.local", "spiffe://cluster.local/ns/a/sa/b\0x", 34, ns, sa, &e),
                     HSMCA_EPERM);
}

static hsmca_code pod(const char *doc, const char *uid, char *node, hsmca_err *e)
{
    hsmca_err_clear(e);
    return fe_k8s_parse_pod(doc, strlen(doc), uid, "ztunnel", node, e);
}

static void test_pod(void **state)
{
    (void)state;
    char node[FE_K8S_NODE_MAX + 1];
    hsmca_err e;
    assert_int_equal(pod(POD, "u-1", node, &e), HSMCA_OK);
    assert_string_equal(node, "node-a");
    assert_int_equal(pod(POD, "u-2", node, &e), HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "another uid"));
    hsmca_err_clear(&e);
    assert_int_equal(fe_k8s_parse_pod(POD, strlen(POD), "u-1", "other", node, &e), HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "another service account"));
    assert_int_equal(
        pod("{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"uid\":\"u-1\"},"
            "\"spec\":{\"serviceAccountName\":\"ztunnel\"},\"status\":{\"phase\":\"Pending\"}}",
            "u-1", node, &e),
        HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "on no node"));
    /* Not a v1 Pod: a Status (404), another kind, garbage. */
    assert_int_equal(pod("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                         "\"reason\":\"NotFound\",\"code\":404}",
                         "u-1", node, &e),
                     HSMCA_EUNAVAIL);
    assert_int_equal(pod("{\"kind\":\"Pod\",\"apiVersion\":\"v2\"}", "u-1", node, &e),
                     HSMCA_EUNAVAIL);
    assert_int_equal(pod("[", "u-1", node, &e), HSMCA_EUNAVAIL);
    assert_int_equal(
        pod("{\"kind\":\"Pod\",\"kind\":\"Pod\",\"apiVersion\":\"v1\"}", "u-1", node, &e),
        HSMCA_EUNAVAIL);
}

static int list(const char *items, hsmca_code want)
{
    char doc[4096];
    snprintf(doc, sizeof(doc),
             "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
             "\"42\"},\"items\":%s}",
             items);
    int found = -1;
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(fe_k8s_parse_podlist(doc, strlen(doc), "prod", "web", "node-a", &found, &e),
                     want);
    return found;
}

#define ITEM(ns, sa, node, phase)                                                                  \
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"" ns "\",\"uid\":\"x\"},\"spec\":{"             \
    "\"nodeName\":\"" node "\",\"serviceAccountName\":\"" sa "\"},\"status\":{\"phase\":\"" phase  \
    "\"}}"

static void test_podlist(void **state)
{
    (void)state;
    assert_int_equal(list("[" ITEM("prod", "web", "node-a", "Running") "]", HSMCA_OK), 1);
    assert_int_equal(list("[" ITEM("prod", "db", "node-a",
                                   "Running") "," ITEM("prod", "web", "node-a", "Running") "]",
                          HSMCA_OK),
                     1);
    assert_int_equal(list("[]", HSMCA_OK), 0);
    assert_int_equal(list("null", HSMCA_OK), 0); /* Go's nil slice */
    assert_int_equal(list("[" ITEM("dev", "web", "node-a", "Running") "]", HSMCA_OK), 0);
    assert_int_equal(list("[" ITEM("prod", "webx", "node-a", "Running") "]", HSMCA_OK), 0);
    assert_int_equal(list("[" ITEM("prod", "web", "node-b", "Running") "]", HSMCA_OK), 0);
    assert_int_equal(list("[" ITEM("prod", "web", "node-a", "Succeeded") "]", HSMCA_OK), 0);
    assert_int_equal(list("[1,\"x\",{}]", HSMCA_OK), 0);
    assert_int_equal(list("{}", HSMCA_EUNAVAIL), 0);
    int found;
    hsmca_err e;
    assert_int_equal(fe_k8s_parse_podlist(POD, strlen(POD), "prod", "web", "node-a", &found, &e),
                     HSMCA_EUNAVAIL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trusted),
        cmocka_unit_test(test_impersonated),
        cmocka_unit_test(test_pod),
        cmocka_unit_test(test_podlist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

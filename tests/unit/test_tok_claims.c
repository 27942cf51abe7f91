/* test_tok_claims.c - the claims of a verified token (token/tok_claims.h):
 * iss, aud, exp/nbf/iat with skew, and the Kubernetes service account.
 *
 * Every refused payload differs from the good one in exactly the member the test
 * names; tokens and signatures are test_tok_jwt's business. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_claims.h"

#define NOW 1700000000LL
#define SKEW 60
#define ISS "https://issuer.example"

#define CL_K8S_ONLY                                                                                \
    "\"kubernetes.io\":{\"namespace\":\"foo\",\"serviceaccount\":{\"name\":\"bar\",\"uid\":\"u\"}" \
    "}"
#define CL_SUB "\"sub\":\"system:serviceaccount:foo:bar\""
#define CL_K8S CL_SUB "," CL_K8S_ONLY
/* The legacy (secret-based) token's flat claims for the same account. */
#define CL_LEGACY                                                                                  \
    "\"kubernetes.io/serviceaccount/namespace\":\"foo\","                                          \
    "\"kubernetes.io/serviceaccount/secret.name\":\"bar-token-x1\","                               \
    "\"kubernetes.io/serviceaccount/service-account.name\":\"bar\","                               \
    "\"kubernetes.io/serviceaccount/"                                                              \
    "service-account.uid\":\"0f1e2d3c-aaaa-4bbb-8ccc-123456789abc\""
/* exp = NOW + 600, iat = nbf = NOW - 10 */
#define CL_TIMES "\"exp\":1700000600,\"iat\":1699999990,\"nbf\":1699999990"

static const char *const g_auds[] = {"istio-ca"};
static const tok_jwt_rules g_rules = {ISS, g_auds, 1, SKEW};

/* Claims built from the good set with one member replaced or added. */
static char *claims_with(const char *iss, const char *aud, const char *times, const char *ident)
{
    char *c = malloc(4096);
    snprintf(c, 4096, "{\"iss\":%s,\"aud\":%s,%s%s%s}", iss, aud, times, *ident ? "," : "", ident);
    return c;
}

static void refuse_claims_rules(const tok_jwt_rules *r, const char *claims, const char *want)
{
    tok_jwt_identity id;
    memset(&id, 'x', sizeof(id));
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = tok_claims_check(claims, strlen(claims), r, NOW, &id, &e);
    if (rc != HSMCA_EAUTH)
        fail_msg("want EAUTH \"%s\", got %s \"%s\"", want, hsmca_code_name(rc), e.msg);
    if (!strstr(e.msg, want))
        fail_msg("want \"%s\", got \"%s\"", want, e.msg);
    assert_int_equal(id.ns[0], 'x'); /* untouched on refusal */
}

static void refuse_claims(const char *claims, const char *want)
{
    refuse_claims_rules(&g_rules, claims, want);
}

static void accept_claims(const char *claims, const char *ns, const char *sa)
{
    tok_jwt_identity id;
    hsmca_err e;
    if (tok_claims_check(claims, strlen(claims), &g_rules, NOW, &id, &e) != HSMCA_OK)
        fail_msg("refused good claims: %s", e.msg);
    assert_string_equal(id.ns, ns);
    assert_string_equal(id.sa, sa);
}

/* ---- accepted ------------------------------------------------------------------ */

static void test_identity_from_sub(void **state)
{
    /* sub alone names no Kubernetes claims: refused (both token shapes carry them) */
    char *c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                          "\"sub\":\"system:serviceaccount:default:sleep\"");
    refuse_claims(c, "JWT carries no Kubernetes service account claims");
    free(c);
    /* both present and agreeing: fine */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES, CL_K8S);
    accept_claims(c, "foo", "bar");
    free(c);
    /* kubernetes.io without sub: refused */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES, CL_K8S_ONLY);
    refuse_claims(c, "JWT sub is not system:serviceaccount:NS:SA");
    free(c);
}

/* Projected token (TokenRequest API) bound to a pod: its name and uid are kept. */
static void test_projected_with_pod(void **state)
{
    char *c = claims_with(
        "\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
        CL_SUB ",\"kubernetes.io\":{\"namespace\":\"foo\",\"serviceaccount\":{\"name\":\"bar\","
               "\"uid\":\"7f3b1c2d-0000-4000-8000-00000000b002\"},\"pod\":{\"name\":"
               "\"bar-6d5f7c9b8-x2x9q\",\"uid\":\"5e1a2b3c-0000-4000-8000-00000000a001\"}}");
    tok_jwt_identity id;
    hsmca_err e;
    if (tok_claims_check(c, strlen(c), &g_rules, NOW, &id, &e) != HSMCA_OK)
        fail_msg("refused: %s", e.msg);
    assert_string_equal(id.ns, "foo");
    assert_string_equal(id.sa, "bar");
    assert_string_equal(id.sa_uid, "7f3b1c2d-0000-4000-8000-00000000b002");
    assert_string_equal(id.pod_name, "bar-6d5f7c9b8-x2x9q");
    assert_string_equal(id.pod_uid, "5e1a2b3c-0000-4000-8000-00000000a001");
    free(c);
    /* no pod: the fields stay empty */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES, CL_K8S);
    assert_int_equal(tok_claims_check(c, strlen(c), &g_rules, NOW, &id, &e), HSMCA_OK);
    assert_string_equal(id.pod_name, "");
    assert_string_equal(id.pod_uid, "");
    free(c);
}

static void test_projected_pod_refused(void **state)
{
    static const char *const bad[][2] = {
        {"\"pod\":{\"name\":\"p\"}", "JWT kubernetes.io pod needs a valid name and uid"},
        {"\"pod\":{\"uid\":\"u\"}", "JWT kubernetes.io pod needs a valid name and uid"},
        {"\"pod\":\"p\"", "JWT kubernetes.io pod needs a valid name and uid"},
        {"\"pod\":{\"name\":\"P/x\",\"uid\":\"u\"}", "JWT kubernetes.io pod needs a valid name"},
        {"\"pod\":{\"name\":\"p\",\"uid\":\"u u\"}", "JWT pod.uid is not a Kubernetes UID"},
        {"\"pod\":{\"name\":\"p\",\"uid\":7}", "JWT pod.uid is not a Kubernetes UID"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char id[256];
        snprintf(id, sizeof(id),
                 CL_SUB ",\"kubernetes.io\":{\"namespace\":\"foo\",\"serviceaccount\":{\"name\":"
                        "\"bar\"},%s}",
                 bad[i][0]);
        char *c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES, id);
        refuse_claims(c, bad[i][1]);
        free(c);
    }
    char *c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                          CL_SUB ",\"kubernetes.io\":{\"namespace\":\"foo\",\"serviceaccount\":"
                                 "{\"name\":\"bar\",\"uid\":\"\"}}");
    refuse_claims(c, "JWT serviceaccount.uid is not a Kubernetes UID");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES, CL_SUB ",\"kubernetes.io\":\"foo\"");
    refuse_claims(c, "JWT kubernetes.io claim lacks namespace or serviceaccount.name");
    free(c);
}

/* Legacy (secret-based) token: flat kubernetes.io/serviceaccount/... claims. */
static void test_legacy_shape(void **state)
{
    char *c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES, CL_SUB "," CL_LEGACY);
    tok_jwt_identity id;
    hsmca_err e;
    if (tok_claims_check(c, strlen(c), &g_rules, NOW, &id, &e) != HSMCA_OK)
        fail_msg("refused: %s", e.msg);
    assert_string_equal(id.ns, "foo");
    assert_string_equal(id.sa, "bar");
    assert_string_equal(id.sa_uid, "0f1e2d3c-aaaa-4bbb-8ccc-123456789abc");
    assert_string_equal(id.pod_name, "");
    free(c);
    /* both shapes, agreeing (the projected one without a uid: the legacy one's is kept) */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    CL_SUB ",\"kubernetes.io\":{\"namespace\":\"foo\",\"serviceaccount\":"
                           "{\"name\":\"bar\"}}," CL_LEGACY);
    if (tok_claims_check(c, strlen(c), &g_rules, NOW, &id, &e) != HSMCA_OK)
        fail_msg("refused: %s", e.msg);
    assert_string_equal(id.sa_uid, "0f1e2d3c-aaaa-4bbb-8ccc-123456789abc");
    free(c);
    /* ... but two different service account UIDs are refused */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES, CL_K8S "," CL_LEGACY);
    refuse_claims(c, "JWT kubernetes.io claims name two service account UIDs");
    free(c);
    /* sub names another account */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    "\"sub\":\"system:serviceaccount:foo:other\"," CL_LEGACY);
    refuse_claims(c, "JWT sub and kubernetes.io/serviceaccount name different accounts");
    free(c);
    /* the two shapes name different accounts */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    CL_SUB "," CL_K8S_ONLY ",\"kubernetes.io/serviceaccount/namespace\":\"foo\","
                           "\"kubernetes.io/serviceaccount/service-account.name\":\"baz\"");
    refuse_claims(c, "JWT sub and kubernetes.io/serviceaccount name different accounts");
    free(c);
    /* half a legacy identity */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    CL_SUB ",\"kubernetes.io/serviceaccount/namespace\":\"foo\"");
    refuse_claims(c, "JWT legacy claims need both");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    CL_SUB ",\"kubernetes.io/serviceaccount/namespace\":\"foo\","
                           "\"kubernetes.io/serviceaccount/service-account.name\":7");
    refuse_claims(c, "JWT legacy claims need both");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    CL_SUB ",\"kubernetes.io/serviceaccount/namespace\":\"foo\","
                           "\"kubernetes.io/serviceaccount/service-account.name\":\"bar\","
                           "\"kubernetes.io/serviceaccount/service-account.uid\":\"x/y\"");
    refuse_claims(c, "JWT service-account.uid is not a Kubernetes UID");
    free(c);
    /* legacy name checked like the projected one */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    "\"sub\":\"system:serviceaccount:a/b:bar\","
                    "\"kubernetes.io/serviceaccount/namespace\":\"a/b\","
                    "\"kubernetes.io/serviceaccount/service-account.name\":\"bar\"");
    refuse_claims(c, "JWT namespace is not a valid Kubernetes name");
    free(c);
}

static void test_aud_array_ok(void **state)
{
    char *c = claims_with("\"" ISS "\"", "[\"other\",\"istio-ca\"]", CL_TIMES, CL_K8S);
    accept_claims(c, "foo", "bar");
    free(c);
    c = claims_with("\"" ISS "\"", "[\"istio-ca\",\"other\"]", CL_TIMES, CL_K8S);
    accept_claims(c, "foo", "bar");
    free(c);
}

/* ---- refused ------------------------------------------------------------------- */

static void test_expired(void **state)
{
    /* exp + skew == now is still valid; one second later it is not. */
    char *c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1699999940", CL_K8S);
    accept_claims(c, "foo", "bar");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1699999939", CL_K8S);
    refuse_claims(c, "JWT expired");
    free(c);
    /* fractional exp rounds down */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1699999939.9", CL_K8S);
    refuse_claims(c, "JWT expired");
    free(c);
}

static void test_not_yet_valid(void **state)
{
    char *c =
        claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1700000600,\"nbf\":1700000060", CL_K8S);
    accept_claims(c, "foo", "bar"); /* nbf == now + skew */
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1700000600,\"nbf\":1700000061", CL_K8S);
    refuse_claims(c, "JWT not yet valid (nbf in the future)");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1700000600,\"iat\":1700000120", CL_K8S);
    refuse_claims(c, "JWT not yet valid (iat in the future)");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1700000600,\"nbf\":\"0\"", CL_K8S);
    refuse_claims(c, "JWT nbf must be a number");
    free(c);
}

static void test_missing_exp(void **state)
{
    char *c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"iat\":1699999990", CL_K8S);
    refuse_claims(c, "JWT exp is required");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":\"1700000600\"", CL_K8S);
    refuse_claims(c, "JWT exp must be a number");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1e300", CL_K8S);
    refuse_claims(c, "JWT exp must be a number");
    free(c);
}

static void test_wrong_issuer(void **state)
{
    char *c = claims_with("\"https://evil.example\"", "\"istio-ca\"", CL_TIMES, CL_K8S);
    refuse_claims(c, "JWT iss is not the configured issuer " ISS);
    free(c);
    c = claims_with("\"" ISS "/\"", "\"istio-ca\"", CL_TIMES, CL_K8S);
    refuse_claims(c, "JWT iss is not the configured issuer");
    free(c);
    c = claims_with("null", "\"istio-ca\"", CL_TIMES, CL_K8S);
    refuse_claims(c, "JWT iss is not the configured issuer");
    free(c);
}

static void test_wrong_audience(void **state)
{
    char *c = claims_with("\"" ISS "\"", "\"other\"", CL_TIMES, CL_K8S);
    refuse_claims(c, "JWT aud does not include istio-ca");
    static const char *const two[] = {"istio-ca", "mesh-ca"};
    tok_jwt_rules r = {ISS, two, 2, SKEW};
    refuse_claims_rules(&r, c, "JWT aud does not include istio-ca, mesh-ca");
    free(c);
    c = claims_with("\"" ISS "\"", "[]", CL_TIMES, CL_K8S);
    refuse_claims(c, "JWT aud does not include istio-ca");
    free(c);
    c = claims_with("\"" ISS "\"", "[\"istio-ca\",7]", CL_TIMES, CL_K8S);
    refuse_claims(c, "JWT aud array must hold strings only");
    free(c);
    c = claims_with("\"" ISS "\"", "{\"istio-ca\":1}", CL_TIMES, CL_K8S);
    refuse_claims(c, "JWT aud must be a string or an array of strings");
    free(c);
}

static void test_no_service_account(void **state)
{
    char *c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES, "\"sub\":\"user:alice\"");
    refuse_claims(c, "JWT carries no Kubernetes service account");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES, "");
    refuse_claims(c, "JWT carries no Kubernetes service account");
    free(c);
}

static void test_bad_service_account_names(void **state)
{
    /* a namespace that would add path segments to the SPIFFE ID */
    char *c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                          "\"sub\":\"system:serviceaccount:a/sa/b:bar\"," CL_K8S_ONLY);
    refuse_claims(c, "JWT namespace is not a valid Kubernetes name");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    "\"sub\":\"system:serviceaccount:foo:bar:baz\"," CL_K8S_ONLY);
    refuse_claims(c, "JWT service account is not a valid Kubernetes name");
    free(c);
    c = claims_with(
        "\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
        "\"kubernetes.io\":{\"namespace\":\"Foo\",\"serviceaccount\":{\"name\":\"b\"}}");
    refuse_claims(c, "JWT namespace is not a valid Kubernetes name");
    free(c);
    /* a namespace is one label; a service account's labels are never empty and
     * never start or end with '-' (the front end's old copy took "a..b") */
    static const char *const bad_names[][3] = {
        {"a.b", "bar", "JWT namespace"},        {"foo", "a..b", "JWT service account"},
        {"foo", "a.-b", "JWT service account"}, {"foo", "a-.b", "JWT service account"},
        {"foo", ".bar", "JWT service account"},
    };
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        char id[128], want[96];
        snprintf(id, sizeof(id),
                 "\"kubernetes.io\":{\"namespace\":\"%s\",\"serviceaccount\":{\"name\":\"%s\"}}",
                 bad_names[i][0], bad_names[i][1]);
        snprintf(want, sizeof(want), "%s is not a valid Kubernetes name", bad_names[i][2]);
        c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES, id);
        refuse_claims(c, want);
        free(c);
    }
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    "\"kubernetes.io\":{\"namespace\":\"foo\"}");
    refuse_claims(c, "JWT kubernetes.io claim lacks namespace or serviceaccount.name");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    "\"sub\":\"system:serviceaccount:foo:other\"," CL_K8S_ONLY);
    refuse_claims(c, "JWT sub and kubernetes.io name different accounts");
    free(c);
}

static void test_payload_not_json(void **state)
{
    refuse_claims("[1,2]", "JWT payload is not a JSON object");
    refuse_claims("{\"iss\":", "JWT payload is not a JSON object");
    /* two issuers: which one would count? neither */
    refuse_claims("{\"iss\":\"https://evil.example\",\"iss\":\"" ISS
                  "\",\"aud\":\"istio-ca\"," CL_TIMES "," CL_K8S "}",
                  "JWT payload is not a JSON object without duplicate keys");
    /* the length is what counts: nothing after it is read */
    const char good[] = "{\"iss\":\"" ISS "\",\"aud\":\"istio-ca\"," CL_TIMES "," CL_K8S "}";
    tok_jwt_identity id;
    hsmca_err e;
    assert_int_equal(tok_claims_check(good, sizeof(good) - 2, &g_rules, NOW, &id, &e),
                     HSMCA_EAUTH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_from_sub),
        cmocka_unit_test(test_projected_with_pod),
        cmocka_unit_test(test_projected_pod_refused),
        cmocka_unit_test(test_legacy_shape),
        cmocka_unit_test(test_aud_array_ok),
        cmocka_unit_test(test_expired),
        cmocka_unit_test(test_not_yet_valid),
        cmocka_unit_test(test_missing_exp),
        cmocka_unit_test(test_wrong_issuer),
        cmocka_unit_test(test_wrong_audience),
        cmocka_unit_test(test_no_service_account),
        cmocka_unit_test(test_bad_service_account_names),
        cmocka_unit_test(test_payload_not_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

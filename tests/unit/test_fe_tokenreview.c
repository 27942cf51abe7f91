/* test_fe_tokenreview.c - the TokenReview authenticator's parts that need no API
 * server (frontend/fe_tokenreview.h, kubeconfig.h): the response parser on the
 * API reference's shapes (one accepted review, each refusal differing from it in
 * exactly the way the test names), the request body, the token's exp, the
 * kubeconfig and in-cluster set-up. The network path is in
 * tests/integration/test_tokenreview.py against tests/integration/k8s_stub.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kubeconfig.h"
#include "fe_tokenreview.h"
#include "testutil.h"
#include "util.h"

static const char *const AUDS[] = {"istio-ca"};

/* A review as the API server answers it (API reference, TokenReview v1), with
 * @USER@, @GROUPS@, @AUDS@ and @EXTRA@ replaced. */
static const char TEMPLATE[] =
    "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\","
    "\"metadata\":{\"creationTimestamp\":null},"
    "\"spec\":{\"token\":\"REDACTED\",\"audiences\":[\"istio-ca\"]},"
    "\"status\":{\"authenticated\":true,\"user\":{\"username\":\"@USER@\","
    "\"uid\":\"0b8c2a2c\",\"groups\":@GROUPS@,\"extra\":@EXTRA@},\"audiences\":@AUDS@}}";
static const char GOOD_GROUPS[] =
    "[\"system:serviceaccounts\",\"system:serviceaccounts:prod\",\"system:authenticated\"]";
static const char GOOD_EXTRA[] = "{\"authentication.kubernetes.io/pod-name\":[\"web-7d9f\"],"
                                 "\"authentication.kubernetes.io/pod-uid\":[\"1f2e-33\"],"
                                 "\"authentication.kubernetes.io/credential-id\":[\"JTI=1\"]}";

static char *subst(const char *in, const char *key, const char *val)
{
    const char *at = strstr(in, key);
    assert_non_null(at);
    size_t n = strlen(in) - strlen(key) + strlen(val);
    char *out = malloc(n + 1);
    assert_non_null(out);
    snprintf(out, n + 1, "%.*s%s%s", (int)(at - in), in, val, at + strlen(key));
    return out;
}

static char *review(const char *user, const char *groups, const char *auds, const char *extra)
{
    char *a = subst(TEMPLATE, "@USER@", user);
    char *b = subst(a, "@GROUPS@", groups);
    char *c = subst(b, "@AUDS@", auds);
    char *d = subst(c, "@EXTRA@", extra);
    free(a);
    free(b);
    free(c);
    return d;
}

static hsmca_code parse(const char *doc, fe_tr_identity *id, hsmca_err *e)
{
    hsmca_err_clear(e);
    return fe_tokenreview_parse(doc, strlen(doc), AUDS, 1, id, e);
}

static void expect_refused(char *doc, hsmca_code code, const char *want)
{
    fe_tr_identity id;
    hsmca_err e;
    hsmca_code rc = parse(doc, &id, &e);
    if (rc != code || !strstr(e.msg, want))
        fail_msg("want %s \"%s\", got %s \"%s\" for %s", hsmca_code_name(code), want,
                 hsmca_code_name(rc), e.msg, doc);
    assert_string_equal(id.ns, ""); /* nothing is half-filled */
    free(doc);
}

static void test_good_review(void **state)
{
    (void)state;
    char *doc = review("system:serviceaccount:prod:web", GOOD_GROUPS, "[\"istio-ca\"]", GOOD_EXTRA);
    fe_tr_identity id;
    hsmca_err e;
    assert_int_equal(parse(doc, &id, &e), HSMCA_OK);
    assert_string_equal(id.ns, "prod");
    assert_string_equal(id.sa, "web");
    assert_string_equal(id.pod_name, "web-7d9f");
    assert_string_equal(id.pod_uid, "1f2e-33");
    free(doc);
    /* Legacy (secret) tokens have no pod extras; a dotted service account name. */
    doc = review("system:serviceaccount:kube-system:a.b-c", GOOD_GROUPS, "[\"x\",\"istio-ca\"]",
                 "{}");
    assert_int_equal(parse(doc, &id, &e), HSMCA_OK);
    assert_string_equal(id.sa, "a.b-c");
    assert_string_equal(id.pod_name, "");
    free(doc);
    /* No audiences asked for: status.audiences is not looked at. */
    doc = review("system:serviceaccount:prod:web", GOOD_GROUPS, "[]", "{}");
    hsmca_err_clear(&e);
    assert_int_equal(fe_tokenreview_parse(doc, strlen(doc), NULL, 0, &id, &e), HSMCA_OK);
    free(doc);
}

static void test_not_authenticated(void **state)
{
    (void)state;
    /* authenticated is omitempty: absent is false; status.error is quoted, printable. */
    expect_refused(strdup("{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\","
                          "\"metadata\":{},\"spec\":{},\"status\":{\"user\":{},"
                          "\"error\":\"[invalid bearer token, \\\"x\\\"\\n]\"}}"),
                   HSMCA_EAUTH, "tokenreview: not authenticated: [invalid bearer token, ?x??]");
    expect_refused(strdup("{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\","
                          "\"status\":{\"authenticated\":false}}"),
                   HSMCA_EAUTH, "tokenreview: not authenticated");
    expect_refused(strdup("{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\","
                          "\"status\":{\"authenticated\":\"true\"}}"),
                   HSMCA_EUNAVAIL, "not a boolean");
}

static void test_wrong_user(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "system:node:worker-1",                 /* a node */
        "alice",                                /* a person */
        "system:serviceaccount:prod",           /* no name */
        "system:serviceaccount::web",           /* empty namespace */
        "system:serviceaccount:prod:",          /* empty name */
        "system:serviceaccount:Prod:web",       /* not a DNS label */
        "system:serviceaccount:prod:web:extra", /* a colon in the name */
        "system:serviceaccount:a.b:web",        /* a dot in a namespace */
        "system:serviceaccounts:prod:web",      /* the group's prefix */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_refused(review(bad[i], GOOD_GROUPS, "[\"istio-ca\"]", "{}"), HSMCA_EAUTH,
                       "username is not system:serviceaccount:<namespace>:<name>");
    char longns[100] = "system:serviceaccount:";
    memset(longns + strlen(longns), 'a', 64);
    strcat(longns, ":web");
    expect_refused(review(longns, GOOD_GROUPS, "[\"istio-ca\"]", "{}"), HSMCA_EAUTH, "username");
    expect_refused(strdup("{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\","
                          "\"status\":{\"authenticated\":true}}"),
                   HSMCA_EAUTH, "without a username");
}

static void test_wrong_group_or_audience(void **state)
{
    (void)state;
    const char *user = "system:serviceaccount:prod:web";
    expect_refused(review(user, "[\"system:authenticated\",\"system:serviceaccounts:prod\"]",
                          "[\"istio-ca\"]", "{}"),
                   HSMCA_EAUTH, "not in group system:serviceaccounts");
    expect_refused(review(user, "\"system:serviceaccounts\"", "[\"istio-ca\"]", "{}"), HSMCA_EAUTH,
                   "not in group");
    expect_refused(review(user, GOOD_GROUPS, "[]", "{}"), HSMCA_EAUTH, "status.audiences");
    expect_refused(review(user, GOOD_GROUPS, "[\"api\"]", "{}"), HSMCA_EAUTH, "status.audiences");
    expect_refused(review(user, GOOD_GROUPS, "\"istio-ca\"", "{}"), HSMCA_EAUTH,
                   "status.audiences");
}

static void test_extras_kept_only_when_clean(void **state)
{
    (void)state;
    const char *user = "system:serviceaccount:prod:web";
    static const char *const odd[] = {
        "{\"authentication.kubernetes.io/pod-name\":\"web\"}",       /* not a list */
        "{\"authentication.kubernetes.io/pod-name\":[\"a\",\"b\"]}", /* two */
        "{\"authentication.kubernetes.io/pod-name\":[\"a b\"]}",     /* a space */
        "{\"authentication.kubernetes.io/pod-name\":[7]}",           /* not a string */
        "[]",
    };
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        char *doc = review(user, GOOD_GROUPS, "[\"istio-ca\"]", odd[i]);
        fe_tr_identity id;
        hsmca_err e;
        assert_int_equal(parse(doc, &id, &e), HSMCA_OK);
        assert_string_equal(id.pod_name, "");
        free(doc);
    }
}

static void test_not_a_review(void **state)
{
    (void)state;
    static const char *const docs[] = {
        "",
        "null",
        "[]",
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"code\":403}",
        "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1beta1\",\"status\":{}}",
        "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\"}",
        "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\",\"status\":[]}",
        ("{\"kind\":\"TokenReview\",\"kind\":\"TokenReview\","
         "\"apiVersion\":\"authentication.k8s.io/v1\",\"status\":{}}"),
        "{\"kind\":\"TokenReview\",",
    };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++)
        expect_refused(strdup(docs[i]), HSMCA_EUNAVAIL, "tokenreview: ");
}

static void test_request_body(void **state)
{
    (void)state;
    static const char *const auds[] = {"istio-ca", "api"};
    char *body = fe_tokenreview_request_body("abc.def\"", 8, auds, 2);
    assert_non_null(body);
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "apiVersion")),
                        "authentication.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "TokenReview");
    json_t *spec = json_object_get(j, "spec");
    assert_string_equal(json_string_value(json_object_get(spec, "token")), "abc.def\"");
    assert_int_equal(json_array_size(json_object_get(spec, "audiences")), 2);
    json_decref(j);
    free(body);
}

static char *b64url(const char *s)
{
    return util_b64url_encode((const uint8_t *)s, strlen(s));
}

static void test_token_exp(void **state)
{
    (void)state;
    char *h = b64url("{\"alg\":\"RS256\"}"), *p = b64url("{\"exp\":1700000123}");
    char *np = b64url("{\"sub\":\"x\"}"), *sp = b64url("{\"exp\":\"1700000123\"}");
    char tok[512];
    snprintf(tok, sizeof(tok), "%s.%s.sig", h, p);
    assert_int_equal(fe_tokenreview_token_exp(tok, strlen(tok)), 1700000123);
    snprintf(tok, sizeof(tok), "%s.%s.sig", h, np);
    assert_int_equal(fe_tokenreview_token_exp(tok, strlen(tok)), 0);
    snprintf(tok, sizeof(tok), "%s.%s.sig", h, sp);
    assert_int_equal(fe_tokenreview_token_exp(tok, strlen(tok)), 0);
    assert_int_equal(fe_tokenreview_token_exp("opaque-token", 12), 0);
    assert_int_equal(fe_tokenreview_token_exp("a.!!!.c", 7), 0);
    free(h);
    free(p);
    free(np);
    free(sp);
}

static char *write_file(const char *dir, const char *name, const char *text)
{
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    assert_non_null(path);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static const char KC_HEAD[] = "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                              "contexts:\n- name: other\n  context: {cluster: x, user: x}\n"
                              "- name: c\n  context: {cluster: k, user: u}\n";

static void test_kubeconfig(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("kubeconfig");
    free(write_file(dir, "ca.pem", "-----BEGIN CERTIFICATE-----\n"));
    free(write_file(dir, "tok", "file-token\n"));
    char text[2048];
    snprintf(text, sizeof(text),
             "%sclusters:\n- name: k\n  cluster:\n    server: https://api.example:6443/\n"
             "    certificate-authority: ca.pem\n"
             "users:\n- name: u\n  user:\n    tokenFile: tok\n",
             KC_HEAD);
    char *path = write_file(dir, "kc", text);
    k8s_target t;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (kubeconfig_load(path, &t, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    assert_string_equal(t.server, "https://api.example:6443");
    assert_string_equal(t.ca_pem, "-----BEGIN CERTIFICATE-----\n");
    assert_string_equal(t.token, "file-token");
    assert_null(t.cert_pem);
    k8s_target_clear(&t);
    free(path);

    static const struct {
        const char *cluster, *user, *want;
    } bad[] = {
        {"    server: http://api:80\n    certificate-authority: ca.pem\n", "    token: t\n",
         "https://"},
        {"    server: https://api\n", "    token: t\n", "certificate-authority"},
        {"    server: https://api\n    certificate-authority: ca.pem\n"
         "    insecure-skip-tls-verify: true\n",
         "    token: t\n", "insecure-skip-tls-verify"},
        {"    server: https://api\n    certificate-authority-data: '!!'\n", "    token: t\n",
         "not base64"},
        {"    server: https://api\n    certificate-authority: ca.pem\n",
         "    exec: {command: aws}\n", "exec"},
        {"    server: https://api\n    certificate-authority: ca.pem\n",
         "    client-certificate: c.pem\n", "go together"},
        {"    server: https://api\n    certificate-authority: missing.pem\n", "    token: t\n",
         "certificate-authority"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(text, sizeof(text),
                 "%sclusters:\n- name: k\n  cluster:\n%susers:\n- name: u\n  user:\n%s", KC_HEAD,
                 bad[i].cluster, bad[i].user);
        path = write_file(dir, "kc", text);
        hsmca_err_clear(&e);
        hsmca_code rc = kubeconfig_load(path, &t, &e);
        if (rc == HSMCA_OK || !strstr(e.msg, bad[i].want))
            fail_msg("case %zu: want \"%s\", got %s \"%s\"", i, bad[i].want, hsmca_code_name(rc),
                     e.msg);
        assert_null(t.token);
        free(path);
    }
    path = write_file(dir, "kc", "apiVersion: v1\ncurrent-context: nope\ncontexts: []\n");
    assert_int_equal(kubeconfig_load(path, &t, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "no context"));
    free(path);
    tu_system("rm -rf '%s'", dir);
    free(dir);
}

static void test_incluster(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("sa");
    assert_int_equal(tu_system("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
                               "-nodes -subj /CN=k8s-ca -days 1 -keyout '%s/ca.key' "
                               "-out '%s/ca.crt' 2>/dev/null",
                               dir, dir),
                     0);
    free(write_file(dir, "token", "sa-token\n"));
    k8s_target t;
    hsmca_err e;
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(k8s_incluster(dir, &t, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "kubeconfig"));
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    if (k8s_incluster(dir, &t, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    assert_string_equal(t.server, "https://[fd00::1]:443");
    assert_string_equal(t.token, "sa-token");
    assert_memory_equal(t.ca_pem, "-----BEGIN CERTIFICATE-----", 27);
    k8s_target_clear(&t);
    /* fe_tokenreview_new with an address literal: no resolution, no network. */
    fe_tokenreview_options o = {.sa_dir = dir,
                                .audiences = AUDS,
                                .n_audiences = 1,
                                .timeout_ms = 1000,
                                .cache_ttl = 60,
                                .cache_entries = 8};
    fe_tokenreview *tr = NULL;
    if (fe_tokenreview_new(&o, &tr, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    fe_tr_identity id;
    assert_int_equal(fe_tokenreview_cached(tr, "t", 1, 0, &id), 0);
    /* Tokens that are never sent: over the size, or not printable ASCII. */
    char big[FE_TR_MAX_TOKEN + 1];
    memset(big, 'a', sizeof(big));
    assert_int_equal(fe_tokenreview_identity(tr, big, sizeof(big), 0, &id, &e), HSMCA_EAUTH);
    assert_int_equal(fe_tokenreview_identity(tr, "a b", 3, 0, &id, &e), HSMCA_EAUTH);
    assert_int_equal(fe_tokenreview_calls(tr), 0);
    fe_tokenreview_free(tr);
    unsetenv("KUBERNETES_SERVICE_HOST");
    tu_system("rm -rf '%s'", dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_review),
        cmocka_unit_test(test_not_authenticated),
        cmocka_unit_test(test_wrong_user),
        cmocka_unit_test(test_wrong_group_or_audience),
        cmocka_unit_test(test_extras_kept_only_when_clean),
        cmocka_unit_test(test_not_a_review),
        cmocka_unit_test(test_request_body),
        cmocka_unit_test(test_token_exp),
        cmocka_unit_test(test_kubeconfig),
        cmocka_unit_test(test_incluster),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

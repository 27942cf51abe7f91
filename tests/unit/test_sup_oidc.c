/* test_sup_oidc.c - OpenID Connect Discovery for the key fetcher (keyfetch/sup_oidc.h): the
 * discovery URL of an issuer (Discovery 1.0 §4) and the checks on the document
 * (§4.3: issuer exactly the configured one; jwks_uri an https URL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "sup_oidc.h"

#define ISS "https://kubernetes.default.svc.cluster.local"

static void test_discovery_url(void **state)
{
    char u[256];
    hsmca_err e;
    assert_int_equal(sup_oidc_discovery_url(ISS, u, sizeof(u), &e), HSMCA_OK);
    assert_string_equal(u, ISS "/.well-known/openid-configuration");
    assert_int_equal(sup_oidc_discovery_url("https://i.example/tenant/", u, sizeof(u), &e),
                     HSMCA_OK);
    assert_string_equal(u, "https://i.example/tenant/.well-known/openid-configuration");
    static const char *const bad[] = {"http://i.example",
                                      "https://",
                                      "https://u@i.example",
                                      "https://i.example/?q",
                                      "https://i.example/#f",
                                      "https://i .example",
                                      "i.example"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sup_oidc_discovery_url(bad[i], u, sizeof(u), &e), HSMCA_EINVAL);
    assert_int_equal(sup_oidc_discovery_url(ISS, u, 20, &e), HSMCA_EINVAL);
}

static hsmca_code parse(const char *doc, char *uri, hsmca_err *e)
{
    return sup_oidc_parse_discovery(doc, strlen(doc), ISS, uri, 256, e);
}

static void test_document(void **state)
{
    char uri[256];
    hsmca_err e;
    /* what a Kubernetes API server serves */
    assert_int_equal(parse("{\"issuer\":\"" ISS "\",\"jwks_uri\":\"https://10.0.0.1:6443/openid/v1/"
                           "jwks\",\"response_types_supported\":[\"id_token\"],"
                           "\"subject_types_supported\":[\"public\"],"
                           "\"id_token_signing_alg_values_supported\":[\"RS256\"]}",
                           uri, &e),
                     HSMCA_OK);
    assert_string_equal(uri, "https://10.0.0.1:6443/openid/v1/jwks");
    static const char *const bad[][2] = {
        {"[]", "not a JSON object"},
        {"{\"issuer\":\"" ISS "\",\"issuer\":\"" ISS "\",\"jwks_uri\":\"https://a/k\"}",
         "without duplicate keys"},
        {"{\"issuer\":\"" ISS "/\",\"jwks_uri\":\"https://a/k\"}", "issuer is not the configured"},
        {"{\"issuer\":\"https://evil.example\",\"jwks_uri\":\"https://a/k\"}",
         "issuer is not the configured"},
        {"{\"jwks_uri\":\"https://a/k\"}", "issuer is not the configured"},
        {"{\"issuer\":\"" ISS "\\u0000x\",\"jwks_uri\":\"https://a/k\"}",
         "not a JSON object" /* jansson refuses \\u0000 */},
        {"{\"issuer\":\"" ISS "\"}", "jwks_uri is not an https:// URL"},
        {"{\"issuer\":\"" ISS "\",\"jwks_uri\":\"http://a/k\"}", "jwks_uri is not an https:// URL"},
        {"{\"issuer\":\"" ISS "\",\"jwks_uri\":\"https://u:p@a/k\"}", "jwks_uri is not an https"},
        {"{\"issuer\":\"" ISS "\",\"jwks_uri\":\"https://a/k\\n\"}", "jwks_uri is not an https"},
        {"{\"issuer\":\"" ISS "\",\"jwks_uri\":7}", "jwks_uri is not an https"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hsmca_err_clear(&e);
        if (parse(bad[i][0], uri, &e) != HSMCA_EINVAL || !strstr(e.msg, bad[i][1]))
            fail_msg("case %zu: want \"%s\", got \"%s\"", i, bad[i][1], e.msg);
    }
    assert_int_equal(sup_oidc_parse_discovery("{}", 0, ISS, uri, sizeof(uri), &e), HSMCA_EINVAL);
    /* too long for the caller's buffer */
    assert_int_equal(
        sup_oidc_parse_discovery("{\"issuer\":\"" ISS "\",\"jwks_uri\":\"https://a/kkkk\"}",
                                 strlen("{\"issuer\":\"" ISS "\",\"jwks_uri\":\"https://a/kkkk\"}"),
                                 ISS, uri, 8, &e),
        HSMCA_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discovery_url),
        cmocka_unit_test(test_document),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

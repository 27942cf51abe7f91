/* test_tok_cache.c - the cache of verified tokens: a hit only for the same bytes
 * and key set, never past exp or the cap, bounded, and refusals never cached. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include <openssl/evp.h>

#include "tok_cache.h"
#include "sigfmt.h"
#include "testutil.h"

#define NOW 1700000000LL
#define ISS "https://issuer.example"
#define HDR_ES "{\"alg\":\"ES256\",\"kid\":\"ec1\"}"
#define CL_K8S                                                                                     \
    "\"kubernetes.io\":{\"namespace\":\"foo\",\"serviceaccount\":{\"name\":\"bar\",\"uid\":\"u\"}" \
    "}"
/* exp = NOW + 600 */
#define CL_GOOD                                                                                    \
    "{\"iss\":\"" ISS "\",\"aud\":\"istio-ca\",\"exp\":1700000600,\"iat\":1699999990,"             \
    "\"sub\":\"system:serviceaccount:foo:bar\"," CL_K8S "}"

static const char *const g_auds[] = {"istio-ca"};
static const tok_jwt_rules g_rules = {ISS, g_auds, 1, 60};
static EVP_PKEY *g_ec;
static tok_jwks *g_jwks;

static int setup(void **state)
{
    (void)state;
    g_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (!g_ec)
        return -1;
    char *doc = tu_jwks_doc(tu_jwk_ec(g_ec, g_ec, "ec1", "P-256"), NULL);
    hsmca_err e;
    int rc = tok_jwks_parse(doc, strlen(doc), &g_jwks, &e) == HSMCA_OK ? 0 : -1;
    free(doc);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    tok_jwks_free(g_jwks);
    EVP_PKEY_free(g_ec);
    return 0;
}

static tok_jwt_identity ident(const char *ns, const char *sa)
{
    tok_jwt_identity id;
    memset(&id, 0, sizeof(id));
    snprintf(id.ns, sizeof(id.ns), "%s", ns);
    snprintf(id.sa, sizeof(id.sa), "%s", sa);
    return id;
}

static tok_cache *new_cache(size_t n, uint32_t cap)
{
    tok_cache *c = NULL;
    hsmca_err e;
    assert_int_equal(tok_cache_new(n, cap, &c, &e), HSMCA_OK);
    return c;
}

static const int KS; /* a key set's address */

static void test_hit_same_bytes_only(void **state)
{
    (void)state;
    tok_cache *c = new_cache(16, 300);
    tok_jwt_identity in = ident("ns1", "sa1"), out = ident("", "");
    tok_cache_put(c, &KS, "a.b.c", 5, NOW + 600, NOW, &in);
    assert_int_equal(tok_cache_get(c, &KS, "a.b.c", 5, NOW + 1, &out), 1);
    assert_string_equal(out.ns, "ns1");
    assert_string_equal(out.sa, "sa1");
    assert_int_equal(tok_cache_get(c, &KS, "a.b.d", 5, NOW + 1, &out), 0);
    assert_int_equal(tok_cache_get(c, &KS, "a.b.c", 4, NOW + 1, &out), 0);
    /* Another key set: the verification does not carry over. */
    static const int other = 0;
    assert_int_equal(tok_cache_get(c, &other, "a.b.c", 5, NOW + 1, &out), 0);
    tok_cache_free(c);
}

static void test_never_past_exp(void **state)
{
    (void)state;
    tok_cache *c = new_cache(16, 300);
    tok_jwt_identity in = ident("ns", "sa"), out;
    tok_cache_put(c, &KS, "t1", 2, NOW + 100, NOW, &in); /* exp before the cap */
    assert_int_equal(tok_cache_get(c, &KS, "t1", 2, NOW + 99, &out), 1);
    assert_int_equal(tok_cache_get(c, &KS, "t1", 2, NOW + 100, &out), 0);
    assert_int_equal(tok_cache_get(c, &KS, "t1", 2, NOW + 99, &out), 0); /* dropped */
    /* Expired or expiring now: nothing to keep. */
    tok_cache_put(c, &KS, "t2", 2, NOW, NOW, &in);
    tok_cache_put(c, &KS, "t3", 2, NOW - 5, NOW, &in);
    assert_int_equal(tok_cache_get(c, &KS, "t2", 2, NOW - 1, &out), 0);
    assert_int_equal(tok_cache_get(c, &KS, "t3", 2, NOW - 10, &out), 0);
    assert_int_equal(tok_cache_count(c), 0);
    tok_cache_free(c);
}

static void test_cap(void **state)
{
    (void)state;
    tok_cache *c = new_cache(16, 30);
    tok_jwt_identity in = ident("ns", "sa"), out;
    tok_cache_put(c, &KS, "t", 1, NOW + 3600, NOW, &in);
    assert_int_equal(tok_cache_get(c, &KS, "t", 1, NOW + 29, &out), 1);
    assert_int_equal(tok_cache_get(c, &KS, "t", 1, NOW + 30, &out), 0);
    tok_cache_free(c);
}

static void test_bounded(void **state)
{
    (void)state;
    tok_cache *c = new_cache(64, 300);
    tok_jwt_identity in = ident("ns", "sa"), out;
    char tok[32];
    for (int i = 0; i < 10000; i++) {
        int n = snprintf(tok, sizeof(tok), "tok-%d", i);
        tok_cache_put(c, &KS, tok, (size_t)n, NOW + 600 + i, NOW, &in);
    }
    assert_int_equal(tok_cache_count(c), 64);
    /* The newest token is there (it expires last in its set). */
    int n = snprintf(tok, sizeof(tok), "tok-%d", 9999);
    assert_int_equal(tok_cache_get(c, &KS, tok, (size_t)n, NOW + 1, &out), 1);
    /* Rounded up to whole sets of 4; a bad size or cap is refused. */
    tok_cache_free(c);
    c = new_cache(5, 300);
    for (int i = 0; i < 1000; i++) {
        n = snprintf(tok, sizeof(tok), "tok-%d", i);
        tok_cache_put(c, &KS, tok, (size_t)n, NOW + 600, NOW, &in);
    }
    assert_true(tok_cache_count(c) <= 8);
    tok_cache_free(c);
    hsmca_err e;
    assert_int_equal(tok_cache_new(0, 300, &c, &e), HSMCA_EINVAL);
    assert_null(c);
    assert_int_equal(tok_cache_new(16, 0, &c, &e), HSMCA_EINVAL);
    tok_cache_free(NULL);
}

/* Through tok_jwt_verify: a good token is cached until its exp (the verifier's skew is
 * not granted), a bad one is refused each time and never cached. */
/* What tok_keys_verify does: the cache, else the verifier, recording what passed. */
static hsmca_code verify_cached(tok_cache *c, const tok_jwks *ks, const tok_jwt_rules *r,
                                const char *tok, size_t len, int64_t now, tok_jwt_identity *id,
                                hsmca_err *e)
{
    if (tok_cache_get(c, ks, tok, len, now, id))
        return HSMCA_OK;
    HSMCA_GUARD(tok_jwt_verify(ks, r, tok, len, now, id, e));
    tok_cache_record(c, ks, tok, len, now, id);
    return HSMCA_OK;
}

static void test_verify_cached(void **state)
{
    (void)state;
    tok_cache *c = new_cache(16, 3600);
    char *tok = sigfmt_jws_compact(g_ec, HDR_ES, strlen(HDR_ES), CL_GOOD, strlen(CL_GOOD));
    assert_non_null(tok);
    size_t len = strlen(tok);
    tok_jwt_identity id;
    hsmca_err e;
    assert_int_equal(verify_cached(c, g_jwks, &g_rules, tok, len, NOW, &id, &e), HSMCA_OK);
    assert_string_equal(id.ns, "foo");
    assert_string_equal(id.sa, "bar");
    assert_int_equal(tok_cache_count(c), 1);
    memset(&id, 0, sizeof(id));
    assert_int_equal(tok_cache_get(c, g_jwks, tok, len, NOW + 599, &id), 1);
    assert_string_equal(id.sa, "bar");
    assert_int_equal(tok_cache_get(c, g_jwks, tok, len, NOW + 600, &id), 0);
    /* Past exp + skew the verifier refuses it again, cache or not. */
    assert_int_equal(verify_cached(c, g_jwks, &g_rules, tok, len, NOW + 661, &id, &e), HSMCA_EAUTH);
    /* A tampered signature: refused, and not cached after the good one was. */
    assert_int_equal(verify_cached(c, g_jwks, &g_rules, tok, len, NOW, &id, &e), HSMCA_OK);
    char *bad = strdup(tok);
    char *s = strrchr(bad, '.') + 1;
    s[3] = s[3] == 'A' ? 'B' : 'A';
    for (int i = 0; i < 2; i++)
        assert_int_equal(verify_cached(c, g_jwks, &g_rules, bad, len, NOW, &id, &e), HSMCA_EAUTH);
    assert_int_equal(tok_cache_count(c), 1);
    /* c = NULL: no cache, plain verification. */
    assert_int_equal(verify_cached(NULL, g_jwks, &g_rules, tok, len, NOW, &id, &e), HSMCA_OK);
    /* Cleared (a new key set): nothing is served from before. */
    tok_cache_clear(c);
    assert_int_equal(tok_cache_count(c), 0);
    assert_int_equal(tok_cache_get(c, g_jwks, tok, len, NOW, &id), 0);
    free(bad);
    free(tok);
    tok_cache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_same_bytes_only),
        cmocka_unit_test(test_never_past_exp),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_verify_cached),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

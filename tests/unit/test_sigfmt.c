/* test_sigfmt.c - ECDSA r||s <-> DER, JWS RS256/ES256 sign and verify, JWK parameters
 * (common/sigfmt.h): the one copy the front end, the PKCS#11 layer, the dev issuer
 * and the fuzz targets share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>

#include "sigfmt.h"
#include "util.h"

static EVP_PKEY *g_ec, *g_rsa, *g_p384;

static int setup(void **state)
{
    g_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    g_p384 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
    g_rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    return g_ec && g_p384 && g_rsa ? 0 : -1;
}

static int teardown(void **state)
{
    EVP_PKEY_free(g_ec);
    EVP_PKEY_free(g_p384);
    EVP_PKEY_free(g_rsa);
    return 0;
}

/* ---- ECDSA r||s <-> DER ------------------------------------------------------------ */

static void test_ecdsa_known_encodings(void **state)
{
    uint8_t raw[64] = {0}, der[SIGFMT_ECDSA_DER_MAX], back[64];
    size_t dl = sizeof(der);
    hsmca_err e;
    raw[31] = 1; /* r = 1 */
    raw[63] = 2; /* s = 2 */
    assert_int_equal(sigfmt_ecdsa_raw_to_der(raw, 64, der, &dl, &e), HSMCA_OK);
    static const uint8_t small[] = {0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x02};
    assert_int_equal(dl, sizeof(small));
    assert_memory_equal(der, small, sizeof(small));
    assert_int_equal(sigfmt_ecdsa_der_to_raw(der, dl, 32, back, &e), HSMCA_OK);
    assert_memory_equal(back, raw, 64); /* leading zeros come back */

    /* High bit set: each INTEGER needs a 0x00 so it stays positive. */
    memset(raw, 0xff, sizeof(raw));
    dl = sizeof(der);
    assert_int_equal(sigfmt_ecdsa_raw_to_der(raw, 64, der, &dl, &e), HSMCA_OK);
    assert_int_equal(dl, 2 + 2 * (2 + 33));
    assert_int_equal(der[1], 70);
    assert_int_equal(der[3], 33);
    assert_int_equal(der[4], 0x00);
    assert_int_equal(sigfmt_ecdsa_der_to_raw(der, dl, 32, back, &e), HSMCA_OK);
    assert_memory_equal(back, raw, 64);
}

static void test_ecdsa_all_sizes_roundtrip(void **state)
{
    static const size_t halves[] = {1, 32, 48, 66};
    uint8_t raw[SIGFMT_ECDSA_RAW_MAX], back[SIGFMT_ECDSA_RAW_MAX], der[SIGFMT_ECDSA_DER_MAX];
    hsmca_err e;
    for (size_t i = 0; i < sizeof(halves) / sizeof(halves[0]); i++) {
        size_t h = halves[i];
        for (size_t k = 0; k < 2 * h; k++)
            raw[k] = (uint8_t)(0x80 | (k * 29));
        size_t dl = sizeof(der);
        assert_int_equal(sigfmt_ecdsa_raw_to_der(raw, 2 * h, der, &dl, &e), HSMCA_OK);
        assert_int_equal(sigfmt_ecdsa_der_to_raw(der, dl, h, back, &e), HSMCA_OK);
        assert_memory_equal(back, raw, 2 * h);
    }
}

static void test_ecdsa_refusals(void **state)
{
    uint8_t raw[SIGFMT_ECDSA_RAW_MAX + 2], der[SIGFMT_ECDSA_DER_MAX + 1], back[64];
    memset(raw, 0x81, sizeof(raw));
    hsmca_err e;
    size_t dl = sizeof(der);
    assert_int_equal(sigfmt_ecdsa_raw_to_der(raw, 0, der, &dl, &e), HSMCA_EINTERNAL);
    assert_int_equal(sigfmt_ecdsa_raw_to_der(raw, 63, der, &dl, &e), HSMCA_EINTERNAL);
    assert_int_equal(sigfmt_ecdsa_raw_to_der(raw, SIGFMT_ECDSA_RAW_MAX + 2, der, &dl, &e),
                     HSMCA_EINTERNAL);
    assert_non_null(strstr(e.msg, "r||s of 134 bytes"));
    dl = 20; /* too little room: refused, nothing half-written counts */
    assert_int_equal(sigfmt_ecdsa_raw_to_der(raw, 64, der, &dl, &e), HSMCA_EINVAL);
    assert_int_equal(dl, 20);

    /* DER side: trailing bytes, garbage, a value wider than the half asked for. */
    dl = sizeof(der);
    assert_int_equal(sigfmt_ecdsa_raw_to_der(raw, 96, der, &dl, &e), HSMCA_OK);
    assert_int_equal(sigfmt_ecdsa_der_to_raw(der, dl, 32, back, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "longer than 32 bytes"));
    dl = sizeof(der);
    assert_int_equal(sigfmt_ecdsa_raw_to_der(raw, 64, der, &dl, &e), HSMCA_OK);
    der[dl] = 0;
    assert_int_equal(sigfmt_ecdsa_der_to_raw(der, dl + 1, 32, back, &e), HSMCA_EINVAL);
    assert_int_equal(sigfmt_ecdsa_der_to_raw(der, dl - 1, 32, back, &e), HSMCA_EINVAL);
    assert_int_equal(sigfmt_ecdsa_der_to_raw((const uint8_t *)"\x04\x02\x01\x01", 4, 32, back, &e),
                     HSMCA_EINVAL);
    assert_int_equal(sigfmt_ecdsa_der_to_raw(der, dl, 0, back, &e), HSMCA_EINVAL);
}

/* ---- JWS ----------------------------------------------------------------------------- */

static hsmca_code verify_b64(EVP_PKEY *k, const char *input, const char *sig64, hsmca_err *e)
{
    size_t sl = 0;
    uint8_t *sig = util_b64url_decode(sig64, strlen(sig64), &sl);
    assert_non_null(sig);
    hsmca_err_clear(e);
    hsmca_code rc = sigfmt_jws_verify(k, input, strlen(input), sig, sl, e);
    free(sig);
    return rc;
}

static void test_jws_sign_verify(void **state)
{
    const char *in = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0";
    hsmca_err e;
    char *es = sigfmt_jws_sign(g_ec, in, strlen(in));
    char *rs = sigfmt_jws_sign(g_rsa, in, strlen(in));
    assert_non_null(es);
    assert_non_null(rs);
    assert_int_equal(strlen(es), 86);  /* 64 bytes r||s */
    assert_int_equal(strlen(rs), 342); /* 256 bytes */
    assert_int_equal(verify_b64(g_ec, in, es, &e), HSMCA_OK);
    assert_int_equal(verify_b64(g_rsa, in, rs, &e), HSMCA_OK);

    /* another input, another key, a signature of the other kind */
    assert_int_equal(verify_b64(g_ec, "x.y", es, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "JWT signature does not verify");
    assert_int_equal(verify_b64(g_rsa, "x.y", rs, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "JWT signature does not verify");
    assert_int_equal(verify_b64(g_rsa, in, es, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "JWT RS256 signature length does not match the key");
    assert_int_equal(verify_b64(g_ec, in, rs, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "JWT ES256 signature must be 64 bytes (r||s)");
    free(es);
    free(rs);

    /* ES256 is P-256 only, both ways */
    assert_null(sigfmt_jws_sign(g_p384, in, strlen(in)));
    uint8_t sig[64] = {1};
    assert_int_equal(sigfmt_jws_verify(g_p384, in, strlen(in), sig, 64, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "JWT key is neither RSA nor EC P-256");
    assert_int_equal(sigfmt_jws_verify(NULL, in, strlen(in), sig, 64, &e), HSMCA_EAUTH);
}

static void test_jws_es256_is_raw_not_der(void **state)
{
    /* What EVP produces (DER) is not a JWS ES256 signature: only exactly 64 bytes
     * of r||s are accepted. */
    const char *in = "a.b";
    uint8_t der[SIGFMT_ECDSA_DER_MAX];
    size_t dl = sizeof(der);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestSignInit_ex(md, NULL, "SHA256", NULL, NULL, g_ec, NULL), 1);
    assert_int_equal(EVP_DigestSign(md, der, &dl, (const uint8_t *)in, 3), 1);
    EVP_MD_CTX_free(md);
    hsmca_err e;
    assert_int_equal(sigfmt_jws_verify(g_ec, in, 3, der, dl, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "JWT ES256 signature must be 64 bytes (r||s)");
    /* and the same signature as r||s verifies */
    uint8_t raw[64];
    assert_int_equal(sigfmt_ecdsa_der_to_raw(der, dl, 32, raw, &e), HSMCA_OK);
    assert_int_equal(sigfmt_jws_verify(g_ec, in, 3, raw, 64, &e), HSMCA_OK);
}

static void test_jws_compact(void **state)
{
    const char hdr[] = "{\"alg\":\"RS256\"}", pl[] = "{\"a\":\"\\u0000\"}";
    char *tok = sigfmt_jws_compact(g_rsa, hdr, strlen(hdr), pl, strlen(pl));
    assert_non_null(tok);
    char *d1 = strchr(tok, '.'), *d2 = strrchr(tok, '.');
    assert_true(d1 && d2 && d1 != d2);
    size_t n;
    uint8_t *h = util_b64url_decode(tok, (size_t)(d1 - tok), &n);
    assert_non_null(h);
    assert_int_equal(n, strlen(hdr));
    assert_memory_equal(h, hdr, n);
    free(h);
    *d2 = '\0';
    hsmca_err e;
    assert_int_equal(verify_b64(g_rsa, tok, d2 + 1, &e), HSMCA_OK);
    free(tok);
    assert_null(sigfmt_jws_compact(g_p384, hdr, strlen(hdr), pl, strlen(pl)));
}

/* ---- JWK parameters ----------------------------------------------------------------- */

static void test_jwk_param(void **state)
{
    char *e = sigfmt_jwk_param(g_rsa, OSSL_PKEY_PARAM_RSA_E, 0);
    assert_string_equal(e, "AQAB"); /* 65537, minimal */
    free(e);
    char *n = sigfmt_jwk_param(g_rsa, OSSL_PKEY_PARAM_RSA_N, 0);
    assert_int_equal(strlen(n), 342);
    free(n);
    char *x = sigfmt_jwk_param(g_ec, OSSL_PKEY_PARAM_EC_PUB_X, 32);
    assert_int_equal(strlen(x), 43); /* always 32 bytes, leading zeros kept */
    free(x);
    assert_null(sigfmt_jwk_param(g_rsa, OSSL_PKEY_PARAM_RSA_N, 32)); /* wider than asked */
    assert_null(sigfmt_jwk_param(g_ec, OSSL_PKEY_PARAM_RSA_N, 0));   /* absent */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ecdsa_known_encodings),
        cmocka_unit_test(test_ecdsa_all_sizes_roundtrip),
        cmocka_unit_test(test_ecdsa_refusals),
        cmocka_unit_test(test_jws_sign_verify),
        cmocka_unit_test(test_jws_es256_is_raw_not_der),
        cmocka_unit_test(test_jws_compact),
        cmocka_unit_test(test_jwk_param),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

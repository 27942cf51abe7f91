/* test_tok_jwks.c - the issuer's key set (token/tok_jwks.h): what tok_jwks_parse
 * keeps, skips and refuses, and how tok_jwks_pick chooses the key for a token.
 *
 * Keys are generated here; every refused document differs from an accepted one
 * in exactly the way the test names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "tok_jwks.h"
#include "testutil.h"

static EVP_PKEY *g_rsa, *g_ec, *g_rsa1024, *g_evil_ec;

#define J(lit) lit, sizeof(lit) - 1

static char *jwk_ec(EVP_PKEY *k, const char *kid) { return tu_jwk_ec(k, k, kid, "P-256"); }

static void expect_jwks_refused(const char *doc, size_t len, const char *want)
{
    tok_jwks *ks = (tok_jwks *)1;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = tok_jwks_parse(doc, len, &ks, &e);
    if (rc != HSMCA_EINVAL)
        fail_msg("want EINVAL \"%s\", got %s \"%s\"", want, hsmca_code_name(rc), e.msg);
    assert_null(ks);
    if (!strstr(e.msg, want))
        fail_msg("want \"%s\", got \"%s\"", want, e.msg);
}

/* Parses doc (and frees it); fails the test when it is refused. */
static tok_jwks *jwks_ok(char *doc)
{
    tok_jwks *ks = NULL;
    hsmca_err e;
    if (tok_jwks_parse(doc, strlen(doc), &ks, &e) != HSMCA_OK)
        fail_msg("JWKS refused: %s", e.msg);
    free(doc);
    return ks;
}

static void expect_pick_refused(const tok_jwks *ks, tok_kty kty, const char *kid, const char *want)
{
    EVP_PKEY *k = NULL;
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(tok_jwks_pick(ks, kty, kid, &k, &e), HSMCA_EAUTH);
    assert_null(k);
    assert_string_equal(e.msg, want);
}

static void expect_pick(const tok_jwks *ks, tok_kty kty, const char *kid, EVP_PKEY *want)
{
    EVP_PKEY *k = NULL;
    hsmca_err e;
    if (tok_jwks_pick(ks, kty, kid, &k, &e) != HSMCA_OK)
        fail_msg("no key for kid %s: %s", kid ? kid : "(none)", e.msg);
    assert_int_equal(EVP_PKEY_eq(k, want), 1);
}

static int setup_keys(void **state)
{
    g_rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    g_rsa1024 = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
    g_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    g_evil_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    return g_rsa && g_rsa1024 && g_ec && g_evil_ec ? 0 : -1;
}

static int teardown_keys(void **state)
{
    EVP_PKEY_free(g_rsa);
    EVP_PKEY_free(g_rsa1024);
    EVP_PKEY_free(g_ec);
    EVP_PKEY_free(g_evil_ec);
    return 0;
}

/* ---- parsing ------------------------------------------------------------------- */

static void test_jwks_refusals(void **state)
{
    char *doc = tu_jwks_doc(tu_jwk_rsa(g_rsa1024, "small"), NULL);
    expect_jwks_refused(doc, strlen(doc), "RSA key of 1024 bits refused");
    free(doc);
    expect_jwks_refused(J("{\"keys\":[]}"), "JWKS holds no usable RSA or EC P-256 signing key");
    const char *oct = "{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}]}";
    expect_jwks_refused(oct, strlen(oct), "JWKS holds no usable");
    expect_jwks_refused(J("{\"nokeys\":1}"), "JWKS must be an object with a \"keys\" array");
    expect_jwks_refused(J("{\"keys\":"), "JWKS is not valid JSON");
    expect_jwks_refused(J("{\"keys\":[],\"keys\":[]}"), "JWKS is not valid JSON");
    expect_jwks_refused(J("{\"keys\":[1]}"), "JWKS key 0 is not a JSON object");

    doc = tu_jwks_doc(tu_jwk_ec(g_ec, g_evil_ec, "mixed", "P-256"), NULL);
    expect_jwks_refused(doc, strlen(doc), "JWKS key 0: EC point is not on P-256");
    free(doc);
    doc = tu_jwks_doc(tu_jwk_ec(g_ec, g_ec, "p384", "P-384"), NULL);
    expect_jwks_refused(doc, strlen(doc), "JWKS key 0: EC crv must be P-256");
    free(doc);
    const char *short_x = "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAA\",\"y\":\"AAAA\"}]}";
    expect_jwks_refused(short_x, strlen(short_x), "EC x and y must be base64url of 32 bytes");
    doc = tu_jwks_doc(jwk_ec(g_ec, "same"), tu_jwk_rsa(g_rsa, "same"));
    expect_jwks_refused(doc, strlen(doc), "JWKS key 1: kid used twice");
    free(doc);

    /* a key for encryption, or for another alg, is skipped, not used */
    char *k = tu_jwk_rsa(g_rsa, "enc1");
    char *use = strstr(k, "\"sig\"");
    memcpy(use, "\"enc\"", 5);
    doc = tu_jwks_doc(k, NULL);
    expect_jwks_refused(doc, strlen(doc), "JWKS holds no usable");
    free(doc);

    char big[TOK_JWKS_MAX_LEN + 2];
    memset(big, ' ', sizeof(big));
    expect_jwks_refused(big, sizeof(big), "JWKS must be 1-65536 bytes");
}

static void test_jwks_skips_enc_key_keeps_sig(void **state)
{
    char *k = tu_jwk_rsa(g_rsa, "enc1");
    memcpy(strstr(k, "\"sig\""), "\"enc\"", 5);
    tok_jwks *ks = jwks_ok(tu_jwks_doc(k, jwk_ec(g_ec, "ec1")));
    expect_pick_refused(ks, TOK_KTY_RSA, "enc1", "JWT kid 'enc1' not in JWKS");
    expect_pick_refused(ks, TOK_KTY_RSA, NULL,
                        "JWT has no kid and the JWKS holds 0 RSA keys (needs exactly one)");
    expect_pick(ks, TOK_KTY_EC, "ec1", g_ec);
    tok_jwks_free(ks);
}

/* ---- choosing the key ------------------------------------------------------------ */

static void test_pick_by_kid(void **state)
{
    tok_jwks *ks = jwks_ok(tu_jwks_doc(tu_jwk_rsa(g_rsa, "rsa1"), jwk_ec(g_ec, "ec1")));
    expect_pick(ks, TOK_KTY_RSA, "rsa1", g_rsa);
    expect_pick(ks, TOK_KTY_EC, "ec1", g_ec);
    /* the kid names a key of the other type than alg asks for */
    expect_pick_refused(ks, TOK_KTY_RSA, "ec1", "JWT kid 'ec1' names an EC key, alg RS256 needs RSA");
    expect_pick_refused(ks, TOK_KTY_EC, "rsa1",
                        "JWT kid 'rsa1' names an RSA key, alg ES256 needs EC");
    expect_pick_refused(ks, TOK_KTY_EC, "nope", "JWT kid 'nope' not in JWKS");
    expect_pick_refused(ks, TOK_KTY_EC, "", "JWT kid '' not in JWKS");
    /* a hostile kid is shown shortened and without quotes or control characters */
    expect_pick_refused(ks, TOK_KTY_EC, "a'b\nc-0123456789012345678901234567890123",
                        "JWT kid 'a?b?c-01234567890123456789012345...' not in JWKS");
    tok_jwks_free(ks);
}

static void test_pick_without_kid(void **state)
{
    tok_jwks *ks = jwks_ok(tu_jwks_doc(tu_jwk_rsa(g_rsa, "rsa1"), jwk_ec(g_ec, "ec1")));
    expect_pick(ks, TOK_KTY_RSA, NULL, g_rsa); /* the only key of the type */
    expect_pick(ks, TOK_KTY_EC, NULL, g_ec);
    tok_jwks_free(ks);
    /* two RSA keys: a token without a kid is ambiguous */
    ks = jwks_ok(tu_jwks_doc(tu_jwk_rsa(g_rsa, "rsa1"), tu_jwk_rsa(g_rsa, "rsa2")));
    expect_pick_refused(ks, TOK_KTY_RSA, NULL,
                        "JWT has no kid and the JWKS holds 2 RSA keys (needs exactly one)");
    expect_pick_refused(ks, TOK_KTY_EC, NULL,
                        "JWT has no kid and the JWKS holds 0 EC keys (needs exactly one)");
    tok_jwks_free(ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jwks_refusals),
        cmocka_unit_test(test_jwks_skips_enc_key_keeps_sig),
        cmocka_unit_test(test_pick_by_kid),
        cmocka_unit_test(test_pick_without_kid),
    };
    return cmocka_run_group_tests(tests, setup_keys, teardown_keys);
}

/* test_fe_jwt.c - JWT / JWKS verification (fe_jwt) and the dev issuer (dev_jwt).
 *
 * Keys are generated here and tokens built and signed here, so every refusal
 * below is of a token that differs from an accepted one in exactly the way the
 * test names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "dev_jwt.h"
#include "fe_jwt.h"
#include "sigfmt.h"
#include "testutil.h"
#include "util.h"

#define NOW 1700000000LL
#define SKEW 60
#define ISS "https://issuer.example"

#define HDR_RS "{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"typ\":\"JWT\"}"
#define HDR_ES "{\"alg\":\"ES256\",\"kid\":\"ec1\"}"
#define CL_K8S                                                                                 \
    "\"kubernetes.io\":{\"namespace\":\"foo\",\"serviceaccount\":{\"name\":\"bar\",\"uid\":\"u\"}}"
/* exp = NOW + 600, iat = nbf = NOW - 10 */
#define CL_TIMES "\"exp\":1700000600,\"iat\":1699999990,\"nbf\":1699999990"
#define CL_GOOD "{\"iss\":\"" ISS "\",\"aud\":\"istio-ca\"," CL_TIMES "," CL_K8S "}"

enum { S_RS256, S_ES256, S_ES256_DER, S_NONE, S_HS256 };

static EVP_PKEY *g_rsa, *g_ec, *g_rsa1024, *g_evil_ec;
static fe_jwks *g_jwks; /* rsa1 (RSA-2048) and ec1 (P-256) */

/* ---- helpers: keys, JWKs, tokens ------------------------------------------ */

static char *b64bn(EVP_PKEY *k, const char *param, size_t width)
{
    char *s = sigfmt_jwk_param(k, param, width);
    assert_non_null(s);
    return s;
}

static char *jwk_rsa(EVP_PKEY *k, const char *kid)
{
    char *n = b64bn(k, OSSL_PKEY_PARAM_RSA_N, 0), *e = b64bn(k, OSSL_PKEY_PARAM_RSA_E, 0);
    char *out = malloc(strlen(n) + strlen(e) + 128);
    sprintf(out, "{\"kty\":\"RSA\",\"kid\":\"%s\",\"use\":\"sig\",\"n\":\"%s\",\"e\":\"%s\"}",
            kid, n, e);
    free(n);
    free(e);
    return out;
}

/* x and y may come from different keys (to build a point off the curve). */
static char *jwk_ec2(EVP_PKEY *kx, EVP_PKEY *ky, const char *kid, const char *crv)
{
    char *x = b64bn(kx, OSSL_PKEY_PARAM_EC_PUB_X, 32), *y = b64bn(ky, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
    char *out = malloc(strlen(x) + strlen(y) + 128);
    sprintf(out, "{\"kty\":\"EC\",\"crv\":\"%s\",\"kid\":\"%s\",\"x\":\"%s\",\"y\":\"%s\"}", crv,
            kid, x, y);
    free(x);
    free(y);
    return out;
}

static char *jwk_ec(EVP_PKEY *k, const char *kid) { return jwk_ec2(k, k, kid, "P-256"); }

/* {"keys":[a, b]} (b may be NULL). */
static char *jwks_doc(char *a, char *b)
{
    char *out = malloc(strlen(a) + (b ? strlen(b) : 0) + 32);
    sprintf(out, "{\"keys\":[%s%s%s]}", a, b ? "," : "", b ? b : "");
    free(a);
    free(b);
    return out;
}

static char *b64s(const char *s) { return util_b64url_encode((const uint8_t *)s, strlen(s)); }

static char *pubkey_pem(EVP_PKEY *k, size_t *len)
{
    BIO *m = BIO_new(BIO_s_mem());
    assert_int_equal(PEM_write_bio_PUBKEY(m, k), 1);
    char *data;
    long n = BIO_get_mem_data(m, &data);
    char *out = malloc((size_t)n + 1);
    memcpy(out, data, (size_t)n);
    out[n] = '\0';
    *len = (size_t)n;
    BIO_free(m);
    return out;
}

/* Signs base64url(hdr) "." base64url(claims) the way `how` says: RS256 and
 * ES256 as the dev issuer does (sigfmt), the rest as an attacker would. */
static char *sign_token(const char *hdr, const char *claims, int how, EVP_PKEY *key)
{
    char *tok = sigfmt_jws_compact(key, hdr, strlen(hdr), claims, strlen(claims));
    assert_non_null(tok);
    if (how == S_RS256 || how == S_ES256)
        return tok;
    /* Keep header.payload; replace the signature. */
    const char *input = tok;
    size_t inlen = (size_t)(strrchr(tok, '.') - tok);
    unsigned char sig[1024];
    size_t slen = sizeof(sig);
    if (how == S_ES256_DER) { /* what EVP gives, not what JWS wants */
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        assert_int_equal(EVP_DigestSignInit_ex(md, NULL, "SHA256", NULL, NULL, key, NULL), 1);
        assert_int_equal(EVP_DigestSign(md, sig, &slen, (const unsigned char *)input, inlen), 1);
        EVP_MD_CTX_free(md);
    } else if (how == S_HS256) {
        /* The confusion attack: the verifier's public key (PEM) as HMAC secret. */
        size_t klen;
        char *pem = pubkey_pem(key, &klen);
        assert_non_null(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, pem, klen,
                                  (const unsigned char *)input, inlen, sig, sizeof(sig), &slen));
        assert_int_equal(slen, 32);
        free(pem);
    } else {
        slen = 0;
    }
    char *s = util_b64url_encode(sig, slen);
    char *out = malloc(inlen + strlen(s) + 2);
    sprintf(out, "%.*s.%s", (int)inlen, input, s);
    free(s);
    free(tok);
    return out;
}

static const char *const g_auds[] = {"istio-ca"};
static const fe_jwt_rules g_rules = {ISS, g_auds, 1, SKEW};

static hsmca_code verify_at(const fe_jwks *ks, const fe_jwt_rules *r, const char *tok,
                            int64_t now, fe_jwt_identity *id, hsmca_err *e)
{
    hsmca_err_clear(e);
    return fe_jwt_verify(ks, r, tok, strlen(tok), now, id, e);
}

static void expect_ok(const char *tok, const char *ns, const char *sa)
{
    fe_jwt_identity id;
    hsmca_err e;
    hsmca_code rc = verify_at(g_jwks, &g_rules, tok, NOW, &id, &e);
    if (rc != HSMCA_OK)
        fail_msg("refused a good token: %s", e.msg);
    assert_string_equal(id.ns, ns);
    assert_string_equal(id.sa, sa);
}

/* No 16-character window of the token may appear in the message. */
static void assert_msg_has_no_token(const char *msg, const char *tok, size_t toklen)
{
    if (toklen > 0)
        assert_null(strstr(msg, tok));
    char win[17];
    for (size_t i = 0; i + 16 <= toklen; i++) {
        memcpy(win, tok + i, 16);
        win[16] = '\0';
        if (strlen(win) == 16 && strstr(msg, win))
            fail_msg("error message quotes the token: %s", msg);
    }
}

static void expect_refused_rules(const fe_jwt_rules *r, int64_t now, const char *tok,
                                 size_t len, const char *want)
{
    fe_jwt_identity id;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = fe_jwt_verify(g_jwks, r, tok, len, now, &id, &e);
    if (rc != HSMCA_EAUTH)
        fail_msg("want EAUTH \"%s\", got %s \"%s\"", want, hsmca_code_name(rc), e.msg);
    if (!strstr(e.msg, want))
        fail_msg("want \"%s\", got \"%s\"", want, e.msg);
    assert_msg_has_no_token(e.msg, tok, len);
}

static void expect_refused(const char *tok, const char *want)
{
    expect_refused_rules(&g_rules, NOW, tok, strlen(tok), want);
}

static void expect_jwks_refused(const char *doc, size_t len, const char *want)
{
    fe_jwks *ks = (fe_jwks *)1;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = fe_jwks_parse(doc, len, &ks, &e);
    if (rc != HSMCA_EINVAL)
        fail_msg("want EINVAL \"%s\", got %s \"%s\"", want, hsmca_code_name(rc), e.msg);
    assert_null(ks);
    if (!strstr(e.msg, want))
        fail_msg("want \"%s\", got \"%s\"", want, e.msg);
}

static fe_jwks *jwks_ok(const char *doc)
{
    fe_jwks *ks = NULL;
    hsmca_err e;
    if (fe_jwks_parse(doc, strlen(doc), &ks, &e) != HSMCA_OK)
        fail_msg("JWKS refused: %s", e.msg);
    return ks;
}

static int setup_keys(void **state)
{
    g_rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    g_rsa1024 = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
    g_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    g_evil_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (!g_rsa || !g_rsa1024 || !g_ec || !g_evil_ec)
        return -1;
    char *doc = jwks_doc(jwk_rsa(g_rsa, "rsa1"), jwk_ec(g_ec, "ec1"));
    hsmca_err e;
    int rc = fe_jwks_parse(doc, strlen(doc), &g_jwks, &e) == HSMCA_OK ? 0 : -1;
    if (rc)
        fprintf(stderr, "setup JWKS refused: %s\n", e.msg);
    free(doc);
    return rc;
}

static int teardown_keys(void **state)
{
    fe_jwks_free(g_jwks);
    EVP_PKEY_free(g_rsa);
    EVP_PKEY_free(g_rsa1024);
    EVP_PKEY_free(g_ec);
    EVP_PKEY_free(g_evil_ec);
    return 0;
}

/* Claims built from the good set with one member replaced or added. */
static char *claims_with(const char *iss, const char *aud, const char *times, const char *ident)
{
    char *c = malloc(4096);
    snprintf(c, 4096, "{\"iss\":%s,\"aud\":%s,%s%s%s}", iss, aud, times,
             *ident ? "," : "", ident);
    return c;
}

static void refuse_claims(const char *claims, const char *want)
{
    char *tok = sign_token(HDR_ES, claims, S_ES256, g_ec);
    expect_refused(tok, want);
    free(tok);
}

static void accept_claims(const char *claims, const char *ns, const char *sa)
{
    char *tok = sign_token(HDR_RS, claims, S_RS256, g_rsa);
    expect_ok(tok, ns, sa);
    free(tok);
}

/* ---- accepted tokens ------------------------------------------------------- */

static void test_rs256_ok(void **state)
{
    char *tok = sign_token(HDR_RS, CL_GOOD, S_RS256, g_rsa);
    expect_ok(tok, "foo", "bar");
    free(tok);
}

static void test_es256_ok(void **state)
{
    char *tok = sign_token(HDR_ES, CL_GOOD, S_ES256, g_ec);
    expect_ok(tok, "foo", "bar");
    free(tok);
    /* typ compares case-insensitively */
    tok = sign_token("{\"alg\":\"ES256\",\"kid\":\"ec1\",\"typ\":\"jwt\"}", CL_GOOD, S_ES256, g_ec);
    expect_ok(tok, "foo", "bar");
    free(tok);
}

static void test_identity_from_sub(void **state)
{
    char *c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                          "\"sub\":\"system:serviceaccount:default:sleep\"");
    accept_claims(c, "default", "sleep");
    free(c);
    /* both present and agreeing: fine */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    "\"sub\":\"system:serviceaccount:foo:bar\"," CL_K8S);
    accept_claims(c, "foo", "bar");
    free(c);
}

static void test_no_kid_single_key_of_type(void **state)
{
    char *tok = sign_token("{\"alg\":\"RS256\"}", CL_GOOD, S_RS256, g_rsa);
    expect_ok(tok, "foo", "bar"); /* g_jwks holds one RSA key */
    /* two RSA keys: a token without a kid is ambiguous */
    char *doc = jwks_doc(jwk_rsa(g_rsa, "rsa1"), jwk_rsa(g_rsa, "rsa2"));
    fe_jwks *two = jwks_ok(doc);
    fe_jwt_identity id;
    hsmca_err e;
    assert_int_equal(verify_at(two, &g_rules, tok, NOW, &id, &e), HSMCA_EAUTH);
    assert_non_null(strstr(e.msg, "JWT has no kid and the JWKS holds 2 RSA keys"));
    fe_jwks_free(two);
    free(doc);
    free(tok);
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

/* ---- signature and header refusals ------------------------------------------ */

static void flip_sig_char(char *tok)
{
    char *s = strrchr(tok, '.') + 1;
    char *c = s + strlen(s) / 2;
    *c = *c == 'A' ? 'B' : 'A';
}

static void test_bad_signature(void **state)
{
    char *tok = sign_token(HDR_RS, CL_GOOD, S_RS256, g_rsa);
    flip_sig_char(tok);
    expect_refused(tok, "JWT signature does not verify");
    free(tok);
    tok = sign_token(HDR_ES, CL_GOOD, S_ES256, g_ec);
    flip_sig_char(tok);
    expect_refused(tok, "JWT signature does not verify");
    free(tok);
    /* right shape, kid of ours, but another key signed it */
    tok = sign_token(HDR_ES, CL_GOOD, S_ES256, g_evil_ec);
    expect_refused(tok, "JWT signature does not verify");
    free(tok);
}

static void test_es256_der_signature_refused(void **state)
{
    char *tok = sign_token(HDR_ES, CL_GOOD, S_ES256_DER, g_ec);
    expect_refused(tok, "JWT ES256 signature must be 64 bytes");
    free(tok);
}

static void test_alg_none(void **state)
{
    char *tok = sign_token("{\"alg\":\"none\",\"typ\":\"JWT\"}", CL_GOOD, S_NONE, g_ec);
    assert_int_equal(tok[strlen(tok) - 1], '.'); /* empty signature part */
    expect_refused(tok, "JWT alg 'none' not allowed (RS256, ES256 only)");
    free(tok);
}

static void test_hs256_key_confusion(void **state)
{
    char *tok = sign_token("{\"alg\":\"HS256\",\"kid\":\"rsa1\"}", CL_GOOD, S_HS256, g_rsa);
    expect_refused(tok, "JWT alg 'HS256' not allowed (RS256, ES256 only)");
    free(tok);
    /* other spellings and types are not tolerated either */
    tok = sign_token("{\"alg\":\"rs256\",\"kid\":\"rsa1\"}", CL_GOOD, S_RS256, g_rsa);
    expect_refused(tok, "JWT alg 'rs256' not allowed");
    free(tok);
    tok = sign_token("{\"alg\":[\"RS256\"],\"kid\":\"rsa1\"}", CL_GOOD, S_RS256, g_rsa);
    expect_refused(tok, "JWT header has no string alg");
    free(tok);
}

static void test_alg_kid_type_mismatch(void **state)
{
    char *tok = sign_token("{\"alg\":\"RS256\",\"kid\":\"ec1\"}", CL_GOOD, S_RS256, g_rsa);
    expect_refused(tok, "JWT kid 'ec1' names an EC key, alg RS256 needs RSA");
    free(tok);
}

static void test_unknown_kid(void **state)
{
    char *tok = sign_token("{\"alg\":\"ES256\",\"kid\":\"nope\"}", CL_GOOD, S_ES256, g_ec);
    expect_refused(tok, "JWT kid 'nope' not in JWKS");
    free(tok);
    /* a hostile kid is shown shortened and without quotes */
    tok = sign_token("{\"alg\":\"ES256\",\"kid\":\"a'b\\nc-0123456789012345678901234567890123\"}",
                     CL_GOOD, S_ES256, g_ec);
    expect_refused(tok, "JWT kid 'a?b?c-01234567890123456789012345...' not in JWKS");
    free(tok);
}

static void test_typ_not_jwt(void **state)
{
    char *tok = sign_token("{\"alg\":\"ES256\",\"kid\":\"ec1\",\"typ\":\"JWE\"}", CL_GOOD,
                           S_ES256, g_ec);
    expect_refused(tok, "JWT typ must be \"JWT\"");
    free(tok);
}

static void test_forbidden_header_fields(void **state)
{
    /* The token brings its own key and signs with it: must not matter. */
    char *evil = jwk_ec(g_evil_ec, "ec1");
    char hdr[1024];
    snprintf(hdr, sizeof(hdr), "{\"alg\":\"ES256\",\"jwk\":%s}", evil);
    char *tok = sign_token(hdr, CL_GOOD, S_ES256, g_evil_ec);
    expect_refused(tok, "JWT header field 'jwk' not allowed");
    free(tok);
    free(evil);
    static const char *const f[][2] = {
        {"jku", "\"https://evil.example/jwks\""},
        {"x5u", "\"https://evil.example/cert\""},
        {"x5c", "[\"MIIB\"]"},
        {"crit", "[\"exp\"]"},
    };
    for (size_t i = 0; i < 4; i++) {
        char want[64];
        snprintf(hdr, sizeof(hdr), "{\"alg\":\"ES256\",\"kid\":\"ec1\",\"%s\":%s}", f[i][0],
                 f[i][1]);
        snprintf(want, sizeof(want), "JWT header field '%s' not allowed", f[i][0]);
        tok = sign_token(hdr, CL_GOOD, S_ES256, g_ec);
        expect_refused(tok, want);
        free(tok);
    }
}

/* ---- claims refusals --------------------------------------------------------- */

static void test_expired(void **state)
{
    /* exp + skew == now is still valid; one second later it is not. */
    char *c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1699999940", CL_K8S);
    accept_claims(c, "foo", "bar");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1699999939", CL_K8S);
    char *tok = sign_token(HDR_RS, c, S_RS256, g_rsa);
    fe_jwt_identity id;
    hsmca_err e;
    assert_int_equal(verify_at(g_jwks, &g_rules, tok, NOW, &id, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "JWT expired");
    /* the message carries nothing of the token (explicit, beyond the helper's check) */
    assert_null(strstr(e.msg, tok));
    assert_null(strstr(e.msg, strrchr(tok, '.') + 1));
    free(tok);
    free(c);
    /* fractional exp rounds down */
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1699999939.9", CL_K8S);
    refuse_claims(c, "JWT expired");
    free(c);
}

static void test_not_yet_valid(void **state)
{
    char *c = claims_with("\"" ISS "\"", "\"istio-ca\"",
                          "\"exp\":1700000600,\"nbf\":1700000060", CL_K8S);
    accept_claims(c, "foo", "bar"); /* nbf == now + skew */
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1700000600,\"nbf\":1700000061",
                    CL_K8S);
    refuse_claims(c, "JWT not yet valid (nbf in the future)");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", "\"exp\":1700000600,\"iat\":1700000120",
                    CL_K8S);
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
    char *tok = sign_token(HDR_ES, c, S_ES256, g_ec);
    static const char *const two[] = {"istio-ca", "mesh-ca"};
    fe_jwt_rules r = {ISS, two, 2, SKEW};
    expect_refused_rules(&r, NOW, tok, strlen(tok), "JWT aud does not include istio-ca, mesh-ca");
    free(tok);
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
                          "\"sub\":\"system:serviceaccount:a/sa/b:bar\"");
    refuse_claims(c, "JWT namespace is not a valid Kubernetes name");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    "\"sub\":\"system:serviceaccount:foo:bar:baz\"");
    refuse_claims(c, "JWT service account is not a valid Kubernetes name");
    free(c);
    c = claims_with("\"" ISS "\"", "\"istio-ca\"", CL_TIMES,
                    "\"kubernetes.io\":{\"namespace\":\"Foo\",\"serviceaccount\":{\"name\":\"b\"}}");
    refuse_claims(c, "JWT namespace is not a valid Kubernetes name");
    free(c);
    /* a namespace is one label; a service account's labels are never empty and
     * never start or end with '-' (the front end's old copy took "a..b") */
    static const char *const bad_names[][3] = {
        {"a.b", "bar", "JWT namespace"},
        {"foo", "a..b", "JWT service account"},
        {"foo", "a.-b", "JWT service account"},
        {"foo", "a-.b", "JWT service account"},
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
                    "\"sub\":\"system:serviceaccount:foo:other\"," CL_K8S);
    refuse_claims(c, "JWT sub and kubernetes.io name different accounts");
    free(c);
}

/* ---- structure and encoding refusals ----------------------------------------- */

static void test_two_and_four_parts(void **state)
{
    char *tok = sign_token(HDR_ES, CL_GOOD, S_ES256, g_ec);
    size_t len = strlen(tok);
    char *four = malloc(len + 8);
    sprintf(four, "%s.AAAA", tok);
    expect_refused(four, "JWT must have exactly three dot-separated parts");
    *strrchr(tok, '.') = '\0'; /* header.payload */
    expect_refused(tok, "JWT must have exactly three dot-separated parts");
    expect_refused("abc", "JWT must have exactly three dot-separated parts");
    expect_refused("..", "JWT header and payload must not be empty");
    free(four);
    free(tok);
}

static void test_base64_padding_refused(void **state)
{
    /* a header whose base64url length is not a multiple of 4, then padded */
    const char *hdr = "{\"alg\":\"ES256\",\"kid\":\"ec1\" }";
    char *h = b64s(hdr);
    assert_int_not_equal(strlen(h) % 4, 0);
    char *tok = sign_token(hdr, CL_GOOD, S_ES256, g_ec);
    expect_ok(tok, "foo", "bar");
    size_t pad = 4 - strlen(h) % 4;
    char *padded = malloc(strlen(tok) + 8);
    memcpy(padded, tok, strlen(h));
    memcpy(padded + strlen(h), "===", pad);
    strcpy(padded + strlen(h) + pad, tok + strlen(h));
    expect_refused(padded, "JWT header is not unpadded base64url");
    free(padded);
    free(tok);
    free(h);
    /* RS256 signature: 256 bytes -> 342 characters, padded would be 344 */
    tok = sign_token(HDR_RS, CL_GOOD, S_RS256, g_rsa);
    padded = malloc(strlen(tok) + 4);
    sprintf(padded, "%s==", tok);
    expect_refused(padded, "JWT signature is not unpadded base64url");
    free(padded);
    free(tok);
}

static void test_bad_base64_chars(void **state)
{
    char *tok = sign_token(HDR_ES, CL_GOOD, S_ES256, g_ec);
    char *payload = strchr(tok, '.') + 1;
    char saved = payload[0];
    payload[0] = '+'; /* standard alphabet, not url */
    expect_refused(tok, "JWT payload is not unpadded base64url");
    payload[0] = '/';
    expect_refused(tok, "JWT payload is not unpadded base64url");
    payload[0] = saved;
    tok[1] = ' ';
    expect_refused(tok, "JWT header is not unpadded base64url");
    free(tok);
    /* an embedded NUL inside the stated length */
    tok = sign_token(HDR_ES, CL_GOOD, S_ES256, g_ec);
    size_t len = strlen(tok);
    tok[3] = '\0';
    expect_refused_rules(&g_rules, NOW, tok, len, "JWT header is not unpadded base64url");
    free(tok);
    /* non-zero leftover bits: a second encoding of the same bytes */
    tok = sign_token(HDR_ES, CL_GOOD, S_ES256, g_ec);
    char *s = strrchr(tok, '.') + 1; /* 64 bytes -> 86 chars, the last has 4 spare bits */
    assert_int_equal(strlen(s), 86);
    s[85] = 'B'; /* value 1: a spare bit set */
    expect_refused(tok, "JWT signature is not unpadded base64url");
    free(tok);
}

static void test_header_not_json(void **state)
{
    char *tok = sign_token("not json", CL_GOOD, S_ES256, g_ec);
    expect_refused(tok, "JWT header is not a JSON object");
    free(tok);
    tok = sign_token("[\"ES256\"]", CL_GOOD, S_ES256, g_ec);
    expect_refused(tok, "JWT header is not a JSON object");
    free(tok);
    tok = sign_token(HDR_ES, "[1,2]", S_ES256, g_ec);
    expect_refused(tok, "JWT payload is not a JSON object");
    free(tok);
}

static void test_duplicate_json_keys(void **state)
{
    char *tok = sign_token("{\"alg\":\"ES256\",\"kid\":\"ec1\",\"alg\":\"none\"}", CL_GOOD,
                           S_ES256, g_ec);
    expect_refused(tok, "JWT header is not a JSON object without duplicate keys");
    free(tok);
    /* correctly signed, but the payload names two issuers */
    tok = sign_token(HDR_ES,
                     "{\"iss\":\"https://evil.example\",\"iss\":\"" ISS
                     "\",\"aud\":\"istio-ca\"," CL_TIMES "," CL_K8S "}",
                     S_ES256, g_ec);
    expect_refused(tok, "JWT payload is not a JSON object without duplicate keys");
    free(tok);
}

static void test_oversize_token(void **state)
{
    /* validly signed, just too long */
    size_t padlen = FE_JWT_MAX_LEN;
    char *claims = malloc(padlen + 1024);
    int n = snprintf(claims, 1024, "{\"iss\":\"" ISS "\",\"aud\":\"istio-ca\"," CL_TIMES
                                   "," CL_K8S ",\"pad\":\"");
    memset(claims + n, 'x', padlen);
    strcpy(claims + n + padlen, "\"}");
    char *tok = sign_token(HDR_ES, claims, S_ES256, g_ec);
    assert_true(strlen(tok) > FE_JWT_MAX_LEN);
    expect_refused(tok, "JWT must be 1-8192 bytes");
    free(tok);
    free(claims);
    expect_refused_rules(&g_rules, NOW, "", 0, "JWT must be 1-8192 bytes");
}

/* ---- JWKS ---------------------------------------------------------------------- */

#define J(lit) lit, sizeof(lit) - 1

static void test_jwks_refusals(void **state)
{
    char *doc = jwks_doc(jwk_rsa(g_rsa1024, "small"), NULL);
    expect_jwks_refused(doc, strlen(doc), "RSA key of 1024 bits refused");
    free(doc);
    expect_jwks_refused(J("{\"keys\":[]}"), "JWKS holds no usable RSA or EC P-256 signing key");
    const char *oct = "{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}]}";
    expect_jwks_refused(oct, strlen(oct), "JWKS holds no usable");
    expect_jwks_refused(J("{\"nokeys\":1}"), "JWKS must be an object with a \"keys\" array");
    expect_jwks_refused(J("{\"keys\":"), "JWKS is not valid JSON");
    expect_jwks_refused(J("{\"keys\":[],\"keys\":[]}"), "JWKS is not valid JSON");
    expect_jwks_refused(J("{\"keys\":[1]}"), "JWKS key 0 is not a JSON object");

    doc = jwks_doc(jwk_ec2(g_ec, g_evil_ec, "mixed", "P-256"), NULL);
    expect_jwks_refused(doc, strlen(doc), "JWKS key 0: EC point is not on P-256");
    free(doc);
    doc = jwks_doc(jwk_ec2(g_ec, g_ec, "p384", "P-384"), NULL);
    expect_jwks_refused(doc, strlen(doc), "JWKS key 0: EC crv must be P-256");
    free(doc);
    const char *short_x = "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAA\",\"y\":\"AAAA\"}]}";
    expect_jwks_refused(short_x, strlen(short_x), "EC x and y must be base64url of 32 bytes");
    doc = jwks_doc(jwk_ec(g_ec, "same"), jwk_rsa(g_rsa, "same"));
    expect_jwks_refused(doc, strlen(doc), "JWKS key 1: kid used twice");
    free(doc);

    /* a key for encryption, or for another alg, is skipped, not used */
    char *k = jwk_rsa(g_rsa, "enc1");
    char *use = strstr(k, "\"sig\"");
    memcpy(use, "\"enc\"", 5);
    doc = jwks_doc(k, NULL);
    expect_jwks_refused(doc, strlen(doc), "JWKS holds no usable");
    free(doc);

    char big[FE_JWKS_MAX_LEN + 2];
    memset(big, ' ', sizeof(big));
    expect_jwks_refused(big, sizeof(big), "JWKS must be 1-65536 bytes");
}

static void test_jwks_skips_enc_key_keeps_sig(void **state)
{
    char *k = jwk_rsa(g_rsa, "enc1");
    memcpy(strstr(k, "\"sig\""), "\"enc\"", 5);
    char *doc = jwks_doc(k, jwk_ec(g_ec, "ec1"));
    fe_jwks *ks = jwks_ok(doc);
    char *tok = sign_token("{\"alg\":\"RS256\",\"kid\":\"enc1\"}", CL_GOOD, S_RS256, g_rsa);
    fe_jwt_identity id;
    hsmca_err e;
    assert_int_equal(verify_at(ks, &g_rules, tok, NOW, &id, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "JWT kid 'enc1' not in JWKS");
    free(tok);
    tok = sign_token(HDR_ES, CL_GOOD, S_ES256, g_ec);
    assert_int_equal(verify_at(ks, &g_rules, tok, NOW, &id, &e), HSMCA_OK);
    free(tok);
    fe_jwks_free(ks);
    free(doc);
}

/* ---- dev_jwt --------------------------------------------------------------------- */

static char *read_all(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    char *buf = NULL;
    hsmca_err e;
    if (util_read_file(path, 1 << 20, &buf, NULL, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    return buf;
}

static void test_dev_jwt_roundtrip(void **state)
{
    char *dir = tu_mkdtemp("jwt");
    hsmca_err e;
    if (dev_jwt_setup(dir, &e) != HSMCA_OK)
        fail_msg("dev_jwt_setup: %s", e.msg);

    char path[1024];
    struct stat st;
    snprintf(path, sizeof(path), "%s/dev-jwt-key.pem", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *key1 = read_all(dir, "dev-jwt-key.pem");
    assert_non_null(strstr(key1, "-----BEGIN PRIVATE KEY-----")); /* PKCS#8 */
    char *jwks1 = read_all(dir, "dev-jwks.json");

    fe_jwks *ks = jwks_ok(jwks1);
    char *tok = dev_jwt_mint(dir, DEV_JWT_ISSUER, "istio-ca", "default", "sleep", 600, &e);
    if (!tok)
        fail_msg("dev_jwt_mint: %s", e.msg);
    static const char *const auds[] = {"istio-ca"};
    fe_jwt_rules r = {DEV_JWT_ISSUER, auds, 1, SKEW};
    fe_jwt_identity id;
    int64_t now = util_wall_now();
    if (verify_at(ks, &r, tok, now, &id, &e) != HSMCA_OK)
        fail_msg("minted token refused: %s", e.msg);
    assert_string_equal(id.ns, "default");
    assert_string_equal(id.sa, "sleep");
    /* exp = now + ttl: refused once ttl + skew has passed */
    assert_int_equal(verify_at(ks, &r, tok, now + 600 + SKEW + 5, &id, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "JWT expired");

    /* the header's kid is the JWKS kid */
    size_t hl;
    uint8_t *hdr = util_b64url_decode(tok, (size_t)(strchr(tok, '.') - tok), &hl);
    assert_non_null(hdr);
    const char *kidp = strstr(jwks1, "\"kid\": \"");
    assert_non_null(kidp);
    char kid[64];
    assert_int_equal(sscanf(kidp + 8, "%63[^\"]", kid), 1);
    assert_int_equal(strlen(kid), 11); /* base64url of 8 bytes */
    char want[128];
    snprintf(want, sizeof(want), "\"kid\":\"%s\"", kid);
    assert_non_null(memmem(hdr, hl, want, strlen(want)));
    free(hdr);

    /* a second setup reuses the key; a lost JWKS is rebuilt identically */
    assert_int_equal(dev_jwt_setup(dir, &e), HSMCA_OK);
    char *key2 = read_all(dir, "dev-jwt-key.pem");
    char *jwks2 = read_all(dir, "dev-jwks.json");
    assert_string_equal(key1, key2);
    assert_string_equal(jwks1, jwks2);
    snprintf(path, sizeof(path), "%s/dev-jwks.json", dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(dev_jwt_setup(dir, &e), HSMCA_OK);
    char *jwks3 = read_all(dir, "dev-jwks.json");
    assert_string_equal(jwks1, jwks3);

    /* another dev dir's key is not trusted by this JWKS */
    char *dir2 = tu_mkdtemp("jwt");
    char *tok2 = dev_jwt_mint(dir2, DEV_JWT_ISSUER, "istio-ca", "default", "sleep", 600, &e);
    assert_null(tok2); /* no key yet: mint does not create one */
    assert_int_equal(dev_jwt_setup(dir2, &e), HSMCA_OK);
    tok2 = dev_jwt_mint(dir2, DEV_JWT_ISSUER, "istio-ca", "default", "sleep", 600, &e);
    assert_non_null(tok2);
    assert_int_equal(verify_at(ks, &r, tok2, now, &id, &e), HSMCA_EAUTH);
    assert_non_null(strstr(e.msg, "not in JWKS"));

    /* names the front end would refuse are refused at mint time, by the same
     * rule (the old dev copy let "a.b" through as a namespace) */
    static const char *const bad_mint[][2] = {{"a/b", "sleep"}, {"a.b", "sleep"},
                                             {"default", "a..b"}, {"-a", "sleep"}};
    for (size_t i = 0; i < sizeof(bad_mint) / sizeof(bad_mint[0]); i++) {
        hsmca_err_clear(&e);
        char *t = dev_jwt_mint(dir, NULL, "istio-ca", bad_mint[i][0], bad_mint[i][1], 600, &e);
        if (t)
            fail_msg("minted a token for %s/%s", bad_mint[i][0], bad_mint[i][1]);
        assert_int_equal(e.code, HSMCA_EINVAL);
    }

    free(tok2);
    free(tok);
    fe_jwks_free(ks);
    free(key1);
    free(key2);
    free(jwks1);
    free(jwks2);
    free(jwks3);
    tu_system("rm -rf '%s' '%s'", dir, dir2);
    free(dir);
    free(dir2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rs256_ok),
        cmocka_unit_test(test_es256_ok),
        cmocka_unit_test(test_identity_from_sub),
        cmocka_unit_test(test_no_kid_single_key_of_type),
        cmocka_unit_test(test_aud_array_ok),
        cmocka_unit_test(test_bad_signature),
        cmocka_unit_test(test_es256_der_signature_refused),
        cmocka_unit_test(test_alg_none),
        cmocka_unit_test(test_hs256_key_confusion),
        cmocka_unit_test(test_alg_kid_type_mismatch),
        cmocka_unit_test(test_unknown_kid),
        cmocka_unit_test(test_typ_not_jwt),
        cmocka_unit_test(test_forbidden_header_fields),
        cmocka_unit_test(test_expired),
        cmocka_unit_test(test_not_yet_valid),
        cmocka_unit_test(test_missing_exp),
        cmocka_unit_test(test_wrong_issuer),
        cmocka_unit_test(test_wrong_audience),
        cmocka_unit_test(test_no_service_account),
        cmocka_unit_test(test_bad_service_account_names),
        cmocka_unit_test(test_two_and_four_parts),
        cmocka_unit_test(test_base64_padding_refused),
        cmocka_unit_test(test_bad_base64_chars),
        cmocka_unit_test(test_header_not_json),
        cmocka_unit_test(test_duplicate_json_keys),
        cmocka_unit_test(test_oversize_token),
        cmocka_unit_test(test_jwks_refusals),
        cmocka_unit_test(test_jwks_skips_enc_key_keeps_sig),
        cmocka_unit_test(test_dev_jwt_roundtrip),
    };
    return cmocka_run_group_tests(tests, setup_keys, teardown_keys);
}

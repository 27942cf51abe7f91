/* test_tok_jwt.c - bearer token verification (token/tok_jwt.h): structure,
 * header, signature, claims and the Kubernetes identity, end to end.
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

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "certasm.h"
#include "tok_jwt.h"
#include "sigfmt.h"
#include "testutil.h"
#include "util.h"

#define NOW 1700000000LL
#define SKEW 60
#define ISS "https://issuer.example"

#define HDR_RS "{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"typ\":\"JWT\"}"
#define HDR_ES "{\"alg\":\"ES256\",\"kid\":\"ec1\"}"
#define CL_K8S                                                                                 \
    "\"sub\":\"system:serviceaccount:foo:bar\","                                                   \
    "\"kubernetes.io\":{\"namespace\":\"foo\",\"serviceaccount\":{\"name\":\"bar\",\"uid\":\"u\"}}"
/* exp = NOW + 600, iat = nbf = NOW - 10 */
#define CL_TIMES "\"exp\":1700000600,\"iat\":1699999990,\"nbf\":1699999990"
#define CL_GOOD "{\"iss\":\"" ISS "\",\"aud\":\"istio-ca\"," CL_TIMES "," CL_K8S "}"

enum { S_RS256, S_ES256, S_ES256_DER, S_NONE, S_HS256 };

static EVP_PKEY *g_rsa, *g_ec, *g_evil_ec;
static tok_jwks *g_jwks; /* rsa1 (RSA-2048) and ec1 (P-256) */

/* ---- helpers: keys, JWKs, tokens ------------------------------------------ */

static char *jwk_ec(EVP_PKEY *k, const char *kid) { return tu_jwk_ec(k, k, kid, "P-256"); }

static char *b64s(const char *s) { return util_b64url_encode((const uint8_t *)s, strlen(s)); }

static char *pubkey_pem(EVP_PKEY *k, size_t *len)
{
    BIO *m = BIO_new(BIO_s_mem());
    assert_int_equal(PEM_write_bio_PUBKEY(m, k), 1);
    char *out = certasm_bio_string(m);
    BIO_free(m);
    assert_non_null(out);
    *len = strlen(out);
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
static const tok_jwt_rules g_rules = {ISS, g_auds, 1, SKEW};

static hsmca_code verify_at(const tok_jwks *ks, const tok_jwt_rules *r, const char *tok,
                            int64_t now, tok_jwt_identity *id, hsmca_err *e)
{
    hsmca_err_clear(e);
    return tok_jwt_verify(ks, r, tok, strlen(tok), now, id, e);
}

static void expect_ok(const char *tok, const char *ns, const char *sa)
{
    tok_jwt_identity id;
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

static void expect_refused_rules(const tok_jwt_rules *r, int64_t now, const char *tok,
                                 size_t len, const char *want)
{
    tok_jwt_identity id;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = tok_jwt_verify(g_jwks, r, tok, len, now, &id, &e);
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

static int setup_keys(void **state)
{
    g_rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    g_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    g_evil_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (!g_rsa || !g_ec || !g_evil_ec)
        return -1;
    char *doc = tu_jwks_doc(tu_jwk_rsa(g_rsa, "rsa1"), jwk_ec(g_ec, "ec1"));
    hsmca_err e;
    int rc = tok_jwks_parse(doc, strlen(doc), &g_jwks, &e) == HSMCA_OK ? 0 : -1;
    if (rc)
        fprintf(stderr, "setup JWKS refused: %s\n", e.msg);
    free(doc);
    return rc;
}

static int teardown_keys(void **state)
{
    tok_jwks_free(g_jwks);
    EVP_PKEY_free(g_rsa);
    EVP_PKEY_free(g_ec);
    EVP_PKEY_free(g_evil_ec);
    return 0;
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

/* The key choice itself is tok_jwks_pick's (test_tok_jwks); here: its refusals reach the caller. */
static void test_key_choice_refused(void **state)
{
    char *tok = sign_token("{\"alg\":\"RS256\",\"kid\":\"ec1\"}", CL_GOOD, S_RS256, g_rsa);
    expect_refused(tok, "JWT kid 'ec1' names an EC key, alg RS256 needs RSA");
    free(tok);
    tok = sign_token("{\"alg\":\"ES256\",\"kid\":\"a'b\"}", CL_GOOD, S_ES256, g_ec);
    expect_refused(tok, "JWT kid 'a?b' not in JWKS");
    free(tok);
    tok = sign_token("{\"alg\":\"RS256\"}", CL_GOOD, S_RS256, g_rsa);
    expect_ok(tok, "foo", "bar"); /* no kid: the set's only RSA key */
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

/* ---- claims, after the signature ---------------------------------------------- */

/* The claims themselves are tok_claims' (test_tok_claims); here: they are
 * read only once the signature holds, and their refusals quote nothing of the token. */
static void test_claims_after_signature(void **state)
{
    const char *expired = "{\"iss\":\"" ISS "\",\"aud\":\"istio-ca\",\"exp\":1," CL_K8S "}";
    char *tok = sign_token(HDR_RS, expired, S_RS256, g_rsa);
    expect_refused(tok, "JWT expired");
    flip_sig_char(tok);
    expect_refused(tok, "JWT signature does not verify");
    free(tok);
    tok = sign_token(HDR_ES, "{\"iss\":1}", S_ES256, g_evil_ec);
    expect_refused(tok, "JWT signature does not verify");
    free(tok);
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
    size_t padlen = IPC_TOKEN_MAX;
    char *claims = malloc(padlen + 1024);
    int n = snprintf(claims, 1024, "{\"iss\":\"" ISS "\",\"aud\":\"istio-ca\"," CL_TIMES
                                   "," CL_K8S ",\"pad\":\"");
    memset(claims + n, 'x', padlen);
    strcpy(claims + n + padlen, "\"}");
    char *tok = sign_token(HDR_ES, claims, S_ES256, g_ec);
    assert_true(strlen(tok) > IPC_TOKEN_MAX);
    expect_refused(tok, "JWT must be 1-8192 bytes");
    free(tok);
    free(claims);
    expect_refused_rules(&g_rules, NOW, "", 0, "JWT must be 1-8192 bytes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rs256_ok),
        cmocka_unit_test(test_es256_ok),
        cmocka_unit_test(test_bad_signature),
        cmocka_unit_test(test_es256_der_signature_refused),
        cmocka_unit_test(test_alg_none),
        cmocka_unit_test(test_hs256_key_confusion),
        cmocka_unit_test(test_key_choice_refused),
        cmocka_unit_test(test_typ_not_jwt),
        cmocka_unit_test(test_forbidden_header_fields),
        cmocka_unit_test(test_claims_after_signature),
        cmocka_unit_test(test_two_and_four_parts),
        cmocka_unit_test(test_base64_padding_refused),
        cmocka_unit_test(test_bad_base64_chars),
        cmocka_unit_test(test_header_not_json),
        cmocka_unit_test(test_duplicate_json_keys),
        cmocka_unit_test(test_oversize_token),
    };
    return cmocka_run_group_tests(tests, setup_keys, teardown_keys);
}

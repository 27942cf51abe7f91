/* fuzz_jwt.c - libFuzzer target for fe_jwt_verify (frontend/fe_jwt.h).
 *
 * The verifier checks the signature before it parses the claims, so raw
 * mutations of a token never get past the signature. The first input byte
 * therefore picks a mode:
 *   bit 0 clear: the rest is a compact token, verified as it is (framing,
 *                base64url, header, key choice, signature);
 *   bit 0 set:   the rest is "HEADER\nPAYLOAD" (JSON text, or anything); this
 *                target base64url-encodes both and signs them with one of its
 *                own keys (bit 1: 0 = ES256 with "fz-ec", 1 = RS256 with
 *                "fz-rsa"), so the mutations reach the header and claim checks.
 * The keys are generated once at start; the JWKS holding their public halves
 * goes through fe_jwks_parse like a real one. Time, issuer and audience are
 * fixed, so a run is deterministic (the ECDSA nonce is random, but it does not
 * change which of our branches run). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include "fe_jwt.h"
#include "fuzz_common.h"

static EVP_PKEY *g_ec, *g_rsa;
static fe_jwks *g_jwks;
static const char *const g_auds[] = {FUZZ_JWT_AUD};
static const fe_jwt_rules g_rules = {FUZZ_JWT_ISS, g_auds, 1, 60};

/* Unpadded base64url of n bytes into out (room for 4*(n+2)/3 + 1); returns its length. */
static size_t b64url(const uint8_t *in, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = a[(v >> 18) & 63];
        out[o++] = a[(v >> 12) & 63];
        if (i + 1 < n)
            out[o++] = a[(v >> 6) & 63];
        if (i + 2 < n)
            out[o++] = a[v & 63];
    }
    out[o] = '\0';
    return o;
}

/* base64url of a big-endian BIGNUM parameter, left-padded to width bytes (0: minimal). */
static int param_b64(EVP_PKEY *k, const char *name, int width, char *out)
{
    BIGNUM *bn = NULL;
    uint8_t buf[1024];
    if (!EVP_PKEY_get_bn_param(k, name, &bn))
        return 0;
    int n = width ? width : BN_num_bytes(bn);
    int ok = n > 0 && n <= (int)sizeof(buf) && BN_bn2binpad(bn, buf, n) == n;
    if (ok)
        b64url(buf, (size_t)n, out);
    BN_free(bn);
    return ok;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static char x[64], y[64], n[400], e[16], doc[1024];
    g_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    g_rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    if (!g_ec || !g_rsa || !param_b64(g_ec, OSSL_PKEY_PARAM_EC_PUB_X, 32, x) ||
        !param_b64(g_ec, OSSL_PKEY_PARAM_EC_PUB_Y, 32, y) ||
        !param_b64(g_rsa, OSSL_PKEY_PARAM_RSA_N, 0, n) ||
        !param_b64(g_rsa, OSSL_PKEY_PARAM_RSA_E, 0, e))
        abort();
    int len = snprintf(doc, sizeof(doc),
                       "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"fz-ec\",\"x\":\"%s\","
                       "\"y\":\"%s\"},{\"kty\":\"RSA\",\"kid\":\"fz-rsa\",\"n\":\"%s\",\"e\":\"%s\","
                       "\"alg\":\"RS256\",\"use\":\"sig\"}]}",
                       x, y, n, e);
    hsmca_err err;
    if (len <= 0 || (size_t)len >= sizeof(doc) ||
        fe_jwks_parse(doc, (size_t)len, &g_jwks, &err) != HSMCA_OK)
        abort();
    return 0;
}

/* JOSE ES256 wants r||s, 32 bytes each; EVP gives a DER ECDSA-Sig-Value. */
static int es256_raw(const uint8_t *der, size_t derlen, uint8_t out[64])
{
    const unsigned char *p = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)derlen);
    if (!sig)
        return 0;
    const BIGNUM *r, *s;
    ECDSA_SIG_get0(sig, &r, &s);
    int ok = BN_bn2binpad(r, out, 32) == 32 && BN_bn2binpad(s, out + 32, 32) == 32;
    ECDSA_SIG_free(sig);
    return ok;
}

/* Builds HEADER.PAYLOAD.SIG from the raw parts, signed with our key. Caller frees. */
static char *mint(const uint8_t *hdr, size_t hlen, const uint8_t *pl, size_t plen, int rsa,
                  size_t *outlen)
{
    size_t cap = 4 * (hlen + plen + 512 + 4) / 3 + 16;
    char *tok = malloc(cap);
    if (!tok)
        return NULL;
    size_t o = b64url(hdr, hlen, tok);
    tok[o++] = '.';
    o += b64url(pl, plen, tok + o);
    uint8_t sig[512], raw[64];
    size_t siglen = sizeof(sig);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, rsa ? g_rsa : g_ec) == 1 &&
             EVP_DigestSign(md, sig, &siglen, (const uint8_t *)tok, o) == 1;
    EVP_MD_CTX_free(md);
    if (ok && !rsa) {
        ok = es256_raw(sig, siglen, raw);
        memcpy(sig, raw, sizeof(raw));
        siglen = sizeof(raw);
    }
    if (!ok) {
        free(tok);
        return NULL;
    }
    tok[o++] = '.';
    o += b64url(sig, siglen, tok + o);
    *outlen = o;
    return tok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > FE_JWT_MAX_LEN + 1)
        return 0;
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    char *tok;
    size_t len;
    if (data[0] & 1) {
        const uint8_t *nl = memchr(rest, '\n', n);
        size_t hlen = nl ? (size_t)(nl - rest) : 0;
        size_t poff = nl ? hlen + 1 : 0;
        tok = mint(rest, hlen, rest + poff, n - poff, data[0] & 2, &len);
    } else {
        tok = malloc(n ? n : 1); /* exactly n bytes, so ASan sees any overread */
        if (tok)
            memcpy(tok, rest, n);
        len = n;
    }
    if (!tok)
        return 0;

    fe_jwt_identity id;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (fe_jwt_verify(g_jwks, &g_rules, tok, len, FUZZ_NOW, &id, &e) == HSMCA_OK) {
        /* An accepted token names a namespace and an account, as C strings that
         * cannot change the structure of the SPIFFE ID they are pasted into. */
        if (!memchr(id.ns, '\0', sizeof(id.ns)) || !memchr(id.sa, '\0', sizeof(id.sa)) ||
            !id.ns[0] || !id.sa[0] || strlen(id.ns) > 63 || strpbrk(id.ns, "/:?#%@.") ||
            strpbrk(id.sa, "/:?#%@"))
            abort();
    } else if (e.code != HSMCA_EAUTH || e.msg[0] == '\0') {
        abort(); /* every refusal is UNAUTHENTICATED and names its check */
    }
    free(tok);
    return 0;
}

/* fuzz_jwt.c - libFuzzer target for tok_jwt_verify (token/tok_jwt.h).
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
 * goes through tok_jwks_parse like a real one. Time, issuer and audience are
 * fixed, so a run is deterministic (the ECDSA nonce is random, but it does not
 * change which of our branches run). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>

#include "tok_jwt.h"
#include "fuzz_common.h"
#include "sigfmt.h"

static EVP_PKEY *g_ec, *g_rsa;
static tok_jwks *g_jwks;
static const char *const g_auds[] = {FUZZ_JWT_AUD};
static const tok_jwt_rules g_rules = {FUZZ_JWT_ISS, g_auds, 1, 60};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static char doc[1024];
    g_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    g_rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    if (!g_ec || !g_rsa)
        abort();
    char *x = sigfmt_jwk_param(g_ec, OSSL_PKEY_PARAM_EC_PUB_X, 32);
    char *y = sigfmt_jwk_param(g_ec, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
    char *n = sigfmt_jwk_param(g_rsa, OSSL_PKEY_PARAM_RSA_N, 0);
    char *e = sigfmt_jwk_param(g_rsa, OSSL_PKEY_PARAM_RSA_E, 0);
    if (!x || !y || !n || !e)
        abort();
    int len = snprintf(doc, sizeof(doc),
                       "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"fz-ec\",\"x\":\"%s\","
                       "\"y\":\"%s\"},{\"kty\":\"RSA\",\"kid\":\"fz-rsa\",\"n\":\"%s\",\"e\":\"%s\","
                       "\"alg\":\"RS256\",\"use\":\"sig\"}]}",
                       x, y, n, e);
    free(x);
    free(y);
    free(n);
    free(e);
    hsmca_err err;
    if (len <= 0 || (size_t)len >= sizeof(doc) ||
        tok_jwks_parse(doc, (size_t)len, &g_jwks, &err) != HSMCA_OK)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > IPC_TOKEN_MAX + 1)
        return 0;
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    char *tok;
    size_t len;
    if (data[0] & 1) {
        const uint8_t *nl = memchr(rest, '\n', n);
        size_t hlen = nl ? (size_t)(nl - rest) : 0;
        size_t poff = nl ? hlen + 1 : 0;
        tok = sigfmt_jws_compact(data[0] & 2 ? g_rsa : g_ec, rest, hlen, rest + poff, n - poff);
        len = tok ? strlen(tok) : 0;
    } else {
        tok = malloc(n ? n : 1); /* exactly n bytes, so ASan sees any overread */
        if (tok)
            memcpy(tok, rest, n);
        len = n;
    }
    if (!tok)
        return 0;

    tok_jwt_identity id;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (tok_jwt_verify(g_jwks, &g_rules, tok, len, FUZZ_NOW, &id, &e) == HSMCA_OK) {
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

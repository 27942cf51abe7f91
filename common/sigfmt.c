/* sigfmt.c - see sigfmt.h. */
#include "sigfmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/ec.h>

#include "util.h"

hsmca_code sigfmt_ecdsa_raw_to_der(const uint8_t *raw, size_t rawlen, uint8_t *der,
                                   size_t *derlen, hsmca_err *e)
{
    if (rawlen == 0 || rawlen % 2 || rawlen > SIGFMT_ECDSA_RAW_MAX)
        return hsmca_fail(e, HSMCA_EINTERNAL, "ECDSA signature: r||s of %zu bytes", rawlen);
    ECDSA_SIG *es = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, (int)(rawlen / 2), NULL);
    BIGNUM *s = BN_bin2bn(raw + rawlen / 2, (int)(rawlen / 2), NULL);
    if (!es || !r || !s || ECDSA_SIG_set0(es, r, s) != 1) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(es);
        return hsmca_fail(e, HSMCA_ENOMEM, "ECDSA signature: out of memory");
    }
    hsmca_code rc = HSMCA_OK;
    int n = i2d_ECDSA_SIG(es, NULL);
    if (n <= 0) {
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "ECDSA signature: i2d_ECDSA_SIG failed");
    } else if ((size_t)n > *derlen) {
        rc = hsmca_fail(e, HSMCA_EINVAL, "ECDSA signature: buffer too small");
    } else {
        uint8_t *p = der;
        *derlen = (size_t)i2d_ECDSA_SIG(es, &p);
    }
    ECDSA_SIG_free(es); /* frees r and s */
    return rc;
}

hsmca_code sigfmt_ecdsa_der_to_raw(const uint8_t *der, size_t derlen, size_t half, uint8_t *raw,
                                   hsmca_err *e)
{
    const unsigned char *p = der;
    if (half == 0 || half > SIGFMT_ECDSA_RAW_MAX / 2 || derlen > SIGFMT_ECDSA_DER_MAX)
        return hsmca_fail(e, HSMCA_EINVAL, "ECDSA signature: unsupported size");
    ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)derlen);
    hsmca_code rc = HSMCA_OK;
    if (!es || p != der + derlen)
        rc = hsmca_fail(e, HSMCA_EINVAL, "ECDSA signature: not one DER ECDSA-Sig-Value");
    else if (BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, (int)half) != (int)half ||
             BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + half, (int)half) != (int)half)
        rc = hsmca_fail(e, HSMCA_EINVAL, "ECDSA signature: r or s longer than %zu bytes", half);
    ECDSA_SIG_free(es);
    return rc;
}

/* ES256 is ECDSA on P-256 only; another curve with a 64-byte r||s is not ES256. */
static int is_p256(EVP_PKEY *key)
{
    char group[32] = "";
    size_t gl = 0;
    return EVP_PKEY_is_a(key, "EC") &&
           EVP_PKEY_get_group_name(key, group, sizeof(group), &gl) == 1 &&
           strcmp(group, "prime256v1") == 0;
}

char *sigfmt_jws_sign(EVP_PKEY *key, const char *input, size_t len)
{
    int ec = key && is_p256(key);
    if (!key || (!ec && !EVP_PKEY_is_a(key, "RSA")))
        return NULL;
    uint8_t sig[1024], raw[SIGFMT_ES256_LEN]; /* RSA up to 8192 bits */
    size_t sl = sizeof(sig);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && EVP_PKEY_get_size(key) <= (int)sizeof(sig) &&
             EVP_DigestSignInit_ex(md, NULL, "SHA256", NULL, NULL, key, NULL) == 1 &&
             EVP_DigestSign(md, sig, &sl, (const unsigned char *)input, len) == 1;
    EVP_MD_CTX_free(md);
    if (ok && ec)
        ok = sigfmt_ecdsa_der_to_raw(sig, sl, SIGFMT_ES256_LEN / 2, raw, NULL) == HSMCA_OK;
    if (!ok)
        return NULL;
    return ec ? util_b64url_encode(raw, sizeof(raw)) : util_b64url_encode(sig, sl);
}

char *sigfmt_jws_compact(EVP_PKEY *key, const void *hdr, size_t hlen, const void *payload,
                         size_t plen)
{
    char *h = util_b64url_encode(hdr, hlen), *p = util_b64url_encode(payload, plen);
    char *input = NULL, *sig = NULL, *tok = NULL;
    if (h && p && (input = malloc(strlen(h) + strlen(p) + 2)) != NULL) {
        int n = sprintf(input, "%s.%s", h, p);
        sig = n > 0 ? sigfmt_jws_sign(key, input, (size_t)n) : NULL;
    }
    if (sig && (tok = malloc(strlen(input) + strlen(sig) + 2)) != NULL)
        sprintf(tok, "%s.%s", input, sig);
    free(h);
    free(p);
    free(input);
    free(sig);
    return tok;
}

hsmca_code sigfmt_jws_verify(EVP_PKEY *key, const char *input, size_t len, const uint8_t *sig,
                             size_t siglen, hsmca_err *e)
{
    uint8_t der[SIGFMT_ECDSA_DER_MAX];
    size_t dl = sizeof(der);
    if (key && is_p256(key)) {
        if (siglen != SIGFMT_ES256_LEN)
            return hsmca_fail(e, HSMCA_EAUTH, "JWT ES256 signature must be %d bytes (r||s)",
                              SIGFMT_ES256_LEN);
        if (sigfmt_ecdsa_raw_to_der(sig, siglen, der, &dl, NULL) != HSMCA_OK)
            return hsmca_fail(e, HSMCA_EAUTH, "JWT ES256 signature cannot be converted");
        sig = der;
        siglen = dl;
    } else if (!key || !EVP_PKEY_is_a(key, "RSA")) {
        return hsmca_fail(e, HSMCA_EAUTH, "JWT key is neither RSA nor EC P-256");
    } else if (siglen != (size_t)EVP_PKEY_get_size(key)) {
        return hsmca_fail(e, HSMCA_EAUTH, "JWT RS256 signature length does not match the key");
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && EVP_DigestVerifyInit_ex(md, NULL, "SHA256", NULL, NULL, key, NULL) == 1 &&
             EVP_DigestVerify(md, sig, siglen, (const unsigned char *)input, len) == 1;
    EVP_MD_CTX_free(md);
    if (!ok)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT signature does not verify");
    return HSMCA_OK;
}

char *sigfmt_jwk_param(EVP_PKEY *key, const char *param, size_t width)
{
    BIGNUM *bn = NULL;
    uint8_t buf[1024]; /* RSA-8192 */
    char *out = NULL;
    if (EVP_PKEY_get_bn_param(key, param, &bn) == 1) {
        int n = width ? (int)width : BN_num_bytes(bn);
        if (n > 0 && (size_t)n <= sizeof(buf) && BN_bn2binpad(bn, buf, n) == n)
            out = util_b64url_encode(buf, (size_t)n);
    }
    BN_free(bn);
    return out;
}

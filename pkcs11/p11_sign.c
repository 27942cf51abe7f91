/* p11_sign.c - one raw C_Sign over a SHA-256 digest, and the conversion of
 * the token's output into the encoding X.509 signatures carry. */
#include "p11_int.h"
#include <string.h>

#include "sigfmt.h"

/* DigestInfo prefix for SHA-256 (RFC 8017 §9.2 note 1): CKM_RSA_PKCS signs
 * whatever it is given, so we build the EMSA-PKCS1-v1_5 input ourselves. */
static const uint8_t sha256_prefix[19] = {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60,
                                          0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02,
                                          0x01, 0x05, 0x00, 0x04, 0x20};

CK_RV p11_sign_raw(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_KEY_TYPE kt,
                   const uint8_t digest[32], uint8_t *raw, CK_ULONG *rawlen)
{
    uint8_t in[sizeof(sha256_prefix) + 32];
    CK_ULONG inlen;
    CK_MECHANISM mech = {CKM_ECDSA, NULL, 0};
    if (kt == CKK_RSA) {
        mech.mechanism = CKM_RSA_PKCS;
        memcpy(in, sha256_prefix, sizeof(sha256_prefix));
        memcpy(in + sizeof(sha256_prefix), digest, 32);
        inlen = sizeof(in);
    } else {
        memcpy(in, digest, 32);
        inlen = 32;
    }
    CK_RV rv = m->fl->C_SignInit(s, &mech, key);
    if (rv != CKR_OK)
        return rv;
    return m->fl->C_Sign(s, in, inlen, raw, rawlen);
}

hsmca_code p11_sig_encode(CK_KEY_TYPE kt, const uint8_t *raw, size_t rawlen, uint8_t *sig,
                          size_t *siglen, hsmca_err *e)
{
    if (kt == CKK_RSA) {
        if (rawlen > *siglen)
            return hsmca_fail(e, HSMCA_EINVAL, "sign: signature buffer too small");
        memcpy(sig, raw, rawlen);
        *siglen = rawlen;
        return HSMCA_OK;
    }
    /* CKM_ECDSA gives r||s, each half the size of the group order. */
    return sigfmt_ecdsa_raw_to_der(raw, rawlen, sig, siglen, e);
}

int p11_verify_digest(EVP_PKEY *pub, const uint8_t digest[32], const uint8_t *sig, size_t siglen)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pub, NULL);
    int ok = ctx && EVP_PKEY_verify_init(ctx) == 1 &&
             EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) == 1 &&
             EVP_PKEY_verify(ctx, sig, siglen, digest, 32) == 1;
    EVP_PKEY_CTX_free(ctx);
    return ok;
}

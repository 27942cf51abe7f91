/* p11_sign.c - one raw C_Sign over a digest, as common/sigalg.h prescribes, and the conversion of
 * the token's output into the encoding X.509 signatures carry. */
#include "p11_int.h"
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <string.h>

_Static_assert(SIGALG_CKM_ECDSA == CKM_ECDSA && SIGALG_CKM_RSA_PKCS == CKM_RSA_PKCS,
               "sigalg.h mechanism values are PKCS#11's");

CK_RV p11_sign_raw(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, const sigalg *alg,
                   const uint8_t *digest, uint8_t *raw, CK_ULONG *rawlen)
{
    /* The token signs exactly what the table says: the digest, preceded by the
     * DigestInfo for PKCS#1 v1.5. */
    uint8_t in[64 + 48];
    if (alg->digest_info_len + alg->digest_len > sizeof(in))
        return CKR_GENERAL_ERROR;
    memcpy(in, alg->digest_info ? alg->digest_info : in, alg->digest_info_len);
    memcpy(in + alg->digest_info_len, digest, alg->digest_len);
    CK_MECHANISM mech = {alg->mechanism, NULL, 0};
    CK_RV rv = m->fl->C_SignInit(s, &mech, key);
    if (rv != CKR_OK)
        return rv;
    return m->fl->C_Sign(s, in, (CK_ULONG)(alg->digest_info_len + alg->digest_len), raw, rawlen);
}

hsmca_code p11_sig_encode(const sigalg *alg, const uint8_t *raw, size_t rawlen, uint8_t *sig,
                          size_t *siglen, hsmca_err *e)
{
    if (alg->mechanism == CKM_RSA_PKCS) {
        if (rawlen > *siglen)
            return hsmca_fail(e, HSMCA_EINVAL, "sign: signature buffer too small");
        memcpy(sig, raw, rawlen);
        *siglen = rawlen;
        return HSMCA_OK;
    }
    /* CKM_ECDSA gives r||s, each half the size of the group order. */
    if (rawlen == 0 || rawlen % 2 || rawlen > 132)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sign: ECDSA signature of %zu bytes", rawlen);
    hsmca_code c = HSMCA_OK;
    ECDSA_SIG *es = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, (int)(rawlen / 2), NULL);
    BIGNUM *s = BN_bin2bn(raw + rawlen / 2, (int)(rawlen / 2), NULL);
    if (!es || !r || !s || !ECDSA_SIG_set0(es, r, s)) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(es);
        return hsmca_fail(e, HSMCA_ENOMEM, "sign: out of memory");
    }
    int n = i2d_ECDSA_SIG(es, NULL);
    if (n <= 0) {
        c = hsmca_fail(e, HSMCA_EINTERNAL, "sign: i2d_ECDSA_SIG failed");
    } else if ((size_t)n > *siglen) {
        c = hsmca_fail(e, HSMCA_EINVAL, "sign: signature buffer too small");
    } else {
        uint8_t *p = sig;
        *siglen = (size_t)i2d_ECDSA_SIG(es, &p);
    }
    ECDSA_SIG_free(es);
    return c;
}

/* p11_sign.c - one raw C_Sign over a digest, as common/sigalg.h prescribes, and the conversion of
 * the token's output into the encoding X.509 signatures carry. */
#include "p11_int.h"
#include <string.h>

#include "sigfmt.h"

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
    return sigfmt_ecdsa_raw_to_der(raw, rawlen, sig, siglen, e);
}

/* p11_key.c - finding the private key a URI names, checking that it may serve
 * in its role (the CA key, or the audit key: Ed25519 or EC), and
 * building its public half as an EVP_PKEY. */
#include "p11_int.h"
#include "util.h"
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RSA_MIN_BITS 2048
#define RSA_MAX_BYTES 1024 /* 8192-bit modulus */

/* Defined here, beside the checks that read them, so that the signer, which links
 * this file, does not take p11_keygen.c (token set-up, key generation) with them. */
const uint8_t p11_oid_p256[10] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
const uint8_t p11_oid_p384[7] = {0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22};
const uint8_t p11_oid_ed25519[5] = {0x06, 0x03, 0x2b, 0x65, 0x70};
const uint8_t p11_name_ed25519[14] = {0x13, 0x0c, 'e', 'd', 'w', 'a', 'r', 'd', 's', '2', '5', '5', '1', '9'};

/* A short name for the key in messages: its label, else its id in hex. */
static void key_name(const p11_uri *u, char *out, size_t outsz)
{
    if (u->object[0]) {
        snprintf(out, outsz, "%s", u->object);
    } else {
        char hex[2 * sizeof(u->id) + 1];
        util_hex(u->id, u->id_len, hex);
        snprintf(out, outsz, "id=%s", hex);
    }
}

static EVP_PKEY *pkey_from_params(const char *alg, OSSL_PARAM *params)
{
    EVP_PKEY *pk = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, alg, NULL);
    if (!ctx || EVP_PKEY_fromdata_init(ctx) <= 0 ||
        EVP_PKEY_fromdata(ctx, &pk, EVP_PKEY_PUBLIC_KEY, params) <= 0)
        pk = NULL;
    EVP_PKEY_CTX_free(ctx);
    if (pk) {
        /* The point must be on the curve / the modulus sane before we trust it. */
        EVP_PKEY_CTX *chk = EVP_PKEY_CTX_new_from_pkey(NULL, pk, NULL);
        if (!chk || EVP_PKEY_public_check(chk) != 1) {
            EVP_PKEY_free(pk);
            pk = NULL;
        }
        EVP_PKEY_CTX_free(chk);
    }
    return pk;
}

/* CKA_EC_POINT is a DER OCTET STRING around the point (PKCS#11 2.40); some
 * modules return the bare point. Accept both, for an uncompressed point only. */
static HSMCA_MUSTCHECK hsmca_code ec_pub(const char *name, const uint8_t *params, size_t plen, const uint8_t *pt,
                         size_t ptlen, EVP_PKEY **out, hsmca_err *e)
{
    const char *group;
    size_t want;
    if (plen == sizeof(p11_oid_p256) && memcmp(params, p11_oid_p256, plen) == 0) {
        group = "prime256v1";
        want = 65;
    } else if (plen == sizeof(p11_oid_p384) && memcmp(params, p11_oid_p384, plen) == 0) {
        group = "secp384r1";
        want = 97;
    } else {
        return hsmca_fail(e, HSMCA_EPERM, "key check (%s): curve is not P-256 or P-384", name);
    }
    if (ptlen == want + 2 && pt[0] == 0x04 && pt[1] == want) {
        pt += 2;
        ptlen -= 2;
    }
    if (ptlen != want || pt[0] != 0x04)
        return hsmca_fail(e, HSMCA_EPERM, "key check (%s): CKA_EC_POINT malformed", name);
    OSSL_PARAM p[3];
    p[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)group, 0);
    p[1] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)pt, ptlen);
    p[2] = OSSL_PARAM_construct_end();
    *out = pkey_from_params("EC", p);
    if (!*out)
        return hsmca_fail(e, HSMCA_EPERM, "key check (%s): CKA_EC_POINT is not a valid point",
                          name);
    return HSMCA_OK;
}

static int is_ed25519_params(const uint8_t *p, size_t n)
{
    return (n == sizeof(p11_oid_ed25519) && memcmp(p, p11_oid_ed25519, n) == 0) ||
           (n == sizeof(p11_name_ed25519) && memcmp(p, p11_name_ed25519, n) == 0);
}

/* Ed25519: both halves' CKA_EC_PARAMS must name edwards25519 (in either
 * form: SoftHSM gives the two halves different ones), and CKA_EC_POINT is the
 * 32-byte key, in a DER OCTET STRING (04 20 || key) or bare. */
static HSMCA_MUSTCHECK hsmca_code ed25519_pub(const char *name, const uint8_t *pub_params,
                                              size_t pub_plen, const uint8_t *priv_params,
                                              size_t priv_plen, const uint8_t *pt, size_t ptlen,
                                              EVP_PKEY **out, hsmca_err *e)
{
    if (!is_ed25519_params(pub_params, pub_plen) || !is_ed25519_params(priv_params, priv_plen))
        return hsmca_fail(e, HSMCA_EPERM, "key check (%s): curve is not edwards25519", name);
    if (ptlen == 34 && pt[0] == 0x04 && pt[1] == 32) {
        pt += 2;
        ptlen -= 2;
    }
    if (ptlen != 32)
        return hsmca_fail(e, HSMCA_EPERM, "key check (%s): CKA_EC_POINT malformed", name);
    *out = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pt, ptlen);
    if (!*out)
        return hsmca_fail(e, HSMCA_EPERM, "key check (%s): not a valid Ed25519 public key", name);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code rsa_pub(const char *name, const uint8_t *n, size_t nlen, const uint8_t *ex,
                          size_t elen, EVP_PKEY **out, hsmca_err *e)
{
    hsmca_code c = HSMCA_OK;
    BIGNUM *bn = BN_bin2bn(n, (int)nlen, NULL), *be = BN_bin2bn(ex, (int)elen, NULL);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *p = NULL;
    *out = NULL;
    if (!bn || !be || !bld || !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) ||
        !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) ||
        !(p = OSSL_PARAM_BLD_to_param(bld))) {
        c = hsmca_fail(e, HSMCA_ENOMEM, "key check (%s): out of memory", name);
        goto out;
    }
    if (BN_num_bits(bn) < RSA_MIN_BITS) {
        c = hsmca_fail(e, HSMCA_EPERM, "key check (%s): RSA modulus is %d bits, below %d", name,
                       BN_num_bits(bn), RSA_MIN_BITS);
        goto out;
    }
    *out = pkey_from_params("RSA", p);
    if (!*out)
        c = hsmca_fail(e, HSMCA_EPERM, "key check (%s): RSA public key invalid", name);
out:
    OSSL_PARAM_free(p);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    return c;
}

/* The flags a CA key (and the audit key) must carry: each refusal names its attribute. */
static HSMCA_MUSTCHECK hsmca_code check_flags(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h,
                              const char *name, hsmca_err *e)
{
    static const struct {
        CK_ATTRIBUTE_TYPE t;
        const char *attr;
        int want;
    } checks[] = {
        {CKA_SENSITIVE, "CKA_SENSITIVE", 1},
        {CKA_EXTRACTABLE, "CKA_EXTRACTABLE", 0},
        {CKA_SIGN, "CKA_SIGN", 1},
    };
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
        int v;
        CK_RV rv = p11_get_bool(m, s, h, checks[i].t, &v);
        if (rv != CKR_OK) {
            char what[160];
            snprintf(what, sizeof(what), "key check (%.64s): reading %s", name, checks[i].attr);
            return p11_fail_rv(e, HSMCA_EPERM, what, rv);
        }
        if (v != checks[i].want)
            return hsmca_fail(e, HSMCA_EPERM, "key check (%s): %s is %s", name, checks[i].attr,
                              v ? "TRUE" : "FALSE");
    }
    return HSMCA_OK;
}

/* Exactly one object of a class must match; otherwise the message names it. */
static HSMCA_MUSTCHECK hsmca_code find_one(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls,
                           const char *label, const uint8_t *id, size_t id_len, const char *what,
                           const char *name, const char *token, CK_OBJECT_HANDLE *h, hsmca_err *e)
{
    CK_OBJECT_HANDLE hs[2];
    CK_ULONG n = 0;
    CK_RV rv = p11_find_objects(m, s, cls, label, id, id_len, hs, 2, &n);
    if (rv != CKR_OK)
        return p11_fail_rv(e, HSMCA_EINTERNAL, "C_FindObjects", rv);
    if (n == 0)
        return hsmca_fail(e, HSMCA_ENOTFOUND, "%s '%s' not found in token '%s'", what, name,
                          token);
    if (n > 1)
        return hsmca_fail(e, HSMCA_EINVAL, "%s '%s': more than one object matches in token '%s'",
                          what, name, token);
    *h = hs[0];
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code build_pub(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE priv,
                            CK_OBJECT_HANDLE pubh, CK_KEY_TYPE kt, const char *name, EVP_PKEY **pub,
                            hsmca_err *e)
{
    uint8_t *a = NULL, *b = NULL, *c2 = NULL;
    size_t alen, blen, c2len;
    hsmca_code c;
    CK_RV rv;
    if (kt == CKK_EC || kt == CKK_EC_EDWARDS) {
        if ((rv = p11_get_attr(m, s, pubh, CKA_EC_PARAMS, &a, &alen, 64)) != CKR_OK ||
            (rv = p11_get_attr(m, s, pubh, CKA_EC_POINT, &b, &blen, 256)) != CKR_OK ||
            (rv = p11_get_attr(m, s, priv, CKA_EC_PARAMS, &c2, &c2len, 64)) != CKR_OK) {
            c = p11_fail_rv(e, HSMCA_EPERM, "key check: reading EC attributes", rv);
        } else if (kt == CKK_EC_EDWARDS) {
            c = ed25519_pub(name, a, alen, c2, c2len, b, blen, pub, e);
        } else if (alen != c2len || memcmp(a, c2, alen) != 0) {
            c = hsmca_fail(e, HSMCA_EPERM,
                           "key check (%s): public and private CKA_EC_PARAMS differ", name);
        } else {
            c = ec_pub(name, a, alen, b, blen, pub, e);
        }
    } else {
        if ((rv = p11_get_attr(m, s, pubh, CKA_MODULUS, &a, &alen, RSA_MAX_BYTES)) != CKR_OK ||
            (rv = p11_get_attr(m, s, pubh, CKA_PUBLIC_EXPONENT, &b, &blen, 16)) != CKR_OK)
            c = p11_fail_rv(e, HSMCA_EPERM, "key check: reading RSA attributes", rv);
        else
            c = rsa_pub(name, a, alen, b, blen, pub, e);
    }
    free(a);
    free(b);
    free(c2);
    return c;
}

static const char *key_type_name(CK_KEY_TYPE kt)
{
    switch (kt) {
    case CKK_RSA: return "CKK_RSA";
    case CKK_EC: return "CKK_EC";
    case CKK_EC_EDWARDS: return "CKK_EC_EDWARDS";
    default: return "another type";
    }
}

/* The key types a role accepts; the refusal names the type found. */
static HSMCA_MUSTCHECK hsmca_code check_type(p11_key_role role, CK_KEY_TYPE kt, const char *name,
                                             hsmca_err *e)
{
    /* The audit key signs notes: Ed25519, or ECDSA for tokens without EdDSA
     * (build_pub then holds a CKK_EC key to P-256 or P-384). Never RSA: the
     * signed-note formats this log writes have no RSA type. */
    if (role == P11_ROLE_AUDIT) {
        if (kt != CKK_EC_EDWARDS && kt != CKK_EC)
            return hsmca_fail(e, HSMCA_EPERM,
                              "key check (%s): CKA_KEY_TYPE is %s, not CKK_EC_EDWARDS (Ed25519) "
                              "or CKK_EC (P-256, P-384)",
                              name, key_type_name(kt));
        return HSMCA_OK;
    }
    if (kt != CKK_EC && kt != CKK_RSA)
        return hsmca_fail(e, HSMCA_EPERM, "key check (%s): CKA_KEY_TYPE is not EC or RSA", name);
    return HSMCA_OK;
}

hsmca_code p11_key_find_checked(p11_module *m, CK_SESSION_HANDLE s, const p11_uri *u,
                                p11_key_role role, CK_OBJECT_HANDLE *priv, CK_KEY_TYPE *kt,
                                EVP_PKEY **pub, hsmca_err *e)
{
    char name[300];
    CK_OBJECT_HANDLE pubh;
    uint8_t *id = NULL;
    size_t id_len = 0;
    hsmca_code c;
    *pub = NULL;
    if (u->type[0] && strcmp(u->type, "private") != 0)
        return hsmca_fail(e, HSMCA_EINVAL, "key URI: type must be private");
    if (!u->object[0] && !u->id_len)
        return hsmca_fail(e, HSMCA_EINVAL, "key URI: names neither object nor id");
    key_name(u, name, sizeof(name));
    if ((c = find_one(m, s, CKO_PRIVATE_KEY, u->object, u->id, u->id_len, "private key", name,
                      u->token, priv, e)) != HSMCA_OK)
        return c;
    CK_RV rv = p11_get_ulong(m, s, *priv, CKA_KEY_TYPE, kt);
    if (rv != CKR_OK)
        return p11_fail_rv(e, HSMCA_EPERM, "key check: reading CKA_KEY_TYPE", rv);
    if ((c = check_type(role, *kt, name, e)) != HSMCA_OK)
        return c;
    if ((c = check_flags(m, s, *priv, name, e)) != HSMCA_OK)
        return c;
    /* The public half shares the private key's CKA_ID; without one, its label. */
    if (p11_get_attr(m, s, *priv, CKA_ID, &id, &id_len, 256) == CKR_OK && id_len)
        c = find_one(m, s, CKO_PUBLIC_KEY, NULL, id, id_len, "public key", name, u->token, &pubh,
                     e);
    else
        c = find_one(m, s, CKO_PUBLIC_KEY, u->object, NULL, 0, "public key", name, u->token, &pubh,
                     e);
    free(id);
    if (c != HSMCA_OK)
        return c;
    CK_KEY_TYPE pkt;
    rv = p11_get_ulong(m, s, pubh, CKA_KEY_TYPE, &pkt);
    if (rv != CKR_OK)
        return p11_fail_rv(e, HSMCA_EPERM, "key check: reading public CKA_KEY_TYPE", rv);
    if (pkt != *kt)
        return hsmca_fail(e, HSMCA_EPERM, "key check (%s): public and private key types differ",
                          name);
    return build_pub(m, s, *priv, pubh, *kt, name, pub, e);
}

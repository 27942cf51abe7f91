/* leaf_csr_der.c - see leaf_csr_der.h. */
#include "leaf_csr_der.h"

#include <pthread.h>
#include <string.h>

#include <openssl/asn1t.h>
#include <openssl/core_names.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/params.h>

/* OpenSSL's template macros, which clang-format cannot lay out. */
/* clang-format off */

/* SubjectPublicKeyInfo as read, not decoded (RFC 5280 4.1); its encoding kept. */
typedef struct {
    ASN1_ENCODING enc;
    X509_ALGOR *alg;
    ASN1_BIT_STRING *key;
} LEAF_SPKI;

ASN1_SEQUENCE_enc(LEAF_SPKI, enc, 0) = {
    ASN1_SIMPLE(LEAF_SPKI, alg, X509_ALGOR),
    ASN1_SIMPLE(LEAF_SPKI, key, ASN1_BIT_STRING),
} static_ASN1_SEQUENCE_END_ref(LEAF_SPKI, LEAF_SPKI)

/* CertificationRequestInfo (RFC 2986 4.1), as OpenSSL's X509_REQ_INFO but with
 * the key left alone; its encoding is kept, so the signature is checked over
 * the bytes received. */
typedef struct {
    ASN1_ENCODING enc;
    ASN1_INTEGER *version;
    X509_NAME *subject;
    LEAF_SPKI *spki;
    STACK_OF(X509_ATTRIBUTE) *attributes;
} LEAF_REQ_INFO;

ASN1_SEQUENCE_enc(LEAF_REQ_INFO, enc, 0) = {
    ASN1_SIMPLE(LEAF_REQ_INFO, version, ASN1_INTEGER),
    ASN1_SIMPLE(LEAF_REQ_INFO, subject, X509_NAME),
    ASN1_SIMPLE(LEAF_REQ_INFO, spki, LEAF_SPKI),
    /* OPTIONAL as in OpenSSL's X509_REQ_INFO (it tolerates requests without it) */
    ASN1_IMP_SET_OF_OPT(LEAF_REQ_INFO, attributes, X509_ATTRIBUTE, 0),
} static_ASN1_SEQUENCE_END_ref(LEAF_REQ_INFO, LEAF_REQ_INFO)

struct leaf_csr_der {
    LEAF_REQ_INFO *info;
    X509_ALGOR *sig_alg;
    ASN1_BIT_STRING *sig;
};

ASN1_SEQUENCE(LEAF_REQ) = {
    ASN1_SIMPLE(leaf_csr_der, info, LEAF_REQ_INFO),
    ASN1_SIMPLE(leaf_csr_der, sig_alg, X509_ALGOR),
    ASN1_SIMPLE(leaf_csr_der, sig, ASN1_BIT_STRING),
} static_ASN1_SEQUENCE_END_name(leaf_csr_der, LEAF_REQ)

leaf_csr_der *leaf_csr_der_decode(const uint8_t *der, size_t len, size_t *used)
/* clang-format on */
{
    const unsigned char *p = der;
    if (!der || len == 0 || len > 0x7fffffff)
        return NULL;
    leaf_csr_der *r = (leaf_csr_der *)ASN1_item_d2i(NULL, &p, (long)len, ASN1_ITEM_rptr(LEAF_REQ));
    if (!r)
        return NULL;
    if (!r->info->attributes && !(r->info->attributes = sk_X509_ATTRIBUTE_new_null())) {
        leaf_csr_der_free(r);
        return NULL;
    }
    *used = (size_t)(p - der);
    return r;
}

void leaf_csr_der_free(leaf_csr_der *r)
{
    ASN1_item_free((ASN1_VALUE *)r, ASN1_ITEM_rptr(LEAF_REQ));
}

long leaf_csr_der_version(const leaf_csr_der *r)
{
    return ASN1_INTEGER_get(r->info->version);
}

const STACK_OF(X509_ATTRIBUTE) * leaf_csr_der_attributes(const leaf_csr_der *r)
{
    return r->info->attributes;
}

/* The key bits, whole bytes only (a BIT STRING with unused bits holds no key). */
static const unsigned char *key_bits(const LEAF_SPKI *s, int *n)
{
    const ASN1_BIT_STRING *b = s->key;
    if ((b->flags & ASN1_STRING_FLAG_BITS_LEFT) && (b->flags & 0x07))
        return NULL;
    *n = ASN1_STRING_length(b);
    return *n > 0 ? ASN1_STRING_get0_data(b) : NULL;
}

static EVP_PKEY *curve_tmpl[2]; /* P-256, P-384: domain parameters only */
static pthread_once_t curve_tmpl_once = PTHREAD_ONCE_INIT;

static void curve_tmpl_make(void)
{
    static const char *const names[2] = {SN_X9_62_prime256v1, SN_secp384r1};
    for (int i = 0; i < 2; i++) {
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)names[i], 0),
            OSSL_PARAM_construct_end(),
        };
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
        if (!ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
            EVP_PKEY_fromdata(ctx, &curve_tmpl[i], EVP_PKEY_KEY_PARAMETERS, params) != 1)
            curve_tmpl[i] = NULL;
        EVP_PKEY_CTX_free(ctx);
    }
}

static EVP_PKEY *curve_template(int i)
{
    pthread_once(&curve_tmpl_once, curve_tmpl_make);
    return curve_tmpl[i];
}

/* The fast path: id-ecPublicKey on P-256 or P-384 by name, the point imported
 * directly (the import refuses a point that is not on the curve). */
static EVP_PKEY *ec_named_key(const LEAF_SPKI *s, int *tried)
{
    const ASN1_OBJECT *obj = NULL, *curve = NULL;
    int ptype = 0;
    const void *pval = NULL;
    X509_ALGOR_get0(&obj, &ptype, &pval, s->alg);
    *tried = 0;
    if (OBJ_obj2nid(obj) != NID_X9_62_id_ecPublicKey || ptype != V_ASN1_OBJECT)
        return NULL;
    curve = pval;
    int which = OBJ_obj2nid(curve) == NID_X9_62_prime256v1 ? 0
                : OBJ_obj2nid(curve) == NID_secp384r1      ? 1
                                                           : -1;
    if (which < 0)
        return NULL;
    *tried = 1;
    int n = 0;
    const unsigned char *pt = key_bits(s, &n);
    if (!pt)
        return NULL;
    /* A copy of a parameters-only key made once per curve, then the point: building
     * the curve's group from its name for every request cost more than the copy. */
    EVP_PKEY *tmpl = curve_template(which);
    EVP_PKEY *k = tmpl ? EVP_PKEY_dup(tmpl) : NULL;
    if (k && EVP_PKEY_set1_encoded_public_key(k, pt, (size_t)n) != 1) {
        EVP_PKEY_free(k);
        k = NULL;
    }
    return k;
}

EVP_PKEY *leaf_csr_der_pubkey(const leaf_csr_der *r)
{
    int tried = 0;
    EVP_PKEY *k = ec_named_key(r->info->spki, &tried);
    if (k || tried)
        return k;
    /* Anything else through OpenSSL's decoders, as d2i_X509_REQ would. */
    unsigned char *der = NULL;
    int n = ASN1_item_i2d((const ASN1_VALUE *)r->info->spki, &der, ASN1_ITEM_rptr(LEAF_SPKI));
    const unsigned char *p = der;
    k = n > 0 ? d2i_PUBKEY(NULL, &p, n) : NULL;
    if (k && p != der + n) {
        EVP_PKEY_free(k);
        k = NULL;
    }
    OPENSSL_free(der);
    return k;
}

X509_PUBKEY *leaf_csr_der_spki(const leaf_csr_der *r)
{
    const ASN1_OBJECT *obj = NULL;
    int ptype = 0, n = 0;
    const void *pval = NULL;
    X509_ALGOR_get0(&obj, &ptype, &pval, r->info->spki->alg);
    const unsigned char *bits = key_bits(r->info->spki, &n);
    if (!bits || (ptype != V_ASN1_OBJECT && ptype != V_ASN1_NULL && ptype != V_ASN1_UNDEF))
        return NULL;
    X509_PUBKEY *pk = X509_PUBKEY_new();
    ASN1_OBJECT *o = OBJ_dup(obj);
    ASN1_OBJECT *param = ptype == V_ASN1_OBJECT ? OBJ_dup(pval) : NULL;
    unsigned char *copy = OPENSSL_memdup(bits, (size_t)n);
    if (!pk || !o || !copy || (ptype == V_ASN1_OBJECT && !param) ||
        !X509_PUBKEY_set0_param(pk, o, ptype, param, copy, n)) {
        X509_PUBKEY_free(pk);
        ASN1_OBJECT_free(o);
        ASN1_OBJECT_free(param);
        OPENSSL_free(copy);
        return NULL;
    }
    return pk;
}

/* ECDSA with SHA-256 or SHA-384 under an EC key: what ASN1_item_verify does for
 * these algorithms (refuse a signature BIT STRING with unused bits, digest the
 * item's encoding, verify), with the digest and the raw verify called directly on
 * the caller's key context. ASN1_item_verify's EVP_DigestVerify fetches the digest
 * and signature implementations by name for every call and copies its context in
 * EVP_DigestVerifyFinal, work this path does not repeat (docs/PERFORMANCE.md §4).
 * -1: not these algorithms, the generic path decides. */
static int ecdsa_verify(const leaf_csr_der *r, EVP_PKEY *k, EVP_PKEY_CTX *kctx)
{
    const ASN1_OBJECT *obj = NULL;
    X509_ALGOR_get0(&obj, NULL, NULL, r->sig_alg);
    int nid = OBJ_obj2nid(obj);
    const EVP_MD *md = nid == NID_ecdsa_with_SHA256   ? EVP_sha256()
                       : nid == NID_ecdsa_with_SHA384 ? EVP_sha384()
                                                      : NULL;
    if (!md || !kctx || EVP_PKEY_get_base_id(k) != EVP_PKEY_EC)
        return -1;
    if (r->sig->flags & 0x07)
        return 0; /* as ASN1_item_verify: a signature is whole octets */
    unsigned char *tbs = NULL;
    int tbs_len = ASN1_item_i2d((const ASN1_VALUE *)r->info, &tbs, ASN1_ITEM_rptr(LEAF_REQ_INFO));
    unsigned char dgst[EVP_MAX_MD_SIZE];
    unsigned int dgst_len = 0;
    int ok = tbs_len > 0 && EVP_Digest(tbs, (size_t)tbs_len, dgst, &dgst_len, md, NULL) &&
             EVP_PKEY_verify_init(kctx) == 1 &&
             EVP_PKEY_verify(kctx, ASN1_STRING_get0_data(r->sig),
                             (size_t)ASN1_STRING_length(r->sig), dgst, dgst_len) == 1;
    OPENSSL_free(tbs);
    return ok;
}

int leaf_csr_der_verify(const leaf_csr_der *r, EVP_PKEY *k, EVP_PKEY_CTX *kctx)
{
    int fast = ecdsa_verify(r, k, kctx);
    if (fast >= 0)
        return fast;
    /* The same generic check as X509_REQ_verify (algorithm and key must agree); the
     * info's kept encoding is what it hashes. */
    return ASN1_item_verify(ASN1_ITEM_rptr(LEAF_REQ_INFO), r->sig_alg, r->sig, r->info, k) == 1;
}

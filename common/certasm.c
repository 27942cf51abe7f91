/* certasm.c - see certasm.h. */
#include "certasm.h"
#include "sigalg.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/asn1.h>
#include <openssl/crypto.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

int certasm_sig_nid_for_key(const EVP_PKEY *key)
{
    const sigalg *a = sigalg_for_key(key);
    return a ? a->nid : NID_undef;
}

/* The encoding comes from the table (RSA PKCS#1 v1.5 carries explicit NULL
 * parameters, ECDSA none): getting it wrong yields certificates some verifiers
 * reject, and the signer compares the TBS's bytes with the table's. */
static HSMCA_MUSTCHECK hsmca_code set_algor(X509_ALGOR *alg, int sig_nid, hsmca_err *e)
{
    const sigalg *a = sigalg_by_nid(sig_nid);
    ASN1_OBJECT *obj = a ? OBJ_nid2obj(sig_nid) : NULL;
    if (!obj)
        return hsmca_fail(e, HSMCA_EINTERNAL, "unknown signature algorithm %d", sig_nid);
    int ptype = a->key_type == EVP_PKEY_RSA ? V_ASN1_NULL : V_ASN1_UNDEF;
    if (!X509_ALGOR_set0(alg, obj, ptype, NULL))
        return hsmca_fail(e, HSMCA_EINTERNAL, "X509_ALGOR_set0 failed");
    return HSMCA_OK;
}

hsmca_code certasm_tbs_der(X509 *x, int sig_nid, uint8_t **der, size_t *len, hsmca_err *e)
{
    hsmca_code rc = set_algor((X509_ALGOR *)X509_get0_tbs_sigalg(x), sig_nid, e);
    if (rc != HSMCA_OK)
        return rc;
    unsigned char *buf = NULL;
    int n = i2d_re_X509_tbs(x, &buf);
    if (n <= 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot encode the TBS certificate");
    *der = buf;
    *len = (size_t)n;
    return HSMCA_OK;
}

hsmca_code certasm_assemble(const uint8_t *tbs, size_t tbs_len, int sig_nid, const uint8_t *sig,
                            size_t sig_len, uint8_t **der, size_t *len, hsmca_err *e)
{
    hsmca_code rc = HSMCA_EINTERNAL;
    X509_ALGOR *alg = X509_ALGOR_new();
    ASN1_BIT_STRING *bits = ASN1_BIT_STRING_new();
    unsigned char *alg_der = NULL, *bits_der = NULL;
    if (!alg || !bits) {
        rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory assembling a certificate");
        goto out;
    }
    if ((rc = set_algor(alg, sig_nid, e)) != HSMCA_OK)
        goto out;
    if (!ASN1_BIT_STRING_set(bits, (unsigned char *)sig, (int)sig_len)) {
        rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory assembling a certificate");
        goto out;
    }
    /* A signature is a whole number of octets: no unused bits. */
    bits->flags &= ~(ASN1_STRING_FLAG_BITS_LEFT | 0x07);
    bits->flags |= ASN1_STRING_FLAG_BITS_LEFT;
    int alg_len = i2d_X509_ALGOR(alg, &alg_der);
    int bits_len = i2d_ASN1_BIT_STRING(bits, &bits_der);
    if (alg_len <= 0 || bits_len <= 0) {
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "cannot encode the signature fields");
        goto out;
    }
    size_t body = tbs_len + (size_t)alg_len + (size_t)bits_len;
    int total = ASN1_object_size(1, (long)body, V_ASN1_SEQUENCE);
    uint8_t *buf = total > 0 ? OPENSSL_malloc((size_t)total) : NULL;
    if (!buf) {
        rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory assembling a certificate");
        goto out;
    }
    unsigned char *p = buf;
    ASN1_put_object(&p, 1, (long)body, V_ASN1_SEQUENCE, V_ASN1_UNIVERSAL);
    memcpy(p, tbs, tbs_len);
    p += tbs_len;
    memcpy(p, alg_der, (size_t)alg_len);
    p += alg_len;
    memcpy(p, bits_der, (size_t)bits_len);
    *der = buf;
    *len = (size_t)total;
    rc = HSMCA_OK;
out:
    OPENSSL_free(alg_der);
    OPENSSL_free(bits_der);
    X509_ALGOR_free(alg);
    ASN1_BIT_STRING_free(bits);
    return rc;
}

char *certasm_bio_string(BIO *b)
{
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    if (n < 0 || !data)
        return NULL;
    char *out = malloc((size_t)n + 1);
    if (out) {
        memcpy(out, data, (size_t)n);
        out[n] = '\0';
    }
    OPENSSL_cleanse(data, (size_t)n);
    return out;
}

/* Encoded directly: parsing the DER back into an X509 only to print it would
 * cost more than building the certificate (it runs once per issuance). */
char *certasm_der_to_pem(const uint8_t *der, size_t len)
{
    static const char head[] = "-----BEGIN CERTIFICATE-----\n";
    static const char tail[] = "-----END CERTIFICATE-----\n";
    if (len == 0)
        return NULL;
    char *b64 = util_b64_encode(der, len);
    if (!b64)
        return NULL;
    size_t n = strlen(b64), lines = (n + 63) / 64;
    char *out = malloc(sizeof(head) + n + lines + sizeof(tail));
    if (out) {
        char *o = out;
        memcpy(o, head, sizeof(head) - 1);
        o += sizeof(head) - 1;
        for (size_t i = 0; i < n; i += 64) {
            size_t k = n - i < 64 ? n - i : 64;
            memcpy(o, b64 + i, k);
            o += k;
            *o++ = '\n';
        }
        memcpy(o, tail, sizeof(tail));
    }
    free(b64);
    return out;
}

char *certasm_key_pem(EVP_PKEY *key)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *out = bio && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL)
                    ? certasm_bio_string(bio)
                    : NULL;
    BIO_free(bio);
    return out;
}

X509 *certasm_load_pem(const char *path, hsmca_err *e)
{
    char *pem = NULL;
    size_t len = 0;
    if (util_read_file(path, 1 << 20, &pem, &len, e) != HSMCA_OK)
        return NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    free(pem);
    if (!x)
        hsmca_fail(e, HSMCA_EINVAL, "%s does not hold a PEM certificate", path);
    return x;
}

X509_CRL *certasm_crl_new(X509 *issuer, int64_t this_update, const ASN1_TIME *next_update,
                          uint64_t number)
{
    X509_CRL *c = X509_CRL_new();
    ASN1_TIME *tu = ASN1_TIME_set(NULL, (time_t)this_update);
    ASN1_INTEGER *num = ASN1_INTEGER_new();
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, NULL, NULL, c, 0);
    X509_EXTENSION *aki =
        c ? X509V3_EXT_conf_nid(NULL, &ctx, NID_authority_key_identifier, "keyid:always") : NULL;
    int ok = c && tu && num && aki && X509_CRL_set_version(c, 1) &&
             X509_CRL_set_issuer_name(c, X509_get_subject_name(issuer)) &&
             X509_CRL_set1_lastUpdate(c, tu) && X509_CRL_set1_nextUpdate(c, next_update) &&
             ASN1_INTEGER_set_uint64(num, number) && X509_CRL_add_ext(c, aki, -1) &&
             X509_CRL_add1_ext_i2d(c, NID_crl_number, num, 0, 0) == 1;
    X509_EXTENSION_free(aki);
    ASN1_TIME_free(tu);
    ASN1_INTEGER_free(num);
    if (!ok) {
        X509_CRL_free(c);
        return NULL;
    }
    return c;
}

/* SHA-256 of der[0..n) in hex; 0 when n says the encoding failed. */
static int sha256_hex(const unsigned char *der, int n, char hex[65])
{
    unsigned char md[32];
    if (n <= 0 || !der)
        return 0;
    SHA256(der, (size_t)n, md);
    util_hex(md, sizeof(md), hex);
    return 1;
}

int certasm_spki_sha256(EVP_PKEY *key, char hex[65])
{
    unsigned char *der = NULL;
    /* i2d_ first: the order of a call's arguments is unspecified. */
    int n = key ? i2d_PUBKEY(key, &der) : -1;
    int ok = sha256_hex(der, n, hex);
    OPENSSL_free(der);
    return ok;
}

int certasm_cert_sha256(X509 *x, char hex[65])
{
    unsigned char *der = NULL;
    int n = x ? i2d_X509(x, &der) : -1;
    int ok = sha256_hex(der, n, hex);
    OPENSSL_free(der);
    return ok;
}

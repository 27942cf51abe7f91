/* cert_build.c - see cert_build.h. */
#include "cert_build.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "certasm.h"
#include "ipc_contract.h"
#include "sigalg.h"
#include "util.h"

#define CA_BASIC_CONSTRAINTS "critical,CA:TRUE"
#define CA_KEY_USAGE "critical,keyCertSign,cRLSign,digitalSignature"

/* The digest of der[0..len) signed by the pool's key into sig (*sig_len in: its size). */
static HSMCA_MUSTCHECK hsmca_code sign_in_token(p11_pool *pool, const uint8_t *der, size_t len,
                                                uint8_t *sig, size_t *sig_len, hsmca_err *e)
{
    const sigalg *alg = p11_pool_sigalg(pool);
    uint8_t digest[64];
    if (!sigalg_digest(alg, der, len, digest))
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot hash what the CA key is to sign");
    return p11_pool_sign_digest(pool, digest, alg->digest_len, sig, sig_len, e);
}

/* Adds one extension by OpenSSL's config syntax, to a certificate (x) or to a list. */
static int add_ext(X509V3_CTX *ctx, X509 *x, STACK_OF(X509_EXTENSION) **list, int nid,
                   const char *value)
{
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    int ok = ext && (x ? X509_add_ext(x, ext, -1) : X509v3_add_ext(list, ext, -1) != NULL);
    X509_EXTENSION_free(ext);
    return ok;
}

/* What every CA certificate made here has, notAfter aside: v3, a serial of 128 random
 * bits (the first octet non-zero: never a zero serial), subject and issuer, notBefore 5
 * minutes ago, key, and the CA extensions (AKI from ctx's issuer, after the SKI). */
static int ca_fields(X509 *x, X509V3_CTX *ctx, const X509_NAME *subject,
                     const X509_NAME *issuer, EVP_PKEY *key)
{
    uint8_t serial[16];
    do
        util_random(serial, sizeof(serial));
    while (serial[0] == 0);
    BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
    int ok = bn && X509_set_version(x, 2) && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
             X509_set_subject_name(x, subject) && X509_set_issuer_name(x, issuer) &&
             X509_time_adj_ex(X509_getm_notBefore(x), 0, -300, NULL) &&
             X509_set_pubkey(x, key) &&
             add_ext(ctx, x, NULL, NID_basic_constraints, CA_BASIC_CONSTRAINTS) &&
             add_ext(ctx, x, NULL, NID_key_usage, CA_KEY_USAGE) &&
             add_ext(ctx, x, NULL, NID_subject_key_identifier, "hash") &&
             add_ext(ctx, x, NULL, NID_authority_key_identifier, "keyid:always");
    BN_free(bn);
    return ok;
}

/* The root's fields, extensions included; everything but the signature. */
static int root_fields(X509 *x, const X509_NAME *name, long long validity, EVP_PKEY *key)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    return X509_time_adj_ex(X509_getm_notAfter(x), (int)(validity / 86400),
                            (long)(validity % 86400), NULL) &&
           ca_fields(x, &ctx, name, name, key);
}

/* x (every field set) signed in the token by the pool's key, and verified with its
 * public half before it is returned in *out. */
static HSMCA_MUSTCHECK hsmca_code sign_cert(p11_pool *pool, X509 *x, EVP_PKEY *key,
                                            const char *what, X509 **out, hsmca_err *e)
{
    uint8_t *tbs = NULL, *der = NULL, sig[IPC_SIG_MAX];
    size_t tbs_len = 0, der_len = 0, sig_len = sizeof(sig);
    const sigalg *alg = p11_pool_sigalg(pool);
    hsmca_code rc;
    if ((rc = certasm_tbs_der(x, alg->nid, &tbs, &tbs_len, e)) != HSMCA_OK ||
        (rc = sign_in_token(pool, tbs, tbs_len, sig, &sig_len, e)) != HSMCA_OK ||
        (rc = certasm_assemble(tbs, tbs_len, alg->nid, sig, sig_len, &der, &der_len, e)) !=
            HSMCA_OK)
        goto out;
    const unsigned char *p = der;
    X509 *made = d2i_X509(NULL, &p, (long)der_len);
    if (!made || p != der + der_len || X509_verify(made, key) != 1) {
        X509_free(made);
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "the %s signed in the token does not verify with "
                                            "the token key's public half", what);
        goto out;
    }
    *out = made;
out:
    OPENSSL_free(tbs);
    OPENSSL_free(der);
    return rc;
}

hsmca_code cert_build_root(p11_pool *pool, const X509_NAME *name, long long validity, X509 **out,
                           hsmca_err *e)
{
    EVP_PKEY *key = p11_pool_public_key(pool);
    X509 *x = X509_new();
    hsmca_code rc;
    *out = NULL;
    if (!key || !x || validity <= 0 || !root_fields(x, name, validity, key))
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "cannot build the root certificate");
    else
        rc = sign_cert(pool, x, key, "root", out, e);
    X509_free(x);
    EVP_PKEY_free(key);
    return rc;
}

/* The cross certificate's fields: new_root's subject, key, SKI and CA extensions, the
 * old root as issuer (AKI its SKI), valid from 5 minutes ago to the earlier notAfter. */
static int cross_fields(X509 *x, X509 *old_root, X509 *new_root)
{
    const ASN1_TIME *end = X509_get0_notAfter(new_root);
    if (ASN1_TIME_compare(X509_get0_notAfter(old_root), end) < 0)
        end = X509_get0_notAfter(old_root);
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, old_root, x, NULL, NULL, 0);
    return X509_set1_notAfter(x, end) &&
           ca_fields(x, &ctx, X509_get_subject_name(new_root), X509_get_subject_name(old_root),
                     X509_get0_pubkey(new_root));
}

hsmca_code cert_build_cross(p11_pool *old_pool, X509 *old_root, X509 *new_root, X509 **out,
                            hsmca_err *e)
{
    EVP_PKEY *key = p11_pool_public_key(old_pool);
    X509 *x = X509_new();
    hsmca_code rc;
    *out = NULL;
    if (!key || EVP_PKEY_eq(key, X509_get0_pubkey(old_root)) != 1)
        rc = hsmca_fail(e, HSMCA_EINVAL, "the old CA key is not the old root's");
    else if (!x || !cross_fields(x, old_root, new_root))
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "cannot build the cross-signed certificate");
    else
        rc = sign_cert(old_pool, x, key, "cross-signed certificate", out, e);
    X509_free(x);
    EVP_PKEY_free(key);
    return rc;
}

/* The CSR's fields and extensionRequest; everything but the signature. */
static int csr_fields(X509_REQ *r, const X509_NAME *name, EVP_PKEY *key)
{
    STACK_OF(X509_EXTENSION) *exts = NULL;
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, NULL, NULL, r, NULL, 0);
    int ok = X509_REQ_set_version(r, 0) && X509_REQ_set_subject_name(r, name) &&
             X509_REQ_set_pubkey(r, key) &&
             add_ext(&ctx, NULL, &exts, NID_basic_constraints, CA_BASIC_CONSTRAINTS) &&
             add_ext(&ctx, NULL, &exts, NID_key_usage, CA_KEY_USAGE) &&
             X509_REQ_add_extensions(r, exts);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    return ok;
}

/* SEQUENCE { CertificationRequestInfo, AlgorithmIdentifier, BIT STRING } has the
 * shape of a certificate, so certasm_assemble puts a CSR together as well. */
hsmca_code cert_build_csr(p11_pool *pool, const X509_NAME *name, X509_REQ **out, hsmca_err *e)
{
    EVP_PKEY *key = p11_pool_public_key(pool);
    X509_REQ *r = X509_REQ_new();
    unsigned char *info = NULL;
    uint8_t *der = NULL, sig[IPC_SIG_MAX];
    size_t der_len = 0, sig_len = sizeof(sig);
    const sigalg *alg = p11_pool_sigalg(pool);
    hsmca_code rc = HSMCA_EINTERNAL;
    *out = NULL;
    int info_len = key && r && csr_fields(r, name, key) ? i2d_re_X509_REQ_tbs(r, &info) : -1;
    if (info_len <= 0) {
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "cannot build the CSR");
        goto out;
    }
    if ((rc = sign_in_token(pool, info, (size_t)info_len, sig, &sig_len, e)) != HSMCA_OK ||
        (rc = certasm_assemble(info, (size_t)info_len, alg->nid, sig, sig_len, &der, &der_len,
                               e)) != HSMCA_OK)
        goto out;
    const unsigned char *p = der;
    X509_REQ *made = d2i_X509_REQ(NULL, &p, (long)der_len);
    if (!made || p != der + der_len || X509_REQ_verify(made, key) != 1) {
        X509_REQ_free(made);
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "the CSR signed in the token does not verify with "
                                            "the token key's public half");
        goto out;
    }
    *out = made;
out:
    OPENSSL_free(info);
    OPENSSL_free(der);
    X509_REQ_free(r);
    EVP_PKEY_free(key);
    return rc;
}

/* Copies one unescaped field of s (up to '/', '=' when stop_eq, or the end) into buf. */
static const char *subject_field(const char *s, int stop_eq, char *buf, size_t size)
{
    size_t n = 0;
    for (; *s && *s != '/' && !(stop_eq && *s == '='); s++) {
        if (*s == '\\' && s[1])
            s++;
        if (n + 1 >= size)
            return NULL;
        buf[n++] = *s;
    }
    buf[n] = '\0';
    return s;
}

hsmca_code cert_build_parse_subject(const char *s, X509_NAME **out, hsmca_err *e)
{
    char key[64], value[1024];
    X509_NAME *n = X509_NAME_new();
    *out = NULL;
    if (!n)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    if (!s || *s != '/')
        goto bad;
    while (*s == '/') {
        s = subject_field(s + 1, 1, key, sizeof(key));
        if (!s || *s != '=' || !key[0])
            goto bad;
        s = subject_field(s + 1, 0, value, sizeof(value));
        if (!s || !value[0])
            goto bad;
        if (!X509_NAME_add_entry_by_txt(n, key, MBSTRING_UTF8, (const unsigned char *)value, -1,
                                        -1, 0)) {
            X509_NAME_free(n);
            return hsmca_fail(e, HSMCA_EINVAL, "--subject: '%s' is not an attribute OpenSSL "
                                               "knows (CN, O, OU, C, ST, L, ...), or its value "
                                               "does not fit it", key);
        }
    }
    if (*s || X509_NAME_entry_count(n) == 0)
        goto bad;
    *out = n;
    return HSMCA_OK;
bad:
    X509_NAME_free(n);
    return hsmca_fail(e, HSMCA_EINVAL, "--subject must look like \"/O=Example/CN=Example Root "
                                       "CA\" (a '/' before each ATTRIBUTE=value, none empty)");
}

hsmca_code cert_build_csr_pem(p11_pool *pool, const X509_NAME *name, char **pem, hsmca_err *e)
{
    X509_REQ *req = NULL;
    *pem = NULL;
    HSMCA_GUARD(cert_build_csr(pool, name, &req, e));
    BIO *b = BIO_new(BIO_s_mem());
    *pem = b && PEM_write_bio_X509_REQ(b, req) ? certasm_bio_string(b) : NULL;
    BIO_free(b);
    X509_REQ_free(req);
    HSMCA_ENSURE(*pem, e, HSMCA_ENOMEM, "cannot encode the CSR");
    return HSMCA_OK;
}

/* dev_jwt.c - the development JWT issuer (see dev_jwt.h).
 *
 * Everything here runs in the CLI, never in the front end: the private key file
 * it writes is the dev issuer's, and the front end only ever reads the JWKS. */
#include "dev_jwt.h"
#include "certasm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "policy.h"
#include "sigfmt.h"
#include "util.h"

#define DEV_KEY_MAX 16384   /* a P-256 PKCS#8 PEM is ~250 bytes */
#define DEV_JWKS_MAX 65536
#define DEV_KID_BYTES 8
#define DEV_COORD 32

static HSMCA_MUSTCHECK hsmca_code dev_path(char *buf, size_t sz, const char *dir, const char *name, hsmca_err *e)
{
    int n = snprintf(buf, sz, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sz)
        return hsmca_fail(e, HSMCA_EINVAL, "dev dir path too long");
    return HSMCA_OK;
}

/* Loads the dev key and insists on EC P-256 (the JWKS and ES256 assume it). */
static HSMCA_MUSTCHECK hsmca_code dev_key_load(const char *path, EVP_PKEY **out, hsmca_err *e)
{
    char *pem = NULL;
    size_t len = 0;
    hsmca_code rc = util_read_file(path, DEV_KEY_MAX, &pem, &len, e);
    if (rc != HSMCA_OK)
        return rc;
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *pkey = b ? PEM_read_bio_PrivateKey_ex(b, NULL, NULL, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    OPENSSL_cleanse(pem, len);
    free(pem);
    char group[32] = "";
    size_t glen = 0;
    if (!pkey || !EVP_PKEY_is_a(pkey, "EC") ||
        EVP_PKEY_get_group_name(pkey, group, sizeof(group), &glen) != 1 ||
        strcmp(group, "prime256v1") != 0) {
        EVP_PKEY_free(pkey);
        return hsmca_fail(e, HSMCA_EINVAL, "%s is not an EC P-256 private key", path);
    }
    *out = pkey;
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code dev_key_create(const char *path, EVP_PKEY **out, hsmca_err *e)
{
    EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (!pkey)
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot generate the dev JWT key");
    char *pem = certasm_key_pem(pkey);
    if (!pem) {
        EVP_PKEY_free(pkey);
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot encode the dev JWT key");
    }
    hsmca_code rc = util_write_file_atomic(path, pem, strlen(pem), 0600, e);
    OPENSSL_cleanse(pem, strlen(pem));
    free(pem);
    if (rc != HSMCA_OK) {
        EVP_PKEY_free(pkey);
        return rc;
    }
    *out = pkey;
    return HSMCA_OK;
}

/* kid = base64url(SHA-256(SubjectPublicKeyInfo DER)[0..8)): stable across runs. */
static char *dev_kid(EVP_PKEY *pkey, hsmca_err *e)
{
    unsigned char *der = NULL;
    unsigned char md[32];
    unsigned int mdlen = 0;
    int dl = i2d_PUBKEY(pkey, &der);
    int ok = dl > 0 && EVP_Digest(der, (size_t)dl, md, &mdlen, EVP_sha256(), NULL) == 1;
    OPENSSL_free(der);
    char *kid = ok ? util_b64url_encode(md, DEV_KID_BYTES) : NULL;
    if (!kid)
        hsmca_fail(e, HSMCA_EINTERNAL, "cannot compute the dev JWT key id");
    return kid;
}

/* The JWKS document for pkey, as a new string ending in "\n". */
static char *dev_jwks_json(EVP_PKEY *pkey, const char *kid, hsmca_err *e)
{
    char *x = sigfmt_jwk_param(pkey, OSSL_PKEY_PARAM_EC_PUB_X, DEV_COORD);
    char *y = sigfmt_jwk_param(pkey, OSSL_PKEY_PARAM_EC_PUB_Y, DEV_COORD);
    json_t *doc = (x && y) ? json_pack("{s:[{s:s,s:s,s:s,s:s,s:s,s:s,s:s}]}", "keys", "kty",
                                       "EC", "crv", "P-256", "x", x, "y", y, "kid", kid, "use",
                                       "sig", "alg", "ES256")
                           : NULL;
    char *s = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    char *out = NULL;
    if (s && (out = malloc(strlen(s) + 2)) != NULL)
        sprintf(out, "%s\n", s);
    free(s);
    json_decref(doc);
    free(x);
    free(y);
    if (!out)
        hsmca_fail(e, HSMCA_EINTERNAL, "cannot build the dev JWKS");
    return out;
}

/* Loads DIR's key, creating it first when there is none. */
static HSMCA_MUSTCHECK hsmca_code dev_key_get(const char *dir, int create, EVP_PKEY **pkey, hsmca_err *e)
{
    char path[4096];
    hsmca_code rc = dev_path(path, sizeof(path), dir, DEV_JWT_KEY_FILE, e);
    if (rc != HSMCA_OK)
        return rc;
    if (access(path, F_OK) == 0)
        return dev_key_load(path, pkey, e);
    if (errno != ENOENT)
        return hsmca_fail(e, HSMCA_EIO, "cannot access %s: %s", path, strerror(errno));
    if (!create)
        return hsmca_fail(e, HSMCA_EIO, "%s does not exist (run hsmca dev first)", path);
    return dev_key_create(path, pkey, e);
}

hsmca_code dev_jwt_setup(const char *dir, hsmca_err *e)
{
    EVP_PKEY *pkey = NULL;
    char *kid = NULL, *jwks = NULL, *old = NULL;
    char path[4096];
    hsmca_code rc = dev_key_get(dir, 1, &pkey, e);
    if (rc != HSMCA_OK)
        return rc;
    if (!(kid = dev_kid(pkey, e)) || !(jwks = dev_jwks_json(pkey, kid, e))) {
        rc = HSMCA_EINTERNAL;
        goto out;
    }
    if ((rc = dev_path(path, sizeof(path), dir, DEV_JWKS_FILE, e)) != HSMCA_OK)
        goto out;
    /* Rewrite the JWKS only when it is missing or belongs to another key. */
    hsmca_err ignored;
    if (util_read_file(path, DEV_JWKS_MAX, &old, NULL, &ignored) == HSMCA_OK &&
        strcmp(old, jwks) == 0)
        goto out;
    rc = util_write_file_atomic(path, jwks, strlen(jwks), 0644, e);
out:
    free(old);
    free(jwks);
    free(kid);
    EVP_PKEY_free(pkey);
    return rc;
}

/* A version-4 UUID string from 16 random bytes. */
static void dev_uuid(char out[37])
{
    uint8_t b[16];
    util_random(b, sizeof(b));
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    char hex[33];
    util_hex(b, sizeof(b), hex);
    snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
}

char *dev_jwt_mint(const char *dir, const char *issuer, const char *aud, const char *ns,
                   const char *sa, uint32_t ttl, hsmca_err *e)
{
    /* The names the front end will accept, by the same rule it applies. */
    if (!aud || !*aud || !policy_is_k8s_name(ns, ns ? strlen(ns) : 0, POLICY_NS_MAX, 0) ||
        !policy_is_k8s_name(sa, sa ? strlen(sa) : 0, POLICY_SA_MAX, 1) || ttl == 0) {
        hsmca_fail(e, HSMCA_EINVAL,
                   "dev token: aud, a Kubernetes namespace and service account, and ttl > 0 "
                   "needed");
        return NULL;
    }
    EVP_PKEY *pkey = NULL;
    if (dev_key_get(dir, 0, &pkey, e) != HSMCA_OK)
        return NULL;
    char *kid = dev_kid(pkey, e);
    char uuid[37], sub[600];
    dev_uuid(uuid);
    snprintf(sub, sizeof(sub), "system:serviceaccount:%s:%s", ns, sa);
    json_int_t now = (json_int_t)util_wall_now();
    json_t *hdr = kid ? json_pack("{s:s,s:s,s:s}", "alg", "ES256", "typ", "JWT", "kid", kid)
                      : NULL;
    json_t *claims = json_pack("{s:s,s:[s],s:s,s:{s:s,s:{s:s,s:s}},s:I,s:I,s:I}", "iss",
                               issuer ? issuer : DEV_JWT_ISSUER, "aud", aud, "sub", sub,
                               "kubernetes.io", "namespace", ns, "serviceaccount", "name", sa,
                               "uid", uuid, "iat", now, "nbf", now, "exp",
                               now + (json_int_t)ttl);
    /* Compact JSON in insertion order; ES256, since the dev key is P-256. */
    char *hj = hdr ? json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    char *cj = claims ? json_dumps(claims, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    char *tok = hj && cj ? sigfmt_jws_compact(pkey, hj, strlen(hj), cj, strlen(cj)) : NULL;
    if (!tok && kid)
        hsmca_fail(e, HSMCA_EINTERNAL, "cannot mint the dev JWT");
    free(hj);
    free(cj);
    json_decref(hdr);
    json_decref(claims);
    free(kid);
    EVP_PKEY_free(pkey);
    return tok;
}

/* tok_jwks.c - see tok_jwks.h.
 *
 * Every key is rebuilt from its parameters and checked by the library (point on
 * the curve, sane RSA modulus) before it is kept; a key we cannot use for
 * RS256/ES256 is skipped, not refused, since issuers publish others alongside. */
#include "tok_jwks.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>

#include "util.h"

#define FE_RSA_MIN_BITS 2048
#define FE_RSA_MAX_BITS 8192 /* bounds the cost of one verification */
#define FE_RSA_MAX_E_LEN 8
#define FE_EC_COORD_LEN 32
#define FE_MAX_KEYS 64

typedef struct {
    char *kid; /* NULL when the JWK has none */
    tok_kty kty;
    EVP_PKEY *pkey;
} fe_jwk;

struct tok_jwks {
    fe_jwk keys[FE_MAX_KEYS];
    size_t n;
};

static const char *kty_name(tok_kty t) { return t == TOK_KTY_RSA ? "RSA" : "EC"; }

void tok_jwks_free(tok_jwks *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k->n; i++) {
        free(k->keys[i].kid);
        EVP_PKEY_free(k->keys[i].pkey);
    }
    free(k);
}

/* Decodes a base64url member of a JWK; NULL when absent or malformed. */
static uint8_t *jwk_b64_member(json_t *jwk, const char *name, size_t *len)
{
    json_t *v = json_object_get(jwk, name);
    if (!json_is_string(v))
        return NULL;
    return util_b64url_decode(json_string_value(v), json_string_length(v), len);
}

/* The library's own consistency check: point on the curve and of the right
 * order for EC; odd modulus, sane exponent, not a prime for RSA. */
static int pkey_public_ok(EVP_PKEY *pkey)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    int ok = c && EVP_PKEY_public_check(c) == 1;
    EVP_PKEY_CTX_free(c);
    return ok;
}

static EVP_PKEY *pkey_fromdata(const char *type, OSSL_PARAM *params)
{
    EVP_PKEY *pkey = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (!c || EVP_PKEY_fromdata_init(c) != 1 ||
        EVP_PKEY_fromdata(c, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pkey = NULL;
    EVP_PKEY_CTX_free(c);
    return pkey;
}

static HSMCA_MUSTCHECK hsmca_code jwk_rsa(json_t *jwk, size_t idx, EVP_PKEY **out, hsmca_err *e)
{
    size_t nlen = 0, elen = 0;
    uint8_t *nb = jwk_b64_member(jwk, "n", &nlen);
    uint8_t *eb = jwk_b64_member(jwk, "e", &elen);
    BIGNUM *n = NULL, *ex = NULL;
    OSSL_PARAM_BLD *bld = NULL;
    OSSL_PARAM *params = NULL;
    hsmca_code rc = HSMCA_EINVAL;

    if (!nb || !eb) {
        hsmca_fail(e, rc, "JWKS key %zu: RSA n and e must be base64url strings", idx);
        goto out;
    }
    if (nlen == 0 || nlen > FE_RSA_MAX_BITS / 8 + 1 || elen == 0 || elen > FE_RSA_MAX_E_LEN) {
        hsmca_fail(e, rc, "JWKS key %zu: RSA n or e has an unsupported length", idx);
        goto out;
    }
    n = BN_bin2bn(nb, (int)nlen, NULL);
    ex = BN_bin2bn(eb, (int)elen, NULL);
    if (!n || !ex) {
        hsmca_fail(e, rc, "JWKS key %zu: RSA n or e not decodable", idx);
        goto out;
    }
    int bits = BN_num_bits(n);
    if (bits < FE_RSA_MIN_BITS || bits > FE_RSA_MAX_BITS) {
        hsmca_fail(e, rc, "JWKS key %zu: RSA key of %d bits refused (%d-%d)", idx, bits,
                   FE_RSA_MIN_BITS, FE_RSA_MAX_BITS);
        goto out;
    }
    bld = OSSL_PARAM_BLD_new();
    if (!bld || !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) ||
        !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, ex) ||
        !(params = OSSL_PARAM_BLD_to_param(bld))) {
        hsmca_fail(e, rc, "JWKS key %zu: cannot build RSA parameters", idx);
        goto out;
    }
    *out = pkey_fromdata("RSA", params);
    if (!*out || !pkey_public_ok(*out)) {
        EVP_PKEY_free(*out);
        *out = NULL;
        hsmca_fail(e, rc, "JWKS key %zu: RSA public key is not valid", idx);
        goto out;
    }
    rc = HSMCA_OK;
out:
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(n);
    BN_free(ex);
    free(nb);
    free(eb);
    return rc;
}

static HSMCA_MUSTCHECK hsmca_code jwk_ec(json_t *jwk, size_t idx, EVP_PKEY **out, hsmca_err *e)
{
    json_t *crv = json_object_get(jwk, "crv");
    if (!json_is_string(crv) || strcmp(json_string_value(crv), "P-256") != 0)
        return hsmca_fail(e, HSMCA_EINVAL, "JWKS key %zu: EC crv must be P-256", idx);
    size_t xlen = 0, ylen = 0;
    uint8_t *x = jwk_b64_member(jwk, "x", &xlen);
    uint8_t *y = jwk_b64_member(jwk, "y", &ylen);
    hsmca_code rc = HSMCA_OK;
    if (!x || !y || xlen != FE_EC_COORD_LEN || ylen != FE_EC_COORD_LEN) {
        rc = hsmca_fail(e, HSMCA_EINVAL,
                        "JWKS key %zu: EC x and y must be base64url of 32 bytes each", idx);
    } else {
        /* Uncompressed SEC1 point: 0x04 || x || y. */
        unsigned char pt[1 + 2 * FE_EC_COORD_LEN];
        char group[] = "prime256v1";
        pt[0] = 0x04;
        memcpy(pt + 1, x, FE_EC_COORD_LEN);
        memcpy(pt + 1 + FE_EC_COORD_LEN, y, FE_EC_COORD_LEN);
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
            OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof(pt)),
            OSSL_PARAM_construct_end(),
        };
        *out = pkey_fromdata("EC", params);
        if (!*out || !pkey_public_ok(*out)) {
            EVP_PKEY_free(*out);
            *out = NULL;
            rc = hsmca_fail(e, HSMCA_EINVAL, "JWKS key %zu: EC point is not on P-256", idx);
        }
    }
    free(x);
    free(y);
    return rc;
}

/* Parses one JWK into ks (or skips it). Keys we cannot use for RS256/ES256
 * signatures (other kty, "use" other than "sig", another "alg") are skipped,
 * since issuers such as Keycloak publish encryption keys in the same set. */
static HSMCA_MUSTCHECK hsmca_code jwks_add(tok_jwks *ks, json_t *jwk, size_t idx, hsmca_err *e)
{
    if (!json_is_object(jwk))
        return hsmca_fail(e, HSMCA_EINVAL, "JWKS key %zu is not a JSON object", idx);
    json_t *kty = json_object_get(jwk, "kty");
    json_t *use = json_object_get(jwk, "use");
    json_t *alg = json_object_get(jwk, "alg");
    json_t *kid = json_object_get(jwk, "kid");
    if (!json_is_string(kty))
        return hsmca_fail(e, HSMCA_EINVAL, "JWKS key %zu: kty must be a string", idx);
    if ((use && !json_is_string(use)) || (alg && !json_is_string(alg)) ||
        (kid && !json_is_string(kid)))
        return hsmca_fail(e, HSMCA_EINVAL, "JWKS key %zu: use, alg and kid must be strings",
                          idx);
    if (use && strcmp(json_string_value(use), "sig") != 0)
        return HSMCA_OK;

    tok_kty t;
    const char *want_alg;
    if (strcmp(json_string_value(kty), "RSA") == 0) {
        t = TOK_KTY_RSA;
        want_alg = "RS256";
    } else if (strcmp(json_string_value(kty), "EC") == 0) {
        t = TOK_KTY_EC;
        want_alg = "ES256";
    } else {
        return HSMCA_OK;
    }
    if (alg && strcmp(json_string_value(alg), want_alg) != 0)
        return HSMCA_OK;
    if (kid) {
        for (size_t i = 0; i < ks->n; i++)
            if (ks->keys[i].kid && strcmp(ks->keys[i].kid, json_string_value(kid)) == 0)
                return hsmca_fail(e, HSMCA_EINVAL, "JWKS key %zu: kid used twice", idx);
    }
    if (ks->n == FE_MAX_KEYS)
        return hsmca_fail(e, HSMCA_EINVAL, "JWKS holds more than %d usable keys", FE_MAX_KEYS);

    EVP_PKEY *pkey = NULL;
    hsmca_code rc = t == TOK_KTY_RSA ? jwk_rsa(jwk, idx, &pkey, e) : jwk_ec(jwk, idx, &pkey, e);
    if (rc != HSMCA_OK)
        return rc;
    fe_jwk *k = &ks->keys[ks->n];
    k->kid = kid ? strdup(json_string_value(kid)) : NULL;
    if (kid && !k->kid) {
        EVP_PKEY_free(pkey);
        return hsmca_fail(e, HSMCA_EINVAL, "out of memory parsing the JWKS");
    }
    k->kty = t;
    k->pkey = pkey;
    ks->n++;
    return HSMCA_OK;
}

hsmca_code tok_jwks_parse(const char *json, size_t len, tok_jwks **out, hsmca_err *e)
{
    *out = NULL;
    if (!json || len == 0 || len > TOK_JWKS_MAX_LEN)
        return hsmca_fail(e, HSMCA_EINVAL, "JWKS must be 1-%d bytes", TOK_JWKS_MAX_LEN);
    json_error_t jerr;
    json_t *doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return hsmca_fail(e, HSMCA_EINVAL, "JWKS is not valid JSON (line %d: %s)", jerr.line,
                          jerr.text);
    json_t *keys = json_object_get(doc, "keys");
    if (!json_is_array(keys)) {
        json_decref(doc);
        return hsmca_fail(e, HSMCA_EINVAL, "JWKS must be an object with a \"keys\" array");
    }
    tok_jwks *ks = calloc(1, sizeof(*ks));
    if (!ks) {
        json_decref(doc);
        return hsmca_fail(e, HSMCA_EINVAL, "out of memory parsing the JWKS");
    }
    size_t i;
    json_t *jwk;
    hsmca_code rc = HSMCA_OK;
    json_array_foreach(keys, i, jwk) {
        rc = jwks_add(ks, jwk, i, e);
        if (rc != HSMCA_OK)
            break;
    }
    json_decref(doc);
    if (rc == HSMCA_OK && ks->n == 0)
        rc = hsmca_fail(e, HSMCA_EINVAL, "JWKS holds no usable RSA or EC P-256 signing key");
    if (rc != HSMCA_OK) {
        tok_jwks_free(ks);
        return rc;
    }
    *out = ks;
    return HSMCA_OK;
}

/* ---- choosing the key for a token ------------------------------------------ */

/* The key comes from our JWKS only: by kid, or the single key of the type. */
hsmca_code tok_jwks_pick(const tok_jwks *ks, tok_kty kty, const char *kid, EVP_PKEY **out,
                        hsmca_err *e)
{
    char shown[TOK_SHOWN_LEN];
    const fe_jwk *found = NULL;
    size_t same_type = 0;
    for (size_t i = 0; i < ks->n; i++) {
        const fe_jwk *k = &ks->keys[i];
        if (kid) {
            if (k->kid && strcmp(k->kid, kid) == 0)
                found = k;
        } else if (k->kty == kty) {
            same_type++;
            found = k;
        }
    }
    if (kid && !found) {
        util_printable(kid, strlen(kid), shown, sizeof(shown));
        return hsmca_fail(e, HSMCA_EAUTH, "JWT kid '%s' not in JWKS", shown);
    }
    if (!kid && same_type != 1)
        return hsmca_fail(e, HSMCA_EAUTH,
                          "JWT has no kid and the JWKS holds %zu %s keys (needs exactly one)",
                          same_type, kty_name(kty));
    if (found->kty != kty) {
        util_printable(kid, strlen(kid), shown, sizeof(shown));
        return hsmca_fail(e, HSMCA_EAUTH, "JWT kid '%s' names an %s key, alg %s needs %s",
                          shown, kty_name(found->kty), kty == TOK_KTY_RSA ? "RS256" : "ES256",
                          kty_name(kty));
    }
    *out = found->pkey;
    return HSMCA_OK;
}

int tok_jwks_has_kid(const tok_jwks *ks, const char *kid)
{
    for (size_t i = 0; ks && kid && i < ks->n; i++)
        if (ks->keys[i].kid && strcmp(ks->keys[i].kid, kid) == 0)
            return 1;
    return 0;
}

size_t tok_jwks_count(const tok_jwks *ks) { return ks ? ks->n : 0; }

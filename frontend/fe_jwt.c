/* fe_jwt.c - bearer JWT verification against a JWKS (see fe_jwt.h).
 *
 * Order of work in fe_jwt_verify: size cap, split into exactly three parts,
 * strict base64url decode of all three, header checks (alg allowlist, no
 * token-supplied keys), key choice from our JWKS only, signature, and only
 * then the claims: the payload JSON is never parsed before the signature
 * holds. No message carries the token or a part of it; the few header values
 * a message names (alg, kid) are truncated and reduced to plain characters. */
#include "fe_jwt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "policy.h"
#include "sigfmt.h"
#include "util.h"

#define FE_RSA_MIN_BITS 2048
#define FE_RSA_MAX_BITS 8192 /* bounds the cost of one verification */
#define FE_RSA_MAX_E_LEN 8
#define FE_EC_COORD_LEN 32
#define FE_MAX_KEYS 64
#define FE_SHOWN_LEN 36 /* a kid or alg from a token in a message: 32 characters and "..." */

typedef enum { FE_KTY_RSA, FE_KTY_EC } fe_kty;

typedef struct {
    char *kid; /* NULL when the JWK has none */
    fe_kty kty;
    EVP_PKEY *pkey;
} fe_jwk;

struct fe_jwks {
    fe_jwk keys[FE_MAX_KEYS];
    size_t n;
};

static const char *kty_name(fe_kty t) { return t == FE_KTY_RSA ? "RSA" : "EC"; }

/* ---- JWKS ---------------------------------------------------------------- */

void fe_jwks_free(fe_jwks *k)
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

static hsmca_code jwk_rsa(json_t *jwk, size_t idx, EVP_PKEY **out, hsmca_err *e)
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

static hsmca_code jwk_ec(json_t *jwk, size_t idx, EVP_PKEY **out, hsmca_err *e)
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
static hsmca_code jwks_add(fe_jwks *ks, json_t *jwk, size_t idx, hsmca_err *e)
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

    fe_kty t;
    const char *want_alg;
    if (strcmp(json_string_value(kty), "RSA") == 0) {
        t = FE_KTY_RSA;
        want_alg = "RS256";
    } else if (strcmp(json_string_value(kty), "EC") == 0) {
        t = FE_KTY_EC;
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
    hsmca_code rc = t == FE_KTY_RSA ? jwk_rsa(jwk, idx, &pkey, e) : jwk_ec(jwk, idx, &pkey, e);
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

hsmca_code fe_jwks_parse(const char *json, size_t len, fe_jwks **out, hsmca_err *e)
{
    *out = NULL;
    if (!json || len == 0 || len > FE_JWKS_MAX_LEN)
        return hsmca_fail(e, HSMCA_EINVAL, "JWKS must be 1-%d bytes", FE_JWKS_MAX_LEN);
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
    fe_jwks *ks = calloc(1, sizeof(*ks));
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
        fe_jwks_free(ks);
        return rc;
    }
    *out = ks;
    return HSMCA_OK;
}

/* ---- JWT: structure, header, key, signature -------------------------------- */

typedef struct {
    uint8_t *hdr, *payload, *sig;
    size_t hdr_len, payload_len, sig_len;
    size_t signed_len; /* bytes of "header.payload", the signing input */
} jwt_parts;

static void jwt_parts_free(jwt_parts *p)
{
    free(p->hdr);
    free(p->payload);
    free(p->sig);
}

/* Exactly three parts, each strict unpadded base64url (one encoding per value). */
static hsmca_code jwt_split(const char *tok, size_t len, jwt_parts *p, hsmca_err *e)
{
    const char *d1 = memchr(tok, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - tok)))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT must have exactly three dot-separated parts");
    size_t hl = (size_t)(d1 - tok), pl = (size_t)(d2 - d1 - 1), sl = len - (size_t)(d2 + 1 - tok);
    if (hl == 0 || pl == 0)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT header and payload must not be empty");
    p->signed_len = (size_t)(d2 - tok);
    if (!(p->hdr = util_b64url_decode(tok, hl, &p->hdr_len)))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT header is not unpadded base64url");
    if (!(p->payload = util_b64url_decode(d1 + 1, pl, &p->payload_len)))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT payload is not unpadded base64url");
    if (!(p->sig = util_b64url_decode(d2 + 1, sl, &p->sig_len)))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT signature is not unpadded base64url");
    return HSMCA_OK;
}

/* Header fields that let a token name or carry its own key or change how it
 * is processed: refused outright. */
static const char *const jwt_forbidden_hdr[] = {"crit", "jku", "jwk", "x5u", "x5c"};

/* Checks the header; sets *kty and *kid (borrowed from hdr, NULL if absent). */
static hsmca_code jwt_check_header(json_t *hdr, fe_kty *kty, const char **kid, hsmca_err *e)
{
    char shown[FE_SHOWN_LEN];
    for (size_t i = 0; i < sizeof(jwt_forbidden_hdr) / sizeof(jwt_forbidden_hdr[0]); i++)
        if (json_object_get(hdr, jwt_forbidden_hdr[i]))
            return hsmca_fail(e, HSMCA_EAUTH, "JWT header field '%s' not allowed",
                              jwt_forbidden_hdr[i]);
    json_t *alg = json_object_get(hdr, "alg");
    if (!json_is_string(alg))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT header has no string alg");
    if (strcmp(json_string_value(alg), "RS256") == 0) {
        *kty = FE_KTY_RSA;
    } else if (strcmp(json_string_value(alg), "ES256") == 0) {
        *kty = FE_KTY_EC;
    } else {
        util_printable(json_string_value(alg), json_string_length(alg), shown, sizeof(shown));
        return hsmca_fail(e, HSMCA_EAUTH, "JWT alg '%s' not allowed (RS256, ES256 only)", shown);
    }
    /* typ is a media type, compared case-insensitively (RFC 7515 §4.1.9). */
    json_t *typ = json_object_get(hdr, "typ");
    if (typ && (!json_is_string(typ) || strcasecmp(json_string_value(typ), "JWT") != 0))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT typ must be \"JWT\" when present");
    json_t *k = json_object_get(hdr, "kid");
    if (k && !json_is_string(k))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT kid must be a string");
    *kid = k ? json_string_value(k) : NULL;
    return HSMCA_OK;
}

/* The key comes from our JWKS only: by kid, or the single key of the type. */
static hsmca_code jwt_pick_key(const fe_jwks *ks, fe_kty kty, const char *kid,
                               EVP_PKEY **out, hsmca_err *e)
{
    char shown[FE_SHOWN_LEN];
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
                          shown, kty_name(found->kty), kty == FE_KTY_RSA ? "RS256" : "ES256",
                          kty_name(kty));
    }
    *out = found->pkey;
    return HSMCA_OK;
}

/* ---- JWT: claims ----------------------------------------------------------- */

/* A NumericDate as whole seconds. Fractions round toward the strict side:
 * down for exp, up for nbf/iat. */
static hsmca_code jwt_time_claim(json_t *claims, const char *name, int round_up, int *present,
                                 int64_t *out, hsmca_err *e)
{
    json_t *v = json_object_get(claims, name);
    *present = v != NULL;
    if (!v)
        return HSMCA_OK;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return HSMCA_OK;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d > -1e15 && d < 1e15) {
            int64_t t = (int64_t)d; /* truncates toward zero */
            if (round_up && (double)t < d)
                t++;
            else if (!round_up && (double)t > d)
                t--;
            *out = t;
            return HSMCA_OK;
        }
    }
    return hsmca_fail(e, HSMCA_EAUTH, "JWT %s must be a number of seconds", name);
}

static hsmca_code jwt_check_times(json_t *claims, int64_t now, uint32_t skew, hsmca_err *e)
{
    int present;
    int64_t t = 0;
    hsmca_code rc = jwt_time_claim(claims, "exp", 0, &present, &t, e);
    if (rc != HSMCA_OK)
        return rc;
    if (!present)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT exp is required");
    /* now > exp + skew, written so that no operand can overflow. */
    if (now - (int64_t)skew > t)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT expired");
    static const char *const not_before[] = {"nbf", "iat"};
    for (size_t i = 0; i < 2; i++) {
        if ((rc = jwt_time_claim(claims, not_before[i], 1, &present, &t, e)) != HSMCA_OK)
            return rc;
        if (present && now + (int64_t)skew < t)
            return hsmca_fail(e, HSMCA_EAUTH, "JWT not yet valid (%s in the future)",
                              not_before[i]);
    }
    return HSMCA_OK;
}

static int aud_wanted(const fe_jwt_rules *r, const char *aud)
{
    for (int i = 0; i < r->n_audiences; i++)
        if (r->audiences[i] && strcmp(r->audiences[i], aud) == 0)
            return 1;
    return 0;
}

static hsmca_code jwt_check_aud(json_t *claims, const fe_jwt_rules *r, hsmca_err *e)
{
    json_t *aud = json_object_get(claims, "aud");
    int hit = 0;
    if (json_is_string(aud)) {
        hit = aud_wanted(r, json_string_value(aud));
    } else if (json_is_array(aud)) {
        size_t i;
        json_t *a;
        json_array_foreach(aud, i, a) {
            if (!json_is_string(a))
                return hsmca_fail(e, HSMCA_EAUTH, "JWT aud array must hold strings only");
            hit |= aud_wanted(r, json_string_value(a));
        }
    } else {
        return hsmca_fail(e, HSMCA_EAUTH, "JWT aud must be a string or an array of strings");
    }
    if (hit)
        return HSMCA_OK;
    /* Name what we expected (our configuration, not token content). */
    char want[160] = "";
    size_t off = 0;
    for (int i = 0; i < r->n_audiences && off < sizeof(want); i++) {
        int n = snprintf(want + off, sizeof(want) - off, "%s%s", i ? ", " : "",
                         r->audiences[i] ? r->audiences[i] : "");
        if (n < 0)
            break;
        off += (size_t)n;
    }
    return hsmca_fail(e, HSMCA_EAUTH, "JWT aud does not include %s", want);
}

/* Kubernetes names end up inside SPIFFE IDs (.../ns/NS/sa/SA): a DNS-1123 label
 * for a namespace, a DNS-1123 subdomain for a service account (policy owns the
 * rule), so no '/', ':' or anything else that could change the ID's structure. */
static hsmca_code id_set(fe_jwt_identity *id, const char *ns, size_t nslen, const char *sa,
                         size_t salen, hsmca_err *e)
{
    if (!policy_is_k8s_name(ns, nslen, POLICY_NS_MAX, 0))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT namespace is not a valid Kubernetes name");
    if (!policy_is_k8s_name(sa, salen, POLICY_SA_MAX, 1))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT service account is not a valid Kubernetes name");
    memcpy(id->ns, ns, nslen);
    id->ns[nslen] = '\0';
    memcpy(id->sa, sa, salen);
    id->sa[salen] = '\0';
    return HSMCA_OK;
}

/* "sub": "system:serviceaccount:NS:SA". Returns 1 and fills *out when it has
 * that shape, 0 when absent or another kind of subject. */
static int sub_identity(json_t *claims, fe_jwt_identity *out, hsmca_err *e, hsmca_code *rc)
{
    static const char pre[] = "system:serviceaccount:";
    json_t *sub = json_object_get(claims, "sub");
    if (!json_is_string(sub) || strncmp(json_string_value(sub), pre, sizeof(pre) - 1) != 0)
        return 0;
    const char *ns = json_string_value(sub) + sizeof(pre) - 1;
    const char *colon = strchr(ns, ':');
    if (!colon) {
        *rc = hsmca_fail(e, HSMCA_EAUTH, "JWT sub is not system:serviceaccount:NS:SA");
        return 1;
    }
    *rc = id_set(out, ns, (size_t)(colon - ns), colon + 1, strlen(colon + 1), e);
    return 1;
}

/* "kubernetes.io": {"namespace": NS, "serviceaccount": {"name": SA}}. */
static int k8s_identity(json_t *claims, fe_jwt_identity *out, hsmca_err *e, hsmca_code *rc)
{
    json_t *k = json_object_get(claims, "kubernetes.io");
    if (!k)
        return 0;
    json_t *ns = json_object_get(k, "namespace");
    json_t *sa = json_object_get(json_object_get(k, "serviceaccount"), "name");
    if (!json_is_string(ns) || !json_is_string(sa)) {
        *rc = hsmca_fail(e, HSMCA_EAUTH,
                         "JWT kubernetes.io claim lacks namespace or serviceaccount.name");
        return 1;
    }
    *rc = id_set(out, json_string_value(ns), json_string_length(ns), json_string_value(sa),
                 json_string_length(sa), e);
    return 1;
}

/* Prefers kubernetes.io; when sub names a service account too, both must agree. */
static hsmca_code jwt_identity(json_t *claims, fe_jwt_identity *id, hsmca_err *e)
{
    fe_jwt_identity a, b;
    hsmca_code rca = HSMCA_OK, rcb = HSMCA_OK;
    int has_k8s = k8s_identity(claims, &a, e, &rca);
    if (rca != HSMCA_OK)
        return rca;
    int has_sub = sub_identity(claims, &b, e, &rcb);
    if (rcb != HSMCA_OK)
        return rcb;
    if (!has_k8s && !has_sub)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT carries no Kubernetes service account");
    if (has_k8s && has_sub && (strcmp(a.ns, b.ns) != 0 || strcmp(a.sa, b.sa) != 0))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT sub and kubernetes.io name different accounts");
    *id = has_k8s ? a : b;
    return HSMCA_OK;
}

static hsmca_code jwt_check_claims(json_t *claims, const fe_jwt_rules *r, int64_t now,
                                   fe_jwt_identity *id, hsmca_err *e)
{
    json_t *iss = json_object_get(claims, "iss");
    if (!json_is_string(iss) || strcmp(json_string_value(iss), r->issuer) != 0)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT iss is not the configured issuer %s", r->issuer);
    hsmca_code rc = jwt_check_aud(claims, r, e);
    if (rc == HSMCA_OK)
        rc = jwt_check_times(claims, now, r->skew, e);
    if (rc == HSMCA_OK)
        rc = jwt_identity(claims, id, e);
    return rc;
}

hsmca_code fe_jwt_verify(const fe_jwks *keys, const fe_jwt_rules *rules, const char *token,
                         size_t len, int64_t now, fe_jwt_identity *id, hsmca_err *e)
{
    if (!keys || !rules || !rules->issuer || rules->n_audiences <= 0 || !rules->audiences)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT verifier has no keys, issuer or audience");
    if (!token || len == 0 || len > FE_JWT_MAX_LEN)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT must be 1-%d bytes", FE_JWT_MAX_LEN);

    jwt_parts p = {0};
    json_t *hdr = NULL, *claims = NULL;
    fe_kty kty = FE_KTY_RSA;
    const char *kid = NULL;
    EVP_PKEY *pkey = NULL;
    json_error_t jerr; /* its text may quote the input: never copied into e */
    hsmca_code rc = jwt_split(token, len, &p, e);
    if (rc != HSMCA_OK)
        goto out;
    hdr = json_loadb((const char *)p.hdr, p.hdr_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(hdr)) {
        rc = hsmca_fail(e, HSMCA_EAUTH, "JWT header is not a JSON object without duplicate keys");
        goto out;
    }
    if ((rc = jwt_check_header(hdr, &kty, &kid, e)) != HSMCA_OK ||
        (rc = jwt_pick_key(keys, kty, kid, &pkey, e)) != HSMCA_OK ||
        (rc = sigfmt_jws_verify(pkey, token, p.signed_len, p.sig, p.sig_len, e)) != HSMCA_OK)
        goto out;
    claims = json_loadb((const char *)p.payload, p.payload_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(claims)) {
        rc = hsmca_fail(e, HSMCA_EAUTH, "JWT payload is not a JSON object without duplicate keys");
        goto out;
    }
    fe_jwt_identity got;
    if ((rc = jwt_check_claims(claims, rules, now, &got, e)) == HSMCA_OK)
        *id = got;
out:
    json_decref(hdr);
    json_decref(claims);
    jwt_parts_free(&p);
    return rc;
}

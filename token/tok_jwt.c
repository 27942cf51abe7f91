/* tok_jwt.c - bearer JWT verification against a JWKS (see tok_jwt.h).
 *
 * Order of work in tok_jwt_verify: size cap, split into exactly three parts,
 * strict base64url decode of all three, header checks (alg allowlist, no
 * token-supplied keys), key choice from our JWKS only, signature, and only
 * then the claims: the payload JSON is never parsed before the signature
 * holds. No message carries the token or a part of it; the few header values
 * a message names (alg, kid) are truncated and reduced to plain characters. */
#include "tok_jwt.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "tok_claims.h"
#include "sigfmt.h"
#include "util.h"

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
static HSMCA_MUSTCHECK hsmca_code jwt_split(const char *tok, size_t len, jwt_parts *p, hsmca_err *e)
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
static HSMCA_MUSTCHECK hsmca_code jwt_check_header(json_t *hdr, tok_kty *kty, const char **kid, hsmca_err *e)
{
    char shown[TOK_SHOWN_LEN];
    for (size_t i = 0; i < sizeof(jwt_forbidden_hdr) / sizeof(jwt_forbidden_hdr[0]); i++)
        if (json_object_get(hdr, jwt_forbidden_hdr[i]))
            return hsmca_fail(e, HSMCA_EAUTH, "JWT header field '%s' not allowed",
                              jwt_forbidden_hdr[i]);
    json_t *alg = json_object_get(hdr, "alg");
    if (!json_is_string(alg))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT header has no string alg");
    if (strcmp(json_string_value(alg), "RS256") == 0) {
        *kty = TOK_KTY_RSA;
    } else if (strcmp(json_string_value(alg), "ES256") == 0) {
        *kty = TOK_KTY_EC;
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

hsmca_code tok_jwt_verify(const tok_jwks *keys, const tok_jwt_rules *rules, const char *token,
                         size_t len, int64_t now, tok_jwt_identity *id, hsmca_err *e)
{
    int unknown_kid;
    return tok_jwt_verify_kid(keys, rules, token, len, now, id, &unknown_kid, e);
}

hsmca_code tok_jwt_verify_kid(const tok_jwks *keys, const tok_jwt_rules *rules, const char *token,
                             size_t len, int64_t now, tok_jwt_identity *id, int *unknown_kid,
                             hsmca_err *e)
{
    *unknown_kid = 0;
    if (!keys || !rules || !rules->issuer || rules->n_audiences <= 0 || !rules->audiences)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT verifier has no keys, issuer or audience");
    if (!token || len == 0 || len > IPC_TOKEN_MAX)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT must be 1-%d bytes", IPC_TOKEN_MAX);

    jwt_parts p = {0};
    json_t *hdr = NULL;
    tok_kty kty = TOK_KTY_RSA;
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
    if ((rc = jwt_check_header(hdr, &kty, &kid, e)) != HSMCA_OK)
        goto out;
    if ((rc = tok_jwks_pick(keys, kty, kid, &pkey, e)) != HSMCA_OK) {
        *unknown_kid = kid && !tok_jwks_has_kid(keys, kid);
        goto out;
    }
    if ((rc = sigfmt_jws_verify(pkey, token, p.signed_len, p.sig, p.sig_len, e)) != HSMCA_OK)
        goto out;
    rc = tok_claims_check((const char *)p.payload, p.payload_len, rules, now, id, e);
out:
    json_decref(hdr);
    jwt_parts_free(&p);
    return rc;
}

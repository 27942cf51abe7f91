/* kf_fetch.c - see kf_fetch.h. */
#include "kf_fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "sup_http.h"
#include "sup_oidc.h"
#include "tok_jwks.h"
#include "util.h"

hsmca_code kf_fetch_init(hsmca_err *e)
{
    return sup_http_init(e);
}

#define KF_TOKEN_MAX 16384

/* auth.jwt.fetch_token_file, read at every fetch (a projected token rotates), trailing
 * whitespace cut; *tok stays NULL when none is configured. Caller frees. */
static HSMCA_MUSTCHECK hsmca_code fetch_token(const hsmca_config *c, char **tok, hsmca_err *e)
{
    *tok = NULL;
    if (!c->jwt_fetch_token_file[0])
        return HSMCA_OK;
    size_t len = 0;
    HSMCA_GUARD(util_read_file(c->jwt_fetch_token_file, KF_TOKEN_MAX, tok, &len, e));
    while (len > 0 && ((*tok)[len - 1] == '\n' || (*tok)[len - 1] == '\r' ||
                       (*tok)[len - 1] == ' ' || (*tok)[len - 1] == '\t'))
        (*tok)[--len] = '\0';
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)(*tok)[i];
        if (ch <= ' ' || ch >= 0x7f) { /* it goes into a header line */
            free(*tok);
            *tok = NULL;
            return hsmca_fail(e, HSMCA_EINVAL,
                              "auth.jwt.fetch_token_file holds other than one printable token");
        }
    }
    if (len == 0) {
        free(*tok);
        *tok = NULL;
        return hsmca_fail(e, HSMCA_EINVAL, "auth.jwt.fetch_token_file is empty");
    }
    return HSMCA_OK;
}

/* Discovery document, then the JWKS at its jwks_uri; both with the bearer token when
 * one is configured (a Kubernetes API server serves them to service accounts). The
 * jwks_uri comes from the issuer over verified TLS: trusted as much as the issuer. */
hsmca_code kf_fetch(const hsmca_config *c, const volatile int *cancel, char **out, size_t *out_len,
                    char *src, size_t srcsz, hsmca_err *e)
{
    char url[SUP_OIDC_MAX_URL + 64], jwks_uri[SUP_OIDC_MAX_URL];
    char *doc = NULL, *tok = NULL;
    size_t len = 0;
    *out = NULL;
    *out_len = 0;
    HSMCA_GUARD(sup_oidc_discovery_url(c->jwt_issuer, url, sizeof(url), e));
    HSMCA_GUARD(fetch_token(c, &tok, e));
    hsmca_code rc = sup_http_get_auth(url, c->jwt_ca_bundle, tok, c->jwt_fetch_timeout,
                                      SUP_OIDC_MAX_DOC, cancel, &doc, &len, e);
    if (rc == HSMCA_OK) {
        rc = sup_oidc_parse_discovery(doc, len, c->jwt_issuer, jwks_uri, sizeof(jwks_uri), e);
        free(doc);
        doc = NULL;
    }
    if (rc == HSMCA_OK)
        rc = sup_http_get_auth(jwks_uri, c->jwt_ca_bundle, tok, c->jwt_fetch_timeout,
                               TOK_JWKS_MAX_LEN, cancel, &doc, &len, e);
    if (tok) {
        OPENSSL_cleanse(tok, strlen(tok));
        free(tok);
    }
    if (rc != HSMCA_OK)
        return rc;
    snprintf(src, srcsz, "%s", jwks_uri);
    *out = doc;
    *out_len = len;
    return HSMCA_OK;
}

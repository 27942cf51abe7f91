/* sup_oidc.c - see sup_oidc.h. */
#include "sup_oidc.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

/* An https URL we are willing to fetch: the scheme, a non-empty authority with no
 * userinfo, nothing that is not a visible ASCII character, no fragment. */
static int https_url_ok(const char *u, size_t len, int allow_query)
{
    static const char pre[] = "https://";
    if (len <= sizeof(pre) - 1 || len >= SUP_OIDC_MAX_URL || strncmp(u, pre, sizeof(pre) - 1))
        return 0;
    const char *host = u + sizeof(pre) - 1;
    size_t hlen = strcspn(host, "/?#");
    if (hlen == 0 || memchr(host, '@', hlen))
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c <= ' ' || c >= 0x7f || c == '#' || (c == '?' && !allow_query))
            return 0;
    }
    return 1;
}

hsmca_code sup_oidc_discovery_url(const char *issuer, char *out, size_t outsz, hsmca_err *e)
{
    size_t len = strlen(issuer);
    if (!https_url_ok(issuer, len, 0))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "auth.jwt.issuer must be an https:// URL (no userinfo, query or "
                          "fragment) for discovery");
    if (issuer[len - 1] == '/')
        len--;
    int n = snprintf(out, outsz, "%.*s/.well-known/openid-configuration", (int)len, issuer);
    if (n < 0 || (size_t)n >= outsz)
        return hsmca_fail(e, HSMCA_EINVAL, "auth.jwt.issuer is too long for discovery");
    return HSMCA_OK;
}

hsmca_code sup_oidc_parse_discovery(const char *json, size_t len, const char *issuer,
                                    char *jwks_uri, size_t outsz, hsmca_err *e)
{
    if (!json || len == 0 || len > SUP_OIDC_MAX_DOC)
        return hsmca_fail(e, HSMCA_EINVAL, "discovery document must be 1-%d bytes",
                          SUP_OIDC_MAX_DOC);
    json_error_t jerr; /* its text may quote the input: never copied into e */
    json_t *doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    hsmca_code rc = HSMCA_OK;
    json_t *iss = json_object_get(doc, "issuer");
    json_t *uri = json_object_get(doc, "jwks_uri");
    if (!json_is_object(doc))
        rc = hsmca_fail(e, HSMCA_EINVAL,
                        "discovery document is not a JSON object without duplicate keys");
    else if (!json_is_string(iss) || json_string_length(iss) != strlen(issuer) ||
             memcmp(json_string_value(iss), issuer, json_string_length(iss)) != 0)
        rc = hsmca_fail(e, HSMCA_EINVAL,
                        "discovery document: issuer is not the configured issuer %.128s "
                        "(OpenID Connect Discovery §4.3)",
                        issuer);
    else if (!json_is_string(uri) ||
             !https_url_ok(json_string_value(uri), json_string_length(uri), 1))
        rc = hsmca_fail(e, HSMCA_EINVAL, "discovery document: jwks_uri is not an https:// URL");
    else if (json_string_length(uri) >= outsz)
        rc = hsmca_fail(e, HSMCA_EINVAL, "discovery document: jwks_uri is too long");
    else
        memcpy(jwks_uri, json_string_value(uri), json_string_length(uri) + 1);
    json_decref(doc);
    return rc;
}

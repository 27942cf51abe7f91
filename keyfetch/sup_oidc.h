/* sup_oidc.h - OpenID Connect Discovery 1.0 for the key fetcher (keyfetch.h):
 * where an issuer's provider metadata is, and what we take from it.
 *
 * The document (OpenID Connect Discovery 1.0 §3, §4.2) is a JSON object; we use
 * "issuer", which must equal the configured issuer exactly (§4.3: no
 * normalisation, a trailing slash matters), and "jwks_uri", the https URL of the
 * issuer's JWK Set (RFC 7517 §5). Everything else in it is ignored. */
#ifndef HSMCA_SUP_OIDC_H
#define HSMCA_SUP_OIDC_H

#include "hsmca_err.h"
#include <stddef.h>

#define SUP_OIDC_MAX_DOC 65536 /* a discovery document is a few KiB */
#define SUP_OIDC_MAX_URL 2048

/* issuer + "/.well-known/openid-configuration" (§4: a trailing '/' of the issuer is
 * dropped first) into out. The issuer must be an https:// URL without query,
 * fragment, userinfo or whitespace. */
HSMCA_MUSTCHECK hsmca_code sup_oidc_discovery_url(const char *issuer, char *out, size_t outsz,
                                                  hsmca_err *e);

/* Checks the discovery document json[0..len) against the configured issuer and
 * copies its jwks_uri (an https:// URL under SUP_OIDC_MAX_URL bytes) into out.
 * HSMCA_EINVAL names the check; the document's values are never quoted. */
HSMCA_MUSTCHECK hsmca_code sup_oidc_parse_discovery(const char *json, size_t len,
                                                    const char *issuer, char *jwks_uri,
                                                    size_t outsz, hsmca_err *e);

#endif

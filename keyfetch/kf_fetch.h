/* kf_fetch.h - one fetch of an issuer's keys by OpenID discovery, for the key fetcher's
 * holders (sup_keys_start's fetch hook): the discovery document (sup_oidc.h), then its
 * jwks_uri, over HTTPS (sup_http.h), with auth.jwt.fetch_token_file's bearer token. */
#ifndef HSMCA_KF_FETCH_H
#define HSMCA_KF_FETCH_H

#include <stddef.h>

#include "config.h"
#include "hsmca_err.h"

/* Loads libcurl (sup_http_init), once, before any fetcher thread starts. */
HSMCA_MUSTCHECK hsmca_code kf_fetch_init(hsmca_err *e);

/* sup_keys_fetch_fn: c's issuer's JWKS into a new *out of *out_len bytes (caller frees),
 * unchecked (the holder parses it), its jwks_uri in src. HSMCA_EUNAVAIL or HSMCA_EINVAL
 * naming what failed. */
HSMCA_MUSTCHECK hsmca_code kf_fetch(const hsmca_config *c, const volatile int *cancel, char **out,
                                    size_t *out_len, char *src, size_t srcsz, hsmca_err *e);

#endif

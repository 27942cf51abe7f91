/* sup_http.h - one bounded HTTPS GET (libcurl) for the key fetcher (keyfetch.h). */
#ifndef HSMCA_SUP_HTTP_H
#define HSMCA_SUP_HTTP_H

#include "hsmca_err.h"
#include <stddef.h>
#include <stdint.h>

/* GETs url (https only, no redirects), the server's certificate verified against
 * ca_bundle (a PEM file; "" or NULL: the system's trust store) and its host name.
 * The body (at most max bytes, else refused) goes to a new NUL-terminated *out of
 * *len bytes (caller frees). Anything but 200 within timeout_s seconds is HSMCA_EUNAVAIL
 * naming what happened; so is *cancel becoming non-zero meanwhile (cancel may be NULL).
 * Thread-safe once sup_http_init has run. */
HSMCA_MUSTCHECK hsmca_code sup_http_get(const char *url, const char *ca_bundle, uint32_t timeout_s,
                                        size_t max, const volatile int *cancel, char **out,
                                        size_t *len, hsmca_err *e);

/* As sup_http_get, with "Authorization: Bearer <token>" when token is not NULL. */
HSMCA_MUSTCHECK hsmca_code sup_http_get_auth(const char *url, const char *ca_bundle,
                                             const char *token, uint32_t timeout_s, size_t max,
                                             const volatile int *cancel, char **out, size_t *len,
                                             hsmca_err *e);

/* curl_global_init, once, before any thread uses sup_http_get. */
HSMCA_MUSTCHECK hsmca_code sup_http_init(hsmca_err *e);

#endif

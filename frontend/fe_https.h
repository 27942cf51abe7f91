/* fe_https.h - a minimal HTTPS/1.1 client for the TokenReview authenticator:
 * one POST per connection ("Connection: close"), on OpenSSL (already in the
 * front end), TLS verified against one given CA bundle and the server's name
 * or address, bounded in time and in answer size, no redirects, no proxies.
 *
 * Not libcurl: Debian's libcurl4-openssl brings librtmp, GnuTLS and p11-kit
 * (a PKCS#11 module loader), LDAP and SSH into the network-facing process,
 * which is to map no PKCS#11 code at all (test_sandbox.py). */
#ifndef HSMCA_FE_HTTPS_H
#define HSMCA_FE_HTTPS_H

#include <stddef.h>
#include <stdint.h>

#include "hsmca_err.h"

#define FE_HTTPS_MAX_HEAD (16 * 1024) /* status line and headers of an answer */

typedef struct fe_https fe_https;

/* The server at url ("https://host[:port][/prefix]"), trusted through ca_pem
 * only; client certificate and key (PEM, may be NULL) for mutual TLS. The host
 * name is resolved now (getaddrinfo): once confined, the front end cannot.
 * HSMCA_EINVAL names what does not parse or resolve. */
HSMCA_MUSTCHECK hsmca_code fe_https_new(const char *url, const char *ca_pem, size_t ca_len,
                                        const char *cert_pem, size_t cert_len, const char *key_pem,
                                        size_t key_len, fe_https **out, hsmca_err *e);
void fe_https_free(fe_https *h);

/* POSTs body (JSON) to the server's prefix + path with the extra header lines
 * (each "Name: value", may be NULL), all within timeout_ms; the answer's status
 * and body (a new NUL-terminated buffer, caller frees) of at most max_body
 * bytes. HSMCA_EUNAVAIL for every failure (connect, TLS, time, size, shape),
 * the message naming it. */
HSMCA_MUSTCHECK hsmca_code fe_https_post(const fe_https *h, const char *path,
                                         const char *const *headers, int n_headers,
                                         const char *body, size_t body_len, uint32_t timeout_ms,
                                         size_t max_body, int *status, char **resp,
                                         size_t *resp_len, hsmca_err *e);

/* The same as a GET (no body; "Content-Length: 0"): the Kubernetes API reads. */
HSMCA_MUSTCHECK hsmca_code fe_https_get(const fe_https *h, const char *path,
                                        const char *const *headers, int n_headers,
                                        uint32_t timeout_ms, size_t max_body, int *status,
                                        char **resp, size_t *resp_len, hsmca_err *e);

/* An HTTP/1.1 answer read to the end (the connection closed): the status and
 * the body, de-chunked when Transfer-Encoding is chunked, else Content-Length
 * bytes, else everything after the head. *body points into buf (chunked: the
 * body is moved down in place). HSMCA_EUNAVAIL names what is malformed. */
HSMCA_MUSTCHECK hsmca_code fe_https_parse_response(char *buf, size_t len, int *status, char **body,
                                                   size_t *body_len, hsmca_err *e);

#endif

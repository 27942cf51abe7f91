/* curl_dl.h - libcurl, loaded with dlopen, for the programs that speak HTTP(S) as a
 * client: the supervisor's key fetcher (sup_http.c), hsmca-publish's Kubernetes API
 * client (k8s/k8s_api.c) and hsmca probe (probe.c).
 *
 * libcurl is dlopened, never linked: only a process that runs one of those maps it and
 * what it pulls in (p11-kit, GnuTLS, LDAP, SSH, ...); every other `hsmca` command, a
 * supervisor with a JWKS file, and serve's other children (programs of their own,
 * exec'd) map none of it. One table for every caller, so the library is opened and
 * curl_global_init run once per process. */
#ifndef HSMCA_CURL_DL_H
#define HSMCA_CURL_DL_H

#include <stddef.h>

#include "hsmca_err.h"

/* The entry points are called through pointers: curl's type-checking macros, which
 * wrap the linked functions, do not apply. */
#ifndef CURL_DISABLE_TYPECHECK
#define CURL_DISABLE_TYPECHECK
#endif
#include <curl/curl.h>

#define CURL_DL_LIBRARY "libcurl.so.4"

/* The libcurl functions hsmca calls. */
typedef struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_reset)(CURL *c);
    CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *c);
    CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
    void (*easy_cleanup)(CURL *c);
    const char *(*easy_strerror)(CURLcode cc);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
} curl_dl_api;

/* Opens libcurl.so.4, resolves every entry point and runs curl_global_init, once per
 * process (thread-safe; later calls return the first one's result). A refusal's message
 * reads "needs libcurl.so.4: <why>" or "cannot initialise libcurl.so.4": the caller
 * prefixes what needed it. Run it before starting the threads that use the table:
 * curl_global_init is not thread-safe in every libcurl. */
HSMCA_MUSTCHECK hsmca_code curl_dl_load(hsmca_err *e);

/* The table once curl_dl_load has succeeded (in any thread), else NULL. Static: never
 * freed. */
const curl_dl_api *curl_dl(void);

/* CURLOPT_OPENSOCKETFUNCTION: every socket libcurl opens is close-on-exec, so a child
 * forked and exec'd by another thread meanwhile inherits no connection. */
curl_socket_t curl_dl_open_cloexec(void *arg, curlsocktype purpose, struct curl_sockaddr *a);

/* A response body of at most max bytes, kept NUL-terminated. buf may be preallocated
 * (cap bytes, at least 1) or NULL and grown as the body comes; the caller frees it. */
typedef struct {
    char *buf;
    size_t len, cap, max;
    int too_big; /* the answer was longer than max: the transfer was aborted */
    int no_mem;  /* growing buf failed: the transfer was aborted */
} curl_dl_body;

/* CURLOPT_WRITEFUNCTION with a curl_dl_body as CURLOPT_WRITEDATA. */
size_t curl_dl_body_write(char *p, size_t size, size_t n, void *arg);

#endif

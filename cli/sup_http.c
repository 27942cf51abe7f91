/* sup_http.c - see sup_http.h.
 *
 * libcurl is loaded with dlopen, by the supervisor only and only when discovery is
 * configured: every other `hsmca` command, and a supervisor with a JWKS file, then
 * maps none of it nor what it pulls in (p11-kit, GnuTLS, LDAP, SSH, ...). The
 * children are programs of their own and never link it.
 *
 * The supervisor forks and execs its children while this runs on another
 * thread: every socket libcurl opens is close-on-exec, so no child inherits a
 * connection to the issuer. */
#include "sup_http.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#define SUP_LIBCURL "libcurl.so.4"

/* The libcurl entry points we use, resolved once by sup_http_init. */
static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *c);
    CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
    void (*easy_cleanup)(CURL *c);
    const char *(*easy_strerror)(CURLcode cc);
} cu;

typedef struct {
    char *buf;
    size_t len, max;
    int too_big;
} http_body;

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    http_body *b = arg;
    size_t add = size * n;
    if (add > b->max - b->len) {
        b->too_big = 1;
        return 0; /* aborts the transfer */
    }
    memcpy(b->buf + b->len, p, add);
    b->len += add;
    return add;
}

/* Non-zero aborts the transfer: the supervisor is stopping. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    const volatile int *cancel = arg;
    return cancel && *cancel;
}

static curl_socket_t open_cloexec(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static void *sym(void *lib, const char *name, int *missing)
{
    void *p = dlsym(lib, name);
    *missing |= p == NULL;
    return p;
}

hsmca_code sup_http_init(hsmca_err *e)
{
    if (cu.easy_init)
        return HSMCA_OK;
    void *lib = dlopen(SUP_LIBCURL, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return hsmca_fail(e, HSMCA_EINVAL, "auth.jwt.discovery needs %s: %s", SUP_LIBCURL,
                          dlerror());
    int missing = 0;
    *(void **)&cu.global_init = sym(lib, "curl_global_init", &missing);
    *(void **)&cu.easy_setopt = sym(lib, "curl_easy_setopt", &missing);
    *(void **)&cu.easy_perform = sym(lib, "curl_easy_perform", &missing);
    *(void **)&cu.easy_getinfo = sym(lib, "curl_easy_getinfo", &missing);
    *(void **)&cu.easy_cleanup = sym(lib, "curl_easy_cleanup", &missing);
    *(void **)&cu.easy_strerror = sym(lib, "curl_easy_strerror", &missing);
    void *init = sym(lib, "curl_easy_init", &missing);
    if (missing || cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return hsmca_fail(e, HSMCA_EINVAL, "cannot initialise %s", SUP_LIBCURL);
    *(void **)&cu.easy_init = init; /* last: it says the table is complete */
    return HSMCA_OK;
}

hsmca_code sup_http_get(const char *url, const char *ca_bundle, uint32_t timeout_s, size_t max,
                        const volatile int *cancel, char **out, size_t *len, hsmca_err *e)
{
    return sup_http_get_auth(url, ca_bundle, NULL, timeout_s, max, cancel, out, len, e);
}

hsmca_code sup_http_get_auth(const char *url, const char *ca_bundle, const char *token,
                             uint32_t timeout_s, size_t max, const volatile int *cancel, char **out,
                             size_t *len, hsmca_err *e)
{
    *out = NULL;
    *len = 0;
    if (!cu.easy_init)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sup_http_init has not run");
    http_body b = {malloc(max + 1), 0, max, 0};
    CURL *c = cu.easy_init();
    if (!b.buf || !c) {
        free(b.buf);
        cu.easy_cleanup(c);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory for an HTTPS request");
    }
    char curl_msg[CURL_ERROR_SIZE] = "";
    cu.easy_setopt(c, CURLOPT_URL, url);
    cu.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    cu.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    cu.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    cu.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (ca_bundle && ca_bundle[0])
        cu.easy_setopt(c, CURLOPT_CAINFO, ca_bundle);
    cu.easy_setopt(c, CURLOPT_TIMEOUT, (long)timeout_s);
    cu.easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)timeout_s);
    cu.easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* we are one thread of several */
    cu.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    cu.easy_setopt(c, CURLOPT_WRITEDATA, &b);
    cu.easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_cloexec);
    cu.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    cu.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    cu.easy_setopt(c, CURLOPT_XFERINFODATA, (void *)cancel);
    cu.easy_setopt(c, CURLOPT_ERRORBUFFER, curl_msg);
    cu.easy_setopt(c, CURLOPT_USERAGENT, "hsmca/" HSMCA_VERSION);
    if (token) {
        cu.easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        cu.easy_setopt(c, CURLOPT_XOAUTH2_BEARER, token);
    }
    CURLcode cc = cu.easy_perform(c);
    long status = 0;
    cu.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    cu.easy_cleanup(c);
    hsmca_code rc = HSMCA_OK;
    if (b.too_big)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "GET %.200s: body over %zu bytes", url, max);
    else if (cc != CURLE_OK)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "GET %.200s: %s", url,
                        curl_msg[0] ? curl_msg : cu.easy_strerror(cc));
    else if (status != 200)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "GET %.200s: HTTP status %ld", url, status);
    if (rc != HSMCA_OK) {
        free(b.buf);
        return rc;
    }
    b.buf[b.len] = '\0';
    *out = b.buf;
    *len = b.len;
    return HSMCA_OK;
}

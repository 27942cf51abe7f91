/* k8s_publish_api.c - see k8s_publish.h: JSON over HTTPS to the Kubernetes API server.
 *
 * libcurl is loaded with dlopen, as cli/sup_http.c loads it for the key fetcher: the
 * other `hsmca` commands then map none of it. This file keeps its own table because it
 * needs calls sup_http.c does not (PUT and POST bodies, headers, in-memory CA and
 * client-certificate blobs, and every HTTP status returned rather than refused). One
 * easy handle is kept and reset between calls, so its connection is reused. */
#include "k8s_publish.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#define KP_LIBCURL "libcurl.so.4"

static struct {
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
} cu;

struct kp_api {
    CURL *c;
    char server[512];
    char *token;
    struct curl_blob ca, cert, key;
    uint32_t timeout_s;
};

typedef struct {
    char *buf;
    size_t len, cap;
    int too_big;
} kp_body;

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    kp_body *b = arg;
    size_t add = size * n;
    if (add > KP_MAX_BODY - b->len) {
        b->too_big = 1;
        return 0;
    }
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + add + 1)
            cap *= 2;
        char *nb = realloc(b->buf, cap);
        if (!nb) {
            b->too_big = 1;
            return 0;
        }
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, p, add);
    b->len += add;
    return add;
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

static HSMCA_MUSTCHECK hsmca_code load_curl(hsmca_err *e)
{
    if (cu.easy_init)
        return HSMCA_OK;
    void *lib = dlopen(KP_LIBCURL, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return hsmca_fail(e, HSMCA_EINVAL, "hsmca k8s needs %s: %s", KP_LIBCURL, dlerror());
    int missing = 0;
    *(void **)&cu.global_init = sym(lib, "curl_global_init", &missing);
    *(void **)&cu.easy_reset = sym(lib, "curl_easy_reset", &missing);
    *(void **)&cu.easy_setopt = sym(lib, "curl_easy_setopt", &missing);
    *(void **)&cu.easy_perform = sym(lib, "curl_easy_perform", &missing);
    *(void **)&cu.easy_getinfo = sym(lib, "curl_easy_getinfo", &missing);
    *(void **)&cu.easy_cleanup = sym(lib, "curl_easy_cleanup", &missing);
    *(void **)&cu.easy_strerror = sym(lib, "curl_easy_strerror", &missing);
    *(void **)&cu.slist_append = sym(lib, "curl_slist_append", &missing);
    *(void **)&cu.slist_free_all = sym(lib, "curl_slist_free_all", &missing);
    void *init = sym(lib, "curl_easy_init", &missing);
    if (missing || cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return hsmca_fail(e, HSMCA_EINVAL, "cannot initialise %s", KP_LIBCURL);
    *(void **)&cu.easy_init = init; /* last: it says the table is complete */
    return HSMCA_OK;
}

hsmca_code kp_api_new(const k8s_target *t, uint32_t timeout_s, kp_api **out, hsmca_err *e)
{
    *out = NULL;
    HSMCA_GUARD(load_curl(e));
    kp_api *a = calloc(1, sizeof(*a));
    if (!a)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    snprintf(a->server, sizeof(a->server), "%s", t->server);
    a->timeout_s = timeout_s ? timeout_s : 10;
    /* The blobs point into t, which the caller keeps until kp_api_free. */
    a->ca = (struct curl_blob){t->ca_pem, t->ca_len, CURL_BLOB_NOCOPY};
    a->cert = (struct curl_blob){t->cert_pem, t->cert_len, CURL_BLOB_NOCOPY};
    a->key = (struct curl_blob){t->key_pem, t->key_len, CURL_BLOB_NOCOPY};
    if ((t->token && !(a->token = strdup(t->token))) || !(a->c = cu.easy_init())) {
        kp_api_free(a);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    *out = a;
    return HSMCA_OK;
}

void kp_api_free(kp_api *a)
{
    if (!a)
        return;
    if (a->c)
        cu.easy_cleanup(a->c);
    if (a->token) {
        OPENSSL_cleanse(a->token, strlen(a->token));
        free(a->token);
    }
    free(a);
}

static void set_options(kp_api *a, const char *url, const char *method, const char *body,
                        struct curl_slist *hdrs, kp_body *b, char *errbuf)
{
    CURL *c = a->c;
    cu.easy_setopt(c, CURLOPT_URL, url);
    cu.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    cu.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    cu.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    cu.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    cu.easy_setopt(c, CURLOPT_CAINFO_BLOB, &a->ca);
    if (a->cert.data) {
        cu.easy_setopt(c, CURLOPT_SSLCERT_BLOB, &a->cert);
        cu.easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
        cu.easy_setopt(c, CURLOPT_SSLKEY_BLOB, &a->key);
        cu.easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (a->token) {
        cu.easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        cu.easy_setopt(c, CURLOPT_XOAUTH2_BEARER, a->token);
    }
    cu.easy_setopt(c, CURLOPT_TIMEOUT, (long)a->timeout_s);
    cu.easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)a->timeout_s);
    cu.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    cu.easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_cloexec);
    cu.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    cu.easy_setopt(c, CURLOPT_WRITEDATA, b);
    cu.easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    cu.easy_setopt(c, CURLOPT_USERAGENT, "hsmca/" HSMCA_VERSION " publish-roots");
    cu.easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (body) {
        cu.easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        cu.easy_setopt(c, CURLOPT_POSTFIELDS, body);
        cu.easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
}

hsmca_code kp_api_call(kp_api *a, const char *method, const char *path, json_t *body, long *status,
                       json_t **resp, hsmca_err *e)
{
    *status = 0;
    *resp = NULL;
    char url[4096];
    if (snprintf(url, sizeof(url), "%s%s", a->server, path) >= (int)sizeof(url))
        return hsmca_fail(e, HSMCA_EINVAL, "%s %.200s: path too long", method, path);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct curl_slist *hdrs = cu.slist_append(NULL, "Accept: application/json");
    struct curl_slist *h2 = hdrs ? cu.slist_append(hdrs, "Content-Type: application/json") : NULL;
    /* No "Expect: 100-continue" before a body: one round trip less per write. */
    struct curl_slist *h3 = h2 ? cu.slist_append(h2, "Expect:") : NULL;
    if ((body && !text) || !h3) {
        free(text);
        cu.slist_free_all(hdrs); /* the head: h2 and h3 are it too */
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    kp_body b = {0};
    char errbuf[CURL_ERROR_SIZE] = "";
    cu.easy_reset(a->c);
    set_options(a, url, method, text, h3, &b, errbuf);
    CURLcode cc = cu.easy_perform(a->c);
    cu.easy_getinfo(a->c, CURLINFO_RESPONSE_CODE, status);
    cu.easy_setopt(a->c, CURLOPT_HTTPHEADER, NULL);
    cu.slist_free_all(h3);
    free(text);
    hsmca_code rc = HSMCA_OK;
    if (b.too_big)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "%s %.200s: answer over %d bytes", method, path,
                        KP_MAX_BODY);
    else if (cc != CURLE_OK)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "%s %.200s%.200s: %s", method, a->server, path,
                        errbuf[0] ? errbuf : cu.easy_strerror(cc));
    else if (b.len) {
        json_error_t je;
        *resp = json_loadb(b.buf, b.len, JSON_REJECT_DUPLICATES, &je);
    }
    free(b.buf);
    return rc;
}

int kp_query_escape(const char *s, char *out, size_t outsz)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~", *p);
        if (o + (plain ? 1 : 3) >= outsz)
            return -1;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    if (o >= outsz)
        return -1;
    out[o] = 0;
    return 0;
}

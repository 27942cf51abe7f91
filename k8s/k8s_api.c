/* k8s_api.c - see k8s.h: JSON over HTTPS to the Kubernetes API server,
 * with libcurl from curl_dl.c (PUT and POST bodies, headers, in-memory CA and
 * client-certificate blobs, and every HTTP status returned rather than refused). One
 * easy handle is kept and reset between calls, so its connection is reused. */
#include "k8s.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "curl_dl.h"

struct k8s_client {
    CURL *c;
    char server[512];
    char agent[128]; /* the User-Agent */
    char *token;
    struct curl_blob ca, cert, key;
    uint32_t timeout_s;
};

hsmca_code k8s_client_new(const k8s_target *t, uint32_t timeout_s, const char *agent,
                          k8s_client **out, hsmca_err *e)
{
    *out = NULL;
    hsmca_err le;
    if (curl_dl_load(&le) != HSMCA_OK)
        return hsmca_fail(e, le.code, "the Kubernetes API client %s", le.msg);
    const curl_dl_api *cu = curl_dl();
    k8s_client *a = calloc(1, sizeof(*a));
    if (!a)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    snprintf(a->server, sizeof(a->server), "%s", t->server);
    snprintf(a->agent, sizeof(a->agent), "hsmca/%s %.64s", HSMCA_VERSION, agent);
    a->timeout_s = timeout_s ? timeout_s : 10;
    /* The blobs point into t, which the caller keeps until k8s_client_free. */
    a->ca = (struct curl_blob){t->ca_pem, t->ca_len, CURL_BLOB_NOCOPY};
    a->cert = (struct curl_blob){t->cert_pem, t->cert_len, CURL_BLOB_NOCOPY};
    a->key = (struct curl_blob){t->key_pem, t->key_len, CURL_BLOB_NOCOPY};
    if ((t->token && !(a->token = strdup(t->token))) || !(a->c = cu->easy_init())) {
        k8s_client_free(a);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    *out = a;
    return HSMCA_OK;
}

void k8s_client_free(k8s_client *a)
{
    if (!a)
        return;
    if (a->c) /* set only once curl_dl_load has succeeded */
        curl_dl()->easy_cleanup(a->c);
    if (a->token) {
        OPENSSL_cleanse(a->token, strlen(a->token));
        free(a->token);
    }
    free(a);
}

static void set_options(k8s_client *a, const char *url, const char *method, const char *body,
                        struct curl_slist *hdrs, curl_dl_body *b, char *errbuf)
{
    const curl_dl_api *cu = curl_dl();
    CURL *c = a->c;
    cu->easy_setopt(c, CURLOPT_URL, url);
    cu->easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    cu->easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    cu->easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    cu->easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    cu->easy_setopt(c, CURLOPT_CAINFO_BLOB, &a->ca);
    if (a->cert.data) {
        cu->easy_setopt(c, CURLOPT_SSLCERT_BLOB, &a->cert);
        cu->easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
        cu->easy_setopt(c, CURLOPT_SSLKEY_BLOB, &a->key);
        cu->easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (a->token) {
        cu->easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        cu->easy_setopt(c, CURLOPT_XOAUTH2_BEARER, a->token);
    }
    cu->easy_setopt(c, CURLOPT_TIMEOUT, (long)a->timeout_s);
    cu->easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)a->timeout_s);
    cu->easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    cu->easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, curl_dl_open_cloexec);
    cu->easy_setopt(c, CURLOPT_WRITEFUNCTION, curl_dl_body_write);
    cu->easy_setopt(c, CURLOPT_WRITEDATA, b);
    cu->easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    cu->easy_setopt(c, CURLOPT_USERAGENT, a->agent);
    cu->easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (body) {
        cu->easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        cu->easy_setopt(c, CURLOPT_POSTFIELDS, body);
        cu->easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
}

hsmca_code k8s_call(k8s_client *a, const char *method, const char *path, json_t *body, long *status,
                    json_t **resp, hsmca_err *e)
{
    *status = 0;
    *resp = NULL;
    char url[4096];
    if (snprintf(url, sizeof(url), "%s%s", a->server, path) >= (int)sizeof(url))
        return hsmca_fail(e, HSMCA_EINVAL, "%s %.200s: path too long", method, path);
    const curl_dl_api *cu = curl_dl(); /* loaded: a exists */
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct curl_slist *hdrs = cu->slist_append(NULL, "Accept: application/json");
    struct curl_slist *h2 = hdrs ? cu->slist_append(hdrs, "Content-Type: application/json") : NULL;
    /* No "Expect: 100-continue" before a body: one round trip less per write. */
    struct curl_slist *h3 = h2 ? cu->slist_append(h2, "Expect:") : NULL;
    if ((body && !text) || !h3) {
        free(text);
        cu->slist_free_all(hdrs); /* the head: h2 and h3 are it too */
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    curl_dl_body b = {.max = K8S_MAX_BODY};
    char errbuf[CURL_ERROR_SIZE] = "";
    cu->easy_reset(a->c);
    set_options(a, url, method, text, h3, &b, errbuf);
    CURLcode cc = cu->easy_perform(a->c);
    cu->easy_getinfo(a->c, CURLINFO_RESPONSE_CODE, status);
    cu->easy_setopt(a->c, CURLOPT_HTTPHEADER, NULL);
    cu->slist_free_all(h3);
    free(text);
    hsmca_code rc = HSMCA_OK;
    if (b.too_big)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "%s %.200s: answer over %d bytes", method, path,
                        K8S_MAX_BODY);
    else if (b.no_mem)
        rc = hsmca_fail(e, HSMCA_ENOMEM, "%s %.200s: out of memory for the answer", method, path);
    else if (cc != CURLE_OK)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "%s %.200s%.200s: %s", method, a->server, path,
                        errbuf[0] ? errbuf : cu->easy_strerror(cc));
    else if (b.len) {
        json_error_t je;
        *resp = json_loadb(b.buf, b.len, JSON_REJECT_DUPLICATES, &je);
    }
    free(b.buf);
    return rc;
}

hsmca_code k8s_get(k8s_client *c, const char *path, long *status, json_t **resp, hsmca_err *e)
{
    return k8s_call(c, "GET", path, NULL, status, resp, e);
}

hsmca_code k8s_put(k8s_client *c, const char *path, json_t *body, long *status, json_t **resp,
                   hsmca_err *e)
{
    return k8s_call(c, "PUT", path, body, status, resp, e);
}

hsmca_code k8s_post(k8s_client *c, const char *path, json_t *body, long *status, json_t **resp,
                    hsmca_err *e)
{
    return k8s_call(c, "POST", path, body, status, resp, e);
}

int k8s_query_escape(const char *s, char *out, size_t outsz)
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

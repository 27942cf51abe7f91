/* sup_http.c - see sup_http.h.
 *
 * The supervisor forks and execs its children while this runs on another
 * thread: every socket libcurl opens is close-on-exec, so no child inherits a
 * connection to the issuer. */
#include "sup_http.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <curl/curl.h>

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

hsmca_code sup_http_init(hsmca_err *e)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot initialise libcurl");
    return HSMCA_OK;
}

hsmca_code sup_http_get(const char *url, const char *ca_bundle, uint32_t timeout_s, size_t max,
                        const volatile int *cancel, char **out, size_t *len, hsmca_err *e)
{
    *out = NULL;
    *len = 0;
    http_body b = {malloc(max + 1), 0, max, 0};
    CURL *c = curl_easy_init();
    if (!b.buf || !c) {
        free(b.buf);
        curl_easy_cleanup(c);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory for an HTTPS request");
    }
    char curl_msg[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (ca_bundle && ca_bundle[0])
        curl_easy_setopt(c, CURLOPT_CAINFO, ca_bundle);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)timeout_s);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)timeout_s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* we are one thread of several */
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_cloexec);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)cancel);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_msg);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "hsmca/" HSMCA_VERSION);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    hsmca_code rc = HSMCA_OK;
    if (b.too_big)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "GET %.200s: body over %zu bytes", url, max);
    else if (cc != CURLE_OK)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "GET %.200s: %s", url,
                        curl_msg[0] ? curl_msg : curl_easy_strerror(cc));
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

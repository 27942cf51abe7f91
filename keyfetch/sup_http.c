/* sup_http.c - see sup_http.h. libcurl comes from curl_dl.c, loaded only in the key
 * fetcher (keyfetch.h), when discovery is configured: the supervisor maps none of it.
 *
 * Every socket libcurl opens is close-on-exec, so no program this process might run
 * inherits a connection to the issuer. */
#include "sup_http.h"

#include <stdlib.h>
#include <string.h>

#include "curl_dl.h"

/* Non-zero aborts the transfer: the supervisor is stopping. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    const volatile int *cancel = arg;
    return cancel && *cancel;
}

hsmca_code sup_http_init(hsmca_err *e)
{
    hsmca_err le;
    if (curl_dl_load(&le) != HSMCA_OK)
        return hsmca_fail(e, le.code, "auth.jwt.discovery %s", le.msg);
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
    const curl_dl_api *cu = curl_dl();
    if (!cu)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sup_http_init has not run");
    curl_dl_body b = {.buf = malloc(max + 1), .cap = max + 1, .max = max};
    CURL *c = cu->easy_init();
    if (!b.buf || !c) {
        free(b.buf);
        cu->easy_cleanup(c);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory for an HTTPS request");
    }
    char curl_msg[CURL_ERROR_SIZE] = "";
    cu->easy_setopt(c, CURLOPT_URL, url);
    cu->easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    cu->easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    cu->easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    cu->easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (ca_bundle && ca_bundle[0])
        cu->easy_setopt(c, CURLOPT_CAINFO, ca_bundle);
    cu->easy_setopt(c, CURLOPT_TIMEOUT, (long)timeout_s);
    cu->easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)timeout_s);
    cu->easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* we are one thread of several */
    cu->easy_setopt(c, CURLOPT_WRITEFUNCTION, curl_dl_body_write);
    cu->easy_setopt(c, CURLOPT_WRITEDATA, &b);
    cu->easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, curl_dl_open_cloexec);
    cu->easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    cu->easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    cu->easy_setopt(c, CURLOPT_XFERINFODATA, (void *)cancel);
    cu->easy_setopt(c, CURLOPT_ERRORBUFFER, curl_msg);
    cu->easy_setopt(c, CURLOPT_USERAGENT, "hsmca/" HSMCA_VERSION);
    if (token) {
        cu->easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        cu->easy_setopt(c, CURLOPT_XOAUTH2_BEARER, token);
    }
    CURLcode cc = cu->easy_perform(c);
    long status = 0;
    cu->easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    cu->easy_cleanup(c);
    hsmca_code rc = HSMCA_OK;
    if (b.too_big)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "GET %.200s: body over %zu bytes", url, max);
    else if (cc != CURLE_OK)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "GET %.200s: %s", url,
                        curl_msg[0] ? curl_msg : cu->easy_strerror(cc));
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

/* fe_https.c - see fe_https.h. */
#include "fe_https.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "util.h"

struct fe_https {
    SSL_CTX *ctx;
    char host[256]; /* name or address, without brackets: SNI and the certificate check */
    int host_is_ip;
    char authority[300]; /* the Host header */
    char prefix[256];    /* path prefix from the URL, "" or "/x/y" */
    struct sockaddr_storage addr;
    socklen_t addrlen;
};

/* ---- set-up ---- */

static HSMCA_MUSTCHECK hsmca_code parse_url(fe_https *h, const char *url, char *port, size_t portsz,
                                            hsmca_err *e)
{
    static const char bad[] =
        "auth.tokenreview: the API server URL is not https://host[:port][/path]";
    HSMCA_ENSURE(!strncmp(url, "https://", 8), e, HSMCA_EINVAL, "%s", bad);
    const char *a = url + 8, *slash = strchr(a, '/');
    size_t alen = slash ? (size_t)(slash - a) : strlen(a);
    HSMCA_ENSURE(alen > 0 && alen < sizeof(h->authority), e, HSMCA_EINVAL, "%s", bad);
    memcpy(h->authority, a, alen);
    h->authority[alen] = 0;
    HSMCA_ENSURE(!strpbrk(h->authority, "@?# "), e, HSMCA_EINVAL, "%s", bad);
    snprintf(h->prefix, sizeof(h->prefix), "%s", slash ? slash : "");
    size_t n = strlen(h->prefix);
    while (n && h->prefix[n - 1] == '/')
        h->prefix[--n] = 0;
    const char *hs = h->authority, *he, *colon;
    if (hs[0] == '[') {
        he = strchr(hs, ']');
        HSMCA_ENSURE(he, e, HSMCA_EINVAL, "%s", bad);
        colon = he[1] == ':' ? he + 1 : NULL;
        HSMCA_ENSURE(he[1] == 0 || colon, e, HSMCA_EINVAL, "%s", bad);
        hs++;
    } else {
        colon = strchr(hs, ':');
        he = colon ? colon : hs + strlen(hs);
    }
    HSMCA_ENSURE(he > hs && (size_t)(he - hs) < sizeof(h->host), e, HSMCA_EINVAL, "%s", bad);
    memcpy(h->host, hs, (size_t)(he - hs));
    h->host[he - hs] = 0;
    snprintf(port, portsz, "%s", colon ? colon + 1 : "443");
    HSMCA_ENSURE(port[0] && strspn(port, "0123456789") == strlen(port) && atoi(port) > 0 &&
                     atoi(port) < 65536,
                 e, HSMCA_EINVAL, "%s", bad);
    unsigned char bin[16];
    h->host_is_ip = inet_pton(AF_INET, h->host, bin) == 1 || inet_pton(AF_INET6, h->host, bin) == 1;
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code resolve(fe_https *h, const char *port, hsmca_err *e)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(h->host, port, &hints, &ai);
    if (g != 0 || !ai)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "auth.tokenreview: cannot resolve the API server %.64s: %s", h->host,
                          gai_strerror(g));
    memcpy(&h->addr, ai->ai_addr, ai->ai_addrlen);
    h->addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code load_trust(fe_https *h, const char *ca_pem, size_t ca_len,
                                             hsmca_err *e)
{
    BIO *b = BIO_new_mem_buf(ca_pem, (int)ca_len);
    STACK_OF(X509_INFO) *infos = b ? PEM_X509_INFO_read_bio(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    X509_STORE *st = SSL_CTX_get_cert_store(h->ctx);
    int n = 0;
    for (int i = 0; infos && i < sk_X509_INFO_num(infos); i++) {
        X509_INFO *xi = sk_X509_INFO_value(infos, i);
        if (xi->x509 && X509_STORE_add_cert(st, xi->x509) == 1)
            n++;
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    ERR_clear_error();
    HSMCA_ENSURE(n > 0, e, HSMCA_EINVAL,
                 "auth.tokenreview: the cluster CA bundle holds no certificate");
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code load_client(fe_https *h, const char *cert_pem, size_t cert_len,
                                              const char *key_pem, size_t key_len, hsmca_err *e)
{
    BIO *cb = BIO_new_mem_buf(cert_pem, (int)cert_len);
    BIO *kb = BIO_new_mem_buf(key_pem, (int)key_len);
    X509 *leaf = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    int ok = leaf && key && SSL_CTX_use_certificate(h->ctx, leaf) == 1 &&
             SSL_CTX_use_PrivateKey(h->ctx, key) == 1 && SSL_CTX_check_private_key(h->ctx) == 1;
    X509 *extra;
    while (ok && (extra = PEM_read_bio_X509(cb, NULL, NULL, NULL)))
        if (SSL_CTX_add_extra_chain_cert(h->ctx, extra) != 1) {
            X509_free(extra);
            ok = 0;
        }
    X509_free(leaf);
    EVP_PKEY_free(key);
    BIO_free(cb);
    BIO_free(kb);
    ERR_clear_error();
    HSMCA_ENSURE(ok, e, HSMCA_EINVAL,
                 "kubeconfig: client-certificate and client-key do not load or do not match");
    return HSMCA_OK;
}

hsmca_code fe_https_new(const char *url, const char *ca_pem, size_t ca_len, const char *cert_pem,
                        size_t cert_len, const char *key_pem, size_t key_len, fe_https **out,
                        hsmca_err *e)
{
    *out = NULL;
    fe_https *h = calloc(1, sizeof(*h));
    if (!h)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    char port[16];
    hsmca_code rc = parse_url(h, url, port, sizeof(port), e);
    if (rc == HSMCA_OK)
        rc = resolve(h, port, e);
    if (rc == HSMCA_OK && !(h->ctx = SSL_CTX_new(TLS_client_method())))
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "SSL_CTX_new failed");
    if (rc == HSMCA_OK) {
        SSL_CTX_set_min_proto_version(h->ctx, TLS1_2_VERSION);
        SSL_CTX_set_verify(h->ctx, SSL_VERIFY_PEER, NULL);
        /* A close without close_notify ends the read; the body's length is checked. */
        SSL_CTX_set_options(h->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
        rc = load_trust(h, ca_pem, ca_len, e);
    }
    if (rc == HSMCA_OK && cert_pem)
        rc = load_client(h, cert_pem, cert_len, key_pem, key_len, e);
    if (rc != HSMCA_OK) {
        fe_https_free(h);
        return rc;
    }
    *out = h;
    return HSMCA_OK;
}

void fe_https_free(fe_https *h)
{
    if (!h)
        return;
    SSL_CTX_free(h->ctx);
    free(h);
}

/* ---- one request ---- */

static int left_ms(double deadline)
{
    double ms = (deadline - util_mono_now()) * 1000.0;
    return ms <= 0 ? 0 : ms > 600000 ? 600000 : (int)ms + 1;
}

/* Waits for fd to be readable (want_read) or writable until deadline: 0, or -1 on time out. */
static int wait_fd(int fd, int want_read, double deadline)
{
    for (;;) {
        int ms = left_ms(deadline);
        if (ms == 0)
            return -1;
        struct pollfd p = {fd, (short)(want_read ? POLLIN : POLLOUT), 0};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static HSMCA_MUSTCHECK hsmca_code tcp_connect(const fe_https *h, double deadline, int *fd,
                                              uint32_t timeout_ms, hsmca_err *e)
{
    *fd = socket(h->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (*fd < 0)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: socket: %s", strerror(errno));
    if (connect(*fd, (const struct sockaddr *)&h->addr, h->addrlen) == 0)
        return HSMCA_OK;
    if (errno != EINPROGRESS)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: API server unreachable: %s",
                          strerror(errno));
    if (wait_fd(*fd, 0, deadline) != 0)
        return hsmca_fail(e, HSMCA_EUNAVAIL,
                          "tokenreview: the API server did not answer within %u ms", timeout_ms);
    int err = 0;
    socklen_t el = sizeof(err);
    if (getsockopt(*fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: API server unreachable: %s",
                          strerror(err ? err : errno));
    return HSMCA_OK;
}

/* Drives a non-blocking SSL call (r = its result) to completion: 1 to call it
 * again, 0 done, -1 failed or timed out (*timed_out set). */
static int ssl_step(SSL *s, int r, int fd, double deadline, int *timed_out)
{
    if (r > 0)
        return 0;
    int err = SSL_get_error(s, r);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
        return -1;
    if (wait_fd(fd, err == SSL_ERROR_WANT_READ, deadline) != 0) {
        *timed_out = 1;
        return -1;
    }
    return 1;
}

static char *build_request(const fe_https *h, const char *method, const char *path,
                           const char *const *headers, int n_headers, size_t body_len, size_t *len)
{
    size_t cap = 512 + strlen(h->prefix) + strlen(path) + strlen(h->authority);
    for (int i = 0; i < n_headers; i++)
        cap += strlen(headers[i]) + 2;
    char *req = malloc(cap);
    if (!req)
        return NULL;
    int n = snprintf(req, cap,
                     "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: hsmca\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n",
                     method, h->prefix, path, h->authority, body_len);
    for (int i = 0; i < n_headers; i++)
        n += snprintf(req + n, cap - (size_t)n, "%s\r\n", headers[i]);
    n += snprintf(req + n, cap - (size_t)n, "\r\n");
    *len = (size_t)n;
    return req;
}

static void wipe_free(char *p, size_t n)
{
    if (p)
        OPENSSL_cleanse(p, n);
    free(p);
}

/* TLS on fd, the request out, the answer in (to the server's close). */
static HSMCA_MUSTCHECK hsmca_code exchange(const fe_https *h, int fd, const char *req,
                                           size_t req_len, const char *body, size_t body_len,
                                           double deadline, uint32_t timeout_ms, size_t max,
                                           char *buf, size_t *got, hsmca_err *e)
{
    SSL *s = SSL_new(h->ctx);
    if (!s)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: out of memory");
    SSL_set_fd(s, fd);
    if (h->host_is_ip) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), h->host);
    } else {
        SSL_set_tlsext_host_name(s, h->host);
        SSL_set1_host(s, h->host);
    }
    int r, step, timed_out = 0;
    hsmca_code rc = HSMCA_OK;
    while ((step = ssl_step(s, r = SSL_connect(s), fd, deadline, &timed_out)) == 1)
        ;
    if (step < 0 && !timed_out) {
        long v = SSL_get_verify_result(s);
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: TLS with the API server failed%s%s",
                        v != X509_V_OK ? ": " : "",
                        v != X509_V_OK ? X509_verify_cert_error_string(v) : "");
    }
    const char *parts[2] = {req, body};
    size_t lens[2] = {req_len, body_len};
    for (int p = 0; rc == HSMCA_OK && step == 0 && p < 2; p++) {
        size_t off = 0;
        while (step == 0 && off < lens[p]) {
            while ((step = ssl_step(s, r = SSL_write(s, parts[p] + off, (int)(lens[p] - off)), fd,
                                    deadline, &timed_out)) == 1)
                ;
            if (step == 0)
                off += (size_t)r;
        }
    }
    *got = 0;
    while (rc == HSMCA_OK && step == 0) {
        if (*got == max) {
            rc = hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: answer over %zu bytes", max);
            break;
        }
        while ((step = ssl_step(s, r = SSL_read(s, buf + *got, (int)(max - *got)), fd, deadline,
                                &timed_out)) == 1)
            ;
        if (step == 0)
            *got += (size_t)r;
        else if (!timed_out && (SSL_get_error(s, r) == SSL_ERROR_ZERO_RETURN ||
                                SSL_get_error(s, r) == SSL_ERROR_SYSCALL))
            step = 2; /* the server closed: the answer is whole (or cut, parsed below) */
    }
    if (rc == HSMCA_OK && timed_out)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL,
                        "tokenreview: the API server did not answer within %u ms", timeout_ms);
    else if (rc == HSMCA_OK && step != 2)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: the connection to the API server failed");
    SSL_free(s);
    ERR_clear_error();
    return rc;
}

static HSMCA_MUSTCHECK hsmca_code request(const fe_https *h, const char *method, const char *path,
                                          const char *const *headers, int n_headers,
                                          const char *body, size_t body_len, uint32_t timeout_ms,
                                          size_t max_body, int *status, char **resp,
                                          size_t *resp_len, hsmca_err *e)
{
    *resp = NULL;
    *resp_len = 0;
    double deadline = util_mono_now() + timeout_ms / 1000.0;
    size_t req_len = 0, max = FE_HTTPS_MAX_HEAD + max_body + 64;
    char *req = build_request(h, method, path, headers, n_headers, body_len, &req_len);
    char *buf = malloc(max + 1);
    int fd = -1;
    hsmca_code rc =
        req && buf ? HSMCA_OK : hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: out of memory");
    if (rc == HSMCA_OK)
        rc = tcp_connect(h, deadline, &fd, timeout_ms, e);
    size_t got = 0;
    if (rc == HSMCA_OK)
        rc = exchange(h, fd, req, req_len, body, body_len, deadline, timeout_ms, max, buf, &got, e);
    if (fd >= 0)
        close(fd);
    wipe_free(req, req ? req_len : 0); /* it carries hsmca's own bearer token */
    char *b = NULL;
    size_t bl = 0;
    if (rc == HSMCA_OK)
        rc = fe_https_parse_response(buf, got, status, &b, &bl, e);
    if (rc == HSMCA_OK && bl > max_body)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: answer over %zu bytes", max_body);
    if (rc == HSMCA_OK) {
        memmove(buf, b, bl);
        buf[bl] = 0;
        *resp = buf;
        *resp_len = bl;
        return HSMCA_OK;
    }
    free(buf);
    return rc;
}

hsmca_code fe_https_post(const fe_https *h, const char *path, const char *const *headers,
                         int n_headers, const char *body, size_t body_len, uint32_t timeout_ms,
                         size_t max_body, int *status, char **resp, size_t *resp_len, hsmca_err *e)
{
    return request(h, "POST", path, headers, n_headers, body, body_len, timeout_ms, max_body,
                   status, resp, resp_len, e);
}

hsmca_code fe_https_get(const fe_https *h, const char *path, const char *const *headers,
                        int n_headers, uint32_t timeout_ms, size_t max_body, int *status,
                        char **resp, size_t *resp_len, hsmca_err *e)
{
    return request(h, "GET", path, headers, n_headers, "", 0, timeout_ms, max_body, status, resp,
                   resp_len, e);
}

/* ---- the answer ---- */

/* The value of header name in head (head_len bytes, lines end in CRLF), or NULL. */
static const char *header(const char *head, size_t head_len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    const char *p = memchr(head, '\n', head_len), *end = head + head_len;
    while (p && p + 1 < end) {
        const char *line = p + 1;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        if ((size_t)(eol - line) > nl && line[nl] == ':' && !strncasecmp(line, name, nl)) {
            const char *v = line + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        p = eol;
    }
    return NULL;
}

static int parse_size(const char *s, size_t len, int hex, size_t *out)
{
    size_t v = 0;
    if (len == 0 || len > 12)
        return -1;
    for (size_t i = 0; i < len; i++) {
        int d;
        if (s[i] >= '0' && s[i] <= '9')
            d = s[i] - '0';
        else if (hex && s[i] >= 'a' && s[i] <= 'f')
            d = s[i] - 'a' + 10;
        else if (hex && s[i] >= 'A' && s[i] <= 'F')
            d = s[i] - 'A' + 10;
        else
            return -1;
        v = v * (hex ? 16 : 10) + (size_t)d;
    }
    *out = v;
    return 0;
}

/* De-chunks body[0..len) in place: chunk-size [;ext] CRLF data CRLF ... 0 CRLF. */
static HSMCA_MUSTCHECK hsmca_code dechunk(char *body, size_t len, size_t *out_len, hsmca_err *e)
{
    size_t in = 0, out = 0;
    for (;;) {
        const char *eol = memchr(body + in, '\n', len - in);
        HSMCA_ENSURE(eol, e, HSMCA_EUNAVAIL, "tokenreview: a chunked answer is cut short");
        size_t line = (size_t)(eol - (body + in)), sl = 0;
        while (sl < line && body[in + sl] != ';' && body[in + sl] != '\r')
            sl++;
        size_t n;
        HSMCA_ENSURE(parse_size(body + in, sl, 1, &n) == 0, e, HSMCA_EUNAVAIL,
                     "tokenreview: a chunk size does not parse");
        in += line + 1;
        if (n == 0)
            break;
        HSMCA_ENSURE(n <= len - in && len - in - n >= 2 && body[in + n] == '\r' &&
                         body[in + n + 1] == '\n',
                     e, HSMCA_EUNAVAIL, "tokenreview: a chunked answer is cut short");
        memmove(body + out, body + in, n);
        out += n;
        in += n + 2;
    }
    *out_len = out;
    return HSMCA_OK;
}

hsmca_code fe_https_parse_response(char *buf, size_t len, int *status, char **body,
                                   size_t *body_len, hsmca_err *e)
{
    *status = 0;
    *body = NULL;
    *body_len = 0;
    const char *sep = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
    HSMCA_ENSURE(sep && (size_t)(sep - buf) <= FE_HTTPS_MAX_HEAD, e, HSMCA_EUNAVAIL,
                 "tokenreview: the API server's answer has no HTTP head");
    size_t head_len = (size_t)(sep - buf) + 2;
    HSMCA_ENSURE(head_len >= 14 && !memcmp(buf, "HTTP/1.", 7) && buf[8] == ' ' && buf[9] >= '1' &&
                     buf[9] <= '5' && buf[10] >= '0' && buf[10] <= '9' && buf[11] >= '0' &&
                     buf[11] <= '9' && (buf[12] == ' ' || buf[12] == '\r'),
                 e, HSMCA_EUNAVAIL, "tokenreview: the API server's status line does not parse");
    *status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    char *b = buf + head_len + 2;
    size_t blen = len - head_len - 2, vlen;
    const char *te = header(buf, head_len, "Transfer-Encoding", &vlen), *cl;
    /* The end of the body must be known: a connection cut short is not an answer. */
    if (te) {
        HSMCA_ENSURE(vlen == 7 && !strncasecmp(te, "chunked", 7), e, HSMCA_EUNAVAIL,
                     "tokenreview: Transfer-Encoding other than chunked");
        HSMCA_GUARD(dechunk(b, blen, &blen, e));
    } else if ((cl = header(buf, head_len, "Content-Length", &vlen))) {
        size_t n;
        HSMCA_ENSURE(parse_size(cl, vlen, 0, &n) == 0 && n <= blen, e, HSMCA_EUNAVAIL,
                     "tokenreview: Content-Length does not match the answer");
        blen = n;
    } else {
        return hsmca_fail(e, HSMCA_EUNAVAIL,
                          "tokenreview: the answer has neither Content-Length nor chunks");
    }
    *body = b;
    *body_len = blen;
    return HSMCA_OK;
}

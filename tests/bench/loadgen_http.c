/* loadgen_http.c - the same CSRs to `cfssl serve` (POST /api/v1/cfssl/sign) over
 * HTTP/1.1 keep-alive, plain (http://) or in TLS (https://, trusting --root if
 * given, as hsmca's clients do its root; the handshakes are made before the timed
 * phase): o->concurrency connections, one request in flight on each, closed loop,
 * one thread with poll(). Only the comparison of bench_load.sh uses it: cfssl has
 * no token, no HSM, no second process. An answer counts as OK when it is HTTP 200
 * with "success":true; any other answer is "other", a broken connection ends the
 * run. */
#include "loadgen.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define LG_HTTP_BUF 65536

typedef struct {
    int fd, pod;
    SSL *ssl; /* https:// */
    double t_first;
    size_t got;
    char buf[LG_HTTP_BUF];
    char out[8192];
} lg_conn;

static int http_connect(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    int one = 1;
    if (fd >= 0)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* The TLS handshake (blocking), then the socket is made non-blocking for the run. */
static int conn_open(lg_conn *c, SSL_CTX *ctx, const char *host, const char *port)
{
    if ((c->fd = http_connect(host, port)) < 0)
        return -1;
    if (ctx) {
        if (!(c->ssl = SSL_new(ctx)) || !SSL_set_fd(c->ssl, c->fd) ||
            !SSL_set_tlsext_host_name(c->ssl, host) || SSL_connect(c->ssl) != 1) {
            ERR_print_errors_fp(stderr);
            return -1;
        }
    }
    return fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
}

static int http_send(lg_conn *c, const char *host, lg_pod *p)
{
    int n = snprintf(c->out, sizeof(c->out),
                     "POST /api/v1/cfssl/sign HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                     "application/json\r\nContent-Length: %zu\r\n\r\n",
                     host, p->http_len);
    if (n < 0 || (size_t)n + p->http_len > sizeof(c->out))
        return -1;
    memcpy(c->out + n, p->http_body, p->http_len);
    n += (int)p->http_len;
    c->got = 0;
    /* Small: it fits the empty socket buffer in one write. */
    if (c->ssl)
        return SSL_write(c->ssl, c->out, n) == n ? 0 : -1;
    return send(c->fd, c->out, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

/* Appends what has arrived to c->buf: > 0 bytes read, 0 nothing yet, -1 closed or
 * broken. TLS: until OpenSSL wants more from the socket. */
static ssize_t conn_read(lg_conn *c)
{
    ssize_t total = 0;
    for (;;) {
        size_t room = LG_HTTP_BUF - 1 - c->got;
        if (room == 0)
            return total;
        ssize_t r;
        if (c->ssl) {
            r = SSL_read(c->ssl, c->buf + c->got, (int)room);
            if (r <= 0) {
                int err = SSL_get_error(c->ssl, (int)r);
                return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ? total : -1;
            }
        } else {
            r = read(c->fd, c->buf + c->got, room);
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return total;
            if (r <= 0)
                return -1;
        }
        c->got += (size_t)r;
        total += r;
    }
}

/* 1: a whole response is in c->buf (Content-Length or chunked), 0: not yet, -1: bad. */
static int http_complete(lg_conn *c, int *ok)
{
    c->buf[c->got] = '\0';
    char *end = strstr(c->buf, "\r\n\r\n");
    if (!end)
        return c->got + 1 >= LG_HTTP_BUF ? -1 : 0;
    size_t head = (size_t)(end + 4 - c->buf);
    const char *cl = strcasestr(c->buf, "\r\nContent-Length:");
    if (cl && cl < end) {
        size_t len = strtoul(cl + 17, NULL, 10);
        if (c->got < head + len)
            return head + len + 1 >= LG_HTTP_BUF ? -1 : 0;
    } else if (c->got < head + 5 || memcmp(c->buf + c->got - 5, "0\r\n\r\n", 5) != 0) {
        return c->got + 1 >= LG_HTTP_BUF ? -1 : 0; /* chunked: until the last chunk */
    }
    *ok = strncmp(c->buf, "HTTP/1.1 200", 12) == 0 && strstr(end, "\"success\":true") != NULL;
    return 1;
}

int lg_http_run(const lg_opts *o, lg_pod *pods, lg_stats *st, void (*before)(void *), void *arg,
                double *t0)
{
    char host[256], *port;
    int tls = strncmp(o->cfssl_url, "https://", 8) == 0;
    const char *u = tls                                        ? o->cfssl_url + 8
                    : strncmp(o->cfssl_url, "http://", 7) == 0 ? o->cfssl_url + 7
                                                               : o->cfssl_url;
    snprintf(host, sizeof(host), "%s", u);
    host[strcspn(host, "/")] = '\0';
    if (!(port = strrchr(host, ':'))) {
        fprintf(stderr, "loadgen: --cfssl wants http[s]://HOST:PORT\n");
        return -1;
    }
    *port++ = '\0';
    SSL_CTX *ctx = tls ? SSL_CTX_new(TLS_client_method()) : NULL;
    if (tls &&
        (!ctx || (o->root_file && SSL_CTX_load_verify_locations(ctx, o->root_file, NULL) != 1))) {
        fprintf(stderr, "loadgen: cannot set up TLS (trusting %s)\n",
                o->root_file ? o->root_file : "nothing");
        SSL_CTX_free(ctx);
        return -1;
    }
    if (ctx && o->root_file)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int n = o->concurrency, bad = 0;
    lg_conn *c = calloc((size_t)n, sizeof(*c));
    struct pollfd *pf = calloc((size_t)n, sizeof(*pf));
    uint64_t issued = 0;
    for (int i = 0; c && pf && i < n; i++)
        c[i].fd = -1;
    for (int i = 0; c && pf && i < n && !bad; i++)
        bad = conn_open(&c[i], ctx, host, port) != 0;
    if (!c || !pf || bad) {
        fprintf(stderr, "loadgen: cannot connect to %s:%s\n", host, port);
        bad = 1;
        goto out;
    }
    before(arg);
    *t0 = lg_now();
    double deadline = *t0 + o->seconds;
    int open = 0;
    for (int i = 0; i < n && (o->requests ? issued < o->requests : 1); i++, open++) {
        c[i].pod = (int)(issued++ % (uint64_t)o->pods);
        c[i].t_first = *t0;
        st->started++;
        if (http_send(&c[i], host, &pods[c[i].pod]) != 0)
            bad = 1;
        pf[i] = (struct pollfd){.fd = c[i].fd, .events = POLLIN};
    }
    for (int i = open; i < n; i++)
        pf[i] = (struct pollfd){.fd = -1};
    while (open > 0 && !bad) {
        if (poll(pf, (nfds_t)n, 1000) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n && !bad; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t r = conn_read(&c[i]);
            int ok = 0, done = r > 0 ? http_complete(&c[i], &ok) : r;
            if (done < 0) {
                fprintf(stderr, "loadgen: cfssl connection %d broke\n", i);
                bad = 1;
            }
            if (done != 1)
                continue;
            double now = lg_now();
            st->t_last = now;
            st->attempts++;
            if (!o->requests && now > deadline) {
                st->late++;
                st->late_ok += ok;
            } else {
                st->codes[ok ? 0 : LG_CODE_OTHER]++;
                if (ok) {
                    st->ok++;
                    bad |= lg_stats_lat(st, now - c[i].t_first) != 0;
                }
            }
            if (o->requests ? issued < o->requests : now < deadline) {
                c[i].pod = (int)(issued++ % (uint64_t)o->pods);
                c[i].t_first = now;
                st->started++;
                bad |= http_send(&c[i], host, &pods[c[i].pod]) != 0;
            } else {
                pf[i].fd = -1;
                open--;
            }
        }
    }
out:
    for (int i = 0; c && i < n; i++) {
        SSL_free(c[i].ssl);
        if (c[i].fd >= 0)
            close(c[i].fd);
    }
    SSL_CTX_free(ctx);
    free(c);
    free(pf);
    return bad ? -1 : 0;
}

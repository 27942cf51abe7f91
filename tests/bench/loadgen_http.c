/* loadgen_http.c - the same CSRs to `cfssl serve` (POST /api/v1/cfssl/sign) over
 * plain HTTP/1.1 keep-alive: o->concurrency connections, one request in flight on
 * each, closed loop, one thread with poll(). Only the comparison of bench_load.sh
 * uses it: cfssl has no TLS client auth, no token, no HSM, no second process. An
 * answer counts as OK when it is HTTP 200 with "success":true; any other answer is
 * "other", a broken connection ends the run. */
#include "loadgen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LG_HTTP_BUF 65536

typedef struct {
    int fd, pod;
    double t_first;
    size_t got;
    char buf[LG_HTTP_BUF];
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

static int http_send(lg_conn *c, const char *host, lg_pod *p)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "POST /api/v1/cfssl/sign HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                     "application/json\r\nContent-Length: %zu\r\n\r\n",
                     host, p->http_len);
    struct iovec iov[2] = {{head, (size_t)n}, {p->http_body, p->http_len}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    c->got = 0;
    return w == (ssize_t)n + (ssize_t)p->http_len ? 0 : -1; /* small: fits the socket buffer */
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
    const char *u = strncmp(o->cfssl_url, "http://", 7) == 0 ? o->cfssl_url + 7 : o->cfssl_url;
    snprintf(host, sizeof(host), "%s", u);
    host[strcspn(host, "/")] = '\0';
    if (!(port = strrchr(host, ':'))) {
        fprintf(stderr, "loadgen: --cfssl wants http://HOST:PORT\n");
        return -1;
    }
    *port++ = '\0';
    int n = o->concurrency, bad = 0;
    lg_conn *c = calloc((size_t)n, sizeof(*c));
    struct pollfd *pf = calloc((size_t)n, sizeof(*pf));
    uint64_t issued = 0;
    for (int i = 0; c && pf && i < n && !bad; i++) {
        c[i].fd = http_connect(host, port);
        bad = c[i].fd < 0;
    }
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
            ssize_t r = read(c[i].fd, c[i].buf + c[i].got, LG_HTTP_BUF - 1 - c[i].got);
            int ok = 0, done = r > 0 ? (c[i].got += (size_t)r, http_complete(&c[i], &ok)) : -1;
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
    for (int i = 0; c && i < n; i++)
        if (c[i].fd > 0)
            close(c[i].fd);
    free(c);
    free(pf);
    return bad ? -1 : 0;
}

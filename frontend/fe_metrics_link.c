/* fe_metrics_link.c - see fe_metrics_link.h. One request at a time: the metrics process
 * asks one at a time. An answer the metrics process does not take within a second per
 * packet is dropped (it has gone, or stalls): this thread never waits on it longer. */
#include "fe_metrics_link.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fe_metrics.h"
#include "fe_ready.h"
#include "log.h"
#include "mx_contract.h"
#include "thread_start.h"

#define LINK_SEND_MS 1000

typedef struct {
    int fd;
    const fe_app *app;
} link_ctx;

static int send_packet(int fd, const uint8_t *pkt, size_t len)
{
    for (;;) {
        ssize_t n = send(fd, pkt, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n == (ssize_t)len)
            return 0;
        if (n >= 0 || (errno != EAGAIN && errno != EINTR))
            return -1;
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, LINK_SEND_MS) <= 0)
            return -1;
    }
}

/* The answer to req (kind, id) in MX_CHUNK packets. */
static void answer(int fd, const uint8_t req[MX_REQ_LEN], const char *text, size_t len, int ok)
{
    static uint8_t pkt[MX_HDR_LEN + MX_CHUNK];
    memcpy(pkt, req, MX_REQ_LEN);
    size_t off = 0;
    do {
        size_t n = len - off > MX_CHUNK ? MX_CHUNK : len - off;
        pkt[MX_REQ_LEN] = (uint8_t)((off + n == len ? MX_LAST : 0) | (ok ? MX_OK : 0));
        memcpy(pkt + MX_HDR_LEN, text + off, n);
        if (send_packet(fd, pkt, MX_HDR_LEN + n) != 0)
            return;
        off += n;
    } while (off < len);
}

static void serve_one(link_ctx *c, const uint8_t req[MX_REQ_LEN])
{
    size_t len = 0;
    char *text = NULL;
    int ok = 0;
    if (req[0] == MX_KIND_METRICS) {
        text = fe_metrics_render(&len);
        ok = text != NULL;
    } else if (req[0] == MX_KIND_HEALTH || req[0] == MX_KIND_READY) {
        mbuf b;
        if (mbuf_init(&b, 1024) == 0) {
            ok = req[0] == MX_KIND_HEALTH ? fe_health(c->app, &b) : fe_ready(c->app, &b);
            text = mbuf_finish(&b, &len);
        }
    }
    if (!text) {
        answer(c->fd, req, "", 0, 0);
        return;
    }
    answer(c->fd, req, text, len, ok);
    free(text);
}

static void *link_thread(void *arg)
{
    link_ctx *c = arg;
    uint8_t req[MX_REQ_LEN + 1];
    for (;;) {
        ssize_t n = recv(c->fd, req, sizeof(req), 0);
        if (n == 0)
            break; /* the supervisor closed its end: no metrics process will come */
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            LOG_EVENT(LOG_LVL_WARN, "metrics link failed: no more figures from this process",
                      LOG_STR("error", strerror(errno)));
            break;
        }
        if (n == MX_REQ_LEN)
            serve_one(c, req);
    }
    return NULL;
}

hsmca_code fe_metrics_link_start(int fd, const fe_app *app, hsmca_err *e)
{
    if (fd < 0)
        return HSMCA_OK;
    static link_ctx ctx;
    ctx = (link_ctx){fd, app};
    thread_start(NULL, link_thread, &ctx, "metrics link's thread");
    return HSMCA_OK;
}

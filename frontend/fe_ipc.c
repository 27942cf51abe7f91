/* fe_ipc.c - see fe_ipc.h.
 *
 * Pending requests live in a fixed table indexed by id modulo its size, so a
 * reply is matched in O(1) and a forged id from a confused signer matches
 * nothing. Only the IPC thread reads the socket and completes requests. */
#include "fe_ipc.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc_frame.h"
#include "log.h"
#include "signer.pb-c.h"
#include "util.h"

typedef struct {
    uint64_t id; /* 0: free */
    fe_ipc_cb cb;
    void *arg;
    double deadline;
} fe_pending;

struct fe_ipc {
    pthread_mutex_t lock;
    int fd;      /* current signer connection, -1 when down */
    int ctl_fd;
    uint64_t next_id;
    fe_pending pending[FE_IPC_MAX_INFLIGHT];
    pthread_t thread;
};

int fe_ipc_connected(fe_ipc *c)
{
    pthread_mutex_lock(&c->lock);
    int up = c->fd >= 0;
    pthread_mutex_unlock(&c->lock);
    return up;
}

hsmca_code fe_ipc_submit(fe_ipc *c, uint32_t profile, const uint8_t *tbs, size_t tbs_len,
                         const char *requester, const uint8_t csr_sha256[32], fe_ipc_cb cb,
                         void *arg, hsmca_err *e)
{
    Hsmca__Ipc__SignRequest req = HSMCA__IPC__SIGN_REQUEST__INIT;
    req.profile = profile;
    req.tbs.data = (uint8_t *)tbs;
    req.tbs.len = tbs_len;
    req.requester = (char *)(requester ? requester : "");
    if (csr_sha256) {
        req.csr_sha256.data = (uint8_t *)csr_sha256;
        req.csr_sha256.len = 32;
    }
    size_t n = hsmca__ipc__sign_request__get_packed_size(&req);
    if (n > IPC_MAX_PAYLOAD)
        return hsmca_fail(e, HSMCA_EINVAL, "sign request of %zu bytes too large", n);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    hsmca__ipc__sign_request__pack(&req, buf);

    pthread_mutex_lock(&c->lock);
    hsmca_code rc = HSMCA_OK;
    uint64_t id = ++c->next_id;
    fe_pending *p = &c->pending[id % FE_IPC_MAX_INFLIGHT];
    if (c->fd < 0) {
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "signer unavailable: not connected");
    } else if (p->id != 0) {
        rc = hsmca_fail(e, HSMCA_ERATE, "too many signing requests in flight");
    } else {
        *p = (fe_pending){id, cb, arg, util_mono_now() + FE_IPC_TIMEOUT_S};
        /* Send under the lock: a reply can then never race ahead of the slot. */
        rc = ipc_send(c->fd, IPC_SIGN_REQ, id, buf, n, e);
        if (rc != HSMCA_OK) {
            memset(p, 0, sizeof(*p));
            rc = hsmca_fail(e, HSMCA_EUNAVAIL, "signer unavailable: %s", e->msg);
        }
    }
    pthread_mutex_unlock(&c->lock);
    free(buf);
    return rc;
}

/* Completes every pending request (or only the overdue ones) with UNAVAILABLE. */
static void fail_pending(fe_ipc *c, int only_overdue, const char *why)
{
    double now = util_mono_now();
    for (size_t i = 0; i < FE_IPC_MAX_INFLIGHT; i++) {
        pthread_mutex_lock(&c->lock);
        fe_pending p = c->pending[i];
        int hit = p.id != 0 && (!only_overdue || now > p.deadline);
        if (hit)
            memset(&c->pending[i], 0, sizeof(c->pending[i]));
        pthread_mutex_unlock(&c->lock);
        if (hit)
            p.cb(p.arg, HSMCA_EUNAVAIL, why, NULL, 0);
    }
}

static void drop_connection(fe_ipc *c, const char *why)
{
    pthread_mutex_lock(&c->lock);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    pthread_mutex_unlock(&c->lock);
    log_warn("signer connection lost: %s", why);
    fail_pending(c, 0, "signer unavailable: connection lost");
}

static void handle_reply(fe_ipc *c, uint64_t id, const uint8_t *payload, size_t plen)
{
    Hsmca__Ipc__SignReply *r = hsmca__ipc__sign_reply__unpack(NULL, plen, payload);
    if (!r) {
        log_warn("undecodable reply %llu from the signer", (unsigned long long)id);
        return;
    }
    pthread_mutex_lock(&c->lock);
    fe_pending *slot = &c->pending[id % FE_IPC_MAX_INFLIGHT];
    fe_pending p = *slot;
    if (p.id == id && id != 0)
        memset(slot, 0, sizeof(*slot));
    pthread_mutex_unlock(&c->lock);
    if (p.id == id && id != 0) {
        hsmca_code code = r->code <= HSMCA_CODE_MAX ? (hsmca_code)r->code : HSMCA_EINTERNAL;
        p.cb(p.arg, code, r->reason ? r->reason : "", code == HSMCA_OK ? r->certificate.data : NULL,
             code == HSMCA_OK ? r->certificate.len : 0);
    } else {
        log_warn("reply %llu matches no pending request", (unsigned long long)id);
    }
    hsmca__ipc__sign_reply__free_unpacked(r, NULL);
}

static void read_signer(fe_ipc *c, int fd)
{
    static uint8_t buf[IPC_MAX_FRAME];
    uint8_t type;
    uint64_t id;
    const uint8_t *payload;
    size_t plen;
    int eof;
    hsmca_err e;
    if (ipc_recv(fd, buf, &type, &id, &payload, &plen, &eof, &e) != HSMCA_OK) {
        drop_connection(c, e.msg);
        return;
    }
    if (type == IPC_SIGN_REPLY)
        handle_reply(c, id, payload, plen);
    else
        log_warn("unexpected message type %u from the signer", type);
}

static void take_new_connection(fe_ipc *c)
{
    int fd, eof;
    hsmca_err e;
    if (ipc_recv_fd(c->ctl_fd, &fd, &eof, &e) != HSMCA_OK) {
        if (eof)
            fatal("supervisor went away; stopping");
        log_warn("control channel: %s", e.msg);
        return;
    }
    pthread_mutex_lock(&c->lock);
    int old = c->fd;
    c->fd = fd;
    pthread_mutex_unlock(&c->lock);
    if (old >= 0) {
        close(old);
        fail_pending(c, 0, "signer unavailable: signer restarted");
    }
    log_info("connected to a new signer");
}

static void *ipc_thread(void *arg)
{
    fe_ipc *c = arg;
    double last_scan = util_mono_now();
    for (;;) {
        pthread_mutex_lock(&c->lock);
        int fd = c->fd;
        pthread_mutex_unlock(&c->lock);
        struct pollfd pfd[2] = {{c->ctl_fd, POLLIN, 0}, {fd, POLLIN, 0}};
        int r = poll(pfd, fd >= 0 ? 2 : 1, 500);
        if (r < 0 && errno != EINTR)
            fatal("poll: %s", strerror(errno));
        if (r > 0 && pfd[0].revents)
            take_new_connection(c);
        else if (r > 0 && fd >= 0 && pfd[1].revents)
            read_signer(c, fd);
        /* Overdue scan twice a second, not per reply: it walks the whole table. */
        double now = util_mono_now();
        if (now - last_scan >= 0.5) {
            last_scan = now;
            fail_pending(c, 1, "signer unavailable: no reply in time");
        }
    }
    return NULL;
}

fe_ipc *fe_ipc_start(int ipc_fd, int ctl_fd, hsmca_err *e)
{
    fe_ipc *c = calloc(1, sizeof(*c));
    if (!c) {
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->fd = ipc_fd;
    c->ctl_fd = ctl_fd;
    if (pthread_create(&c->thread, NULL, ipc_thread, c) != 0) {
        free(c);
        hsmca_fail(e, HSMCA_EINTERNAL, "cannot start the IPC thread");
        return NULL;
    }
    return c;
}

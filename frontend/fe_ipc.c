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
#include <sys/socket.h>
#include <unistd.h>

#include "tok_jwt.h"
#include "ipc_frame.h"
#include "log.h"
#include "profile.h"
#include "signer.pb-c.h"
#include "thread_start.h"
#include "util.h"

typedef struct {
    uint64_t id; /* 0: free */
    fe_ipc_cb cb;
    void *arg;
    double deadline;
} fe_pending;

/* A refusal as the FrontendDeny carries it, each string capped as the signer wants. */
typedef struct {
    char requester[IPC_REQUESTER_MAX + 1];
    char authenticator[IPC_AUTHENTICATOR_MAX + 1];
    char reason[IPC_DENY_REASON_MAX + 1];
    hsmca_code code;
} fe_deny;

/* Two locks, so that no thread ever waits for I/O while holding what the IPC
 * thread needs to read replies: a sender blocked on a full socket must not stop
 * the replies that would let the signer drain it (that would deadlock both). */
struct fe_ipc {
    pthread_mutex_t lock;  /* pending table and next_id; never held across I/O */
    pthread_rwlock_t conn; /* fd: read-held while sending, write-held to replace */
    int fd;                /* current signer connection, -1 when down; only the IPC
                              thread changes it */
    int ctl_fd;            /* -1 once the supervisor has gone */
    double orphaned_at;    /* monotonic: when the supervisor went away; 0 before */
    volatile int *stop;    /* the front end's stop flag */
    uint64_t next_id;
    /* FrontendDeny flood control (under lock): the current second's window. */
    double deny_window;
    unsigned deny_sent;
    uint32_t deny_dropped; /* not sent since the last one that was */
    fe_deny last_dropped;  /* the latest of those, sent by the IPC thread's tick when no
                              later refusal carries the count (end of a flood) */
    fe_pending pending[FE_IPC_MAX_INFLIGHT];
    pthread_t thread;
    /* Key pushes (under lock): the handler, or the fd kept until there is one. */
    fe_ipc_keys_fn keys_fn;
    void *keys_arg;
    fe_ipc_ctl_fn ctl_fn; /* the reload's messages (fe_ipc_on_ctl); NULL: none yet */
    void *ctl_arg;
    int keys_kept[IPC_KEYSETS]; /* per cluster, -1: none */
    double keys_asked;                 /* when CTL_KEYS_REFRESH was last sent (monotonic) */
    /* The status round trip (under lock): set once by fe_ipc_on_status. */
    fe_ipc_status_fn status_fn;
    fe_ipc_tick_fn status_tick;
    void *status_arg;
};

int fe_ipc_connected(fe_ipc *c)
{
    pthread_rwlock_rdlock(&c->conn);
    int up = c->fd >= 0;
    pthread_rwlock_unlock(&c->conn);
    return up;
}

/* Takes back a slot whose request could not be sent. 0 when the IPC thread got
 * there first (it has completed the request through its callback). */
static int reclaim(fe_ipc *c, uint64_t id)
{
    pthread_mutex_lock(&c->lock);
    fe_pending *p = &c->pending[id % FE_IPC_MAX_INFLIGHT];
    int mine = p->id == id;
    if (mine)
        memset(p, 0, sizeof(*p));
    pthread_mutex_unlock(&c->lock);
    return mine;
}

hsmca_code fe_ipc_submit(fe_ipc *c, uint32_t profile, const uint8_t *tbs, size_t tbs_len,
                         const char *requester, const uint8_t csr_sha256[32], fe_ipc_cb cb,
                         void *arg, hsmca_err *e)
{
    return fe_ipc_submit_as(c, profile, tbs, tbs_len, requester, csr_sha256, NULL, cb, arg, e);
}

hsmca_code fe_ipc_submit_as(fe_ipc *c, uint32_t profile, const uint8_t *tbs, size_t tbs_len,
                            const char *requester, const uint8_t csr_sha256[32],
                            const fe_ipc_caller *caller, fe_ipc_cb cb, void *arg, hsmca_err *e)
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
    /* The token is a NUL-terminated copy: protobuf-c packs strings with strlen. The
     * authenticator checked its length (IPC_TOKEN_MAX) already. */
    char token[IPC_TOKEN_MAX + 1];
    if (caller && caller->authenticator)
        req.authenticator = (char *)caller->authenticator;
    if (caller && caller->token && caller->token_len) {
        if (caller->token_len > IPC_TOKEN_MAX || memchr(caller->token, 0, caller->token_len))
            return hsmca_fail(e, HSMCA_EAUTH, "token: longer than %d bytes or holds a NUL",
                              IPC_TOKEN_MAX);
        memcpy(token, caller->token, caller->token_len);
        token[caller->token_len] = 0;
        req.token = token;
    }
    if (caller && caller->cluster && caller->cluster[0])
        req.cluster = (char *)caller->cluster;
    if (caller && caller->request_id && strlen(caller->request_id) == IPC_REQUEST_ID_LEN)
        req.request_id = (char *)caller->request_id;
    if (caller && caller->client_serial_len && caller->client_serial_len <= IPC_CLIENT_SERIAL_MAX &&
        caller->client_issuer) {
        req.client_serial.data = (uint8_t *)caller->client_serial;
        req.client_serial.len = caller->client_serial_len;
        req.client_issuer.data = (uint8_t *)caller->client_issuer;
        req.client_issuer.len = IPC_CLIENT_ISSUER_LEN;
    }
    size_t n = hsmca__ipc__sign_request__get_packed_size(&req);
    if (n > IPC_MAX_PAYLOAD)
        return hsmca_fail(e, HSMCA_EINVAL, "sign request of %zu bytes too large", n);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    hsmca__ipc__sign_request__pack(&req, buf);

    /* The slot is filled before the send, so a fast reply always finds it. */
    pthread_mutex_lock(&c->lock);
    uint64_t id = ++c->next_id;
    fe_pending *p = &c->pending[id % FE_IPC_MAX_INFLIGHT];
    int busy = p->id != 0;
    if (!busy)
        *p = (fe_pending){id, cb, arg, util_mono_now() + FE_IPC_TIMEOUT_S};
    pthread_mutex_unlock(&c->lock);
    if (busy) {
        free(buf);
        return hsmca_fail(e, HSMCA_ERATE, "too many signing requests in flight");
    }

    pthread_rwlock_rdlock(&c->conn);
    hsmca_code rc = c->fd < 0 ? hsmca_fail(e, HSMCA_EUNAVAIL, "signer unavailable: not connected")
                              : ipc_send(c->fd, IPC_SIGN_REQ, id, buf, n, e);
    pthread_rwlock_unlock(&c->conn);
    free(buf);
    if (rc == HSMCA_OK || !reclaim(c, id))
        return HSMCA_OK; /* sent, or already completed by the IPC thread */
    if (rc != HSMCA_EUNAVAIL)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "signer unavailable: %s", e->msg);
    return rc;
}

/* Caps a string for the FrontendDeny (the signer refuses longer ones as a protocol
 * violation): at most sz - 1 bytes, cut before a NUL. */
static void deny_str(char *buf, size_t sz, const char *s)
{
    size_t n = s ? strnlen(s, sz - 1) : 0;
    memcpy(buf, s ? s : "", n);
    buf[n] = 0;
}

/* Takes a place in the current second's FrontendDeny budget; 0 when it is spent.
 * Under c->lock. */
static int deny_admit(fe_ipc *c, double now)
{
    if (now - c->deny_window >= 1.0 || now < c->deny_window) {
        c->deny_window = now;
        c->deny_sent = 0;
    }
    if (c->deny_sent >= FE_IPC_DENY_PER_S)
        return 0;
    c->deny_sent++;
    return 1;
}

/* Counts a refusal not reported (n of them, d the latest). Under c->lock. */
static void deny_count_dropped(fe_ipc *c, uint64_t n, const fe_deny *d)
{
    uint64_t sum = (uint64_t)c->deny_dropped + n;
    c->deny_dropped = sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
    if (d != &c->last_dropped)
        c->last_dropped = *d;
}

/* Sends d with the count of those not reported before it; never waits (a full
 * socket counts it, and those it carried, as not reported). */
static void deny_send(fe_ipc *c, const fe_deny *d, uint32_t suppressed)
{
    Hsmca__Ipc__FrontendDeny m = HSMCA__IPC__FRONTEND_DENY__INIT;
    m.requester = (char *)d->requester;
    m.authenticator = (char *)d->authenticator;
    m.code = (uint32_t)d->code;
    m.reason = (char *)d->reason;
    m.suppressed = suppressed;
    uint8_t buf[sizeof(fe_deny) + 64];
    size_t n = hsmca__ipc__frontend_deny__get_packed_size(&m);
    if (n > sizeof(buf))
        return;
    hsmca__ipc__frontend_deny__pack(&m, buf);
    hsmca_err e;
    pthread_mutex_lock(&c->lock);
    uint64_t id = ++c->next_id; /* the entry's request_id: unique with the requests' */
    pthread_mutex_unlock(&c->lock);
    pthread_rwlock_rdlock(&c->conn);
    /* Timeout 0: a refusal never waits for the signer; what is not sent is counted. */
    hsmca_code rc =
        c->fd < 0 ? HSMCA_EUNAVAIL : ipc_send_within(c->fd, IPC_FRONTEND_DENY, id, buf, n, 0, &e);
    pthread_rwlock_unlock(&c->conn);
    if (rc != HSMCA_OK) {
        pthread_mutex_lock(&c->lock);
        deny_count_dropped(c, (uint64_t)suppressed + 1, d);
        pthread_mutex_unlock(&c->lock);
    }
}

void fe_ipc_deny(fe_ipc *c, const char *requester, const char *authenticator, hsmca_code code,
                 const char *reason)
{
    if (code == HSMCA_OK || (unsigned)code > HSMCA_CODE_MAX)
        return;
    static _Thread_local fe_deny d;
    deny_str(d.requester, sizeof(d.requester), requester);
    deny_str(d.authenticator, sizeof(d.authenticator), authenticator);
    deny_str(d.reason, sizeof(d.reason), reason);
    d.code = code;
    pthread_mutex_lock(&c->lock);
    uint32_t dropped = 0;
    int send = deny_admit(c, util_mono_now());
    if (send) {
        dropped = c->deny_dropped;
        c->deny_dropped = 0;
    } else {
        deny_count_dropped(c, 1, &d);
    }
    pthread_mutex_unlock(&c->lock);
    if (send)
        deny_send(c, &d, dropped);
}

/* The IPC thread's tick: refusals not reported and not followed by one that carried
 * their count (the end of a flood) are sent now, as the latest of them with the count
 * of the others, so the signer's log counts every refusal. */
static void flush_dropped_denies(fe_ipc *c)
{
    static fe_deny d; /* only the IPC thread comes here */
    pthread_mutex_lock(&c->lock);
    uint32_t dropped = c->deny_dropped;
    int send = dropped > 0 && deny_admit(c, util_mono_now());
    if (send) {
        d = c->last_dropped;
        c->deny_dropped = 0;
    }
    pthread_mutex_unlock(&c->lock);
    if (send)
        deny_send(c, &d, dropped - 1);
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

/* Replaces the connection (newfd -1: none). Only the IPC thread calls this. */
static void set_connection(fe_ipc *c, int newfd)
{
    pthread_rwlock_wrlock(&c->conn);
    int old = c->fd;
    c->fd = newfd;
    pthread_rwlock_unlock(&c->conn);
    if (old >= 0)
        close(old);
}

static void drop_connection(fe_ipc *c, const char *why)
{
    set_connection(c, -1);
    LOG_EVENT(LOG_LVL_WARN, "signer connection lost", LOG_STR("reason", why));
    fail_pending(c, 0, "signer unavailable: connection lost");
}

static void handle_reply(fe_ipc *c, uint64_t id, const uint8_t *payload, size_t plen)
{
    Hsmca__Ipc__SignReply *r = hsmca__ipc__sign_reply__unpack(NULL, plen, payload);
    if (!r) {
        LOG_EVENT(LOG_LVL_WARN, "undecodable reply from the signer", LOG_UINT("request_id", id));
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
        LOG_EVENT(LOG_LVL_WARN, "reply matches no pending request", LOG_UINT("request_id", id));
    }
    hsmca__ipc__sign_reply__free_unpacked(r, NULL);
}

void fe_ipc_on_status(fe_ipc *c, fe_ipc_status_fn fn, fe_ipc_tick_fn tick, void *arg)
{
    pthread_mutex_lock(&c->lock);
    c->status_fn = fn;
    c->status_tick = tick;
    c->status_arg = arg;
    pthread_mutex_unlock(&c->lock);
}

hsmca_code fe_ipc_send_status(fe_ipc *c, uint64_t *id, hsmca_err *e)
{
    pthread_mutex_lock(&c->lock);
    *id = ++c->next_id; /* unique with the requests': the reply matches no sign request */
    pthread_mutex_unlock(&c->lock);
    pthread_rwlock_rdlock(&c->conn);
    hsmca_code rc = c->fd < 0 ? hsmca_fail(e, HSMCA_EUNAVAIL, "signer unavailable: not connected")
                              : ipc_send_within(c->fd, IPC_STATUS_REQ, *id, NULL, 0, 0, e);
    pthread_rwlock_unlock(&c->conn);
    return rc;
}

/* A StatusReply, or the tick (payload NULL), to the status handler if one is set. */
static void to_status(fe_ipc *c, uint64_t id, const uint8_t *payload, size_t len)
{
    pthread_mutex_lock(&c->lock);
    fe_ipc_status_fn fn = c->status_fn;
    fe_ipc_tick_fn tick = c->status_tick;
    void *arg = c->status_arg;
    pthread_mutex_unlock(&c->lock);
    if (payload && fn)
        fn(arg, id, payload, len);
    else if (!payload && tick)
        tick(arg);
}

static void read_signer(fe_ipc *c, int fd)
{
    static uint8_t buf[IPC_MAX_FRAME];
    ipc_msg m;
    hsmca_err e;
    if (ipc_recv(fd, buf, &m, &e) != HSMCA_OK) {
        drop_connection(c, e.msg);
        return;
    }
    if (m.type == IPC_SIGN_REPLY)
        handle_reply(c, m.id, m.payload, m.len);
    else if (m.type == IPC_STATUS_REPLY)
        to_status(c, m.id, m.payload ? m.payload : (const uint8_t *)"", m.len);
    else
        LOG_EVENT(LOG_LVL_WARN, "unexpected message type from the signer",
                  LOG_UINT("type", m.type));
}

void fe_ipc_on_keys(fe_ipc *c, fe_ipc_keys_fn fn, void *arg)
{
    pthread_mutex_lock(&c->lock);
    c->keys_fn = fn;
    c->keys_arg = arg;
    int kept[IPC_KEYSETS];
    for (int i = 0; i < IPC_KEYSETS; i++) {
        kept[i] = c->keys_kept[i];
        c->keys_kept[i] = -1;
    }
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < IPC_KEYSETS; i++) {
        if (kept[i] >= 0) {
            fn(arg, i, kept[i]);
            close(kept[i]);
        }
    }
}

void fe_ipc_on_ctl(fe_ipc *c, fe_ipc_ctl_fn fn, void *arg)
{
    pthread_mutex_lock(&c->lock);
    c->ctl_fn = fn;
    c->ctl_arg = arg;
    pthread_mutex_unlock(&c->lock);
}

/* A reload message: to its handler; 1 when it was one. */
static int take_reload(fe_ipc *c, char type, int fd)
{
    if ((type != CTL_POLICY && type != CTL_RELOAD_FAILED) || fd < 0)
        return 0;
    pthread_mutex_lock(&c->lock);
    fe_ipc_ctl_fn fn = c->ctl_fn;
    void *arg = c->ctl_arg;
    pthread_mutex_unlock(&c->lock);
    if (fn)
        fn(arg, type, fd);
    else /* still starting: the policy file we loaded is at most as old as this */
        log_event(LOG_LVL_WARN, "control channel: a reload before the front end was ready: ignored",
                  NULL, 0);
    close(fd);
    return 1;
}

void fe_ipc_ask_keys(fe_ipc *c, uint32_t min_interval)
{
    double now = util_mono_now();
    pthread_mutex_lock(&c->lock);
    int due = c->keys_asked == 0 || now - c->keys_asked >= (double)min_interval;
    if (due)
        c->keys_asked = now;
    int ctl = c->ctl_fd;
    pthread_mutex_unlock(&c->lock);
    char b = CTL_KEYS_REFRESH;
    if (due && ctl >= 0 && send(ctl, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
        LOG_EVENT(LOG_LVL_WARN, "cannot ask the supervisor for fresh issuer keys",
                  LOG_STR("error", strerror(errno)));
}

/* A CTL_KEYS push: to the handler, or kept for it. */
static void take_keys(fe_ipc *c, int cluster, int fd)
{
    pthread_mutex_lock(&c->lock);
    fe_ipc_keys_fn fn = c->keys_fn;
    void *arg = c->keys_arg;
    if (!fn) {
        if (c->keys_kept[cluster] >= 0)
            close(c->keys_kept[cluster]);
        c->keys_kept[cluster] = fd;
    }
    pthread_mutex_unlock(&c->lock);
    if (fn) {
        fn(arg, cluster, fd);
        close(fd);
    }
}

static void take_new_connection(fe_ipc *c)
{
    int fd, eof;
    char type;
    hsmca_err e;
    if (ipc_recv_ctl(c->ctl_fd, &type, &fd, &eof, &e) != HSMCA_OK) {
        if (eof) {
            /* Not exit(): the gRPC threads are still answering, and exit's
             * handlers would free what they use (OpenSSL's providers: a valid
             * CSR then "does not decode"). The graceful stop answers them. */
            log_event(LOG_LVL_WARN, "supervisor went away: stopping after the requests in flight",
                      NULL, 0);
            c->ctl_fd = -1;
            c->orphaned_at = util_mono_now();
            *c->stop = 1;
            return;
        }
        LOG_EVENT(LOG_LVL_WARN, "control channel error", LOG_STR("error", e.msg));
        return;
    }
    int cluster = ctl_keys_cluster(type);
    if (cluster >= 0 && cluster < IPC_KEYSETS && fd >= 0) {
        take_keys(c, cluster, fd);
        return;
    }
    if (take_reload(c, type, fd))
        return;
    if (type != CTL_NEW_PEER || fd < 0) {
        char shown = type >= ' ' && type < 127 ? type : '?';
        LOG_EVENT(LOG_LVL_WARN, "control channel: unexpected message", LOG_BYTES("type", &shown, 1),
                  LOG_STR("fd", fd >= 0 ? "yes" : "no"));
        if (fd >= 0)
            close(fd);
        return;
    }
    int had = c->fd >= 0;
    set_connection(c, fd);
    if (had)
        fail_pending(c, 0, "signer unavailable: signer restarted");
    log_event(LOG_LVL_INFO, "connected to a new signer", NULL, 0);
}

/* With the supervisor gone the signer stops too, and cuts this connection first; one
 * that has not after this long is stuck (a token call, the disk, a stopped process):
 * what waits on it is answered UNAVAILABLE then, so it does not hold our stop. */
#define FE_ORPHAN_GRACE_S 0.3

static void *ipc_thread(void *arg)
{
    fe_ipc *c = arg;
    double last_scan = util_mono_now();
    for (;;) {
        int fd = c->fd; /* only this thread changes it */
        /* A negative fd is skipped by poll: the control channel once it closed. */
        struct pollfd pfd[2] = {{c->ctl_fd, POLLIN, 0}, {fd, POLLIN, 0}};
        int r = poll(pfd, fd >= 0 ? 2 : 1, c->orphaned_at ? 50 : 500);
        if (r < 0 && errno != EINTR)
            fatal("poll: %s", strerror(errno));
        if (r > 0 && pfd[0].revents)
            take_new_connection(c);
        else if (r > 0 && fd >= 0 && pfd[1].revents)
            read_signer(c, fd);
        /* Overdue scan twice a second, not per reply: it walks the whole table. */
        double now = util_mono_now();
        if (c->orphaned_at && c->fd >= 0 && now - c->orphaned_at >= FE_ORPHAN_GRACE_S)
            drop_connection(c, "the supervisor went away and the signer has not closed it");
        if (now - last_scan >= 0.5) {
            last_scan = now;
            fail_pending(c, 1, "signer unavailable: no reply in time");
            flush_dropped_denies(c);
            to_status(c, 0, NULL, 0);
        }
    }
    return NULL;
}

fe_ipc *fe_ipc_start(int ipc_fd, int ctl_fd, volatile int *stop, hsmca_err *e)
{
    fe_ipc *c = calloc(1, sizeof(*c));
    if (!c) {
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    /* Writer preference: replacing a dead connection must not wait behind a
     * stream of senders (each fails fast on it, but they keep coming). */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&c->conn, &ra);
    pthread_rwlockattr_destroy(&ra);
    c->fd = ipc_fd;
    c->ctl_fd = ctl_fd;
    for (int i = 0; i < IPC_KEYSETS; i++)
        c->keys_kept[i] = -1;
    c->stop = stop;
    thread_start(&c->thread, ipc_thread, c, "IPC thread");
    return c;
}

/* signer_admin.c - see signer_admin.h. The socket and its connections; the ops are a
 * table (status here, the intermediates' in signer_ica.c). An op that needs a CA signature
 * answers SIGNER_REPLY_LATER: its connection then waits, unread and past ADMIN_TIMEOUT_S by
 * pkcs11.sign_timeout, for the reply signer_casign.c leaves in ca_reply (the main loop
 * never waits for the token). */
#include "signer_admin.h"
#include "signer_casign.h"
#include "signer_ctx.h"
#include "signer_crl.h"
#include "signer_revoke.h"
#include "signer_ica.h"
#include "signer_policy.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "log.h"
#include "util.h"
#include "window_limiter.h"

/* Refused admin attempts on the record: each is a deny entry (requester the unix user,
 * reason "admin socket: ..."), at most ADMIN_REFUSALS_PER_WINDOW per window of
 * ADMIN_REFUSAL_WINDOW_S seconds for each uid, the rest counted in one suppressed entry per
 * window. Limiters of their own, apart from the workload denies': a local user looping on
 * the socket adds at most 30 entries a minute, and can crowd out neither the front end's
 * refusals nor another user's, which stay on the record one by one. The latest
 * ADMIN_REFUSAL_UIDS uids keep a budget; the least recently refused gives its up. */
#define ADMIN_REFUSALS_PER_WINDOW 30u
#define ADMIN_REFUSAL_WINDOW_S 60
#define ADMIN_REFUSAL_UIDS 16

/* Connections one uid may hold at once, of ADMIN_MAX_CONNS: one user cannot keep the
 * others out. Another is refused at once, saying so. */
#define ADMIN_CONNS_PER_UID 2

typedef struct {
    int fd; /* -1: a free slot */
    double deadline;
    char user[AUDIT_ICA_USER_MAX + 1];
    int64_t uid; /* SO_PEERCRED's; -1: unknown */
    int allowed;
    int waiting;   /* its op's reply comes once a CA signature completes (ca_reply) */
    char why[200]; /* why not, when not allowed */
} admin_conn;

struct signer_admin {
    int lfd;
    int has_group;
    gid_t gid;
    uid_t own_uid; /* the signer's user, allowed when it was not started as root */
    int own_allowed;
    char group[CONFIG_MAX_STR];
    admin_conn conns[ADMIN_MAX_CONNS];
    struct {
        window_limiter *l; /* the refused attempts' audit entries of uid; NULL: free */
        int64_t uid;
        double last;
    } refusals[ADMIN_REFUSAL_UIDS];
};

static HSMCA_MUSTCHECK hsmca_code admin_bind(signer_admin *a, const hsmca_config *cfg,
                                             const signer_sandbox *sb, hsmca_err *e)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    HSMCA_ENSURE(strlen(cfg->admin_socket) < sizeof(sa.sun_path), e, HSMCA_EINVAL,
                 "admin.socket: a path of fewer than %zu bytes", sizeof(sa.sun_path));
    memcpy(sa.sun_path, cfg->admin_socket, strlen(cfg->admin_socket) + 1);
    struct stat st;
    if (lstat(sa.sun_path, &st) == 0) {
        HSMCA_ENSURE(S_ISSOCK(st.st_mode), e, HSMCA_EINVAL,
                     "admin.socket %s exists and is not a socket: not replaced", sa.sun_path);
        unlink(sa.sun_path); /* a stale socket of an earlier signer */
    }
    a->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    HSMCA_ENSURE(a->lfd >= 0, e, HSMCA_EINTERNAL, "admin socket: %s", strerror(errno));
    /* Created 0600 and opened to the group only once its owner is right. */
    mode_t old = umask(0177);
    int rc = bind(a->lfd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    HSMCA_ENSURE(rc == 0, e, HSMCA_EINVAL, "admin.socket %s: bind: %s", sa.sun_path,
                 strerror(errno));
    uid_t owner = sb->user.active ? sb->user.uid : (uid_t)-1;
    gid_t group = a->has_group ? a->gid : (gid_t)-1;
    HSMCA_ENSURE(chown(sa.sun_path, owner, group) == 0, e, HSMCA_EINVAL,
                 "admin.socket %s: chown to signer.user and admin.group: %s", sa.sun_path,
                 strerror(errno));
    HSMCA_ENSURE(chmod(sa.sun_path, a->has_group ? 0660 : 0600) == 0, e, HSMCA_EINVAL,
                 "admin.socket %s: chmod: %s", sa.sun_path, strerror(errno));
    HSMCA_ENSURE(listen(a->lfd, 16) == 0, e, HSMCA_EINTERNAL, "admin socket: listen: %s",
                 strerror(errno));
    return HSMCA_OK;
}

hsmca_code signer_admin_open(const hsmca_config *cfg, const signer_sandbox *sb, signer_admin **out,
                             hsmca_err *e)
{
    *out = NULL;
    if (!cfg->admin_socket[0])
        return HSMCA_OK;
    signer_admin *a = calloc(1, sizeof(*a));
    HSMCA_ENSURE(a, e, HSMCA_ENOMEM, "out of memory");
    a->lfd = -1;
    for (int i = 0; i < ADMIN_MAX_CONNS; i++)
        a->conns[i].fd = -1;
    a->own_uid = sb->user.active ? sb->user.uid : getuid();
    a->own_allowed = geteuid() != 0;
    snprintf(a->group, sizeof(a->group), "%s", cfg->admin_group);
    hsmca_code rc = HSMCA_OK;
    if (cfg->admin_group[0]) {
        struct group *g = getgrnam(cfg->admin_group);
        if (!g)
            rc = hsmca_fail(e, HSMCA_EINVAL,
                            "admin.group '%.64s' does not exist (groupadd %.64s, and add the "
                            "approvers to it)",
                            cfg->admin_group, cfg->admin_group);
        else {
            a->has_group = 1;
            a->gid = g->gr_gid;
        }
    }
    if (rc == HSMCA_OK)
        rc = admin_bind(a, cfg, sb, e);
    if (rc != HSMCA_OK) {
        signer_admin_close(a);
        return rc;
    }
    LOG_EVENT(LOG_LVL_INFO, "admin socket", LOG_STR("path", cfg->admin_socket),
              LOG_STR("group", a->has_group ? a->group : ""),
              LOG_STR("mode", a->has_group ? "0660" : "0600"));
    *out = a;
    return HSMCA_OK;
}

int signer_admin_listen_fd(const signer_admin *a)
{
    return a ? a->lfd : -1;
}

void signer_admin_close(signer_admin *a)
{
    if (!a)
        return;
    for (int i = 0; i < ADMIN_MAX_CONNS; i++)
        if (a->conns[i].fd >= 0)
            close(a->conns[i].fd);
    if (a->lfd >= 0)
        close(a->lfd);
    for (int i = 0; i < ADMIN_REFUSAL_UIDS; i++)
        window_limiter_free(a->refusals[i].l);
    free(a);
}

int signer_admin_pollfds(signer_admin *a, struct pollfd *p)
{
    if (!a)
        return 0;
    int n = 0, free_slot = 0;
    for (int i = 0; i < ADMIN_MAX_CONNS; i++) {
        /* A waiting connection is not read: its reply comes from ca_reply. */
        p[n++] = (struct pollfd){a->conns[i].waiting ? -1 : a->conns[i].fd, POLLIN, 0};
        free_slot |= a->conns[i].fd < 0;
    }
    /* At the cap, callers wait in the backlog until a connection ends. */
    p[n++] = (struct pollfd){free_slot ? a->lfd : -1, POLLIN, 0};
    return n;
}

/* Who the caller is, and whether it may use the socket (defence in depth: the socket's
 * mode already keeps others out). */
static void identify(signer_admin *a, admin_conn *c)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    c->allowed = 0;
    c->uid = -1;
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        snprintf(c->why, sizeof(c->why), "SO_PEERCRED: %s", strerror(errno));
        snprintf(c->user, sizeof(c->user), "unknown");
        return;
    }
    char buf[4096];
    struct passwd pw, *res = NULL;
    c->uid = (int64_t)cred.uid;
    if (getpwuid_r(cred.uid, &pw, buf, sizeof(buf), &res) == 0 && res)
        snprintf(c->user, sizeof(c->user), "%s", res->pw_name);
    else
        snprintf(c->user, sizeof(c->user), "uid:%u", (unsigned)cred.uid);
    int in_group = a->has_group && cred.gid == a->gid;
    gid_t groups[256];
    len = sizeof(groups);
    if (a->has_group && !in_group &&
        getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0)
        for (size_t i = 0; i < len / sizeof(gid_t); i++)
            in_group |= groups[i] == a->gid;
    c->allowed = cred.uid == 0 || in_group || (a->own_allowed && cred.uid == a->own_uid);
    if (!c->allowed)
        snprintf(c->why, sizeof(c->why), "user %s (uid %u) is neither root nor in admin.group '%.32s'",
                 c->user, (unsigned)cred.uid, a->has_group ? a->group : "(none set)");
}

/* Appends an entry nothing waits for: a log that failed says so once (audit_log.c). */
static void append_refusal(signer_ctx *s, audit_entry *ent)
{
    uint64_t seq;
    hsmca_err e;
    hsmca_code rc = audit_log_append(s->audit, ent, &seq, &e);
    if (rc != HSMCA_OK && rc != HSMCA_EUNAVAIL)
        LOG_EVENT(LOG_LVL_ERROR, "audit: admin refusal not written", LOG_STR("error", e.msg));
}

static void refusal_summary(signer_ctx *s, uint64_t count)
{
    audit_entry ent = {.kind = AUDIT_SUPPRESSED, .count = count};
    snprintf(ent.of, sizeof(ent.of), "deny");
    ent.limit = ADMIN_REFUSALS_PER_WINDOW;
    ent.interval_s = ADMIN_REFUSAL_WINDOW_S;
    append_refusal(s, &ent);
}

/* The refusal limiter of uid: its own, else the least recently used one's (its pending
 * count reported first), renewed. NULL when out of memory. */
static window_limiter *refusals_of(signer_admin *a, signer_ctx *s, int64_t uid, double now)
{
    int pick = 0;
    for (int i = 0; i < ADMIN_REFUSAL_UIDS; i++) {
        if (a->refusals[i].l && a->refusals[i].uid == uid) {
            a->refusals[i].last = now;
            return a->refusals[i].l;
        }
        if (!a->refusals[i].l ||
            (a->refusals[pick].l && a->refusals[i].last < a->refusals[pick].last))
            pick = i;
    }
    if (a->refusals[pick].l) { /* a time past its window: its count, whatever is left */
        uint64_t dropped =
            window_limiter_flush(a->refusals[pick].l, now + 2 * ADMIN_REFUSAL_WINDOW_S);
        if (dropped)
            refusal_summary(s, dropped);
        window_limiter_free(a->refusals[pick].l);
    }
    a->refusals[pick].l = window_limiter_new(ADMIN_REFUSALS_PER_WINDOW, ADMIN_REFUSAL_WINDOW_S);
    a->refusals[pick].uid = uid;
    a->refusals[pick].last = now;
    return a->refusals[pick].l;
}

/* A refused attempt (a caller outside the group, a malformed request, an op refused) as a
 * deny entry under its uid's limiter. */
static void audit_refusal(signer_admin *a, signer_ctx *s, const admin_conn *c,
                          hsmca_code code, const char *op, const char *why)
{
    uint64_t report;
    if (!s->audit)
        return;
    const char *user = c->user;
    double now = util_mono_now();
    window_limiter *l = refusals_of(a, s, c->uid, now);
    if (!l)
        return;
    int ok = window_limiter_allow(l, now, &report);
    if (report)
        refusal_summary(s, report);
    if (!ok)
        return;
    char reason[400];
    snprintf(reason, sizeof(reason), "admin socket%s%s: %s", op ? " op " : "", op ? op : "", why);
    audit_entry ent = {.kind = AUDIT_DENY};
    ent.requester = (audit_str){user, strlen(user), 0};
    snprintf(ent.code, sizeof(ent.code), "%s", hsmca_code_name(code));
    ent.reason = (audit_str){reason, strlen(reason), 0};
    append_refusal(s, &ent);
}

static void reply_error(admin_conn *c, const char *msg);

/* A connection of a uid that holds ADMIN_CONNS_PER_UID already: answered that at once and
 * closed (not a deny entry: the uid's earlier connections are on the record). */
static int over_cap(signer_admin *a, admin_conn *c)
{
    int held = 0;
    for (int i = 0; i < ADMIN_MAX_CONNS; i++)
        held += &a->conns[i] != c && a->conns[i].fd >= 0 && a->conns[i].uid == c->uid;
    if (held < ADMIN_CONNS_PER_UID)
        return 0;
    char why[200];
    snprintf(why, sizeof(why),
             "user %s holds %d admin connections already (at most %d a user): try again "
             "once one ends",
             c->user, held, ADMIN_CONNS_PER_UID);
    reply_error(c, why);
    return 1;
}

static void admin_accept(signer_admin *a, signer_ctx *s)
{
    for (int i = 0; i < ADMIN_MAX_CONNS; i++) {
        admin_conn *c = &a->conns[i];
        if (c->fd >= 0)
            continue;
        c->fd = accept4(a->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c->fd < 0)
            return;
        c->deadline = util_mono_now() + ADMIN_TIMEOUT_S;
        identify(a, c);
        if (over_cap(a, c))
            continue;
        if (!c->allowed) {
            LOG_EVENT(LOG_LVL_WARN, "admin caller refused", LOG_STR("user", c->user),
                      LOG_STR("reason", c->why));
            audit_refusal(a, s, c, HSMCA_EPERM, NULL, c->why);
        }
    }
}

static void conn_end(admin_conn *c)
{
    close(c->fd);
    c->fd = -1;
    c->waiting = 0;
}

/* The reply, without waiting: a caller that does not read loses it (the step it asked
 * for is in the log either way). */
static void reply(admin_conn *c, json_t *r)
{
    char *text = r ? json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (text && strlen(text) > ADMIN_MAX_MSG) {
        free(text);
        text = strdup("{\"error\":\"the reply would be longer than 65536 bytes\",\"ok\":false}");
    }
    if (text) {
        /* sendmsg and recvmsg: the sandbox's socket calls (send and recv are not). */
        struct iovec iov = {text, strlen(text)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        (void)!sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    free(text);
    json_decref(r);
    conn_end(c);
}

static void reply_error(admin_conn *c, const char *msg)
{
    reply(c, json_pack("{s:b, s:s}", "ok", 0, "error", msg));
}

static const char *pool_state_name(p11_pool_state st)
{
    return st == P11_POOL_READY ? "ready" : st == P11_POOL_RECONNECTING ? "reconnecting"
                                                                        : "pin-refused";
}

/* The signer's state: its keys and their tokens, the audit log, the intermediates. */
static json_t *op_status(signer_ctx *s, const char *user, json_t *req, hsmca_err *e)
{
    uint64_t lines = 0, bytes = 0;
    if (s->audit)
        audit_log_durable(s->audit, &lines, &bytes);
    json_t *r = json_pack("{s:b, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "ok", 1,
                          "caller", user, "ca_key", s->cfg.ca_key_uri, "ca_token",
                          pool_state_name(p11_pool_get_state(s->pool)), "audit_key",
                          s->cfg.audit_key_uri, "audit_token",
                          s->audit_key ? pool_state_name(p11_signkey_get_state(s->audit_key)) : "",
                          "audit_dir", s->cfg.audit_dir, "audit_entries", (json_int_t)lines,
                          "audit_bytes", (json_int_t)bytes, "approval_required",
                          (json_int_t)s->cfg.approval_required, "intermediates_pending",
                          (json_int_t)signer_ica_pending(s->ca), "trust_domain",
                          s->cfg.trust_domain);
    hsmca_err closed;
    hsmca_err_clear(&closed);
    int open = signer_ca_open(s->ca, &closed) == HSMCA_OK;
    char why[SIGNER_RELOAD_WHY_MAX], state[SIGNER_RELOAD_WHY_MAX + 16];
    uint64_t failures;
    int64_t ok_at;
    int failed = signer_policy_reload_state(why, sizeof(why), &failures, &ok_at);
    snprintf(state, sizeof(state), "%s%s", failed ? "failed: " : "ok", failed ? why : "");
    if (r && (json_object_set_new(r, "ca_profile", json_string(open ? "open" : closed.msg)) ||
              json_object_set_new(r, "policy_reload", json_string(state)) ||
              json_object_set_new(r, "policy_reload_failures", json_integer((json_int_t)failures)) ||
              json_object_set_new(r, "policy_reload_ok_at", json_integer((json_int_t)ok_at)))) {
        json_decref(r);
        r = NULL;
    }
    if (!r)
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    return r;
}

typedef json_t *(*admin_op_fn)(signer_ctx *s, const char *user, json_t *req, hsmca_err *e);
typedef json_t *(*admin_ca_op_fn)(signer_caops *ca, const char *user, json_t *req,
                                  hsmca_err *e);

/* The allow-table: every op a caller may ask for, each handed only what it answers from:
 * the whole signer (status) or the CA profile's context (signer_caops.h). */
static const struct admin_op {
    const char *op;
    admin_op_fn fn;
    admin_ca_op_fn ca_fn;
} admin_ops[] = {
    {"status", op_status, NULL},
    {"ica-request", NULL, signer_ica_request},
    {"ica-renew-proof", NULL, signer_ica_renew_proof},
    {"ica-list", NULL, signer_ica_list},
    {"ica-show", NULL, signer_ica_show},
    {"ica-approve", NULL, signer_ica_approve},
    {"ica-deny", NULL, signer_ica_deny},
    {"ica-fetch", NULL, signer_ica_fetch},
    {"ca-revoke", NULL, signer_crl_revoke},
    {"ca-revoke-identity", NULL, signer_revoke_identity},
    {"crl-get", NULL, signer_crl_get},
};

static void admin_request(signer_admin *a, signer_ctx *s, admin_conn *c, const char *buf,
                          size_t n)
{
    json_error_t je;
    json_t *req = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    const char *op = req && json_is_object(req) ? json_string_value(json_object_get(req, "op"))
                                                : NULL;
    const struct admin_op *fn = NULL;
    for (size_t i = 0; op && i < sizeof(admin_ops) / sizeof(admin_ops[0]); i++)
        if (strcmp(op, admin_ops[i].op) == 0) {
            fn = &admin_ops[i];
            op = admin_ops[i].op; /* ours: it outlives the request */
        }
    if (!fn) {
        const char *why = !req ? "not a JSON object" : !op ? "no op" : "unknown op";
        audit_refusal(a, s, c, HSMCA_EINVAL, NULL, why);
        reply_error(c, why);
        json_decref(req);
        return;
    }
    hsmca_err e;
    hsmca_err_clear(&e);
    s->ca->admin_uid = c->uid; /* who asks: the ops log it and compare users by it */
    json_t *r = fn->ca_fn ? fn->ca_fn(s->ca, c->user, req, &e) : fn->fn(s, c->user, req, &e);
    s->ca->admin_uid = -1;
    json_decref(req);
    if (r == SIGNER_REPLY_LATER) {
        c->waiting = 1;
        c->deadline = util_mono_now() + s->cfg.sign_timeout + ADMIN_TIMEOUT_S;
        return;
    }
    if (!r) {
        LOG_EVENT(LOG_LVL_WARN, "admin request refused", LOG_STR("user", c->user),
                  LOG_STR("op", op), LOG_STR("reason", e.msg));
        audit_refusal(a, s, c, e.code, op, e.msg);
        reply_error(c, e.msg);
        return;
    }
    reply(c, r);
}

static void admin_read(signer_admin *a, signer_ctx *s, admin_conn *c)
{
    static char buf[ADMIN_MAX_MSG + 1];
    struct iovec iov = {buf, ADMIN_MAX_MSG + 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n = recvmsg(c->fd, &m, MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        conn_end(c);
        return;
    }
    if (!c->allowed) {
        reply_error(c, c->why);
        return;
    }
    if (n > ADMIN_MAX_MSG) {
        audit_refusal(a, s, c, HSMCA_EINVAL, NULL, "request longer than 65536 bytes");
        reply_error(c, "request longer than 65536 bytes");
        return;
    }
    admin_request(a, s, c, buf, (size_t)n);
}

void signer_admin_serve(signer_admin *a, signer_ctx *s, const struct pollfd *p, int n)
{
    if (!a)
        return;
    if (s->ca->ca_reply) { /* a CA signature completed: its caller's reply */
        admin_conn *w = NULL;
        for (int i = 0; i < ADMIN_MAX_CONNS; i++)
            if (a->conns[i].fd >= 0 && a->conns[i].waiting)
                w = &a->conns[i];
        if (w)
            reply(w, s->ca->ca_reply);
        else
            json_decref(s->ca->ca_reply);
        s->ca->ca_reply = NULL;
    }
    double now = util_mono_now();
    for (int i = 0; i < ADMIN_MAX_CONNS && i < n; i++) {
        admin_conn *c = &a->conns[i];
        if (c->fd >= 0 && p[i].fd == c->fd && p[i].revents)
            admin_read(a, s, c);
        if (c->fd >= 0 && now > c->deadline) {
            LOG_EVENT(LOG_LVL_WARN, "admin connection timed out", LOG_STR("user", c->user));
            conn_end(c);
        }
    }
    if (n > ADMIN_MAX_CONNS && p[ADMIN_MAX_CONNS].fd >= 0 && p[ADMIN_MAX_CONNS].revents)
        admin_accept(a, s);
    for (int i = 0; i < ADMIN_REFUSAL_UIDS && s->audit; i++) {
        uint64_t dropped = a->refusals[i].l ? window_limiter_flush(a->refusals[i].l, now) : 0;
        if (dropped)
            refusal_summary(s, dropped);
    }
}

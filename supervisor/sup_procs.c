/* sup_procs.c - see sup_procs.h. */
#include "sup_procs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc_frame.h"
#include "log.h"
#include "mx_contract.h"
#include "sup_exec.h"
#include "sup_keys.h"
#include "sup_publish.h"
#include "util.h"

#define BACKOFF_MIN 0.2
#define BACKOFF_MAX 5.0
#define STABLE_AFTER 10.0 /* a child that lived this long restarts without delay */
/* Stopping: a child has this long after SIGTERM to finish what is in flight, then it
 * gets SIGKILL, once; after that only its exit is waited for. */
#define SUP_STOP_GRACE_S 5.0
#define SUP_AFTER_KILL_S 3600.0 /* a deadline no wait reaches: no second SIGKILL */

static int want_metrics(const hsmca_config *cfg)
{
    return cfg->metrics_listen[0] != '\0';
}

static int want_publish(const hsmca_config *cfg)
{
    return cfg->publish_enabled;
}

static int want_keyfetch(const hsmca_config *cfg)
{
    for (int i = 0; i <= cfg->n_clusters && i < SUP_CLUSTERS; i++)
        if (sup_keys_from_issuer(cfg, i))
            return 1;
    return 0;
}

/* The children: {role, program, environment, links, the bytes it may send, wanted}. Rows
 * start in this order, and the issuer keys go out in it. The metrics process reads what
 * the front end reads of its environment, no more. */
static const sup_proc procs[] = {
    {"signer", "signer", SUP_ENV_SIGNER, LINK_PEER | LINK_KEYS | LINK_POLICY_FIRST,
     {CTL_RESTART_PEER, CTL_POLICY, CTL_RELOAD_FAILED}, NULL},
    {"frontend", "frontend", SUP_ENV_FRONTEND,
     LINK_PEER | LINK_METRICS_FE | LINK_KEYS | LINK_POLICY, {CTL_KEYS_REFRESH}, NULL},
    {"metrics", "metrics", SUP_ENV_FRONTEND, LINK_METRICS, {0}, want_metrics},
    {"publish-roots", "publish", SUP_ENV_PUBLISH, LINK_OWN_USER | LINK_SIGHUP, {0}, want_publish},
    {"keyfetch", "keyfetch", SUP_ENV_KEYFETCH, LINK_FETCHER, {0}, want_keyfetch},
};
#define SUP_KIDS ((int)(sizeof(procs) / sizeof(procs[0])))
_Static_assert(SUP_KIDS <= SUP_PROCS_MAX, "SUP_PROCS_MAX counts every row of procs");

static const char *sup_exe;    /* the hsmca program (sup_procs_prepare's cli) */
static const char *sup_config; /* the config's absolute path */
static sup_child sup_kids[SUP_KIDS];

/* The metrics process (metrics.listen): its link to the front end is a socketpair made at
 * each start of the front end; we keep the metrics end (keep) and hand it to each metrics
 * process, so either may restart without the other (common/mx_contract.h). */
static struct {
    int on;   /* metrics.listen is set */
    int keep; /* the metrics end of the current link, -1 before the first */
} sup_mx = {0, -1};

/* The publish-roots child (publish.enabled, sup_publish.h): prepared before any fork. */
static sup_publish sup_pub;

/* The first child with one of links, or NULL. */
static sup_child *kid_with(unsigned links)
{
    for (int i = 0; i < SUP_KIDS; i++)
        if (sup_kids[i].proc->links & links)
            return &sup_kids[i];
    return NULL;
}

sup_child *sup_procs_peer(const sup_child *c)
{
    for (int i = 0; i < SUP_KIDS; i++)
        if ((sup_kids[i].proc->links & LINK_PEER) && &sup_kids[i] != c)
            return &sup_kids[i];
    return NULL;
}

int sup_procs_ctl(unsigned links)
{
    const sup_child *c = kid_with(links);
    return c && c->pid ? c->ctl : -1;
}

/* Moves fd to a number above the ones we are about to assign, so that dup2
 * onto 3 and 4 never clobbers the other source. */
static int lift_fd(int fd)
{
    int n = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    if (n < 0)
        _exit(127);
    return n;
}

_Static_assert(MX_FE_FD == 5, "spawn() passes the front end --metrics-fd 5");

/* For the front end while metrics.listen is set: a new metrics link, whose other end
 * replaces the one we keep and goes to a running metrics process. Returns the front
 * end's end, or -1 (another child, metrics off, or no socketpair: that front end then
 * runs without figures until its next start, and says nothing is wrong). */
static int mx_link_for(const sup_child *c)
{
    if (!sup_mx.on || !(c->proc->links & LINK_METRICS_FE))
        return -1;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
        LOG_EVENT(LOG_LVL_ERROR, "socketpair for the metrics link failed",
                  LOG_STR("error", strerror(errno)));
        return -1;
    }
    if (sup_mx.keep >= 0)
        close(sup_mx.keep);
    sup_mx.keep = pair[1];
    const sup_child *m = kid_with(LINK_METRICS);
    hsmca_err e;
    if (m && m->pid && m->ctl >= 0 && ipc_send_fd(m->ctl, sup_mx.keep, &e) != HSMCA_OK)
        LOG_EVENT(LOG_LVL_WARN, "cannot hand the metrics process its link to the new front end",
                  LOG_STR("error", e.msg));
    return pair[0];
}

/* In the forked child: fds 3 (ipc_fd >= 0), 4 and 5 (mfd >= 0), then its program with
 * the flags that name them. Never returns. */
static void exec_child(const sup_child *c, const char *exe, int ipc_fd, int ctl, int mfd)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    int a = ipc_fd >= 0 ? lift_fd(ipc_fd) : -1, b = lift_fd(ctl);
    int m = mfd >= 0 ? lift_fd(mfd) : -1;
    if ((a >= 0 && dup2(a, 3) != 3) || dup2(b, 4) != 4 ||
        (m >= 0 && dup2(m, MX_FE_FD) != MX_FE_FD))
        _exit(127);
    char *argv[12] = {(char *)exe, "--config", (char *)sup_config};
    int n = 3;
    if (a >= 0) {
        argv[n++] = "--ipc-fd";
        argv[n++] = "3";
    }
    argv[n++] = "--ctl-fd";
    argv[n++] = "4";
    if (m >= 0) {
        argv[n++] = "--metrics-fd";
        argv[n++] = "5";
    }
    execve(exe, argv, c->env.envp);
    _exit(127);
}

/* Starts c's program with ipc_fd as its fd 3 and a new control channel. */
static HSMCA_MUSTCHECK hsmca_code spawn(sup_child *c, int ipc_fd, hsmca_err *e)
{
    int ctl[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0)
        return hsmca_fail(e, HSMCA_EIO, "socketpair: %s", strerror(errno));
    int mfd = mx_link_for(c); /* the front end's end of a new metrics link, or -1 */
    char exe[PATH_MAX];
    pid_t pid = sup_exec_find(sup_exe, c->proc->program, exe, sizeof(exe), e) == HSMCA_OK
                    ? fork()
                    : -2;
    if (pid < 0) {
        close(ctl[0]);
        close(ctl[1]);
        if (mfd >= 0)
            close(mfd);
        return pid == -2 ? e->code : hsmca_fail(e, HSMCA_EIO, "fork: %s", strerror(errno));
    }
    if (pid == 0)
        exec_child(c, exe, ipc_fd, ctl[1], mfd);
    close(ctl[1]);
    if (mfd >= 0)
        close(mfd);
    c->pid = pid;
    c->ctl = ctl[0];
    memset(c->keys_sent, 0, sizeof(c->keys_sent));
    c->started = util_mono_now();
    LOG_EVENT(LOG_LVL_INFO, "child started", LOG_STR("role", c->proc->role),
              LOG_INT("child_pid", pid));
    return HSMCA_OK;
}

/* Starts the publish-roots child (LINK_OWN_USER): its own user, no channel. */
static HSMCA_MUSTCHECK hsmca_code spawn_own_user(sup_child *c, hsmca_err *e)
{
    pid_t pid = sup_publish_spawn(&sup_pub, sup_config, e);
    if (pid < 0)
        return e->code;
    c->pid = pid;
    c->started = util_mono_now();
    LOG_EVENT(LOG_LVL_INFO, "child started", LOG_STR("role", c->proc->role),
              LOG_INT("child_pid", pid));
    return HSMCA_OK;
}

static int new_pair(int pair[2])
{
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
        LOG_EVENT(LOG_LVL_ERROR, "socketpair failed", LOG_STR("error", strerror(errno)));
        return -1;
    }
    return 0;
}

/* Starts a dead LINK_PEER child that is due. A running peer is handed the other end of
 * the new connection; two dead children are started together. */
static void restart_due(sup_child *c, sup_child *peer)
{
    double now = util_mono_now();
    if (!peer->pid && now < peer->restart_at)
        return; /* wait for the peer, then start both on one pair */
    int pair[2];
    if (new_pair(pair) != 0)
        return;
    hsmca_err e;
    if (peer->pid) {
        if (ipc_send_fd(peer->ctl, pair[1], &e) != HSMCA_OK)
            LOG_EVENT(LOG_LVL_WARN, "cannot hand a child a new connection",
                      LOG_STR("role", peer->proc->role), LOG_STR("error", e.msg));
    } else if (spawn(peer, pair[1], &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "cannot start a child", LOG_STR("role", peer->proc->role),
                  LOG_STR("error", e.msg));
    }
    if (spawn(c, pair[0], &e) != HSMCA_OK)
        LOG_EVENT(LOG_LVL_ERROR, "cannot start a child", LOG_STR("role", c->proc->role),
                  LOG_STR("error", e.msg));
    close(pair[0]);
    close(pair[1]);
}

/* Starts c when this config runs it, it is not running and its restart is due: a peer
 * with its peer (restart_due), the metrics process once a front end has been started
 * (the link exists), publish-roots as its own user, the key fetcher with no fd 3. */
static void start_due(sup_child *c)
{
    double now = util_mono_now();
    if (!c->on || c->pid || now < c->restart_at)
        return;
    if (c->proc->links & LINK_PEER) {
        restart_due(c, sup_procs_peer(c));
        return;
    }
    if ((c->proc->links & LINK_METRICS) && sup_mx.keep < 0)
        return;
    hsmca_err e;
    int ipc_fd = c->proc->links & LINK_METRICS ? sup_mx.keep : -1;
    hsmca_code rc = c->proc->links & LINK_OWN_USER ? spawn_own_user(c, &e)
                                                   : spawn(c, ipc_fd, &e);
    if (rc != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "cannot start a child", LOG_STR("role", c->proc->role),
                  LOG_STR("error", e.msg));
        c->restart_at = now + BACKOFF_MAX;
    }
}

int sup_procs_reap(void)
{
    int status, permanent = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < SUP_KIDS; i++) {
            sup_child *c = &sup_kids[i];
            const char *role = c->proc->role;
            if (c->pid != pid)
                continue;
            double now = util_mono_now();
            if (WIFSIGNALED(status))
                LOG_EVENT(LOG_LVL_WARN, "child killed by a signal", LOG_STR("role", role),
                          LOG_INT("child_pid", pid), LOG_INT("signal", WTERMSIG(status)));
            else if (WEXITSTATUS(status) == EXIT_CONFIG)
                permanent = 1;
            else if (WEXITSTATUS(status) == EXIT_RESTART)
                LOG_EVENT(LOG_LVL_INFO, "child asked to be restarted", LOG_STR("role", role),
                          LOG_INT("child_pid", pid));
            else
                LOG_EVENT(LOG_LVL_WARN, "child exited", LOG_STR("role", role),
                          LOG_INT("child_pid", pid), LOG_INT("status", WEXITSTATUS(status)));
            if (permanent) {
                LOG_EVENT(LOG_LVL_ERROR,
                          "child cannot start: a configuration, PIN, key, sandbox or audit log "
                          "lock error (see above) that a restart will not cure; stopping",
                          LOG_STR("role", role), LOG_INT("child_pid", pid));
                c->pid = 0;
                continue;
            }
            c->backoff = now - c->started >= STABLE_AFTER
                             ? BACKOFF_MIN
                             : (c->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : c->backoff * 2);
            c->restart_at = now + c->backoff;
            c->pid = 0;
            if (c->ctl >= 0)
                close(c->ctl);
            c->ctl = -1;
            char delay[32];
            snprintf(delay, sizeof(delay), "%.1f", c->backoff);
            LOG_EVENT(LOG_LVL_INFO, "restarting a child", LOG_STR("role", role),
                      LOG_STR("delay_s", delay));
        }
    }
    return permanent ? -1 : 0;
}

int sup_procs_count(void)
{
    return SUP_KIDS;
}

sup_child *sup_procs_kid(int i)
{
    return &sup_kids[i];
}

void sup_procs_start_due(void)
{
    for (int i = 0; i < SUP_KIDS; i++)
        start_due(&sup_kids[i]);
}

void sup_procs_stop(void)
{
    sup_child *kids = sup_kids;
    int n = SUP_KIDS;
    for (int i = 0; i < n; i++)
        if (kids[i].pid)
            kill(kids[i].pid, SIGTERM);
    double deadline = util_mono_now() + SUP_STOP_GRACE_S;
    for (;;) {
        int alive = 0;
        for (int i = 0; i < n; i++) {
            if (kids[i].pid && waitpid(kids[i].pid, NULL, WNOHANG) == kids[i].pid)
                kids[i].pid = 0;
            alive += kids[i].pid != 0;
        }
        if (!alive)
            return;
        if (util_mono_now() > deadline) {
            for (int i = 0; i < n; i++) {
                if (kids[i].pid) {
                    char grace[32];
                    snprintf(grace, sizeof(grace), "%.0f", SUP_STOP_GRACE_S);
                    LOG_EVENT(LOG_LVL_WARN,
                              "child did not stop within the grace of SIGTERM: killing it",
                              LOG_STR("role", kids[i].proc->role),
                              LOG_INT("child_pid", kids[i].pid), LOG_STR("grace_s", grace));
                    kill(kids[i].pid, SIGKILL);
                }
            }
            deadline = util_mono_now() + SUP_AFTER_KILL_S; /* killed once is enough */
        }
        usleep(50 * 1000);
    }
}

void sup_procs_free(void)
{
    for (int i = 0; i < SUP_KIDS; i++)
        sup_env_free(&sup_kids[i].env);
    sup_publish_free(&sup_pub);
}

hsmca_code sup_procs_prepare(const hsmca_config *cfg, const char *cli, const char *config,
                             hsmca_err *e)
{
    sup_exe = cli;
    sup_config = config;
    for (int i = 0; i < SUP_KIDS; i++) {
        sup_child *c = &sup_kids[i];
        memset(c, 0, sizeof(*c));
        c->proc = &procs[i];
        c->on = !procs[i].wanted || procs[i].wanted(cfg);
        c->ctl = -1;
        c->backoff = BACKOFF_MIN / 2;
    }
    char exe[PATH_MAX]; /* a missing program is an installation error no restart cures */
    for (int i = 0; i < SUP_KIDS; i++)
        if (sup_kids[i].on)
            HSMCA_GUARD(sup_exec_find(cli, procs[i].program, exe, sizeof(exe), e));
    for (int i = 0; i < SUP_KIDS; i++)
        if (!(procs[i].links & LINK_OWN_USER))
            HSMCA_GUARD(sup_env_build(cfg, procs[i].env, &sup_kids[i].env, e));
    HSMCA_GUARD(sup_publish_prepare(cfg, cli, &sup_pub, e));
    sup_mx.on = want_metrics(cfg);
    return HSMCA_OK;
}

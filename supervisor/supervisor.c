/* supervisor.c - see supervisor.h. */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "ipc_frame.h"
#include "log.h"
#include "mx_contract.h"
#include "policy_file.h"
#include "sandbox.h"
#include "sup_env.h"
#include "sup_exec.h"
#include "sup_keys.h"
#include "sup_publish.h"
#include "sup_reload.h"
#include "util.h"

#define BACKOFF_MIN 0.2
#define BACKOFF_MAX 5.0
#define STABLE_AFTER 10.0 /* a child that lived this long restarts without delay */
#define SUP_KIDS 4 /* signer, frontend, metrics, publish-roots */
#define SUP_CLUSTERS IPC_KEYSETS /* the local cluster, then auth.clusters (ipc_contract.h) */

typedef struct {
    const char *role; /* "signer" or "frontend": its program is hsmca-ROLE */
    pid_t pid;        /* 0 when not running */
    int ctl;          /* our end of its control channel */
    double started, restart_at, backoff;
    uint64_t keys_sent[SUP_CLUSTERS]; /* per cluster, the issuer keys' generation it has
                                         (0: none) */
    char *const *envp; /* its whole environment (sup_env.h), built once before any fork */
} sup_child;

/* The key fetchers, one per cluster with a jwt authenticator (config_cluster_index: 0
 * the local cluster, i + 1 auth.clusters[i]; NULL for a cluster without). */
typedef struct {
    sup_keys *k[SUP_CLUSTERS];
} sup_keyring;

static char sup_exe[PATH_MAX]; /* the hsmca program (supervisor_run's cli_path) */
static const char *sup_config;

/* The metrics process (metrics.listen): its link to the front end is a socketpair made at
 * each start of the front end; we keep the metrics end (keep) and hand it to each metrics
 * process, so either may restart without the other (common/mx_contract.h). */
static struct {
    int on;          /* metrics.listen is set */
    int keep;        /* the metrics end of the current link, -1 before the first */
    sup_child *kid;  /* the metrics child */
} sup_mx = {0, -1, NULL};

/* The publish-roots child (publish.enabled, sup_publish.h): prepared before any fork. */
static const sup_publish *sup_pub;

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
    if (!sup_mx.on || strcmp(c->role, "frontend") != 0)
        return -1;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
        log_error("socketpair for the metrics link: %s", strerror(errno));
        return -1;
    }
    if (sup_mx.keep >= 0)
        close(sup_mx.keep);
    sup_mx.keep = pair[1];
    const sup_child *m = sup_mx.kid;
    hsmca_err e;
    if (m && m->pid && m->ctl >= 0 && ipc_send_fd(m->ctl, sup_mx.keep, &e) != HSMCA_OK)
        log_warn("cannot hand the metrics process its link to the new front end: %s", e.msg);
    return pair[0];
}

static HSMCA_MUSTCHECK hsmca_code spawn(sup_child *c, int ipc_fd, hsmca_err *e)
{
    int ctl[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0)
        return hsmca_fail(e, HSMCA_EIO, "socketpair: %s", strerror(errno));
    int mfd = mx_link_for(c); /* the front end's end of a new metrics link, or -1 */
    char exe[PATH_MAX];
    pid_t pid = sup_exec_find(sup_exe, c->role, exe, sizeof(exe), e) == HSMCA_OK ? fork() : -2;
    if (pid < 0) {
        close(ctl[0]);
        close(ctl[1]);
        if (mfd >= 0)
            close(mfd);
        return pid == -2 ? e->code : hsmca_fail(e, HSMCA_EIO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int a = lift_fd(ipc_fd), b = lift_fd(ctl[1]), m = mfd >= 0 ? lift_fd(mfd) : -1;
        if (dup2(a, 3) != 3 || dup2(b, 4) != 4 || (m >= 0 && dup2(m, MX_FE_FD) != MX_FE_FD))
            _exit(127);
        if (m >= 0)
            execle(exe, exe, "--config", sup_config, "--ipc-fd", "3", "--ctl-fd", "4",
                   "--metrics-fd", "5", (char *)NULL, c->envp);
        else
            execle(exe, exe, "--config", sup_config, "--ipc-fd", "3", "--ctl-fd", "4",
                   (char *)NULL, c->envp);
        _exit(127);
    }
    close(ctl[1]);
    if (mfd >= 0)
        close(mfd);
    c->pid = pid;
    c->ctl = ctl[0];
    memset(c->keys_sent, 0, sizeof(c->keys_sent));
    c->started = util_mono_now();
    log_info("started %s (pid %d)", c->role, (int)pid);
    return HSMCA_OK;
}

static int new_pair(int pair[2])
{
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
        log_error("socketpair: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Starts a dead child that is due. A running peer is handed the other end of
 * the new connection; two dead children are started together. */
static void restart_due(sup_child *c, sup_child *peer)
{
    double now = util_mono_now();
    if (c->pid || now < c->restart_at)
        return;
    if (!peer->pid && now < peer->restart_at)
        return; /* wait for the peer, then start both on one pair */
    int pair[2];
    if (new_pair(pair) != 0)
        return;
    hsmca_err e;
    if (peer->pid) {
        if (ipc_send_fd(peer->ctl, pair[1], &e) != HSMCA_OK)
            log_warn("cannot hand %s a new connection: %s", peer->role, e.msg);
    } else if (spawn(peer, pair[1], &e) != HSMCA_OK) {
        log_error("cannot start %s: %s", peer->role, e.msg);
    }
    if (spawn(c, pair[0], &e) != HSMCA_OK)
        log_error("cannot start %s: %s", c->role, e.msg);
    close(pair[0]);
    close(pair[1]);
}

/* Starts the metrics process when it is due and a front end has been started (the link
 * exists): on its first start, and after it died. */
static void mx_restart_due(sup_child *m)
{
    double now = util_mono_now();
    if (!sup_mx.on || m->pid || sup_mx.keep < 0 || now < m->restart_at)
        return;
    hsmca_err e;
    if (spawn(m, sup_mx.keep, &e) != HSMCA_OK) {
        log_error("cannot start metrics: %s", e.msg);
        m->restart_at = now + BACKOFF_MAX;
    }
}

/* Starts publish-roots when it is due: at once, and after it died. */
static void pub_restart_due(sup_child *c)
{
    double now = util_mono_now();
    if (!sup_pub || !sup_pub->on || c->pid || now < c->restart_at)
        return;
    hsmca_err e;
    pid_t pid = sup_publish_spawn(sup_pub, sup_exe, sup_config, &e);
    if (pid < 0) {
        log_error("cannot start publish-roots: %s", e.msg);
        c->restart_at = now + BACKOFF_MAX;
        return;
    }
    c->pid = pid;
    c->started = now;
    log_info("started %s (pid %d)", c->role, (int)pid);
}

/* The metrics process sends nothing: only the end of its channel is read here. */
static void mx_read_ctl(sup_child *m)
{
    char b;
    ssize_t r = read(m->ctl, &b, 1);
    if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        close(m->ctl);
        m->ctl = -1;
    }
}

/* Reaps dead children and schedules their restart. Returns -1 when one exited
 * with EXIT_CONFIG: a restart would fail the same way (or lock a PIN). */
static int reap(sup_child *kids, int n)
{
    int status, permanent = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < n; i++) {
            sup_child *c = &kids[i];
            if (c->pid != pid)
                continue;
            double now = util_mono_now();
            if (WIFSIGNALED(status))
                log_warn("%s (pid %d) killed by signal %d", c->role, (int)pid, WTERMSIG(status));
            else if (WEXITSTATUS(status) == EXIT_CONFIG)
                permanent = 1;
            else if (WEXITSTATUS(status) == EXIT_RESTART)
                log_info("%s (pid %d) asked to be restarted", c->role, (int)pid);
            else
                log_warn("%s (pid %d) exited with status %d", c->role, (int)pid,
                         WEXITSTATUS(status));
            if (permanent) {
                log_error("%s cannot start: a configuration, PIN, key, sandbox or audit log "
                          "lock error (see above) that a restart will not cure; stopping",
                          c->role);
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
            log_info("restarting %s in %.1fs", c->role, c->backoff);
        }
    }
    return permanent ? -1 : 0;
}

/* A control byte from a child: the signer asks for a new front end after the
 * old one broke the protocol, or answers a reload (sup_reload.h); the front end asks
 * for fresh issuer keys. The end of
 * the channel means the child is gone: it is closed here, so that neither poll nor a
 * key push spins on it until reap() collects the child. */
static void read_ctl(sup_child *from, sup_child *frontend, sup_keyring *keys)
{
    char b;
    ssize_t r = read(from->ctl, &b, 1);
    if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        close(from->ctl);
        from->ctl = -1;
    } else if (r == 1 && b == CTL_RESTART_PEER && from != frontend && frontend->pid) {
        log_warn("signer reports a protocol violation: restarting the front end");
        kill(frontend->pid, SIGKILL);
    } else if (r == 1 && (b == CTL_POLICY || b == CTL_RELOAD_FAILED) && from != frontend) {
        sup_reload_signer_said(b, frontend->ctl);
    } else if (r == 1 && b == CTL_KEYS_REFRESH && from == frontend) {
        /* The front end does not say which cluster's token named the kid: each fetcher
         * is asked, and each keeps to its own min_refresh. */
        for (int i = 0; i < SUP_CLUSTERS; i++)
            if (keys->k[i])
                sup_keys_refresh(keys->k[i]);
    }
}

/* Sends the issuer keys to a running child that does not have the latest yet: the
 * front end verifies callers' tokens with them, the signer verifies them again
 * (identity binding, signer/signer_bind.h). */
static void push_keys(sup_child *c, sup_keyring *keys)
{
    for (int i = 0; i < SUP_CLUSTERS; i++) {
        if (!keys->k[i] || !c->pid || c->ctl < 0 ||
            c->keys_sent[i] == sup_keys_generation(keys->k[i]))
            continue;
        hsmca_err e;
        uint64_t sent = 0;
        if (sup_keys_push_type(keys->k[i], c->ctl, CTL_KEYS_CLUSTER(i), &sent, &e) != HSMCA_OK)
            log_warn("cannot send the issuer keys of cluster %d to the %s: %s", i, c->role, e.msg);
        else
            c->keys_sent[i] = sent;
    }
}

static void keyring_stop(sup_keyring *r)
{
    for (int i = 0; i < SUP_CLUSTERS; i++)
        sup_keys_stop(r->k[i]);
}

/* A fetcher per cluster with a jwt authenticator, each on its cluster's view of the
 * config (kept in views, which must outlive them). The local one always (it is idle
 * without jwt in auth.chain). */
static HSMCA_MUSTCHECK hsmca_code keyring_start(const hsmca_config *cfg, hsmca_config *views,
                                                sup_keyring *r, hsmca_err *e)
{
    memset(r, 0, sizeof(*r));
    for (int i = 0; i <= cfg->n_clusters && i < SUP_CLUSTERS; i++) {
        if (i > 0 && !config_cluster_has_jwt(cfg, i))
            continue;
        config_cluster_view(cfg, i, &views[i]);
        if (!(r->k[i] = sup_keys_start(&views[i], e))) {
            keyring_stop(r);
            return e->code;
        }
    }
    return HSMCA_OK;
}

static void stop_children(sup_child *kids, int n)
{
    for (int i = 0; i < n; i++)
        if (kids[i].pid)
            kill(kids[i].pid, SIGTERM);
    double deadline = util_mono_now() + 5.0;
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
                    log_warn("%s (pid %d) did not stop within 5 s of SIGTERM: killing it",
                             kids[i].role, (int)kids[i].pid);
                    kill(kids[i].pid, SIGKILL);
                }
            }
            deadline = util_mono_now() + 3600; /* killed once is enough */
        }
        usleep(50 * 1000);
    }
}

/* The config and the policy file, checked here once rather than in two children in a
 * loop; sets sup_exe (the hsmca program, beside which the children's programs are found)
 * and sup_config. 0, or EXIT_CONFIG after saying why. */
static int check_config(const char *config_path, const char *cli_path, hsmca_config *cfg)
{
    if (strlen(cli_path) >= sizeof(sup_exe)) {
        log_error("the path of hsmca %.64s... is too long", cli_path);
        return EXIT_CONFIG;
    }
    memcpy(sup_exe, cli_path, strlen(cli_path) + 1);
    hsmca_err xe; /* a missing program is an installation error no restart cures */
    if (sup_exec_check(sup_exe, &xe) != HSMCA_OK) {
        log_error("%s", xe.msg);
        return EXIT_CONFIG;
    }
    static char config_abs[PATH_MAX];
    if (!realpath(config_path, config_abs)) {
        log_error("config %s: %s", config_path, strerror(errno));
        return EXIT_CONFIG;
    }
    sup_config = config_abs;
    hsmca_err e;
    if (config_load(config_abs, cfg, &e) != HSMCA_OK || config_validate(cfg, &e) != HSMCA_OK) {
        log_error("%s", e.msg);
        return EXIT_CONFIG;
    }
    /* Each child then loads the policy file for itself. */
    policy_set *pf = NULL;
    if (cfg->policy_file[0] && policy_file_load(cfg->policy_file, &pf, &e) != HSMCA_OK) {
        log_error("%s", e.msg);
        return EXIT_CONFIG;
    }
    policy_set_free(pf);
    /* An unknown group stops the start here rather than a signer restarted in a loop. */
    for (int i = 0; i < cfg->signer_groups.n; i++) {
        gid_t gid;
        if (sandbox_group_lookup("signer.groups", cfg->signer_groups.items[i], &gid, &e) !=
            HSMCA_OK) {
            log_error("%s", e.msg);
            return EXIT_CONFIG;
        }
    }
    if (cfg->signer_groups.n && geteuid() != 0)
        log_warn("signer.groups is not used: not started as root, the signer keeps our groups");
    /* At every start, as the signer does: the operator chose it, and must keep hearing it. */
    if (cfg->audit_disabled)
        log_warn("the audit log is off (audit.disabled: true): certificates are signed without "
                 "a durable record");
    return 0;
}

/* SIGCHLD, SIGTERM, SIGINT and SIGHUP blocked and read from the returned signalfd. */
static int signals_fd(void)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0)
        fatal("signalfd: %s", strerror(errno));
    return sfd;
}

#define SIG_STOP 1
#define SIG_RELOAD 2

/* One signal from sfd: SIG_STOP when it asks us to stop, SIG_RELOAD for SIGHUP, else 0. */
static int read_signal(int sfd)
{
    struct signalfd_siginfo si;
    ssize_t got = read(sfd, &si, sizeof(si));
    if (got != sizeof(si) || si.ssi_signo == SIGCHLD)
        return 0;
    if (si.ssi_signo == SIGHUP)
        return SIG_RELOAD;
    log_info("signal %u: stopping", si.ssi_signo);
    return SIG_STOP;
}

/* SIGHUP: the issuer keys read (a JWKS file) or fetched (an issuer) again, then the
 * policy file (sup_reload.h). No child restarts: a signer whose token refused the PIN
 * restarts by itself once the PIN file changes. */
static void on_sighup(sup_child *signer, sup_child *frontend, sup_keyring *keys)
{
    log_info("SIGHUP: reloading the issuer keys and the policy file");
    for (int i = 0; i < SUP_CLUSTERS; i++)
        if (keys->k[i])
            sup_keys_refresh(keys->k[i]);
    sup_reload_begin(signer->pid ? signer->ctl : -1, frontend->pid ? frontend->ctl : -1);
}

/* Runs the children until a signal stops us (0) or one of them cannot start for good
 * (EXIT_CONFIG); stops them either way. */
static int run_children(int sfd, sup_child kids[SUP_KIDS], sup_keyring *keys)
{
    sup_child *signer = &kids[0], *frontend = &kids[1];
    int rc;
    restart_due(signer, frontend);
    for (;;) {
        struct pollfd pfd[4] = {{sfd, POLLIN, 0},
                                {signer->ctl, POLLIN, 0},
                                {frontend->ctl, POLLIN, 0},
                                {kids[2].ctl, POLLIN, 0}};
        if (poll(pfd, 4, 100) < 0 && errno != EINTR)
            fatal("poll: %s", strerror(errno));
        int sig = pfd[0].revents ? read_signal(sfd) : 0;
        if (sig == SIG_STOP) {
            rc = 0;
            break;
        }
        if (sig == SIG_RELOAD)
            on_sighup(signer, frontend, keys);
        if (sig == SIG_RELOAD && kids[3].pid) /* a full pass now (k8s_publish.c) */
            kill(kids[3].pid, SIGHUP);
        for (int i = 1; i < 3; i++)
            if (pfd[i].fd >= 0 && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                read_ctl(&kids[i - 1], frontend, keys);
        if (pfd[3].fd >= 0 && (pfd[3].revents & (POLLIN | POLLHUP | POLLERR)))
            mx_read_ctl(&kids[2]);
        /* EXIT_CONFIG again, so a service manager does not start us over and try the
         * wrong PIN once more (systemd: RestartPreventExitStatus=78). */
        if (reap(kids, SUP_KIDS) != 0) {
            rc = EXIT_CONFIG;
            break;
        }
        restart_due(signer, frontend);
        restart_due(frontend, signer);
        mx_restart_due(&kids[2]);
        pub_restart_due(&kids[3]);
        /* The signer first: a rotated key reaches it no later than the front end, so a
         * token the front end accepts with a new key is not refused by a signer that
         * still has only the old set. */
        push_keys(signer, keys);
        push_keys(frontend, keys);
        sup_reload_tick(signer->pid ? signer->ctl : -1, frontend->pid ? frontend->ctl : -1);
    }
    stop_children(kids, SUP_KIDS);
    keyring_stop(keys);
    return rc;
}

int supervisor_run(const char *config_path, const char *cli_path)
{
    hsmca_config cfg;
    int rc = check_config(config_path, cli_path, &cfg);
    if (rc != 0)
        return rc;
    int sfd = signals_fd();
    sup_reload_init(cfg.policy_file);
    /* The issuer's keys: loaded (a file) or fetched (an issuer) here, never by a child. */
    static hsmca_config keys_cfg[SUP_CLUSTERS];
    static sup_keyring ring;
    hsmca_err e;
    if (keyring_start(&cfg, keys_cfg, &ring, &e) != HSMCA_OK) {
        log_error("%s", e.msg);
        return EXIT_CONFIG;
    }
    /* Each child's environment: nothing inherited but what it reads (sup_env.h). */
    static sup_env env_signer, env_frontend;
    static sup_publish pub;
    if (sup_env_build(&cfg, SUP_ENV_SIGNER, &env_signer, &e) != HSMCA_OK ||
        sup_env_build(&cfg, SUP_ENV_FRONTEND, &env_frontend, &e) != HSMCA_OK ||
        sup_publish_prepare(&cfg, &pub, &e) != HSMCA_OK) {
        log_error("%s", e.msg);
        keyring_stop(&ring);
        sup_env_free(&env_signer);
        sup_env_free(&env_frontend);
        sup_publish_free(&pub);
        return EXIT_CONFIG;
    }
    sup_env_log_signer(&cfg);
    sup_child kids[SUP_KIDS] = {
        {"signer", 0, -1, 0, 0, BACKOFF_MIN / 2, {0}, env_signer.envp},
        {"frontend", 0, -1, 0, 0, BACKOFF_MIN / 2, {0}, env_frontend.envp},
        {"metrics", 0, -1, 0, 0, BACKOFF_MIN / 2, {0}, env_frontend.envp},
        {"publish-roots", 0, -1, 0, 0, BACKOFF_MIN / 2, {0}, pub.env.envp}};
    /* The metrics process reads what the front end reads of its environment, no more. */
    sup_mx.on = cfg.metrics_listen[0] != '\0';
    sup_mx.kid = &kids[2];
    sup_pub = &pub;
    rc = run_children(sfd, kids, &ring);
    sup_env_free(&env_signer);
    sup_env_free(&env_frontend);
    sup_publish_free(&pub);
    return rc;
}

/* supervisor.c - see supervisor.h. */
#include "supervisor.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "ipc_frame.h"
#include "log.h"
#include "policy_file.h"
#include "sandbox.h"
#include "sup_env.h"
#include "sup_exec.h"
#include "sup_keys.h"
#include "sup_procs.h"
#include "sup_reload.h"
#include "util.h"

/* The issuer keys, one holder per cluster with a jwt authenticator (config_cluster_index:
 * 0 the local cluster, i + 1 auth.clusters[i]; NULL for a cluster without): a JWKS file
 * read here, or (relay) what the key fetcher child fetched from the issuer. */
typedef struct {
    sup_keys *k[SUP_CLUSTERS];
    int relay[SUP_CLUSTERS]; /* k[i] holds what the key fetcher sends (sup_keys_relay) */
} sup_keyring;

/* Every holder reads or fetches again, each keeping to its own min_refresh: a JWKS file
 * here, an issuer's keys in the key fetcher, which is asked (CTL_KEYS_REFRESH) without
 * waiting: a fetcher that reads nothing never blocks the supervisor, and a request it
 * has not read yet stands for this one. */
static void keys_refresh(sup_keyring *keys)
{
    for (int i = 0; i < SUP_CLUSTERS; i++)
        if (keys->k[i] && !keys->relay[i])
            sup_keys_refresh(keys->k[i]);
    int ctl = sup_procs_ctl(LINK_FETCHER);
    char b = CTL_KEYS_REFRESH;
    if (ctl >= 0 && send(ctl, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1 && errno != EAGAIN)
        LOG_EVENT(LOG_LVL_WARN, "cannot ask the key fetcher for fresh issuer keys",
                  LOG_STR("error", strerror(errno)));
}

/* A message from the key fetcher: a cluster's accepted JWKS (CTL_KEYS_CLUSTER(idx), a
 * sealed memfd), kept unparsed for the children that use it. Anything else, or keys
 * for a cluster whose keys do not come from an issuer, is refused and logged. */
static void read_fetcher(sup_child *from, sup_keyring *keys)
{
    char type = 0;
    int fd = -1, eof = 0;
    hsmca_err e;
    hsmca_code rc = ipc_recv_ctl(from->ctl, &type, &fd, &eof, &e);
    if (eof || (rc != HSMCA_OK && rc != HSMCA_EINVAL)) { /* gone, or the channel broke */
        close(from->ctl);
        from->ctl = -1;
        return;
    }
    int idx = rc == HSMCA_OK ? ctl_keys_cluster(type) : -1;
    if (rc != HSMCA_OK)
        LOG_EVENT(LOG_LVL_WARN, "key fetcher: bad control message", LOG_STR("error", e.msg));
    else if (idx < 0 || idx >= SUP_CLUSTERS || !keys->relay[idx] || fd < 0)
        LOG_EVENT(LOG_LVL_WARN, "key fetcher: a control message it may not send: ignored",
                  LOG_INT("type", type));
    else if (sup_keys_offer_fd(keys->k[idx], fd, &e) != HSMCA_OK)
        LOG_EVENT(LOG_LVL_WARN, "key fetcher's keys refused; the last good keys stay",
                  LOG_STR("error", e.msg));
    if (fd >= 0)
        close(fd);
}

/* Whether c may send the control byte b up (its row's says). */
static int may_say(const sup_child *c, char b)
{
    return b != 0 && memchr(c->proc->says, b, sizeof(c->proc->says)) != NULL;
}

/* A control byte from a child, routed by what its row says it may send: the signer asks
 * for a new front end after the old one broke the protocol, or answers a reload
 * (sup_reload.h); the front end asks for fresh issuer keys. Any other byte is ignored.
 * The end of the channel means the child is gone: it is closed here, so that neither
 * poll nor a key push spins on it until reap() collects the child. */
static void read_ctl(sup_child *from, sup_keyring *keys)
{
    if (from->proc->links & LINK_FETCHER) {
        read_fetcher(from, keys);
        return;
    }
    char b;
    ssize_t r = read(from->ctl, &b, 1);
    if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        close(from->ctl);
        from->ctl = -1;
        return;
    }
    if (r != 1 || !may_say(from, b))
        return;
    sup_child *peer = sup_procs_peer(from);
    if (b == CTL_RESTART_PEER && peer && peer->pid) {
        LOG_EVENT(LOG_LVL_WARN, "a child reports a protocol violation: restarting its peer",
                  LOG_STR("role", from->proc->role), LOG_STR("peer", peer->proc->role));
        kill(peer->pid, SIGKILL);
    } else if (b == CTL_POLICY || b == CTL_RELOAD_FAILED) {
        sup_reload_signer_said(b, sup_procs_ctl(LINK_POLICY));
    } else if (b == CTL_KEYS_REFRESH) {
        keys_refresh(keys); /* it does not say which cluster's token named the kid */
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
            LOG_EVENT(LOG_LVL_WARN, "cannot send the issuer keys to a child",
                      LOG_INT("cluster_index", i), LOG_STR("role", c->proc->role),
                      LOG_STR("error", e.msg));
        else
            c->keys_sent[i] = sent;
    }
}

static void keyring_stop(sup_keyring *r)
{
    for (int i = 0; i < SUP_CLUSTERS; i++)
        sup_keys_stop(r->k[i]);
}

/* A holder per cluster with a jwt authenticator, each on its cluster's view of the
 * config (kept in views, which must outlive them): a relay when its keys come from the
 * issuer (the key fetcher child fetches them), else a JWKS file's reader. The local one
 * always (it is idle without jwt in auth.chain). */
static HSMCA_MUSTCHECK hsmca_code keyring_start(const hsmca_config *cfg, hsmca_config *views,
                                                sup_keyring *r, hsmca_err *e)
{
    memset(r, 0, sizeof(*r));
    for (int i = 0; i <= cfg->n_clusters && i < SUP_CLUSTERS; i++) {
        if (i > 0 && !config_cluster_has_jwt(cfg, i))
            continue;
        config_cluster_view(cfg, i, &views[i]);
        r->relay[i] = sup_keys_from_issuer(cfg, i);
        if (!(r->k[i] = r->relay[i] ? sup_keys_relay(e) : sup_keys_start(&views[i], NULL, e))) {
            keyring_stop(r);
            return e->code;
        }
    }
    return HSMCA_OK;
}

/* The config and the policy file, checked here once rather than in two children in a
 * loop; *config_abs_out is the config's absolute path. 0, or EXIT_CONFIG after saying why. */
static int check_config(const char *config_path, const char *cli_path, hsmca_config *cfg,
                        const char **config_abs_out)
{
    static char config_abs[PATH_MAX];
    if (!realpath(config_path, config_abs)) {
        LOG_EVENT(LOG_LVL_ERROR, "config: cannot resolve the path", LOG_STR("path", config_path),
                  LOG_STR("error", strerror(errno)));
        return EXIT_CONFIG;
    }
    *config_abs_out = config_abs;
    hsmca_err e;
    if (config_load(config_abs, cfg, &e) != HSMCA_OK || config_validate(cfg, &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "config refused", LOG_STR("error", e.msg));
        return EXIT_CONFIG;
    }
    /* Each child then loads the policy file for itself. */
    policy_set *pf = NULL;
    if (cfg->policy_file[0] && policy_file_load(cfg->policy_file, &pf, &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "policy file refused", LOG_STR("error", e.msg));
        return EXIT_CONFIG;
    }
    policy_set_free(pf);
    /* An unknown group stops the start here rather than a signer restarted in a loop. */
    for (int i = 0; i < cfg->signer_groups.n; i++) {
        gid_t gid;
        if (sandbox_group_lookup("signer.groups", cfg->signer_groups.items[i], &gid, &e) !=
            HSMCA_OK) {
            LOG_EVENT(LOG_LVL_ERROR, "signer.groups refused", LOG_STR("error", e.msg));
            return EXIT_CONFIG;
        }
    }
    if (cfg->signer_groups.n && geteuid() != 0)
        log_event(LOG_LVL_WARN,
                  "signer.groups is not used: not started as root, the signer keeps our groups",
                  NULL, 0);
    /* At every start, as the signer does: the operator chose it, and must keep hearing it. */
    if (cfg->audit_disabled)
        log_event(LOG_LVL_WARN,
                  "the audit log is off (audit.disabled: true): certificates are signed without "
                  "a durable record",
                  NULL, 0);
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
    LOG_EVENT(LOG_LVL_INFO, "stopping on signal", LOG_UINT("signal", si.ssi_signo));
    return SIG_STOP;
}

/* SIGHUP: the issuer keys read (a JWKS file) or fetched (an issuer) again, then the
 * policy file (sup_reload.h), and the children that take SIGHUP (LINK_SIGHUP) sent it.
 * No child restarts: a signer whose token refused the PIN restarts by itself once the
 * PIN file changes. */
static void on_sighup(sup_keyring *keys)
{
    log_event(LOG_LVL_INFO, "SIGHUP: reloading the issuer keys and the policy file", NULL, 0);
    keys_refresh(keys);
    sup_reload_begin(sup_procs_ctl(LINK_POLICY_FIRST), sup_procs_ctl(LINK_POLICY));
    for (int i = 0; i < sup_procs_count(); i++) {
        const sup_child *c = sup_procs_kid(i);
        if ((c->proc->links & LINK_SIGHUP) && c->pid)
            kill(c->pid, SIGHUP);
    }
}

/* Runs the children until a signal stops us (0) or one of them cannot start for good
 * (EXIT_CONFIG); stops them either way. */
static int run_children(int sfd, sup_keyring *keys)
{
    int rc, n = sup_procs_count();
    sup_procs_start_due();
    for (;;) {
        struct pollfd pfd[1 + SUP_PROCS_MAX] = {{sfd, POLLIN, 0}};
        for (int i = 0; i < n; i++)
            pfd[1 + i] = (struct pollfd){sup_procs_kid(i)->ctl, POLLIN, 0};
        if (poll(pfd, (nfds_t)(1 + n), 100) < 0 && errno != EINTR)
            fatal("poll: %s", strerror(errno));
        int sig = pfd[0].revents ? read_signal(sfd) : 0;
        if (sig == SIG_STOP) {
            rc = 0;
            break;
        }
        if (sig == SIG_RELOAD)
            on_sighup(keys);
        for (int i = 0; i < n; i++)
            if (pfd[1 + i].fd >= 0 && (pfd[1 + i].revents & (POLLIN | POLLHUP | POLLERR)))
                read_ctl(sup_procs_kid(i), keys);
        /* EXIT_CONFIG again, so a service manager does not start us over and try the
         * wrong PIN once more (systemd: RestartPreventExitStatus=78). */
        if (sup_procs_reap() != 0) {
            rc = EXIT_CONFIG;
            break;
        }
        sup_procs_start_due();
        for (int i = 0; i < n; i++) /* in the table's order: LINK_KEYS says why */
            if (sup_procs_kid(i)->proc->links & LINK_KEYS)
                push_keys(sup_procs_kid(i), keys);
        sup_reload_tick(sup_procs_ctl(LINK_POLICY_FIRST), sup_procs_ctl(LINK_POLICY));
    }
    sup_procs_stop();
    keyring_stop(keys);
    return rc;
}

int supervisor_run(const char *config_path, const char *cli_path)
{
    hsmca_config cfg;
    const char *config_abs = NULL;
    int rc = check_config(config_path, cli_path, &cfg, &config_abs);
    if (rc != 0)
        return rc;
    int sfd = signals_fd();
    sup_reload_init(cfg.policy_file);
    /* The issuer's keys: loaded (a file) or fetched (an issuer) here, never by a child. */
    static hsmca_config keys_cfg[SUP_CLUSTERS];
    static sup_keyring ring;
    hsmca_err e;
    if (keyring_start(&cfg, keys_cfg, &ring, &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "cannot start the issuer keys", LOG_STR("error", e.msg));
        return EXIT_CONFIG;
    }
    if (sup_procs_prepare(&cfg, cli_path, config_abs, &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "cannot prepare the children", LOG_STR("error", e.msg));
        keyring_stop(&ring);
        sup_procs_free();
        return EXIT_CONFIG;
    }
    sup_env_log_signer(&cfg);
    rc = run_children(sfd, &ring);
    sup_procs_free();
    return rc;
}

/* k8s_publish.c - hsmca-publish, `hsmca k8s publish-roots` (k8s_publish.h): the command
 * and its loop.
 *
 * A round every lease_duration/3 (at most publish.interval): the Lease is taken or
 * renewed first; its holder then reads ca.root_bundle and crl.path again and, when
 * either changed, when it has just taken the Lease, or publish.interval after the last
 * full pass, writes every object that differs (a new namespace is served at the next
 * full pass). A replica that does not hold the Lease only watches it. SIGTERM and
 * SIGINT stop it after the round in progress, the Lease released; SIGHUP asks for a
 * full pass now. */
#include "k8s_publish.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "cli_opts.h"
#include "config.h"
#include "log.h"

typedef struct {
    const char *config, *kubeconfig, *identity;
    int once, incluster;
    uint32_t interval; /* 0: publish.interval */
} kp_args;

typedef struct {
    hsmca_config *cfg;
    k8s_client *api;
    k8s_lease lease;
    char *roots_done; /* the roots (and CRL) of the last full pass that succeeded */
    char *crl_done;
    double next_full;
} kp_state;

static const char usage_text[] =
    "usage: hsmca k8s publish-roots --config FILE [--kubeconfig FILE | --in-cluster]\n"
    "                               [--once] [--interval SECONDS] [--identity NAME]\n"
    "\n"
    "Keeps the CA's roots (ca.root_bundle) where Istio reads them: the ConfigMap\n"
    "istio-ca-root-cert (key root-cert.pem) in every namespace publish.namespace_selector\n"
    "matches (all by default; namespaces being deleted are skipped), with\n"
    "publish.cluster_trust_bundle the ClusterTrustBundle istio.io:istiod-ca:root-cert\n"
    "(certificates.k8s.io/v1beta1, signerName istio.io/istiod-ca), and once crl.path\n"
    "exists the ConfigMap istio-ca-crl (key ca-crl.pem). Rewrites them when the files\n"
    "change. Only the holder of the Lease publish.lease_namespace/publish.lease_name\n"
    "writes: run as many replicas as you like. docs/KUBERNETES.md.\n"
    "\n"
    "  --kubeconfig FILE  the API server and credentials (default publish.kubeconfig,\n"
    "                     else the pod's service account)\n"
    "  --in-cluster       the pod's service account even when publish.kubeconfig is set\n"
    "  --once             one round, then exit (writes only if it gets the Lease)\n"
    "  --interval S       seconds between full passes (default publish.interval)\n"
    "  --identity NAME    the Lease holderIdentity (default $POD_NAME, else the hostname)\n"
    "\n"
    "Exit status: 0 stopped by a signal or --once done, 1 a --once round failed,\n"
    "2 usage, 78 the config or the API server's settings do not load.";

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int differs(const char *a, const char *b)
{
    return !a != !b || (a && strcmp(a, b) != 0);
}

static int replace(char **slot, const char *v)
{
    char *n = v ? strdup(v) : NULL;
    if (v && !n)
        return -1;
    free(*slot);
    *slot = n;
    return 0;
}

/* 1 when this replica may write now: a pass over many namespaces renews the Lease on
 * the way, as a round would. */
static int still_held(kp_state *st)
{
    double now = mono_now();
    if (now - st->lease.renewed_at >= (double)st->lease.duration / 3.0)
        k8s_lease_step(st->api, &st->lease, now);
    return k8s_lease_valid(&st->lease, mono_now());
}

/* Every object, for these roots and CRL. Stops at the first failure, and before any
 * write once the Lease may have passed to another replica. */
static HSMCA_MUSTCHECK hsmca_code publish_all(kp_state *st, const kp_roots *r, const char *crl,
                                              int *writes, hsmca_err *e)
{
    char **names = NULL;
    HSMCA_GUARD(kp_namespaces(st->api, st->cfg->publish_ns_selector, &names, e));
    hsmca_code rc = HSMCA_OK;
    int w = 0;
    for (size_t i = 0; rc == HSMCA_OK && names[i]; i++) {
        if (!still_held(st))
            rc = hsmca_fail(e, HSMCA_EUNAVAIL, "the Lease is no longer held: writes stopped");
        if (rc == HSMCA_OK)
            rc = kp_put_configmap(st->api, names[i], KP_ROOT_CM, KP_ROOT_KEY, r->pem, &w, e);
        *writes += rc == HSMCA_OK ? w : 0;
        if (rc == HSMCA_OK && crl)
            rc = kp_put_configmap(st->api, names[i], KP_CRL_CM, KP_CRL_KEY, crl, &w, e);
        *writes += rc == HSMCA_OK && crl ? w : 0;
    }
    kp_names_free(names);
    if (rc == HSMCA_OK && st->cfg->publish_ctb && !r->ctb_problem[0]) {
        if (!still_held(st))
            return hsmca_fail(e, HSMCA_EUNAVAIL, "the Lease is no longer held: writes stopped");
        rc = kp_put_ctb(st->api, r, &w, e);
        *writes += rc == HSMCA_OK ? w : 0;
    }
    return rc;
}

/* One round. HSMCA_OK when nothing was due or everything due was written; a
 * ClusterTrustBundle refused for its roots fails the round once, and is not retried
 * until the roots change or publish.interval has passed. */
static hsmca_code round_once(kp_state *st, int force, hsmca_err *e)
{
    double now = mono_now();
    int had = st->lease.held;
    if (!k8s_lease_step(st->api, &st->lease, now))
        return HSMCA_OK;
    kp_roots r;
    char *crl = NULL;
    HSMCA_GUARD(kp_roots_load(st->cfg->root_bundle, &r, e));
    hsmca_code rc = kp_crl_load(st->cfg->crl_path, &crl, e);
    int due = force || !had || now >= st->next_full || differs(r.pem, st->roots_done) ||
              differs(crl, st->crl_done);
    int writes = 0;
    if (rc == HSMCA_OK && due) {
        rc = publish_all(st, &r, crl, &writes, e);
        if (rc == HSMCA_OK && (replace(&st->roots_done, r.pem) || replace(&st->crl_done, crl)))
            rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        if (rc == HSMCA_OK) {
            st->next_full = now + st->cfg->publish_interval;
            char n[16];
            snprintf(n, sizeof(n), "%d", writes);
            LOG_EVENT(LOG_LVL_INFO, "publish pass done", LOG_STR("writes", n),
                      LOG_STR("crl", crl ? "published" : "none yet"));
        }
        /* A failed pass is made again at the next round. A ClusterTrustBundle refused
         * for its roots is said once per pass, not at every round: the next pass comes
         * with changed roots or after publish.interval. */
        if (rc != HSMCA_OK)
            replace(&st->roots_done, NULL);
        else if (st->cfg->publish_ctb && r.ctb_problem[0])
            rc = kp_put_ctb(st->api, &r, &writes, e);
    }
    kp_roots_clear(&r);
    free(crl);
    return rc;
}

static int parse_args(int argc, char **argv, kp_args *a)
{
    static const struct option flags[] = {
        {"config", required_argument, 0, 'c'},   {"kubeconfig", required_argument, 0, 'k'},
        {"in-cluster", no_argument, 0, 'i'},     {"once", no_argument, 0, 'o'},
        {"interval", required_argument, 0, 'n'}, {"identity", required_argument, 0, 'I'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    cli_opts o;
    cli_opts_init(&o, "hsmca k8s publish-roots", flags, NULL, 0);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(usage_text); return 0;
        case 'c': a->config = optarg; break;
        case 'k': a->kubeconfig = optarg; break;
        case 'i': a->incluster = 1; break;
        case 'o': a->once = 1; break;
        case 'I': a->identity = optarg; break;
        case 'n':
            if (config_parse_u32(optarg, strlen(optarg), 1, &a->interval)) {
                fprintf(stderr, "hsmca k8s publish-roots: --interval %s: not a duration\n", optarg);
                return 2;
            }
            break;
        default: return 2;
        }
    }
    if (!a->config || (a->kubeconfig && a->incluster)) {
        fputs("hsmca k8s publish-roots: --config FILE is required; --kubeconfig and "
              "--in-cluster exclude each other\n",
              stderr);
        return 2;
    }
    return -1;
}

/* The config, the API server and the Lease's identity. 0, else the exit status. */
static int setup(const kp_args *a, kp_state *st, k8s_target *t)
{
    hsmca_err e;
    if (config_load(a->config, st->cfg, &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "hsmca k8s publish-roots: cannot start", LOG_STR("error", e.msg));
        return EXIT_CONFIG;
    }
    hsmca_config *c = st->cfg;
    if (a->interval)
        c->publish_interval = a->interval;
    size_t nl = strlen(c->publish_lease_namespace), ll = strlen(c->publish_lease_name);
    if (c->publish_lease_duration < 2 || nl < 1 || nl > 63 || ll < 1 || ll > 253 ||
        strpbrk(c->publish_lease_namespace, "/?#%") || strpbrk(c->publish_lease_name, "/?#%")) {
        log_event(LOG_LVL_ERROR,
                  "hsmca k8s publish-roots: publish.lease_duration must be at least 2s, "
                  "publish.lease_namespace (1-63 bytes) and publish.lease_name (1-253 bytes) "
                  "Kubernetes names",
                  NULL, 0);
        return EXIT_CONFIG;
    }
    kp_roots r;
    if (kp_roots_load(c->root_bundle, &r, &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "hsmca k8s publish-roots: cannot start", LOG_STR("error", e.msg));
        return EXIT_CONFIG;
    }
    if (r.ctb_problem[0] && c->publish_ctb)
        LOG_EVENT(LOG_LVL_WARN, "ca.root_bundle: the ClusterTrustBundle will not be written",
                  LOG_STR("reason", r.ctb_problem));
    kp_roots_clear(&r);
    const char *kc = a->incluster ? NULL : a->kubeconfig ? a->kubeconfig : c->publish_kubeconfig;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    if (!(kc && kc[0]) && !(host && host[0])) {
        log_event(LOG_LVL_ERROR,
                  "hsmca k8s publish-roots: not in a pod (KUBERNETES_SERVICE_HOST unset): "
                  "set publish.kubeconfig or --kubeconfig",
                  NULL, 0);
        return EXIT_CONFIG;
    }
    hsmca_code rc = kc && kc[0] ? kubeconfig_load(kc, t, &e) : k8s_incluster(NULL, t, &e);
    if (rc == HSMCA_OK)
        rc = k8s_client_new(t, c->publish_timeout, "publish-roots", &st->api, &e);
    if (rc != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR,
                  "hsmca k8s publish-roots: no API server client (publish.kubeconfig, "
                  "--kubeconfig)",
                  LOG_STR("error", e.msg));
        return EXIT_CONFIG;
    }
    k8s_lease *l = &st->lease;
    snprintf(l->ns, sizeof(l->ns), "%.63s", c->publish_lease_namespace);
    snprintf(l->name, sizeof(l->name), "%.253s", c->publish_lease_name);
    l->duration = c->publish_lease_duration;
    const char *id = a->identity ? a->identity : getenv("POD_NAME");
    if (id && id[0])
        snprintf(l->identity, sizeof(l->identity), "%s", id);
    else if (gethostname(l->identity, sizeof(l->identity) - 1) != 0 || !l->identity[0])
        snprintf(l->identity, sizeof(l->identity), "hsmca-%ld", (long)getpid());
    return 0;
}

/* The rounds until SIGTERM or SIGINT (blocked, taken by sigtimedwait as the pause). */
static int loop(kp_state *st, int once)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    uint32_t period = st->lease.duration / 3;
    if (period < 1)
        period = 1;
    if (period > st->cfg->publish_interval)
        period = st->cfg->publish_interval;
    int force = 0, status = 0;
    for (;;) {
        hsmca_err e;
        hsmca_code rc = round_once(st, force, &e);
        force = 0;
        if (rc != HSMCA_OK)
            LOG_EVENT(LOG_LVL_ERROR, "publish-roots: round failed", LOG_STR("error", e.msg));
        if (once) {
            if (rc == HSMCA_OK && !st->lease.held)
                LOG_EVENT(LOG_LVL_INFO,
                          "publish-roots: another replica holds the Lease: nothing written",
                          LOG_STR("namespace", st->lease.ns), LOG_STR("lease", st->lease.name));
            status = rc == HSMCA_OK ? 0 : 1;
            break;
        }
        struct timespec ts = {(time_t)period, 0};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGHUP)
            force = 1;
        else if (sig == SIGTERM || sig == SIGINT)
            break;
    }
    k8s_lease_release(st->api, &st->lease);
    return status;
}

int kp_main(int argc, char **argv)
{
    kp_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    log_init("publish-roots");
    /* It holds the API server's credentials: no process of its user (the front end's
     * when serve runs it as frontend.user) may read its memory or attach to it. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        log_event(LOG_LVL_WARN, "publish-roots: cannot make this process non-dumpable", NULL, 0);
    hsmca_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg) {
        log_event(LOG_LVL_ERROR, "out of memory", NULL, 0);
        return 1;
    }
    kp_state st = {.cfg = cfg};
    k8s_target t = {0};
    rc = setup(&a, &st, &t);
    if (!rc) {
        LOG_EVENT(LOG_LVL_INFO, "publish-roots started", LOG_STR("server", t.server),
                  LOG_STR("identity", st.lease.identity), LOG_STR("lease", st.lease.name),
                  LOG_STR("selector", cfg->publish_ns_selector));
        rc = loop(&st, a.once);
    }
    k8s_client_free(st.api);
    k8s_target_clear(&t);
    free(st.roots_done);
    free(st.crl_done);
    free(cfg);
    return rc;
}

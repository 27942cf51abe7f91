/* fe_main.c - the front end process: load what it needs, confine itself, get a
 * serving certificate from the signer, then serve gRPC.
 *
 * Order matters: everything read from disk is read before the chroot; the
 * listening socket is bound before the seccomp filter (which forbids socket(2)),
 * and the filter is installed on every thread (TSYNC) before the server accepts
 * its first connection, so no outside input is ever handled unconfined. */
#include "frontend.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "certasm.h"
#include "child_args.h"
#include "config.h"
#include "fe_app.h"
#include "fe_grpcrt.h"
#include "fe_reload.h"
#include "fe_metrics.h"
#include "fe_metrics_link.h"
#include "fe_sandbox.h"
#include "fe_server.h"
#include "fe_serving.h"
#include "fe_tlsmem.h"
#include "log.h"
#include "thread_start.h"
#include "util.h"

static volatile int fe_stop;

static void usage(FILE *f)
{
    fputs("usage: hsmca-frontend --config FILE --ipc-fd N --ctl-fd M\n"
          "\n"
          "The unprivileged front end. Started by `hsmca serve` / `hsmca dev`, not by\n"
          "hand: it serves istio.v1.auth.IstioCertificateService over TLS, checks\n"
          "callers and CSRs, and asks the signer (fd N) to sign. It never loads the\n"
          "PKCS#11 module and never sees the PIN.\n",
          f);
}

/* Each element of cert_chain ends in "\n" (Istio's agent splits on it). */
static char *read_pem_element(const char *path, hsmca_err *e)
{
    char *pem = NULL;
    size_t len;
    if (util_read_file(path, 1 << 20, &pem, &len, e) != HSMCA_OK)
        return NULL;
    if (len == 0 || pem[len - 1] != '\n') {
        char *p = realloc(pem, len + 2);
        if (!p) {
            free(pem);
            return NULL;
        }
        pem = p;
        pem[len] = '\n';
        pem[len + 1] = '\0';
    }
    return pem;
}

/* Whether cert_chain must carry ca_cert itself: it is not self-issued, and the chain
 * file (path, may be empty) does not begin with it. */
static bool ca_cert_needs_sending(X509 *ca_cert, const char *chain_path)
{
    if (!X509_NAME_cmp(X509_get_subject_name(ca_cert), X509_get_issuer_name(ca_cert)))
        return false;
    if (!chain_path[0])
        return true;
    FILE *f = fopen(chain_path, "r");
    X509 *first = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    ERR_clear_error();
    bool needs = !first || X509_cmp(first, ca_cert) != 0;
    X509_free(first);
    return needs;
}

/* The Kubernetes API server's address, CA and hsmca's own credentials are read
 * now, before the chroot: a projected in-cluster token is therefore not
 * re-read when kubelet rotates it (the API server accepts it for a year with
 * its default --service-account-extend-token-expiration; restart to refresh). */
static HSMCA_MUSTCHECK hsmca_code load_tokenreview(fe_app *app, const hsmca_config *all, int cl,
                                                   hsmca_err *e)
{
    if (!config_cluster_has_tokenreview(all, cl))
        return HSMCA_OK;
    static hsmca_config views[IPC_KEYSETS]; /* the options point into them */
    hsmca_config *cfg = &views[cl];
    config_cluster_view(all, cl, cfg);
    const char *auds[CONFIG_MAX_LIST];
    for (int i = 0; i < cfg->tr_audiences.n; i++)
        auds[i] = cfg->tr_audiences.items[i];
    fe_tokenreview_options o = {.kubeconfig = cfg->tr_kubeconfig,
                                .audiences = auds,
                                .n_audiences = cfg->tr_audiences.n,
                                .timeout_ms = cfg->tr_timeout * 1000u,
                                .cache_ttl = cfg->tr_cache_ttl,
                                .cache_entries = cfg->tr_cache_entries};
    HSMCA_GUARD(fe_tokenreview_new(&o, &app->tokenreview[cl], e));
    LOG_EVENT(LOG_LVL_INFO, "tokenreview: on", LOG_STR("cluster", config_cluster_name(all, cl)),
              LOG_STR("server", cfg->tr_kubeconfig[0] ? "kubeconfig" : "in-cluster"),
              LOG_UINT("timeout_s", cfg->tr_timeout),
              LOG_UINT("max_concurrent", cfg->tr_max_concurrent),
              LOG_UINT("cache_entries", cfg->tr_cache_entries),
              LOG_UINT("cache_ttl_s", cfg->tr_cache_ttl));
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code load_app(fe_app *app, const hsmca_config *cfg, hsmca_err *e)
{
    memset(app, 0, sizeof(*app));
    app->cfg = cfg;
    /* The issuer's keys come from the supervisor (tok_keys.h), never from a file or
     * the network here: the holder starts empty and fills with the first push. */
    for (int cl = 0; cl <= cfg->n_clusters && cl < IPC_KEYSETS; cl++)
        if ((cl == 0 || config_cluster_has_jwt(cfg, cl)) && !(app->keys[cl] = tok_keys_new()))
            return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    for (int i = 0; i < cfg->auth_chain.n; i++) {
        const fe_authenticator *a = fe_auth_find(cfg->auth_chain.items[i]);
        if (!a)
            return hsmca_fail(e, HSMCA_EINVAL, "config: auth.chain: unknown authenticator '%.64s'",
                              cfg->auth_chain.items[i]);
        app->chain[app->n_chain++] = a;
    }
    for (int cl = 0; cl <= cfg->n_clusters && cl < IPC_KEYSETS; cl++)
        HSMCA_GUARD(load_tokenreview(app, cfg, cl, e));
    for (int i = 0; i < cfg->jwt_audiences.n; i++)
        app->audiences[i] = cfg->jwt_audiences.items[i];
    /* One issuer per cluster; the audiences and skew are auth.jwt's for all. */
    for (int cl = 0; cl <= cfg->n_clusters && cl < IPC_KEYSETS; cl++)
        app->jwt_rules[cl] =
            (tok_jwt_rules){cl ? cfg->clusters[cl - 1].jwt_issuer : cfg->jwt_issuer, app->audiences,
                            cfg->jwt_audiences.n, cfg->jwt_skew};
    app->policy = (policy_rules){cfg->trust_domain, cfg->default_ttl, cfg->max_ttl};
    /* The signer loads the same file itself: it never takes our word for it. */
    policy_set *pf = NULL;
    if (cfg->policy_file[0]) {
        if (policy_file_load(cfg->policy_file, &pf, e) != HSMCA_OK)
            return e->code;
        char hex[65];
        util_hex(policy_set_sha256(pf), 32, hex);
        LOG_EVENT(LOG_LVL_INFO, "policy file loaded", LOG_STR("path", cfg->policy_file),
                  LOG_STR("sha256", hex));
    }
    if (!(app->policies = policy_live_new(pf))) /* SIGHUP replaces it (fe_reload.h) */
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    fe_reload_loaded();
    if (!(app->ca_cert = certasm_load_pem(cfg->ca_cert, e)))
        return e->code;
    app->sig_nid = certasm_sig_nid_for_key(X509_get0_pubkey(app->ca_cert));
    /* cert_chain = [leaf, intermediates..., root bundle]: our CA first when it is not
     * itself a root and the chain file does not start with it (`ca import --chain`
     * writes only the certificates above it: clients could not build the path), then
     * the chain file. For a root CA the chain file is empty and the root bundle
     * follows the leaf directly. */
    if (ca_cert_needs_sending(app->ca_cert, cfg->chain)) {
        if (!(app->chain_tail[app->n_chain_tail++] = read_pem_element(cfg->ca_cert, e)))
            return e->code;
    }
    const char *chain_pem = NULL;
    if (cfg->chain[0]) {
        if (!(app->chain_tail[app->n_chain_tail++] = read_pem_element(cfg->chain, e)))
            return e->code;
        chain_pem = app->chain_tail[app->n_chain_tail - 1];
    }
    if (!(app->chain_tail[app->n_chain_tail++] = read_pem_element(cfg->root_bundle, e)))
        return e->code;
    /* Renewals by client certificate verify to the same roots through our CA. */
    return fe_clientcert_new(app->ca_cert, chain_pem, app->chain_tail[app->n_chain_tail - 1],
                             cfg->trust_domain, &app->clientcert, e);
}

/* A key push from the supervisor (IPC thread): parsed here again, since what the
 * supervisor accepted is only its word. A bad push keeps the current keys. */
static void on_keys(void *arg, int cluster, int memfd)
{
    fe_app *app = arg;
    hsmca_err e;
    if (cluster < 0 || cluster >= IPC_KEYSETS || !app->keys[cluster])
        LOG_EVENT(LOG_LVL_WARN,
                  "issuer keys from the supervisor for a cluster with no jwt authenticator: "
                  "ignored",
                  LOG_INT("cluster_index", cluster));
    else if (tok_keys_load_fd(app->keys[cluster], memfd, &e) != HSMCA_OK)
        LOG_EVENT(LOG_LVL_WARN, "issuer keys from the supervisor refused, keeping the current ones",
                  LOG_STR("error", e.msg));
    else {
        fe_metrics_keys_loaded(cluster);
        LOG_EVENT(LOG_LVL_INFO, "issuer keys loaded",
                  LOG_UINT("generation", tok_keys_generation(app->keys[cluster])),
                  LOG_STR("cluster", config_cluster_name(app->cfg, cluster)));
    }
}

static void *signal_thread(void *arg)
{
    sigset_t *set = arg;
    int sig;
    sigwait(set, &sig);
    LOG_EVENT(LOG_LVL_INFO, "stopping on signal", LOG_INT("signal", sig));
    fe_stop = 1;
    return NULL;
}

int frontend_main(int argc, char **argv)
{
    child_args args;
    log_init("frontend");
    int rc = child_args_parse(argc, argv, usage, &args);
    if (rc >= 0)
        return rc;

    static hsmca_config cfg;
    static fe_app app;
    hsmca_err e;
    if (config_load(args.config, &cfg, &e) != HSMCA_OK || config_validate(&cfg, &e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    if (load_app(&app, &cfg, &e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    /* Drop root before any thread exists and before talking to anyone. */
    int was_root = geteuid() == 0;
    if (fe_sandbox_drop_privileges(cfg.fe_user, cfg.fe_chroot, &e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    /* The metrics process may run as our user (metrics.user): it must not ptrace us. The
     * credential change did this unless fs.suid_dumpable is 1; said once more here. */
    if (was_root && prctl(PR_SET_DUMPABLE, 0) != 0)
        fatal_config("prctl(PR_SET_DUMPABLE): %s", strerror(errno));
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    pthread_t sig_th;
    thread_start(&sig_th, signal_thread, &set, "signal thread");
    if (!(app.ipc = fe_ipc_start(args.ipc_fd, args.ctl_fd, &fe_stop, &e)))
        fatal("%s", e.msg);
    fe_ipc_on_keys(app.ipc, on_keys, &app);
    if (!(app.sigstat = fe_sigstat_start(app.ipc)))
        log_event(LOG_LVL_WARN, "the signer's figures are not polled: out of memory", NULL, 0);
    fe_ipc_on_ctl(app.ipc, fe_reload_on_ctl, &app);
    /* Before the serving certificate: /healthz and /readyz answer while we wait for it. */
    fe_metrics_init(&app);
    if (fe_metrics_link_start(args.metrics_fd, &app, &e) != HSMCA_OK)
        fatal("%s", e.msg);
    fe_serving *serving = fe_serving_start(&app, &fe_stop);
    if (!serving) {
        log_event(LOG_LVL_INFO, "stopped while waiting for a serving certificate", NULL, 0);
        return 0;
    }

    if (fe_tlsmem_init() != 0) /* before the sandbox: dlsym */
        fatal("cannot find libssl's SSL_new");
    if (!fe_grpcrt_init())
        log_event(LOG_LVL_INFO,
                  "abseil's mutex deadlock detection not found (a release build has none)", NULL,
                  0);
    grpc_init();
    fe_listener *listener = fe_server_listen(&app, fe_serving_credentials(serving));
    if (!listener)
        fatal_config("cannot serve on %s", cfg.listen);
    if (fe_sandbox_seccomp(app.tokenreview[0] != NULL, &e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    fe_serving_start_renewal(serving);
    rc = fe_server_serve(listener, &fe_stop);
    grpc_shutdown();
    return rc;
}

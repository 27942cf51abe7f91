/* fe_main.c - the front end process: load what it needs, confine itself, get a
 * serving certificate from the signer, then serve gRPC.
 *
 * Order matters: everything read from disk is read before the chroot; the
 * listening socket is bound before the seccomp filter (which forbids socket(2)),
 * and the filter is installed on every thread (TSYNC) before the server accepts
 * its first connection, so no outside input is ever handled unconfined. */
#include "frontend.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/grpc.h>

#include "certasm.h"
#include "child_args.h"
#include "config.h"
#include "fe_app.h"
#include "fe_sandbox.h"
#include "fe_serving.h"
#include "log.h"
#include "util.h"

static volatile int fe_stop;

static void usage(FILE *f)
{
    fputs("usage: hsmca frontend --config FILE --ipc-fd N --ctl-fd M\n"
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

static HSMCA_MUSTCHECK hsmca_code load_app(fe_app *app, const hsmca_config *cfg, hsmca_err *e)
{
    memset(app, 0, sizeof(*app));
    app->cfg = cfg;
    char *jwks = NULL;
    size_t len;
    hsmca_code rc = util_read_file(cfg->jwks_file, FE_JWKS_MAX_LEN, &jwks, &len, e);
    if (rc != HSMCA_OK)
        return rc;
    rc = fe_jwks_parse(jwks, len, &app->jwks, e);
    free(jwks);
    if (rc != HSMCA_OK)
        return rc;
    for (int i = 0; i < cfg->jwt_audiences.n; i++)
        app->audiences[i] = cfg->jwt_audiences.items[i];
    app->jwt_rules =
        (fe_jwt_rules){cfg->jwt_issuer, app->audiences, cfg->jwt_audiences.n, cfg->jwt_skew};
    /* A proxy sends the same token until it rotates it: verify it once. */
    HSMCA_GUARD(fe_jwt_cache_new(FE_JWT_CACHE_ENTRIES, FE_JWT_CACHE_CAP, &app->jwt_cache, e));
    app->policy = (policy_rules){cfg->trust_domain, cfg->default_ttl, cfg->max_ttl};
    /* The signer loads the same file itself: it never takes our word for it. */
    if (cfg->policy_file[0]) {
        if (policy_file_load(cfg->policy_file, &app->policy_file, e) != HSMCA_OK)
            return e->code;
        char hex[65];
        util_hex(policy_set_sha256(app->policy_file), 32, hex);
        LOG_EVENT(LOG_LVL_INFO, "policy file loaded", LOG_STR("path", cfg->policy_file),
                  LOG_STR("sha256", hex));
    }
    if (!(app->ca_cert = certasm_load_pem(cfg->ca_cert, e)))
        return e->code;
    app->sig_nid = certasm_sig_nid_for_key(X509_get0_pubkey(app->ca_cert));
    /* cert_chain = [leaf, intermediates..., root bundle]. For a root CA the chain
     * file is empty and the root bundle follows the leaf directly. */
    if (cfg->chain[0]) {
        if (!(app->chain_tail[app->n_chain_tail++] = read_pem_element(cfg->chain, e)))
            return e->code;
    }
    if (!(app->chain_tail[app->n_chain_tail++] = read_pem_element(cfg->root_bundle, e)))
        return e->code;
    /* Renewals by client certificate verify to the same roots through our CA. */
    return fe_clientcert_new(app->ca_cert, cfg->chain[0] ? app->chain_tail[0] : NULL,
                             app->chain_tail[app->n_chain_tail - 1], cfg->trust_domain,
                             &app->clientcert, e);
}

static void *signal_thread(void *arg)
{
    sigset_t *set = arg;
    int sig;
    sigwait(set, &sig);
    log_info("signal %d: stopping", sig);
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
    if (fe_sandbox_drop_privileges(cfg.fe_user, cfg.fe_chroot, &e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    pthread_t sig_th;
    pthread_create(&sig_th, NULL, signal_thread, &set);
    if (!(app.ipc = fe_ipc_start(args.ipc_fd, args.ctl_fd, &fe_stop, &e)))
        fatal("%s", e.msg);
    fe_serving *serving = fe_serving_start(&app, &fe_stop);
    if (!serving) {
        log_info("stopped while waiting for a serving certificate");
        return 0;
    }

    grpc_init();
    fe_listener *listener = fe_server_listen(&app, fe_serving_credentials(serving));
    if (!listener)
        fatal_config("cannot serve on %s", cfg.listen);
    if (fe_sandbox_seccomp(&e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    fe_serving_start_renewal(serving);
    rc = fe_server_serve(listener, &fe_stop);
    grpc_shutdown();
    return rc;
}

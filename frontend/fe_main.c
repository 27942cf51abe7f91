/* fe_main.c - the front end process: load what it needs, confine itself, get a
 * serving certificate from the signer, then serve gRPC.
 *
 * Order matters: everything read from disk is read before the chroot; the
 * listening socket is bound before the seccomp filter (which forbids socket(2)),
 * and the filter is installed on every thread (TSYNC) before the server accepts
 * its first connection, so no outside input is ever handled unconfined. */
#include "frontend.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "certasm.h"
#include "config.h"
#include "fe_app.h"
#include "fe_sandbox.h"
#include "fe_tbs.h"
#include "log.h"
#include "signer_tbs.h"
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

static X509 *read_cert(const char *path, hsmca_err *e)
{
    char *pem = NULL;
    size_t len;
    if (util_read_file(path, 1 << 20, &pem, &len, e) != HSMCA_OK)
        return NULL;
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    free(pem);
    if (!x)
        hsmca_fail(e, HSMCA_EINVAL, "%s does not hold a PEM certificate", path);
    return x;
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

static hsmca_code load_app(fe_app *app, const hsmca_config *cfg, hsmca_err *e)
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
    app->jwt_rules = (fe_jwt_rules){cfg->jwt_issuer, app->audiences, cfg->jwt_audiences.n,
                                    cfg->jwt_skew};
    app->policy = (policy_rules){cfg->trust_domain, cfg->default_ttl, cfg->max_ttl};
    if (!(app->ca_cert = read_cert(cfg->ca_cert, e)))
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
    return HSMCA_OK;
}

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int finished;
    hsmca_code code;
    char reason[256];
    uint8_t *cert;
    size_t cert_len;
} sync_reply;

static void on_serving_cert(void *arg, hsmca_code code, const char *reason, const uint8_t *cert,
                            size_t cert_len)
{
    sync_reply *r = arg;
    pthread_mutex_lock(&r->lock);
    r->code = code;
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
    if (cert && (r->cert = malloc(cert_len))) {
        memcpy(r->cert, cert, cert_len);
        r->cert_len = cert_len;
    }
    r->finished = 1;
    pthread_cond_signal(&r->done);
    pthread_mutex_unlock(&r->lock);
}

/* One request for the serving certificate; HSMCA_EUNAVAIL means try again. */
static hsmca_code request_serving_cert(fe_app *app, EVP_PKEY *key, sync_reply *r, hsmca_err *e)
{
    const hsmca_config *cfg = app->cfg;
    const char *dns[CONFIG_MAX_LIST + 1], *ips[CONFIG_MAX_LIST + 2];
    int n_dns = 0, n_ips = 0;
    dns[n_dns++] = "localhost";
    for (int i = 0; i < cfg->dns_names.n; i++)
        dns[n_dns++] = cfg->dns_names.items[i];
    ips[n_ips++] = "127.0.0.1";
    for (int i = 0; i < cfg->ip_addresses.n; i++)
        ips[n_ips++] = cfg->ip_addresses.items[i];
    fe_tbs_params p = {.ca_cert = app->ca_cert, .sig_nid = app->sig_nid, .subject_key = key,
                       .dns = dns, .n_dns = n_dns, .ips = ips, .n_ips = n_ips,
                       .now = util_wall_now(), .ttl = cfg->serving_cert_ttl};
    uint8_t *tbs = NULL;
    size_t tbs_len = 0;
    hsmca_code rc = fe_tbs_build(&p, &tbs, &tbs_len, e);
    if (rc != HSMCA_OK)
        return rc;
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->done, NULL);
    rc = fe_ipc_submit(app->ipc, TBS_PROFILE_SERVING, tbs, tbs_len, "hsmca-frontend", NULL,
                       on_serving_cert, r, e);
    OPENSSL_free(tbs);
    if (rc != HSMCA_OK)
        return rc;
    pthread_mutex_lock(&r->lock);
    while (!r->finished)
        pthread_cond_wait(&r->done, &r->lock);
    pthread_mutex_unlock(&r->lock);
    if (r->code != HSMCA_OK)
        return hsmca_fail(e, r->code, "serving certificate refused: %s", r->reason);
    return HSMCA_OK;
}

/* Asks until the signer answers: at start-up the signer may still be logging in. */
static char *obtain_serving_cert(fe_app *app, EVP_PKEY *key)
{
    for (int attempt = 0;; attempt++) {
        sync_reply r;
        hsmca_err e;
        hsmca_code rc = request_serving_cert(app, key, &r, &e);
        if (rc == HSMCA_OK) {
            char *leaf = certasm_der_to_pem(r.cert, r.cert_len);
            free(r.cert);
            if (!leaf)
                fatal("serving certificate from the signer does not parse");
            size_t n = strlen(leaf) + 1;
            for (int i = 0; i < app->n_chain_tail; i++)
                n += strlen(app->chain_tail[i]);
            char *chain = malloc(n);
            if (!chain)
                fatal("out of memory");
            strcpy(chain, leaf);
            for (int i = 0; i < app->n_chain_tail; i++)
                strcat(chain, app->chain_tail[i]);
            free(leaf);
            return chain;
        }
        if (rc != HSMCA_EUNAVAIL)
            fatal("%s", e.msg);
        if (attempt % 20 == 0)
            log_info("waiting for the signer: %s", e.msg);
        usleep(250 * 1000);
    }
}

static char *key_to_pem(EVP_PKEY *key)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (b && PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL)) {
        char *data;
        long n = BIO_get_mem_data(b, &data);
        if ((out = malloc((size_t)n + 1))) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
        OPENSSL_cleanse(data, (size_t)n);
    }
    BIO_free(b);
    return out;
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

static int parse_args(int argc, char **argv, const char **config, int *ipc_fd, int *ctl_fd)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"ipc-fd", required_argument, 0, 'i'},
                                         {"ctl-fd", required_argument, 0, 'k'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:i:k:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': *config = optarg; break;
        case 'i': *ipc_fd = atoi(optarg); break;
        case 'k': *ctl_fd = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!*config || *ipc_fd < 0 || *ctl_fd < 0) {
        usage(stderr);
        return 2;
    }
    return -1;
}

int frontend_main(int argc, char **argv)
{
    const char *config_path = NULL;
    int ipc_fd = -1, ctl_fd = -1;
    log_init("frontend");
    int rc = parse_args(argc, argv, &config_path, &ipc_fd, &ctl_fd);
    if (rc >= 0)
        return rc;

    static hsmca_config cfg;
    static fe_app app;
    hsmca_err e;
    if (config_load(config_path, &cfg, &e) != HSMCA_OK || config_validate(&cfg, &e) != HSMCA_OK)
        fatal("%s", e.msg);
    if (load_app(&app, &cfg, &e) != HSMCA_OK)
        fatal("%s", e.msg);
    EVP_PKEY *tls_key = EVP_EC_gen("P-256");
    char *tls_key_pem = tls_key ? key_to_pem(tls_key) : NULL;
    if (!tls_key_pem)
        fatal("cannot generate the TLS serving key");

    /* Drop root before any thread exists and before talking to anyone. */
    if (fe_sandbox_drop_privileges(cfg.fe_user, cfg.fe_chroot, &e) != HSMCA_OK)
        fatal("%s", e.msg);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    pthread_t sig_th;
    pthread_create(&sig_th, NULL, signal_thread, &set);
    if (!(app.ipc = fe_ipc_start(ipc_fd, ctl_fd, &e)))
        fatal("%s", e.msg);
    char *chain_pem = obtain_serving_cert(&app, tls_key);
    log_info("serving certificate issued by the signer");

    grpc_init();
    fe_listener *listener = fe_server_listen(&app, tls_key_pem, chain_pem);
    if (!listener)
        fatal("cannot serve on %s", cfg.listen);
    if (fe_sandbox_seccomp(&e) != HSMCA_OK)
        fatal("%s", e.msg);
    rc = fe_server_serve(listener, &fe_stop);
    grpc_shutdown();
    OPENSSL_cleanse(tls_key_pem, strlen(tls_key_pem));
    free(tls_key_pem);
    free(chain_pem);
    EVP_PKEY_free(tls_key);
    return rc;
}

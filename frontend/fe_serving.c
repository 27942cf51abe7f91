/* fe_serving.c - see fe_serving.h. */
#include "fe_serving.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "certasm.h"
#include "fe_metrics.h"
#include "leaf_tbs.h"
#include "log.h"
#include "profile.h"
#include "thread_start.h"
#include "util.h"

#define RENEW_RETRY_S 30

typedef struct {
    char *key_pem;   /* wiped and freed with the credential */
    char *chain_pem; /* leaf + chain tail */
    char serial[41];
    int64_t not_after;
} serving_cred;

struct fe_serving {
    fe_app *app;
    pthread_mutex_t lock;
    serving_cred cur;
    int fresh;         /* cur not yet handed to gRPC */
    int64_t renew_at;  /* wall clock */
    char *client_cas;  /* PEM: the CAs the CertificateRequest names */
};

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int finished;
    hsmca_code code;
    char reason[256];
    uint8_t *cert;
    size_t cert_len;
} sync_reply;

static void on_reply(void *arg, hsmca_code code, const char *reason, const uint8_t *cert,
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

/* One synchronous SignRequest for key under the serving profile, with the SANs
 * config_serving_names gives (the signer allows exactly those). */
static HSMCA_MUSTCHECK hsmca_code request_cert(fe_app *app, EVP_PKEY *key, uint8_t **der, size_t *der_len,
                               hsmca_err *e)
{
    const char *dns[CONFIG_MAX_SERVING_NAMES], *ips[CONFIG_MAX_SERVING_NAMES];
    int n_dns, n_ips;
    config_serving_names(app->cfg, dns, &n_dns, ips, &n_ips);
    leaf_tbs_params p = {.ca_cert = app->ca_cert, .sig_nid = app->sig_nid, .subject_key = key,
                       .dns = dns, .n_dns = n_dns, .ips = ips, .n_ips = n_ips,
                       .now = util_wall_now(), .ttl = app->cfg->serving_cert_ttl};
    uint8_t *tbs = NULL;
    size_t tbs_len = 0;
    hsmca_code rc = leaf_tbs_build(&p, &tbs, &tbs_len, e);
    if (rc != HSMCA_OK)
        return rc;
    sync_reply r;
    memset(&r, 0, sizeof(r));
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.done, NULL);
    rc = fe_ipc_submit(app->ipc, PROFILE_SERVING, tbs, tbs_len, "hsmca-frontend", NULL,
                       on_reply, &r, e);
    OPENSSL_free(tbs);
    if (rc == HSMCA_OK) {
        pthread_mutex_lock(&r.lock);
        while (!r.finished)
            pthread_cond_wait(&r.done, &r.lock);
        pthread_mutex_unlock(&r.lock);
        if (r.code != HSMCA_OK)
            rc = hsmca_fail(e, r.code, "serving certificate refused: %s", r.reason);
    }
    pthread_mutex_destroy(&r.lock);
    pthread_cond_destroy(&r.done);
    *der = r.cert;
    *der_len = r.cert_len;
    if (rc != HSMCA_OK) {
        free(r.cert);
        *der = NULL;
    }
    return rc;
}

static void cred_free(serving_cred *c)
{
    if (c->key_pem) {
        OPENSSL_cleanse(c->key_pem, strlen(c->key_pem));
        free(c->key_pem);
    }
    free(c->chain_pem);
    memset(c, 0, sizeof(*c));
}

/* A fresh key and its certificate, with the chain appended. */
static HSMCA_MUSTCHECK hsmca_code make_cred(fe_app *app, serving_cred *out, hsmca_err *e)
{
    memset(out, 0, sizeof(*out));
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (!key || !(out->key_pem = certasm_key_pem(key))) {
        EVP_PKEY_free(key);
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot generate the TLS serving key");
    }
    uint8_t *der = NULL;
    size_t der_len = 0;
    hsmca_code rc = request_cert(app, key, &der, &der_len, e);
    EVP_PKEY_free(key);
    const unsigned char *p = der;
    X509 *x = rc == HSMCA_OK ? d2i_X509(NULL, &p, (long)der_len) : NULL;
    char *leaf = x ? certasm_der_to_pem(der, der_len) : NULL;
    free(der);
    if (rc == HSMCA_OK && !leaf)
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "serving certificate from the signer does not parse");
    if (rc == HSMCA_OK) {
        size_t n = strlen(leaf) + 1;
        for (int i = 0; i < app->n_chain_tail; i++)
            n += strlen(app->chain_tail[i]);
        if ((out->chain_pem = malloc(n))) {
            strcpy(out->chain_pem, leaf);
            for (int i = 0; i < app->n_chain_tail; i++)
                strcat(out->chain_pem, app->chain_tail[i]);
        } else {
            rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        }
        const ASN1_INTEGER *sn = X509_get0_serialNumber(x);
        util_hex(sn->data, (size_t)(sn->length < 20 ? sn->length : 20), out->serial);
        struct tm tm;
        out->not_after = ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) ? (int64_t)timegm(&tm) : 0;
    }
    free(leaf);
    X509_free(x);
    if (rc != HSMCA_OK)
        cred_free(out);
    return rc;
}

static void schedule(fe_serving *s)
{
    int64_t now = util_wall_now();
    s->renew_at = now + (s->cur.not_after - now) * 2 / 3;
    fe_metrics_serving(s->cur.not_after);
}

/* The CAs a client certificate of ours chains to, named in the TLS
 * CertificateRequest: Go's TLS client (istio-agent) sends its certificate only
 * when one in the chain it holds was issued by a named CA. The root bundle and
 * the chain file, and our CA when it is not a root, so that a leaf sent alone
 * qualifies too. NULL when out of memory. */
static char *client_cas(const fe_app *app)
{
    char *ca = NULL;
    if (X509_NAME_cmp(X509_get_subject_name(app->ca_cert), X509_get_issuer_name(app->ca_cert))) {
        unsigned char *der = NULL;
        int len = i2d_X509(app->ca_cert, &der);
        ca = len > 0 ? certasm_der_to_pem(der, (size_t)len) : NULL;
        OPENSSL_free(der);
        if (!ca)
            return NULL;
    }
    size_t n = 1 + (ca ? strlen(ca) : 0);
    for (int i = 0; i < app->n_chain_tail; i++)
        n += strlen(app->chain_tail[i]);
    char *out = malloc(n);
    if (out) {
        strcpy(out, ca ? ca : "");
        for (int i = 0; i < app->n_chain_tail; i++)
            strcat(out, app->chain_tail[i]);
    }
    free(ca);
    return out;
}

fe_serving *fe_serving_start(fe_app *app, volatile int *stop)
{
    fe_serving *s = calloc(1, sizeof(*s));
    if (!s)
        fatal("out of memory");
    s->app = app;
    if (!(s->client_cas = client_cas(app)))
        fatal("out of memory");
    pthread_mutex_init(&s->lock, NULL);
    for (int attempt = 0;; attempt++) {
        if (*stop) { /* SIGTERM while the signer cannot issue (token, PIN): nothing to finish */
            pthread_mutex_destroy(&s->lock);
            free(s->client_cas);
            free(s);
            return NULL;
        }
        hsmca_err e;
        hsmca_code rc = make_cred(app, &s->cur, &e);
        if (rc == HSMCA_OK)
            break;
        if (rc != HSMCA_EUNAVAIL)
            fatal_config("%s", e.msg); /* signer and front end disagree on the profile */
        if (attempt % 20 == 0)
            LOG_EVENT(LOG_LVL_INFO, "waiting for the signer", LOG_STR("reason", e.msg));
        usleep(250 * 1000);
    }
    s->fresh = 1;
    schedule(s);
    LOG_EVENT(LOG_LVL_INFO, "serving certificate issued by the signer",
              LOG_STR("serial", s->cur.serial));
    return s;
}

static void *renewal_thread(void *arg)
{
    fe_serving *s = arg;
    for (;;) {
        sleep(1);
        pthread_mutex_lock(&s->lock);
        int due = util_wall_now() >= s->renew_at;
        pthread_mutex_unlock(&s->lock);
        if (!due)
            continue;
        serving_cred next;
        hsmca_err e;
        if (make_cred(s->app, &next, &e) != HSMCA_OK) {
            LOG_EVENT(LOG_LVL_WARN, "serving certificate renewal failed, retrying",
                      LOG_INT("retry_s", RENEW_RETRY_S), LOG_STR("error", e.msg));
            pthread_mutex_lock(&s->lock);
            s->renew_at = util_wall_now() + RENEW_RETRY_S;
            pthread_mutex_unlock(&s->lock);
            continue;
        }
        pthread_mutex_lock(&s->lock);
        cred_free(&s->cur);
        s->cur = next;
        s->fresh = 1;
        schedule(s);
        pthread_mutex_unlock(&s->lock);
        LOG_EVENT(LOG_LVL_INFO, "serving certificate renewed", LOG_STR("serial", next.serial));
    }
    return NULL;
}

void fe_serving_start_renewal(fe_serving *s)
{
    thread_start(NULL, renewal_thread, s, "renewal thread");
}

/* gRPC asks before every handshake; it copies what we return. */
static grpc_ssl_certificate_config_reload_status fetch_config(void *arg,
                                                              grpc_ssl_server_certificate_config **cfg)
{
    fe_serving *s = arg;
    grpc_ssl_certificate_config_reload_status st = GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
    pthread_mutex_lock(&s->lock);
    if (s->fresh) {
        /* gRPC requires client roots in a reloadable config; they only name, in the
         * CertificateRequest, the CAs whose certificates we take (fe_clientcert
         * verifies them). */
        grpc_ssl_pem_key_cert_pair pair = {s->cur.key_pem, s->cur.chain_pem};
        *cfg = grpc_ssl_server_certificate_config_create(s->client_cas, &pair, 1);
        st = *cfg ? GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW : GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_FAIL;
        s->fresh = !*cfg;
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* Client certificates are requested, never required (token callers send none),
 * and not verified by gRPC: its verification would end a handshake with a
 * foreign or expired certificate, which the caller sees as UNAVAILABLE (retried
 * forever, no reason), and would refuse a token caller that happens to present
 * one. The handshake still proves the client holds the certificate's key (TLS
 * CertificateVerify, checked by OpenSSL whatever the verify mode); the
 * certificate itself is checked per call by fe_clientcert against our roots. */
grpc_server_credentials *fe_serving_credentials(fe_serving *s)
{
    grpc_ssl_server_credentials_options *o =
        grpc_ssl_server_credentials_create_options_using_config_fetcher(
            GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY, fetch_config, s);
    return o ? grpc_ssl_server_credentials_create_with_options(o) : NULL;
}

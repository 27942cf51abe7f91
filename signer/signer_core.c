/* signer_core.c - see signer_core.h.
 *
 * Workers pull jobs from one queue. A job keeps a reference on the connection it
 * came from, so a reply never goes to a newer front end and a closed fd number is
 * never reused under a worker's feet. */
#include "signer_core.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/sha.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certasm.h"
#include "ipc_frame.h"
#include "log.h"
#include "p11.h"
#include "signer_tbs.h"
#include "util.h"

typedef struct signer_conn {
    int fd;
    int refs; /* guarded by signer_ctx.lock */
} signer_conn;

typedef struct signer_job {
    struct signer_job *next;
    uint64_t id;
    signer_conn *conn;
    Hsmca__Ipc__SignRequest *req;
} signer_job;

#define SIGNER_MAX_QUEUE 8192
#define SIGNER_MAX_WORKERS 64

struct signer_ctx {
    p11_module *module;
    p11_pool *pool;
    X509 *ca_cert;
    int sig_nid;
    tbs_policy policy;
    hsmca_config cfg; /* our copy: the policy's strings point into it */
    serial_set *serials;
    rate_limiter *rate;

    pthread_mutex_t lock;
    pthread_cond_t more;
    signer_conn *conn;
    signer_job *head, *tail;
    int queued;
    int stopping;
    pthread_t workers[SIGNER_MAX_WORKERS];
    int n_workers;
};

static void conn_unref_locked(signer_conn *c)
{
    if (c && --c->refs == 0) {
        close(c->fd);
        free(c);
    }
}

int signer_conn_fd(signer_ctx *s)
{
    pthread_mutex_lock(&s->lock);
    int fd = s->conn ? s->conn->fd : -1;
    pthread_mutex_unlock(&s->lock);
    return fd;
}

void signer_conn_set(signer_ctx *s, int fd)
{
    signer_conn *c = calloc(1, sizeof(*c));
    if (!c)
        fatal("out of memory");
    c->fd = fd;
    c->refs = 1;
    pthread_mutex_lock(&s->lock);
    conn_unref_locked(s->conn);
    s->conn = c;
    pthread_mutex_unlock(&s->lock);
}

void signer_conn_close(signer_ctx *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->conn)
        shutdown(s->conn->fd, SHUT_RDWR);
    conn_unref_locked(s->conn);
    s->conn = NULL;
    pthread_mutex_unlock(&s->lock);
}

static void reply(signer_conn *c, uint64_t id, hsmca_code code, const char *reason,
                  const uint8_t *cert, size_t cert_len)
{
    Hsmca__Ipc__SignReply r = HSMCA__IPC__SIGN_REPLY__INIT;
    r.code = (uint32_t)code;
    r.reason = (char *)(reason ? reason : "");
    r.certificate.data = (uint8_t *)cert;
    r.certificate.len = cert_len;
    uint8_t buf[IPC_MAX_PAYLOAD];
    size_t n = hsmca__ipc__sign_reply__get_packed_size(&r);
    if (n > sizeof(buf)) {
        log_error("reply of %zu bytes does not fit a frame", n);
        return;
    }
    hsmca__ipc__sign_reply__pack(&r, buf);
    hsmca_err e;
    if (ipc_send(c->fd, IPC_SIGN_REPLY, id, buf, n, &e) != HSMCA_OK)
        log_warn("reply %llu not delivered: %s", (unsigned long long)id, e.msg);
}

void signer_submit(signer_ctx *s, uint64_t id, Hsmca__Ipc__SignRequest *req)
{
    signer_job *j = calloc(1, sizeof(*j));
    if (!j)
        fatal("out of memory");
    j->id = id;
    j->req = req;
    pthread_mutex_lock(&s->lock);
    if (!s->conn || s->queued >= SIGNER_MAX_QUEUE) {
        signer_conn *c = s->conn;
        if (c)
            c->refs++;
        pthread_mutex_unlock(&s->lock);
        if (c)
            reply(c, id, HSMCA_ERATE, "signer queue full", NULL, 0);
        pthread_mutex_lock(&s->lock);
        conn_unref_locked(c);
        pthread_mutex_unlock(&s->lock);
        hsmca__ipc__sign_request__free_unpacked(req, NULL);
        free(j);
        return;
    }
    j->conn = s->conn;
    j->conn->refs++;
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->queued++;
    pthread_cond_signal(&s->more);
    pthread_mutex_unlock(&s->lock);
}

static int signature_verifies(signer_ctx *s, const uint8_t digest[32], const uint8_t *sig,
                              size_t sig_len)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(X509_get0_pubkey(s->ca_cert), NULL);
    int ok = ctx && EVP_PKEY_verify_init(ctx) == 1;
    if (ok && s->sig_nid == NID_sha256WithRSAEncryption)
        ok = EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1 &&
             EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) == 1;
    ok = ok && EVP_PKEY_verify(ctx, sig, sig_len, digest, 32) == 1;
    EVP_PKEY_CTX_free(ctx);
    return ok;
}

/* Validate, rate-limit, record the serial, sign, self-check and assemble.
 * Returns the certificate (OPENSSL_malloc'd) or a refusal in e. */
static hsmca_code sign_one(signer_ctx *s, const Hsmca__Ipc__SignRequest *req, uint8_t **cert,
                           size_t *cert_len, hsmca_err *e)
{
    tbs_facts facts;
    if (req->profile != TBS_PROFILE_WORKLOAD && req->profile != TBS_PROFILE_SERVING)
        return hsmca_fail(e, HSMCA_EPERM, "unknown profile %u", req->profile);
    hsmca_code rc = tbs_validate(req->tbs.data, req->tbs.len, (tbs_profile)req->profile,
                                 &s->policy, util_wall_now(), &facts, e);
    if (rc != HSMCA_OK)
        return rc;
    if ((rc = rate_limiter_take(s->rate, util_mono_now(), e)) != HSMCA_OK)
        return rc;
    if ((rc = serial_set_insert(s->serials, facts.serial, facts.serial_len, e)) != HSMCA_OK)
        return rc;

    uint8_t digest[32], sig[1024];
    size_t sig_len = sizeof(sig);
    SHA256(req->tbs.data, req->tbs.len, digest);
    if ((rc = p11_pool_sign_digest(s->pool, digest, sig, &sig_len, e)) != HSMCA_OK)
        return rc;
    /* Verify before release: a faulty token (or a fault attack on RSA-CRT) must
     * not put a bad signature into the world. The certificate is the TBS we
     * checked plus this signature, so checking the signature over its digest is
     * the whole check (and much cheaper than re-parsing the certificate). */
    if (!signature_verifies(s, digest, sig, sig_len))
        return hsmca_fail(e, HSMCA_EINTERNAL, "token signature failed verification");
    if ((rc = certasm_assemble(req->tbs.data, req->tbs.len, s->sig_nid, sig, sig_len, cert,
                               cert_len, e)) != HSMCA_OK)
        return rc;
    char serial_hex[41];
    util_hex(facts.serial, facts.serial_len, serial_hex);
    log_info("signed profile=%u serial=%s san=%s requester=%s", req->profile, serial_hex,
             facts.first_san, req->requester ? req->requester : "");
    return HSMCA_OK;
}

static void *worker(void *arg)
{
    signer_ctx *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->more, &s->lock);
        if (s->stopping) {
            pthread_mutex_unlock(&s->lock);
            return NULL;
        }
        signer_job *j = s->head;
        s->head = j->next;
        if (!s->head)
            s->tail = NULL;
        s->queued--;
        int current = j->conn == s->conn;
        pthread_mutex_unlock(&s->lock);

        if (current) {
            uint8_t *cert = NULL;
            size_t cert_len = 0;
            hsmca_err e;
            hsmca_err_clear(&e);
            hsmca_code rc = sign_one(s, j->req, &cert, &cert_len, &e);
            if (rc != HSMCA_OK)
                log_warn("refused request %llu from %s: %s", (unsigned long long)j->id,
                         j->req->requester ? j->req->requester : "", e.msg);
            reply(j->conn, j->id, rc, rc == HSMCA_OK ? "" : e.msg, cert, cert_len);
            OPENSSL_free(cert);
        }
        hsmca__ipc__sign_request__free_unpacked(j->req, NULL);
        pthread_mutex_lock(&s->lock);
        conn_unref_locked(j->conn);
        pthread_mutex_unlock(&s->lock);
        free(j);
    }
}

/* The CA certificate must be a CA, carry an SKI (invariant 1 checks AKI against
 * it) and certify exactly the key in the token. */
static hsmca_code check_ca(signer_ctx *s, const char *path, hsmca_err *e)
{
    if (X509_check_ca(s->ca_cert) != 1)
        return hsmca_fail(e, HSMCA_EINVAL, "CA check: %s is not a CA certificate", path);
    if (!X509_get0_subject_key_id(s->ca_cert))
        return hsmca_fail(e, HSMCA_EINVAL, "CA check: %s has no subjectKeyIdentifier", path);
    EVP_PKEY *token_key = p11_pool_public_key(s->pool);
    int same = token_key && EVP_PKEY_eq(token_key, X509_get0_pubkey(s->ca_cert)) == 1;
    EVP_PKEY_free(token_key);
    if (!same)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "CA check: the key in %s is not the token's CA key", path);
    if (X509_cmp_time(X509_get0_notAfter(s->ca_cert), NULL) <= 0)
        return hsmca_fail(e, HSMCA_EINVAL, "CA check: %s has expired", path);
    s->sig_nid = certasm_sig_nid_for_key(X509_get0_pubkey(s->ca_cert));
    if (s->sig_nid == NID_undef)
        return hsmca_fail(e, HSMCA_EINVAL, "CA check: unsupported CA key type");
    return HSMCA_OK;
}

_Static_assert(CONFIG_MAX_SERVING_NAMES <= TBS_MAX_NAMES, "serving names fit the policy");

/* The serving profile allows exactly the names the front end asks for. */
static void build_policy(signer_ctx *s)
{
    const hsmca_config *cfg = &s->cfg;
    tbs_policy *p = &s->policy;
    memset(p, 0, sizeof(*p));
    p->ca_cert = s->ca_cert;
    p->ca_sig_nid = s->sig_nid;
    p->max_ttl = cfg->max_ttl;
    p->serving_max_ttl = cfg->serving_cert_ttl;
    p->trust_domains[0] = cfg->trust_domain;
    p->n_trust_domains = 1;
    config_serving_names(cfg, p->serving_dns, &p->n_serving_dns, p->serving_ips,
                         &p->n_serving_ips);
}

static hsmca_code open_token(signer_ctx *s, const hsmca_config *cfg, hsmca_err *e)
{
    if (cfg->softhsm2_conf[0])
        setenv("SOFTHSM2_CONF", cfg->softhsm2_conf, 1);
    char pin[256];
    hsmca_code rc = util_read_secret(cfg->pin_file, pin, sizeof(pin), e);
    if (rc != HSMCA_OK)
        return rc;
    rc = p11_module_load(cfg->module_path, &s->module, e);
    if (rc == HSMCA_OK)
        rc = p11_pool_open(s->module, cfg->ca_key_uri, pin, cfg->sessions, &s->pool, e);
    OPENSSL_cleanse(pin, sizeof(pin));
    return rc;
}

signer_ctx *signer_start(const hsmca_config *cfg, hsmca_err *e)
{
    signer_ctx *s = calloc(1, sizeof(*s));
    if (!s) {
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->more, NULL);
    if (!(s->ca_cert = certasm_load_pem(cfg->ca_cert, e)) || open_token(s, cfg, e) != HSMCA_OK ||
        check_ca(s, cfg->ca_cert, e) != HSMCA_OK) {
        signer_stop_all(s);
        return NULL;
    }
    s->cfg = *cfg;
    build_policy(s);
    s->serials = serial_set_new();
    s->rate = rate_limiter_new(cfg->rate_per_second, cfg->rate_burst);
    if (!s->serials || !s->rate) {
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        signer_stop_all(s);
        return NULL;
    }
    s->n_workers = (int)(cfg->sessions < SIGNER_MAX_WORKERS ? cfg->sessions : SIGNER_MAX_WORKERS);
    for (int i = 0; i < s->n_workers; i++)
        if (pthread_create(&s->workers[i], NULL, worker, s) != 0)
            fatal("cannot start worker thread");
    log_info("signer ready: CA key %s, %d sessions, max TTL %us, trust domain %s",
             cfg->ca_key_uri, s->n_workers, cfg->max_ttl, cfg->trust_domain);
    return s;
}

void signer_stop_all(signer_ctx *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->more);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < s->n_workers; i++)
        pthread_join(s->workers[i], NULL);
    while (s->head) {
        signer_job *j = s->head;
        s->head = j->next;
        hsmca__ipc__sign_request__free_unpacked(j->req, NULL);
        conn_unref_locked(j->conn);
        free(j);
    }
    conn_unref_locked(s->conn);
    p11_pool_close(s->pool);
    p11_module_unload(s->module);
    X509_free(s->ca_cert);
    serial_set_free(s->serials);
    rate_limiter_free(s->rate);
    free(s);
}

/* signer_core.c - see signer_core.h.
 *
 * Start-up (token, CA and audit key checks, the audit log's replay), the periodic
 * tick and the stop. The connections are in signer_conn.c, the queue and the
 * workers in signer_work.c, staged requests and the syncer in signer_stage.c. */
#include "signer_core.h"
#include "signer_casign.h"
#include "signer_probe.h"
#include "signer_ctx.h"
#include "signer_policy.h"
#include "signer_stage.h"
#include "signer_work.h"

#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "signer_crl.h"
#include "audit_log.h"
#include "certasm.h"
#include "ipc_frame.h"
#include "log.h"
#include "p11.h"
#include "sigalg.h"
#include "signer_audit.h"
#include "signer_limits.h"
#include "signer_tbs.h"
#include "signer_tokens.h"
#include "thread_start.h"
#include "util.h"

p11_signkey *signer_audit_key(signer_ctx *s)
{
    return s->audit_key;
}

signer_caops *signer_ca(signer_ctx *s)
{
    return s->ca;
}

hsmca_code signer_keys_load_fd(signer_ctx *s, int cluster, int fd, hsmca_err *e)
{
    return signer_bind_load_fd(s->bind, cluster, fd, e);
}

/* After the token refused the PIN nothing logs in again, until the PIN file
 * is replaced or rewritten (then a fresh signer reads it, once). */
static int pin_file_changed(const char *path, const struct stat *then)
{
    struct stat now;
    if (stat(path, &now) != 0)
        return 0;
    return now.st_ino != then->st_ino || now.st_size != then->st_size ||
           now.st_mtim.tv_sec != then->st_mtim.tv_sec ||
           now.st_mtim.tv_nsec != then->st_mtim.tv_nsec;
}

/* The PIN file of a key whose token refused its PIN, when that file changed; else NULL. */
static const char *refused_pin_changed(const signer_ctx *s)
{
    if (p11_pool_get_state(s->pool) == P11_POOL_PIN_REFUSED &&
        pin_file_changed(s->cfg.pin_file, &s->pin_stat))
        return s->cfg.pin_file;
    if (s->audit_key && p11_signkey_get_state(s->audit_key) == P11_POOL_PIN_REFUSED &&
        pin_file_changed(signer_audit_pin_path(&s->cfg), &s->audit_pin_stat))
        return signer_audit_pin_path(&s->cfg);
    return NULL;
}

int signer_tick(signer_ctx *s)
{
    /* The main loop calls this after every poll, so once per request under load: the
     * work below (a flush that may fdatasync on this thread, a lock per worker) is
     * for a few times a second. */
    signer_casign_poll(s->ca); /* every pass: a waiting admin caller is answered at once */
    double now = util_mono_now();
    if (now - s->last_tick < SIGNER_TICK_S)
        return 0;
    s->last_tick = now;
    hsmca_err ae;
    if (s->audit && audit_log_flush(s->audit, &ae) != HSMCA_OK) {
        /* The failed log said so once; the next intent is refused with the reason. */
    }
    signer_answer_overdue(s);
    log_limiter_flush(s->refusals, util_mono_now());
    signer_audit_flush_summaries(s, util_mono_now());
    signer_crl_tick(s->ca);
    const char *changed = refused_pin_changed(s);
    if (changed) {
        LOG_EVENT(LOG_LVL_WARN, "PIN file changed: restarting to try it", LOG_STR("path", changed));
        return 1;
    }
    return 0;
}

/* The CA certificate must be a CA, carry an SKI (invariant 1 checks AKI against
 * it) and certify exactly the key in the token. */
static HSMCA_MUSTCHECK hsmca_code check_ca(signer_ctx *s, const char *path, hsmca_err *e)
{
    EVP_PKEY *token_key = p11_pool_public_key(s->pool);
    if (!token_key)
        return hsmca_fail(e, HSMCA_EINTERNAL, "CA check: no public key for pkcs11.ca_key");
    hsmca_code rc = ca_cert_check(s->ca_cert, path, token_key, e);
    EVP_PKEY_free(token_key);
    HSMCA_GUARD(rc);
    s->alg = p11_pool_sigalg(s->pool);
    return HSMCA_OK;
}

_Static_assert(CONFIG_MAX_SERVING_NAMES <= PROFILE_MAX_NAMES, "serving names fit the policy");
_Static_assert(1 + POLICY_MAX_ALIASES <= PROFILE_MAX_NAMES, "the trust domain and its aliases fit");

/* The serving profile allows exactly the names the front end asks for. */
static void build_policy(signer_ctx *s)
{
    const hsmca_config *cfg = &s->cfg;
    tbs_policy *p = &s->policy;
    memset(p, 0, sizeof(*p));
    p->ca_cert = s->ca_cert;
    p->ca_sig_nid = s->alg->nid;
    p->max_ttl = cfg->max_ttl;
    p->serving_max_ttl = cfg->serving_cert_ttl;
    p->trust_domains[0] = cfg->trust_domain;
    p->n_trust_domains = 1;
    /* Our own reading of the policy file, never the front end's word for it. */
    p->policy_file = s->policy_file;
    for (int i = 0; i < policy_set_n_aliases(s->policy_file) && p->n_trust_domains < PROFILE_MAX_NAMES;
         i++)
        p->trust_domains[p->n_trust_domains++] = policy_set_alias(s->policy_file, i);
    config_serving_names(cfg, p->serving_dns, &p->n_serving_dns, p->serving_ips, &p->n_serving_ips);
}

/* The audit key (docs/ARCHITECTURE.md §6), checked like the CA key: opened before the
 * sandbox, in its own module and with its own PIN file when configured, refused
 * naming the check, and its module and public key's fingerprint logged so an
 * operator can tell which key signs the log, and where it is. */
static HSMCA_MUSTCHECK hsmca_code open_audit_key(signer_ctx *s, const hsmca_config *cfg,
                                                 hsmca_err *e)
{
    if (!cfg->audit_key_uri[0]) {
        log_event(LOG_LVL_INFO, "no audit key configured (pkcs11.audit_key is empty)", NULL, 0);
        return HSMCA_OK;
    }
    const char *pin_path = signer_audit_pin_path(cfg);
    p11_module *m;
    char pin[UTIL_PIN_MAX + 1];
    if (stat(pin_path, &s->audit_pin_stat) != 0)
        memset(&s->audit_pin_stat, 0, sizeof(s->audit_pin_stat));
    HSMCA_GUARD(util_read_secret(pin_path, pin, sizeof(pin), e));
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = signer_audit_module_load(cfg, s->module, &s->audit_module, &m, e);
    if (rc == HSMCA_OK) {
        rc = p11_signkey_open(m, cfg->audit_key_uri, pin, &s->audit_key, &why);
        if (rc == HSMCA_EAUTH)
            hsmca_fail(e, rc, "audit key (pkcs11.audit_key): %s (the PIN of %s, %s)", why.msg,
                       pin_path, signer_audit_pin_key(cfg));
        else if (rc != HSMCA_OK)
            hsmca_fail(e, rc, "audit key (pkcs11.audit_key): %s", why.msg);
    }
    OPENSSL_cleanse(pin, sizeof(pin));
    HSMCA_GUARD(rc);
    char pub[2 * P11_SIGNKEY_PUB_MAX + 1];
    util_hex(p11_signkey_public_raw(s->audit_key), p11_signkey_public_len(s->audit_key), pub);
    const char *alg = p11_signkey_alg(s->audit_key);
    LOG_EVENT(LOG_LVL_INFO, "audit key ready", LOG_STR("key", cfg->audit_key_uri),
              LOG_STR("module", s->audit_module ? cfg->audit_module : cfg->module_path),
              LOG_STR("module_shared", s->audit_module ? "false" : "true"),
              LOG_STR("type", strcmp(alg, "ed25519") == 0      ? "Ed25519"
                              : strcmp(alg, "ecdsa-p384") == 0 ? "ECDSA P-384"
                                                               : "ECDSA P-256"),
              LOG_STR("sha256", p11_signkey_fingerprint(s->audit_key)), LOG_STR("public_key", pub));
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code open_token(signer_ctx *s, const hsmca_config *cfg, hsmca_err *e)
{
    if (cfg->softhsm2_conf[0])
        setenv("SOFTHSM2_CONF", cfg->softhsm2_conf, 1);
    char pin[UTIL_PIN_MAX + 1];
    if (stat(cfg->pin_file, &s->pin_stat) != 0)
        memset(&s->pin_stat, 0, sizeof(s->pin_stat));
    hsmca_code rc = util_read_secret(cfg->pin_file, pin, sizeof(pin), e);
    if (rc != HSMCA_OK)
        return rc;
    rc = p11_module_load(cfg->module_path, &s->module, e);
    hsmca_err why;
    hsmca_err_clear(&why);
    if (rc == HSMCA_OK)
        rc = p11_pool_open(s->module, cfg->ca_key_uri, pin, cfg->sessions, &s->pool, &why);
    if (rc == HSMCA_EAUTH) /* the operator's fix is a file: name it and its key */
        hsmca_fail(e, rc, "%s for the CA key (pkcs11.ca_key): check pkcs11.pin_file, %s",
                   why.msg, cfg->pin_file);
    else if (rc != HSMCA_OK && why.msg[0])
        hsmca_fail(e, rc, "%s", why.msg);
    OPENSSL_cleanse(pin, sizeof(pin));
    if (rc == HSMCA_OK)
        LOG_EVENT(LOG_LVL_INFO, "CA key ready", LOG_STR("key", cfg->ca_key_uri),
                  LOG_STR("module", cfg->module_path));
    return rc == HSMCA_OK ? open_audit_key(s, cfg, e) : rc;
}

/* The audit key's signature (CKM_EDDSA, or CKM_ECDSA over SHA-256 made DER), for the
 * publisher's checkpoints (an audit_note_signer). Called only on the publisher's own
 * thread: a token call that hangs holds that thread, never a signing worker. */
static hsmca_code sign_checkpoint(void *ctx, const uint8_t *msg, size_t len,
                                  uint8_t sig[AUDIT_SIG_MAX], size_t *siglen, hsmca_err *e)
{
    return p11_signkey_sign_message(ctx, msg, len, sig, siglen, e);
}

/* With an audit key: the publisher, which reads and verifies the latest checkpoint now,
 * so the replay can check the log against it. */
static HSMCA_MUSTCHECK hsmca_code open_publisher(signer_ctx *s, const hsmca_config *cfg,
                                                 uid_t owner, gid_t group, hsmca_err *e)
{
    if (!s->audit_key) {
        log_event(LOG_LVL_WARN,
                  "no audit key (pkcs11.audit_key is empty): the audit log is written but no "
                  "checkpoint is signed, and the log is not checked against one at start",
                  NULL, 0);
        return HSMCA_OK;
    }
    /* Unset: this host's name (config.h); kept in s->cfg for the log lines. */
    if (!s->cfg.audit_origin[0])
        config_default_origin(cfg->trust_domain, s->cfg.audit_origin, sizeof(s->cfg.audit_origin));
    audit_publish_cfg pc = {.dir = cfg->audit_dir,
                            .origin = s->cfg.audit_origin,
                            .key_type = strcmp(p11_signkey_alg(s->audit_key), "ed25519") == 0
                                            ? AUDIT_SIG_TYPE_ED25519
                                            : AUDIT_SIG_TYPE_ECDSA,
                            .pub = p11_signkey_public_raw(s->audit_key),
                            .pub_len = p11_signkey_public_len(s->audit_key),
                            .sign = sign_checkpoint,
                            .sign_ctx = s->audit_key,
                            .owner = owner,
                            .group = group};
    return audit_publish_open(&pc, &s->publish, e);
}

/* Opens audit.dir (created for the signer's user when started as root, since it
 * reopens the file after switching user), replays it into the serial set (and the
 * publisher's tiles, checked against the latest checkpoint) and records a start entry. */
static HSMCA_MUSTCHECK hsmca_code open_audit_log(signer_ctx *s, const hsmca_config *cfg,
                                                 hsmca_err *e)
{
    if (!cfg->audit_dir[0]) {
        log_event(LOG_LVL_WARN,
                  "the audit log is off (audit.disabled: true): certificates are signed "
                  "without a durable record, and serial uniqueness does not survive a restart",
                  NULL, 0);
        return HSMCA_OK;
    }
    uid_t owner = (uid_t)-1;
    gid_t group = (gid_t)-1;
    if (geteuid() == 0 && cfg->signer_user[0]) {
        struct passwd *pw = getpwnam(cfg->signer_user);
        if (pw) {
            owner = pw->pw_uid;
            group = pw->pw_gid;
        }
    }
    HSMCA_GUARD(open_publisher(s, cfg, owner, group, e));
    signer_replay r;
    HSMCA_GUARD(signer_replay_init(&r, s, e));
    audit_replay_stats st;
    hsmca_code rc = audit_log_open_ex(cfg->audit_dir, owner, group, signer_replay_entry, &r,
                                      s->publish ? audit_publish_replay_line : NULL, s->publish,
                                      &s->audit, &st, e);
    if (rc == HSMCA_OK && s->publish) {
        rc = audit_publish_attach(s->publish, s->audit, e);
        if (rc != HSMCA_OK) {
            audit_log_close(s->audit); /* refused: not one more line in it */
            s->audit = NULL;
        }
    }
    if (rc != HSMCA_OK) {
        signer_replay_free(&r);
        return rc;
    }
    signer_replay_restore(&r);
    s->ca->audit = s->audit;
    s->ca->ica = audit_replay_take_ica(r.replay); /* the intermediates' state (signer_ica.h) */
    s->ca->crl = audit_replay_take_crl(r.replay); /* revocations and CRLs (signer_crl.h) */
    if (s->ca->crl)
        signer_crl_restore(s->ca);
    uint64_t bseq;
    const char *broken = audit_replay_ca_broken(r.replay, &bseq);
    if (broken) /* workloads go on; the CA profile waits for the operator */
        signer_ca_close(s->ca, bseq, broken);
    /* A repeated serial refuses the log (audit_replay.h): serials_duplicate stays 0, in
     * the stable set of keys; serials_expired are those not restored (expired, or
     * another CA key's). */
    char n_entries[24], n_restored[24], n_expired[24], n_cut[24];
    snprintf(n_entries, sizeof(n_entries), "%llu", (unsigned long long)st.entries);
    snprintf(n_restored, sizeof(n_restored), "%llu", (unsigned long long)r.restored);
    snprintf(n_expired, sizeof(n_expired), "%llu", (unsigned long long)(st.intents - r.restored));
    snprintf(n_cut, sizeof(n_cut), "%llu", (unsigned long long)st.cut_bytes);
    LOG_EVENT(LOG_LVL_INFO, "audit log replayed", LOG_STR("dir", cfg->audit_dir),
              LOG_STR("entries", n_entries), LOG_STR("serials_restored", n_restored),
              LOG_STR("serials_expired", n_expired), LOG_STR("serials_duplicate", "0"),
              LOG_STR("cut_bytes", n_cut));
    /* The outcome of intents the last life left open, then start and what this life
     * runs with (config, key): one sync for all. */
    audit_entry a = {.kind = AUDIT_START};
    uint64_t seq;
    rc = signer_audit_close_open(s, r.replay, &seq, e);
    if (rc == HSMCA_OK)
        rc = audit_log_append(s->audit, &a, &seq, e);
    if (rc == HSMCA_OK)
        rc = signer_audit_started(s, &seq, e);
    signer_replay_free(&r);
    HSMCA_GUARD(rc);
    return audit_log_sync_through(s->audit, seq, e);
}

/* How long the signatures inside the sandbox may take to succeed: a token fault at that
 * moment (UNAVAILABLE: the pool rebuilds itself, once a second) gets a reconnect or two;
 * a module the filter stops fails every time. */
#define SIGNER_SELF_TEST_S 2.5

static HSMCA_MUSTCHECK hsmca_code self_test_once(signer_ctx *s, hsmca_err *e)
{
    hsmca_err why;
    hsmca_err_clear(&why);
    if (p11_pool_self_test(s->pool, &why) != HSMCA_OK)
        return hsmca_fail(e, why.code, "CA key (pkcs11.ca_key): %s", why.msg);
    if (s->audit_key && p11_signkey_self_test(s->audit_key, &why) != HSMCA_OK)
        return hsmca_fail(e, why.code, "audit key (pkcs11.audit_key): %s", why.msg);
    return HSMCA_OK;
}

hsmca_code signer_self_test(signer_ctx *s, hsmca_err *e)
{
    hsmca_err again;
    /* The recovery from a token fault first (p11_pool_reinit_module), then a signature
     * with each key; the first answer is the one reported. */
    hsmca_code rc = signer_rehearse_recovery(s->pool, s->audit_key, s->audit_module != NULL, e);
    if (rc == HSMCA_OK)
        rc = self_test_once(s, e);
    double end = util_mono_now() + SIGNER_SELF_TEST_S;
    while (rc == HSMCA_EUNAVAIL && util_mono_now() < end) {
        struct timespec pause = {0, 100 * 1000 * 1000};
        nanosleep(&pause, NULL);
        rc = self_test_once(s, &again);
    }
    if (rc != HSMCA_OK)
        return e ? e->code : rc;
    LOG_EVENT(LOG_LVL_INFO, "self-test inside the sandbox: signed and verified",
              LOG_STR("keys", s->audit_key ? "the CA key and the audit key" : "the CA key"));
    return HSMCA_OK;
}

/* A checkpoint at least every second while entries arrive, none when idle. */
#define SIGNER_CHECKPOINT_INTERVAL_S 1.0

hsmca_code signer_publish_start(signer_ctx *s, hsmca_err *e)
{
    if (!s->publish)
        return HSMCA_OK;
    HSMCA_GUARD(audit_publish_start(s->publish, SIGNER_CHECKPOINT_INTERVAL_S, e));
    LOG_EVENT(LOG_LVL_INFO, "audit checkpoints", LOG_STR("dir", s->cfg.audit_dir),
              LOG_STR("origin", s->cfg.audit_origin), LOG_STR("interval", "1s"));
    return HSMCA_OK;
}

/* The syncer (with the log), the checker and the workers, the CA signing thread. */
static void start_threads(signer_ctx *s, const hsmca_config *cfg)
{
    /* Workers never take SIGTERM/SIGINT: the main thread's poll must see them. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    s->n_workers = (int)signer_worker_count(cfg->sessions);
    s->max_staged = SIGNER_MAX_STAGED;
    signer_stages_init(s);
    if (s->audit) {
        thread_start(&s->syncer, signer_syncer, s, "audit log's sync thread");
        s->has_syncer = 1;
    }
    for (int i = 0; i < s->n_workers; i++) {
        signer_worker_arg *wa = malloc(sizeof(*wa));
        if (!wa)
            fatal("out of memory");
        *wa = (signer_worker_arg){s, i};
        thread_start(&s->workers[i], i == 0 ? signer_checker : signer_worker, wa,
                     i == 0 ? "checker thread" : "signing thread");
    }
    signer_casign_init(s->ca);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* What the CA profile reads of the signer (signer_caops.h), once it is loaded; the log
 * once it is open (open_audit_log). */
static void lend_to_ca(signer_ctx *s)
{
    signer_caops *ca = s->ca;
    ca->cfg = &s->cfg;
    ca->ca_cert = s->ca_cert;
    ca->alg = s->alg;
    ca->policy = &s->policy;
    ca->pool = s->pool;
    ca->serials = s->serials;
    ca->stats = &s->stats;
}

signer_ctx *signer_start(const hsmca_config *cfg, hsmca_err *e)
{
    signer_ctx *s = calloc(1, sizeof(*s));
    signer_caops *ca = s ? signer_caops_new() : NULL;
    if (!ca) {
        free(s);
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        return NULL;
    }
    s->ca = ca;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->more, NULL);
    pthread_cond_init(&s->check, NULL);
    util_cond_init_monotonic(&s->park); /* the syncer's timed wait */
    s->ctl_fd = -1;
    /* The policy file first: a mistake in it is the operator's to fix (EINVAL). */
    if ((cfg->policy_file[0] &&
         policy_file_load(cfg->policy_file, &s->policy_file, e) != HSMCA_OK) ||
        !(s->ca_cert = certasm_load_pem(cfg->ca_cert, e)) || open_token(s, cfg, e) != HSMCA_OK ||
        check_ca(s, cfg->ca_cert, e) != HSMCA_OK) {
        signer_stop_all(s);
        return NULL;
    }
    s->cfg = *cfg;
    build_policy(s);
    if (signer_policy_init(s, e) != HSMCA_OK || signer_bind_new(&s->cfg, &s->bind, e) != HSMCA_OK) {
        signer_stop_all(s);
        return NULL;
    }
    s->serials = serial_set_new();
    s->rate = rate_limiter_new(cfg->rate_per_second, cfg->rate_burst);
    s->refusals = log_limiter_new(SIGNER_REFUSAL_LINES_PER_S, 1.0);
    s->deny_limit = window_limiter_new(SIGNER_DENY_ENTRIES_PER_S, SIGNER_DENY_WINDOW_S);
    s->frontend_deny_limit = window_limiter_new(SIGNER_DENY_ENTRIES_PER_S, SIGNER_DENY_WINDOW_S);
    if (!s->serials || !s->rate || !s->refusals || !s->deny_limit || !s->frontend_deny_limit) {
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        signer_stop_all(s);
        return NULL;
    }
    lend_to_ca(s);
    if (open_audit_log(s, cfg, e) != HSMCA_OK) {
        /* An I/O error on the audit directory (a full disk, a read-only or failing file
         * system: the publisher's repair of a tile, the start entry) is cured without a
         * config change: the supervisor retries it with backoff, as a token not yet
         * there. What the log or its checkpoint refuses (EINVAL) stays permanent. */
        if (e && e->code == HSMCA_EIO)
            e->code = HSMCA_EUNAVAIL;
        signer_stop_all(s);
        return NULL;
    }
    start_threads(s, cfg);
    char sessions[16], max_ttl[24];
    snprintf(sessions, sizeof(sessions), "%u", cfg->sessions); /* a signing thread each */
    snprintf(max_ttl, sizeof(max_ttl), "%us", cfg->max_ttl);
    LOG_EVENT(LOG_LVL_INFO, "signer ready", LOG_STR("ca_key", cfg->ca_key_uri),
              LOG_STR("sessions", sessions), LOG_STR("max_ttl", max_ttl),
              LOG_STR("trust_domain", cfg->trust_domain));
    if (s->policy_file) {
        char hex[65];
        util_hex(policy_set_sha256(s->policy_file), 32, hex);
        LOG_EVENT(LOG_LVL_INFO, "policy file loaded", LOG_STR("path", cfg->policy_file),
                  LOG_STR("sha256", hex));
    }
    return s;
}

/* Wakes every thread of s and joins the workers, then the syncer, within
 * SIGNER_STOP_TIMEOUT_S. 0 when one did not stop: the caller leaves the token and
 * the log to the process's exit. */
static int join_threads(signer_ctx *s)
{
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->more);
    pthread_cond_broadcast(&s->check);
    pthread_cond_broadcast(&s->park);
    if (s->conn) /* wakes a worker waiting on a stalled front end */
        shutdown(s->conn->fd, SHUT_RDWR);
    pthread_mutex_unlock(&s->lock);
    /* A worker inside a hung C_Sign cannot be woken: stop anyway, within a bound,
     * and leave the token to the process's exit. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += SIGNER_STOP_TIMEOUT_S;
    for (int i = 0; i < s->n_workers; i++) {
        if (pthread_timedjoin_np(s->workers[i], NULL, &deadline) != 0) {
            LOG_EVENT(LOG_LVL_WARN,
                      "a signing thread did not stop within timeout_s: token left open at exit",
                      LOG_INT("timeout_s", SIGNER_STOP_TIMEOUT_S));
            return 0;
        }
    }
    /* The workers signed every staged request before they stopped: the syncer has
     * nothing left. */
    if (s->has_syncer) {
        pthread_mutex_lock(&s->lock);
        s->syncer_stop = 1;
        pthread_cond_broadcast(&s->park);
        pthread_mutex_unlock(&s->lock);
        if (pthread_timedjoin_np(s->syncer, NULL, &deadline) != 0) {
            LOG_EVENT(LOG_LVL_WARN,
                      "the audit log's sync thread did not stop within timeout_s: token left open",
                      LOG_INT("timeout_s", SIGNER_STOP_TIMEOUT_S));
            return 0;
        }
    }
    return 1;
}

/* With the workers gone: the stop entry (the log's last), the last checkpoint, the
 * log closed. 0 when the publisher did not stop: it may still read the log, so both
 * are left to the process's exit. */
static int close_audit(signer_ctx *s)
{
    if (!s->audit) {
        audit_publish_free(s->publish);
        return 1;
    }
    signer_audit_flush_summaries(s, util_mono_now() + SIGNER_PAST_EVERY_WINDOW_S);
    audit_entry a = {.kind = AUDIT_STOP};
    uint64_t seq;
    hsmca_err e;
    if (audit_log_append(s->audit, &a, &seq, &e) != HSMCA_OK ||
        audit_log_sync_through(s->audit, seq, &e) != HSMCA_OK)
        LOG_EVENT(LOG_LVL_WARN, "stop entry not logged", LOG_STR("error", e.msg));
    /* The last checkpoint covers the stop entry. A publisher stuck in a token call
     * still reads the log: leave both to the process's exit. */
    if (audit_publish_stop(s->publish, SIGNER_STOP_TIMEOUT_S) != 0)
        return 0;
    audit_publish_free(s->publish);
    /* How well the group commit did (bench_signer divides the intents by it). */
    char n_syncs[24];
    snprintf(n_syncs, sizeof(n_syncs), "%llu", (unsigned long long)audit_log_syncs(s->audit));
    LOG_EVENT(LOG_LVL_INFO, "audit log closed", LOG_STR("syncs", n_syncs));
    audit_log_close(s->audit);
    return 1;
}

void signer_stop_all(signer_ctx *s)
{
    if (!s)
        return;
    if (!join_threads(s) || !signer_casign_stop(s->ca, SIGNER_STOP_TIMEOUT_S) ||
        !signer_probe_stop(s))
        return;
    while (s->head) {
        signer_job *j = s->head;
        s->head = j->next;
        hsmca__ipc__sign_request__free_unpacked(j->req, NULL);
        signer_conn_unref_locked(j->conn);
        free(j);
    }
    signer_conn_unref_locked(s->conn);
    signer_casign_free(s->ca); /* a pending intermediate's result goes into the log */
    if (!close_audit(s))
        return;
    signer_stages_free(s);
    signer_caops_free(s->ca);
    p11_signkey_close(s->audit_key);
    p11_module_unload(s->audit_module);
    p11_pool_close(s->pool);
    p11_module_unload(s->module);
    X509_free(s->ca_cert);
    if (!s->policy_file_given)
        policy_set_free(s->policy_file);
    signer_policy_free(s);
    signer_bind_free(s->bind);
    serial_set_free(s->serials);
    rate_limiter_free(s->rate);
    if (s->refusals) /* at stop, the last window is over: report what it suppressed */
        log_limiter_flush(s->refusals, util_mono_now() + SIGNER_PAST_EVERY_WINDOW_S);
    log_limiter_free(s->refusals);
    window_limiter_free(s->deny_limit);
    window_limiter_free(s->frontend_deny_limit);
    free(s);
}

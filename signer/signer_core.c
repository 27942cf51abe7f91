/* signer_core.c - see signer_core.h.
 *
 * Workers pull jobs from one queue. A job keeps a reference on the connection it
 * came from, so a reply never goes to a newer front end and a closed fd number is
 * never reused under a worker's feet. */
#include "signer_core.h"

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

#include <openssl/sha.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "audit_log.h"
#include "certasm.h"
#include "ipc_frame.h"
#include "log.h"
#include "p11.h"
#include "sigalg.h"
#include "signer_limits.h"
#include "signer_tbs.h"
#include "util.h"

typedef struct signer_conn {
    int fd;
    int refs; /* guarded by signer_ctx.lock */
} signer_conn;

typedef struct signer_job {
    struct signer_job *next;
    uint64_t id;
    size_t cost; /* bytes it holds, counted against SIGNER_MAX_QUEUE_BYTES */
    signer_conn *conn;
    Hsmca__Ipc__SignRequest *req;
} signer_job;

#define SIGNER_MAX_WORKERS 64
/* Longer than SIGNER_SEND_TIMEOUT_MS, so a worker blocked on a stalled front
 * end is back before the deadline. */
#define SIGNER_STOP_TIMEOUT_S 3
/* Refusal lines logged per second; a flood beyond is counted in one summary
 * line per second, so it cannot drown the lines that matter. */
#define SIGNER_REFUSAL_LINES_PER_S 50

struct signer_ctx {
    p11_module *module;
    p11_pool *pool;
    p11_signkey *audit_key; /* pkcs11.audit_key; NULL when none is configured */
    audit_log *audit;       /* audit.dir; NULL when none is configured */
    X509 *ca_cert;
    tbs_policy policy;
    hsmca_config cfg; /* our copy: the policy's strings point into it */
    const sigalg *alg;
    serial_set *serials;
    rate_limiter *rate;
    log_limiter *refusals; /* refusal lines per interval; the rest are counted */
    struct stat pin_stat;  /* the PIN file as read at start: a change re-enables login */
    int ctl_fd; /* to ask the supervisor for a new front end; -1: none */

    pthread_mutex_t lock;
    pthread_cond_t more;
    signer_conn *conn;
    signer_job *head, *tail;
    int queued;
    size_t queued_bytes;
    int stopping;
    pthread_t workers[SIGNER_MAX_WORKERS];
    int n_workers;
    /* What each worker is signing, for the watchdog (guarded by lock). */
    struct signer_busy {
        signer_job *job;   /* NULL when idle */
        double started;    /* monotonic */
        int answered;      /* the request got its reply (from the worker or the watchdog) */
    } busy[SIGNER_MAX_WORKERS];
};

typedef struct {
    signer_ctx *s;
    int idx;
} signer_worker_arg;

static void conn_unref_locked(signer_conn *c)
{
    if (c && --c->refs == 0) {
        close(c->fd);
        free(c);
    }
}

p11_signkey *signer_audit_key(signer_ctx *s) { return s->audit_key; }

int signer_conn_fd(signer_ctx *s)
{
    pthread_mutex_lock(&s->lock);
    int fd = s->conn ? s->conn->fd : -1;
    pthread_mutex_unlock(&s->lock);
    return fd;
}

void signer_set_ctl_fd(signer_ctx *s, int ctl_fd) { s->ctl_fd = ctl_fd; }

static void answer_overdue(signer_ctx *s);

/* After the token refused the PIN nothing logs in again, until the PIN file
 * is replaced or rewritten (then a fresh signer reads it, once). */
static int pin_file_changed(const signer_ctx *s)
{
    struct stat now;
    if (stat(s->cfg.pin_file, &now) != 0)
        return 0;
    return now.st_ino != s->pin_stat.st_ino || now.st_size != s->pin_stat.st_size ||
           now.st_mtim.tv_sec != s->pin_stat.st_mtim.tv_sec ||
           now.st_mtim.tv_nsec != s->pin_stat.st_mtim.tv_nsec;
}

int signer_tick(signer_ctx *s)
{
    hsmca_err ae;
    if (s->audit && audit_log_flush(s->audit, &ae) != HSMCA_OK) {
        /* The failed log said so once; the next intent is refused with the reason. */
    }
    answer_overdue(s);
    log_limiter_flush(s->refusals, util_mono_now());
    int refused = p11_pool_get_state(s->pool) == P11_POOL_PIN_REFUSED ||
                  (s->audit_key && p11_signkey_get_state(s->audit_key) == P11_POOL_PIN_REFUSED);
    if (refused && pin_file_changed(s)) {
        log_warn("the PIN file %s changed: restarting the signer to try it once",
                 s->cfg.pin_file);
        return 1;
    }
    return 0;
}

void signer_conn_set(signer_ctx *s, int fd)
{
    signer_conn *c = calloc(1, sizeof(*c));
    if (!c)
        fatal("out of memory");
    c->fd = fd;
    c->refs = 1;
    pthread_mutex_lock(&s->lock);
    /* The old front end is gone or replaced: a worker waiting to send to it is
     * released now, not after the send timeout, and its queued jobs are dropped
     * as the workers reach them, so the new front end finds room at once. */
    if (s->conn)
        shutdown(s->conn->fd, SHUT_RDWR);
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

/* A front end that has not read a reply for this long is stalled (or hostile):
 * it is cut off and replaced rather than allowed to hold a signing thread. */
#define SIGNER_SEND_TIMEOUT_MS 2000

/* Cuts off c if it is still the current connection and asks the supervisor for
 * a new front end; what and waited_ms say which reply found no room, for the log. */
static void conn_cut_stalled(signer_ctx *s, signer_conn *c, const char *what, int waited_ms)
{
    pthread_mutex_lock(&s->lock);
    int current = s->conn == c;
    if (current) {
        shutdown(c->fd, SHUT_RDWR);
        conn_unref_locked(s->conn);
        s->conn = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (!current)
        return;
    log_warn("front end stopped reading replies (%s waited %d ms); cutting it off", what,
             waited_ms);
    char b = CTL_RESTART_PEER;
    if (s->ctl_fd >= 0 && write(s->ctl_fd, &b, 1) != 1)
        log_warn("cannot ask the supervisor to restart the front end: %s", strerror(errno));
}

/* Sends the reply to id on c, waiting at most timeout_ms for room; what names
 * the reply in the log line of a cut. */
static void reply_within(signer_ctx *s, signer_conn *c, uint64_t id, hsmca_code code,
                         const char *reason, const uint8_t *cert, size_t cert_len, int timeout_ms,
                         const char *what)
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
    hsmca_code rc = ipc_send_within(c->fd, IPC_SIGN_REPLY, id, buf, n, timeout_ms, &e);
    if (rc == HSMCA_EUNAVAIL)
        conn_cut_stalled(s, c, what, timeout_ms);
    else if (rc != HSMCA_OK)
        log_warn("reply %llu not delivered: %s", (unsigned long long)id, e.msg);
}

/* A refusal: the reason before the requester, so a long requester cannot push
 * it off the line; a flood of refusals is summarized per interval. requester
 * is NULL for a request refused before it was unpacked (queue full). */
static void log_refusal(signer_ctx *s, uint64_t id, hsmca_code code, const char *reason,
                        const char *requester)
{
    if (!log_limiter_allow(s->refusals, util_mono_now()))
        return;
    char ids[24];
    snprintf(ids, sizeof(ids), "%llu", (unsigned long long)id);
    if (requester)
        LOG_EVENT(LOG_LVL_WARN, "refused request", LOG_STR("reason", reason),
                  LOG_STR("code", hsmca_code_name(code)), LOG_STR("request_id", ids),
                  LOG_STR("requester", requester));
    else
        LOG_EVENT(LOG_LVL_WARN, "refused request", LOG_STR("reason", reason),
                  LOG_STR("code", hsmca_code_name(code)), LOG_STR("request_id", ids));
}

static size_t job_cost(const signer_request_shape *shape)
{
    /* What a queued request holds once unpacked: the job, protobuf-c's struct,
     * and copies of its fields (their sizes were checked on the wire). */
    return sizeof(signer_job) + sizeof(Hsmca__Ipc__SignRequest) + shape->tbs_len +
           shape->requester_len + 1 + shape->csr_sha256_len + 64;
}

hsmca_code signer_queue_reserve(signer_ctx *s, const signer_request_shape *shape, uint64_t id)
{
    size_t cost = job_cost(shape);
    pthread_mutex_lock(&s->lock);
    signer_conn *c = s->conn;
    int full = s->queued >= SIGNER_MAX_QUEUE || s->queued_bytes + cost > SIGNER_MAX_QUEUE_BYTES;
    int q = s->queued;
    size_t qb = s->queued_bytes;
    if (full && c)
        c->refs++;
    pthread_mutex_unlock(&s->lock);
    if (!full)
        return HSMCA_OK;
    if (c) {
        char why[128];
        snprintf(why, sizeof(why), "invariant 7: signer queue full (%d requests, %zu bytes)", q,
                 qb);
        log_refusal(s, id, HSMCA_ERATE, why, NULL);
        /* The main thread also serves the control channel: it waits for a
         * stalled front end only briefly. */
        reply_within(s, c, id, HSMCA_ERATE, why, NULL, 0, SIGNER_MAIN_SEND_TIMEOUT_MS,
                     "the queue is full and a refusal");
        pthread_mutex_lock(&s->lock);
        conn_unref_locked(c);
        pthread_mutex_unlock(&s->lock);
    }
    return HSMCA_ERATE;
}

void signer_submit(signer_ctx *s, uint64_t id, Hsmca__Ipc__SignRequest *req,
                   const signer_request_shape *shape)
{
    signer_job *j = calloc(1, sizeof(*j));
    if (!j)
        fatal("out of memory");
    j->id = id;
    j->req = req;
    j->cost = job_cost(shape);
    pthread_mutex_lock(&s->lock);
    if (!s->conn) {
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
    s->queued_bytes += j->cost;
    pthread_cond_signal(&s->more);
    pthread_mutex_unlock(&s->lock);
}

/* The issue-intent entry, durable before the signature (invariant 8). Any audit
 * failure is UNAVAILABLE: nothing is signed, and istio-agent retries. */
static HSMCA_MUSTCHECK hsmca_code audit_intent(signer_ctx *s, uint64_t id,
                                               const Hsmca__Ipc__SignRequest *req,
                                               const tbs_facts *f, uint64_t *seq, hsmca_err *e)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_ISSUE_INTENT;
    a.request_id = id;
    a.requester = (audit_str){req->requester, strlen(req->requester), 0};
    if (req->csr_sha256.len == 32)
        util_hex(req->csr_sha256.data, 32, a.csr_sha256);
    uint8_t h[SHA256_DIGEST_LENGTH];
    SHA256(req->tbs.data, req->tbs.len, h);
    util_hex(h, sizeof(h), a.tbs_sha256);
    util_hex(f->serial, f->serial_len, a.serial);
    a.not_before = f->not_before;
    a.not_after = f->not_after;
    snprintf(a.profile, sizeof(a.profile), "%s",
             req->profile == TBS_PROFILE_SERVING ? "serving" : "workload");
    a.sans = (audit_str){f->sans, strlen(f->sans), 0};
    hsmca_code rc = audit_log_append(s->audit, &a, seq, e);
    if (rc == HSMCA_OK)
        rc = audit_log_sync_through(s->audit, *seq, e);
    if (rc != HSMCA_OK && e)
        e->code = HSMCA_EUNAVAIL;
    return rc == HSMCA_OK ? HSMCA_OK : HSMCA_EUNAVAIL;
}

/* After the signature (or its failure): the issue-result entry. Not waited for: the
 * intent is the record that a signature may exist (durable before C_Sign), and the
 * next intent's sync (or the next start's replay) covers this line; holding the reply
 * for a second fdatasync would halve issuance for no stronger guarantee. A failure to
 * write it fails the log, so the next request stops rather than sign unlogged. */
static void audit_result(signer_ctx *s, uint64_t id, uint64_t intent_seq, const uint8_t *cert,
                         size_t cert_len, hsmca_code code, const char *why)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_ISSUE_RESULT;
    a.request_id = id;
    a.intent_seq = intent_seq;
    if (code == HSMCA_OK) {
        uint8_t h[SHA256_DIGEST_LENGTH];
        SHA256(cert, cert_len, h);
        util_hex(h, sizeof(h), a.cert_sha256);
    } else {
        snprintf(a.code, sizeof(a.code), "%s", hsmca_code_name(code));
        a.error = (audit_str){why, strlen(why), 0};
    }
    uint64_t seq;
    hsmca_err e;
    if (audit_log_append(s->audit, &a, &seq, &e) != HSMCA_OK)
        log_warn("issue-result of request %llu not logged: %s", (unsigned long long)id, e.msg);
}

/* A signer refusal (validation, rate, serial): a deny entry, not waited for (nothing
 * was released). */
static void audit_deny(signer_ctx *s, uint64_t id, const Hsmca__Ipc__SignRequest *req,
                       hsmca_code code, const char *why)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_DENY;
    a.request_id = id;
    a.requester = (audit_str){req->requester, strlen(req->requester), 0};
    snprintf(a.code, sizeof(a.code), "%s", hsmca_code_name(code));
    a.reason = (audit_str){why, strlen(why), 0};
    uint64_t seq;
    hsmca_err e;
    if (audit_log_append(s->audit, &a, &seq, &e) != HSMCA_OK) {
        /* Not logged per request: a failed log says so once (audit_log.c), and a
         * flood of refusals must not become a flood of lines. */
    }
}

#define NO_INTENT UINT64_MAX

/* Validate, rate-limit, record the serial, log the intent, sign, self-check and
 * assemble. Returns the certificate (OPENSSL_malloc'd) or a refusal in e; *intent_seq
 * is the intent entry's seq once one is durable (NO_INTENT before: a refusal then is
 * the signer's own, a deny). */
static HSMCA_MUSTCHECK hsmca_code sign_one(signer_ctx *s, uint64_t id,
                                           const Hsmca__Ipc__SignRequest *req, tbs_facts *facts,
                                           uint64_t *intent_seq, uint8_t **cert, size_t *cert_len,
                                           hsmca_err *e)
{
    *intent_seq = NO_INTENT;
    HSMCA_ENSURE(req->profile == TBS_PROFILE_WORKLOAD || req->profile == TBS_PROFILE_SERVING, e,
                 HSMCA_EPERM, "invariant 0: unknown profile %u", req->profile);
    HSMCA_GUARD(tbs_validate(req->tbs.data, req->tbs.len, (tbs_profile)req->profile, &s->policy,
                             util_wall_now(), facts, e));
    HSMCA_GUARD(rate_limiter_take(s->rate, util_mono_now(), e));
    HSMCA_GUARD(serial_set_insert(s->serials, facts->serial, facts->serial_len, e));
    /* Invariant 8, log before sign. (A failure here leaves the serial marked used: a
     * retry comes with a fresh serial from the front end.) */
    uint64_t seq = NO_INTENT;
    if (s->audit)
        HSMCA_GUARD(audit_intent(s, id, req, facts, &seq, e));
    *intent_seq = seq;

    uint8_t digest[64], sig[1024];
    size_t sig_len = sizeof(sig);
    HSMCA_ENSURE(sigalg_digest(s->alg, req->tbs.data, req->tbs.len, digest), e, HSMCA_EINTERNAL,
                 "cannot hash the TBS");
    HSMCA_GUARD(p11_pool_sign_digest(s->pool, digest, s->alg->digest_len, sig, &sig_len, e));
    /* Verify before release: a faulty token (or a fault attack on RSA-CRT) must
     * not put a bad signature into the world. The certificate is the TBS we
     * checked plus this signature, so checking the signature over its digest is
     * the whole check (and much cheaper than re-parsing the certificate). */
    HSMCA_ENSURE(sigalg_verify_digest(s->alg, X509_get0_pubkey(s->ca_cert), digest, sig, sig_len),
                 e, HSMCA_EINTERNAL, "token signature failed verification");
    return certasm_assemble(req->tbs.data, req->tbs.len, s->alg->nid, sig, sig_len, cert,
                            cert_len, e);
}

/* The log line of an issuance: until the audit log lands it is the only
 * record, so it names every SAN, with their count and the SAN extension's hash
 * (which still identify them when a long list is capped in the line). The
 * requester comes last: it is the front end's word. */
static void log_signed(const Hsmca__Ipc__SignRequest *req, const tbs_facts *f)
{
    char serial[2 * PROFILE_SERIAL_MAX + 1], san_hash[65], not_after[24], n_sans[12];
    util_hex(f->serial, f->serial_len, serial);
    util_hex(f->san_sha256, sizeof(f->san_sha256), san_hash);
    snprintf(not_after, sizeof(not_after), "%lld", (long long)f->not_after);
    snprintf(n_sans, sizeof(n_sans), "%d", f->n_sans);
    LOG_EVENT(LOG_LVL_INFO,
              req->profile == TBS_PROFILE_SERVING ? "signed serving certificate"
                                                  : "signed workload certificate",
              LOG_STR("serial", serial), LOG_STR("not_after", not_after),
              LOG_STR("n_sans", n_sans), LOG_STR("sans", f->sans),
              LOG_STR("san_sha256", san_hash), LOG_STR("requester", req->requester));
}

/* Claims the right to answer the job a worker holds: 1 for the first caller
 * (the worker or the watchdog), 0 when it was answered already. */
static int claim_answer(signer_ctx *s, int idx)
{
    pthread_mutex_lock(&s->lock);
    int mine = !s->busy[idx].answered;
    s->busy[idx].answered = 1;
    pthread_mutex_unlock(&s->lock);
    return mine;
}

static void sign_job(signer_ctx *s, int idx, signer_job *j)
{
    uint8_t *cert = NULL;
    size_t cert_len = 0;
    tbs_facts facts;
    hsmca_err e;
    uint64_t intent_seq;
    hsmca_err_clear(&e);
    hsmca_code rc = sign_one(s, j->id, j->req, &facts, &intent_seq, &cert, &cert_len, &e);
    int mine = claim_answer(s, idx);
    if (s->audit && intent_seq != NO_INTENT)
        audit_result(s, j->id, intent_seq, cert, cert_len, mine ? rc : HSMCA_EUNAVAIL,
                     mine ? e.msg : "answered by the watchdog; certificate discarded");
    else if (s->audit && rc != HSMCA_EUNAVAIL)
        audit_deny(s, j->id, j->req, rc, e.msg); /* not the log's own failure */
    if (!mine) {
        /* The watchdog answered UNAVAILABLE while the token call hung: the
         * certificate was never released, and its serial stays used. */
        log_warn("token call returned after the request was answered; result discarded");
        OPENSSL_free(cert);
        return;
    }
    if (rc == HSMCA_OK)
        log_signed(j->req, &facts);
    else
        log_refusal(s, j->id, e.code, e.msg, j->req->requester);
    reply_within(s, j->conn, j->id, rc, rc == HSMCA_OK ? "" : e.msg, cert, cert_len,
                 SIGNER_SEND_TIMEOUT_MS, "a reply");
    OPENSSL_free(cert);
}

/* The watchdog, from the main loop: a request whose token call has run past
 * pkcs11.sign_timeout is answered UNAVAILABLE now; its worker (and session)
 * come back when the call returns, and the other workers go on. */
static void answer_overdue(signer_ctx *s)
{
    double now = util_mono_now();
    for (int i = 0; i < s->n_workers; i++) {
        pthread_mutex_lock(&s->lock);
        struct signer_busy *b = &s->busy[i];
        signer_job *j = b->job;
        int overdue = j && !b->answered && now - b->started > s->cfg.sign_timeout;
        uint64_t id = j ? j->id : 0;
        signer_conn *c = overdue ? j->conn : NULL;
        if (overdue) {
            b->answered = 1;
            c->refs++;
        }
        pthread_mutex_unlock(&s->lock);
        if (!overdue)
            continue;
        char why[160];
        snprintf(why, sizeof(why), "token did not answer within %u s (signing call hung)",
                 s->cfg.sign_timeout);
        log_warn("request %llu: %s; answered UNAVAILABLE", (unsigned long long)id, why);
        reply_within(s, c, id, HSMCA_EUNAVAIL, why, NULL, 0, SIGNER_MAIN_SEND_TIMEOUT_MS,
                     "a hung call's refusal");
        pthread_mutex_lock(&s->lock);
        conn_unref_locked(c);
        pthread_mutex_unlock(&s->lock);
    }
}

static void *worker(void *arg)
{
    signer_worker_arg *wa = arg;
    signer_ctx *s = wa->s;
    int idx = wa->idx;
    free(wa);
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
        s->busy[idx] = (struct signer_busy){j, util_mono_now(), 0};
        pthread_mutex_unlock(&s->lock);

        if (current) /* a reply for an old front end would go nowhere */
            sign_job(s, idx, j);
        hsmca__ipc__sign_request__free_unpacked(j->req, NULL);
        pthread_mutex_lock(&s->lock);
        s->busy[idx].job = NULL;
        s->queued_bytes -= j->cost;
        conn_unref_locked(j->conn);
        pthread_mutex_unlock(&s->lock);
        free(j);
    }
}

/* The CA certificate must be a CA, carry an SKI (invariant 1 checks AKI against
 * it) and certify exactly the key in the token. */
static HSMCA_MUSTCHECK hsmca_code check_ca(signer_ctx *s, const char *path, hsmca_err *e)
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
    s->alg = p11_pool_sigalg(s->pool);
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
    p->ca_sig_nid = s->alg->nid;
    p->max_ttl = cfg->max_ttl;
    p->serving_max_ttl = cfg->serving_cert_ttl;
    p->trust_domains[0] = cfg->trust_domain;
    p->n_trust_domains = 1;
    config_serving_names(cfg, p->serving_dns, &p->n_serving_dns, p->serving_ips,
                         &p->n_serving_ips);
}

/* The audit key (DESIGN.md §6), checked like the CA key: opened before the
 * sandbox, refused naming the check, and its public key's fingerprint logged
 * so an operator can tell which key signs the log. */
static HSMCA_MUSTCHECK hsmca_code open_audit_key(signer_ctx *s, const hsmca_config *cfg,
                                                 const char *pin, hsmca_err *e)
{
    if (!cfg->audit_key_uri[0]) {
        log_info("no audit key configured (pkcs11.audit_key is empty)");
        return HSMCA_OK;
    }
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = p11_signkey_open(s->module, cfg->audit_key_uri, pin, &s->audit_key, &why);
    if (rc != HSMCA_OK)
        return hsmca_fail(e, rc, "audit key (pkcs11.audit_key): %s", why.msg);
    char pub[2 * P11_ED25519_PUB_LEN + 1];
    util_hex(p11_signkey_public_raw(s->audit_key), P11_ED25519_PUB_LEN, pub);
    LOG_EVENT(LOG_LVL_INFO, "audit key ready", LOG_STR("key", cfg->audit_key_uri),
              LOG_STR("type", "Ed25519"), LOG_STR("sha256", p11_signkey_fingerprint(s->audit_key)),
              LOG_STR("public_key", pub));
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code open_token(signer_ctx *s, const hsmca_config *cfg, hsmca_err *e)
{
    if (cfg->softhsm2_conf[0])
        setenv("SOFTHSM2_CONF", cfg->softhsm2_conf, 1);
    char pin[256];
    if (stat(cfg->pin_file, &s->pin_stat) != 0)
        memset(&s->pin_stat, 0, sizeof(s->pin_stat));
    hsmca_code rc = util_read_secret(cfg->pin_file, pin, sizeof(pin), e);
    if (rc != HSMCA_OK)
        return rc;
    rc = p11_module_load(cfg->module_path, &s->module, e);
    if (rc == HSMCA_OK)
        rc = p11_pool_open(s->module, cfg->ca_key_uri, pin, cfg->sessions, &s->pool, e);
    if (rc == HSMCA_OK)
        rc = open_audit_key(s, cfg, pin, e);
    OPENSSL_cleanse(pin, sizeof(pin));
    return rc;
}

/* The replay at start (issue 6 item 5): every intent's serial whose certificate has
 * not expired goes back into the serial set, so uniqueness survives a restart and the
 * set holds only what can still matter. */
typedef struct {
    serial_set *serials;
    int64_t now;
    uint64_t restored, expired, dups;
} replay_ctx;

static int unhex(const char *hex, uint8_t *out, size_t *len)
{
    size_t n = strlen(hex);
    if (n % 2 || n / 2 > PROFILE_SERIAL_MAX)
        return 0;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return 0;
        out[i] = (uint8_t)v;
    }
    *len = n / 2;
    return 1;
}

static void replay_entry(void *ctx, const audit_entry *ent)
{
    replay_ctx *r = ctx;
    if (ent->kind != AUDIT_ISSUE_INTENT)
        return;
    if (ent->not_after <= r->now) {
        r->expired++;
        return;
    }
    uint8_t serial[PROFILE_SERIAL_MAX];
    size_t len;
    hsmca_err e;
    if (!unhex(ent->serial, serial, &len))
        return; /* the parser checked the hex: cannot happen */
    if (serial_set_restore(r->serials, serial, len, &e) == HSMCA_OK)
        r->restored++;
    else
        r->dups++;
}

/* Opens audit.dir (created for the signer's user when started as root, since it
 * reopens the file after switching user), replays it into the serial set and records
 * a start entry. */
static HSMCA_MUSTCHECK hsmca_code open_audit_log(signer_ctx *s, const hsmca_config *cfg,
                                                 hsmca_err *e)
{
    if (!cfg->audit_dir[0]) {
        log_warn("no audit log (audit.dir is empty): certificates are signed without a "
                 "durable record, and serial uniqueness does not survive a restart");
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
    replay_ctx r = {s->serials, util_wall_now(), 0, 0, 0};
    audit_replay_stats st;
    HSMCA_GUARD(audit_log_open(cfg->audit_dir, owner, group, replay_entry, &r, &s->audit, &st, e));
    char n_entries[24], n_restored[24], n_expired[24], n_dups[24], n_cut[24];
    snprintf(n_entries, sizeof(n_entries), "%llu", (unsigned long long)st.entries);
    snprintf(n_restored, sizeof(n_restored), "%llu", (unsigned long long)r.restored);
    snprintf(n_expired, sizeof(n_expired), "%llu", (unsigned long long)r.expired);
    snprintf(n_dups, sizeof(n_dups), "%llu", (unsigned long long)r.dups);
    snprintf(n_cut, sizeof(n_cut), "%llu", (unsigned long long)st.cut_bytes);
    LOG_EVENT(LOG_LVL_INFO, "audit log replayed", LOG_STR("dir", cfg->audit_dir),
              LOG_STR("entries", n_entries), LOG_STR("serials_restored", n_restored),
              LOG_STR("serials_expired", n_expired), LOG_STR("serials_duplicate", n_dups),
              LOG_STR("cut_bytes", n_cut));
    audit_entry a = {.kind = AUDIT_START};
    uint64_t seq;
    HSMCA_GUARD(audit_log_append(s->audit, &a, &seq, e));
    return audit_log_sync_through(s->audit, seq, e);
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
    s->ctl_fd = -1;
    if (!(s->ca_cert = certasm_load_pem(cfg->ca_cert, e)) || open_token(s, cfg, e) != HSMCA_OK ||
        check_ca(s, cfg->ca_cert, e) != HSMCA_OK) {
        signer_stop_all(s);
        return NULL;
    }
    s->cfg = *cfg;
    build_policy(s);
    s->serials = serial_set_new();
    s->rate = rate_limiter_new(cfg->rate_per_second, cfg->rate_burst);
    s->refusals = log_limiter_new(SIGNER_REFUSAL_LINES_PER_S, 1.0);
    if (!s->serials || !s->rate || !s->refusals) {
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        signer_stop_all(s);
        return NULL;
    }
    if (open_audit_log(s, cfg, e) != HSMCA_OK) {
        signer_stop_all(s);
        return NULL;
    }
    /* Workers never take SIGTERM/SIGINT: the main thread's poll must see them. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    s->n_workers = (int)(cfg->sessions < SIGNER_MAX_WORKERS ? cfg->sessions : SIGNER_MAX_WORKERS);
    for (int i = 0; i < s->n_workers; i++) {
        signer_worker_arg *wa = malloc(sizeof(*wa));
        if (!wa)
            fatal("out of memory");
        *wa = (signer_worker_arg){s, i};
        if (pthread_create(&s->workers[i], NULL, worker, wa) != 0)
            fatal("cannot start worker thread");
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
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
            log_warn("a signing thread did not stop within %d s (token call hung?); exiting "
                     "without closing the token",
                     SIGNER_STOP_TIMEOUT_S);
            return;
        }
    }
    while (s->head) {
        signer_job *j = s->head;
        s->head = j->next;
        hsmca__ipc__sign_request__free_unpacked(j->req, NULL);
        conn_unref_locked(j->conn);
        free(j);
    }
    conn_unref_locked(s->conn);
    if (s->audit) { /* the workers are gone: the stop entry is the log's last */
        audit_entry a = {.kind = AUDIT_STOP};
        uint64_t seq;
        hsmca_err e;
        if (audit_log_append(s->audit, &a, &seq, &e) != HSMCA_OK ||
            audit_log_sync_through(s->audit, seq, &e) != HSMCA_OK)
            log_warn("stop entry not logged: %s", e.msg);
        audit_log_close(s->audit);
    }
    p11_signkey_close(s->audit_key);
    p11_pool_close(s->pool);
    p11_module_unload(s->module);
    X509_free(s->ca_cert);
    serial_set_free(s->serials);
    rate_limiter_free(s->rate);
    if (s->refusals) /* at stop, the last window is over: report what it suppressed */
        log_limiter_flush(s->refusals, util_mono_now() + 3600);
    log_limiter_free(s->refusals);
    free(s);
}

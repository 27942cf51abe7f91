/* signer_work.c - the signer's queue and workers (see signer_work.h):
 * admission against the queue's bounds, log before sign, validation, signing,
 * the reply (bounded against a front end that stopped reading), and the
 * watchdog for token calls that hang.
 *
 * A job keeps a reference on the connection it came from, so a reply never goes
 * to a newer front end and a closed fd number is never reused under a worker. */
#include "signer_ctx.h"
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

#include "audit_log.h"
#include "certasm.h"
#include "ipc_frame.h"
#include "log.h"
#include "p11.h"
#include "sigalg.h"
#include "signer_audit.h"
#include "signer_limits.h"
#include "signer_policy.h"
#include "signer_revoke.h"
#include "util.h"

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
        signer_conn_unref_locked(s->conn);
        s->conn = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (!current)
        return;
    LOG_EVENT(LOG_LVL_WARN, "front end stopped reading replies; cutting it off",
              LOG_STR("what", what), LOG_INT("waited_ms", waited_ms));
    signer_ask_new_frontend(s);
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
        LOG_EVENT(LOG_LVL_ERROR, "reply does not fit a frame", LOG_UINT("bytes", n));
        return;
    }
    hsmca__ipc__sign_reply__pack(&r, buf);
    hsmca_err e;
    hsmca_code rc = ipc_send_within(c->fd, IPC_SIGN_REPLY, id, buf, n, timeout_ms, &e);
    if (rc == HSMCA_EUNAVAIL)
        conn_cut_stalled(s, c, what, timeout_ms);
    else if (rc != HSMCA_OK)
        LOG_EVENT(LOG_LVL_WARN, "reply not delivered", LOG_UINT("request_id", id),
                  LOG_STR("error", e.msg));
}

/* The frame's id in decimal (the signing log's request_id). */
static const char *ids_of(uint64_t id, char buf[24])
{
    snprintf(buf, 24, "%llu", (unsigned long long)id);
    return buf;
}

/* The front end's id of the request for our lines about it (the wire check let
 * only IPC_REQUEST_ID_LEN hex digits through), "-" without one. */
static const char *signer_req_id(const Hsmca__Ipc__SignRequest *req)
{
    return req && req->request_id && req->request_id[0] ? req->request_id : "-";
}

/* A refusal: the reason before the requester, so a long requester cannot push
 * it off the line; a flood of refusals is summarized per interval. req is NULL
 * for a request refused before it was unpacked (queue full). */
static void log_refusal(signer_ctx *s, uint64_t id, hsmca_code code, const char *reason,
                        const Hsmca__Ipc__SignRequest *req)
{
    signer_stats_refused(s, code, reason);
    if (!log_limiter_allow(s->refusals, util_mono_now()))
        return;
    char ids[24];
    snprintf(ids, sizeof(ids), "%llu", (unsigned long long)id);
    if (req)
        LOG_EVENT(LOG_LVL_WARN, "refused request", LOG_STR("reason", reason),
                  LOG_STR("code", hsmca_code_name(code)), LOG_STR("request_id", ids),
                  LOG_STR("req", signer_req_id(req)), LOG_STR("requester", req->requester));
    else
        LOG_EVENT(LOG_LVL_WARN, "refused request", LOG_STR("reason", reason),
                  LOG_STR("code", hsmca_code_name(code)), LOG_STR("request_id", ids));
}

static size_t job_cost(const signer_request_shape *shape)
{
    /* What a queued request holds once unpacked: the job, protobuf-c's struct,
     * and copies of its fields (their sizes were checked on the wire). */
    return sizeof(signer_job) + sizeof(Hsmca__Ipc__SignRequest) + shape->tbs_len +
           shape->requester_len + 1 + shape->csr_sha256_len + shape->authenticator_len + 1 +
           shape->token_len + 1 + shape->cluster_len + 1 + shape->request_id_len + 1 + shape->client_serial_len +
           shape->client_issuer_len + 64;
}

/* Refuses request id on the main thread, before it is queued (nothing was unpacked or
 * nothing could be allocated for it): logged, and answered on the current connection;
 * what names the reply in the log line of a cut. The main thread also serves the control
 * channel: it waits for a stalled front end only briefly. */
static void refuse_unqueued(signer_ctx *s, uint64_t id, hsmca_code code, const char *why,
                            const char *what)
{
    pthread_mutex_lock(&s->lock);
    signer_conn *c = s->conn;
    if (c)
        c->refs++;
    pthread_mutex_unlock(&s->lock);
    if (!c)
        return;
    log_refusal(s, id, code, why, NULL);
    reply_within(s, c, id, code, why, NULL, 0, SIGNER_MAIN_SEND_TIMEOUT_MS, what);
    pthread_mutex_lock(&s->lock);
    signer_conn_unref_locked(c);
    pthread_mutex_unlock(&s->lock);
}

hsmca_code signer_queue_reserve(signer_ctx *s, const signer_request_shape *shape, uint64_t id)
{
    size_t cost = job_cost(shape);
    pthread_mutex_lock(&s->lock);
    int full = s->queued >= SIGNER_MAX_QUEUE || s->queued_bytes + cost > SIGNER_MAX_QUEUE_BYTES;
    int q = s->queued;
    size_t qb = s->queued_bytes;
    pthread_mutex_unlock(&s->lock);
    if (!full)
        return HSMCA_OK;
    char why[128];
    snprintf(why, sizeof(why), "invariant 7: signer queue full (%d requests, %zu bytes)", q, qb);
    refuse_unqueued(s, id, HSMCA_ERATE, why, "the queue is full and a refusal");
    return HSMCA_ERATE;
}

void signer_submit(signer_ctx *s, uint64_t id, Hsmca__Ipc__SignRequest *req,
                   const signer_request_shape *shape)
{
    signer_job *j = req ? calloc(1, sizeof(*j)) : NULL;
    if (!j) { /* this request's own memory: it fails, the signer goes on (hsmca_err.h) */
        if (req)
            hsmca__ipc__sign_request__free_unpacked(req, NULL);
        refuse_unqueued(s, id, HSMCA_ENOMEM, "out of memory (unpacking or queueing the request)",
                        "out of memory and a refusal");
        return;
    }
    j->id = id;
    j->req = req;
    j->cost = job_cost(shape);
    j->received = util_mono_now();
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
    pthread_cond_signal(&s->check);
    pthread_mutex_unlock(&s->lock);
}

/* Appends the issue-intent entry; the syncer's sync (sync_intents) makes it durable
 * before the signature (invariant 8). Any audit failure is UNAVAILABLE: nothing is
 * signed, and istio-agent retries. */
static HSMCA_MUSTCHECK hsmca_code audit_intent(signer_ctx *s, uint64_t id,
                                               const Hsmca__Ipc__SignRequest *req,
                                               const tbs_facts *f,
                                               const uint8_t tbs_sha256[SHA256_DIGEST_LENGTH],
                                               int bound, uint64_t *seq, hsmca_err *e)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_ISSUE_INTENT;
    a.request_id = id;
    a.requester = (audit_str){req->requester, strlen(req->requester), 0};
    if (req->authenticator) /* the front end's word, as the requester is */
        a.authenticator = (audit_str){req->authenticator, strlen(req->authenticator), 0};
    if (req->csr_sha256.len == 32)
        util_hex(req->csr_sha256.data, 32, a.csr_sha256);
    util_hex(tbs_sha256, SHA256_DIGEST_LENGTH, a.tbs_sha256);
    util_hex(f->serial, f->serial_len, a.serial);
    a.not_before = f->not_before;
    a.not_after = f->not_after;
    snprintf(a.profile, sizeof(a.profile), "%s",
             req->profile == PROFILE_SERVING ? "serving" : "workload");
    a.sans = (audit_str){f->sans, strlen(f->sans), 0};
    if (bound) /* the signer checked the URI SAN against the caller's token itself */
        snprintf(a.bound, sizeof(a.bound), "jwt");
    /* with a remote cluster's keys (signer_bind_check refused any other cluster name) */
    if (bound && req->cluster && req->cluster[0] &&
        config_cluster_index(&s->cfg, req->cluster, strlen(req->cluster)) > 0)
        snprintf(a.cluster, sizeof(a.cluster), "%s", req->cluster);
    if (audit_log_append(s->audit, &a, seq, e) == HSMCA_OK)
        return HSMCA_OK;
    if (e)
        e->code = HSMCA_EUNAVAIL;
    return HSMCA_EUNAVAIL;
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
        LOG_EVENT(LOG_LVL_WARN, "issue-result not logged", LOG_UINT("request_id", id),
                  LOG_STR("error", e.msg));
}

/* A job's first step: validate, rate-limit, record the serial, hash the
 * TBS and append the intent. j->st->intent_seq is the intent entry's seq once one is
 * appended (SIGNER_NO_INTENT before: a refusal then is the signer's own, a deny). */
static HSMCA_MUSTCHECK hsmca_code prepare_one(signer_ctx *s, signer_job *j, hsmca_err *e)
{
    const Hsmca__Ipc__SignRequest *req = j->req;
    tbs_facts *facts = &j->st->facts;
    j->st->intent_seq = SIGNER_NO_INTENT;
    HSMCA_ENSURE(req->profile == PROFILE_WORKLOAD || req->profile == PROFILE_SERVING, e,
                 HSMCA_EPERM, "invariant 0: unknown profile %u", req->profile);
    /* Invariants 1-5 under the policy in force, and identity binding. */
    int bound = 0;
    HSMCA_GUARD(signer_policy_check(s, req, facts, &bound, e));
    HSMCA_GUARD(rate_limiter_take(s->rate, util_mono_now(), e));
    HSMCA_GUARD(serial_set_insert(s->serials, facts->serial, facts->serial_len, facts->not_after,
                                  util_wall_now(), e));
    /* Invariant 8, log before sign. (A failure here leaves the serial marked used: a
     * retry comes with a fresh serial from the front end.) */
    HSMCA_ENSURE(sigalg_digest(s->alg, req->tbs.data, req->tbs.len, j->st->digest), e,
                 HSMCA_EINTERNAL, "cannot hash the TBS");
    if (!s->audit)
        return HSMCA_OK;
    /* The intent names the TBS by its SHA-256: the signature's digest when the CA signs
     * with SHA-256 (hashed once), its own otherwise. */
    uint8_t own[SHA256_DIGEST_LENGTH];
    const uint8_t *tbs_sha256 = j->st->digest;
    if (strcmp(s->alg->digest, "SHA256") != 0)
        tbs_sha256 = SHA256(req->tbs.data, req->tbs.len, own);
    /* Revocations (signer_revoke.h): checked and the intent written under one lock, so a
     * revocation by identity either refuses this request or finds its serial. */
    pthread_mutex_lock(&s->ca->rev_lock);
    hsmca_code rc = signer_revoke_check(s->ca, req, facts, e);
    if (rc == HSMCA_OK)
        rc = audit_intent(s, j->id, req, facts, tbs_sha256, bound, &j->st->intent_seq, e);
    if (rc == HSMCA_OK)
        signer_revoke_note(s->ca, req, facts);
    pthread_mutex_unlock(&s->ca->rev_lock);
    return rc;
}

/* The second step, the intent durable: sign, self-check and assemble. Returns the
 * certificate (OPENSSL_malloc'd) or a refusal in e. */
static HSMCA_MUSTCHECK hsmca_code sign_prepared(signer_ctx *s, const signer_job *j, uint8_t **cert,
                                                size_t *cert_len, hsmca_err *e)
{
    const Hsmca__Ipc__SignRequest *req = j->req;
    uint8_t sig[IPC_SIG_MAX];
    size_t sig_len = sizeof(sig);
    HSMCA_GUARD(p11_pool_sign_digest(s->pool, j->st->digest, s->alg->digest_len, sig, &sig_len, e));
    /* Verify before release: a faulty token (or a fault attack on RSA-CRT) must
     * not put a bad signature into the world. The certificate is the TBS we
     * checked plus this signature, so checking the signature over its digest is
     * the whole check (and much cheaper than re-parsing the certificate). */
    HSMCA_ENSURE(
        sigalg_verify_digest(s->alg, X509_get0_pubkey(s->ca_cert), j->st->digest, sig, sig_len), e,
        HSMCA_EINTERNAL, "token signature failed verification");
    return certasm_assemble(req->tbs.data, req->tbs.len, s->alg->nid, sig, sig_len, cert, cert_len,
                            e);
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
              req->profile == PROFILE_SERVING ? "signed serving certificate"
                                                  : "signed workload certificate",
              LOG_STR("req", signer_req_id(req)), LOG_STR("serial", serial),
              LOG_STR("not_after", not_after), LOG_STR("n_sans", n_sans),
              LOG_STR("sans", f->sans), LOG_STR("san_sha256", san_hash),
              LOG_STR("requester", req->requester));
}

/* Claims the right to answer j: 1 for the first caller (its thread or the
 * watchdog), 0 when it was answered already. An atomic flag, not the signer's
 * lock: every request passes here, and the lock is the threads' busiest. */
static int claim_answer(signer_job *j)
{
    return __atomic_exchange_n(&j->answered, 1, __ATOMIC_ACQ_REL) == 0;
}

static int was_answered(const signer_job *j)
{
    return __atomic_load_n(&j->answered, __ATOMIC_ACQUIRE);
}

/* The last step of a job whose checks (its stage's rc and err) are done and whose
 * intent, if any, is durable: sign, log the result, reply. */
static void finish_job(signer_ctx *s, signer_job *j)
{
    uint8_t *cert = NULL;
    size_t cert_len = 0;
    const char *late = "answered by the watchdog; certificate discarded";
    hsmca_code rc = j->st->rc;
    hsmca_err *e = &j->st->err;
    if (rc == HSMCA_OK && was_answered(j)) /* the watchdog gave up while it was staged */
        late = "answered by the watchdog before signing; not signed";
    else if (rc == HSMCA_OK) {
        signer_stats_queue_wait(s, util_mono_now() - j->received);
        rc = sign_prepared(s, j, &cert, &cert_len, e);
    }
    int mine = claim_answer(j);
    if (s->audit && j->st->intent_seq != SIGNER_NO_INTENT)
        audit_result(s, j->id, j->st->intent_seq, cert, cert_len, mine ? rc : HSMCA_EUNAVAIL,
                     mine ? e->msg : late);
    else if (s->audit && rc != HSMCA_EUNAVAIL)
        signer_audit_deny(s, j->id, j->req->requester, rc, e->msg); /* not the log's failure */
    if (!mine) {
        /* The watchdog answered UNAVAILABLE while the token call (or the log's sync)
         * hung: the certificate was never released, and its serial stays used. */
        if (cert)
            log_event(LOG_LVL_WARN,
                      "token call returned after the request was answered; result discarded", NULL,
                      0);
        OPENSSL_free(cert);
        return;
    }
    if (rc == HSMCA_OK) {
        signer_stats_issued(&s->stats, j->req->profile == PROFILE_SERVING ? SIGSTAT_PROFILE_SERVING
                                                                   : SIGSTAT_PROFILE_WORKLOAD);
        log_signed(j->req, &j->st->facts);
    } else
        log_refusal(s, j->id, e->code, e->msg, j->req);
    reply_within(s, j->conn, j->id, rc, rc == HSMCA_OK ? "" : e->msg, cert, cert_len,
                 SIGNER_SEND_TIMEOUT_MS, "a reply");
    OPENSSL_free(cert);
}

/* Under s->lock: the first job of list (linked by next) the watchdog must answer now,
 * or NULL. */
static signer_job *overdue_in(signer_ctx *s, signer_job *list, double now)
{
    for (signer_job *j = list; j; j = j->next)
        if (!was_answered(j) && j->conn == s->conn && now - j->started > s->cfg.sign_timeout)
            return j;
    return NULL;
}

/* Under s->lock: a job the watchdog must answer now (a worker's or a staged one), or
 * NULL. */
static signer_job *overdue_job(signer_ctx *s, double now)
{
    for (int i = 0; i < s->n_workers; i++) {
        signer_job *j = s->busy[i];
        if (j && !was_answered(j) && j->current && now - j->started > s->cfg.sign_timeout)
            return j;
    }
    signer_job *j = overdue_in(s, s->parked, now);
    return j ? j : overdue_in(s, s->ready, now);
}

/* The watchdog, from the main loop: a request whose token call (or whose intent's
 * sync) has run past pkcs11.sign_timeout is answered UNAVAILABLE now; its worker (and
 * session) come back when the call returns, and the other workers go on. */
void signer_answer_overdue(signer_ctx *s)
{
    double now = util_mono_now();
    for (;;) {
        pthread_mutex_lock(&s->lock);
        signer_job *j = overdue_job(s, now);
        uint64_t id = j ? j->id : 0;
        char rid[IPC_REQUEST_ID_LEN + 2];
        snprintf(rid, sizeof(rid), "%s", signer_req_id(j ? j->req : NULL));
        signer_conn *c = j ? j->conn : NULL;
        int mine = j && claim_answer(j); /* its thread may have answered it meanwhile */
        if (mine)
            c->refs++;
        pthread_mutex_unlock(&s->lock);
        if (!j)
            return;
        if (!mine)
            continue;
        char why[160], idbuf[24];
        snprintf(why, sizeof(why), "token did not answer within %u s (signing call hung)",
                 s->cfg.sign_timeout);
        LOG_EVENT(LOG_LVL_WARN, "request answered UNAVAILABLE", LOG_STR("reason", why),
                  LOG_STR("request_id", ids_of(id, idbuf)), LOG_STR("req", rid));
        signer_stats_refused(s, HSMCA_EUNAVAIL, why);
        reply_within(s, c, id, HSMCA_EUNAVAIL, why, NULL, 0, SIGNER_MAIN_SEND_TIMEOUT_MS,
                     "a hung call's refusal");
        pthread_mutex_lock(&s->lock);
        signer_conn_unref_locked(c);
        pthread_mutex_unlock(&s->lock);
    }
}

/* Lets go of j, done with by thread idx: its request, its stage, its place in the
 * queue's bytes. */
static void job_release(signer_ctx *s, int idx, signer_job *j)
{
    hsmca__ipc__sign_request__free_unpacked(j->req, NULL);
    pthread_mutex_lock(&s->lock);
    s->busy[idx] = NULL;
    s->queued_bytes -= j->cost;
    signer_conn_unref_locked(j->conn);
    s->free_stages[s->n_free_stages++] = j->st;
    if (idx == 0) {
        s->checking = 0;
        if (s->stopping) /* the workers may be waiting for it to stop */
            pthread_cond_broadcast(&s->more);
    }
    pthread_mutex_unlock(&s->lock);
    free(j);
}

void *signer_checker(void *arg)
{
    signer_worker_arg *wa = arg;
    signer_ctx *s = wa->s;
    free(wa);
    for (;;) {
        pthread_mutex_lock(&s->lock);
        signer_job *j = signer_next_to_check(s);
        s->busy[0] = j;
        pthread_mutex_unlock(&s->lock);
        if (!j)
            return NULL;
        if (j->current) { /* a reply for an old front end would go nowhere */
            hsmca_err_clear(&j->st->err);
            j->st->rc = prepare_one(s, j, &j->st->err);
            if (j->st->rc == HSMCA_OK) {
                signer_stage_checked(s, j);
                continue;
            }
            finish_job(s, j); /* the refusal */
        }
        job_release(s, 0, j);
    }
}

void *signer_worker(void *arg)
{
    signer_worker_arg *wa = arg;
    signer_ctx *s = wa->s;
    int idx = wa->idx;
    free(wa);
    for (;;) {
        pthread_mutex_lock(&s->lock);
        signer_job *j = signer_next_to_sign(s);
        s->busy[idx] = j;
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->lock);
        if (!j)
            return NULL;
        /* A stop cuts the front end's connection first: a certificate signed now would
         * reach no one, and a slow token would hold the stop for every staged job. Its
         * intent gets its result (not signed), with no token call. */
        if (j->current && stopping && j->st->rc == HSMCA_OK)
            j->st->rc = hsmca_fail(&j->st->err, HSMCA_EUNAVAIL,
                                   "the signer is stopping; not signed");
        if (j->current)
            finish_job(s, j);
        else if (s->audit) /* its intent is in the log: say it was not signed */
            audit_result(s, j->id, j->st->intent_seq, NULL, 0, HSMCA_EUNAVAIL,
                         "its front end was replaced before signing; not signed");
        job_release(s, idx, j);
    }
}

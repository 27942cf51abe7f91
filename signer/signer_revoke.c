/* signer_revoke.c - see signer_revoke.h. */
#include "signer_revoke.h"
#include "signer_casign.h"
#include "signer_crl.h"
#include "signer_caops.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/sha.h>
#include <openssl/x509.h>

#include "audit_crl.h"
#include "audit_ica.h"
#include "ipc_contract.h"
#include "log.h"
#include "policy.h"
#include "policy_spiffe.h"
#include "util.h"

/* The serials a revocation by identity revokes: at most this many named in its reply. */
#define REVOKE_REPLY_SERIALS 100

static void when_text(int64_t t, char *out, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm) || !strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, n, "%lld", (long long)t);
}

/* The presented certificate: of this CA (its issuer Name's SHA-256), not revoked. */
static HSMCA_MUSTCHECK hsmca_code check_presented(signer_caops *ca,
                                                  const Hsmca__Ipc__SignRequest *req, hsmca_err *e)
{
    if (req->client_serial.len == 0)
        return HSMCA_OK;
    const unsigned char *der = NULL;
    size_t der_len = 0;
    uint8_t mine[SHA256_DIGEST_LENGTH];
    HSMCA_ENSURE(X509_NAME_get0_der(X509_get_subject_name(ca->ca_cert), &der, &der_len), e,
                 HSMCA_EINTERNAL, "cannot encode the CA certificate's subject");
    SHA256(der, der_len, mine);
    HSMCA_ENSURE(req->client_issuer.len == sizeof(mine) &&
                     memcmp(req->client_issuer.data, mine, sizeof(mine)) == 0,
                 e, HSMCA_EPERM, "client certificate: its issuer is not this CA: renewal refused");
    char hex[2 * IPC_CLIENT_SERIAL_MAX + 1];
    util_hex(req->client_serial.data, req->client_serial.len, hex);
    for (size_t i = audit_crl_count(ca->crl); i-- > 0;) {
        const audit_crl_rev *r = audit_crl_at(ca->crl, i);
        if (strcmp(r->serial, hex) != 0)
            continue;
        char when[32];
        when_text(r->time, when, sizeof(when));
        return hsmca_fail(e, HSMCA_EPERM,
                          "client certificate serial %s: revoked (%s) at %s: renewal refused "
                          "(ask with a token instead)",
                          hex, audit_crl_reason_name(r->reason), when);
    }
    return HSMCA_OK;
}

/* The URI SAN of a workload TBS: the first name of facts->sans (signer_tbs_ext.c). */
static const char *uri_of(const tbs_facts *f, size_t *len)
{
    if (strncmp(f->sans, "uri:", 4) != 0)
        return NULL;
    const char *id = f->sans + 4, *comma = strchr(id, ',');
    *len = comma ? (size_t)(comma - id) : strlen(id);
    return id;
}

hsmca_code signer_revoke_check(signer_caops *ca, const Hsmca__Ipc__SignRequest *req,
                               const tbs_facts *facts, hsmca_err *e)
{
    if (!ca->crl)
        return HSMCA_OK;
    HSMCA_GUARD(check_presented(ca, req, e));
    size_t len = 0;
    const char *id = req->profile == PROFILE_WORKLOAD ? uri_of(facts, &len) : NULL;
    const audit_crl_ban *b = id ? audit_crl_ban_of(ca->crl, id, len, util_wall_now()) : NULL;
    if (!b)
        return HSMCA_OK;
    char until[40] = "until lifted";
    if (b->expires) {
        memcpy(until, "until ", 6);
        when_text(b->expires, until + 6, sizeof(until) - 6);
    }
    return hsmca_fail(e, HSMCA_EPERM,
                      "identity %.*s: revoked by %s (%s, audit log seq %llu) %s: no certificate "
                      "for it",
                      (int)len, id, b->ns ? "namespace" : "identity",
                      audit_crl_reason_name(b->reason), (unsigned long long)b->seq, until);
}

void signer_revoke_note(signer_caops *ca, const Hsmca__Ipc__SignRequest *req,
                        const tbs_facts *facts)
{
    if (!ca->crl || req->profile != PROFILE_WORKLOAD)
        return;
    char serial[2 * PROFILE_SERIAL_MAX + 1];
    util_hex(facts->serial, facts->serial_len, serial);
    hsmca_err e;
    if (audit_crl_note(ca->crl, serial, facts->sans, strlen(facts->sans), facts->not_after,
                       util_wall_now(), &e) != HSMCA_OK)
        LOG_EVENT(LOG_LVL_WARN,
                  "serial not noted under its identity (a revocation by identity will not find it)",
                  LOG_STR("serial", serial), LOG_STR("error", e.msg));
}

/* ---- the admin op ---------------------------------------------------------------------- */

typedef struct {
    signer_caops *ca;
    const char *user, *reason;
    json_t *serials; /* the first REVOKE_REPLY_SERIALS, for the reply */
    size_t n;
    hsmca_code rc;
    hsmca_err *e;
    uint64_t last; /* the seq of the last entry written */
} revoke_run;

/* One certificate of the identity: its revoke entry, applied as the replay would. */
static void revoke_one(void *ctx, const char *serial)
{
    revoke_run *r = ctx;
    if (r->rc != HSMCA_OK)
        return;
    audit_entry ent = {.kind = AUDIT_REVOKE};
    snprintf(ent.serial, sizeof(ent.serial), "%s", serial);
    snprintf(ent.profile, sizeof(ent.profile), "workload");
    ent.reason = (audit_str){r->reason, strlen(r->reason), 0};
    ent.requester = (audit_str){r->user, strlen(r->user), 0};
    uint64_t seq;
    r->rc = audit_log_append_checked(r->ca->audit, &ent, signer_crl_rule, r->ca, &seq, r->e);
    ent.seq = r->last = seq;
    if (r->rc == HSMCA_OK)
        r->rc = audit_crl_apply(r->ca->crl, &ent, 0, r->e);
    if (r->rc == HSMCA_OK && r->ca->ica)
        r->rc = audit_ica_apply(r->ca->ica, &ent, 0, r->e);
    if (r->rc == HSMCA_OK && r->n++ < REVOKE_REPLY_SERIALS)
        json_array_append_new(r->serials, json_string(serial));
}

/* What the request names: *target (the ID, or spiffe://TD/ns/NS), *ns; NULL target with e. */
static HSMCA_MUSTCHECK hsmca_code target_of(signer_caops *ca, json_t *req, char *target, size_t n,
                                            int *ns, hsmca_err *e)
{
    const char *id = json_string_value(json_object_get(req, "identity"));
    const char *nsname = json_string_value(json_object_get(req, "namespace"));
    HSMCA_ENSURE(!id != !nsname, e, HSMCA_EINVAL, "identity or namespace: one of them");
    *ns = nsname != NULL;
    if (id) {
        HSMCA_GUARD(policy_spiffe_id_check(id, strlen(id), NULL, 0, e));
        snprintf(target, n, "%s", id);
        return HSMCA_OK;
    }
    HSMCA_ENSURE(policy_is_k8s_name(nsname, strlen(nsname), 63, 0), e, HSMCA_EINVAL,
                 "namespace: a Kubernetes namespace name");
    snprintf(target, n, "spiffe://%s/ns/%s", ca->cfg->trust_domain, nsname);
    return HSMCA_OK;
}

static json_t *lift(signer_caops *ca, const char *user, const char *target, int ns, hsmca_err *e)
{
    audit_entry ent = {.kind = AUDIT_BAN_LIFT};
    snprintf(ent.profile, sizeof(ent.profile), "%s", ns ? "namespace" : "identity");
    ent.identity = (audit_str){target, strlen(target), 0};
    ent.requester = (audit_str){user, strlen(user), 0};
    ent.time = (int64_t)time(NULL);
    uint64_t seq = 0;
    pthread_mutex_lock(&ca->rev_lock);
    hsmca_code rc = audit_crl_ban_on(ca->crl, target, ns, ent.time)
                        ? HSMCA_OK
                        : hsmca_fail(e, HSMCA_ENOTFOUND,
                                     "no revocation by %s is in force on %s: nothing to lift",
                                     ns ? "namespace" : "identity", target);
    if (rc == HSMCA_OK)
        rc = audit_log_append_checked(ca->audit, &ent, signer_crl_rule, ca, &seq, e);
    if (rc == HSMCA_OK)
        rc = audit_log_sync_through(ca->audit, seq, e);
    ent.seq = seq;
    if (rc == HSMCA_OK)
        rc = audit_crl_apply(ca->crl, &ent, 0, e);
    pthread_mutex_unlock(&ca->rev_lock);
    if (rc != HSMCA_OK)
        return NULL;
    LOG_EVENT(LOG_LVL_INFO, "revocation by identity lifted", LOG_STR("identity", target),
              LOG_STR("user", user));
    return json_pack("{s:b, s:s, s:I}", "ok", 1, "identity", target, "seq", (json_int_t)seq);
}

/* The revoke-identity entry, then a revoke entry per certificate of it, one sync. */
static HSMCA_MUSTCHECK hsmca_code ban(signer_caops *ca, audit_entry *ent, revoke_run *run,
                                      hsmca_err *e)
{
    uint64_t seq;
    HSMCA_GUARD(audit_log_append_checked(ca->audit, ent, signer_crl_rule, ca, &seq, e));
    ent->seq = run->last = seq;
    HSMCA_GUARD(audit_crl_apply(ca->crl, ent, 0, e));
    char target[AUDIT_STR_MAX + 1];
    snprintf(target, sizeof(target), "%.*s", (int)ent->identity.len, ent->identity.p);
    audit_crl_serials_of(ca->crl, target, strcmp(ent->profile, "namespace") == 0, ent->time,
                         revoke_one, run);
    HSMCA_GUARD(run->rc);
    return audit_log_sync_through(ca->audit, run->last, e);
}

static json_t *ban_reply(signer_caops *ca, const char *target, revoke_run *run, uint64_t seq)
{
    json_t *r = json_pack("{s:b, s:s, s:I, s:I, s:O}", "ok", 1, "identity", target, "seq",
                          (json_int_t)seq, "revoked", (json_int_t)run->n, "serials", run->serials);
    hsmca_err why;
    hsmca_err_clear(&why);
    if (r && !ca->cfg->crl_path[0])
        json_object_set_new(r, "crl_error", json_string("crl.path is not set: no CRL is written"));
    else if (r && run->n == 0)
        json_object_set_new(r, "crl_error", json_string("no certificate to list: CRL unchanged"));
    else if (r && signer_crl_publish(ca, r, &why) == HSMCA_OK)
        return SIGNER_REPLY_LATER; /* once the CRL is signed, or not (signer_casign.h) */
    else if (r)
        json_object_set_new(r, "crl_error", json_string(why.msg));
    return r;
}

json_t *signer_revoke_identity(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    char target[AUDIT_STR_MAX + 1];
    int ns = 0;
    if (!ca->crl || !ca->audit) {
        hsmca_fail(e, HSMCA_EUNAVAIL, "revocations need the audit log (audit.dir): they are "
                                      "its entries");
        return NULL;
    }
    if (target_of(ca, req, target, sizeof(target), &ns, e) != HSMCA_OK)
        return NULL;
    if (json_is_true(json_object_get(req, "lift")))
        return lift(ca, user, target, ns, e);
    const char *reason = json_string_value(json_object_get(req, "reason"));
    json_t *until = json_object_get(req, "until");
    int64_t now = (int64_t)time(NULL), end = until ? (int64_t)json_integer_value(until) : 0;
    if (!reason || audit_crl_reason_code(reason, strlen(reason)) < 0 ||
        (until && !json_is_integer(until)) || end < 0 || (end && end <= now)) {
        hsmca_fail(e, HSMCA_EINVAL, !reason || audit_crl_reason_code(reason, strlen(reason)) < 0
                                        ? "reason: one of %s"
                                        : "until: a time in the future (unix seconds), or 0",
                   audit_crl_reason_names());
        return NULL;
    }
    if (ca->cfg->crl_path[0] && signer_casign_busy(ca)) { /* as ca-revoke (signer_crl_ops.c) */
        hsmca_fail(e, HSMCA_EUNAVAIL, "a CA signature is out (a token call hangs?): nothing "
                                      "revoked now (try again)");
        return NULL;
    }
    audit_entry ent = {.kind = AUDIT_BAN, .time = now, .expires = end};
    snprintf(ent.profile, sizeof(ent.profile), "%s", ns ? "namespace" : "identity");
    ent.identity = (audit_str){target, strlen(target), 0};
    ent.reason = (audit_str){reason, strlen(reason), 0};
    ent.requester = (audit_str){user, strlen(user), 0};
    revoke_run run = {ca, user, reason, json_array(), 0, HSMCA_OK, e, 0};
    pthread_mutex_lock(&ca->rev_lock);
    hsmca_code rc =
        run.serials ? ban(ca, &ent, &run, e) : hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    pthread_mutex_unlock(&ca->rev_lock);
    json_t *r = NULL;
    if (rc == HSMCA_OK) {
        LOG_EVENT(LOG_LVL_INFO, "identity revoked", LOG_STR("identity", target),
                  LOG_STR("reason", reason), LOG_STR("user", user));
        r = ban_reply(ca, target, &run, ent.seq);
    }
    json_decref(run.serials);
    return r;
}

/* audit_ica.c - see audit_ica.h. Requests are kept in seq order (ids grow), found by a
 * binary search. */
#include "audit_ica.h"
#include "audit_ica_renew.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "util.h"

struct audit_ica {
    audit_ica_req *v;
    size_t n, cap;
    audit_ica_renew *renew; /* current intermediates, stopped clusters, revoked keys */
    uint64_t m_in_force; /* the latest config entry's approval_required; 0: none logged */
    size_t n_open;       /* requests whose intent has no result yet */
    size_t settled;      /* every request below this index is issued, denied or expired */
};

hsmca_code audit_ica_new(audit_ica **out, hsmca_err *e)
{
    *out = calloc(1, sizeof(**out));
    HSMCA_ENSURE(*out, e, HSMCA_ENOMEM, "out of memory");
    if (audit_ica_renew_new(&(*out)->renew, e) != HSMCA_OK) {
        free(*out);
        *out = NULL;
        return HSMCA_ENOMEM;
    }
    return HSMCA_OK;
}

void audit_ica_free(audit_ica *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].csr_b64);
        free(t->v[i].cert_b64);
    }
    free(t->v);
    audit_ica_renew_free(t->renew);
    free(t);
}

size_t audit_ica_count(const audit_ica *t)
{
    return t ? t->n : 0;
}

const audit_ica_req *audit_ica_at(const audit_ica *t, size_t i)
{
    return t && i < t->n ? &t->v[i] : NULL;
}

static audit_ica_req *find(const audit_ica *t, uint64_t id)
{
    size_t lo = 0, hi = t ? t->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return t && lo < t->n && t->v[lo].id == id ? &t->v[lo] : NULL;
}

const audit_ica_req *audit_ica_find(const audit_ica *t, uint64_t id)
{
    return find(t, id);
}

/* Whether two users are one: by uid when both have one, else by name. */
static int same_user(const char *a, int64_t auid, const char *b, int64_t buid)
{
    if (auid >= 0 && buid >= 0)
        return auid == buid;
    return strncmp(a, b, AUDIT_ICA_USER_MAX) == 0;
}

static int64_t uid_of(const audit_entry *ent)
{
    return ent->has_uid ? (int64_t)ent->uid : -1;
}

/* A user name as kept (cut at AUDIT_ICA_USER_MAX bytes). */
static void user_of(const audit_str *s, char out[AUDIT_ICA_USER_MAX + 1])
{
    size_t n = s->len < AUDIT_ICA_USER_MAX ? s->len : AUDIT_ICA_USER_MAX;
    memcpy(out, s->p ? s->p : "", n);
    out[n] = '\0';
}

hsmca_code audit_ica_may_approve(const audit_ica *t, uint64_t id, const char *user, int64_t uid,
                                 int64_t now, hsmca_err *e)
{
    const audit_ica_req *r = find(t, id);
    HSMCA_ENSURE(r, e, HSMCA_ENOTFOUND, "intermediate request %llu does not exist",
                 (unsigned long long)id);
    HSMCA_ENSURE(!r->denied, e, HSMCA_EPERM,
                 "intermediate request %llu was denied by %s: it cannot be approved",
                 (unsigned long long)id, r->denied_by);
    HSMCA_ENSURE(!r->cert_b64 && r->n_approvers < r->required && !r->auto_renews, e, HSMCA_EPERM,
                 "intermediate request %llu already has its %llu approvals (or its "
                 "auto-approval)",
                 (unsigned long long)id, (unsigned long long)r->required);
    HSMCA_ENSURE(now <= r->expires, e, HSMCA_EPERM,
                 "intermediate request %llu expired (approval.pending_ttl): it cannot be "
                 "approved; ask again with `hsmca intermediate request`",
                 (unsigned long long)id);
    HSMCA_ENSURE(!same_user(user, uid, r->requester, r->requester_uid), e, HSMCA_EPERM,
                 "intermediate request %llu: %s asked for it, and a requester's own approval "
                 "does not count",
                 (unsigned long long)id, r->requester);
    for (unsigned i = 0; i < r->n_approvers; i++)
        HSMCA_ENSURE(!same_user(user, uid, r->approvers[i], r->approver_uids[i]), e, HSMCA_EPERM,
                     "intermediate request %llu: %s approved it already (the same user counts "
                     "once) as %s (users are compared by uid where the log has it)",
                     (unsigned long long)id, user, r->approvers[i]);
    return HSMCA_OK;
}

hsmca_code audit_ica_may_deny(const audit_ica *t, uint64_t id, hsmca_err *e)
{
    const audit_ica_req *r = find(t, id);
    HSMCA_ENSURE(r, e, HSMCA_ENOTFOUND, "intermediate request %llu does not exist",
                 (unsigned long long)id);
    HSMCA_ENSURE(!r->denied, e, HSMCA_EPERM, "intermediate request %llu was denied already",
                 (unsigned long long)id);
    HSMCA_ENSURE(!r->cert_b64, e, HSMCA_EPERM,
                 "intermediate request %llu is signed already: revoke it instead",
                 (unsigned long long)id);
    HSMCA_ENSURE(!r->intent_open, e, HSMCA_EPERM,
                 "intermediate request %llu: a signature is in flight (intent seq %llu); deny "
                 "refused: revoke the certificate once it is issued",
                 (unsigned long long)id, (unsigned long long)r->intent_seq);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code add_request(audit_ica *t, const audit_entry *ent, hsmca_err *e)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        HSMCA_ENSURE(cap <= SIZE_MAX / sizeof(audit_ica_req), e, HSMCA_ENOMEM, "out of memory");
        audit_ica_req *v = realloc(t->v, cap * sizeof(*v));
        HSMCA_ENSURE(v, e, HSMCA_ENOMEM, "out of memory");
        t->v = v;
        t->cap = cap;
    }
    audit_ica_req *r = &t->v[t->n];
    memset(r, 0, sizeof(*r));
    r->csr_b64 = malloc(ent->csr.len + 1);
    HSMCA_ENSURE(r->csr_b64, e, HSMCA_ENOMEM, "out of memory");
    memcpy(r->csr_b64, ent->csr.p, ent->csr.len);
    r->csr_b64[ent->csr.len] = '\0';
    r->id = ent->seq;
    r->time = ent->time;
    r->expires = ent->expires;
    r->recorded = ent->required;
    r->required = ent->required > t->m_in_force ? ent->required : t->m_in_force;
    r->ttl_s = ent->ttl_s;
    r->requester_uid = uid_of(ent);
    user_of(&ent->requester, r->requester);
    snprintf(r->cluster, sizeof(r->cluster), "%s", ent->cluster);
    memcpy(r->key_sha256, ent->key_sha256, sizeof(r->key_sha256));
    t->n++;
    return HSMCA_OK;
}

/* An issue-intent of the intermediate profile, or an intermediate-cert: the request is
 * approved, not denied, not signed. */
static HSMCA_MUSTCHECK hsmca_code check_signable(const audit_ica_req *r, const audit_entry *ent,
                                                 hsmca_err *e)
{
    HSMCA_ENSURE(r, e, HSMCA_EPERM, "names intermediate request %llu, which does not exist",
                 (unsigned long long)ent->request_id);
    HSMCA_ENSURE(!r->denied && !r->cert_b64 && (r->n_approvers >= r->required || r->auto_renews),
                 e, HSMCA_EPERM,
                 "a CA certificate for intermediate request %llu, which has %u of its %llu "
                 "approvals%s",
                 (unsigned long long)r->id, r->n_approvers, (unsigned long long)r->required,
                 r->denied ? " and was denied" : r->cert_b64 ? " and was signed already" : "");
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code check_cert(const audit_ica_req *r, const audit_entry *ent,
                                             hsmca_err *e)
{
    HSMCA_GUARD(check_signable(r, ent, e));
    HSMCA_ENSURE(r->intent_seq, e, HSMCA_EPERM,
                 "the certificate of intermediate request %llu has no issue-intent before it",
                 (unsigned long long)r->id);
    size_t n;
    uint8_t *der = util_b64_decode(ent->cert.p, ent->cert.len, &n), md[32];
    HSMCA_ENSURE(der, e, HSMCA_EPERM, "intermediate-cert: the certificate is not base64");
    SHA256(der, n, md);
    free(der);
    char hex[65];
    util_hex(md, 32, hex);
    HSMCA_ENSURE(strcmp(hex, ent->cert_sha256) == 0, e, HSMCA_EPERM,
                 "intermediate-cert: cert_sha256 is not the SHA-256 of its certificate");
    return HSMCA_OK;
}

/* Keeps the certificate of a checked intermediate-cert. */
static HSMCA_MUSTCHECK hsmca_code add_cert(audit_ica_req *r, const audit_entry *ent, hsmca_err *e)
{
    r->cert_b64 = malloc(ent->cert.len + 1);
    HSMCA_ENSURE(r->cert_b64, e, HSMCA_ENOMEM, "out of memory");
    memcpy(r->cert_b64, ent->cert.p, ent->cert.len);
    r->cert_b64[ent->cert.len] = '\0';
    memcpy(r->cert_sha256, ent->cert_sha256, sizeof(r->cert_sha256));
    return HSMCA_OK;
}

uint8_t *audit_ica_renewal_message(const char *cluster, const uint8_t *csr_der, size_t len,
                                   size_t *out_len)
{
    static const char tag[] = "hsmca intermediate renewal";
    size_t cl = strlen(cluster), n = sizeof(tag) + cl + 1 + len;
    uint8_t *m = malloc(n);
    if (!m)
        return NULL;
    memcpy(m, tag, sizeof(tag)); /* its NUL too */
    memcpy(m + sizeof(tag), cluster, cl + 1);
    memcpy(m + sizeof(tag) + cl + 1, csr_der, len);
    *out_len = n;
    return m;
}

/* Whether proof is the renewed certificate's key's signature over r's renewal message. */
static int proof_ok(const audit_ica_req *p, const audit_ica_req *r, const uint8_t *proof,
                    size_t plen)
{
    size_t qn = 0, mn = 0;
    uint8_t *qder = util_b64_decode(r->csr_b64, strlen(r->csr_b64), &qn);
    uint8_t *msg = qder ? audit_ica_renewal_message(r->cluster, qder, qn, &mn) : NULL;
    int ok = msg && audit_ica_renew_verify(p, msg, mn, proof, plen);
    free(msg);
    free(qder);
    return ok;
}

hsmca_code audit_ica_may_auto(const audit_ica *t, uint64_t id, uint64_t renews,
                              const uint8_t *proof, size_t plen, int64_t now, hsmca_err *e)
{
    const audit_ica_req *r = find(t, id), *p = find(t, renews);
    HSMCA_ENSURE(r, e, HSMCA_ENOTFOUND, "intermediate request %llu does not exist",
                 (unsigned long long)id);
    HSMCA_ENSURE(!r->denied && !r->cert_b64 && !r->auto_renews && now <= r->expires, e,
                 HSMCA_EPERM, "an auto-approval of intermediate request %llu, which is not pending",
                 (unsigned long long)id);
    HSMCA_ENSURE(p && p->id < id && p->cert_b64 && strcmp(p->cluster, r->cluster) == 0, e,
                 HSMCA_EPERM,
                 "intermediate request %llu renews %llu, which is not an issued intermediate of "
                 "cluster %s",
                 (unsigned long long)id, (unsigned long long)renews, r->cluster);
    HSMCA_ENSURE(!p->revoked && now < p->not_after, e, HSMCA_EPERM,
                 "intermediate request %llu renews %llu, whose certificate is %s", (unsigned long long)id,
                 (unsigned long long)renews, p->revoked ? "revoked" : "expired");
    if (plen == 0)
        HSMCA_ENSURE(strcmp(p->key_sha256, r->key_sha256) == 0, e, HSMCA_EPERM,
                     "intermediate request %llu has another key than %llu and no proof signed "
                     "by its key",
                     (unsigned long long)id, (unsigned long long)renews);
    else
        HSMCA_ENSURE(proof_ok(p, r, proof, plen), e, HSMCA_EPERM,
                     "intermediate request %llu: its renewal proof does not verify under the "
                     "certificate of %llu",
                     (unsigned long long)id, (unsigned long long)renews);
    return HSMCA_OK;
}

hsmca_code audit_ica_may_renew(const audit_ica *t, uint64_t id, const char *origin,
                               const uint8_t *proof, size_t plen, int64_t now, uint64_t *renews,
                               hsmca_err *e)
{
    const audit_ica_req *r = find(t, id);
    HSMCA_ENSURE(r, e, HSMCA_ENOTFOUND, "intermediate request %llu does not exist",
                 (unsigned long long)id);
    uint64_t cur = 0;
    const audit_ica_req *p = audit_ica_renew_current(t->renew, r->cluster, &cur) ? find(t, cur)
                                                                                 : NULL;
    HSMCA_GUARD(audit_ica_renew_check(t->renew, r, p, origin, proof, plen, now, e));
    *renews = p->id;
    return HSMCA_OK;
}

/* A revoke entry of an intermediate: its request, found by serial, is revoked, and so is
 * its key for renewals (audit_ica_renew.h). */
static HSMCA_MUSTCHECK hsmca_code mark_revoked(audit_ica *t, const audit_entry *ent, hsmca_err *e)
{
    for (size_t i = 0; strcmp(ent->profile, AUDIT_ICA_PROFILE) == 0 && i < t->n; i++)
        if (t->v[i].cert_b64 && strcmp(t->v[i].serial, ent->serial) == 0) {
            t->v[i].revoked = 1;
            HSMCA_GUARD(audit_ica_renew_revoked(t->renew, &t->v[i], e));
        }
    return HSMCA_OK;
}

/* An auto-approval's rule at the entry's time, t unchanged: with an origin, the rule of
 * audit_ica_may_renew (and it renews the current intermediate it names); without, one from
 * a log written before that rule, audit_ica_may_auto's. */
static HSMCA_MUSTCHECK hsmca_code check_auto(const audit_ica *t, const audit_entry *ent,
                                             hsmca_err *e)
{
    size_t plen = 0;
    uint64_t cur = 0;
    uint8_t *proof = ent->proof.len ? util_b64_decode(ent->proof.p, ent->proof.len, &plen)
                                    : NULL;
    HSMCA_ENSURE(!ent->proof.len || proof, e, HSMCA_EPERM,
                 "intermediate-auto-approve: the proof is not base64");
    hsmca_code rc = ent->origin[0] ? audit_ica_may_renew(t, ent->request_id, ent->origin, proof,
                                                         plen, ent->time, &cur, e)
                                   : audit_ica_may_auto(t, ent->request_id, ent->renews, proof,
                                                        plen, ent->time, e);
    free(proof);
    if (rc == HSMCA_OK && ent->origin[0] && cur != ent->renews)
        rc = hsmca_fail(e, HSMCA_EPERM,
                        "intermediate request %llu: renews %llu, but its cluster's current "
                        "intermediate is %llu",
                        (unsigned long long)ent->request_id, (unsigned long long)ent->renews,
                        (unsigned long long)cur);
    return rc;
}

/* A revoke: never of the serial of an intermediate whose signature is in flight. */
static HSMCA_MUSTCHECK hsmca_code check_revoke(const audit_ica *t, const audit_entry *ent,
                                               hsmca_err *e)
{
    for (size_t i = t->settled; t->n_open && i < t->n; i++) {
        const audit_ica_req *r = &t->v[i];
        HSMCA_ENSURE(!r->intent_open || strcmp(r->serial, ent->serial) != 0, e, HSMCA_EPERM,
                     "intermediate request %llu: a signature is in flight (intent seq %llu); "
                     "revoke of serial %s refused: revoke the certificate once it is issued",
                     (unsigned long long)r->id, (unsigned long long)r->intent_seq, ent->serial);
    }
    return HSMCA_OK;
}

/* The rules an entry must pass, t unchanged. */
static HSMCA_MUSTCHECK hsmca_code check_step(const audit_ica *t, const audit_entry *ent,
                                             hsmca_err *e)
{
    const audit_ica_req *r = find(t, ent->request_id);
    char user[AUDIT_ICA_USER_MAX + 1];
    user_of(&ent->requester, user);
    switch (ent->kind) {
    case AUDIT_ICA_APPROVE:
        return audit_ica_may_approve(t, ent->request_id, user, uid_of(ent), ent->time, e);
    case AUDIT_ICA_DENY: return audit_ica_may_deny(t, ent->request_id, e);
    case AUDIT_ICA_CERT: return check_cert(r, ent, e);
    case AUDIT_ICA_FETCH:
        HSMCA_ENSURE(r && r->cert_b64, e, HSMCA_EPERM,
                     "a fetch of intermediate request %llu, which is not signed",
                     (unsigned long long)ent->request_id);
        return HSMCA_OK;
    case AUDIT_ISSUE_INTENT:
        if (strcmp(ent->profile, AUDIT_ICA_PROFILE) != 0)
            return HSMCA_OK;
        HSMCA_GUARD(check_signable(r, ent, e));
        HSMCA_ENSURE(!r->intent_open, e, HSMCA_EPERM,
                     "intermediate request %llu: a second issue-intent while the one at seq %llu "
                     "has no result",
                     (unsigned long long)r->id, (unsigned long long)r->intent_seq);
        return HSMCA_OK;
    case AUDIT_ICA_AUTO_APPROVE: return check_auto(t, ent, e);
    case AUDIT_REVOKE: return check_revoke(t, ent, e);
    default: return HSMCA_OK;
    }
}

/* Frees the CSRs of requests settled by time now (denied or expired) and moves the
 * settled mark past them: nothing reads a settled request's CSR again. */
static void sweep(audit_ica *t, int64_t now)
{
    int lead = 1;
    for (size_t i = t->settled; i < t->n; i++) {
        audit_ica_req *r = &t->v[i];
        audit_ica_state st = audit_ica_state_of(r, now);
        int done = (st == ICA_DENIED || st == ICA_EXPIRED || st == ICA_ISSUED) && !r->intent_open;
        if (done && st != ICA_ISSUED) {
            free(r->csr_b64);
            r->csr_b64 = NULL;
        }
        lead = lead && done;
        if (lead)
            t->settled = i + 1;
    }
}

/* A config entry: the approval.required in force reaches every request still waiting
 * (not issued, not denied, no signature in flight, not swept as expired), never below its
 * recorded count. */
static void set_in_force(audit_ica *t, uint64_t m)
{
    if (!m)
        return; /* an older log: the recorded counts rule */
    t->m_in_force = m;
    for (size_t i = t->settled; i < t->n; i++) {
        audit_ica_req *r = &t->v[i];
        if (!r->cert_b64 && !r->denied && !r->intent_open && r->csr_b64)
            r->required = r->recorded > m ? r->recorded : m;
    }
}

/* An issue-result closes its request's intent (request_id and intent_seq both match). */
static void close_intent(audit_ica *t, const audit_entry *ent)
{
    audit_ica_req *r = t->n_open ? find(t, ent->request_id) : NULL;
    if (r && r->intent_open && r->intent_seq == ent->intent_seq) {
        r->intent_open = 0;
        t->n_open--;
    }
}

/* The changes of an entry check_step accepted. */
static HSMCA_MUSTCHECK hsmca_code commit_step(audit_ica *t, const audit_entry *ent, hsmca_err *e)
{
    audit_ica_req *r = find(t, ent->request_id);
    switch (ent->kind) {
    case AUDIT_ICA_REQUEST:
        sweep(t, ent->time);
        return add_request(t, ent, e);
    case AUDIT_ICA_APPROVE:
        r->approver_uids[r->n_approvers] = uid_of(ent);
        user_of(&ent->requester, r->approvers[r->n_approvers++]);
        return HSMCA_OK;
    case AUDIT_ICA_DENY:
        r->denied = 1;
        user_of(&ent->requester, r->denied_by);
        snprintf(r->reason, sizeof(r->reason), "%.*s", (int)ent->reason.len,
                 ent->reason.p ? ent->reason.p : "");
        free(r->csr_b64); /* nothing signs it now */
        r->csr_b64 = NULL;
        return HSMCA_OK;
    case AUDIT_ICA_CERT:
        HSMCA_GUARD(add_cert(r, ent, e));
        return audit_ica_renew_issued(t->renew, r, e);
    case AUDIT_ICA_AUTO_APPROVE: r->auto_renews = ent->renews; return HSMCA_OK;
    case AUDIT_ISSUE_INTENT:
        if (strcmp(ent->profile, AUDIT_ICA_PROFILE) != 0)
            return HSMCA_OK;
        r->intent_seq = ent->seq;
        r->intent_open = 1;
        t->n_open++;
        snprintf(r->serial, sizeof(r->serial), "%s", ent->serial);
        r->not_after = ent->not_after;
        return HSMCA_OK;
    case AUDIT_ISSUE_RESULT: close_intent(t, ent); return HSMCA_OK;
    case AUDIT_CONFIG: set_in_force(t, ent->approval_required); return HSMCA_OK;
    case AUDIT_REVOKE: return mark_revoked(t, ent, e);
    default: return HSMCA_OK;
    }
}

static HSMCA_MUSTCHECK hsmca_code apply_step(audit_ica *t, const audit_entry *ent, hsmca_err *e)
{
    HSMCA_GUARD(check_step(t, ent, e));
    return commit_step(t, ent, e);
}

hsmca_code audit_ica_check(const audit_ica *t, const audit_entry *ent, hsmca_err *e)
{
    return check_step(t, ent, e);
}

size_t audit_ica_waiting(const audit_ica *t, const char *user, int64_t uid, int64_t now,
                         size_t *all)
{
    size_t mine = 0;
    *all = 0;
    for (size_t i = t ? t->settled : 0; t && i < t->n; i++) {
        const audit_ica_req *r = &t->v[i];
        audit_ica_state st = audit_ica_state_of(r, now);
        if (st != ICA_PENDING && st != ICA_APPROVED)
            continue;
        (*all)++;
        mine += same_user(user, uid, r->requester, r->requester_uid);
    }
    return mine;
}

hsmca_code audit_ica_apply(audit_ica *t, const audit_entry *ent, uint64_t off, hsmca_err *e)
{
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = apply_step(t, ent, &why);
    if (rc == HSMCA_OK)
        return HSMCA_OK;
    return hsmca_fail(e, rc == HSMCA_ENOMEM ? rc : HSMCA_EPERM, "log seq %llu (byte %llu): %s",
                      (unsigned long long)ent->seq, (unsigned long long)off, why.msg);
}

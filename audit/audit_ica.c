/* audit_ica.c - see audit_ica.h. Requests are kept in seq order (ids grow), found by a
 * binary search. */
#include "audit_ica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "util.h"

struct audit_ica {
    audit_ica_req *v;
    size_t n, cap;
};

hsmca_code audit_ica_new(audit_ica **out, hsmca_err *e)
{
    *out = calloc(1, sizeof(**out));
    HSMCA_ENSURE(*out, e, HSMCA_ENOMEM, "out of memory");
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

audit_ica_state audit_ica_state_of(const audit_ica_req *r, int64_t now)
{
    if (r->denied)
        return ICA_DENIED;
    if (r->cert_b64)
        return ICA_ISSUED;
    if (r->n_approvers >= r->required)
        return ICA_APPROVED;
    return now > r->expires ? ICA_EXPIRED : ICA_PENDING;
}

const char *audit_ica_state_name(audit_ica_state s)
{
    static const char *const names[] = {"pending", "approved", "issued", "denied", "expired"};
    return s <= ICA_EXPIRED ? names[s] : "unknown";
}

uint8_t *audit_ica_unbase64(const char *b64, size_t len, size_t *out_len)
{
    if (len == 0 || len % 4 != 0 || len > (size_t)INT32_MAX)
        return NULL;
    uint8_t *out = malloc(len / 4 * 3 + 1);
    if (!out)
        return NULL;
    int n = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)len);
    if (n < 0) {
        free(out);
        return NULL;
    }
    size_t pad = (b64[len - 1] == '=') + (len > 1 && b64[len - 2] == '=');
    *out_len = (size_t)n - pad;
    return out;
}

/* A user name as kept (cut at AUDIT_ICA_USER_MAX bytes). */
static void user_of(const audit_str *s, char out[AUDIT_ICA_USER_MAX + 1])
{
    size_t n = s->len < AUDIT_ICA_USER_MAX ? s->len : AUDIT_ICA_USER_MAX;
    memcpy(out, s->p ? s->p : "", n);
    out[n] = '\0';
}

hsmca_code audit_ica_may_approve(const audit_ica *t, uint64_t id, const char *user, int64_t now,
                                 hsmca_err *e)
{
    const audit_ica_req *r = find(t, id);
    HSMCA_ENSURE(r, e, HSMCA_ENOTFOUND, "intermediate request %llu does not exist",
                 (unsigned long long)id);
    HSMCA_ENSURE(!r->denied, e, HSMCA_EPERM,
                 "intermediate request %llu was denied by %s: it cannot be approved",
                 (unsigned long long)id, r->denied_by);
    HSMCA_ENSURE(!r->cert_b64 && r->n_approvers < r->required, e, HSMCA_EPERM,
                 "intermediate request %llu already has its %llu approvals",
                 (unsigned long long)id, (unsigned long long)r->required);
    HSMCA_ENSURE(now <= r->expires, e, HSMCA_EPERM,
                 "intermediate request %llu expired (approval.pending_ttl): it cannot be "
                 "approved; ask again with `hsmca intermediate request`",
                 (unsigned long long)id);
    HSMCA_ENSURE(strncmp(user, r->requester, AUDIT_ICA_USER_MAX) != 0, e, HSMCA_EPERM,
                 "intermediate request %llu: %s asked for it, and a requester's own approval "
                 "does not count",
                 (unsigned long long)id, r->requester);
    for (unsigned i = 0; i < r->n_approvers; i++)
        HSMCA_ENSURE(strncmp(user, r->approvers[i], AUDIT_ICA_USER_MAX) != 0, e, HSMCA_EPERM,
                     "intermediate request %llu: %s approved it already (the same user counts "
                     "once)",
                     (unsigned long long)id, user);
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
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code add_request(audit_ica *t, const audit_entry *ent, hsmca_err *e)
{
    HSMCA_ENSURE(t->n < AUDIT_ICA_MAX, e, HSMCA_EPERM, "more than %u intermediate requests",
                 AUDIT_ICA_MAX);
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
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
    r->required = ent->required;
    r->ttl_s = ent->ttl_s;
    user_of(&ent->requester, r->requester);
    snprintf(r->cluster, sizeof(r->cluster), "%s", ent->cluster);
    memcpy(r->key_sha256, ent->key_sha256, sizeof(r->key_sha256));
    t->n++;
    return HSMCA_OK;
}

/* An issue-intent of the intermediate profile, or an intermediate-cert: the request is
 * approved, not denied, not signed. */
static HSMCA_MUSTCHECK hsmca_code check_signable(audit_ica_req *r, const audit_entry *ent,
                                                 hsmca_err *e)
{
    HSMCA_ENSURE(r, e, HSMCA_EPERM, "names intermediate request %llu, which does not exist",
                 (unsigned long long)ent->request_id);
    HSMCA_ENSURE(!r->denied && !r->cert_b64 && r->n_approvers >= r->required, e, HSMCA_EPERM,
                 "a CA certificate for intermediate request %llu, which has %u of its %llu "
                 "approvals%s",
                 (unsigned long long)r->id, r->n_approvers, (unsigned long long)r->required,
                 r->denied ? " and was denied" : r->cert_b64 ? " and was signed already" : "");
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code add_cert(audit_ica_req *r, const audit_entry *ent, hsmca_err *e)
{
    HSMCA_GUARD(check_signable(r, ent, e));
    HSMCA_ENSURE(r->intent_seq, e, HSMCA_EPERM,
                 "the certificate of intermediate request %llu has no issue-intent before it",
                 (unsigned long long)r->id);
    size_t n;
    uint8_t *der = audit_ica_unbase64(ent->cert.p, ent->cert.len, &n), md[32];
    HSMCA_ENSURE(der, e, HSMCA_EPERM, "intermediate-cert: the certificate is not base64");
    SHA256(der, n, md);
    free(der);
    char hex[65];
    util_hex(md, 32, hex);
    HSMCA_ENSURE(strcmp(hex, ent->cert_sha256) == 0, e, HSMCA_EPERM,
                 "intermediate-cert: cert_sha256 is not the SHA-256 of its certificate");
    r->cert_b64 = malloc(ent->cert.len + 1);
    HSMCA_ENSURE(r->cert_b64, e, HSMCA_ENOMEM, "out of memory");
    memcpy(r->cert_b64, ent->cert.p, ent->cert.len);
    r->cert_b64[ent->cert.len] = '\0';
    memcpy(r->cert_sha256, ent->cert_sha256, sizeof(r->cert_sha256));
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code apply_step(audit_ica *t, const audit_entry *ent, hsmca_err *e)
{
    audit_ica_req *r = find(t, ent->request_id);
    char user[AUDIT_ICA_USER_MAX + 1];
    user_of(&ent->requester, user);
    switch (ent->kind) {
    case AUDIT_ICA_REQUEST: return add_request(t, ent, e);
    case AUDIT_ICA_APPROVE:
        HSMCA_GUARD(audit_ica_may_approve(t, ent->request_id, user, ent->time, e));
        snprintf(r->approvers[r->n_approvers++], AUDIT_ICA_USER_MAX + 1, "%s", user);
        return HSMCA_OK;
    case AUDIT_ICA_DENY:
        HSMCA_GUARD(audit_ica_may_deny(t, ent->request_id, e));
        r->denied = 1;
        snprintf(r->denied_by, sizeof(r->denied_by), "%s", user);
        snprintf(r->reason, sizeof(r->reason), "%.*s", (int)ent->reason.len,
                 ent->reason.p ? ent->reason.p : "");
        return HSMCA_OK;
    case AUDIT_ICA_CERT: return add_cert(r, ent, e);
    case AUDIT_ICA_FETCH:
        HSMCA_ENSURE(r && r->cert_b64, e, HSMCA_EPERM,
                     "a fetch of intermediate request %llu, which is not signed",
                     (unsigned long long)ent->request_id);
        return HSMCA_OK;
    case AUDIT_ISSUE_INTENT:
        if (strcmp(ent->profile, AUDIT_ICA_PROFILE) != 0)
            return HSMCA_OK;
        HSMCA_GUARD(check_signable(r, ent, e));
        r->intent_seq = ent->seq;
        return HSMCA_OK;
    default: return HSMCA_OK;
    }
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

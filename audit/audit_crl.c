/* audit_crl.c - see audit_crl.h. Revocations are kept in log order; a lookup is a scan
 * (a revoke is an administrator's act, rare next to everything else). */
#include "audit_crl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct audit_crl {
    audit_crl_rev *v;
    size_t n, cap;
    uint64_t last_number;
    int64_t last_this, last_next;
    int changed;
};

static const struct {
    const char *name;
    int code;
} reasons[] = {
    {"unspecified", 0},         {"keyCompromise", 1},        {"cACompromise", 2},
    {"affiliationChanged", 3},  {"superseded", 4},           {"cessationOfOperation", 5},
    {"privilegeWithdrawn", 9},  {"aACompromise", 10},
};

int audit_crl_reason_code(const char *name, size_t len)
{
    for (size_t i = 0; name && i < sizeof(reasons) / sizeof(reasons[0]); i++)
        if (strlen(reasons[i].name) == len && memcmp(reasons[i].name, name, len) == 0)
            return reasons[i].code;
    return -1;
}

const char *audit_crl_reason_names(void)
{
    return "unspecified, keyCompromise, cACompromise, affiliationChanged, superseded, "
           "cessationOfOperation, privilegeWithdrawn, aACompromise";
}

hsmca_code audit_crl_new(audit_crl **out, hsmca_err *e)
{
    *out = calloc(1, sizeof(**out));
    HSMCA_ENSURE(*out, e, HSMCA_ENOMEM, "out of memory");
    return HSMCA_OK;
}

void audit_crl_free(audit_crl *t)
{
    if (!t)
        return;
    free(t->v);
    free(t);
}

size_t audit_crl_count(const audit_crl *t)
{
    return t ? t->n : 0;
}

const audit_crl_rev *audit_crl_at(const audit_crl *t, size_t i)
{
    return t && i < t->n ? &t->v[i] : NULL;
}

int audit_crl_revoked(const audit_crl *t, const char *serial)
{
    for (size_t i = 0; t && i < t->n; i++)
        if (strcmp(t->v[i].serial, serial) == 0)
            return 1;
    return 0;
}

uint64_t audit_crl_last_number(const audit_crl *t)
{
    return t ? t->last_number : 0;
}

int64_t audit_crl_last_this(const audit_crl *t)
{
    return t ? t->last_this : 0;
}

int64_t audit_crl_last_next(const audit_crl *t)
{
    return t ? t->last_next : 0;
}

int audit_crl_changed(const audit_crl *t)
{
    return t ? t->changed : 0;
}

static HSMCA_MUSTCHECK hsmca_code check_revoke(const audit_crl *t, const audit_entry *ent,
                                               hsmca_err *e)
{
    HSMCA_ENSURE(audit_crl_reason_code(ent->reason.p, ent->reason.len) >= 0, e, HSMCA_EPERM,
                 "a revocation's reason is not one of: %s", audit_crl_reason_names());
    HSMCA_ENSURE(!audit_crl_revoked(t, ent->serial), e, HSMCA_EPERM,
                 "serial %s is revoked already", ent->serial);
    HSMCA_ENSURE(t->n < AUDIT_CRL_MAX, e, HSMCA_EPERM, "more than %u revocations",
                 AUDIT_CRL_MAX);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code add_revoke(audit_crl *t, const audit_entry *ent, hsmca_err *e)
{
    HSMCA_GUARD(check_revoke(t, ent, e));
    int code = audit_crl_reason_code(ent->reason.p, ent->reason.len);
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        audit_crl_rev *v = realloc(t->v, cap * sizeof(*v));
        HSMCA_ENSURE(v, e, HSMCA_ENOMEM, "out of memory");
        t->v = v;
        t->cap = cap;
    }
    audit_crl_rev *r = &t->v[t->n++];
    snprintf(r->serial, sizeof(r->serial), "%s", ent->serial);
    r->time = ent->time;
    r->reason = code;
    t->changed = 1;
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code check_crl(const audit_crl *t, const audit_entry *ent,
                                            hsmca_err *e)
{
    HSMCA_ENSURE(ent->crl_number > t->last_number, e, HSMCA_EPERM,
                 "a CRL numbered %llu after one numbered %llu (cRLNumber only grows)",
                 (unsigned long long)ent->crl_number, (unsigned long long)t->last_number);
    HSMCA_ENSURE(ent->count == t->n, e, HSMCA_EPERM,
                 "a CRL of %llu revocations where the log has %zu before it",
                 (unsigned long long)ent->count, t->n);
    HSMCA_ENSURE(ent->not_after > ent->not_before, e, HSMCA_EPERM,
                 "a CRL whose nextUpdate is not after its thisUpdate");
    return HSMCA_OK;
}

hsmca_code audit_crl_check(const audit_crl *t, const audit_entry *ent, hsmca_err *e)
{
    if (ent->kind == AUDIT_REVOKE)
        return check_revoke(t, ent, e);
    return ent->kind == AUDIT_CRL ? check_crl(t, ent, e) : HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code add_crl(audit_crl *t, const audit_entry *ent, hsmca_err *e)
{
    HSMCA_GUARD(check_crl(t, ent, e));
    t->last_number = ent->crl_number;
    t->last_this = ent->not_before;
    t->last_next = ent->not_after;
    t->changed = 0;
    return HSMCA_OK;
}

hsmca_code audit_crl_apply(audit_crl *t, const audit_entry *ent, uint64_t off, hsmca_err *e)
{
    if (ent->kind != AUDIT_REVOKE && ent->kind != AUDIT_CRL)
        return HSMCA_OK;
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = ent->kind == AUDIT_REVOKE ? add_revoke(t, ent, &why) : add_crl(t, ent, &why);
    if (rc == HSMCA_OK)
        return HSMCA_OK;
    return hsmca_fail(e, rc == HSMCA_ENOMEM ? rc : HSMCA_EPERM, "log seq %llu (byte %llu): %s",
                      (unsigned long long)ent->seq, (unsigned long long)off, why.msg);
}

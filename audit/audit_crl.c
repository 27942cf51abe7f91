/* audit_crl.c - see audit_crl.h. Revocations are kept in log order; a lookup is a scan
 * (a revoke is an administrator's act, rare next to everything else). */
#include "audit_crl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

/* A workload certificate under its identity: SHA-256 (first 16 bytes) of its URI SAN and
 * of that ID's namespace prefix (zero when it has none). */
typedef struct {
    char serial[AUDIT_SERIAL_HEX_MAX + 1];
    int64_t not_after;
    uint8_t id[16], ns[16];
} crl_ident;

struct audit_crl {
    audit_crl_rev *v;
    size_t n, cap;
    uint64_t last_number;
    int64_t last_this, last_next;
    int changed;
    audit_crl_ban *bans;
    size_t nbans, capbans;
    crl_ident *idx;
    size_t nidx, capidx;
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

const char *audit_crl_reason_name(int code)
{
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
        if (reasons[i].code == code)
            return reasons[i].name;
    return "unspecified";
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
    for (size_t i = 0; i < t->nbans; i++)
        free(t->bans[i].target);
    free(t->bans);
    free(t->idx);
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

static HSMCA_MUSTCHECK hsmca_code add_crl(audit_crl *t, const audit_entry *ent, hsmca_err *e)
{
    HSMCA_GUARD(check_crl(t, ent, e));
    t->last_number = ent->crl_number;
    t->last_this = ent->not_before;
    t->last_next = ent->not_after;
    t->changed = 0;
    return HSMCA_OK;
}

/* ---- revocations by identity ---------------------------------------------------------- */

size_t audit_crl_ns_prefix(const char *id, size_t len)
{
    static const char scheme[] = "spiffe://";
    if (len <= sizeof(scheme) - 1 || memcmp(id, scheme, sizeof(scheme) - 1) != 0)
        return 0;
    const char *path = memchr(id + sizeof(scheme) - 1, '/', len - (sizeof(scheme) - 1));
    if (!path || (size_t)(id + len - path) <= 4 || memcmp(path, "/ns/", 4) != 0)
        return 0;
    const char *ns = path + 4, *end = memchr(ns, '/', (size_t)(id + len - ns));
    size_t n = end ? (size_t)(end - id) : len;
    return n > (size_t)(ns - id) ? n : 0;
}

int audit_crl_target_ok(const char *target, size_t len, int ns)
{
    if (!target || len == 0 || len > AUDIT_STR_MAX || memchr(target, ',', len))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (target[i] <= ' ' || target[i] > '~')
            return 0;
    /* an identity: spiffe://TD/PATH; a namespace: exactly its prefix */
    return ns ? audit_crl_ns_prefix(target, len) == len
              : len > 9 && memcmp(target, "spiffe://", 9) == 0 && memchr(target + 9, '/', len - 9);
}

static int ban_live(const audit_crl_ban *b, int64_t now)
{
    return !b->lifted && (b->expires == 0 || now < b->expires);
}

const audit_crl_ban *audit_crl_ban_on(const audit_crl *t, const char *target, int ns, int64_t now)
{
    /* The latest one rules: a later revoke-identity on the same target replaces it. */
    for (size_t i = t ? t->nbans : 0; i-- > 0;) {
        const audit_crl_ban *b = &t->bans[i];
        if (b->ns == ns && strcmp(b->target, target) == 0)
            return ban_live(b, now) ? b : NULL;
    }
    return NULL;
}

const audit_crl_ban *audit_crl_ban_of(const audit_crl *t, const char *id, size_t len, int64_t now)
{
    size_t pl = audit_crl_ns_prefix(id, len);
    for (size_t i = t ? t->nbans : 0; i-- > 0;) {
        const audit_crl_ban *b = &t->bans[i];
        size_t bl = strlen(b->target);
        int hit = b->ns ? pl && pl == bl && memcmp(b->target, id, bl) == 0
                        : bl == len && memcmp(b->target, id, len) == 0;
        if (hit && audit_crl_ban_on(t, b->target, b->ns, now) == b)
            return b;
    }
    return NULL;
}

static HSMCA_MUSTCHECK hsmca_code check_ban(const audit_crl *t, const audit_entry *ent,
                                            hsmca_err *e)
{
    int ns = strcmp(ent->profile, "namespace") == 0;
    HSMCA_ENSURE(audit_crl_target_ok(ent->identity.p, ent->identity.len, ns), e, HSMCA_EPERM,
                 "a revocation by identity names no %s",
                 ns ? "namespace prefix spiffe://TD/ns/NS" : "SPIFFE ID");
    HSMCA_ENSURE(audit_crl_reason_code(ent->reason.p, ent->reason.len) >= 0, e, HSMCA_EPERM,
                 "a revocation's reason is not one of: %s", audit_crl_reason_names());
    HSMCA_ENSURE(t->nbans < AUDIT_CRL_BANS_MAX, e, HSMCA_EPERM,
                 "more than %u revocations by identity", AUDIT_CRL_BANS_MAX);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code add_ban(audit_crl *t, const audit_entry *ent, hsmca_err *e)
{
    HSMCA_GUARD(check_ban(t, ent, e));
    int ns = strcmp(ent->profile, "namespace") == 0;
    int code = audit_crl_reason_code(ent->reason.p, ent->reason.len);
    if (t->nbans == t->capbans) {
        size_t cap = t->capbans ? 2 * t->capbans : 8;
        audit_crl_ban *v = realloc(t->bans, cap * sizeof(*v));
        HSMCA_ENSURE(v, e, HSMCA_ENOMEM, "out of memory");
        t->bans = v;
        t->capbans = cap;
    }
    char *target = strndup(ent->identity.p, ent->identity.len);
    HSMCA_ENSURE(target, e, HSMCA_ENOMEM, "out of memory");
    t->bans[t->nbans++] = (audit_crl_ban){target, ns, ent->expires, code, ent->seq, 0};
    return HSMCA_OK;
}

/* The revocation by identity a lift entry ends: the latest on its target, not lifted yet
 * (it may have ended by its time: the signer checks it in force a moment before the
 * entry's time is taken); NULL with e when there is none. */
static audit_crl_ban *ban_to_lift(const audit_crl *t, const audit_entry *ent, hsmca_err *e)
{
    int ns = strcmp(ent->profile, "namespace") == 0;
    char target[AUDIT_STR_MAX + 1];
    snprintf(target, sizeof(target), "%.*s", (int)ent->identity.len, ent->identity.p);
    audit_crl_ban *b = NULL;
    for (size_t i = t->nbans; !b && i-- > 0;)
        if (t->bans[i].ns == ns && strcmp(t->bans[i].target, target) == 0)
            b = &t->bans[i];
    if (!b || b->lifted) {
        hsmca_fail(e, HSMCA_EPERM,
                   "a lift of %s, which no revocation by identity names (or lifted already)",
                   target);
        return NULL;
    }
    return b;
}

static HSMCA_MUSTCHECK hsmca_code lift_ban(audit_crl *t, const audit_entry *ent, hsmca_err *e)
{
    audit_crl_ban *b = ban_to_lift(t, ent, e);
    if (!b)
        return HSMCA_EPERM;
    b->lifted = 1;
    return HSMCA_OK;
}

static void digest16(const char *p, size_t n, uint8_t out[16])
{
    uint8_t h[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)p, n, h);
    memcpy(out, h, 16);
}

/* Drops the index's entries expired at now; grows it when that freed less than a quarter. */
static HSMCA_MUSTCHECK hsmca_code idx_room(audit_crl *t, int64_t now, hsmca_err *e)
{
    size_t kept = 0;
    for (size_t i = 0; i < t->nidx; i++)
        if (t->idx[i].not_after > now)
            t->idx[kept++] = t->idx[i];
    t->nidx = kept;
    if (t->nidx + t->nidx / 4 < t->capidx)
        return HSMCA_OK;
    size_t cap = t->capidx ? 2 * t->capidx : 1024;
    crl_ident *v = realloc(t->idx, cap * sizeof(*v));
    HSMCA_ENSURE(v, e, HSMCA_ENOMEM, "out of memory");
    t->idx = v;
    t->capidx = cap;
    return HSMCA_OK;
}

hsmca_code audit_crl_note(audit_crl *t, const char *serial, const char *sans, size_t sans_len,
                          int64_t not_after, int64_t now, hsmca_err *e)
{
    /* A workload's one URI SAN comes first in the text (signer_tbs_ext.c). */
    if (sans_len < 4 || memcmp(sans, "uri:", 4) != 0 || not_after <= now)
        return HSMCA_OK;
    const char *id = sans + 4, *comma = memchr(id, ',', sans_len - 4);
    size_t len = comma ? (size_t)(comma - id) : sans_len - 4;
    if (t->nidx == t->capidx)
        HSMCA_GUARD(idx_room(t, now, e));
    crl_ident *x = &t->idx[t->nidx++];
    memset(x, 0, sizeof(*x));
    snprintf(x->serial, sizeof(x->serial), "%s", serial);
    x->not_after = not_after;
    digest16(id, len, x->id);
    size_t pl = audit_crl_ns_prefix(id, len);
    if (pl)
        digest16(id, pl, x->ns);
    return HSMCA_OK;
}

size_t audit_crl_serials_of(const audit_crl *t, const char *target, int ns, int64_t now,
                            void (*fn)(void *ctx, const char *serial), void *ctx)
{
    uint8_t want[16];
    size_t n = 0;
    digest16(target, strlen(target), want);
    for (size_t i = 0; t && i < t->nidx; i++) {
        const crl_ident *x = &t->idx[i];
        if (x->not_after > now && memcmp(ns ? x->ns : x->id, want, 16) == 0 &&
            !audit_crl_revoked(t, x->serial)) {
            fn(ctx, x->serial);
            n++;
        }
    }
    return n;
}

hsmca_code audit_crl_check(const audit_crl *t, const audit_entry *ent, hsmca_err *e)
{
    switch (ent->kind) {
    case AUDIT_REVOKE: return check_revoke(t, ent, e);
    case AUDIT_CRL: return check_crl(t, ent, e);
    case AUDIT_BAN: return check_ban(t, ent, e);
    case AUDIT_BAN_LIFT: return ban_to_lift(t, ent, e) ? HSMCA_OK : HSMCA_EPERM;
    default: return HSMCA_OK;
    }
}

static HSMCA_MUSTCHECK hsmca_code apply_one(audit_crl *t, const audit_entry *ent, hsmca_err *e)
{
    switch (ent->kind) {
    case AUDIT_REVOKE: return add_revoke(t, ent, e);
    case AUDIT_CRL: return add_crl(t, ent, e);
    case AUDIT_BAN: return add_ban(t, ent, e);
    case AUDIT_BAN_LIFT: return lift_ban(t, ent, e);
    case AUDIT_ISSUE_INTENT:
        if (strcmp(ent->profile, "workload") != 0)
            return HSMCA_OK;
        return audit_crl_note(t, ent->serial, ent->sans.p, ent->sans.len, ent->not_after,
                              ent->time, e);
    default: return HSMCA_OK;
    }
}

hsmca_code audit_crl_apply(audit_crl *t, const audit_entry *ent, uint64_t off, hsmca_err *e)
{
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = apply_one(t, ent, &why);
    if (rc == HSMCA_OK)
        return HSMCA_OK;
    return hsmca_fail(e, rc == HSMCA_ENOMEM ? rc : HSMCA_EPERM, "log seq %llu (byte %llu): %s",
                      (unsigned long long)ent->seq, (unsigned long long)off, why.msg);
}

/* audit_replay.c - see audit_replay.h. Two sets: the serials of intents whose certificate
 * has not expired (an open-addressing table, the one thing that grows with the log), and
 * the intents still waiting for their result (few: at most the requests in flight). */
#include "audit_replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "audit_crl.h"
#include "audit_ica.h"
#include "siphash.h"
#include "util.h"

#define SERIAL_BYTES (AUDIT_SERIAL_HEX_MAX / 2 + 1) /* length, then the bytes */
#define MIN_CAP 1024u

/* A serial of one CA key. tag names the key by the first 8 bytes of its ca_spki_sha256
 * (0: no key entry yet): two CA keys whose hashes shared them would share one serial
 * space, which refuses more, never less. */
typedef struct {
    int64_t not_after;
    uint64_t seq, tag;
    uint8_t key[SERIAL_BYTES]; /* key[0] = 0: an empty slot */
} rslot;

typedef struct {
    uint64_t seq, request_id;
    int closed;
} rintent;

struct audit_replay {
    rslot *slots;
    size_t cap, n; /* cap a power of two, kept at least twice n */
    uint8_t hkey[16];
    /* The open intents in seq order; closed ones are marked and compacted away. */
    rintent *open;
    size_t nopen, opencap, closed;
    uint64_t tag;  /* the CA key of the latest key entry */
    int64_t clock; /* the latest time of any entry */
    uint64_t intents;
    audit_ica *ica; /* the intermediate CA requests (audit_ica.h) */
    audit_crl *crl; /* the revocations and CRLs (audit_crl.h) */
    int ca_broken;  /* a CA-profile rule failed: its rules are not applied after it */
    uint64_t ca_broken_seq;
    char ca_broken_why[sizeof(((hsmca_err *)0)->msg)];
};

hsmca_code audit_replay_new(audit_replay **out, hsmca_err *e)
{
    audit_replay *r = calloc(1, sizeof(*r));
    HSMCA_ENSURE(r, e, HSMCA_ENOMEM, "out of memory");
    r->cap = MIN_CAP;
    r->slots = calloc(r->cap, sizeof(rslot));
    r->clock = INT64_MIN;
    if (!r->slots || audit_ica_new(&r->ica, e) != HSMCA_OK ||
        audit_crl_new(&r->crl, e) != HSMCA_OK) {
        audit_ica_free(r->ica);
        free(r->slots);
        free(r);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    /* Serials are the front end's choice, and the log repeats them: a keyed hash keeps a
     * hostile one from turning the replay at start into a scan per entry. */
    if (RAND_bytes(r->hkey, sizeof(r->hkey)) != 1) {
        audit_replay_free(r);
        return hsmca_fail(e, HSMCA_EINTERNAL, "audit replay: no randomness for the hash key");
    }
    *out = r;
    return HSMCA_OK;
}

void audit_replay_free(audit_replay *r)
{
    if (!r)
        return;
    free(r->slots);
    free(r->open);
    audit_ica_free(r->ica);
    audit_crl_free(r->crl);
    OPENSSL_cleanse(r->hkey, sizeof(r->hkey));
    free(r);
}

/* ---- serials -------------------------------------------------------------------------- */

static size_t hash_key(const audit_replay *r, uint64_t tag, const uint8_t *k)
{
    uint8_t in[8 + SERIAL_BYTES];
    memcpy(in, &tag, 8);
    memcpy(in + 8, k, (size_t)k[0] + 1);
    return (size_t)hsmca_siphash24(r->hkey, in, 8 + (size_t)k[0] + 1);
}

/* The slot of (tag, k), or the empty slot where it belongs. */
static rslot *find(const audit_replay *r, rslot *slots, size_t cap, uint64_t tag, const uint8_t *k)
{
    for (size_t i = hash_key(r, tag, k) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (slots[i].key[0] == 0 ||
            (slots[i].tag == tag && memcmp(slots[i].key, k, (size_t)k[0] + 1) == 0))
            return &slots[i];
}

/* Rebuilds the table with the serials unexpired by the log's clock, at a capacity they
 * (and one more) fill at most a quarter of: the table follows the live count. */
static HSMCA_MUSTCHECK hsmca_code rebuild(audit_replay *r, hsmca_err *e)
{
    size_t live = 0;
    for (size_t i = 0; i < r->cap; i++)
        if (r->slots[i].key[0] && r->slots[i].not_after > r->clock)
            live++;
    size_t cap = MIN_CAP;
    while ((live + 1) * 4 > cap) {
        HSMCA_ENSURE(cap <= SIZE_MAX / 2 / sizeof(rslot), e, HSMCA_ENOMEM,
                     "out of memory (%zu serials)", live);
        cap *= 2;
    }
    rslot *slots = calloc(cap, sizeof(rslot));
    HSMCA_ENSURE(slots, e, HSMCA_ENOMEM, "out of memory (%zu serials)", live);
    for (size_t i = 0; i < r->cap; i++)
        if (r->slots[i].key[0] && r->slots[i].not_after > r->clock)
            *find(r, slots, cap, r->slots[i].tag, r->slots[i].key) = r->slots[i];
    free(r->slots);
    r->slots = slots;
    r->cap = cap;
    r->n = live;
    return HSMCA_OK;
}

/* The hex serial as a key: its byte count (1..20, odd digit counts padded in front), then
 * the bytes. The parser has checked the hex. */
static void make_key(const char *serial, uint8_t k[SERIAL_BYTES])
{
    size_t n = strnlen(serial, AUDIT_SERIAL_HEX_MAX), len = 0;
    char even[AUDIT_SERIAL_HEX_MAX + 2] = "0";
    memcpy(even + n % 2, serial, n);
    memset(k, 0, SERIAL_BYTES);
    if (util_unhex(even, n + n % 2, k + 1, SERIAL_BYTES - 1, &len))
        k[0] = (uint8_t)len;
}

/* The first 8 bytes of a 64-hex hash, 0 for "". */
static uint64_t tag_of(const char *hex)
{
    uint8_t k[SERIAL_BYTES];
    char head[17];
    memcpy(head, hex, 16);
    head[16] = '\0';
    if (strlen(head) != 16)
        return 0;
    make_key(head, k);
    uint64_t t;
    memcpy(&t, k + 1, 8);
    return t ? t : 1; /* 0 means no key entry */
}

static HSMCA_MUSTCHECK hsmca_code add_serial(audit_replay *r, const audit_entry *ent, uint64_t off,
                                             hsmca_err *e)
{
    uint8_t k[SERIAL_BYTES];
    make_key(ent->serial, k);
    if (k[0] == 0)
        return HSMCA_OK;
    if (2 * (r->n + 1) > r->cap)
        HSMCA_GUARD(rebuild(r, e));
    rslot *sl = find(r, r->slots, r->cap, r->tag, k);
    HSMCA_ENSURE(!sl->key[0] || sl->not_after <= r->clock, e, HSMCA_EPERM,
                 "log seq %llu (byte %llu): serial %s was already in the intent at seq %llu "
                 "of the same CA key, whose certificate had not expired (invariant 6: a "
                 "broken or tampered log)",
                 (unsigned long long)ent->seq, (unsigned long long)off, ent->serial,
                 (unsigned long long)sl->seq);
    if (!sl->key[0]) /* else this serial's expired slot, not dropped yet */
        r->n++;
    *sl = (rslot){ent->not_after, ent->seq, r->tag, {0}};
    memcpy(sl->key, k, SERIAL_BYTES);
    return HSMCA_OK;
}

size_t audit_replay_serials(const audit_replay *r, const char *spki_sha256, int64_t now,
                            audit_replay_serial_fn fn, void *ctx)
{
    uint64_t tag = tag_of(spki_sha256);
    size_t n = 0;
    for (size_t i = 0; i < r->cap; i++) {
        const rslot *sl = &r->slots[i];
        if (sl->key[0] && (sl->tag == tag || sl->tag == 0) && sl->not_after > now) {
            fn(ctx, sl->key + 1, sl->key[0], sl->not_after);
            n++;
        }
    }
    return n;
}

/* ---- open intents --------------------------------------------------------------------- */

/* Drops the closed entries. */
static void open_compact(audit_replay *r)
{
    size_t w = 0;
    for (size_t i = 0; i < r->nopen; i++)
        if (!r->open[i].closed)
            r->open[w++] = r->open[i];
    r->nopen = w;
    r->closed = 0;
}

static HSMCA_MUSTCHECK hsmca_code open_add(audit_replay *r, const audit_entry *ent, uint64_t off,
                                           hsmca_err *e)
{
    if (r->closed * 2 > r->nopen)
        open_compact(r);
    HSMCA_ENSURE(r->nopen - r->closed < AUDIT_REPLAY_OPEN_MAX, e, HSMCA_EPERM,
                 "log seq %llu (byte %llu): more than %u intents without a result (a signer "
                 "has at most the requests it staged and is signing)",
                 (unsigned long long)ent->seq, (unsigned long long)off, AUDIT_REPLAY_OPEN_MAX);
    if (r->nopen == r->opencap) {
        size_t cap = r->opencap ? 2 * r->opencap : 64;
        rintent *v = realloc(r->open, cap * sizeof(rintent));
        HSMCA_ENSURE(v, e, HSMCA_ENOMEM, "out of memory (%zu open intents)", r->nopen);
        r->open = v;
        r->opencap = cap;
    }
    r->open[r->nopen++] = (rintent){ent->seq, ent->request_id, 0};
    return HSMCA_OK;
}

/* The open intent at seq (intents arrive in seq order: a binary search), or NULL. */
static rintent *open_find(audit_replay *r, uint64_t seq)
{
    size_t lo = 0, hi = r->nopen;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->open[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->nopen && r->open[lo].seq == seq && !r->open[lo].closed ? &r->open[lo] : NULL;
}

static HSMCA_MUSTCHECK hsmca_code open_close(audit_replay *r, const audit_entry *ent, uint64_t off,
                                             hsmca_err *e)
{
    rintent *it = ent->intent_seq < ent->seq ? open_find(r, ent->intent_seq) : NULL;
    HSMCA_ENSURE(it, e, HSMCA_EPERM,
                 "log seq %llu (byte %llu): the result names intent seq %llu, which is not "
                 "an earlier issue-intent without a result",
                 (unsigned long long)ent->seq, (unsigned long long)off,
                 (unsigned long long)ent->intent_seq);
    HSMCA_ENSURE(it->request_id == ent->request_id, e, HSMCA_EPERM,
                 "log seq %llu (byte %llu): request_id %llu, but intent seq %llu has %llu",
                 (unsigned long long)ent->seq, (unsigned long long)off,
                 (unsigned long long)ent->request_id, (unsigned long long)ent->intent_seq,
                 (unsigned long long)it->request_id);
    it->closed = 1;
    r->closed++;
    return HSMCA_OK;
}

size_t audit_replay_open_count(const audit_replay *r)
{
    return r->nopen - r->closed;
}

int audit_replay_open_next(const audit_replay *r, size_t *it, uint64_t *seq, uint64_t *request_id)
{
    while (*it < r->nopen && r->open[*it].closed)
        (*it)++;
    if (*it >= r->nopen)
        return 0;
    *seq = r->open[*it].seq;
    *request_id = r->open[*it].request_id;
    (*it)++;
    return 1;
}

uint64_t audit_replay_open_first(const audit_replay *r)
{
    size_t it = 0;
    uint64_t seq = 0, rid;
    return audit_replay_open_next(r, &it, &seq, &rid) ? seq : 0;
}

/* ---- the rules ------------------------------------------------------------------------ */

audit_crl *audit_replay_take_crl(audit_replay *r)
{
    audit_crl *t = r->crl;
    r->crl = NULL;
    return t;
}

audit_ica *audit_replay_take_ica(audit_replay *r)
{
    audit_ica *t = r->ica;
    r->ica = NULL;
    return t;
}

static HSMCA_MUSTCHECK hsmca_code replay_serials(audit_replay *r, const audit_entry *ent,
                                                 uint64_t off, hsmca_err *e);

hsmca_code audit_replay_entry(audit_replay *r, const audit_entry *ent, uint64_t off, hsmca_err *e)
{
    HSMCA_GUARD(replay_serials(r, ent, off, e));
    if (r->ca_broken)
        return HSMCA_OK; /* the CA profile's state is not trusted past its first break */
    hsmca_err why;
    hsmca_err_clear(&why);
    /* Both rule sets pass before either state changes: a broken entry leaves no part of
     * itself behind (the revocation list and the intermediates agree). */
    hsmca_code rc = r->crl ? audit_crl_check(r->crl, ent, &why) : HSMCA_OK;
    if (rc == HSMCA_OK && r->ica)
        rc = audit_ica_check(r->ica, ent, &why);
    if (rc == HSMCA_OK && r->crl)
        rc = audit_crl_apply(r->crl, ent, off, &why);
    if (rc == HSMCA_OK && r->ica)
        rc = audit_ica_apply(r->ica, ent, off, &why);
    if (rc == HSMCA_OK)
        return HSMCA_OK;
    if (rc == HSMCA_ENOMEM)
        return hsmca_fail(e, rc, "%s", why.msg);
    /* A CA-profile rule broken (any refusal of the rules: EPERM, or ENOTFOUND for a
     * request that does not exist): noted, and the workload rules go on (audit_replay.h). */
    r->ca_broken = 1;
    r->ca_broken_seq = ent->seq;
    if (strncmp(why.msg, "log seq ", 8) == 0)
        snprintf(r->ca_broken_why, sizeof(r->ca_broken_why), "%s", why.msg);
    else
        snprintf(r->ca_broken_why, sizeof(r->ca_broken_why), "log seq %llu (byte %llu): %.190s",
                 (unsigned long long)ent->seq, (unsigned long long)off, why.msg);
    return HSMCA_OK;
}

const char *audit_replay_ca_broken(const audit_replay *r, uint64_t *seq)
{
    *seq = r->ca_broken_seq;
    return r->ca_broken ? r->ca_broken_why : NULL;
}

static hsmca_code replay_serials(audit_replay *r, const audit_entry *ent, uint64_t off,
                                 hsmca_err *e)
{
    if (ent->time > r->clock)
        r->clock = ent->time;
    switch (ent->kind) {
    case AUDIT_KEY: r->tag = tag_of(ent->ca_spki_sha256); return HSMCA_OK;
    case AUDIT_ISSUE_INTENT:
        r->intents++;
        HSMCA_GUARD(add_serial(r, ent, off, e));
        return open_add(r, ent, off, e);
    case AUDIT_ISSUE_RESULT: return open_close(r, ent, off, e);
    case AUDIT_START:
        HSMCA_ENSURE(audit_replay_open_count(r) == 0, e, HSMCA_EPERM,
                     "log seq %llu (byte %llu): a start, but the intent at seq %llu has no "
                     "result (a restart writes one for each)",
                     (unsigned long long)ent->seq, (unsigned long long)off,
                     (unsigned long long)audit_replay_open_first(r));
        return HSMCA_OK;
    default: return HSMCA_OK;
    }
}

uint64_t audit_replay_intents(const audit_replay *r)
{
    return r->intents;
}

/* audit_cmd_multi.c - see audit_cmd_multi.h. The serials are an open-addressing table of
 * the first 16 bytes of SHA-256(CA key hex, NUL, serial hex): 32 bytes a certificate,
 * whatever the serial's length (two different pairs colliding is a 2^-128 event). */
#include "audit_cmd_multi.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "audit_note.h"

typedef struct {
    uint8_t h[16];
    uint32_t log; /* index + 1; 0: a free slot */
    uint64_t seq;
} serial_slot;

struct audit_multi {
    serial_slot *v;
    size_t cap, n;
    const char *dirs[AUDIT_MULTI_MAX];
    char origins[AUDIT_MULTI_MAX][AUDIT_NAME_MAX + 1];
    uint32_t nlogs; /* the current log is nlogs - 1 */
    char key[65];   /* the current log's CA key (its last key entry); "": none yet */
};

audit_multi *audit_multi_new(void)
{
    return calloc(1, sizeof(audit_multi));
}

void audit_multi_free(audit_multi *m)
{
    if (m)
        free(m->v);
    free(m);
}

void audit_multi_begin(audit_multi *m, const char *dir)
{
    if (m->nlogs < AUDIT_MULTI_MAX)
        m->dirs[m->nlogs++] = dir;
    m->key[0] = '\0';
}

unsigned long long audit_multi_serials(const audit_multi *m)
{
    return m->n;
}

static serial_slot *slot_of(serial_slot *v, size_t cap, const uint8_t h[16])
{
    uint64_t x;
    memcpy(&x, h, sizeof(x));
    for (size_t i = (size_t)(x & (cap - 1));; i = (i + 1) & (cap - 1))
        if (!v[i].log || memcmp(v[i].h, h, 16) == 0)
            return &v[i];
}

static HSMCA_MUSTCHECK hsmca_code grow(audit_multi *m, hsmca_err *e)
{
    size_t cap = m->cap ? 2 * m->cap : 4096;
    serial_slot *v = calloc(cap, sizeof(*v));
    HSMCA_ENSURE(v, e, HSMCA_ENOMEM, "out of memory (%zu serials)", m->n);
    for (size_t i = 0; i < m->cap; i++)
        if (m->v[i].log)
            *slot_of(v, cap, m->v[i].h) = m->v[i];
    free(m->v);
    m->v = v;
    m->cap = cap;
    return HSMCA_OK;
}

hsmca_code audit_multi_entry(void *ctx, const audit_entry *ent, hsmca_err *e)
{
    audit_multi *m = ctx;
    if (ent->kind == AUDIT_KEY)
        snprintf(m->key, sizeof(m->key), "%s", ent->ca_spki_sha256);
    if (ent->kind != AUDIT_ISSUE_INTENT)
        return HSMCA_OK;
    if (2 * (m->n + 1) > m->cap)
        HSMCA_GUARD(grow(m, e));
    uint8_t md[32];
    char buf[65 + 1 + AUDIT_SERIAL_HEX_MAX + 1];
    int n = snprintf(buf, sizeof(buf), "%s", m->key);
    n += snprintf(buf + n + 1, sizeof(buf) - (size_t)n - 1, "%s", ent->serial) + 1;
    SHA256((const uint8_t *)buf, (size_t)n, md);
    serial_slot *s = slot_of(m->v, m->cap, md);
    /* The caller names this log and the entry's seq; the message names the other. */
    HSMCA_ENSURE(!s->log || s->log == m->nlogs, e, HSMCA_EPERM,
                 "serial %s of CA key %.16s is also in %s (log seq %llu)", ent->serial,
                 m->key[0] ? m->key : "(none)", m->dirs[s->log - 1], (unsigned long long)s->seq);
    /* Within one log a serial may come back once its certificate expired: audit_replay's rule. */
    m->n += !s->log;
    memcpy(s->h, md, 16);
    s->log = m->nlogs;
    s->seq = ent->seq;
    return HSMCA_OK;
}

hsmca_code audit_multi_origin(audit_multi *m, const char *origin, hsmca_err *e)
{
    uint32_t cur = m->nlogs - 1;
    for (uint32_t i = 0; origin[0] && i < cur; i++)
        HSMCA_ENSURE(strcmp(m->origins[i], origin) != 0, e, HSMCA_EPERM,
                     "%s and %s have one origin, %s: the same log twice, or two replicas "
                     "sharing an origin (give each its audit.replica)",
                     m->dirs[i], m->dirs[cur], origin);
    snprintf(m->origins[cur], sizeof(m->origins[cur]), "%s", origin);
    return HSMCA_OK;
}

/* audit_publish.c - signed checkpoints and C2SP tlog-tiles for the signing log (see
 * audit_publish.h): the right edge of the tiles, the start-time checks, and the rounds.
 * The thread and the reading of the checkpoint at open are in audit_publish_run.c. */
#include "audit_publish_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* ---- descriptors ------------------------------------------------------------------------- */

/* The directory and DIR/log, opened when first needed: the log's open creates them. */
hsmca_code pub_ensure_open(audit_publish *p, hsmca_err *e)
{
    if (p->fs.root < 0) {
        p->fs.root = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        HSMCA_ENSURE(p->fs.root >= 0, e, HSMCA_EIO, "audit publish: open %.128s: %s", p->dir,
                     strerror(errno));
    }
    if (p->logfd < 0) {
        p->logfd = openat(p->fs.root, "log", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        HSMCA_ENSURE(p->logfd >= 0, e, HSMCA_EIO, "audit publish: open %.128s/log: %s", p->dir,
                     strerror(errno));
    }
    return HSMCA_OK;
}

/* ---- tiles and bundles ------------------------------------------------------------------- */

/* Writes a tile or bundle at rel; at start (see pub_put_mode) only when it is missing or its
 * bytes differ, with a warning: a crash between its write and the checkpoint's, or damage. */
static HSMCA_MUSTCHECK hsmca_code put(audit_publish *p, const char *rel, const uint8_t *data,
                                      size_t len, pub_put_mode mode, hsmca_err *e)
{
    if (mode != PUT_WRITE) {
        if (pubfs_same(&p->fs, rel, data, len))
            return HSMCA_OK;
        if (mode == PUT_COMPARE) {
            p->damaged++;
            return HSMCA_OK;
        }
        LOG_EVENT(LOG_LVL_WARN, "audit publish: a tile was missing or differed; rewritten",
                  LOG_STR("path", rel));
        p->repaired++;
    }
    return pubfs_replace(&p->fs, rel, data, len, 0, e);
}

/* The bundle of the w lines at [off, end) of DIR/log into a new buffer (caller frees). */
static HSMCA_MUSTCHECK hsmca_code bundle_of(audit_publish *p, uint64_t off, uint64_t end,
                                            unsigned w, uint8_t **out, size_t *outlen, hsmca_err *e)
{
    size_t n = (size_t)(end - off);
    uint8_t *raw = malloc(n ? n : 1), *b = malloc(n + w + 1);
    hsmca_code rc = raw && b ? pubfs_pread(p->logfd, off, n, raw, e)
                             : hsmca_fail(e, HSMCA_ENOMEM, "audit publish: out of memory");
    size_t at = 0, bl = 0;
    unsigned count = 0;
    while (rc == HSMCA_OK && at < n) {
        uint8_t *nl = memchr(raw + at, '\n', n - at);
        size_t ll = nl ? (size_t)(nl - (raw + at)) : 0;
        if (!nl || ll > AUDIT_ENTRY_MAX || count == w) {
            rc = hsmca_fail(e, HSMCA_EINTERNAL, "audit publish: the log at %llu is not %u lines",
                            (unsigned long long)off, w);
            break;
        }
        b[bl++] = (uint8_t)(ll >> 8);
        b[bl++] = (uint8_t)ll;
        memcpy(b + bl, raw + at, ll);
        bl += ll;
        at += ll + 1;
        count++;
    }
    if (rc == HSMCA_OK && count != w)
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "audit publish: the log at %llu is not %u lines",
                        (unsigned long long)off, w);
    free(raw);
    if (rc != HSMCA_OK) {
        free(b);
        return rc;
    }
    *out = b;
    *outlen = bl;
    return HSMCA_OK;
}

/* Tile (level, index) of width w with the hashes h, and at level 0 its entry bundle (the
 * lines at [boff, bend) of DIR/log). */
static HSMCA_MUSTCHECK hsmca_code put_tile(audit_publish *p, unsigned level, uint64_t index,
                                           unsigned w, const uint8_t *h, uint64_t boff,
                                           uint64_t bend, pub_put_mode check, hsmca_err *e)
{
    char rel[AUDIT_TILE_PATH_MAX];
    HSMCA_GUARD(audit_tile_path(level, index, w, rel, e));
    HSMCA_GUARD(put(p, rel, h, (size_t)w * AUDIT_HASH_LEN, check, e));
    if (level != 0)
        return HSMCA_OK;
    uint8_t *b;
    size_t blen;
    HSMCA_GUARD(audit_bundle_path(index, w, rel, e));
    HSMCA_GUARD(bundle_of(p, boff, bend, w, &b, &blen, e));
    hsmca_code rc = put(p, rel, b, blen, check, e);
    free(b);
    return rc;
}

/* The full tiles completed but not yet on disk (after a failed write, the next round starts
 * with them, before any new line moves the edge). */
static HSMCA_MUSTCHECK hsmca_code put_full(audit_publish *p, pub_put_mode check, hsmca_err *e)
{
    for (unsigned level = 0; level < PUB_LEVELS; level++) {
        if (!p->full[level].pending)
            continue;
        HSMCA_GUARD(put_tile(p, level, p->full[level].index, AUDIT_TILE_WIDTH, p->full[level].h,
                             p->full[level].boff, p->full[level].bend, check, e));
        p->full[level].pending = 0;
    }
    return HSMCA_OK;
}

/* The partial tiles of the current size (and its partial bundle), those not written yet at
 * this width; at start, all of them. */
static HSMCA_MUSTCHECK hsmca_code put_partials(audit_publish *p, pub_put_mode check, hsmca_err *e)
{
    for (unsigned level = 0; level < PUB_LEVELS; level++) {
        unsigned w = p->lv[level].n;
        if (w == 0 || (check == PUT_WRITE && w == p->lv[level].published))
            continue;
        uint64_t index = (p->size >> (AUDIT_TILE_HEIGHT * level)) >> AUDIT_TILE_HEIGHT;
        HSMCA_GUARD(
            put_tile(p, level, index, w, p->lv[level].h, p->bundle_off, p->bytes, check, e));
        p->lv[level].published = w;
    }
    return HSMCA_OK;
}

/* One leaf into the edge: the tiles it completes move to p->full (their roots carried up a
 * level) and are written; line_end is the log offset after the line. A failed write leaves
 * the edge whole: the tile stays pending for the next round. */
static HSMCA_MUSTCHECK hsmca_code push_leaf(audit_publish *p, const audit_hash *leaf,
                                            uint64_t line_end, pub_put_mode check, hsmca_err *e)
{
    HSMCA_ENSURE(!p->broken, e, HSMCA_EINTERNAL,
                 "audit publish: stopped after a hashing failure; restart the signer");
    HSMCA_GUARD(put_full(p, check, e));
    HSMCA_GUARD(audit_tree_append(&p->tree, leaf, e));
    p->size++;
    p->bytes = line_end;
    audit_hash h = *leaf;
    for (unsigned level = 0;; level++) {
        memcpy(p->lv[level].h + (size_t)p->lv[level].n * AUDIT_HASH_LEN, h.b, AUDIT_HASH_LEN);
        if (++p->lv[level].n < AUDIT_TILE_WIDTH)
            break;
        /* Below 2^63 leaves, a level-7 tile is never full: level + 1 stays in range. */
        memcpy(p->full[level].h, p->lv[level].h, AUDIT_TILE_BYTES);
        p->full[level].index = ((p->size >> (AUDIT_TILE_HEIGHT * level)) >> AUDIT_TILE_HEIGHT) - 1;
        p->full[level].boff = p->bundle_off;
        p->full[level].bend = p->bytes;
        p->full[level].pending = 1;
        if (level == 0)
            p->bundle_off = p->bytes;
        p->lv[level].n = p->lv[level].published = 0;
        hsmca_code rc =
            audit_tile_subtree(p->full[level].h, AUDIT_TILE_WIDTH, AUDIT_TILE_HEIGHT, 0, &h, e);
        if (rc != HSMCA_OK) {
            p->broken = 1; /* the edge lost a hash: nothing it publishes could be trusted */
            return rc;
        }
    }
    return put_full(p, check, e);
}

/* ---- start: replay and the checks -------------------------------------------------------- */

/* The log must still be what the latest checkpoint signed: called when the replay reaches
 * the checkpoint's size (the tree is then the one it signed), and at open for size 0. */
hsmca_code pub_check_root(audit_publish *p, hsmca_err *e)
{
    audit_hash mine = audit_empty_root;
    if (p->cp_size > 0)
        HSMCA_GUARD(audit_tree_root(&p->tree, &mine, e));
    if (audit_hash_equal(&mine, &p->cp_root)) {
        p->root_ok = 1;
        return HSMCA_OK;
    }
    char a[2 * AUDIT_HASH_LEN + 1], b[2 * AUDIT_HASH_LEN + 1];
    util_hex(mine.b, AUDIT_HASH_LEN, a);
    util_hex(p->cp_root.b, AUDIT_HASH_LEN, b);
    return hsmca_fail(e, HSMCA_EINVAL,
                      "audit log: refusing to start: root mismatch at size %llu: the log's "
                      "root is %s, %s's is %s",
                      (unsigned long long)p->cp_size, a, p->cp_file, b);
}

/* One line of the existing log (at open, or again in a repair pass). */
static HSMCA_MUSTCHECK hsmca_code replay_one(audit_publish *p, size_t len, const audit_hash *leaf,
                                             hsmca_err *e)
{
    pub_put_mode mode = p->have_cp && !p->root_ok ? PUT_COMPARE : PUT_REPAIR;
    HSMCA_GUARD(push_leaf(p, leaf, p->bytes + len + 1, mode, e));
    if (p->have_cp && p->size == p->cp_size) {
        if (!p->root_ok)
            HSMCA_GUARD(pub_check_root(p, e));
        HSMCA_GUARD(put_partials(p, PUT_REPAIR, e)); /* the checkpoint's own */
    }
    return HSMCA_OK;
}

hsmca_code audit_publish_replay_line(void *ctx, const char *line, size_t len,
                                     const audit_hash *leaf, hsmca_err *e)
{
    audit_publish *p = ctx;
    (void)line; /* the bundles are read back from the file, by offset */
    HSMCA_GUARD(pub_ensure_open(p, e));
    return replay_one(p, len, leaf, e);
}

/* Tiles inside the checkpoint differed before its root was checked: now that it was, replay
 * once more from the file and rewrite them. Rare (a crash or damage), so a second read. */
static HSMCA_MUSTCHECK hsmca_code repair_pass(audit_publish *p, hsmca_err *e)
{
    uint64_t count = p->size, end = p->bytes;
    char n[24];
    snprintf(n, sizeof(n), "%llu", (unsigned long long)p->damaged);
    LOG_EVENT(LOG_LVL_WARN,
              "audit publish: tiles within the checkpoint were missing or differed; "
              "the log matches the checkpoint, so they are rewritten",
              LOG_STR("count", n));
    audit_tree_init(&p->tree);
    p->size = p->bytes = p->bundle_off = 0;
    memset(p->lv, 0, sizeof(p->lv));
    memset(p->full, 0, sizeof(p->full));
    return pub_read_lines(p, end, count, 1, e);
}
/* DIR/vkey, rewritten only when it is not the configured key's. */
static HSMCA_MUSTCHECK hsmca_code write_vkey(audit_publish *p, hsmca_err *e)
{
    char *s;
    HSMCA_GUARD(audit_vkey_format(&p->vk, &s, e));
    size_t n = strlen(s);
    char line[AUDIT_VKEY_MAX + 2];
    snprintf(line, sizeof(line), "%s\n", s);
    free(s);
    if (pubfs_same(&p->fs, "vkey", line, n + 1))
        return HSMCA_OK;
    return pubfs_replace(&p->fs, "vkey", line, n + 1, 1, e);
}

hsmca_code audit_publish_attach(audit_publish *p, audit_log *log, hsmca_err *e)
{
    HSMCA_GUARD(pub_ensure_open(p, e));
    if (p->have_cp) {
        HSMCA_ENSURE(p->size >= p->cp_size, e, HSMCA_EINVAL,
                     "audit log: refusing to start: %.64s/log has %llu entries, fewer than the "
                     "%llu that its signed checkpoint (%s) covers: entries were removed",
                     p->dir, (unsigned long long)p->size, (unsigned long long)p->cp_size,
                     p->cp_file);
        if (p->damaged)
            HSMCA_GUARD(repair_pass(p, e));
        char rel[40];
        snprintf(rel, sizeof(rel), "checkpoints/%llu", (unsigned long long)p->cp_size);
        int existed;
        HSMCA_GUARD(pubfs_create(&p->fs, rel, p->cp_note, p->cp_note_len, &existed, e));
        if (!existed)
            LOG_EVENT(LOG_LVL_WARN,
                      "audit publish: the latest checkpoint's copy was missing; "
                      "rewritten",
                      LOG_STR("path", rel));
        else if (!pubfs_same(&p->fs, rel, p->cp_note, p->cp_note_len))
            LOG_EVENT(LOG_LVL_WARN,
                      "audit publish: the latest checkpoint's copy differs from "
                      "it (kept as it is)",
                      LOG_STR("path", rel));
    }
    HSMCA_GUARD(write_vkey(p, e));
    p->log = log; /* only now: a refused log gets no checkpoint */
    if (p->repaired) {
        char n[24];
        snprintf(n, sizeof(n), "%llu", (unsigned long long)p->repaired);
        LOG_EVENT(LOG_LVL_WARN, "audit publish: tiles repaired at start", LOG_STR("count", n));
    }
    return HSMCA_OK;
}

/* ---- rounds ------------------------------------------------------------------------------ */

/* The lines of DIR/log in [p->bytes, end), count of them, into the edge: new durable lines,
 * or with replay, the existing ones again (repair_pass). */
hsmca_code pub_read_lines(audit_publish *p, uint64_t end, uint64_t count, int replay, hsmca_err *e)
{
    size_t cap = 2 * (size_t)AUDIT_LINE_MAX, have = 0;
    uint64_t want = p->size + count, next = p->bytes; /* the file offset of buf[have] */
    while (next < end || have > 0) {
        size_t chunk = cap - have;
        if (chunk > end - next)
            chunk = (size_t)(end - next);
        HSMCA_GUARD(pubfs_pread(p->logfd, next, chunk, p->rbuf + have, e));
        next += chunk;
        have += chunk;
        size_t start = 0;
        uint8_t *nl;
        while ((nl = memchr(p->rbuf + start, '\n', have - start)) != NULL) {
            size_t n = (size_t)(nl - (p->rbuf + start));
            audit_hash leaf;
            HSMCA_ENSURE(p->size < want, e, HSMCA_EINTERNAL,
                         "audit publish: more lines in the log than it says are durable");
            HSMCA_GUARD(audit_hash_leaf(p->rbuf + start, n, &leaf, e));
            HSMCA_GUARD(replay ? replay_one(p, n, &leaf, e)
                               : push_leaf(p, &leaf, p->bytes + n + 1, PUT_WRITE, e));
            start += n + 1;
        }
        memmove(p->rbuf, p->rbuf + start, have - start);
        have -= start;
        HSMCA_ENSURE(have < AUDIT_LINE_MAX && (next < end || have == 0), e, HSMCA_EINTERNAL,
                     "audit publish: the log's durable part ends inside a line");
    }
    HSMCA_ENSURE(p->size == want, e, HSMCA_EINTERNAL,
                 "audit publish: %llu lines where the log says %llu are durable",
                 (unsigned long long)p->size, (unsigned long long)want);
    return HSMCA_OK;
}

/* Signs and writes the checkpoint of the current size: the partial tiles first, then
 * checkpoints/<size>, then checkpoint, so a checkpoint never names a tile not on disk. */
static HSMCA_MUSTCHECK hsmca_code publish(audit_publish *p, hsmca_err *e)
{
    HSMCA_GUARD(put_partials(p, PUT_WRITE, e));
    audit_checkpoint c;
    memset(&c, 0, sizeof(c));
    snprintf(c.origin, sizeof(c.origin), "%s", p->origin);
    c.size = p->size;
    HSMCA_GUARD(audit_tree_root(&p->tree, &c.root, e));
    char *body, *note;
    size_t blen, nlen;
    HSMCA_GUARD(audit_checkpoint_body(&c, &body, &blen, e));
    hsmca_code rc = audit_note_sign(body, blen, &p->vk, p->sign, p->sign_ctx, &note, &nlen, e);
    free(body);
    if (rc != HSMCA_OK)
        return rc;
    char rel[40];
    snprintf(rel, sizeof(rel), "checkpoints/%llu", (unsigned long long)c.size);
    int existed = 0;
    rc = pubfs_create(&p->fs, rel, note, nlen, &existed, e);
    if (rc == HSMCA_OK && existed && !pubfs_same(&p->fs, rel, note, nlen))
        rc = hsmca_fail(e, HSMCA_EIO,
                        "audit publish: %s exists with other bytes: not replaced, and no "
                        "checkpoint is published over it",
                        rel);
    if (rc == HSMCA_OK)
        rc = pubfs_replace(&p->fs, "checkpoint", note, nlen, 1, e);
    if (rc != HSMCA_OK) {
        free(note);
        return rc;
    }
    pthread_mutex_lock(&p->mu);
    free(p->cp_note);
    p->cp_note = note;
    p->cp_note_len = nlen;
    p->cp_size = c.size;
    p->cp_root = c.root;
    p->cp_time = util_wall_now();
    p->have_cp = 1;
    pthread_mutex_unlock(&p->mu);
    return HSMCA_OK;
}

hsmca_code audit_publish_round(audit_publish *p, uint64_t *size, hsmca_err *e)
{
    HSMCA_ENSURE(p->log, e, HSMCA_EINTERNAL, "audit publish: not attached to the log");
    uint64_t lines, bytes;
    HSMCA_GUARD(put_full(p, PUT_WRITE, e)); /* what a failed round left */
    audit_log_durable(p->log, &lines, &bytes);
    if (lines > p->size)
        HSMCA_GUARD(pub_read_lines(p, bytes, lines - p->size, 0, e));
    if (!p->have_cp || p->size > p->cp_size)
        HSMCA_GUARD(publish(p, e));
    if (size)
        *size = p->cp_size;
    return HSMCA_OK;
}

void audit_publish_latest_time(audit_publish *p, uint64_t *size, int64_t *unix_time)
{
    pthread_mutex_lock(&p->mu);
    *size = p->have_cp ? p->cp_size : 0;
    *unix_time = p->have_cp ? p->cp_time : 0;
    pthread_mutex_unlock(&p->mu);
}

void audit_publish_latest(audit_publish *p, uint64_t *size, audit_hash *root)
{
    pthread_mutex_lock(&p->mu);
    *size = p->cp_size;
    *root = p->have_cp ? p->cp_root : audit_empty_root;
    pthread_mutex_unlock(&p->mu);
}

/* audit_vtiles.c - the tiles on disk, read: a hash source over them (audit_verify.h) and
 * the verifier's check that they hold what the log holds (audit_verify_int.h). */
#include "audit_verify.h"
#include "audit_verify_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

hsmca_code vt_read(const char *dir, const char *rel, uint8_t *buf, size_t cap, size_t *len,
                   hsmca_err *e)
{
    char path[4096];
    HSMCA_ENSURE(snprintf(path, sizeof(path), "%s/%s", dir, rel) < (int)sizeof(path), e,
                 HSMCA_EINVAL, "%s: path too long", rel);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return hsmca_fail(e, HSMCA_ENOTFOUND, "%s: missing", rel);
    HSMCA_ENSURE(fd >= 0, e, HSMCA_EIO, "%s: cannot open: %s", rel, strerror(errno));
    size_t n = 0;
    for (;;) {
        uint8_t extra;
        ssize_t r = n < cap ? read(fd, buf + n, cap - n) : read(fd, &extra, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int err = errno;
            close(fd);
            return hsmca_fail(e, HSMCA_EIO, "%s: read failed: %s", rel, strerror(err));
        }
        if (r == 0)
            break;
        if (n == cap) {
            close(fd);
            return hsmca_fail(e, HSMCA_EPERM, "%s: longer than %zu bytes", rel, cap);
        }
        n += (size_t)r;
    }
    close(fd);
    *len = n;
    return HSMCA_OK;
}

/* ---- the tile reader -------------------------------------------------------------------- */

void audit_tile_reader_init(audit_tile_reader *t, const char *dir, uint64_t tree_size)
{
    memset(t, 0, sizeof(*t));
    t->dir = dir;
    t->tree_size = tree_size;
}

/* Tile (level, index) of at least need hashes into t->tile: the width the tree needs,
 * else the full tile, else any wider partial one. */
static HSMCA_MUSTCHECK hsmca_code load_tile(audit_tile_reader *t, unsigned level, uint64_t index,
                                            unsigned need, hsmca_err *e)
{
    if (t->have && t->level == level && t->index == index && t->width >= need)
        return HSMCA_OK;
    t->have = 0;
    char rel[AUDIT_TILE_PATH_MAX];
    unsigned cands[AUDIT_TILE_WIDTH + 1], nc = 0;
    cands[nc++] = need;
    if (need < AUDIT_TILE_WIDTH) {
        cands[nc++] = AUDIT_TILE_WIDTH;
        for (unsigned w = need + 1; w < AUDIT_TILE_WIDTH; w++)
            cands[nc++] = w;
    }
    for (unsigned i = 0; i < nc; i++) {
        unsigned w = cands[i];
        size_t len;
        HSMCA_GUARD(audit_tile_path(level, index, w, rel, e));
        hsmca_code rc = vt_read(t->dir, rel, t->tile, AUDIT_TILE_BYTES, &len, e);
        if (rc == HSMCA_ENOTFOUND)
            continue;
        HSMCA_GUARD(rc);
        HSMCA_ENSURE(len == (size_t)w * AUDIT_HASH_LEN, e, HSMCA_EPERM,
                     "%s: %zu bytes, a tile of %u hashes is %u", rel, len, w, w * AUDIT_HASH_LEN);
        t->have = 1;
        t->level = level;
        t->index = index;
        t->width = w;
        return HSMCA_OK;
    }
    HSMCA_GUARD(audit_tile_path(level, index, need, rel, e));
    return hsmca_fail(e, HSMCA_ENOTFOUND, "%s: missing (nor any wider tile)", rel);
}

hsmca_code audit_tile_reader_source(void *ctx, unsigned level, uint64_t index, audit_hash *out,
                                    hsmca_err *e)
{
    audit_tile_reader *t = ctx;
    unsigned tl, h, k;
    uint64_t ti;
    audit_tile_locate(level, index, &tl, &ti, &h, &k);
    unsigned need = audit_tile_width(tl, ti, t->tree_size);
    HSMCA_ENSURE(need > 0 && ((size_t)k + 1) << h <= need, e, HSMCA_EINVAL,
                 "tiles: no subtree at level %u index %llu in a tree of %llu", level,
                 (unsigned long long)index, (unsigned long long)t->tree_size);
    HSMCA_GUARD(load_tile(t, tl, ti, need, e));
    return audit_tile_subtree(t->tile, t->width, h, k, out, e);
}

/* ---- the verifier's tile check ---------------------------------------------------------- */

hsmca_code vt_new(const char *dir, uint64_t size, vt_state **out, hsmca_err *e)
{
    vt_state *v = calloc(1, sizeof(*v));
    HSMCA_ENSURE(v, e, HSMCA_ENOMEM, "out of memory");
    v->dir = dir;
    v->size = size;
    *out = v;
    return HSMCA_OK;
}

void vt_free(vt_state *v)
{
    if (!v)
        return;
    free(v->bundle);
    free(v);
}

/* The first leaf of the log covered by hash j of tile (level, index). */
static uint64_t first_leaf(unsigned level, uint64_t index, unsigned j)
{
    return (index * AUDIT_TILE_WIDTH + j) << (AUDIT_TILE_HEIGHT * level);
}

/* Compares tile (level, index) of width hashes on disk with acc[0..width). */
static HSMCA_MUSTCHECK hsmca_code check_tile(vt_state *v, unsigned level, uint64_t index,
                                             unsigned width, const audit_hash *acc, hsmca_err *e)
{
    char rel[AUDIT_TILE_PATH_MAX];
    size_t len;
    HSMCA_GUARD(audit_tile_path(level, index, width, rel, e));
    hsmca_code rc = vt_read(v->dir, rel, v->file, AUDIT_TILE_BYTES, &len, e);
    if (rc == HSMCA_ENOTFOUND)
        return hsmca_fail(e, HSMCA_EPERM, "%s: missing (the latest checkpoint needs it)", rel);
    HSMCA_GUARD(rc);
    HSMCA_ENSURE(len == (size_t)width * AUDIT_HASH_LEN, e, HSMCA_EPERM,
                 "%s: %zu bytes, a tile of %u hashes is %u", rel, len, width,
                 width * AUDIT_HASH_LEN);
    for (unsigned j = 0; j < width; j++)
        if (memcmp(v->file + (size_t)j * AUDIT_HASH_LEN, acc[j].b, AUDIT_HASH_LEN) != 0)
            return hsmca_fail(e, HSMCA_EPERM,
                              "%s: hash %u does not match the log (entries from seq %llu)", rel, j,
                              (unsigned long long)first_leaf(level, index, j));
    return HSMCA_OK;
}

/* The bundle of level-0 tile index (of width entries) into v->ents. */
static HSMCA_MUSTCHECK hsmca_code load_bundle(vt_state *v, uint64_t index, unsigned width,
                                              hsmca_err *e)
{
    free(v->bundle);
    v->bundle = NULL;
    HSMCA_GUARD(audit_bundle_path(index, width, v->bundle_path, e));
    size_t cap = (size_t)width * (2 + AUDIT_ENTRY_MAX), len;
    v->bundle = malloc(cap);
    HSMCA_ENSURE(v->bundle, e, HSMCA_ENOMEM, "out of memory");
    hsmca_code rc = vt_read(v->dir, v->bundle_path, v->bundle, cap, &len, e);
    if (rc == HSMCA_ENOTFOUND)
        return hsmca_fail(e, HSMCA_EPERM, "%s: missing (the latest checkpoint needs it)",
                          v->bundle_path);
    HSMCA_GUARD(rc);
    hsmca_err pe;
    rc = audit_bundle_parse(v->bundle, len, v->ents, &v->nents, &pe);
    HSMCA_ENSURE(rc == HSMCA_OK, e, HSMCA_EPERM, "%s: %s", v->bundle_path, pe.msg);
    HSMCA_ENSURE(v->nents == width, e, HSMCA_EPERM, "%s: %u entries, expected %u", v->bundle_path,
                 v->nents, width);
    return HSMCA_OK;
}

/* A full tile at level gathered: check it, and pass its root up. */
static HSMCA_MUSTCHECK hsmca_code tile_full(vt_state *v, unsigned level, hsmca_err *e)
{
    for (; level < VT_LEVELS && v->count[level] == AUDIT_TILE_WIDTH; level++) {
        /* the index of this tile: every leaf so far is in it or before it */
        uint64_t done = 0;
        for (unsigned l = VT_LEVELS; l-- > level;)
            done = done * AUDIT_TILE_WIDTH + v->count[l];
        uint64_t index = done / AUDIT_TILE_WIDTH - 1;
        HSMCA_GUARD(check_tile(v, level, index, AUDIT_TILE_WIDTH, v->acc[level], e));
        audit_hash root;
        HSMCA_GUARD(audit_tile_subtree((const uint8_t *)v->acc[level], AUDIT_TILE_WIDTH,
                                       AUDIT_TILE_HEIGHT, 0, &root, e));
        v->count[level] = 0;
        if (level + 1 < VT_LEVELS)
            v->acc[level + 1][v->count[level + 1]++] = root;
    }
    return HSMCA_OK;
}

hsmca_code vt_leaf(vt_state *v, uint64_t seq, uint64_t off, const char *line, size_t len,
                   const audit_hash *leaf, hsmca_err *e)
{
    unsigned j = (unsigned)(seq % AUDIT_TILE_WIDTH);
    if (j == 0)
        HSMCA_GUARD(load_bundle(v, seq / AUDIT_TILE_WIDTH,
                                audit_tile_width(0, seq / AUDIT_TILE_WIDTH, v->size), e));
    HSMCA_ENSURE(j < v->nents && v->ents[j].len == len && memcmp(v->ents[j].data, line, len) == 0,
                 e, HSMCA_EPERM, "log seq %llu (byte %llu): differs from entry %u of %s",
                 (unsigned long long)seq, (unsigned long long)off, j, v->bundle_path);
    v->acc[0][v->count[0]++] = *leaf;
    if (v->count[0] == AUDIT_TILE_WIDTH)
        HSMCA_GUARD(tile_full(v, 0, e));
    return HSMCA_OK;
}

hsmca_code vt_finish(vt_state *v, hsmca_err *e)
{
    for (unsigned level = 0; level < VT_LEVELS; level++) {
        unsigned w = v->count[level];
        if (w == 0)
            continue;
        uint64_t index = v->size >> (AUDIT_TILE_HEIGHT * (level + 1));
        HSMCA_GUARD(check_tile(v, level, index, w, v->acc[level], e));
    }
    return HSMCA_OK;
}

/* audit_tiles.c - C2SP tlog-tiles paths, tiles and entry bundles (see audit_tiles.h).
 * Written from c2sp.org/tlog-tiles. */
#include "audit_tiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tree sizes stay below 2^63, so only tile levels 0..7 can hold a hash. */
#define LEVELS_IN_USE 8

/* ---- paths -------------------------------------------------------------------------- */

/* "<N>[.p/<W>]" after prefix into buf: N in 3-digit groups, all but the last with an 'x'. */
static HSMCA_MUSTCHECK hsmca_code write_path(const char *prefix, uint64_t index, unsigned width,
                                             char *buf, hsmca_err *e)
{
    HSMCA_ENSURE(width >= 1 && width <= AUDIT_TILE_WIDTH, e, HSMCA_EINVAL,
                 "tlog-tiles: a tile is 1-256 hashes wide, not %u", width);
    HSMCA_ENSURE(index <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "tlog-tiles: tile index past the 2^63-1 cap");
    char digits[24];
    int nd = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)index);
    int pad = (3 - nd % 3) % 3, ngroups = (nd + pad) / 3;
    char padded[27];
    memset(padded, '0', (size_t)pad);
    memcpy(padded + pad, digits, (size_t)nd + 1);
    size_t at = (size_t)snprintf(buf, AUDIT_TILE_PATH_MAX, "%s", prefix);
    for (int g = 0; g < ngroups; g++)
        at += (size_t)snprintf(buf + at, AUDIT_TILE_PATH_MAX - at, "%s%.3s%s",
                               g + 1 < ngroups ? "x" : "", padded + 3 * g,
                               g + 1 < ngroups ? "/" : "");
    if (width < AUDIT_TILE_WIDTH)
        snprintf(buf + at, AUDIT_TILE_PATH_MAX - at, ".p/%u", width);
    return HSMCA_OK;
}

hsmca_code audit_tile_path(unsigned level, uint64_t index, unsigned width,
                           char buf[AUDIT_TILE_PATH_MAX], hsmca_err *e)
{
    HSMCA_ENSURE(level <= AUDIT_TILE_LEVEL_MAX, e, HSMCA_EINVAL,
                 "tlog-tiles: a tile level is 0-63, not %u", level);
    char prefix[16];
    snprintf(prefix, sizeof(prefix), "tile/%u/", level);
    return write_path(prefix, index, width, buf, e);
}

hsmca_code audit_bundle_path(uint64_t index, unsigned width, char buf[AUDIT_TILE_PATH_MAX],
                             hsmca_err *e)
{
    return write_path("tile/entries/", index, width, buf, e);
}

/* A decimal of 1..maxd digits at s[*at..len) without leading zeros, up to max. */
static int parse_dec(const char *s, size_t len, size_t *at, int maxd, uint64_t max, uint64_t *out)
{
    size_t i = *at;
    uint64_t v = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9' && (int)(i - *at) < maxd)
        v = v * 10 + (uint64_t)(s[i++] - '0');
    if (i == *at || (s[*at] == '0' && i - *at > 1) || v > max)
        return 0;
    *at = i;
    *out = v;
    return 1;
}

/* "<N>" in 3-digit groups at s[*at..len): as write_path writes it, and no other way. */
static int parse_index(const char *s, size_t len, size_t *at, uint64_t *out)
{
    uint64_t v = 0;
    for (int g = 0;; g++) {
        int x = *at < len && s[*at] == 'x';
        size_t i = *at + (size_t)x;
        if (g >= 7 || i + 3 > len)
            return 0;
        for (size_t j = i; j < i + 3; j++)
            if (s[j] < '0' || s[j] > '9')
                return 0;
        unsigned grp = (unsigned)(s[i] - '0') * 100 + (unsigned)(s[i + 1] - '0') * 10 +
                       (unsigned)(s[i + 2] - '0');
        if (x && g == 0 && grp == 0)
            return 0; /* "x000/..." is a leading zero */
        if (v > (AUDIT_TREE_SIZE_MAX - grp) / 1000)
            return 0;
        v = v * 1000 + grp;
        *at = i + 3;
        if (!x) {
            *out = v;
            return 1;
        }
        if (*at >= len || s[*at] != '/')
            return 0;
        (*at)++;
    }
}

hsmca_code audit_tile_path_parse(const char *s, size_t len, int *entries, unsigned *level,
                                 uint64_t *index, unsigned *width, hsmca_err *e)
{
    static const char tile[] = "tile/", ent[] = "entries/";
    HSMCA_ENSURE(len < AUDIT_TILE_PATH_MAX && len > 5 && memcmp(s, tile, 5) == 0, e, HSMCA_EINVAL,
                 "tlog-tiles: a path is tile/<L>/<N>[.p/<W>] or "
                 "tile/entries/<N>[.p/<W>]");
    size_t at = 5;
    int is_ent = len - at >= 8 && memcmp(s + at, ent, 8) == 0;
    uint64_t lv = 0, idx, w = AUDIT_TILE_WIDTH;
    if (is_ent) {
        at += 8;
    } else {
        HSMCA_ENSURE(parse_dec(s, len, &at, 2, AUDIT_TILE_LEVEL_MAX, &lv) && at < len &&
                         s[at] == '/',
                     e, HSMCA_EINVAL, "tlog-tiles: a tile level is 0-63 without leading zeros");
        at++;
    }
    HSMCA_ENSURE(parse_index(s, len, &at, &idx), e, HSMCA_EINVAL,
                 "tlog-tiles: a tile index is 3-digit groups, all but the last after an 'x'");
    if (at < len) {
        HSMCA_ENSURE(len - at > 3 && memcmp(s + at, ".p/", 3) == 0, e, HSMCA_EINVAL,
                     "tlog-tiles: only .p/<W> may follow a tile index");
        at += 3;
        HSMCA_ENSURE(parse_dec(s, len, &at, 3, AUDIT_TILE_WIDTH - 1, &w) && w >= 1 && at == len, e,
                     HSMCA_EINVAL, "tlog-tiles: a partial width is 1-255 without leading zeros");
    }
    *entries = is_ent;
    *level = (unsigned)lv;
    *index = idx;
    *width = (unsigned)w;
    return HSMCA_OK;
}

/* ---- which tiles ---------------------------------------------------------------------- */

unsigned audit_tile_width(unsigned level, uint64_t index, uint64_t tree_size)
{
    if (level >= LEVELS_IN_USE || index > (UINT64_MAX >> AUDIT_TILE_HEIGHT))
        return 0;
    uint64_t count = tree_size >> (AUDIT_TILE_HEIGHT * level), start = index * AUDIT_TILE_WIDTH;
    if (count <= start)
        return 0;
    return count - start >= AUDIT_TILE_WIDTH ? AUDIT_TILE_WIDTH : (unsigned)(count - start);
}

hsmca_code audit_tiles_new(uint64_t old_size, uint64_t new_size, audit_tile_visit visit, void *ctx,
                           hsmca_err *e)
{
    HSMCA_ENSURE(old_size <= new_size && new_size <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "tlog-tiles: sizes must grow, up to the 2^63-1 cap");
    for (unsigned level = 0; level < LEVELS_IN_USE; level++) {
        uint64_t c_old = old_size >> (AUDIT_TILE_HEIGHT * level);
        uint64_t c_new = new_size >> (AUDIT_TILE_HEIGHT * level);
        if (c_new == c_old)
            continue;
        for (uint64_t t = c_old / AUDIT_TILE_WIDTH; t <= (c_new - 1) / AUDIT_TILE_WIDTH; t++)
            HSMCA_GUARD(visit(ctx, level, t, audit_tile_width(level, t, new_size), e));
    }
    return HSMCA_OK;
}

/* ---- tile contents -------------------------------------------------------------------- */

hsmca_code audit_tile_build(unsigned level, uint64_t index, unsigned width, audit_hash_source src,
                            void *ctx, uint8_t *out, hsmca_err *e)
{
    HSMCA_ENSURE(level < LEVELS_IN_USE && width >= 1 && width <= AUDIT_TILE_WIDTH &&
                     index <= (AUDIT_TREE_SIZE_MAX >> AUDIT_TILE_HEIGHT),
                 e, HSMCA_EINVAL, "tlog-tiles: no tile %u/%llu of width %u", level,
                 (unsigned long long)index, width);
    for (unsigned i = 0; i < width; i++) {
        audit_hash h;
        HSMCA_GUARD(src(ctx, AUDIT_TILE_HEIGHT * level, index * AUDIT_TILE_WIDTH + i, &h, e));
        memcpy(out + (size_t)i * AUDIT_HASH_LEN, h.b, AUDIT_HASH_LEN);
    }
    return HSMCA_OK;
}

void audit_tile_locate(unsigned tlevel, uint64_t index, unsigned *level, uint64_t *tindex,
                       unsigned *height, unsigned *k)
{
    unsigned h = tlevel % AUDIT_TILE_HEIGHT;
    *level = tlevel / AUDIT_TILE_HEIGHT;
    *height = h;
    *tindex = index >> (AUDIT_TILE_HEIGHT - h);
    *k = (unsigned)(index & ((1u << (AUDIT_TILE_HEIGHT - h)) - 1));
}

hsmca_code audit_tile_subtree(const uint8_t *tile, unsigned width, unsigned height, unsigned k,
                              audit_hash *out, hsmca_err *e)
{
    HSMCA_ENSURE(height <= AUDIT_TILE_HEIGHT && width <= AUDIT_TILE_WIDTH &&
                     ((size_t)k + 1) << height <= width,
                 e, HSMCA_EINVAL, "tlog-tiles: no subtree of height %u at %u in a tile of width %u",
                 height, k, width);
    audit_hash h[AUDIT_TILE_WIDTH];
    unsigned n = 1u << height;
    memcpy(h, tile + ((size_t)k << height) * AUDIT_HASH_LEN, (size_t)n * AUDIT_HASH_LEN);
    for (; n > 1; n /= 2)
        for (unsigned i = 0; i < n / 2; i++)
            HSMCA_GUARD(audit_hash_node(&h[2 * i], &h[2 * i + 1], &h[i], e));
    *out = h[0];
    return HSMCA_OK;
}

/* ---- entry bundles -------------------------------------------------------------------- */

hsmca_code audit_bundle_encode(const audit_bundle_entry *entries, unsigned n, uint8_t **out,
                               size_t *outlen, hsmca_err *e)
{
    HSMCA_ENSURE(n >= 1 && n <= AUDIT_TILE_WIDTH, e, HSMCA_EINVAL,
                 "tlog-tiles: a bundle holds 1-256 entries, not %u", n);
    size_t total = 0;
    for (unsigned i = 0; i < n; i++) {
        HSMCA_ENSURE(entries[i].len <= AUDIT_ENTRY_MAX, e, HSMCA_EINVAL,
                     "tlog-tiles: entry %u is %zu bytes, more than a uint16 length", i,
                     entries[i].len);
        total += 2 + entries[i].len;
    }
    uint8_t *b = malloc(total);
    HSMCA_ENSURE(b, e, HSMCA_ENOMEM, "tlog-tiles: out of memory for a bundle");
    size_t at = 0;
    for (unsigned i = 0; i < n; i++) {
        b[at++] = (uint8_t)(entries[i].len >> 8);
        b[at++] = (uint8_t)entries[i].len;
        if (entries[i].len)
            memcpy(b + at, entries[i].data, entries[i].len);
        at += entries[i].len;
    }
    *out = b;
    *outlen = total;
    return HSMCA_OK;
}

hsmca_code audit_bundle_parse(const uint8_t *b, size_t len, audit_bundle_entry *entries,
                              unsigned *n, hsmca_err *e)
{
    HSMCA_ENSURE(len <= AUDIT_BUNDLE_MAX, e, HSMCA_EINVAL,
                 "tlog-tiles: a bundle is at most %zu bytes", AUDIT_BUNDLE_MAX);
    unsigned count = 0;
    for (size_t at = 0; at < len; count++) {
        HSMCA_ENSURE(count < AUDIT_TILE_WIDTH, e, HSMCA_EINVAL,
                     "tlog-tiles: a bundle holds at most 256 entries");
        HSMCA_ENSURE(len - at >= 2, e, HSMCA_EINVAL,
                     "tlog-tiles: bundle entry %u has a truncated length", count);
        size_t elen = (size_t)b[at] << 8 | b[at + 1];
        at += 2;
        HSMCA_ENSURE(len - at >= elen, e, HSMCA_EINVAL, "tlog-tiles: bundle entry %u is cut short",
                     count);
        entries[count].data = b + at;
        entries[count].len = elen;
        at += elen;
    }
    HSMCA_ENSURE(count > 0, e, HSMCA_EINVAL, "tlog-tiles: an empty bundle is never served");
    *n = count;
    return HSMCA_OK;
}

hsmca_code audit_bundle_tile(const uint8_t *b, size_t len, unsigned width, uint8_t *tile,
                             hsmca_err *e)
{
    audit_bundle_entry *ents = malloc(AUDIT_TILE_WIDTH * sizeof(*ents));
    HSMCA_ENSURE(ents, e, HSMCA_ENOMEM, "tlog-tiles: out of memory");
    unsigned n = 0;
    hsmca_code rc = audit_bundle_parse(b, len, ents, &n, e);
    if (rc == HSMCA_OK && n != width)
        rc = hsmca_fail(e, HSMCA_EINVAL, "tlog-tiles: the bundle holds %u entries, not %u", n,
                        width);
    for (unsigned i = 0; rc == HSMCA_OK && i < n; i++) {
        audit_hash h;
        rc = audit_hash_leaf(ents[i].data, ents[i].len, &h, e);
        if (rc == HSMCA_OK)
            memcpy(tile + (size_t)i * AUDIT_HASH_LEN, h.b, AUDIT_HASH_LEN);
    }
    free(ents);
    return rc;
}

/* test_audit_tiles.c - C2SP tlog-tiles (audit/audit_tiles.h): path encoding (the spec's
 * examples), which tiles a checkpoint needs (the spec's 70,000-leaf example), tile
 * contents, a tile-backed hash source that proves what the in-memory tree proves, and
 * entry bundles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_tiles.h"
#include "audit_tu.h"

static void expect_path(hsmca_code rc, const char *got, const char *want)
{
    assert_int_equal(rc, HSMCA_OK);
    assert_string_equal(got, want);
    int ent;
    unsigned level, width;
    uint64_t index;
    assert_int_equal(audit_tile_path_parse(got, strlen(got), &ent, &level, &index, &width, NULL),
                     HSMCA_OK);
}

static void test_paths_spec_examples(void **state)
{
    char p[AUDIT_TILE_PATH_MAX];
    /* c2sp.org/tlog-tiles: "index 1234067 will be encoded as x001/x234/067". */
    expect_path(audit_tile_path(0, 1234067, 256, p, NULL), p, "tile/0/x001/x234/067");
    expect_path(audit_tile_path(2, 1234067, 17, p, NULL), p, "tile/2/x001/x234/067.p/17");
    expect_path(audit_bundle_path(1234067, 256, p, NULL), p, "tile/entries/x001/x234/067");
    expect_path(audit_bundle_path(0, 1, p, NULL), p, "tile/entries/000.p/1");
    expect_path(audit_tile_path(0, 0, 256, p, NULL), p, "tile/0/000");
    expect_path(audit_tile_path(63, 999, 255, p, NULL), p, "tile/63/999.p/255");
    expect_path(audit_tile_path(1, 1000, 256, p, NULL), p, "tile/1/x001/000");
    expect_path(audit_tile_path(0, AUDIT_TREE_SIZE_MAX, 256, p, NULL), p,
                "tile/0/x009/x223/x372/x036/x854/x775/807");
    hsmca_err e;
    assert_int_equal(audit_tile_path(64, 0, 256, p, &e), HSMCA_EINVAL);
    assert_int_equal(audit_tile_path(0, 0, 0, p, &e), HSMCA_EINVAL);
    assert_int_equal(audit_tile_path(0, 0, 257, p, &e), HSMCA_EINVAL);
    assert_int_equal(audit_tile_path(0, AUDIT_TREE_SIZE_MAX + 1, 1, p, &e), HSMCA_EINVAL);
}

static void test_paths_parse(void **state)
{
    uint64_t rng = 7;
    for (int i = 0; i < 2000; i++) {
        char p[AUDIT_TILE_PATH_MAX];
        uint64_t r = atu_rand(&rng), idx = atu_rand(&rng) >> (r % 64);
        idx &= AUDIT_TREE_SIZE_MAX;
        unsigned level = (unsigned)(r % 64), width = 1 + (unsigned)((r >> 8) % 256);
        int ent = (r >> 20) & 1, ent2;
        unsigned level2, width2;
        uint64_t idx2;
        if (ent)
            assert_int_equal(audit_bundle_path(idx, width, p, NULL), HSMCA_OK);
        else
            assert_int_equal(audit_tile_path(level, idx, width, p, NULL), HSMCA_OK);
        assert_int_equal(audit_tile_path_parse(p, strlen(p), &ent2, &level2, &idx2, &width2, NULL),
                         HSMCA_OK);
        assert_int_equal(ent2, ent);
        assert_int_equal(level2, ent ? 0 : level);
        assert_true(idx2 == idx);
        assert_int_equal(width2, width);
    }
    static const char *const bad[] = {
        "",
        "tile/",
        "tile/0",
        "tile/0/",
        "tile/0/1",
        "tile/0/01",
        "tile/0/0001",
        "tile/00/000",
        "tile/64/000",
        "tile/-1/000",
        "tile/0/x000/001",
        "tile/0/x001",
        "tile/0/x001/",
        "tile/0/x1000/000",
        "tile/0/000/",
        "tile/0/000x",
        "tile/0/000.p/",
        "tile/0/000.p/0",
        "tile/0/000.p/012",
        "tile/0/000.p/256",
        "tile/0/000.p/1/",
        "tile/0/000.q/1",
        "tile/0/x009/x223/x372/x036/x854/x775/808",
        "tile/0/x001/x001/x001/x001/x001/x001/x001/000",
        "tile/entries/",
        "tile/entries/1",
        "tile/entry/000",
        "tile/8/0/000",
        "/tile/0/000",
        "tile/0/00a",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int ent;
        unsigned level, width;
        uint64_t idx;
        hsmca_err e;
        hsmca_err_clear(&e);
        if (audit_tile_path_parse(bad[i], strlen(bad[i]), &ent, &level, &idx, &width, &e) !=
            HSMCA_EINVAL)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_non_null(strstr(e.msg, "tlog-tiles: "));
    }
}

/* ---- which tiles ---------------------------------------------------------------------- */

typedef struct {
    unsigned n;
    unsigned level[2048];
    uint64_t index[2048];
    unsigned width[2048];
} visits;

static HSMCA_MUSTCHECK hsmca_code record(void *ctx, unsigned level, uint64_t index, unsigned width,
                                         hsmca_err *e)
{
    visits *v = ctx;
    HSMCA_ENSURE(v->n < 2048, e, HSMCA_EINTERNAL, "too many tiles");
    v->level[v->n] = level;
    v->index[v->n] = index;
    v->width[v->n++] = width;
    return HSMCA_OK;
}

static void test_tiles_for_size_spec_examples(void **state)
{
    static visits v;
    /* "A tree of size 70,000 will be represented by 273 full level 0 tiles, one partial
     * level 0 tile of width 112, one full level 1 tile, one partial level 1 tile of width
     * 17, and one partial level 2 tile of width 1." */
    v.n = 0;
    assert_int_equal(audit_tiles_new(0, 70000, record, &v, NULL), HSMCA_OK);
    assert_int_equal(v.n, 273 + 1 + 1 + 1 + 1);
    for (unsigned i = 0; i < 273; i++)
        assert_true(v.level[i] == 0 && v.index[i] == i && v.width[i] == 256);
    assert_true(v.level[273] == 0 && v.index[273] == 273 && v.width[273] == 112);
    assert_true(v.level[274] == 1 && v.index[274] == 0 && v.width[274] == 256);
    assert_true(v.level[275] == 1 && v.index[275] == 1 && v.width[275] == 17);
    assert_true(v.level[276] == 2 && v.index[276] == 0 && v.width[276] == 1);
    /* "A tree of size 256 will be represented by a full level 0 tile and a partial level 1
     * tile of width 1." */
    v.n = 0;
    assert_int_equal(audit_tiles_new(0, 256, record, &v, NULL), HSMCA_OK);
    assert_int_equal(v.n, 2);
    assert_true(v.level[0] == 0 && v.width[0] == 256 && v.level[1] == 1 && v.width[1] == 1);
    /* Growing 256 -> 257 adds one level-0 tile; 70000 -> 70000 nothing; 255 -> 256 the
     * full tile and level 1. */
    v.n = 0;
    assert_int_equal(audit_tiles_new(256, 257, record, &v, NULL), HSMCA_OK);
    assert_true(v.n == 1 && v.level[0] == 0 && v.index[0] == 1 && v.width[0] == 1);
    v.n = 0;
    assert_int_equal(audit_tiles_new(70000, 70000, record, &v, NULL), HSMCA_OK);
    assert_int_equal(v.n, 0);
    v.n = 0;
    assert_int_equal(audit_tiles_new(255, 256, record, &v, NULL), HSMCA_OK);
    assert_true(v.n == 2 && v.width[0] == 256 && v.level[1] == 1 && v.width[1] == 1);
    assert_int_equal(audit_tiles_new(2, 1, record, &v, NULL), HSMCA_EINVAL);
    assert_int_equal(audit_tile_width(0, 273, 70000), 112);
    assert_int_equal(audit_tile_width(0, 274, 70000), 0);
    assert_int_equal(audit_tile_width(3, 0, 70000), 0);
    assert_int_equal(audit_tile_width(7, 0, AUDIT_TREE_SIZE_MAX), 127);
    assert_int_equal(audit_tile_width(8, 0, AUDIT_TREE_SIZE_MAX), 0);
}

/* ---- tile contents and a tile-backed source ------------------------------------------- */

/* Every tile of a tree of size leaves, level by level: tile (L, n) at tiles[L] + n·8192. */
typedef struct {
    uint64_t size;
    uint8_t *tiles[8];
} tile_store;

typedef struct {
    tile_store *ts;
    atu_tree *mem;
} build_ctx;

static HSMCA_MUSTCHECK hsmca_code build_one(void *ctx, unsigned level, uint64_t index,
                                            unsigned width, hsmca_err *e)
{
    build_ctx *b = ctx;
    assert_int_equal(width, audit_tile_width(level, index, b->ts->size));
    return audit_tile_build(level, index, width, atu_source, b->mem,
                            b->ts->tiles[level] + index * AUDIT_TILE_BYTES, e);
}

static HSMCA_MUSTCHECK hsmca_code tile_source(void *ctx, unsigned tlevel, uint64_t index,
                                              audit_hash *out, hsmca_err *e)
{
    const tile_store *ts = ctx;
    unsigned level, height, k;
    uint64_t tindex;
    audit_tile_locate(tlevel, index, &level, &tindex, &height, &k);
    unsigned width = audit_tile_width(level, tindex, ts->size);
    HSMCA_ENSURE(width > 0, e, HSMCA_EINTERNAL, "no tile %u/%llu", level,
                 (unsigned long long)tindex);
    return audit_tile_subtree(ts->tiles[level] + tindex * AUDIT_TILE_BYTES, width, height, k, out,
                              e);
}

static void test_tile_contents(void **state)
{
    const uint64_t n = 70000;
    audit_hash *leaves = malloc(n * sizeof(audit_hash));
    assert_non_null(leaves);
    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(audit_hash_leaf((const uint8_t *)&i, sizeof(i), &leaves[i], NULL),
                         HSMCA_OK);
    atu_tree mem;
    atu_tree_build(&mem, leaves, n);
    tile_store ts = {.size = n};
    for (unsigned l = 0; l < 8; l++)
        ts.tiles[l] = calloc(((n >> (8 * l)) / 256 + 1), AUDIT_TILE_BYTES);
    build_ctx b = {&ts, &mem};
    assert_int_equal(audit_tiles_new(0, n, build_one, &b, NULL), HSMCA_OK);
    /* Level 0 holds the leaf hashes; a full tile's root is the next level's hash. */
    assert_memory_equal(ts.tiles[0], leaves, n * AUDIT_HASH_LEN);
    for (uint64_t t = 0; t < n / 256; t++) {
        audit_hash r;
        assert_int_equal(
            audit_tile_subtree(ts.tiles[0] + t * AUDIT_TILE_BYTES, 256, 8, 0, &r, NULL), HSMCA_OK);
        assert_memory_equal(r.b, ts.tiles[1] + t * AUDIT_HASH_LEN, AUDIT_HASH_LEN);
    }
    /* Every perfect subtree the tiles can give equals the tree's own. */
    uint64_t rng = 99;
    for (unsigned tl = 0; tl <= 16; tl++)
        for (uint64_t i = 0; i < (n >> tl); i += 1 + atu_rand(&rng) % 397) {
            audit_hash a, c;
            assert_int_equal(tile_source(&ts, tl, i, &a, NULL), HSMCA_OK);
            assert_int_equal(atu_source(&mem, tl, i, &c, NULL), HSMCA_OK);
            assert_true(audit_hash_equal(&a, &c));
        }
    /* So proofs served from tiles are the proofs. */
    for (int s = 0; s < 100; s++) {
        uint64_t m = atu_rand(&rng) % (n + 1), idx = atu_rand(&rng) % n;
        audit_hash p1[AUDIT_PROOF_MAX], p2[AUDIT_PROOF_MAX], r1, r2;
        size_t n1, n2;
        assert_int_equal(audit_prove_inclusion(idx, n, tile_source, &ts, p1, &n1, NULL), HSMCA_OK);
        assert_int_equal(audit_prove_inclusion(idx, n, atu_source, &mem, p2, &n2, NULL), HSMCA_OK);
        assert_int_equal(n1, n2);
        assert_memory_equal(p1, p2, n1 * sizeof(audit_hash));
        assert_int_equal(audit_prove_consistency(m, n, tile_source, &ts, p1, &n1, NULL), HSMCA_OK);
        assert_int_equal(audit_prove_consistency(m, n, atu_source, &mem, p2, &n2, NULL), HSMCA_OK);
        assert_int_equal(n1, n2);
        assert_memory_equal(p1, p2, n1 * sizeof(audit_hash));
        assert_int_equal(audit_root_from_source(m, tile_source, &ts, &r1, NULL), HSMCA_OK);
        r2 = atu_mth(leaves, 0, m);
        assert_true(audit_hash_equal(&r1, &r2));
    }
    hsmca_err e;
    audit_hash r;
    assert_int_equal(audit_tile_subtree(ts.tiles[0], 255, 8, 0, &r, &e), HSMCA_EINVAL);
    assert_int_equal(audit_tile_subtree(ts.tiles[0], 256, 7, 2, &r, &e), HSMCA_EINVAL);
    assert_int_equal(audit_tile_subtree(ts.tiles[0], 256, 9, 0, &r, &e), HSMCA_EINVAL);
    uint8_t tile[AUDIT_TILE_BYTES];
    assert_int_equal(audit_tile_build(0, 0, 0, atu_source, &mem, tile, &e), HSMCA_EINVAL);
    assert_int_equal(audit_tile_build(8, 0, 1, atu_source, &mem, tile, &e), HSMCA_EINVAL);
    for (unsigned l = 0; l < 8; l++)
        free(ts.tiles[l]);
    atu_tree_free(&mem);
    free(leaves);
}

/* ---- entry bundles ---------------------------------------------------------------------- */

static void test_bundles(void **state)
{
    static uint8_t data[AUDIT_ENTRY_MAX + 512]; /* entry i starts at data + i */
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 7);
    audit_bundle_entry in[257], out[AUDIT_TILE_WIDTH];
    for (unsigned i = 0; i < 257; i++)
        in[i] = (audit_bundle_entry){data + i, i == 3 ? AUDIT_ENTRY_MAX : i % 50};
    uint8_t *b;
    size_t len;
    unsigned n;
    assert_int_equal(audit_bundle_encode(in, 256, &b, &len, NULL), HSMCA_OK);
    assert_int_equal(b[0], 0);
    assert_int_equal(b[1], 0); /* entry 0 is empty */
    assert_int_equal(b[2], 0);
    assert_int_equal(b[3], 1);
    assert_int_equal(b[4], data[1]);
    assert_int_equal(audit_bundle_parse(b, len, out, &n, NULL), HSMCA_OK);
    assert_int_equal(n, 256);
    for (unsigned i = 0; i < n; i++) {
        assert_int_equal(out[i].len, in[i].len);
        assert_memory_equal(out[i].data, in[i].data, in[i].len);
    }
    /* The bundle hashes to the level-0 tile of its entries. */
    static uint8_t tile[AUDIT_TILE_BYTES];
    assert_int_equal(audit_bundle_tile(b, len, 256, tile, NULL), HSMCA_OK);
    for (unsigned i = 0; i < 256; i++) {
        audit_hash h;
        assert_int_equal(audit_hash_leaf(in[i].data, in[i].len, &h, NULL), HSMCA_OK);
        assert_memory_equal(tile + i * AUDIT_HASH_LEN, h.b, AUDIT_HASH_LEN);
    }
    hsmca_err e;
    assert_int_equal(audit_bundle_tile(b, len, 255, tile, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "holds 256 entries, not 255"));
    assert_int_equal(audit_bundle_parse(b, len - 1, out, &n, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "cut short"));
    assert_int_equal(audit_bundle_parse(b, 1, out, &n, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "truncated length"));
    assert_int_equal(audit_bundle_parse(b, 0, out, &n, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "empty bundle"));
    free(b);
    /* 257 entries: neither written nor read. */
    assert_int_equal(audit_bundle_encode(in, 257, &b, &len, &e), HSMCA_EINVAL);
    in[256].len = 0;
    uint8_t two[2 * 257] = {0};
    assert_int_equal(audit_bundle_parse(two, sizeof(two), out, &n, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "at most 256 entries"));
    in[0].len = AUDIT_ENTRY_MAX + 1;
    assert_int_equal(audit_bundle_encode(in, 1, &b, &len, &e), HSMCA_EINVAL);
    assert_int_equal(audit_bundle_encode(in, 0, &b, &len, &e), HSMCA_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_spec_examples),
        cmocka_unit_test(test_paths_parse),
        cmocka_unit_test(test_tiles_for_size_spec_examples),
        cmocka_unit_test(test_tile_contents),
        cmocka_unit_test(test_bundles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_audit_merkle.c - RFC 9162 hashing, the incremental tree, and inclusion and
 * consistency proofs (audit/audit_merkle.h): the transparency-dev/merkle test vectors, then
 * property tests against the RFC's recursive definitions over random trees. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "audit_merkle.h"
#include "audit_tu.h"

/* ---- test vectors ----------------------------------------------------------------------
 * Copied (data only) from github.com/transparency-dev/merkle: testonly/constants.go
 * (LeafInputs, NodeHashes, RootHashes, CompactTrees) and proof/verify_test.go
 * (inclusionProofs, consistencyProofs; their leaf numbers there are 1-based, here
 * 0-based). */

static const char *const LEAF_INPUTS[8] = {
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
};

static const char *const NODE_HASHES[4][8] = {
    {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
     "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
     "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
     "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
     "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
     "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
     "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
     "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1"},
    {"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
     "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
     "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
     "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"},
    {"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
     "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"},
    {"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"},
};

static const char *const ROOT_HASHES[9] = {
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
};

/* CompactTrees: the frontier of each size as (level, index) into NODE_HASHES, left first. */
static const int COMPACT[9][3][2] = {
    {{-1}},         {{0, 0}, {-1}},         {{1, 0}, {-1}},         {{1, 0}, {0, 2}, {-1}},
    {{2, 0}, {-1}}, {{2, 0}, {0, 4}, {-1}}, {{2, 0}, {1, 2}, {-1}}, {{2, 0}, {1, 2}, {0, 6}},
    {{3, 0}, {-1}},
};

typedef struct {
    uint64_t a, b; /* inclusion: leaf index, size; consistency: size1, size2 */
    const char *proof[3];
} vec_proof;

static const vec_proof INCLUSION[] = {
    {0, 1, {NULL}},
    {0,
     8,
     {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
    {5,
     8,
     {"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
    {2, 3, {"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
    {1,
     5,
     {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
};

static const vec_proof CONSISTENCY[] = {
    {1, 1, {NULL}},
    {1,
     8,
     {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
    {6,
     8,
     {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
    {2,
     5,
     {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
    {6,
     7,
     {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
      "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
};

static audit_hash H(const char *hex)
{
    audit_hash h;
    assert_int_equal(atu_unhex(hex, h.b, sizeof(h.b)), AUDIT_HASH_LEN);
    return h;
}

static audit_hash g_leaves[8];
static atu_tree g_vec;

static int setup(void **state)
{
    for (int i = 0; i < 8; i++) {
        uint8_t in[16];
        size_t n = atu_unhex(LEAF_INPUTS[i], in, sizeof(in));
        if (audit_hash_leaf(in, n, &g_leaves[i], NULL) != HSMCA_OK)
            return -1;
    }
    atu_tree_build(&g_vec, g_leaves, 8);
    return 0;
}

static int teardown(void **state)
{
    atu_tree_free(&g_vec);
    return 0;
}

static void test_vectors_hashes(void **state)
{
    audit_hash h;
    assert_int_equal(audit_hash_leaf(NULL, 0, &h, NULL), HSMCA_OK);
    assert_true(audit_hash_equal(&h, &g_leaves[0]));
    for (unsigned l = 0; l < 4; l++)
        for (unsigned i = 0; i < (8u >> l); i++) {
            audit_hash want = H(NODE_HASHES[l][i]);
            assert_true(audit_hash_equal(&g_vec.levels[l][i], &want));
        }
    /* The empty root is SHA-256(""), and the constant says so. */
    audit_hash empty = H(ROOT_HASHES[0]);
    assert_true(audit_hash_equal(&empty, &audit_empty_root));
}

static void test_vectors_roots_and_frontier(void **state)
{
    audit_tree t;
    audit_tree_init(&t);
    for (uint64_t n = 0; n <= 8; n++) {
        audit_hash r, want = H(ROOT_HASHES[n]);
        assert_int_equal(audit_tree_root(&t, &r, NULL), HSMCA_OK);
        assert_true(audit_hash_equal(&r, &want));
        assert_int_equal(audit_root_of_leaves(g_leaves, n, &r, NULL), HSMCA_OK);
        assert_true(audit_hash_equal(&r, &want));
        assert_int_equal(audit_root_from_source(n, atu_source, &g_vec, &r, NULL), HSMCA_OK);
        assert_true(audit_hash_equal(&r, &want));
        /* The frontier is transparency-dev's compact tree, largest subtree first. */
        int j = 0;
        for (int lvl = 62; lvl >= 0; lvl--) {
            if (!((n >> lvl) & 1))
                continue;
            assert_int_equal(COMPACT[n][j][0], lvl);
            audit_hash want_node = H(NODE_HASHES[lvl][COMPACT[n][j][1]]);
            assert_true(audit_hash_equal(&t.nodes[lvl], &want_node));
            j++;
        }
        assert_true(j == 3 || COMPACT[n][j][0] == -1);
        if (n < 8)
            assert_int_equal(audit_tree_append(&t, &g_leaves[n], NULL), HSMCA_OK);
    }
}

static size_t vec_hashes(const vec_proof *v, audit_hash *out)
{
    size_t n = 0;
    while (n < 3 && v->proof[n]) {
        out[n] = H(v->proof[n]);
        n++;
    }
    return n;
}

static void test_vectors_inclusion(void **state)
{
    for (size_t t = 0; t < sizeof(INCLUSION) / sizeof(INCLUSION[0]); t++) {
        const vec_proof *v = &INCLUSION[t];
        audit_hash want[3], got[AUDIT_PROOF_MAX], root = H(ROOT_HASHES[v->b]);
        size_t nw = vec_hashes(v, want), ng = 99;
        assert_int_equal(audit_prove_inclusion(v->a, v->b, atu_source, &g_vec, got, &ng, NULL),
                         HSMCA_OK);
        assert_int_equal(ng, nw);
        for (size_t i = 0; i < nw; i++)
            assert_true(audit_hash_equal(&got[i], &want[i]));
        assert_int_equal(audit_verify_inclusion(v->a, v->b, &g_leaves[v->a], want, nw, &root, NULL),
                         HSMCA_OK);
    }
}

static void test_vectors_consistency(void **state)
{
    for (size_t t = 0; t < sizeof(CONSISTENCY) / sizeof(CONSISTENCY[0]); t++) {
        const vec_proof *v = &CONSISTENCY[t];
        audit_hash want[3], got[AUDIT_PROOF_MAX];
        audit_hash r1 = H(ROOT_HASHES[v->a]), r2 = H(ROOT_HASHES[v->b]);
        size_t nw = vec_hashes(v, want), ng = 99;
        assert_int_equal(audit_prove_consistency(v->a, v->b, atu_source, &g_vec, got, &ng, NULL),
                         HSMCA_OK);
        assert_int_equal(ng, nw);
        for (size_t i = 0; i < nw; i++)
            assert_true(audit_hash_equal(&got[i], &want[i]));
        assert_int_equal(audit_verify_consistency(v->a, v->b, &r1, &r2, want, nw, NULL), HSMCA_OK);
    }
}

/* ---- edges ---------------------------------------------------------------------------- */

static void test_edges(void **state)
{
    audit_hash p[AUDIT_PROOF_MAX + 1], r8 = H(ROOT_HASHES[8]), r0 = audit_empty_root;
    size_t n;
    hsmca_err e;
    memset(p, 0, sizeof(p));
    /* Leaves outside the tree, an empty tree, oversized proofs. */
    assert_int_equal(audit_prove_inclusion(8, 8, atu_source, &g_vec, p, &n, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "not in a tree of size 8"));
    assert_int_equal(audit_verify_inclusion(0, 0, &g_leaves[0], p, 0, &r0, &e), HSMCA_EINVAL);
    assert_int_equal(audit_verify_inclusion(0, 8, &g_leaves[0], p, AUDIT_PROOF_MAX + 1, &r8, &e),
                     HSMCA_EINVAL);
    assert_int_equal(
        audit_verify_inclusion(0, AUDIT_TREE_SIZE_MAX + 1, &g_leaves[0], p, 3, &r8, &e),
        HSMCA_EINVAL);
    /* A one-leaf tree: the root is the leaf and the proof is empty. */
    assert_int_equal(audit_verify_inclusion(0, 1, &g_leaves[0], p, 0, &g_leaves[0], NULL),
                     HSMCA_OK);
    assert_int_equal(audit_verify_inclusion(0, 1, &g_leaves[0], p, 1, &g_leaves[0], &e),
                     HSMCA_EPERM);
    /* Consistency: shrinking, equal sizes, size 0. */
    assert_int_equal(audit_prove_consistency(5, 4, atu_source, &g_vec, p, &n, &e), HSMCA_EINVAL);
    assert_int_equal(audit_verify_consistency(5, 4, &r8, &r8, p, 0, &e), HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "shrank"));
    assert_int_equal(audit_verify_consistency(8, 8, &r8, &r8, p, 0, NULL), HSMCA_OK);
    assert_int_equal(audit_verify_consistency(8, 8, &r8, &r8, p, 1, &e), HSMCA_EPERM);
    assert_int_equal(audit_verify_consistency(8, 8, &r8, &r0, p, 0, &e), HSMCA_EPERM);
    assert_int_equal(audit_verify_consistency(0, 8, &r0, &r8, p, 0, NULL), HSMCA_OK);
    assert_int_equal(audit_verify_consistency(0, 0, &r0, &r0, p, 0, NULL), HSMCA_OK);
    assert_int_equal(audit_verify_consistency(0, 8, &r8, &r8, p, 0, &e), HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "empty string"));
    assert_int_equal(audit_verify_consistency(0, 8, &r0, &r8, p, 1, &e), HSMCA_EPERM);
    assert_int_equal(audit_verify_consistency(4, 8, &r0, &r8, p, 0, &e), HSMCA_EPERM);
    assert_int_equal(audit_prove_consistency(0, 8, atu_source, &g_vec, p, &n, NULL), HSMCA_OK);
    assert_int_equal(n, 0);
    /* The tree refuses to grow past the cap and stays as it was. */
    audit_tree t;
    audit_tree_init(&t);
    t.size = AUDIT_TREE_SIZE_MAX;
    assert_int_equal(audit_tree_append(&t, &g_leaves[0], &e), HSMCA_EINVAL);
    assert_true(t.size == AUDIT_TREE_SIZE_MAX);
    assert_int_equal(audit_tree_restore(&t, AUDIT_TREE_SIZE_MAX + 1, atu_source, &g_vec, &e),
                     HSMCA_EINVAL);
    /* A source that fails passes its error up. */
    assert_int_equal(audit_prove_inclusion(3, 9, atu_source, &g_vec, p, &n, &e), HSMCA_EINTERNAL);
}

/* ---- properties ------------------------------------------------------------------------ */

static void flip_bit(audit_hash *h, uint64_t *rng)
{
    uint64_t r = atu_rand(rng);
    h->b[r % AUDIT_HASH_LEN] ^= (uint8_t)(1u << ((r >> 8) % 8));
}

/* Leaf index in a tree of n: a generated proof matches the RFC's shape, verifies, and fails
 * once anything in it is changed. */
static void check_inclusion(const atu_tree *t, const audit_hash *root, uint64_t index,
                            uint64_t *rng)
{
    const audit_hash *leaves = t->levels[0];
    uint64_t n = t->size;
    audit_hash p[AUDIT_PROOF_MAX + 1], bad;
    size_t np;
    assert_int_equal(audit_prove_inclusion(index, n, atu_source, (void *)t, p, &np, NULL),
                     HSMCA_OK);
    assert_int_equal(audit_verify_inclusion(index, n, &leaves[index], p, np, root, NULL), HSMCA_OK);
    if (np > 0) {
        size_t k = atu_rand(rng) % np;
        bad = p[k];
        flip_bit(&p[k], rng);
        assert_int_equal(audit_verify_inclusion(index, n, &leaves[index], p, np, root, NULL),
                         HSMCA_EPERM);
        p[k] = bad;
        assert_int_not_equal(
            audit_verify_inclusion(index, n, &leaves[index], p, np - 1, root, NULL), HSMCA_OK);
    }
    p[np] = *root;
    assert_int_not_equal(audit_verify_inclusion(index, n, &leaves[index], p, np + 1, root, NULL),
                         HSMCA_OK);
    bad = leaves[index];
    flip_bit(&bad, rng);
    assert_int_equal(audit_verify_inclusion(index, n, &bad, p, np, root, NULL), HSMCA_EPERM);
    bad = *root;
    flip_bit(&bad, rng);
    assert_int_equal(audit_verify_inclusion(index, n, &leaves[index], p, np, &bad, NULL),
                     HSMCA_EPERM);
    if (n > 1)
        assert_int_not_equal(
            audit_verify_inclusion(index ^ 1, n, &leaves[index], p, np, root, NULL), HSMCA_OK);
    assert_int_not_equal(audit_verify_inclusion(index, 2 * n, &leaves[index], p, np, root, NULL),
                         HSMCA_OK);
    if (index < n / 2)
        assert_int_not_equal(
            audit_verify_inclusion(index, n / 2, &leaves[index], p, np, root, NULL), HSMCA_OK);
}

/* Sizes m <= n of the same tree: the proof verifies, and fails once anything is changed. */
static void check_consistency(const atu_tree *t, const audit_hash *roots, uint64_t m, uint64_t *rng)
{
    uint64_t n = t->size;
    audit_hash p[AUDIT_PROOF_MAX + 1], bad;
    size_t np;
    assert_int_equal(audit_prove_consistency(m, n, atu_source, (void *)t, p, &np, NULL), HSMCA_OK);
    assert_int_equal(audit_verify_consistency(m, n, &roots[m], &roots[n], p, np, NULL), HSMCA_OK);
    if (m == 0 || m == n) {
        assert_int_equal(np, 0);
        return;
    }
    size_t k = atu_rand(rng) % np;
    bad = p[k];
    flip_bit(&p[k], rng);
    assert_int_equal(audit_verify_consistency(m, n, &roots[m], &roots[n], p, np, NULL),
                     HSMCA_EPERM);
    p[k] = bad;
    assert_int_not_equal(audit_verify_consistency(m, n, &roots[m], &roots[n], p, np - 1, NULL),
                         HSMCA_OK);
    p[np] = roots[n];
    assert_int_not_equal(audit_verify_consistency(m, n, &roots[m], &roots[n], p, np + 1, NULL),
                         HSMCA_OK);
    bad = roots[m];
    flip_bit(&bad, rng);
    assert_int_equal(audit_verify_consistency(m, n, &bad, &roots[n], p, np, NULL), HSMCA_EPERM);
    bad = roots[n];
    flip_bit(&bad, rng);
    assert_int_equal(audit_verify_consistency(m, n, &roots[m], &bad, p, np, NULL), HSMCA_EPERM);
    assert_int_not_equal(audit_verify_consistency(m, n, &roots[n], &roots[m], p, np, NULL),
                         HSMCA_OK);
    assert_int_not_equal(audit_verify_consistency(m - 1, n, &roots[m], &roots[n], p, np, NULL),
                         HSMCA_OK);
    assert_int_not_equal(audit_verify_consistency(m + 1, n, &roots[m], &roots[n], p, np, NULL),
                         HSMCA_OK);
}

/* A tree of n random leaves; every root of 0..n from the incremental tree, checked against
 * the RFC's recursive MTH; then nsample inclusion and consistency proofs (all when 0). */
static void check_tree(uint64_t n, uint64_t nsample, uint64_t *rng)
{
    audit_hash *leaves = malloc((n + 1) * sizeof(audit_hash));
    audit_hash *roots = malloc((n + 1) * sizeof(audit_hash));
    assert_non_null(leaves);
    assert_non_null(roots);
    audit_tree t;
    audit_tree_init(&t);
    for (uint64_t i = 0; i <= n; i++) {
        assert_int_equal(audit_tree_root(&t, &roots[i], NULL), HSMCA_OK);
        if (i == n)
            break;
        uint64_t in[2] = {i, atu_rand(rng)}; /* distinct leaves, 8 to 16 bytes */
        assert_int_equal(
            audit_hash_leaf((const uint8_t *)in, 8 + (size_t)(in[1] % 9), &leaves[i], NULL),
            HSMCA_OK);
        assert_int_equal(audit_tree_append(&t, &leaves[i], NULL), HSMCA_OK);
    }
    audit_hash ref = atu_mth(leaves, 0, n), viasrc;
    assert_true(audit_hash_equal(&roots[n], &ref));
    atu_tree mt;
    atu_tree_build(&mt, leaves, n);
    for (uint64_t m = 0; m <= n; m += 1 + n / 16) {
        ref = atu_mth(leaves, 0, m);
        assert_true(audit_hash_equal(&roots[m], &ref));
        assert_int_equal(audit_root_from_source(m, atu_source, &mt, &viasrc, NULL), HSMCA_OK);
        assert_true(audit_hash_equal(&viasrc, &ref));
    }
    uint64_t count = nsample ? nsample : n;
    for (uint64_t s = 0; s < count && n > 0; s++)
        check_inclusion(&mt, &roots[n], nsample ? atu_rand(rng) % n : s, rng);
    for (uint64_t s = 0; s <= count; s++)
        check_consistency(&mt, roots, nsample ? atu_rand(rng) % (n + 1) : s, rng);
    atu_tree_free(&mt);
    free(leaves);
    free(roots);
}

static void test_props_small_exhaustive(void **state)
{
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    for (uint64_t n = 0; n <= 70; n++)
        check_tree(n, 0, &rng);
}

static void test_props_random_large(void **state)
{
    uint64_t rng = 0xd1b54a32d192ed03ULL;
    static const uint64_t edges[] = {255, 256, 257, 511, 512, 513, 1023, 1024, 4095, 4096, 4097};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        check_tree(edges[i], 100, &rng);
    for (int i = 0; i < 12; i++)
        check_tree(1 + atu_rand(&rng) % 5000, 150, &rng);
}

/* A tree restored from a source equals the one that appended every leaf, and keeps growing
 * the same way. */
static void test_restore(void **state)
{
    uint64_t rng = 42, n = 700;
    audit_hash *leaves = malloc(n * sizeof(audit_hash));
    assert_non_null(leaves);
    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(audit_hash_leaf((const uint8_t *)&i, sizeof(i), &leaves[i], NULL),
                         HSMCA_OK);
    atu_tree mt;
    atu_tree_build(&mt, leaves, n);
    audit_tree straight;
    audit_tree_init(&straight);
    for (uint64_t size = 0; size < n; size++) {
        audit_tree back;
        assert_int_equal(audit_tree_restore(&back, size, atu_source, &mt, NULL), HSMCA_OK);
        assert_true(back.size == straight.size);
        for (unsigned l = 0; l < 63; l++)
            if ((size >> l) & 1)
                assert_true(audit_hash_equal(&back.nodes[l], &straight.nodes[l]));
        uint64_t more = atu_rand(&rng) % 5;
        for (uint64_t k = 0; k < more && size + k < n; k++)
            assert_int_equal(audit_tree_append(&back, &leaves[size + k], NULL), HSMCA_OK);
        audit_hash a, b = atu_mth(leaves, 0, back.size);
        assert_int_equal(audit_tree_root(&back, &a, NULL), HSMCA_OK);
        assert_true(audit_hash_equal(&a, &b));
        assert_int_equal(audit_tree_append(&straight, &leaves[size], NULL), HSMCA_OK);
    }
    atu_tree_free(&mt);
    free(leaves);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_hashes),
        cmocka_unit_test(test_vectors_roots_and_frontier),
        cmocka_unit_test(test_vectors_inclusion),
        cmocka_unit_test(test_vectors_consistency),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_props_small_exhaustive),
        cmocka_unit_test(test_props_random_large),
        cmocka_unit_test(test_restore),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

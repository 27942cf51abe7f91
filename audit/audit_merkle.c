/* audit_merkle.c - see audit_merkle.h. Written from RFC 9162 §2.1. */
#include "audit_merkle.h"

#include <pthread.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "audit_internal.h"

const audit_hash audit_empty_root = {{
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
}};

/* Fetching a digest by name takes OpenSSL 3.0's global lock: once per process. */
static EVP_MD *g_sha256;
static pthread_once_t g_sha256_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void)
{
    g_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
}

hsmca_code audit_sha256(const void *a, size_t al, const void *b, size_t bl, const void *c,
                        size_t cl, uint8_t *out, hsmca_err *e)
{
    pthread_once(&g_sha256_once, fetch_sha256);
    HSMCA_ENSURE(g_sha256, e, HSMCA_EINTERNAL, "audit: OpenSSL has no SHA-256");
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    HSMCA_ENSURE(ctx, e, HSMCA_ENOMEM, "audit: out of memory for a SHA-256 context");
    unsigned int n = 0;
    int ok = EVP_DigestInit_ex(ctx, g_sha256, NULL) == 1 &&
             (al == 0 || EVP_DigestUpdate(ctx, a, al) == 1) &&
             (bl == 0 || EVP_DigestUpdate(ctx, b, bl) == 1) &&
             (cl == 0 || EVP_DigestUpdate(ctx, c, cl) == 1) &&
             EVP_DigestFinal_ex(ctx, out, &n) == 1 && n == AUDIT_HASH_LEN;
    EVP_MD_CTX_free(ctx);
    HSMCA_ENSURE(ok, e, HSMCA_EINTERNAL, "audit: SHA-256 failed in OpenSSL");
    return HSMCA_OK;
}

hsmca_code audit_hash_leaf(const uint8_t *entry, size_t len, audit_hash *out, hsmca_err *e)
{
    static const uint8_t prefix = 0x00;
    return audit_sha256(&prefix, 1, entry, len, NULL, 0, out->b, e);
}

hsmca_code audit_hash_node(const audit_hash *l, const audit_hash *r, audit_hash *out, hsmca_err *e)
{
    static const uint8_t prefix = 0x01;
    return audit_sha256(&prefix, 1, l->b, AUDIT_HASH_LEN, r->b, AUDIT_HASH_LEN, out->b, e);
}

int audit_hash_equal(const audit_hash *a, const audit_hash *b)
{
    return CRYPTO_memcmp(a->b, b->b, AUDIT_HASH_LEN) == 0;
}

/* ---- the incremental tree ------------------------------------------------------------ */

void audit_tree_init(audit_tree *t)
{
    memset(t, 0, sizeof(*t));
}

hsmca_code audit_tree_append(audit_tree *t, const audit_hash *leaf, hsmca_err *e)
{
    HSMCA_ENSURE(t->size < AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "audit tree: size would pass the 2^63-1 cap");
    /* Like a binary counter: each set low bit of size is a full subtree that merges with
     * the new one; the carry lands in the first clear bit. */
    audit_hash h = *leaf;
    unsigned i = 0;
    for (; (t->size >> i) & 1; i++)
        HSMCA_GUARD(audit_hash_node(&t->nodes[i], &h, &h, e));
    t->nodes[i] = h;
    t->size++;
    return HSMCA_OK;
}

hsmca_code audit_tree_root(const audit_tree *t, audit_hash *out, hsmca_err *e)
{
    if (t->size == 0) {
        *out = audit_empty_root;
        return HSMCA_OK;
    }
    /* MTH splits at the largest power of two below n, so the root folds the frontier's
     * subtrees from the smallest (rightmost) up: H(big, H(middle, small)). */
    unsigned i = 0;
    while (!((t->size >> i) & 1))
        i++;
    audit_hash r = t->nodes[i];
    for (i++; i < 63; i++)
        if ((t->size >> i) & 1)
            HSMCA_GUARD(audit_hash_node(&t->nodes[i], &r, &r, e));
    *out = r;
    return HSMCA_OK;
}

hsmca_code audit_tree_restore(audit_tree *t, uint64_t size, audit_hash_source src, void *ctx,
                              hsmca_err *e)
{
    HSMCA_ENSURE(size <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "audit tree: size %llu is past the 2^63-1 cap", (unsigned long long)size);
    audit_tree tmp;
    audit_tree_init(&tmp);
    uint64_t start = 0;
    for (int i = 62; i >= 0; i--) {
        if (!((size >> i) & 1))
            continue;
        HSMCA_GUARD(src(ctx, (unsigned)i, start >> i, &tmp.nodes[i], e));
        start += (uint64_t)1 << i;
    }
    tmp.size = size;
    *t = tmp;
    return HSMCA_OK;
}

/* ---- roots and proofs from a source --------------------------------------------------- */

/* The largest power of two strictly below n (n >= 2): RFC 9162's split point k. */
static uint64_t split_point(uint64_t n)
{
    uint64_t k = 1;
    while (k << 1 < n)
        k <<= 1;
    return k;
}

/* MTH(D[lo:hi]) for 0 < hi-lo, where lo is a multiple of a power of two >= hi-lo (true of
 * every range RFC 9162's recursions visit): the perfect subtrees of hi-lo's set bits,
 * left to right, folded from the right. */
static HSMCA_MUSTCHECK hsmca_code range_hash(uint64_t lo, uint64_t hi, audit_hash_source src,
                                             void *ctx, audit_hash *out, hsmca_err *e)
{
    uint64_t count = hi - lo;
    HSMCA_ENSURE(count > 0 && count <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINTERNAL,
                 "audit tree: empty or oversized subtree range");
    audit_hash parts[63];
    unsigned np = 0;
    uint64_t at = lo;
    for (int i = 62; i >= 0; i--) {
        if (!((count >> i) & 1))
            continue;
        HSMCA_ENSURE((at & (((uint64_t)1 << i) - 1)) == 0, e, HSMCA_EINTERNAL,
                     "audit tree: subtree range not aligned");
        HSMCA_GUARD(src(ctx, (unsigned)i, at >> i, &parts[np], e));
        np++;
        at += (uint64_t)1 << i;
    }
    audit_hash r = parts[np - 1];
    for (unsigned j = np - 1; j-- > 0;)
        HSMCA_GUARD(audit_hash_node(&parts[j], &r, &r, e));
    *out = r;
    return HSMCA_OK;
}

hsmca_code audit_root_from_source(uint64_t size, audit_hash_source src, void *ctx, audit_hash *out,
                                  hsmca_err *e)
{
    HSMCA_ENSURE(size <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "audit tree: size %llu is past the 2^63-1 cap", (unsigned long long)size);
    if (size == 0) {
        *out = audit_empty_root;
        return HSMCA_OK;
    }
    return range_hash(0, size, src, ctx, out, e);
}

hsmca_code audit_root_of_leaves(const audit_hash *leaves, uint64_t n, audit_hash *out, hsmca_err *e)
{
    audit_tree t;
    audit_tree_init(&t);
    for (uint64_t i = 0; i < n; i++)
        HSMCA_GUARD(audit_tree_append(&t, &leaves[i], e));
    return audit_tree_root(&t, out, e);
}

/* Reverses p[0..n): the recursions below collect from the root down, proofs list upward. */
static void reverse(audit_hash *p, size_t n)
{
    for (size_t i = 0; i < n / 2; i++) {
        audit_hash t = p[i];
        p[i] = p[n - 1 - i];
        p[n - 1 - i] = t;
    }
}

hsmca_code audit_prove_inclusion(uint64_t index, uint64_t size, audit_hash_source src, void *ctx,
                                 audit_hash *proof, size_t *n, hsmca_err *e)
{
    HSMCA_ENSURE(size <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "inclusion proof: tree size %llu is past the cap", (unsigned long long)size);
    HSMCA_ENSURE(index < size, e, HSMCA_EINVAL,
                 "inclusion proof: leaf %llu is not in a tree of size %llu",
                 (unsigned long long)index, (unsigned long long)size);
    size_t k = 0;
    uint64_t lo = 0, hi = size;
    while (hi - lo > 1) { /* PATH(m, D[lo:hi]): descend towards the leaf */
        uint64_t mid = lo + split_point(hi - lo);
        HSMCA_ENSURE(k < AUDIT_PROOF_MAX, e, HSMCA_EINTERNAL, "inclusion proof too long");
        if (index < mid) {
            HSMCA_GUARD(range_hash(mid, hi, src, ctx, &proof[k++], e));
            hi = mid;
        } else {
            HSMCA_GUARD(range_hash(lo, mid, src, ctx, &proof[k++], e));
            lo = mid;
        }
    }
    reverse(proof, k);
    *n = k;
    return HSMCA_OK;
}

hsmca_code audit_prove_consistency(uint64_t size1, uint64_t size2, audit_hash_source src, void *ctx,
                                   audit_hash *proof, size_t *n, hsmca_err *e)
{
    HSMCA_ENSURE(size2 <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "consistency proof: tree size %llu is past the cap", (unsigned long long)size2);
    HSMCA_ENSURE(size1 <= size2, e, HSMCA_EINVAL,
                 "consistency proof: old size %llu is larger than new size %llu",
                 (unsigned long long)size1, (unsigned long long)size2);
    size_t k = 0;
    if (size1 == 0 || size1 == size2) {
        *n = 0;
        return HSMCA_OK;
    }
    /* SUBPROOF(m, D[lo:hi], b), m counted from lo. */
    uint64_t m = size1, lo = 0, hi = size2;
    int b = 1;
    for (;;) {
        HSMCA_ENSURE(k < AUDIT_PROOF_MAX, e, HSMCA_EINTERNAL, "consistency proof too long");
        if (m == hi - lo) {
            if (!b)
                HSMCA_GUARD(range_hash(lo, hi, src, ctx, &proof[k++], e));
            break;
        }
        uint64_t split = split_point(hi - lo);
        if (m <= split) {
            HSMCA_GUARD(range_hash(lo + split, hi, src, ctx, &proof[k++], e));
            hi = lo + split;
        } else {
            HSMCA_GUARD(range_hash(lo, lo + split, src, ctx, &proof[k++], e));
            m -= split;
            lo += split;
            b = 0;
        }
    }
    reverse(proof, k);
    *n = k;
    return HSMCA_OK;
}

/* ---- verification -------------------------------------------------------------------- */

hsmca_code audit_verify_inclusion(uint64_t index, uint64_t size, const audit_hash *leaf,
                                  const audit_hash *proof, size_t n, const audit_hash *root,
                                  hsmca_err *e)
{
    HSMCA_ENSURE(size <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "inclusion proof: tree size %llu is past the cap", (unsigned long long)size);
    HSMCA_ENSURE(index < size, e, HSMCA_EINVAL,
                 "inclusion proof: leaf %llu is not in a tree of size %llu",
                 (unsigned long long)index, (unsigned long long)size);
    HSMCA_ENSURE(n <= AUDIT_PROOF_MAX, e, HSMCA_EINVAL,
                 "inclusion proof: %zu hashes is more than any tree needs", n);
    /* RFC 9162 §2.1.3.2, step by step. */
    uint64_t fn = index, sn = size - 1;
    audit_hash r = *leaf;
    for (size_t i = 0; i < n; i++) {
        HSMCA_ENSURE(sn != 0, e, HSMCA_EPERM,
                     "inclusion proof does not verify: longer than the path to the root");
        if ((fn & 1) || fn == sn) {
            HSMCA_GUARD(audit_hash_node(&proof[i], &r, &r, e));
            if (!(fn & 1))
                while (!(fn & 1) && fn != 0) {
                    fn >>= 1;
                    sn >>= 1;
                }
        } else {
            HSMCA_GUARD(audit_hash_node(&r, &proof[i], &r, e));
        }
        fn >>= 1;
        sn >>= 1;
    }
    HSMCA_ENSURE(sn == 0, e, HSMCA_EPERM,
                 "inclusion proof does not verify: shorter than the path to the root");
    HSMCA_ENSURE(audit_hash_equal(&r, root), e, HSMCA_EPERM,
                 "inclusion proof does not verify: leaf %llu does not lead to the root of "
                 "size %llu",
                 (unsigned long long)index, (unsigned long long)size);
    return HSMCA_OK;
}

hsmca_code audit_verify_consistency(uint64_t size1, uint64_t size2, const audit_hash *root1,
                                    const audit_hash *root2, const audit_hash *proof, size_t n,
                                    hsmca_err *e)
{
    HSMCA_ENSURE(size2 <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "consistency proof: tree size %llu is past the cap", (unsigned long long)size2);
    HSMCA_ENSURE(size1 <= size2, e, HSMCA_EPERM,
                 "consistency proof does not verify: the tree shrank from %llu to %llu",
                 (unsigned long long)size1, (unsigned long long)size2);
    HSMCA_ENSURE(n <= AUDIT_PROOF_MAX, e, HSMCA_EINVAL,
                 "consistency proof: %zu hashes is more than any tree needs", n);
    if (size1 == size2) {
        HSMCA_ENSURE(n == 0, e, HSMCA_EPERM,
                     "consistency proof does not verify: equal sizes need an empty proof");
        HSMCA_ENSURE(audit_hash_equal(root1, root2), e, HSMCA_EPERM,
                     "consistency proof does not verify: two roots for size %llu",
                     (unsigned long long)size1);
        return HSMCA_OK;
    }
    if (size1 == 0) {
        HSMCA_ENSURE(n == 0, e, HSMCA_EPERM,
                     "consistency proof does not verify: size 0 needs an empty proof");
        HSMCA_ENSURE(audit_hash_equal(root1, &audit_empty_root), e, HSMCA_EPERM,
                     "consistency proof does not verify: the root of size 0 is not "
                     "SHA-256 of the empty string");
        return HSMCA_OK;
    }
    HSMCA_ENSURE(n > 0, e, HSMCA_EPERM, "consistency proof does not verify: it is empty");
    /* RFC 9162 §2.1.4.2: when size1 is a power of two, its root is the first node. */
    const audit_hash *first = proof;
    size_t i = 1;
    if ((size1 & (size1 - 1)) == 0) {
        first = root1;
        i = 0;
    }
    uint64_t fn = size1 - 1, sn = size2 - 1;
    while (fn & 1) {
        fn >>= 1;
        sn >>= 1;
    }
    audit_hash fr = *first, sr = *first;
    for (; i < n; i++) {
        HSMCA_ENSURE(sn != 0, e, HSMCA_EPERM,
                     "consistency proof does not verify: longer than the path to the root");
        if ((fn & 1) || fn == sn) {
            HSMCA_GUARD(audit_hash_node(&proof[i], &fr, &fr, e));
            HSMCA_GUARD(audit_hash_node(&proof[i], &sr, &sr, e));
            if (!(fn & 1))
                while (!(fn & 1) && fn != 0) {
                    fn >>= 1;
                    sn >>= 1;
                }
        } else {
            HSMCA_GUARD(audit_hash_node(&sr, &proof[i], &sr, e));
        }
        fn >>= 1;
        sn >>= 1;
    }
    HSMCA_ENSURE(sn == 0, e, HSMCA_EPERM,
                 "consistency proof does not verify: shorter than the path to the root");
    HSMCA_ENSURE(audit_hash_equal(&fr, root1), e, HSMCA_EPERM,
                 "consistency proof does not verify: it does not rebuild the old root (size "
                 "%llu)",
                 (unsigned long long)size1);
    HSMCA_ENSURE(audit_hash_equal(&sr, root2), e, HSMCA_EPERM,
                 "consistency proof does not verify: it does not rebuild the new root (size "
                 "%llu)",
                 (unsigned long long)size2);
    return HSMCA_OK;
}

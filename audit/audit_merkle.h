/* audit_merkle.h - RFC 9162 §2.1 Merkle tree hashing for the signing log: leaf and node
 * hashes, the root of a tree, an incremental tree in O(log n) memory (what the log writer
 * keeps), and inclusion and consistency proofs, generated from a hash source (leaves in
 * memory, or tiles on disk) and verified (RFC 9162 §2.1.3.2, §2.1.4.2).
 *
 * Every function is pure (no I/O beyond what the caller's source does) and thread-safe.
 * A refused proof fails with HSMCA_EPERM ("does not verify"); malformed arguments (an index
 * outside the tree, a proof of impossible length) with HSMCA_EINVAL. */
#ifndef HSMCA_AUDIT_MERKLE_H
#define HSMCA_AUDIT_MERKLE_H

#include <stddef.h>
#include <stdint.h>

#include "hsmca_err.h"

#define AUDIT_HASH_LEN 32
/* Tree sizes stop below 2^63 (Go's tlog uses int64), so a tree is at most 63 levels deep,
 * an inclusion proof at most 63 hashes and a consistency proof at most 64. */
#define AUDIT_TREE_SIZE_MAX ((uint64_t)INT64_MAX)
#define AUDIT_PROOF_MAX 64

typedef struct {
    uint8_t b[AUDIT_HASH_LEN];
} audit_hash;

/* SHA-256 of the empty string: the root of a tree of size 0 (not 32 zero bytes). */
extern const audit_hash audit_empty_root;

/* The hash of the perfect subtree of 2^level leaves starting at leaf index << level, i.e.
 * MTH(D[index·2^level : (index+1)·2^level]); level 0 is a leaf hash. The log writer serves
 * these from its tiles; tests from leaves in memory. Called only for subtrees inside the
 * tree the caller named. */
typedef hsmca_code (*audit_hash_source)(void *ctx, unsigned level, uint64_t index, audit_hash *out,
                                        hsmca_err *e);

/* Leaf hash SHA-256(0x00 ‖ entry[0..len)) into *out. */
HSMCA_MUSTCHECK hsmca_code audit_hash_leaf(const uint8_t *entry, size_t len, audit_hash *out,
                                           hsmca_err *e);

/* Interior node hash SHA-256(0x01 ‖ l ‖ r) into *out (out may alias l or r). */
HSMCA_MUSTCHECK hsmca_code audit_hash_node(const audit_hash *l, const audit_hash *r,
                                           audit_hash *out, hsmca_err *e);

/* 1 when a and b are the same hash (constant time). */
int audit_hash_equal(const audit_hash *a, const audit_hash *b);

/* ---- the incremental tree (compact range from 0) -------------------------------------- */

/* nodes[i] is the root of the perfect subtree of 2^i leaves that the tree's frontier holds
 * when bit i of size is set; other slots are unused. 2 KiB, no allocation. */
typedef struct {
    uint64_t size;
    audit_hash nodes[63];
} audit_tree;

/* An empty tree (size 0). */
void audit_tree_init(audit_tree *t);

/* Appends one leaf hash; O(log n) hashes. Refuses past AUDIT_TREE_SIZE_MAX. On error *t is
 * unchanged. */
HSMCA_MUSTCHECK hsmca_code audit_tree_append(audit_tree *t, const audit_hash *leaf, hsmca_err *e);

/* The RFC 9162 root of the tree's current size into *out (audit_empty_root for 0). */
HSMCA_MUSTCHECK hsmca_code audit_tree_root(const audit_tree *t, audit_hash *out, hsmca_err *e);

/* Rebuilds *t for a tree of the given size from src (one call per set bit of size): how
 * the writer resumes after a restart without rereading every leaf. */
HSMCA_MUSTCHECK hsmca_code audit_tree_restore(audit_tree *t, uint64_t size, audit_hash_source src,
                                              void *ctx, hsmca_err *e);

/* ---- roots and proofs from a hash source ---------------------------------------------- */

/* MTH(D[0:size]) from src into *out; O(log size) source calls. */
HSMCA_MUSTCHECK hsmca_code audit_root_from_source(uint64_t size, audit_hash_source src, void *ctx,
                                                  audit_hash *out, hsmca_err *e);

/* The root of n leaf hashes in memory (RFC 9162 MTH) into *out. */
HSMCA_MUSTCHECK hsmca_code audit_root_of_leaves(const audit_hash *leaves, uint64_t n,
                                                audit_hash *out, hsmca_err *e);

/* RFC 9162 §2.1.3.1 PATH(index, D[0:size]) into proof[0..*n) (the caller's array of
 * AUDIT_PROOF_MAX hashes), ordered from the leaf's sibling up to the root's child. */
HSMCA_MUSTCHECK hsmca_code audit_prove_inclusion(uint64_t index, uint64_t size,
                                                 audit_hash_source src, void *ctx,
                                                 audit_hash *proof, size_t *n, hsmca_err *e);

/* RFC 9162 §2.1.4.1 PROOF(size1, D[0:size2]) into proof[0..*n) (the caller's array of
 * AUDIT_PROOF_MAX hashes); empty when size1 is 0 or size1 == size2. */
HSMCA_MUSTCHECK hsmca_code audit_prove_consistency(uint64_t size1, uint64_t size2,
                                                   audit_hash_source src, void *ctx,
                                                   audit_hash *proof, size_t *n, hsmca_err *e);

/* ---- verification (RFC 9162 §2.1.3.2, §2.1.4.2) --------------------------------------- */

/* HSMCA_OK when proof[0..n) proves leaf at index is in the tree of size whose root is
 * *root. */
HSMCA_MUSTCHECK hsmca_code audit_verify_inclusion(uint64_t index, uint64_t size,
                                                  const audit_hash *leaf, const audit_hash *proof,
                                                  size_t n, const audit_hash *root, hsmca_err *e);

/* HSMCA_OK when proof[0..n) proves the tree (size1, *root1) is a prefix of (size2, *root2).
 * Equal sizes need equal roots and an empty proof; size1 0 needs root1 to be
 * audit_empty_root and an empty proof. */
HSMCA_MUSTCHECK hsmca_code audit_verify_consistency(uint64_t size1, uint64_t size2,
                                                    const audit_hash *root1,
                                                    const audit_hash *root2,
                                                    const audit_hash *proof, size_t n,
                                                    hsmca_err *e);

#endif

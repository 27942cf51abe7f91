/* audit_tu.h - helpers for the audit/ tests and the Go cross-check writer: a Merkle tree
 * kept whole in memory (every perfect subtree hash, so it can serve any audit_hash_source
 * call), and the software Ed25519 signer that stands in for the HSM's audit key. */
#ifndef HSMCA_AUDIT_TU_H
#define HSMCA_AUDIT_TU_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "audit_merkle.h"
#include "audit_note.h"

/* levels[l][i] = MTH of the perfect subtree of 2^l leaves at index i; counts[l] of them. */
typedef struct {
    uint64_t size;
    unsigned nlevels;
    audit_hash *levels[64];
    uint64_t counts[64];
} atu_tree;

/* A tree of the given leaf hashes (copied). Aborts on failure; free with atu_tree_free. */
void atu_tree_build(atu_tree *t, const audit_hash *leaves, uint64_t n);
void atu_tree_free(atu_tree *t);

/* audit_hash_source over an atu_tree (ctx): refuses (HSMCA_EINTERNAL) any subtree outside
 * it, so a proof generator that asks for more than the tree holds fails the test. */
HSMCA_MUSTCHECK hsmca_code atu_source(void *ctx, unsigned level, uint64_t index, audit_hash *out,
                                      hsmca_err *e);

/* MTH(D[lo:hi]) straight from RFC 9162's recursive definition, over leaf hashes: the
 * reference the library's iterative code is compared with. */
audit_hash atu_mth(const audit_hash *leaves, uint64_t lo, uint64_t hi);

/* A deterministic pseudo-random generator for property tests (xorshift64*). */
uint64_t atu_rand(uint64_t *state);

/* A fresh software Ed25519 key (caller frees with EVP_PKEY_free); its 32-byte public key
 * into pub. Aborts on failure. */
EVP_PKEY *atu_ed25519_key(uint8_t pub[32]);

/* The same key from a fixed 32-byte seed (deterministic tests and fuzz seeds). */
EVP_PKEY *atu_ed25519_from_seed(const uint8_t seed[32], uint8_t pub[32]);

/* Ed25519 signature of msg[0..len) by key (ctx, an EVP_PKEY *) into sig (*siglen: 64): the
 * shape of the HSM's CKM_EDDSA call the log writer makes (an audit_note_signer). */
HSMCA_MUSTCHECK hsmca_code atu_ed25519_sign(void *ctx, const uint8_t *msg, size_t len,
                                            uint8_t sig[AUDIT_SIG_MAX], size_t *siglen,
                                            hsmca_err *e);

/* A fresh software ECDSA key on curve ("P-256" or "P-384"; caller frees with EVP_PKEY_free);
 * its DER SubjectPublicKeyInfo into spki[0..*len) (capacity AUDIT_KEY_MAX). Aborts on failure. */
EVP_PKEY *atu_ec_key(const char *curve, uint8_t spki[AUDIT_KEY_MAX], size_t *len);

/* ECDSA signature of SHA-256(msg[0..len)) by key (ctx, an EVP_PKEY *), DER, into sig: what
 * the signer makes of the HSM's CKM_ECDSA r||s (an audit_note_signer). */
HSMCA_MUSTCHECK hsmca_code atu_ecdsa_sign(void *ctx, const uint8_t *msg, size_t len,
                                          uint8_t sig[AUDIT_SIG_MAX], size_t *siglen,
                                          hsmca_err *e);

/* Lowercase hex to bytes (aborts on bad input); returns the byte count. */
size_t atu_unhex(const char *hex, uint8_t *out, size_t cap);

#endif

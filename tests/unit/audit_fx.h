/* audit_fx.h - a test fixture: a signing-log directory in the shared layout (log, vkey,
 * checkpoint, checkpoints/<size>, tile/...), written with audit/ alone and the software
 * Ed25519 key of audit_tu.h, for the verifier's tests (test_audit_verify, test_audit_cli.py
 * through tests/audit_fixture.c). Not a publisher: everything is written at once. */
#ifndef HSMCA_AUDIT_FX_H
#define HSMCA_AUDIT_FX_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "audit_entry.h"
#include "audit_note.h"

#define AFX_ORIGIN "hsmca.test/verify"
#define AFX_TIME0 1790000000 /* 2026-09-21T...Z: entry seq s has time AFX_TIME0 + s */

/* The entries: lines[i] is entry seq i with its '\n'. */
typedef struct {
    char **lines;
    size_t *lens;
    uint64_t n;
} afx_log;

/* n entries: seq 0 a start, then intent/result pairs (requester and SAN
 * spiffe://cluster.local/ns/<default|prod>/sa/sa<k>, serial from k and salt), every 7th a
 * deny, every 11th result an error; cert_sha256 (64 hex, or NULL) is the certificate hash
 * of the first successful result. The last entry may be an intent without its result. */
void afx_entries(afx_log *l, uint64_t n, unsigned salt, const char *cert_sha256);
void afx_log_free(afx_log *l);

/* Appends ent (seq and time set here) to l: at most AFX_EXTRA beyond afx_entries's n. */
#define AFX_EXTRA 16
void afx_add(afx_log *l, audit_entry *ent);

/* Entry seq of l parsed into *ent (its strings in *buf). */
void afx_parse(const afx_log *l, uint64_t seq, audit_entry *ent, audit_entry_buf *buf);

/* Entry seq of l replaced by ent (its seq and time set to the fixture's). */
void afx_set(afx_log *l, uint64_t seq, audit_entry *ent);

/* The audit key (deterministic from seed; salt 0 is the fixture's key) and its vkey. */
EVP_PKEY *afx_key(unsigned salt, audit_vkey *vk);

/* A fresh ECDSA P-256 audit key (random) and its vkey; afx_checkpoint and afx_write sign
 * with the key's type. */
EVP_PKEY *afx_ec_key(audit_vkey *vk);

/* Writes dir: log (l's lines), vkey, checkpoints/<s> for each of sizes[0..n) (ascending),
 * checkpoint (the last), and the tiles and bundles of every size (older partial tiles
 * kept, as a publisher may). */
void afx_write(const char *dir, const afx_log *l, const uint64_t *sizes, size_t n, EVP_PKEY *key,
               const audit_vkey *vk);

/* The signed checkpoint note of l's first size entries (caller frees). */
char *afx_checkpoint(const afx_log *l, uint64_t size, EVP_PKEY *key, const audit_vkey *vk);

/* A test's fixture: a new temporary directory (nothing in it yet), n entries of salt 0
 * and the fixture's key. afx_fixture_free removes the directory. */
typedef struct {
    char *dir;
    afx_log log;
    EVP_PKEY *key;
    audit_vkey vk;
} afx_fixture;

afx_fixture *afx_fixture_new(const char *name, uint64_t n);
void afx_fixture_free(afx_fixture *f);

#endif

/* audit_verify.h - the offline verifier of a signing-log directory (docs/ARCHITECTURE.md §7.7, the
 * layout in docs/AUDIT.md): DIR/log, DIR/vkey, DIR/checkpoint, DIR/checkpoints/<size>,
 * DIR/tile/... . No HSM, no server: what an auditor runs on a copy of the directory.
 *
 * audit_verify replays the log once, streaming (memory bounded but for the unexpired
 * serials, the open intents and one 8-byte size per checkpoint), and checks: framing (every
 * line ends in '\n', at most AUDIT_LINE_MAX bytes), canonical entries (audit_entry_parse
 * decides which kinds exist), seq = line index, the rules of audit_replay.h that the
 * signer's start applies too (every issue-result names an earlier unmatched issue-intent,
 * no intent open at a later `start`, no serial in two intents of one CA key while the first
 * certificate is valid, at most AUDIT_REPLAY_OPEN_MAX intents open), every checkpoint's
 * signature, origin, size (= its file name) and root (= the
 * log's root at that size, so all of them are one growing tree), `checkpoint` = the largest
 * of checkpoints/, the tiles and entry bundles of the latest checkpoint = the log, and the
 * auditor's saved state (the log's root at the saved size is the saved root). Every
 * checkpoint has one origin: the key's name, or without a key the latest checkpoint's.
 *
 * A failure is HSMCA_EPERM (the directory does not verify) or HSMCA_EIO (it cannot be read)
 * with a message naming the first entry ("log seq N (byte B)"), checkpoint or tile (its
 * path under DIR) that breaks, and why. */
#ifndef HSMCA_AUDIT_VERIFY_H
#define HSMCA_AUDIT_VERIFY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "audit_entry.h"
#include "audit_lines.h"
#include "audit_merkle.h"
#include "audit_note.h"
#include "audit_tiles.h"
#include "hsmca_err.h"

/* ---- tiles on disk as a hash source ----------------------------------------------------- */

/* Serves audit_hash_source calls for the tree of tree_size leaves from DIR/tile/<L>/...:
 * the tile of the width that tree needs, or any wider one (a partial tile of a later
 * checkpoint, or the full tile, starts with the same hashes). Caches one tile. */
typedef struct {
    const char *dir;
    uint64_t tree_size;
    int have;
    unsigned level, width;
    uint64_t index;
    uint8_t tile[AUDIT_TILE_BYTES];
} audit_tile_reader;

void audit_tile_reader_init(audit_tile_reader *t, const char *dir, uint64_t tree_size);

/* An audit_hash_source over an audit_tile_reader (ctx). */
HSMCA_MUSTCHECK hsmca_code audit_tile_reader_source(void *ctx, unsigned level, uint64_t index,
                                                    audit_hash *out, hsmca_err *e);

/* ---- verification ----------------------------------------------------------------------- */

/* A verifier key from arg: the path of a file holding one (a trailing newline allowed), or
 * else the vkey string itself. */
HSMCA_MUSTCHECK hsmca_code audit_vkey_load(const char *arg, audit_vkey *k, hsmca_err *e);

/* Reads and opens the checkpoint note at path under k into *c, and checks its origin is k's
 * name. k NULL: the note's form and body only, no signature checked and any origin.
 * Messages start with what (the path as the user should see it). */
HSMCA_MUSTCHECK hsmca_code audit_checkpoint_load(const char *path, const char *what,
                                                 const audit_vkey *k, audit_checkpoint *c,
                                                 hsmca_err *e);

typedef struct {
    const char *dir;        /* the audit directory */
    const audit_vkey *vkey; /* the audit key's verifier key; NULL: no signature is checked
                               (all else is), and the state file is checked, not advanced */
    const char *state;      /* NULL, or the auditor's state file (created when missing) */
    /* NULL, or called with every entry (seq) once it has passed the checks: a failure it
     * returns fails the verification, prefixed with the entry's seq (several logs at once,
     * cli/audit_cmd_multi.c). */
    hsmca_code (*on_entry)(void *ctx, const audit_entry *ent, hsmca_err *e);
    void *ctx;
} audit_verify_opts;

typedef struct {
    uint64_t entries, intents, certificates, failed, denies, checkpoints;
    uint64_t open_intents, first_open; /* intents without a result at the end (a warning) */
    uint64_t size;                     /* the latest checkpoint's size and root */
    audit_hash root;
    int state_new;       /* the state file was created by this run */
    uint64_t state_size; /* the size the state file held before (when not new) */
    char origin[AUDIT_NAME_MAX + 1]; /* the key's name, or the latest checkpoint's; "": none */
} audit_verify_report;

/* Verifies o->dir as above into *r. On success, with o->state, the state file is replaced
 * (write-temp, fsync, rename) by the latest checkpoint's origin, size and root. */
HSMCA_MUSTCHECK hsmca_code audit_verify(const audit_verify_opts *o, audit_verify_report *r,
                                        hsmca_err *e);

#endif

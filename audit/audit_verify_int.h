/* audit_verify_int.h - what audit_verify.c and audit_vtiles.c share; not part of the
 * module's API. */
#ifndef HSMCA_AUDIT_VERIFY_INT_H
#define HSMCA_AUDIT_VERIFY_INT_H

#include <stddef.h>
#include <stdint.h>

#include "audit_merkle.h"
#include "audit_tiles.h"
#include "hsmca_err.h"

/* Levels of tiles a tree below 2^64 leaves can have (8 tree levels each). */
#define VT_LEVELS 8

/* Checks the tiles and entry bundles of the tree of size leaves against the log as it
 * streams: each level-0 tile and bundle when its last leaf arrives, each higher tile when
 * the tiles below it are complete, the partial tiles at vt_finish. */
typedef struct {
    const char *dir;
    uint64_t size;
    unsigned count[VT_LEVELS]; /* hashes gathered of the current tile of each level */
    audit_hash acc[VT_LEVELS][AUDIT_TILE_WIDTH];
    uint8_t *bundle; /* the current bundle file, or NULL */
    audit_bundle_entry ents[AUDIT_TILE_WIDTH];
    unsigned nents;
    char bundle_path[AUDIT_TILE_PATH_MAX];
    uint8_t file[AUDIT_TILE_BYTES]; /* a tile read from disk */
} vt_state;

/* A new checker for the tiles of a tree of size leaves under dir (free with vt_free). */
HSMCA_MUSTCHECK hsmca_code vt_new(const char *dir, uint64_t size, vt_state **out, hsmca_err *e);

/* The leaf seq (below size), its line[0..len) at byte off of the log, and its hash. */
HSMCA_MUSTCHECK hsmca_code vt_leaf(vt_state *v, uint64_t seq, uint64_t off, const char *line,
                                   size_t len, const audit_hash *leaf, hsmca_err *e);

/* After the size-th leaf: the partial tiles. */
HSMCA_MUSTCHECK hsmca_code vt_finish(vt_state *v, hsmca_err *e);

void vt_free(vt_state *v);

/* Reads DIR/rel into buf (cap bytes) and its length into *len; HSMCA_ENOTFOUND when
 * missing, HSMCA_EPERM naming rel when longer than cap. */
HSMCA_MUSTCHECK hsmca_code vt_read(const char *dir, const char *rel, uint8_t *buf, size_t cap,
                                   size_t *len, hsmca_err *e);

#endif

/* audit_tiles.h - C2SP tlog-tiles for the signing log: resource paths, which tiles a
 * checkpoint needs, hash tile contents (256 hashes of 32 bytes per full tile, height 8),
 * hashes inside a tile (what a tile-backed audit_hash_source needs), and entry bundles
 * (each entry as a big-endian uint16 length and its bytes). Pure: the writer does the I/O.
 *
 * Tile levels count in tiles: the hashes of a level-L tile are tree level 8·L. */
#ifndef HSMCA_AUDIT_TILES_H
#define HSMCA_AUDIT_TILES_H

#include <stddef.h>
#include <stdint.h>

#include "audit_merkle.h"
#include "hsmca_err.h"

#define AUDIT_TILE_HEIGHT 8
#define AUDIT_TILE_WIDTH 256                                 /* hashes in a full tile */
#define AUDIT_TILE_BYTES (AUDIT_TILE_WIDTH * AUDIT_HASH_LEN) /* 8192 */
#define AUDIT_TILE_LEVEL_MAX 63                              /* the spec's <L> range */
#define AUDIT_TILE_PATH_MAX 64                               /* longest path, with its NUL */
#define AUDIT_ENTRY_MAX 65535                                /* uint16 length prefix */
#define AUDIT_BUNDLE_MAX ((size_t)AUDIT_TILE_WIDTH * (2 + AUDIT_ENTRY_MAX))

/* One entry of a parsed bundle, pointing into the bundle. */
typedef struct {
    const uint8_t *data;
    size_t len;
} audit_bundle_entry;

/* ---- paths -------------------------------------------------------------------------- */

/* "tile/<L>/<N>" (width 256) or "tile/<L>/<N>.p/<W>" (width 1..255) into buf, with N in
 * 3-digit groups ("x001/x234/067"). */
HSMCA_MUSTCHECK hsmca_code audit_tile_path(unsigned level, uint64_t index, unsigned width,
                                           char buf[AUDIT_TILE_PATH_MAX], hsmca_err *e);

/* "tile/entries/<N>[.p/<W>]" into buf, as audit_tile_path. */
HSMCA_MUSTCHECK hsmca_code audit_bundle_path(uint64_t index, unsigned width,
                                             char buf[AUDIT_TILE_PATH_MAX], hsmca_err *e);

/* Parses a path s[0..len) that audit_tile_path or audit_bundle_path writes (only those:
 * no "x000/" group, no ".p/256", no leading zeros); *entries is 1 for a bundle (then
 * *level is 0). */
HSMCA_MUSTCHECK hsmca_code audit_tile_path_parse(const char *s, size_t len, int *entries,
                                                 unsigned *level, uint64_t *index, unsigned *width,
                                                 hsmca_err *e);

/* ---- which tiles ---------------------------------------------------------------------- */

/* The width (0..256) of tile (level, index) in the tree of tree_size leaves; 0 when the
 * tree has no such tile. */
unsigned audit_tile_width(unsigned level, uint64_t index, uint64_t tree_size);

/* Called for each tile a checkpoint of new_size publishes that one of old_size did not
 * (new tiles and wider partial ones), lowest level first; a non-OK return stops the walk. */
typedef hsmca_code (*audit_tile_visit)(void *ctx, unsigned level, uint64_t index, unsigned width,
                                       hsmca_err *e);

/* Walks the tiles new in new_size over old_size (old_size <= new_size). Level-0 tiles
 * are also the entry bundles to write, with the same index and width. */
HSMCA_MUSTCHECK hsmca_code audit_tiles_new(uint64_t old_size, uint64_t new_size,
                                           audit_tile_visit visit, void *ctx, hsmca_err *e);

/* ---- tile contents -------------------------------------------------------------------- */

/* The width·32 bytes of tile (level, index) from src (hashes at tree level 8·level) into
 * out, the caller's buffer of at least AUDIT_TILE_BYTES. */
HSMCA_MUSTCHECK hsmca_code audit_tile_build(unsigned level, uint64_t index, unsigned width,
                                            audit_hash_source src, void *ctx, uint8_t *out,
                                            hsmca_err *e);

/* Where the perfect subtree (tree level tlevel, index) lives: in tile (*level, *tindex), as
 * the subtree of height *height at position *k among the tile's hashes. */
void audit_tile_locate(unsigned tlevel, uint64_t index, unsigned *level, uint64_t *tindex,
                       unsigned *height, unsigned *k);

/* The hash of the perfect subtree of 2^height (0..8) hashes at position k inside a tile of
 * width hashes (tile[0..width·32)); the whole of a full tile is height 8, k 0. */
HSMCA_MUSTCHECK hsmca_code audit_tile_subtree(const uint8_t *tile, unsigned width, unsigned height,
                                              unsigned k, audit_hash *out, hsmca_err *e);

/* ---- entry bundles -------------------------------------------------------------------- */

/* The bundle of entries[0..n) (n 1..256, each up to AUDIT_ENTRY_MAX bytes) in a new buffer
 * (caller frees *out). */
HSMCA_MUSTCHECK hsmca_code audit_bundle_encode(const audit_bundle_entry *entries, unsigned n,
                                               uint8_t **out, size_t *outlen, hsmca_err *e);

/* Parses bundle b[0..len) into entries[0..*n) (the caller's array of AUDIT_TILE_WIDTH,
 * pointing into b): whole entries only, 1 to 256 of them. */
HSMCA_MUSTCHECK hsmca_code audit_bundle_parse(const uint8_t *b, size_t len,
                                              audit_bundle_entry *entries, unsigned *n,
                                              hsmca_err *e);

/* The level-0 tile of bundle b[0..len) (the leaf hash of each entry) into tile (the
 * caller's AUDIT_TILE_BYTES); refuses a bundle that does not hold exactly width entries. */
HSMCA_MUSTCHECK hsmca_code audit_bundle_tile(const uint8_t *b, size_t len, unsigned width,
                                             uint8_t *tile, hsmca_err *e);

#endif

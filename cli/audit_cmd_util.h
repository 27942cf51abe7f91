/* audit_cmd_util.h - what the `hsmca audit` commands share: paths in the log's
 * directory, hashes in base64, the verifier key, a walk over the log's entries. */
#ifndef HSMCA_AUDIT_CMD_UTIL_H
#define HSMCA_AUDIT_CMD_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "audit_entry.h"
#include "audit_verify.h"

/* dir/rel into out (cap bytes); a path that does not fit ends the command (exit 2). */
const char *audit_cmd_path(char *out, size_t cap, const char *dir, const char *rel);

/* h in base64 (caller frees); out of memory ends the command (exit 1). */
char *audit_cmd_b64(const audit_hash *h);

/* Prints a proof's hashes, one a line in base64, indented by two spaces. */
void audit_cmd_print_hashes(const audit_hash *h, size_t n);

/* The verifier key into *k: arg (--vkey K: a file or the vkey string), else DIR/vkey.
 * 0 when it cannot be loaded, said as "hsmca audit CMD: vkey: ...". */
int audit_cmd_load_vkey(const char *cmd, const char *arg, const char *dir, audit_vkey *k);

/* audit_cmd_load_vkey, where no key is an answer: 0 when arg is NULL and DIR/vkey does not
 * exist, 1 loaded, -1 when one was given or found but cannot be loaded (said). */
int audit_cmd_find_vkey(const char *cmd, const char *arg, const char *dir, audit_vkey *k);

/* Called for each entry of a log, in order: 1 goes on, 0 stops the walk, -1 stops it
 * as a failure (fn has said why). line[0..len) is the entry's line, without '\n'. */
typedef int (*audit_cmd_entry_fn)(void *ctx, uint64_t seq, const audit_entry *ent, const char *line,
                                  size_t len);

/* Reads DIR/log and calls fn for each entry, parsed strictly; a log that cannot be read,
 * or a line that is not an entry, is said on stderr as "hsmca audit CMD: ..." (naming
 * its seq and byte) and ends the walk. 1 when it ended without a failure, else 0. */
int audit_cmd_each_entry(const char *dir, const char *cmd, audit_cmd_entry_fn fn, void *ctx);

#endif

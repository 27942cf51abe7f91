/* audit_cmd.h - `hsmca audit ...`: the auditor's commands over a signing-log directory
 * (audit/audit_verify.h), offline: no token, no server. */
#ifndef HSMCA_AUDIT_CMD_H
#define HSMCA_AUDIT_CMD_H

/* `hsmca audit verify|prove|consistency|show|vkey ...` (argv[0] is "audit"). Exit code:
 * 0 verified / done, 1 does not verify (or not found), 2 bad usage. */
int audit_main(int argc, char **argv);

#include <stddef.h>
#include <stdint.h>

#include "audit_entry.h"
#include "audit_verify.h"

/* `hsmca audit show ...` (argv[0] is "show"), in audit_show.c. */
int audit_show_main(int argc, char **argv);

/* `hsmca audit prove ...` (argv[0] is "prove"), in audit_prove.c. */
int audit_prove_main(int argc, char **argv);

/* dir/rel into out (cap bytes); a path that does not fit ends the command (exit 2). */
const char *audit_cmd_path(char *out, size_t cap, const char *dir, const char *rel);

/* h in base64 (caller frees); out of memory ends the command (exit 1). */
char *audit_cmd_b64(const audit_hash *h);

/* Prints a proof's hashes, one a line in base64, indented by two spaces. */
void audit_cmd_print_hashes(const audit_hash *h, size_t n);

/* The verifier key into *k: arg (--vkey K: a file or the vkey string), else DIR/vkey.
 * 0 when it cannot be loaded, said as "hsmca audit CMD: vkey: ...". */
int audit_cmd_load_vkey(const char *cmd, const char *arg, const char *dir, audit_vkey *k);

/* Called for each entry of a log, in order: 1 goes on, 0 stops the walk, -1 stops it
 * as a failure (fn has said why). line[0..len) is the entry's line, without '\n'. */
typedef int (*audit_cmd_entry_fn)(void *ctx, uint64_t seq, const audit_entry *ent, const char *line,
                                  size_t len);

/* Reads DIR/log and calls fn for each entry, parsed strictly; a log that cannot be read,
 * or a line that is not an entry, is said on stderr as "hsmca audit CMD: ..." (naming
 * its seq and byte) and ends the walk. 1 when it ended without a failure, else 0. */
int audit_cmd_each_entry(const char *dir, const char *cmd, audit_cmd_entry_fn fn, void *ctx);

#endif

/* audit_cmd_multi.h - `hsmca audit verify DIR1 DIR2 ...`: the logs of several replicas of
 * one CA (docs/HA.md), each verified on its own (audit_verify), then checked together:
 * their origins differ, and no serial of one CA key is in an issue-intent of two of them
 * (within one log the verifier's own rule applies: not twice while valid). */
#ifndef HSMCA_AUDIT_CMD_MULTI_H
#define HSMCA_AUDIT_CMD_MULTI_H

#include "audit_entry.h"
#include "hsmca_err.h"

#define AUDIT_MULTI_MAX 64 /* directories in one run */

typedef struct audit_multi audit_multi;

/* NULL when out of memory. */
audit_multi *audit_multi_new(void);
void audit_multi_free(audit_multi *m);

/* The next log, dir (kept, not copied), is about to be verified. */
void audit_multi_begin(audit_multi *m, const char *dir);

/* An audit_verify_opts on_entry (ctx: an audit_multi): records the serials of the log's
 * issue-intents under the CA key of the key entry before them; HSMCA_EPERM naming the
 * serial and both logs (directory and seq) when another log has it for the same key. */
HSMCA_MUSTCHECK hsmca_code audit_multi_entry(void *ctx, const audit_entry *ent, hsmca_err *e);

/* The current log's origin (its key's name, or after its verification the latest
 * checkpoint's): HSMCA_EPERM naming both directories when an earlier
 * log had the same origin (one log given twice, or two replicas sharing an origin). */
HSMCA_MUSTCHECK hsmca_code audit_multi_origin(audit_multi *m, const char *origin, hsmca_err *e);

/* Serials recorded so far. */
unsigned long long audit_multi_serials(const audit_multi *m);

#endif

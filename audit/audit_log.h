/* audit_log.h - the signing log's writer, owned by the signer (docs/ARCHITECTURE.md §7): one
 * append-only file DIR/log of audit_entry lines, a sequence number per line (the line's
 * index, so also its Merkle leaf index), group commit, fail closed.
 *
 * audit_log_append buffers the line in memory (it never waits on the disk);
 * audit_log_sync_through(seq) writes what is buffered and returns once one fdatasync has
 * covered every line up to seq.
 * One waiter syncs for all: lines appended by other threads meanwhile share the next sync.
 * A write or sync error (a full disk, EFBIG, EIO) puts the log in a failed state: every
 * later append and sync fails with HSMCA_EUNAVAIL and the reason ("audit log: write failed:
 * No space left on device"). At most once per retry interval (1 s), an append reopens the
 * file, cuts what a failed write may have left and syncs; when that works the log is
 * writable again and issuance resumes. Thread-safe. */
#ifndef HSMCA_AUDIT_LOG_H
#define HSMCA_AUDIT_LOG_H

#include <stdint.h>
#include <sys/types.h>

#include "audit_entry.h"
#include "audit_merkle.h"
#include "metrics_hist.h"
#include "hsmca_err.h"

typedef struct audit_log audit_log;

/* Called at open for each line already in the log, in order, with the byte offset of its
 * line: the signer's replay (audit_replay.h). A non-OK return refuses the open with its
 * message, before anything is written. */
typedef hsmca_code (*audit_replay_fn)(void *ctx, const audit_entry *ent, uint64_t off,
                                      hsmca_err *e);

/* Called at open for each line already in the log, in order, with its bytes (len, without
 * the '\n') and the leaf hash the replay computed: how the checkpoint publisher
 * (audit_publish.h) rebuilds its state without hashing the log a second time. A non-OK
 * return refuses the open with its message. */
typedef hsmca_code (*audit_line_fn)(void *ctx, const char *line, size_t len, const audit_hash *leaf,
                                    hsmca_err *e);

/* What the open found. */
typedef struct {
    uint64_t entries; /* lines in the log before this open's own */
    uint64_t intents;
    uint64_t cut_bytes; /* of a torn last line, cut (a recovery entry says so) */
} audit_replay_stats;

/* Opens (creating with mode 0700/0600, the directory fsync'd) DIR and DIR/log, replays
 * every line through fn (may be NULL), cuts a torn last line (no '\n') and appends a
 * recovery entry naming what was cut. A line that does not parse, or whose seq is not its
 * index, refuses the open (HSMCA_EINVAL: the log is not ours to rewrite), as does fn
 * (with its own code and message). When owner is not (uid_t)-1, what is created is
 * chowned to owner:group (the signer creates it as root, then runs as its own user and
 * must reopen it). Ignores SIGXFSZ for the process: a file size limit
 * then fails the write with EFBIG (fail closed) instead of killing the signer.
 * *out is the caller's to audit_log_close. */
HSMCA_MUSTCHECK hsmca_code audit_log_open(const char *dir, uid_t owner, gid_t group,
                                          audit_replay_fn fn, void *ctx, audit_log **out,
                                          audit_replay_stats *stats, hsmca_err *e);

/* audit_log_open with a line_fn (may be NULL) called for each replayed line, before fn. */
HSMCA_MUSTCHECK hsmca_code audit_log_open_ex(const char *dir, uid_t owner, gid_t group,
                                             audit_replay_fn fn, void *ctx, audit_line_fn line_fn,
                                             void *line_ctx, audit_log **out,
                                             audit_replay_stats *stats, hsmca_err *e);

/* Sets ent->seq and ent->time (now), writes its line and returns the seq in *seq. Not
 * durable until audit_log_sync_through(seq). HSMCA_EUNAVAIL when the log has failed,
 * except for an issue-result: that is kept in memory and written, after its intent, when
 * the log recovers (an intent's outcome is never dropped for want of a disk). */
HSMCA_MUSTCHECK hsmca_code audit_log_append(audit_log *l, audit_entry *ent, uint64_t *seq,
                                            hsmca_err *e);

/* A rule an entry must pass before its line is written (HSMCA_OK), or why not. */
typedef hsmca_code (*audit_check_fn)(void *ctx, const audit_entry *ent, hsmca_err *e);

/* audit_log_append, with check run on the entry (its seq and time set) under the log's
 * lock just before its line is written: a refused entry is not written (check's code and
 * message). check may be NULL. */
HSMCA_MUSTCHECK hsmca_code audit_log_append_checked(audit_log *l, audit_entry *ent,
                                                    audit_check_fn check, void *ctx,
                                                    uint64_t *seq, hsmca_err *e);

/* Blocks until every line up to seq is on stable storage (HSMCA_OK), or the log failed
 * (HSMCA_EUNAVAIL with the reason). */
HSMCA_MUSTCHECK hsmca_code audit_log_sync_through(audit_log *l, uint64_t seq, hsmca_err *e);

/* Writes and syncs the lines pending (results and denies nobody waits for), when there
 * are any and no sync is under way: for a periodic caller, so they reach the disk
 * within its period even when no intent follows. HSMCA_EUNAVAIL when the log failed. */
HSMCA_MUSTCHECK hsmca_code audit_log_flush(audit_log *l, hsmca_err *e);

/* The number of lines and the RFC 9162 root over them (what a checkpoint will sign). */
HSMCA_MUSTCHECK hsmca_code audit_log_root(audit_log *l, uint64_t *size, audit_hash *root,
                                          hsmca_err *e);

/* The durable prefix of the log: *lines lines, ending at byte *bytes of DIR/log (every
 * line below is complete and on stable storage). What a checkpoint may cover. */
void audit_log_durable(audit_log *l, uint64_t *lines, uint64_t *bytes);

/* The log's figures for the signer's StatusReply, read under the log's lock (which no
 * write or sync holds): failed (fail closed until a reopen works), the durable lines and
 * their bytes, and the fdatasync latency of the syncs that succeeded. */
typedef struct {
    int failed;
    uint64_t entries, bytes;
    metrics_hist_snap sync;
} audit_log_figures;
void audit_log_figures_get(audit_log *l, audit_log_figures *out);

/* fdatasync calls made so far (to show that group commit shares them). */
uint64_t audit_log_syncs(audit_log *l);

/* For tests: hook is called (outside the log's lock) after each sync's write and before
 * its fdatasync; a nonzero return fails the sync with that errno, as if fdatasync had.
 * NULL removes it. */
void audit_log_set_sync_hook(audit_log *l, int (*hook)(void *ctx), void *ctx);

/* For tests: the minimum time between reopen attempts of a failed log (default 1 s). */
void audit_log_set_retry_interval(audit_log *l, double seconds);

/* Closes the file (what was appended but not synced is left to the kernel). NULL is fine. */
void audit_log_close(audit_log *l);

#endif

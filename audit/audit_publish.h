/* audit_publish.h - the signing log's publisher (docs/ARCHITECTURE.md §7.6): signed checkpoints
 * and the C2SP tlog-tiles layout beside DIR/log, made from the durable lines only.
 *
 *   DIR/vkey                    the audit key's verifier key "name+hex8+base64\n" (at attach)
 *   DIR/checkpoint              the latest signed checkpoint (temp + fsync + rename)
 *   DIR/checkpoints/<size>      every checkpoint published, never replaced
 *   DIR/tile/<L>/<N>[.p/<W>]    hash tiles; DIR/tile/entries/<N>[.p/<W>] entry bundles
 *
 * It keeps the tiles' right edge in memory (at most 255 hashes per tile level, 64 KiB in
 * all), reads new lines back from DIR/log by offset once audit_log says they are durable,
 * writes each full tile and bundle as it completes, and at a checkpoint the partial ones,
 * then checkpoints/<size>, then checkpoint. Checkpoints are signed through an
 * audit_note_signer (the signer's C_Sign on the audit key; tests a software key).
 *
 * At start: audit_publish_open reads DIR/checkpoint and verifies its signature under the
 * vkey of (origin, public key); the log's replay feeds every line to audit_publish_replay_line
 * (rebuilding the right edge, checking each tile and bundle on disk and rewriting, with a
 * warning, any that is missing or differs); audit_publish_attach then refuses a log shorter
 * than its checkpoint or whose root at the checkpoint's size is not the checkpoint's.
 *
 * One thread at a time drives a publisher (audit_publish_round, or the thread that
 * audit_publish_start runs); audit_publish_stop may be called from another. */
#ifndef HSMCA_AUDIT_PUBLISH_H
#define HSMCA_AUDIT_PUBLISH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "audit_log.h"
#include "audit_merkle.h"
#include "audit_note.h"
#include "hsmca_err.h"

typedef struct audit_publish audit_publish;

typedef struct {
    const char *dir;    /* audit.dir, the log's directory */
    const char *origin; /* the checkpoint origin, also the key name (audit.origin) */
    /* The audit key: key_type AUDIT_SIG_TYPE_ECDSA with pub[0..pub_len) its DER SPKI, else
     * (0 or AUDIT_SIG_TYPE_ED25519) pub its Ed25519 key, AUDIT_ED25519_PUB_LEN bytes. */
    uint8_t key_type;
    const uint8_t *pub;
    size_t pub_len;
    audit_note_signer sign;
    void *sign_ctx;
    uid_t owner; /* what is created goes to owner:group while we are root; (uid_t)-1: no */
    gid_t group;
} audit_publish_cfg;

/* Checks the origin (audit_name_check) and reads the latest checkpoint (DIR/checkpoint, or
 * the largest in DIR/checkpoints/ when that file is missing): refused (HSMCA_EINVAL, naming
 * the file and why) when its signature is not the configured key's, or its origin is not
 * cfg->origin. Writes nothing. *out is the caller's to audit_publish_free. */
HSMCA_MUSTCHECK hsmca_code audit_publish_open(const audit_publish_cfg *cfg, audit_publish **out,
                                              hsmca_err *e);

/* An audit_line_fn (ctx: the publisher) for audit_log_open_ex: one line of the existing
 * log, in order. Repairs the tiles and bundles it completes when they are missing or differ. */
HSMCA_MUSTCHECK hsmca_code audit_publish_replay_line(void *ctx, const char *line, size_t len,
                                                     const audit_hash *leaf, hsmca_err *e);

/* After the log's open: refuses (HSMCA_EINVAL, naming the size and both roots) a log that is
 * shorter than its checkpoint or whose root there differs; repairs the checkpoint's partial
 * tiles and its checkpoints/<size> copy; writes DIR/vkey. Keeps log (not owned) to ask it
 * which lines are durable. */
HSMCA_MUSTCHECK hsmca_code audit_publish_attach(audit_publish *p, audit_log *log, hsmca_err *e);

/* One round: reads the lines made durable since the last, writes the tiles and bundles they
 * complete, and when the log has grown past the latest checkpoint, the partial tiles and a
 * new signed checkpoint. *size (may be NULL) gets the latest checkpoint's size. */
HSMCA_MUSTCHECK hsmca_code audit_publish_round(audit_publish *p, uint64_t *size, hsmca_err *e);

/* Starts a thread that runs a round at once, then every interval_s while lines arrive (none
 * when idle). A failed round is logged (once per distinct reason) and retried next time:
 * issuance never waits for it. */
HSMCA_MUSTCHECK hsmca_code audit_publish_start(audit_publish *p, double interval_s, hsmca_err *e);

/* Asks the thread for a last round (the log's final lines) and waits at most timeout_s for
 * it. 0 when it stopped; -1 when it did not (a token call hung): then p and the log it
 * reads must be left alone (the process is exiting). Without a thread, does nothing. */
int audit_publish_stop(audit_publish *p, double timeout_s);

/* The latest checkpoint's size and root (what is on disk). */
void audit_publish_latest(audit_publish *p, uint64_t *size, audit_hash *root);

/* The latest checkpoint's size and the Unix time it was signed (0 and 0: none yet; time
 * 0 also when it is older than this start and its file's time was unreadable). The
 * publisher signs one only when the log grew: an idle log's checkpoint covers every
 * durable line however old it is. */
void audit_publish_latest_time(audit_publish *p, uint64_t *size, int64_t *unix_time);

/* Frees p (after audit_publish_stop returned 0, or when no thread was started). NULL is fine. */
void audit_publish_free(audit_publish *p);

#endif

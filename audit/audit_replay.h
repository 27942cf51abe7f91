/* audit_replay.h - the one replay of the signing log's serials and open intents
 * (docs/ARCHITECTURE.md §7.4): the signer's start (through audit_log_open's audit_replay_fn) and the
 * offline verifier (audit_verify) feed it the same entries in log order, so they cannot
 * disagree about a log. What one refuses, the other refuses, with the same message.
 *
 * The rules (docs/SECURITY.md "Audit log", "One replay"):
 * - CA key: an intent belongs to the CA key named by the latest `key` entry before it
 *   (its ca_spki_sha256), or to "no key entry yet" when none came before.
 * - The log's clock is the latest `time` of any entry so far (the entry being fed
 *   included): a clock that steps back does not bring an expired certificate back.
 * - Repeated serial: an issue-intent whose serial was in an earlier issue-intent of the
 *   same CA key whose certificate has not expired by the log's clock is a violation
 *   naming both seqs. The signer marks a serial used before it writes the intent and
 *   never signs it again while that certificate is valid (invariant 6), and the front end
 *   draws a fresh serial on every retry: only a broken or tampered log holds one. The
 *   first intent's outcome does not matter: a certificate, an error or UNKNOWN (a crash;
 *   it may have been signed), the serial stays taken until its notAfter. deny and
 *   frontend-deny entries carry no serial (a refused repeat is a deny, never an intent):
 *   they neither take a serial nor free one.
 * - Pairs: an issue-result names an earlier issue-intent that has no result yet
 *   (intent_seq) and carries its request_id; a second result, or one naming anything
 *   else, is a violation.
 * - Restart: a start while intents are open is a violation (a signer records an UNKNOWN
 *   result for each before its start entry).
 * - Bound: more than AUDIT_REPLAY_OPEN_MAX intents open at once is a violation (a
 *   signer has at most the requests it staged and is signing; the bound keeps a hostile
 *   log from making the replay's memory or time grow with it).
 *
 * A violation is HSMCA_EPERM, its message "log seq N (byte B): " and the rule; the caller
 * stops there. A violation of a CA-profile rule (the intermediate rules, audit_ica.h; the
 * CRL rules, audit_crl.h) is not: it is noted (audit_replay_ca_broken), the CA-profile
 * rules are not applied to later entries, and the workload rules above go on, so a log
 * that breaks one never takes workload issuance down; the signer closes its CA profile,
 * `audit verify` fails naming it. Memory: the open intents, and the serials whose certificate has not
 * expired by the log's clock (expired ones are dropped as the table grows). */
#ifndef HSMCA_AUDIT_REPLAY_H
#define HSMCA_AUDIT_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "audit_entry.h"
#include "hsmca_err.h"

/* Intents open at once beyond which a log is refused (see the rules above). */
#define AUDIT_REPLAY_OPEN_MAX 65536u

typedef struct audit_replay audit_replay;

/* An empty replay (caller frees with audit_replay_free). */
HSMCA_MUSTCHECK hsmca_code audit_replay_new(audit_replay **out, hsmca_err *e);
void audit_replay_free(audit_replay *r);

/* The next entry of the log, whose line starts at byte off: applies the rules above. */
HSMCA_MUSTCHECK hsmca_code audit_replay_entry(audit_replay *r, const audit_entry *ent, uint64_t off,
                                              hsmca_err *e);

/* The intermediate CA requests the entries built (audit_ica.h, its rules applied to
 * every entry), handed to the caller, who frees them with audit_ica_free; the replay
 * stops tracking them. */
struct audit_ica;
struct audit_ica *audit_replay_take_ica(audit_replay *r);

/* The revocations and CRLs the entries built (audit_crl.h), handed over the same way
 * (the caller frees them with audit_crl_free). */
struct audit_crl;
struct audit_crl *audit_replay_take_crl(audit_replay *r);

/* The first CA-profile rule the entries broke (its message; its seq into *seq), or NULL
 * when none. Owned by r. */
const char *audit_replay_ca_broken(const audit_replay *r, uint64_t *seq);

/* The issue-intents fed so far. */
uint64_t audit_replay_intents(const audit_replay *r);

/* Intents without a result, and the oldest one's seq (0 when none). */
size_t audit_replay_open_count(const audit_replay *r);
uint64_t audit_replay_open_first(const audit_replay *r);

/* The open intents in seq order: *it starts at 0; returns 1 with the next one's seq and
 * request id, 0 after the last. */
int audit_replay_open_next(const audit_replay *r, size_t *it, uint64_t *seq, uint64_t *request_id);

/* Called for each serial audit_replay_serials finds: its bytes and its notAfter. */
typedef void (*audit_replay_serial_fn)(void *ctx, const uint8_t *serial, size_t len,
                                       int64_t not_after);

/* Calls fn for every serial of an intent of the CA key spki_sha256 (64 hex), or of an
 * intent before any key entry (it may have been this key's), whose certificate expires
 * after now; returns how many. */
size_t audit_replay_serials(const audit_replay *r, const char *spki_sha256, int64_t now,
                            audit_replay_serial_fn fn, void *ctx);

#endif

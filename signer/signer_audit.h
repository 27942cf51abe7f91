/* signer_audit.h - the signer's entries in the signing log beyond intent and result:
 * the replay of the log at start, the outcome of intents a crash left open, what it
 * runs with (config, key) at every start, refusals (its own deny, the front end's
 * frontend-deny) under a flood limit with summary entries. Private to signer/. */
#ifndef HSMCA_SIGNER_AUDIT_H
#define HSMCA_SIGNER_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "audit_entry.h"
#include "audit_replay.h"
#include "hsmca_err.h"
#include "signer.pb-c.h"
#include "signer_limits.h"
#include "signer_tbs.h"

typedef struct signer_ctx signer_ctx;

/* Refusal entries (deny, and frontend-deny apart) written per window; the rest are
 * counted in one "suppressed" entry per window and kind. */
#define SIGNER_DENY_ENTRIES_PER_S 50
#define SIGNER_DENY_WINDOW_S 1

/* The replay at start (docs/ARCHITECTURE.md §7.4): the log's entries through audit_replay.h, the
 * verifier's own rules, so a log `hsmca audit verify` refuses the signer refuses to start
 * on (exit 78, with the same message); then the serials of this CA key whose certificates
 * have not expired go back into the serial set (invariant 6 across restarts), and the
 * intents left open get their UNKNOWN result (signer_audit_close_open). */
typedef struct {
    audit_replay *replay;
    serial_set *serials;
    char ca_spki_sha256[65]; /* the CA key whose serials are restored */
    int64_t now;             /* wall time of the start */
    uint64_t restored;
} signer_replay;

/* An empty replay for s's CA key and serial set (free with signer_replay_free). */
HSMCA_MUSTCHECK hsmca_code signer_replay_init(signer_replay *r, signer_ctx *s, hsmca_err *e);
/* An audit_replay_fn (ctx: a signer_replay) for audit_log_open. */
HSMCA_MUSTCHECK hsmca_code signer_replay_entry(void *ctx, const audit_entry *ent, uint64_t off,
                                               hsmca_err *e);
/* After the open: the serials of this CA key (and of intents before any key entry) whose
 * certificate expires after r->now into the serial set, counted in r->restored. */
void signer_replay_restore(signer_replay *r);
void signer_replay_free(signer_replay *r);

/* The canonical text of the policy the signer enforces, whose SHA-256 the config entry
 * records: one "key=value\n" line each, in this order: "hsmca-signer-policy=1",
 * "ca_sig_alg", "workload_max_ttl", "serving_max_ttl", every "trust_domain", every
 * "serving_dns", every "serving_ip", "rate_per_second", "rate_burst". Returns its
 * length, or 0 when it does not fit cap. */
size_t signer_policy_text(const signer_ctx *s, char *out, size_t cap);
/* The same for policy p (a reloaded policy file's view, signer_policy.h). */
size_t signer_policy_text_of(const signer_ctx *s, const tbs_policy *p, char *out, size_t cap);

/* Before the start entry: an issue-result with code UNKNOWN for every intent the last
 * run left open (it stopped between intent and result), so that at every start no
 * intent is open (what `hsmca audit verify` checks). *last is the seq of the last
 * entry appended, unchanged when none (for the caller's sync). */
HSMCA_MUSTCHECK hsmca_code signer_audit_close_open(signer_ctx *s, const audit_replay *replay,
                                                   uint64_t *last, hsmca_err *e);

/* After the start entry: the config entry and the key entry; *last as above. */
HSMCA_MUSTCHECK hsmca_code signer_audit_started(signer_ctx *s, uint64_t *last, hsmca_err *e);

/* A config entry for policy p after a reload (SIGHUP): from then on the log's entries
 * were checked under it (and, for the reload's grace, the one it replaced). Durable with
 * the next entry synced. Nothing without the audit log. */
HSMCA_MUSTCHECK hsmca_code signer_audit_policy(signer_ctx *s, const tbs_policy *p, hsmca_err *e);

/* A refusal of the signer's own (validation, rate, serial): a deny entry under the
 * limit, not waited for. */
void signer_audit_deny(signer_ctx *s, uint64_t id, const char *requester, hsmca_code code,
                       const char *why);

/* A refusal the front end reports (already through signer_deny_check): a frontend-deny
 * entry under its own limit, not waited for. */
void signer_audit_frontend_deny(signer_ctx *s, uint64_t id, const Hsmca__Ipc__FrontendDeny *d);

/* From the periodic tick (and at stop, with a time past every window): the summary
 * entries of windows that have ended with refusals suppressed. */
void signer_audit_flush_summaries(signer_ctx *s, double mono_now);

#endif

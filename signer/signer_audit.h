/* signer_audit.h - the signer's entries in the signing log beyond intent and result:
 * what it runs with (config, key) at every start, the outcome of intents a
 * crash left open, refusals (its own deny, the front end's frontend-deny) under a flood
 * limit with summary entries. Private to signer/. */
#ifndef HSMCA_SIGNER_AUDIT_H
#define HSMCA_SIGNER_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "audit_entry.h"
#include "hsmca_err.h"
#include "signer.pb-c.h"

typedef struct signer_ctx signer_ctx;

/* Refusal entries (deny, and frontend-deny apart) written per window; the rest are
 * counted in one "suppressed" entry per window and kind. */
#define SIGNER_DENY_ENTRIES_PER_S 50
#define SIGNER_DENY_WINDOW_S 1

/* Intents tracked during the replay while their result is missing. Open intents are
 * normally at most the signing threads' count (each worker writes its result before
 * taking the next job); the bound is for a log that says otherwise. When it is reached,
 * intents whose notAfter has passed are dropped from tracking first, then the oldest. */
#define SIGNER_OPEN_INTENTS_MAX 65536

typedef struct {
    uint64_t seq, request_id;
    int64_t not_after;
    int closed;
} signer_open_intent;

/* The intents of the log without an issue-result yet, in log order. */
typedef struct {
    signer_open_intent *v;
    size_t n, cap, closed;
    uint64_t untracked; /* dropped at the bound, never given a result */
} signer_open_intents;

/* Replay: an intent opens, its issue-result closes it. now is wall time. */
void signer_open_intents_note(signer_open_intents *o, const audit_entry *ent, int64_t now);
/* How many are open. */
size_t signer_open_intents_count(const signer_open_intents *o);
void signer_open_intents_free(signer_open_intents *o);

/* The canonical text of the policy the signer enforces, whose SHA-256 the config entry
 * records: one "key=value\n" line each, in this order: "hsmca-signer-policy=1",
 * "ca_sig_alg", "workload_max_ttl", "serving_max_ttl", every "trust_domain", every
 * "serving_dns", every "serving_ip", "rate_per_second", "rate_burst". Returns its
 * length, or 0 when it does not fit cap. */
size_t signer_policy_text(const signer_ctx *s, char *out, size_t cap);

/* Before the start entry: an issue-result with code UNKNOWN for every intent the last
 * run left open (it stopped between intent and result), so that at every start no
 * intent is open (what `hsmca audit verify` checks). *last is the seq of the last
 * entry appended, unchanged when none (for the caller's sync). */
HSMCA_MUSTCHECK hsmca_code signer_audit_close_open(signer_ctx *s, const signer_open_intents *open,
                                                   uint64_t *last, hsmca_err *e);

/* After the start entry: the config entry and the key entry; *last as above. */
HSMCA_MUSTCHECK hsmca_code signer_audit_started(signer_ctx *s, uint64_t *last, hsmca_err *e);

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

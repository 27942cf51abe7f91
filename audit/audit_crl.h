/* audit_crl.h - the CA's revocations and its CRLs, rebuilt from the signing log: the
 * signer's replay at start, its admin socket as it goes, and the offline verifier apply
 * the same rules to the same entries.
 *
 * The rules (a violation is HSMCA_EPERM naming the log seq and the rule):
 * - a revoke names an RFC 5280 reason this CA uses (audit_crl_reason_code) and a serial
 *   not revoked already (a revocation is never undone: certificateHold and
 *   removeFromCRL are not offered);
 * - a crl's crl_number is greater than every earlier crl's (cRLNumber only grows, across
 *   restarts: the signer takes the next one from the log), its count is the number of
 *   revocations before it, and its nextUpdate is after its thisUpdate.
 * - a revoke-identity names a SPIFFE ID (profile "identity") or the prefix
 *   spiffe://TD/ns/NS of a namespace's IDs (profile "namespace"), an RFC 5280 reason and
 *   its end (expires, unix seconds; 0: until lifted; the signer asks for one in the
 *   future); a later one for the same target replaces it; at most AUDIT_CRL_BANS_MAX;
 * - a revoke-identity-lift names a target whose latest revoke-identity is not lifted yet
 *   (the signer asks for one in force).
 * The signer refuses every workload TBS whose URI SAN a revocation by identity in force
 * names (audit_crl_ban_of), and finds the certificates to revoke with it in an index of
 * the workload intents' identities (serial, notAfter, SHA-256 of the ID and of its
 * namespace prefix; an entry is dropped once its certificate expired by the log's clock).
 * Memory: every revocation (serial, time, reason), up to AUDIT_CRL_MAX; every revocation
 * by identity; an index entry per unexpired workload certificate. */
#ifndef HSMCA_AUDIT_CRL_H
#define HSMCA_AUDIT_CRL_H

#include <stddef.h>
#include <stdint.h>

#include "audit_entry.h"
#include "hsmca_err.h"

#define AUDIT_CRL_MAX 100000u /* revocations in one log */
#define AUDIT_CRL_BANS_MAX 10000u /* revocations by identity in one log */

typedef struct {
    char serial[AUDIT_SERIAL_HEX_MAX + 1]; /* lowercase hex, as in the entry */
    int64_t time;                          /* revocationDate */
    int reason;                            /* CRLReason code */
} audit_crl_rev;

typedef struct audit_crl audit_crl;

/* A revocation by identity (a revoke-identity entry). */
typedef struct {
    char *target;    /* the SPIFFE ID, or spiffe://TD/ns/NS */
    int ns;          /* 1: target is a namespace's prefix */
    int64_t expires; /* unix seconds it ends; 0: until lifted */
    int reason;      /* CRLReason code */
    uint64_t seq;    /* its entry's */
    int lifted;      /* a revoke-identity-lift ended it */
} audit_crl_ban;

HSMCA_MUSTCHECK hsmca_code audit_crl_new(audit_crl **out, hsmca_err *e);
void audit_crl_free(audit_crl *t);

/* Applies one entry (revoke, crl, revoke-identity, revoke-identity-lift; a workload
 * issue-intent is noted in the index; other kinds are ignored) at byte off. */
HSMCA_MUSTCHECK hsmca_code audit_crl_apply(audit_crl *t, const audit_entry *ent, uint64_t off,
                                           hsmca_err *e);

/* Checks one entry against the rules audit_crl_apply applies, without changing t
 * (HSMCA_OK, or HSMCA_EPERM naming the rule): the signer runs it before it writes. */
HSMCA_MUSTCHECK hsmca_code audit_crl_check(const audit_crl *t, const audit_entry *ent,
                                           hsmca_err *e);

/* The CRLReason code of an RFC 5280 reason name (unspecified, keyCompromise,
 * cACompromise, affiliationChanged, superseded, cessationOfOperation,
 * privilegeWithdrawn, aACompromise), or -1. */
int audit_crl_reason_code(const char *name, size_t len);
/* The names, comma separated, for messages. */
const char *audit_crl_reason_names(void);
/* The name of a CRLReason code ("unspecified" for an unknown one). */
const char *audit_crl_reason_name(int code);

/* The length of id's namespace prefix spiffe://TD/ns/NS (id[len] is '/' or the end), or 0
 * when its path does not start with /ns/NS. */
size_t audit_crl_ns_prefix(const char *id, size_t len);
/* Whether target is well formed for its kind: a SPIFFE ID, or spiffe://TD/ns/NS (ns). */
int audit_crl_target_ok(const char *target, size_t len, int ns);

/* The revocation by identity in force at time now on the SPIFFE ID id (len bytes): one
 * on the ID itself, or on its namespace; NULL when none. */
const audit_crl_ban *audit_crl_ban_of(const audit_crl *t, const char *id, size_t len,
                                      int64_t now);
/* The revocation by identity in force at now on exactly target (ns: a namespace's), or NULL. */
const audit_crl_ban *audit_crl_ban_on(const audit_crl *t, const char *target, int ns,
                                      int64_t now);

/* Notes an issued workload certificate under its identity: serial (lowercase hex), sans
 * (an intent's SAN text, "uri:ID,..."), notAfter; entries expired at now are dropped as
 * the index grows. An entry without a uri: SAN is ignored. */
HSMCA_MUSTCHECK hsmca_code audit_crl_note(audit_crl *t, const char *serial, const char *sans,
                                          size_t sans_len, int64_t not_after, int64_t now,
                                          hsmca_err *e);
/* Calls fn for the serial of every noted certificate unexpired at now whose identity is
 * target (ns: whose namespace prefix is) and that is not revoked; returns how many. */
size_t audit_crl_serials_of(const audit_crl *t, const char *target, int ns, int64_t now,
                            void (*fn)(void *ctx, const char *serial), void *ctx);

size_t audit_crl_count(const audit_crl *t);
const audit_crl_rev *audit_crl_at(const audit_crl *t, size_t i);
/* Whether serial (lowercase hex) is revoked. */
int audit_crl_revoked(const audit_crl *t, const char *serial);

/* The latest crl entry's number (0: none yet), thisUpdate and nextUpdate, and whether a
 * revocation came after it. */
uint64_t audit_crl_last_number(const audit_crl *t);
int64_t audit_crl_last_this(const audit_crl *t);
int64_t audit_crl_last_next(const audit_crl *t);
int audit_crl_changed(const audit_crl *t);

#endif

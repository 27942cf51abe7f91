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
 * Memory: every revocation (serial, time, reason), up to AUDIT_CRL_MAX. */
#ifndef HSMCA_AUDIT_CRL_H
#define HSMCA_AUDIT_CRL_H

#include <stddef.h>
#include <stdint.h>

#include "audit_entry.h"
#include "hsmca_err.h"

#define AUDIT_CRL_MAX 100000u /* revocations in one log */

typedef struct {
    char serial[AUDIT_SERIAL_HEX_MAX + 1]; /* lowercase hex, as in the entry */
    int64_t time;                          /* revocationDate */
    int reason;                            /* CRLReason code */
} audit_crl_rev;

typedef struct audit_crl audit_crl;

HSMCA_MUSTCHECK hsmca_code audit_crl_new(audit_crl **out, hsmca_err *e);
void audit_crl_free(audit_crl *t);

/* Applies one entry (kinds other than revoke and crl are ignored) at byte off. */
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

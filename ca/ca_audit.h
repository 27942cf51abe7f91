/* ca_audit.h - the CA key's ceremony steps on the signing log (`ca-key` entries,
 * audit/audit_entry.h): key generation (ca init, token keygen, ca rotate prepare), import
 * and each rotation step; and the audit key's generation (`token keygen --key audit`,
 * step "audit-keygen": its ca_key_* fields then describe the audit key).
 *
 * The log has one owner at a time (audit/audit_lock.h). These steps run while `hsmca
 * serve` is stopped (the steps that change the CA take effect at its next start anyway),
 * so the command takes audit.dir's lock itself, without waiting: while a signer holds it
 * the step is refused before it changes anything, naming the signer's pid. With audit.dir
 * unset ("") nothing is recorded and the command says so. */
#ifndef HSMCA_CA_AUDIT_H
#define HSMCA_CA_AUDIT_H

#include <stdint.h>

#include <openssl/x509.h>

#include "audit_log.h"
#include "config.h"
#include "hsmca_err.h"

typedef struct {
    int lock_fd;                  /* -1 when not held */
    audit_log *log;               /* NULL: audit.dir unset, nothing recorded */
    int64_t switched, overlapped; /* time of the last rotate-switch / rotate-overlap, or 0 */
} ca_audit;

/* Takes audit.dir's lock (EPERM while a signer holds it: "stop hsmca serve first") and
 * opens the log, replaying it for the times above. A zeroed *a is safe to close. */
HSMCA_MUSTCHECK hsmca_code ca_audit_open(const hsmca_config *cfg, ca_audit *a, hsmca_err *e);

/* Appends and syncs one ca-key entry: step, the key's URI (its query dropped) and public
 * key, the certificate (may be NULL). Prints its seq, or that nothing is recorded. */
HSMCA_MUSTCHECK hsmca_code ca_audit_record(ca_audit *a, const char *step, const char *key_uri,
                                           EVP_PKEY *key, X509 *cert, hsmca_err *e);

/* Closes the log and releases the lock. */
void ca_audit_close(ca_audit *a);

#endif

/* signer_crl.h - revocations and the CA's CRL (docs/ARCHITECTURE.md §3.3). `hsmca ca revoke` asks
 * through the admin socket (ca-revoke); each revocation is a durable `revoke` entry of the
 * log before the reply, and the list is rebuilt from the log at start (audit/audit_crl.h).
 *
 * The CRL is built and checked by the signer alone (no caller sends a TBS): v2, issuer the
 * CA certificate's subject, AKI, a cRLNumber one above the log's last (so it grows across
 * restarts), thisUpdate now, nextUpdate now + crl.validity, every revoked serial with its
 * revocationDate and reasonCode. It is signed in the token by the CA key on the CA signing
 * thread, never on the main loop (signer_casign.c: like an intermediate, never while the CA
 * key's token is reconnecting, and past pkcs11.sign_timeout not waited for: the tick tries
 * again),
 * verified against the CA certificate, recorded as a durable `crl` entry, then written to
 * crl.path atomically (PATH.tmp, fsync, rename): a CRL that is published has its entry.
 * The signer signs one at the first tick when the list changed since the last `crl`
 * entry, when crl.path is missing, or when half of the last one's validity has passed;
 * after each revoke; and whenever the last one is past half its validity (the tick).
 * crl.path's directory must be writable by signer.user (the signer writes there from
 * inside its sandbox). Private to signer/. */
#ifndef HSMCA_SIGNER_CRL_H
#define HSMCA_SIGNER_CRL_H

#include <jansson.h>

#include "audit_entry.h"
#include "hsmca_err.h"

typedef struct signer_caops signer_caops;

/* The admin ops (signer_admin.c's table): ca-revoke (serial: lowercase hex of its octets,
 * reason: an RFC 5280 name, force_unknown: a serial the log does not know) and crl-get
 * (the current CRL's PEM). */
/* audit_check_fn (ctx: the signer_caops): a revocation entry (revoke, revoke-identity, its
 * lift) passes the revocation rules (audit_crl.h) and the intermediate rules (never a
 * serial whose signature is in flight) as it is written: a refused one is never written. */
hsmca_code signer_crl_rule(void *ctx, const audit_entry *ent, hsmca_err *e);

json_t *signer_crl_revoke(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);
json_t *signer_crl_get(signer_caops *ca, const char *user, json_t *req, hsmca_err *e);

/* The tick's look: signs and writes a CRL when one is due (see above). */
void signer_crl_tick(signer_caops *ca);

/* Builds a CRL now and hands it to the CA signing thread (signer_casign.h); once signed
 * it is recorded and written on the main loop, and reply (the waiting revoke's, or NULL)
 * gets crl_number or crl_error and goes to its caller. HSMCA_OK: handed over (reply is
 * taken); otherwise e says why, reply stays the caller's. */
HSMCA_MUSTCHECK hsmca_code signer_crl_publish(signer_caops *ca, json_t *reply, hsmca_err *e);

void signer_crl_free(signer_caops *ca);

/* At start, after the log's replay: every revoked serial into the serial set, so the
 * signer never signs a revoked serial again (for SIGNER_CRL_SERIAL_HOLD_S). */
#define SIGNER_CRL_SERIAL_HOLD_S (100LL * 365 * 86400)
void signer_crl_restore(signer_caops *ca);

#endif

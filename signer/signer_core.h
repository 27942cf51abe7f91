/* signer_core.h - the signer's life: its start (token, CA, profile, audit log), the
 * periodic tick, its stop. The connection is signer_conn.h's, the queue and the
 * threads that sign signer_work.h's. */
#ifndef HSMCA_SIGNER_CORE_H
#define HSMCA_SIGNER_CORE_H

#include "config.h"
#include "hsmca_err.h"
#include "p11.h"
#include "signer.pb-c.h"
#include "signer_conn.h"
#include "signer_limits.h"
#include "signer_request.h"
#include <stdint.h>

typedef struct signer_ctx signer_ctx;
typedef struct signer_caops signer_caops;

/* Loads the module, logs in, checks the CA key (sensitive, not extractable) and
 * that the CA certificate's key is the token key, opens and checks the audit key
 * when pkcs11.audit_key names one (logging its fingerprint), builds the profile
 * and starts signer_worker_count(sessions) workers. NULL with e naming the failed check;
 * e->code HSMCA_EUNAVAIL when a retry may cure it (the token not there yet, the audit
 * directory failing with an I/O error such as a full disk).
 * Everything that needs root or a new file (the PIN, the module) happens here,
 * before the signer confines itself. */
signer_ctx *signer_start(const hsmca_config *cfg, hsmca_err *e);

/* The audit key opened at start (p11_signkey_sign_message is thread-safe), or
 * NULL when pkcs11.audit_key is empty. Owned by s. */
p11_signkey *signer_audit_key(signer_ctx *s);

/* The CA profile's context (signer_caops.h), for its admin ops. Owned by s. */
signer_caops *signer_ca(signer_ctx *s);

/* One signature with the CA key and one with the audit key (when there is one), each
 * verified: called once the signer is confined, before it serves, so a module the
 * sandbox stops (a daemon it cannot reach) is found at start and not at the first
 * request. A token fault at that moment (UNAVAILABLE) is given a few seconds to heal.
 * e names the key (its config key) and the token's first answer. */
HSMCA_MUSTCHECK hsmca_code signer_self_test(signer_ctx *s, hsmca_err *e);

/* Starts the audit log's publisher thread (signed checkpoints and tiles, audit_publish.h),
 * when there is an audit log and an audit key: called once the signer is confined, so
 * everything the thread writes is written as the signer's own user. */
HSMCA_MUSTCHECK hsmca_code signer_publish_start(signer_ctx *s, hsmca_err *e);

/* Stops the workers and releases everything (the PIN is wiped). */
void signer_stop_all(signer_ctx *s);

/* The issuer keys of cluster idx (0 local, i + 1 auth.clusters[i]) the supervisor pushed
 * (CTL_KEYS / CTL_KEYS_CLUSTER: a sealed memfd with the JWKS), for identity binding
 * (signer_bind.h); ignored when binding is off. Does not close fd. */
HSMCA_MUSTCHECK hsmca_code signer_keys_load_fd(signer_ctx *s, int cluster, int fd, hsmca_err *e);

/* Periodic work of the main loop, at most every SIGNER_TICK_S (0.1 s; it may be
 * called after every poll): answers requests whose token call is overdue
 * (pkcs11.sign_timeout), writes the summary line of refusals suppressed in the
 * last interval. Returns 1 when the signer should restart: the token refused the
 * PIN (to the CA key's pool or the audit key's) and the PIN file has changed
 * since. */
int signer_tick(signer_ctx *s);

#endif

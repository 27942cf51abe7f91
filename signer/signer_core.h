/* signer_core.h - the signer's state: token pool, CA, profile, the current
 * front end connection and the workers that sign. */
#ifndef HSMCA_SIGNER_CORE_H
#define HSMCA_SIGNER_CORE_H

#include "config.h"
#include "hsmca_err.h"
#include "p11.h"
#include "signer.pb-c.h"
#include "signer_request.h"
#include <stdint.h>

typedef struct signer_ctx signer_ctx;

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

/* Starts the audit log's publisher thread (signed checkpoints and tiles, audit_publish.h),
 * when there is an audit log and an audit key: called once the signer is confined, so
 * everything the thread writes is written as the signer's own user. */
HSMCA_MUSTCHECK hsmca_code signer_publish_start(signer_ctx *s, hsmca_err *e);

/* Stops the workers and releases everything (the PIN is wiped). */
void signer_stop_all(signer_ctx *s);

/* The current front end connection (-1 when none). */
int signer_conn_fd(signer_ctx *s);
/* Replaces the connection (the old one is closed once no worker uses it). */
void signer_conn_set(signer_ctx *s, int fd);
/* Closes the connection; replies still in flight for it are dropped. */
void signer_conn_close(signer_ctx *s);

/* The queue's bounds (invariant 7): in requests, and in the bytes the queued
 * requests hold once unpacked, so a flooding front end cannot grow the signer. */
#define SIGNER_MAX_QUEUE 8192
#define SIGNER_MAX_QUEUE_BYTES (16u << 20)
/* How long the main thread (which also serves the control channel and signals)
 * waits for a front end to take a queue-full reply. */
#define SIGNER_MAIN_SEND_TIMEOUT_MS 100

/* The signer's threads besides the main one (which reads the front end): one checker,
 * which validates each request and appends its intent, and one signing worker per
 * PKCS#11 session, which signs what the audit log's syncer made durable (invariant 8).
 * A worker never waits for a session (each has one to itself), and the checker
 * fills the next sync while the sessions sign, so the log does not idle the token
 * (bench_signer, docs/PERFORMANCE.md §4). Index 0 is the checker. */
#define SIGNER_MAX_WORKERS (CONFIG_MAX_SESSIONS + 1)

/* The threads a signer with `sessions` sessions runs: the checker and a worker each. */
static inline unsigned signer_worker_count(unsigned sessions)
{
    unsigned n = sessions + 1;
    return n < SIGNER_MAX_WORKERS ? n : SIGNER_MAX_WORKERS;
}

/* Requests checked and logged but not yet signed (parked for the sync, or durable and
 * waiting for a session), at most: enough for the sync of a busy second to cover a few
 * hundred intents, and bounded, so a token that hangs holds this many at most. */
#define SIGNER_MAX_STAGED 512

/* The supervisor's control channel, to ask for a new front end when the
 * current one stops reading. */
void signer_set_ctl_fd(signer_ctx *s, int ctl_fd);

/* Asks the supervisor (byte CTL_RESTART_PEER on the control channel) for a new
 * front end: after a protocol violation, or when the current one stopped reading. */
void signer_ask_new_frontend(signer_ctx *s);

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

/* Before unpacking a request of this shape: HSMCA_OK when the queue has room;
 * otherwise HSMCA_ERATE, and the front end has been answered RESOURCE_EXHAUSTED
 * for request id. */
HSMCA_MUSTCHECK hsmca_code signer_queue_reserve(signer_ctx *s, const signer_request_shape *shape,
                                                uint64_t id);

/* Queues a request for the workers; takes ownership of req. When req is NULL (protobuf-c
 * could not allocate it) or the job cannot be allocated, request id is answered
 * HSMCA_ENOMEM instead (hsmca_err.h's out-of-memory rule). */
void signer_submit(signer_ctx *s, uint64_t id, Hsmca__Ipc__SignRequest *req,
                   const signer_request_shape *shape);

#endif

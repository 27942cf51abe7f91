/* signer_ctx.h - the signer's state, shared by signer_core.c (start, stop, the
 * periodic tick), signer_conn.c (connections), signer_work.c (the queue, the
 * checker and workers, the watchdog, the replies) and signer_stage.c (staged requests
 * and the syncer). The CA profile's operations see their own context instead (s->ca,
 * signer_caops.h). Private to signer/. */
#ifndef HSMCA_SIGNER_CTX_H
#define HSMCA_SIGNER_CTX_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "audit_log.h"
#include "audit_publish.h"
#include "log.h"
#include "p11.h"
#include "policy_file.h"
#include "sigalg.h"
#include "signer_bind.h"
#include "signer_caops.h"
#include "signer_conn.h"
#include "signer_limits.h"
#include "signer_stats.h"
#include "signer.pb-c.h"
#include "signer_tbs.h"
#include "window_limiter.h"

typedef struct signer_ctx signer_ctx;

struct signer_conn {
    int fd;
    int refs; /* guarded by signer_ctx.lock */
};

/* A job from its checks to its reply: the TBS's facts, digest and intent (from a pool,
 * not in the job: a queued job counts against the queue's bytes). */
struct signer_stage {
    hsmca_code rc;
    hsmca_err err;
    uint64_t intent_seq;
    uint8_t digest[64];
    tbs_facts facts;
};

typedef struct signer_job {
    struct signer_job *next; /* in the queue, then parked or ready */
    uint64_t id;
    size_t cost; /* bytes it holds, counted against SIGNER_MAX_QUEUE_BYTES */
    signer_conn *conn;
    Hsmca__Ipc__SignRequest *req;
    int answered;            /* the request got its reply (its thread or the watchdog): atomic */
    int current;             /* its front end was the current one when a worker took it; lock */
    double started;          /* monotonic: when a worker took it (the watchdog's clock); lock */
    double received;         /* monotonic: when the main thread queued it */
    struct signer_stage *st; /* from its checks to its reply (signer_work.c) */
} signer_job;

/* Longer than SIGNER_SEND_TIMEOUT_MS, so a worker blocked on a stalled front
 * end is back before the deadline. */
#define SIGNER_STOP_TIMEOUT_S 3
/* Refusal lines logged per second; a flood beyond is counted in one summary
 * line per second, so it cannot drown the lines that matter. */
#define SIGNER_REFUSAL_LINES_PER_S 50
/* With the audit log, a request whose intent is appended waits for its sync in a list
 * (staged), not on a thread: the checker goes on with the next request, and one thread
 * (signer_syncer) syncs for every staged intent and hands them back, durable, to the
 * workers to sign (at most SIGNER_MAX_STAGED, signer_core.h). While the workers have
 * SIGNER_READY_LOW durable requests or more to sign, the sync waits (at most
 * SIGNER_SYNC_HOLD_S): a sync sooner would not make them sign sooner, and each sync
 * costs the machine CPU (the signer's and the file system's journal) however few
 * intents it covers. Without load nothing waits: the first intent syncs at once. */
#define SIGNER_READY_LOW 64
#define SIGNER_SYNC_HOLD_S 0.05
/* The least time between two runs of signer_tick's work. */
#define SIGNER_TICK_S 0.1

struct signer_ctx {
    p11_module *module;
    p11_module *audit_module; /* pkcs11.audit_module when another file than module; NULL:
                                 the audit key is in module (one file is loaded once) */
    p11_pool *pool;
    p11_signkey *audit_key; /* pkcs11.audit_key; NULL when none is configured */
    audit_log *audit;       /* audit.dir; NULL when none is configured */
    audit_publish *publish; /* checkpoints and tiles; NULL without audit.dir or audit key */
    X509 *ca_cert;
    tbs_policy policy;
    policy_set *policy_file; /* issuance.policy_file as we loaded it; NULL: none */
    int policy_file_given;   /* policies owns policy_file (signer_policy_init): not ours to free */
    struct policy_live *policies;          /* the policy in force (signer_policy.h) */
    struct policy_version *policy_start;   /* our reference to the start-time one */
    signer_bind *bind;       /* identity binding; NULL when off (signer_bind.h) */
    hsmca_config cfg;        /* our copy: the policy's strings point into it */
    const sigalg *alg;
    serial_set *serials;
    rate_limiter *rate;
    log_limiter *refusals;               /* refusal lines per interval; the rest are counted */
    window_limiter *deny_limit;          /* deny entries per window (signer_audit.h) */
    window_limiter *frontend_deny_limit; /* frontend-deny entries per window */
    struct stat pin_stat; /* the PIN file as read at start: a change re-enables login */
    struct stat audit_pin_stat; /* the audit key's PIN file (pkcs11.audit_pin_file), same */
    int ctl_fd;           /* to ask the supervisor for a new front end; -1: none */
    double last_tick;     /* monotonic: signer_tick's last run (main thread only) */

    pthread_mutex_t lock;
    pthread_cond_t more;  /* the workers wait on it for staged requests */
    pthread_cond_t check; /* the checker waits on it for queued requests and room */
    signer_conn *conn;
    signer_job *head, *tail;
    int queued;
    size_t queued_bytes;
    int stopping;
    pthread_t workers[SIGNER_MAX_WORKERS];
    int n_workers;
    /* Staged requests (with the audit log): intents appended, waiting for the syncer
     * (parked), then durable, waiting for a worker to sign them (ready); staged counts
     * both. All under lock. */
    signer_job *parked, *parked_tail, *ready, *ready_tail;
    int staged, max_staged;
    int n_ready;         /* jobs on the ready list */
    double parked_since; /* monotonic: when the oldest parked job was parked */
    int checking;        /* the checker holds a job it will stage */
    /* Stages for the jobs in progress: max_staged + n_workers, taken and given back
     * under lock (allocated once; a malloc per request in one thread freed in another
     * spread the heap over every thread's arena). */
    struct signer_stage *stages, **free_stages;
    int n_free_stages;
    pthread_cond_t park; /* the syncer waits on it (CLOCK_MONOTONIC) for parked requests */
    pthread_t syncer;
    int has_syncer, syncer_stop;
    /* What each worker is signing, for the watchdog (guarded by lock). */
    signer_job *busy[SIGNER_MAX_WORKERS]; /* the job each worker holds; NULL when idle */
    /* The CA profile's state: intermediates, revocations and the CRL, the CA signing
     * thread (signer_caops.h). */
    signer_caops *ca;
    signer_stats stats;         /* the StatusReply's counters (signer_stats.h) */
    struct signer_probe *probe; /* the tokens' health while idle (signer_probe.h) */
};

#endif

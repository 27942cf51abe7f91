/* fe_sigstat.h - the signer's figures in the front end: a StatusRequest over the signer
 * IPC (proto/signer.proto) about once a second, from the IPC thread's tick, or at once
 * with fe_sigstat_refresh; the latest StatusReply is kept with the time it came, and
 * read as a copy (fe_sigstat_get) by whoever exposes it (metrics, readiness). Reading
 * never waits for the signer. */
#ifndef HSMCA_FE_SIGSTAT_H
#define HSMCA_FE_SIGSTAT_H

#include <stdint.h>

#include "fe_ipc.h"
#include "ipc_contract.h" /* SIGSTAT_*: the enums indexing the arrays below */
#include "metrics_hist.h"

/* How often the IPC thread asks, and how long an unanswered request is waited for
 * before another is sent. */
#define FE_SIGSTAT_INTERVAL_S 1.0
#define FE_SIGSTAT_TIMEOUT_S 5.0

/* The signer's figures, as its latest StatusReply gave them. */
typedef struct {
    int connected; /* a signer connection is up now (fe_ipc_connected) */
    int valid;     /* a reply has come (else every figure below is 0) */
    double age;    /* seconds since it came (monotonic); -1 when none has */
    uint64_t replies; /* replies taken since start: moves once per answered request */
    uint32_t ca_token;    /* enum sigstat_token */
    uint32_t audit_token; /* enum sigstat_token; SIGSTAT_TOKEN_NONE without an audit key */
    uint32_t sessions_open, sessions_busy;
    uint64_t reconnects;
    char ca_key_type[SIGSTAT_KEY_TYPE_MAX + 1]; /* "ec-p256", ...; "" when unknown */
    uint64_t issued[SIGSTAT_PROFILES];          /* index: enum sigstat_profile */
    uint64_t refused[SIGSTAT_REFUSALS];         /* index: enum sigstat_refusal */
    metrics_hist_snap c_sign, queue_wait, audit_sync;
    uint32_t audit_state; /* enum sigstat_audit */
    uint64_t audit_entries, audit_bytes;
    uint64_t checkpoint_size; /* 0: no checkpoint yet */
    int64_t checkpoint_time;  /* Unix seconds; 0: none */
    int64_t ca_not_after;     /* Unix seconds */
    int64_t roots_not_after[SIGSTAT_ROOTS_MAX];
    int n_roots;
    double signer_uptime; /* seconds, as of the reply */
    int ca_closed;        /* the CA profile is closed: the log breaks a CA-profile rule */
    uint64_t ca_closed_seq; /* at this log seq */
} fe_sigstat_figures;

typedef struct fe_sigstat fe_sigstat;

/* Starts polling the signer over c (the IPC thread's tick sends a StatusRequest every
 * FE_SIGSTAT_INTERVAL_S). NULL when out of memory. One per fe_ipc. */
fe_sigstat *fe_sigstat_start(fe_ipc *c);

/* Sends a StatusRequest now unless one is waiting for its reply (younger than
 * FE_SIGSTAT_TIMEOUT_S). Never waits. 0 when one was sent or is in flight, -1 when no
 * signer is connected or the send failed. Thread-safe. */
int fe_sigstat_refresh(fe_sigstat *st);

/* A copy of the latest figures, with their age and the connection's state now.
 * Thread-safe; st NULL gives connected 0, valid 0. */
void fe_sigstat_get(fe_sigstat *st, fe_sigstat_figures *out);

#endif

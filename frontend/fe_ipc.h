/* fe_ipc.h - the front end's side of the signer IPC: many requests in flight,
 * replies matched by id, and a fresh connection taken over when the supervisor
 * restarts the signer. */
#ifndef HSMCA_FE_IPC_H
#define HSMCA_FE_IPC_H

#include "hsmca_err.h"
#include "ipc_contract.h" /* IPC_KEYSETS */
#include <stddef.h>
#include <stdint.h>

#define FE_IPC_MAX_INFLIGHT 4096
#define FE_IPC_TIMEOUT_S 15.0 /* a request the signer has not answered by then fails */

/* Called exactly once per submitted request, from the IPC thread (or from
 * fe_ipc_submit's caller when the submit fails synchronously: it does not call
 * back then). cert is the DER certificate on HSMCA_OK, else NULL. */
typedef void (*fe_ipc_cb)(void *arg, hsmca_code code, const char *reason, const uint8_t *cert,
                          size_t cert_len);

typedef struct fe_ipc fe_ipc;

/* Starts the IPC thread on the signer connection ipc_fd; new connections arrive
 * on ctl_fd (SCM_RIGHTS) from the supervisor. When the supervisor goes away the
 * thread sets *stop (the front end's graceful stop: requests in flight are still
 * answered) instead of exiting under the other threads. NULL when out of memory; at
 * start-up, so a thread that cannot start is fatal (thread_start.h). */
fe_ipc *fe_ipc_start(int ipc_fd, int ctl_fd, volatile int *stop, hsmca_err *e);

/* Sends a SignRequest. HSMCA_EUNAVAIL when no signer is connected, HSMCA_ERATE
 * when FE_IPC_MAX_INFLIGHT requests are already waiting. */
HSMCA_MUSTCHECK hsmca_code fe_ipc_submit(fe_ipc *c, uint32_t profile, const uint8_t *tbs,
                                         size_t tbs_len, const char *requester,
                                         const uint8_t csr_sha256[32], fe_ipc_cb cb, void *arg,
                                         hsmca_err *e);

/* Who a workload request is for, as the signer's identity binding wants it
 * (signer/signer_bind.h): the authenticator that accepted the caller and, for "jwt",
 * the caller's bearer token (without "Bearer "), which the signer verifies again. */
typedef struct {
    const char *authenticator; /* "jwt", "client_cert", "tokenreview" */
    const char *token;         /* NULL unless authenticator is "jwt" */
    size_t token_len;
    const char *cluster; /* the ClusterID whose keys verify the token; NULL or "": local */
    const char *request_id; /* the call's id (fe_reqlog.h), for the signer's log lines */
    /* client_cert: the presented certificate's serial octets (client_serial_len 0: none)
     * and SHA-256 of its issuer Name, which the signer checks against its revocations */
    const uint8_t *client_serial;
    size_t client_serial_len;
    const uint8_t *client_issuer;
} fe_ipc_caller;

/* fe_ipc_submit with the caller (NULL: none, as for the front end's own serving
 * certificate). */
HSMCA_MUSTCHECK hsmca_code fe_ipc_submit_as(fe_ipc *c, uint32_t profile, const uint8_t *tbs,
                                            size_t tbs_len, const char *requester,
                                            const uint8_t csr_sha256[32],
                                            const fe_ipc_caller *caller, fe_ipc_cb cb, void *arg,
                                            hsmca_err *e);

/* Refusals reported per second at most (FrontendDeny, proto/signer.proto); beyond,
 * and when the signer is not reading, they are counted and the count goes with the
 * next one sent, or, when none follows (the end of a flood), with the latest of them,
 * which the IPC thread sends within a second. The signer has its own, lower, limit and
 * summary entries. */
#define FE_IPC_DENY_PER_S 1000

/* Reports a refusal the front end made (authentication, request, CSR, policy) to the
 * signer for its log: requester ("" before authentication), authenticator, code (not
 * HSMCA_OK), reason (never a token). Never waits: when the signer has no room the
 * report is counted, not sent. Thread-safe. */
void fe_ipc_deny(fe_ipc *c, const char *requester, const char *authenticator, hsmca_code code,
                 const char *reason);

/* Called on the IPC thread with the cluster index (0 local, i + 1 auth.clusters[i]) and
 * the fd of each CTL_KEYS / CTL_KEYS_CLUSTER push (a sealed memfd holding a JWKS; the
 * callee must not close it). A push that came before the handler was set is kept (the
 * latest per cluster) and handed over when it is. */
typedef void (*fe_ipc_keys_fn)(void *arg, int cluster, int memfd);
void fe_ipc_on_keys(fe_ipc *c, fe_ipc_keys_fn fn, void *arg);

/* Called on the IPC thread with each reload message from the supervisor (CTL_POLICY,
 * CTL_RELOAD_FAILED: common/ipc_frame.h) and its memfd (the callee must not close it).
 * One that comes before the handler is set is dropped (logged). */
typedef void (*fe_ipc_ctl_fn)(void *arg, char type, int memfd);
void fe_ipc_on_ctl(fe_ipc *c, fe_ipc_ctl_fn fn, void *arg);

/* Asks the supervisor to fetch the issuer's keys again (CTL_KEYS_REFRESH), at most once
 * per min_interval seconds from this process; never waits. Thread-safe. */
void fe_ipc_ask_keys(fe_ipc *c, uint32_t min_interval);

/* 1 while a signer connection is up. */
int fe_ipc_connected(fe_ipc *c);

/* The status round trip (fe_sigstat.h): each StatusReply frame goes to fn on the IPC
 * thread with its id and payload (borrowed for the call), and tick is called on the IPC
 * thread about twice a second. Set once, before or after frames come (a reply before
 * it is set is dropped). */
typedef void (*fe_ipc_status_fn)(void *arg, uint64_t id, const uint8_t *payload, size_t len);
typedef void (*fe_ipc_tick_fn)(void *arg);
void fe_ipc_on_status(fe_ipc *c, fe_ipc_status_fn fn, fe_ipc_tick_fn tick, void *arg);

/* Sends a StatusRequest (empty payload) with a fresh id, put in *id; never waits (a full
 * socket is HSMCA_EUNAVAIL, like no connection). Thread-safe. */
HSMCA_MUSTCHECK hsmca_code fe_ipc_send_status(fe_ipc *c, uint64_t *id, hsmca_err *e);

#endif

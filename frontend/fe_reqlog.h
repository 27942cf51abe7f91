/* fe_reqlog.h - a call's request id and its final log line (docs/OPERATIONS.md "Logs").
 *
 * Every call the front end reads gets an id of IPC_REQUEST_ID_LEN lowercase hex digits:
 * a random prefix drawn once per process, then a counter, so ids do not repeat within a
 * process and rarely across its restarts. It goes to the signer with the TBS
 * (SignRequest.request_id), whose lines about the request carry it as "req" too. When
 * the call ends, one line with stable keys: "req", "identity" (the authenticated
 * identity, "-" before authentication), "authn" (the authenticator that accepted or
 * last refused the caller, "-" when none ran), "code" (the gRPC status name), "dur_ms"
 * (from the call's arrival to its answer), and for a refusal "reason". A success is
 * always logged; refusals pass the caller's limiter, so a flood of garbage costs no line
 * per call. */
#ifndef HSMCA_FE_REQLOG_H
#define HSMCA_FE_REQLOG_H

#include <grpc/status.h>

#include "ipc_contract.h"
#include "log.h"

#define FE_REQLOG_IDENTITY_MAX LOG_FIELD_MAX /* bytes of the identity kept for the line */

typedef struct {
    char id[IPC_REQUEST_ID_LEN + 1];
    char identity[FE_REQLOG_IDENTITY_MAX + 1]; /* "" until authenticated */
    char authn[IPC_AUTHENTICATOR_MAX + 1];     /* "" until an authenticator ran */
    double started;                            /* monotonic seconds */
} fe_reqlog;

/* A fresh id and the start time. Thread-safe. */
void fe_reqlog_start(fe_reqlog *r);

/* Who the call is from, as far as authentication went: identity NULL or "" before
 * authentication, authn NULL when no authenticator ran. */
void fe_reqlog_who(fe_reqlog *r, const char *identity, const char *authn);

/* The final line: at info for OK; otherwise when refusals allows it (NULL: always). */
void fe_reqlog_final(const fe_reqlog *r, grpc_status_code code, const char *reason,
                     log_limiter *refusals);

/* The gRPC status name ("OK", "PERMISSION_DENIED", ...), "UNKNOWN" for another value. */
const char *fe_grpc_code_name(grpc_status_code code);

#endif

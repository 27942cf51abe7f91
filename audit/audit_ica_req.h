/* audit_ica_req.h - one istiod intermediate CA request as the rules of audit_ica.h keep
 * it, and its state: the type the request table (audit_ica.c) and the renewal rules
 * (audit_ica_renew.c) both work on, so neither needs the other's internals. */
#ifndef HSMCA_AUDIT_ICA_REQ_H
#define HSMCA_AUDIT_ICA_REQ_H

#include <stdint.h>

#include "audit_entry.h"

#define AUDIT_ICA_APPROVERS_MAX 16u /* approvals of one request: required is 1..16 */
#define AUDIT_ICA_USER_MAX 64u      /* bytes of a user name kept */

typedef enum {
    ICA_PENDING,  /* fewer approvals than required, not expired */
    ICA_APPROVED, /* enough approvals, not signed yet */
    ICA_ISSUED,
    ICA_DENIED,
    ICA_EXPIRED, /* pending past its expires */
} audit_ica_state;

typedef struct {
    uint64_t id;
    int64_t time, expires;
    uint64_t required, ttl_s; /* required: the approvals it needs now (audit_ica.h) */
    uint64_t recorded;        /* the required its request entry holds */
    int64_t requester_uid;    /* -1: none logged (compared by name) */
    char requester[AUDIT_ICA_USER_MAX + 1];
    char cluster[AUDIT_CLUSTER_MAX + 1];
    char key_sha256[65];
    char *csr_b64; /* base64 of the CSR's DER (NUL-terminated); NULL once denied or expired */
    char approvers[AUDIT_ICA_APPROVERS_MAX][AUDIT_ICA_USER_MAX + 1];
    int64_t approver_uids[AUDIT_ICA_APPROVERS_MAX]; /* -1: none logged */
    unsigned n_approvers;
    int denied;
    char denied_by[AUDIT_ICA_USER_MAX + 1], reason[256];
    uint64_t intent_seq; /* the issue-intent of its signature; 0: none yet */
    int intent_open;     /* that intent has no issue-result yet: a signature in flight */
    char *cert_b64;      /* NULL until issued */
    char cert_sha256[65];
    char serial[AUDIT_SERIAL_HEX_MAX + 1]; /* its intent's: the certificate's serial */
    int64_t not_after;                     /* its intent's: the certificate's notAfter */
    int revoked;                           /* a revoke entry named its serial */
    uint64_t auto_renews; /* auto-approved as the renewal of this request; 0: not */
} audit_ica_req;

/* Its state at wall time now. */
audit_ica_state audit_ica_state_of(const audit_ica_req *r, int64_t now);
/* A static name of state s ("unknown" when out of range). */
const char *audit_ica_state_name(audit_ica_state s);

#endif

/* ipc_contract.h - every bound the front end and the signer both enforce on their IPC
 * (common/ipc_frame.h, proto/signer.proto), each named once. The front end builds its
 * messages within these bounds and the signer's wire check (signer/signer_request.c)
 * refuses anything past them, so a bound changed here changes both sides; the
 * _Static_asserts below tie each one to the config's limits (config.h), the certificate
 * profile (profile.h) and the frame it travels in, so that the build fails when a bound
 * can no longer be met on one side. The buffers that hold these fields are declared
 * from these names, never from a literal. */
#ifndef HSMCA_IPC_CONTRACT_H
#define HSMCA_IPC_CONTRACT_H

#include <stdint.h>

#include "config.h"
#include "metrics_hist.h" /* METRICS_HIST_BOUNDS: the StatusReply's histograms */
#include "hsmca_err.h"
#include "profile.h"

/* One message per SOCK_SEQPACKET packet: u8 type | u64 id (big-endian) | payload. The
 * receiver's buffer is IPC_MAX_FRAME bytes and the size is checked before anything is
 * allocated. */
#define IPC_HEADER_LEN 9
#define IPC_MAX_FRAME 65536
#define IPC_MAX_PAYLOAD (IPC_MAX_FRAME - IPC_HEADER_LEN)

/* A frame's request id: the front end counts from 1. The signer writes the id into the
 * signing log as a JSON integer, which the log's readers (audit/audit_entry.c, `hsmca
 * audit verify` and `audit show`) hold as an int64, so a frame with a larger id is
 * malformed in both directions (ipc_frame_encode, ipc_frame_decode) rather than a
 * request whose log entry cannot be written. */
#define IPC_ID_MAX ((uint64_t)INT64_MAX)

/* String fields of SignRequest and FrontendDeny, in bytes, without a NUL. */
#define IPC_AUTHENTICATOR_MAX 64 /* "jwt", "client_cert", "tokenreview", "none" */
#define IPC_DENY_REASON_MAX 1024 /* FrontendDeny.reason: the check that refused */
#define IPC_REQUESTER_MAX PROFILE_REQUESTER_MAX /* a SPIFFE ID */
#define IPC_TBS_MAX PROFILE_TBS_MAX
#define IPC_CSR_SHA256_LEN 32 /* SignRequest.csr_sha256: empty or a SHA-256 */
/* SignRequest.token: a bearer JWT, which the signer verifies again (identity binding).
 * The front end's authenticator refuses a longer token, so every token it accepts can
 * be forwarded. */
#define IPC_TOKEN_MAX 8192
/* SignRequest.cluster: the ClusterID, a config auth.clusters id. */
#define IPC_CLUSTER_MAX CONFIG_MAX_CLUSTER_ID
/* SignRequest.request_id: the front end's id of the call, this many lowercase hex digits
 * (or empty), in both processes' log lines about it. */
#define IPC_REQUEST_ID_LEN 16
/* SignRequest.client_serial and client_issuer: the presented client certificate's serial
 * octets (1..PROFILE_SERIAL_MAX) and SHA-256 of its issuer Name's DER; both or neither. */
#define IPC_CLIENT_SERIAL_MAX PROFILE_SERIAL_MAX
#define IPC_CLIENT_ISSUER_LEN 32

/* Key sets: the local cluster (index 0) and each of auth.clusters (index i + 1). The
 * supervisor pushes each over a child's control channel as CTL_KEYS_CLUSTER(index); the
 * front end and the signer hold one set per index. */
#define IPC_KEYSETS (CONFIG_MAX_CLUSTERS + 1)

/* The largest CA signature either side holds: RSA-8192 (an ECDSA P-384 signature in DER is
 * at most 104 bytes). The signer's buffer for C_Sign's answer and the PKCS#11 pool's
 * minimum are this size. */
#define IPC_SIG_MAX 1024

/* A length-delimited field costs at most this much besides its bytes: a key of one byte and
 * a length prefix of at most 3 (lengths under 2^21). */
#define IPC_FIELD_OVERHEAD 4

_Static_assert(IPC_TBS_MAX + IPC_REQUESTER_MAX + IPC_CSR_SHA256_LEN + IPC_AUTHENTICATOR_MAX +
                       IPC_TOKEN_MAX + IPC_CLUSTER_MAX + IPC_REQUEST_ID_LEN +
                       IPC_CLIENT_SERIAL_MAX + IPC_CLIENT_ISSUER_LEN + 10 * IPC_FIELD_OVERHEAD + 6 <=
                   IPC_MAX_PAYLOAD,
               "a SignRequest at every cap fits one frame");
_Static_assert(IPC_REQUESTER_MAX + IPC_AUTHENTICATOR_MAX + IPC_DENY_REASON_MAX +
                       5 * IPC_FIELD_OVERHEAD + 12 <=
                   IPC_MAX_PAYLOAD,
               "a FrontendDeny at every cap fits one frame");
/* SignReply.certificate: the TBS, the outer AlgorithmIdentifier (under 32 bytes) and the
 * signature in a BIT STRING, in a SEQUENCE; with the code and a reason (an hsmca_err
 * message). */
_Static_assert(IPC_TBS_MAX + 32 + IPC_SIG_MAX + 16 + IPC_FIELD_OVERHEAD + 6 +
                       sizeof(((hsmca_err *)0)->msg) + IPC_FIELD_OVERHEAD <=
                   IPC_MAX_PAYLOAD,
               "a SignReply with the largest certificate fits one frame");
_Static_assert(IPC_SIG_MAX >= PROFILE_RSA_BITS_MAX / 8,
               "an RSA CA key as large as the profile allows signs into the buffer");
_Static_assert(IPC_TBS_MAX < (1 << 21) && IPC_TOKEN_MAX < (1 << 21) &&
                   IPC_REQUESTER_MAX < (1 << 21) && IPC_DENY_REASON_MAX < (1 << 21),
               "length prefixes of at most 3 bytes (IPC_FIELD_OVERHEAD)");

/* Control bytes: every type byte on the control channel between the supervisor and a
 * child (a SOCK_SEQPACKET socketpair, the child's fd 4), each named once. "Down" goes
 * from the supervisor to a child, with an fd (SCM_RIGHTS, ipc_send_ctl_fd); "up" from
 * a child to the supervisor, one byte alone. The supervisor's table of children
 * (supervisor/supervisor.c) says which child may send which byte up. */
typedef enum {
    /* Down: a new connection to the other child (signer, front end), or the metrics
     * process's link to a new front end. */
    CTL_NEW_PEER = 'F',
    /* Down: the local cluster's accepted JWKS document as a sealed memfd (the child parses
     * it itself); a remote cluster's comes as CTL_KEYS_CLUSTER(idx), below. */
    CTL_KEYS = 'J',
    /* SIGHUP's reload of the policy file (docs/OPERATIONS.md "Reload"). Down: the file's
     * bytes as the supervisor read and parsed them, as a sealed memfd, to the signer first
     * and to the front end once the signer took them. Up, the signer's answer: the same
     * byte when it took the file. */
    CTL_POLICY = 'P',
    /* Down: a sealed memfd holding why a reload kept the policy in force (to the front
     * end; to the signer too when the supervisor refused the file, which it never saw).
     * Up, the signer's answer to CTL_POLICY when it kept its own policy. */
    CTL_RELOAD_FAILED = 'p',
    /* Up, from the signer: the front end broke the IPC protocol; the supervisor SIGKILLs
     * and restarts it. */
    CTL_RESTART_PEER = 'K',
    /* Up, from the front end: a token named a kid it does not hold; fetch the issuer's
     * keys again (the supervisor rate-limits this, auth.jwt.min_refresh). */
    CTL_KEYS_REFRESH = 'R',
} ctl_byte;

/* The key set of cluster idx (0: local, CTL_KEYS; 1..CONFIG_MAX_CLUSTERS:
 * auth.clusters[idx - 1], one digit each); ctl_keys_cluster maps a type byte back: the
 * cluster index, or -1 when it is no key push. */
#define CTL_KEYS_CLUSTER(idx) ((char)((idx) == 0 ? CTL_KEYS : '0' + (idx)))
#define CTL_IS_KEY_PUSH(b) ((b) == CTL_KEYS || ((b) >= '1' && (b) <= '0' + CONFIG_MAX_CLUSTERS))
static inline int ctl_keys_cluster(char type)
{
    if (!CTL_IS_KEY_PUSH(type))
        return -1;
    return type == CTL_KEYS ? 0 : type - '0';
}
_Static_assert(CONFIG_MAX_CLUSTERS >= 1 && CONFIG_MAX_CLUSTERS <= 9,
               "CTL_KEYS_CLUSTER names a remote cluster by one digit, which no other control "
               "byte is");
_Static_assert(!CTL_IS_KEY_PUSH(CTL_NEW_PEER) && !CTL_IS_KEY_PUSH(CTL_KEYS_REFRESH) &&
                   !CTL_IS_KEY_PUSH(CTL_RESTART_PEER) && !CTL_IS_KEY_PUSH(CTL_POLICY) &&
                   !CTL_IS_KEY_PUSH(CTL_RELOAD_FAILED),
               "no other control byte reads as a key push");

/* StatusReply (proto/signer.proto): the signer's figures for the front end's metrics and
 * readiness. Every label value is an index into one of these fixed enums, and every
 * repeated field has a fixed cap, so the reply is bounded whatever the signer saw. */
enum sigstat_token {
    SIGSTAT_TOKEN_NONE = 0,         /* no such key (the audit key is optional) */
    SIGSTAT_TOKEN_OK = 1,           /* logged in */
    SIGSTAT_TOKEN_RECONNECTING = 2, /* the token went away: reconnecting */
    SIGSTAT_TOKEN_PIN_REFUSED = 3,  /* the PIN was refused: no login until the file changes */
    SIGSTAT_TOKEN_STATES
};
/* Signatures by the CA key, by what they sign (StatusReply.issued's index). */
enum sigstat_profile {
    SIGSTAT_PROFILE_WORKLOAD = 0, /* a workload leaf (PROFILE_WORKLOAD) */
    SIGSTAT_PROFILE_SERVING = 1,  /* the front end's serving certificate (PROFILE_SERVING) */
    SIGSTAT_PROFILE_CA = 2,       /* an intermediate CA certificate (the admin socket) */
    SIGSTAT_PROFILE_CRL = 3,      /* a CRL */
    SIGSTAT_PROFILES
};
/* Refusals of the signer by stage (StatusReply.refused's index): the invariant that
 * failed (signer_tbs.h, 1..8), the identity binding, the policy file, the rate limit,
 * a full queue, the token, the signing log, anything else. */
enum sigstat_refusal {
    SIGSTAT_REFUSED_OTHER = 0,
    SIGSTAT_REFUSED_INVARIANT_1 = 1, /* .. SIGSTAT_REFUSED_INVARIANT_1 + 7: invariant 8 */
    SIGSTAT_REFUSED_RATE = 9,
    SIGSTAT_REFUSED_QUEUE = 10,
    SIGSTAT_REFUSED_BINDING = 11,
    SIGSTAT_REFUSED_POLICY = 12, /* a reason starting "policy"; the policy file's own refusals
                                    name the invariant they enforce (2, 4, 5) and count there */
    SIGSTAT_REFUSED_TOKEN = 13, /* the token unavailable, its PIN refused, a signature failed */
    SIGSTAT_REFUSED_AUDIT = 14, /* the signing log cannot be written */
    SIGSTAT_REFUSALS
};
#define SIGSTAT_INVARIANTS 8
/* The signing log (StatusReply.audit_state). */
enum sigstat_audit {
    SIGSTAT_AUDIT_DISABLED = 0, /* no audit.dir */
    SIGSTAT_AUDIT_WRITABLE = 1,
    SIGSTAT_AUDIT_FAILING = 2, /* the last append or sync failed: signing is refused */
    SIGSTAT_AUDIT_STATES
};
#define SIGSTAT_KEY_TYPE_MAX 16 /* StatusReply.ca_key_type: "ec-p256", "rsa-8192" */
#define SIGSTAT_ROOTS_MAX 16    /* StatusReply.roots_not_after: the first roots of the bundle */

/* The label value of each enum entry (Prometheus label values, the logs); "" past the end. */
static inline const char *sigstat_token_name(unsigned v)
{
    static const char *const n[SIGSTAT_TOKEN_STATES] = {"none", "ok", "reconnecting",
                                                        "pin_refused"};
    return v < SIGSTAT_TOKEN_STATES ? n[v] : "";
}
static inline const char *sigstat_profile_name(unsigned v)
{
    static const char *const n[SIGSTAT_PROFILES] = {"workload", "serving", "ca", "crl"};
    return v < SIGSTAT_PROFILES ? n[v] : "";
}
static inline const char *sigstat_refusal_name(unsigned v)
{
    static const char *const n[SIGSTAT_REFUSALS] = {
        "other", "invariant_1", "invariant_2", "invariant_3", "invariant_4", "invariant_5",
        "invariant_6", "invariant_7", "invariant_8", "rate", "queue", "binding", "policy",
        "token", "audit"};
    return v < SIGSTAT_REFUSALS ? n[v] : "";
}
static inline const char *sigstat_audit_name(unsigned v)
{
    static const char *const n[SIGSTAT_AUDIT_STATES] = {"disabled", "writable", "failing"};
    return v < SIGSTAT_AUDIT_STATES ? n[v] : "";
}
/* A StatusReply's bound: a varint field costs at most 11 bytes (key and ten), a double 9,
 * a packed repeated varint 3 + 10 per entry, a histogram 3 + that of its buckets + a double
 * and a count; the sender's buffer is this size. */
#define SIGSTAT_HIST_COST (3 + (3 + 10 * (METRICS_HIST_BOUNDS + 1)) + 9 + 11)
#define SIGSTAT_REPLY_MAX 2048
_Static_assert(16 * 11 + 2 * 9 + (3 + SIGSTAT_KEY_TYPE_MAX) + 3 * SIGSTAT_HIST_COST +
                       (3 + 10 * SIGSTAT_PROFILES) + (3 + 10 * SIGSTAT_REFUSALS) +
                       (3 + 10 * SIGSTAT_ROOTS_MAX) <=
                   SIGSTAT_REPLY_MAX,
               "a StatusReply at every cap fits its buffer");
_Static_assert(SIGSTAT_REPLY_MAX <= IPC_MAX_PAYLOAD, "a StatusReply fits one frame");
_Static_assert(SIGSTAT_REFUSED_INVARIANT_1 + SIGSTAT_INVARIANTS - 1 < SIGSTAT_REFUSED_RATE,
               "the invariants' refusal indexes come before the others");

#endif

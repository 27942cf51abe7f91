/* hostile.h - what the files of the hostile front end share.
 *
 * docs/ARCHITECTURE.md §3 and §5: the signer must not be a signing oracle. The program
 * plays both the supervisor (it fork+execs `hsmca-signer` on a fresh dev CA,
 * holds its control channel and hands it new connections) and a front end that
 * an attacker controls: it builds its own TBS certificates with OpenSSL, each
 * breaking exactly one rule, and breaks the IPC protocol in the ways a
 * compromised peer could. After every refusal and every dropped connection the
 * same signer process must still sign a fresh valid request.
 *
 *   hostile_harness.c  the signer process, its control channel, the IPC helpers
 *   hostile_check.c    reply checks, protocol-violation checks, table-driven cases
 *   hostile_tbs.c      the TBS builder, one knob per rule
 *   hostile_profile.c  invariants 1-3, 5, 6: one case per hole and its neighbours
 *   hostile_spiffe.c   invariant 4: SANs, the SPIFFE-ID grammar, the serving profile
 *   hostile_ipc.c      protocol violations: frames and SignRequest wire format
 *   hostile_status.c   the signer's figures (StatusRequest): counters, bounds, floods
 *   hostile_logs.c     every log line is JSON; what signed and refusal lines carry
 *   hostile_stress.c   flood, stall, SIGTERM during a stall, with their own signer
 *   hostile_queue.c    the queue's bounds with a slow token; a replaced front end
 *   hostile_shim.c     that signer behind the fault-injecting PKCS#11 shim
 *   hostile_rate.c     invariant 7 with its own signer
 *   hostile_deny.c     FrontendDeny's wire contract; deny and frontend-deny floods in
 *                      the signing log, with their own signer
 *   hostile_policy.c   the SAN policy file (issuance.policy_file), with its own signer:
 *                      DNS SANs only where the policy grants them, and its other rules
 *   hostile_reload.c   a reloaded policy file (CTL_POLICY) on that signer: the new rules,
 *                      the replaced file's grants during the grace, a broken file refused
 *   hostile_bind.c     identity binding, with its own signer: the forwarded token must
 *                      verify and name the URI SAN's identity
 *   hostile_revoke.c   what a revocation stops, with its own signer: a revoked identity
 *                      whatever the front end says; a revoked presented certificate
 *   hostile_main.c     the groups (HF_ONLY=text runs only the groups whose name holds it) */
#ifndef HSMCA_HOSTILE_H
#define HSMCA_HOSTILE_H

/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <sys/types.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "config.h"
#include "hsmca_err.h"
#include "signer.pb-c.h"

#define HF_SPIFFE_ID "spiffe://cluster.local/ns/default/sa/sleep"
#define HF_READY_MS 30000 /* first reply: SoftHSM login and start-up checks */
#define HF_REPLY_MS 10000 /* any later reply */
#define HF_DROP_MS 5000   /* EOF and the 'K' byte after a protocol violation */
#define HF_EXIT_MS 10000  /* signer exit after its control channel closes */
#define HF_MAX_LOG (4 << 20)
#define HF_FLOOD_MS 30000 /* every reply to the flood of the rate group */

/* The supervisor's view of the one signer process the current group talks to. */
typedef struct {
    char *dir;
    char conf[1024];
    char log[1024];
    X509 *ca;  /* DIR/root-cert.pem */
    pid_t pid; /* 0 once reaped */
    int ipc;   /* our end of the current front end connection */
    int ctl;   /* our end of the signer's control channel */
    uint64_t next_id;
    unsigned sessions;          /* pkcs11.sessions: the token calls at once */
    unsigned workers;           /* the signer's threads (signer_worker_count: the checker and a
                                 * signing worker per session) */
    unsigned long n_refused;    /* refusals received (code != OK), queue-full ones apart */
    unsigned long n_queue_full; /* "signer queue full" refusals received */
} hf_state;

extern hf_state hf;

/* ---- hostile_tbs.c: TBS certificates, built the way a front end would ------------ */

typedef enum {
    EXTRA_NONE,
    EXTRA_PRIVATE_OID,      /* 1.3.6.1.4.1.55555.1.1, not critical */
    EXTRA_NAME_CONSTRAINTS, /* a leaf that would constrain names: never ours to add */
} extra_ext;

/* How an allowlisted extension appears: as the profile wants it, left out, or
 * with the other criticality. */
typedef enum { EXT_AS_PROFILE = 0, EXT_OMIT, EXT_FLIP_CRITICAL } ext_mode;

typedef enum {
    BC_CA_FALSE = 0,      /* SEQUENCE {}: CA:FALSE, DER */
    BC_CA_TRUE,           /* cA TRUE */
    BC_PATHLEN,           /* CA:FALSE with pathLenConstraint 0 */
    BC_CA_FALSE_EXPLICIT, /* cA FALSE written out: DEFAULT encoded, not DER */
} bc_kind;

/* keyUsage bits (RFC 5280 4.2.1.3); ku = 0 means the profile's for the key's type:
 * digitalSignature for EC, digitalSignature|keyEncipherment for RSA (RFC 8813 3). */
#define KU_DS (1u << 0)
#define KU_NR (1u << 1)
#define KU_KE (1u << 2)
#define KU_DE (1u << 3)
#define KU_KA (1u << 4)
#define KU_CERT_SIGN (1u << 5)
#define KU_CRL_SIGN (1u << 6)
#define KU_DECIPHER_ONLY (1u << 8)
#define KU_SET (1u << 16) /* ku holds exactly the bits given (KU_SET alone: none) */

typedef enum {
    SKI_OF_KEY = 0, /* SHA-1 of the subjectPublicKey bits */
    SKI_OTHER_KEY,  /* SHA-1 of another key's bits */
    SKI_SHA256,     /* SHA-256 of the key: 32 bytes */
    SKI_TRUNCATED,  /* the first 8 bytes of the right SHA-1 */
} ski_kind;

typedef enum {
    AKI_KEYID = 0,           /* [0] the CA's SKI */
    AKI_OTHER_KEYID,         /* [0] 20 random bytes */
    AKI_KEYID_ISSUER_SERIAL, /* [0] the CA's SKI, [1] its issuer, [2] its serial */
    AKI_ISSUER_SERIAL,       /* [1] issuer and [2] serial only */
} aki_kind;

typedef enum {
    KEY_P256 = 0,        /* a fresh EC P-256 key (or spec.key) */
    KEY_P384,            /* a fresh EC P-384 key */
    KEY_P256_COMPRESSED, /* P-256, point 02/03 || x */
    KEY_P256_HYBRID,     /* P-256, point 06/07 || x || y */
    KEY_P256_OFF_CURVE,  /* 04 || x || y with y's last bit flipped */
    KEY_P256_X_TOO_BIG,  /* 04 || ff..ff || y: a coordinate >= p */
    KEY_P256_P384_POINT, /* the P-256 OID over a P-384 point */
    KEY_SECP256K1,       /* a named curve outside the profile */
    KEY_ED25519,         /* an algorithm outside the profile */
    KEY_RSA,             /* modulus: one RSA-2048 key per run (or rsa_bits); exponent: rsa_e */
} key_kind;

typedef struct {
    /* invariants 1, 2, 4 (subject), 6 */
    int version;            /* 0: v3; 1: v1 (field absent); 2: v2 */
    const char *issuer_cn;  /* non-NULL: issuer CN=this instead of the CA subject */
    const char *subject_cn; /* non-NULL: subject CN=this instead of the empty name */
    long not_before;        /* notBefore = now + this (0: -PROFILE_BACKDATE_S) */
    long not_after;         /* notAfter = now + this (0: 3600) */
    int gen_time;           /* notBefore as GeneralizedTime (RFC 5280: UTCTime until 2049) */
    int sig_nid;            /* 0: ecdsa-with-SHA256 (the CA's) */
    int serial_len;         /* content octets of a positive serial (0: 16) */
    int serial_sign;        /* -1: the same octets as a negative serial */
    int serial_zero;        /* the serial 0 */
    /* invariant 3 */
    ext_mode bc_mode;
    bc_kind bc;
    ext_mode ku_mode;
    unsigned ku;
    ext_mode eku_mode;
    const char *eku; /* NULL: serverAuth,clientAuth; else dotted OIDs joined by ',' ("" none) */
    ext_mode ski_mode;
    ski_kind ski;
    ext_mode aki_mode;
    aki_kind aki;
    extra_ext extra; /* an extension outside the allowlist */
    /* invariant 4: the SAN extension holds, in this order, what is set here */
    ext_mode san_mode;
    const char *uri;   /* NULL: HF_SPIFFE_ID; "" for no URI SAN */
    size_t uri_len;    /* 0: strlen(uri); else exactly uri_len bytes (NULs included) */
    int uri_empty;     /* a URI SAN of zero bytes instead of uri */
    const char *uri2;  /* a second URI SAN */
    const char *dns;   /* a DNS SAN */
    const char *ip;    /* an IP SAN, as text */
    const char *email; /* an rfc822Name SAN */
    int dir_name;      /* a directoryName SAN (CN=sleep) */
    int other_name;    /* an otherName SAN (Microsoft UPN) */
    int san_twice;     /* the whole subjectAltName extension twice */
    /* invariant 5 */
    key_kind key_kind;
    EVP_PKEY *key;     /* non-NULL: this key (borrowed), whatever key_kind says */
    const char *rsa_e; /* KEY_RSA: the exponent in hex ("" or NULL: 010001); "n+2": e > n */
    int rsa_bits;      /* KEY_RSA: 0 for the shared 2048-bit modulus; else a random odd one */
    int rsa_even_n;    /* KEY_RSA: the shared modulus plus one */
} tbs_spec;

/* A DER TBSCertificate per spec (OPENSSL_malloc'd); fails the test when it cannot. */
uint8_t *hf_build_tbs(const tbs_spec *s, size_t *len);
/* A TBS the workload profile accepts, with a fresh key and serial. */
uint8_t *hf_valid_tbs(size_t *len);
/* Gives a TBS of hf_build_tbs (a v3 one) a fresh random serial in place, of the
 * same length: distinct valid requests without a key or an encoding each. */
void hf_tbs_new_serial(uint8_t *tbs, size_t len);

/* ---- hostile_harness.c: the signer process and the IPC ---------------------------- */

/* Makes a dev CA in a new directory named after prefix, lets prepare (when not
 * NULL) change it, and starts a signer on it with fresh socketpairs. 0 on success. */
int hf_start_signer(const char *prefix, int (*prepare)(void));
/* Kills a signer a failed test left behind and leaves hf idle for the next group. */
int hf_group_teardown(void **state);
/* 1 while the signer runs; reaps and reports it otherwise. */
int hf_signer_alive(void);
/* Closes the control channel like a supervisor that went away: the signer must
 * stop cleanly within HF_EXIT_MS. */
void hf_stop_signer(void);
/* The end of the signer's log on stderr, so a failure shows what the signer said. */
void hf_dump_log_tail(void);
/* Whole file (at most cap bytes) as a NUL-terminated string (malloc'd), NULL
 * when unreadable. */
char *hf_read_text(const char *path, size_t cap);
/* The signer's whole log (malloc'd), checked to be free of the PIN. */
char *hf_read_log_without_pin(void);

/* Sends a SignRequest with our requester; returns its id. */
uint64_t hf_send_request(int fd, uint32_t profile, const uint8_t *tbs, size_t len);
/* Sends a SignRequest written field by field: profile (0: absent), tbs (NULL:
 * absent), requester of rlen bytes (any bytes; 0: absent), csr_sha256 of csr_len
 * bytes (at most 32; 0: absent). Returns its id. */
uint64_t hf_send_request_as(int fd, uint32_t profile, const uint8_t *tbs, size_t len,
                            const void *requester, size_t rlen, size_t csr_len);
/* Waits for the next reply, whatever its id (timeout_ms); fails the test on a hang,
 * EOF, a dead signer or a wrong type. what names the wait in failure messages. */
Hsmca__Ipc__SignReply *hf_recv_reply(int fd, int timeout_ms, uint64_t *rid, const char *what);
/* Waits for the reply to id; a reply to another request fails the test too. */
Hsmca__Ipc__SignReply *hf_await_reply(int fd, uint64_t id, int timeout_ms);
/* Sends tbs on the current connection and waits for its reply. */
/* Sends req as the front end would (a new id, returned); fails the test if it cannot. */
uint64_t hf_send_sign_request(int fd, const Hsmca__Ipc__SignRequest *req);
Hsmca__Ipc__SignReply *hf_sign(uint32_t profile, const uint8_t *tbs, size_t len);
/* One raw packet of n bytes on the front end connection. */
void hf_send_raw(const uint8_t *p, size_t n);
/* 1 when fd is readable within timeout_ms. */
int hf_wait_readable(int fd, int timeout_ms);
/* What the supervisor does once it has started a new front end: a new
 * connection handed to the signer over its control channel (SCM_RIGHTS). Our
 * end replaces hf.ipc; the old one is closed, or returned when keep_old (-1
 * otherwise). */
int hf_hand_over(int keep_old);
/* The next byte on the control channel within timeout_ms, or -1. */
int hf_read_ctl(int timeout_ms);
/* The signer's VmRSS in KiB (/proc/<pid>/status). */
long hf_vm_rss_kb(void);

/* One key of the signer's YAML: key under the top-level section. */
typedef struct {
    const char *section, *key, *value;
} hf_yaml_kv;
/* Before the signer starts: loads DIR/hsmca.yaml into *before, sets each key
 * (an old line for it is dropped, the new one goes under its section), writes
 * it back and loads and validates it into *after. 0 on success. */
int hf_rewrite_config(const hf_yaml_kv *kv, size_t n, hsmca_config *before, hsmca_config *after);

/* ---- hostile_check.c: what a reply, a dropped connection and a process must show -- */

/* An OK reply whose certificate verifies under the root and carries exactly the
 * TBS we sent: the signer added nothing and changed nothing. */
void hf_assert_signed(const Hsmca__Ipc__SignReply *rep, const uint8_t *tbs, size_t len);
/* The signer still does its job: a fresh valid TBS is signed on the current connection. */
void hf_assert_signs_fresh(void);
/* The same within timeout_ms: HF_READY_MS for the first request to a signer that
 * is still starting (the packet waits in the socket until it reads it). */
void hf_assert_signs_within(int timeout_ms);
/* Sends tbs; the signer must refuse it with code and a reason that starts with
 * prefix (the rule and the check: "invariant 3: keyUsage must be critical"),
 * sign nothing, and then still sign a fresh valid TBS. */
void hf_assert_refused(uint32_t profile, const uint8_t *tbs, size_t len, hsmca_code code,
                       const char *prefix);
void hf_refuse_spec(const tbs_spec *s, hsmca_code code, const char *prefix);

/* One case of a table: a TBS per spec under a profile, and what the signer must answer. */
typedef struct {
    const char *name;
    tbs_spec spec;
    uint32_t profile;   /* 0: the workload profile */
    hsmca_code code;    /* HSMCA_OK: signed exactly as sent */
    const char *prefix; /* otherwise: the reason starts with this */
    const char *absent; /* and does not contain this (NULL: no such check) */
} hf_case;

/* A cmocka test that runs *c (which must outlive the run). */
struct CMUnitTest hf_case_unit_test(const hf_case *c);

/* After a violation: the signer ends the connection (replies may still come for
 * requests [lo, hi) sent before it), asks the supervisor for a new front end
 * ('K' on ctl), stays alive, and signs again on the connection handed to it. */
void hf_assert_dropped_then_reconnect_after(uint64_t lo, uint64_t hi);
void hf_assert_dropped_then_reconnect(void);

/* ---- hostile_logs.c: the signer's log --------------------------------------------- */

/* Records what the signed line of x must say (hf_assert_signed calls it). */
void hf_note_signed(const X509 *x);
/* Forgets the notes: a new signer, a new log. */
void hf_notes_reset(void);

typedef struct {
    size_t lines, signed_lines, refused_lines, summaries, violations;
    size_t queue_full_lines;       /* refusal lines of "signer queue full" (no requester) */
    unsigned long long suppressed; /* the summaries' counts added up */
    size_t max_refused_per_s;      /* refusal lines in the densest second */
    size_t max_refused_window;     /* in the fullest limiter window (1 s from its first line) */
} hf_log_stats;

/* Parses every line of the signer's log with jansson (JSON_REJECT_DUPLICATES |
 * JSON_ALLOW_NUL) and fails the test unless each is one object with ts, lvl, pid
 * and msg; signed lines carry serial, not_after, n_sans, sans and san_sha256
 * before the requester, and each noted certificate has one signed line with its
 * SANs, count and hash; refusal lines give reason, code and request_id, the
 * reason before the requester (a "queue full" refusal, given before the request
 * is unpacked, has code RESOURCE_EXHAUSTED and no requester); summaries count
 * > 0 at limit 50 per 1 s. */
void hf_check_log(hf_log_stats *st);
/* The msg of the last log line whose msg starts with prefix (malloc'd), or NULL. */
char *hf_log_last_msg(const char *prefix);
/* How many log lines have a msg that starts with prefix. */
size_t hf_log_count(const char *prefix);
/* The string field key of the last log line whose msg starts with msg_prefix and that
 * has that field (malloc'd), or NULL. */
char *hf_log_last_field(const char *msg_prefix, const char *key);
/* How many log lines have a msg that starts with msg_prefix and a string field key
 * that starts with value_prefix. */
size_t hf_log_count_field(const char *msg_prefix, const char *key, const char *value_prefix);
/* The last log line whose msg starts with msg_prefix and whose string key equals
 * value (a new reference; NULL when none). */
json_t *hf_log_find(const char *msg_prefix, const char *key, const char *value);

/* ---- the groups' tests (hostile_main.c runs them) -------------------------------- */

const struct CMUnitTest *hf_profile_tests(size_t *n);
const struct CMUnitTest *hf_spiffe_tests(size_t *n);
const struct CMUnitTest *hf_wire_tests(size_t *n);
extern const struct CMUnitTest hf_log_tests[];
extern const size_t hf_n_log_tests;
extern const struct CMUnitTest hf_ipc_tests[];
extern const size_t hf_n_ipc_tests;
extern const struct CMUnitTest hf_status_tests[];
extern const size_t hf_n_status_tests;
extern const struct CMUnitTest hf_status_shim_tests[];
extern const size_t hf_n_status_shim_tests;
extern const struct CMUnitTest hf_rate_tests[];
extern const size_t hf_n_rate_tests;
int hf_rate_group_setup(void **state);
extern const struct CMUnitTest hf_stress_tests[];
extern const size_t hf_n_stress_tests;
extern const struct CMUnitTest hf_queue_tests[];
extern const size_t hf_n_queue_tests;
extern const struct CMUnitTest hf_stress_stop_tests[];
extern const size_t hf_n_stress_stop_tests;
int hf_stress_group_setup(void **state);
int hf_rate_group_teardown(void **state);
const struct CMUnitTest *hf_deny_tests(size_t *n);
int hf_deny_group_setup(void **state);
const struct CMUnitTest *hf_policy_tests(size_t *n);
int hf_policy_group_setup(void **state);
/* hostile_reload.c: SIGHUP's reload of the policy file as the signer takes it, after
 * hf_policy_tests on the same signer */
extern const struct CMUnitTest hf_reload_tests[];
extern const size_t hf_n_reload_tests;
const struct CMUnitTest *hf_bind_tests(size_t *n);
int hf_bind_group_setup(void **state);
/* hostile_revoke.c: revocations by identity and of a presented certificate */
const struct CMUnitTest *hf_revoke_tests(size_t *n);
int hf_revoke_group_setup(void **state);

/* ---- hostile_shim.c: the stress group's token, behind tests/p11shim ----------------- */

/* Rewrites the shim's control file in place ("hang C_Sign always\n", "release\n", ""). */
void hf_shim_control(const char *rules);
/* From the shim's counts file: the calls of fn ("C_Sign"), or "hanging" (calls held now). */
unsigned long hf_shim_count(const char *fn);
/* Waits until the shim holds n calls; fails the test after timeout_ms. */
void hf_shim_wait_hanging(unsigned long n, int timeout_ms);
/* Lines of kind ("issue-intent") in the signer's audit log (DIR/audit/log). The
 * checker appends a request's intent after it took the job from the queue, and a
 * worker signs it once durable: the intents count the jobs the signer holds. */
size_t hf_audit_count(const char *kind);
/* Waits until the audit log has n lines of kind; fails the test after timeout_ms. */
void hf_audit_wait(const char *kind, size_t n, int timeout_ms);

/* ---- hostile_stress.c: a front end that floods or stops reading --------------------- */

/* A new connection for the test that begins: no shim rule, the old connection
 * closed (the signer shuts it down and drops its jobs), and a fresh TBS signed
 * on the new one, once the queue has room. */
void hf_fresh_front_end(void);
/* Sends fresh valid TBSs on the current connection until one is not answered
 * "queue full", which must then be its signature (within bound_s). Returns how
 * many "queue full" came first; *t_signed is when the signature came. */
int hf_sign_when_room(double bound_s, double *t_signed);
/* Waits until the signer has read every packet we sent on fd (SIOCOUTQ). */
void hf_wait_all_read(int fd);
/* Waits until the replies waiting on fd stop growing for 0.3 s (the workers
 * wait on the full socket); returns when they last grew, *bytes what waits. */
double hf_wait_stuck(int fd, int *bytes);
/* The next packet on fd into buf (IPC_MAX_FRAME bytes), its length; 0 at EOF. */
size_t hf_recv_packet(int fd, uint8_t *buf);

#endif

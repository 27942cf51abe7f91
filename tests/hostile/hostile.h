/* hostile.h - what the files of the hostile front end share.
 *
 * DESIGN.md §2 and §4: the signer must not be a signing oracle. The program
 * plays both the supervisor (it fork+execs `hsmca signer` on a fresh dev CA,
 * holds its control channel and hands it new connections) and a front end that
 * an attacker controls: it builds its own TBS certificates with OpenSSL, each
 * breaking exactly one rule, and breaks the IPC protocol in the ways a
 * compromised peer could. After every refusal and every dropped connection the
 * same signer process must still sign a fresh valid request.
 *
 *   hostile_harness.c  the signer process, its control channel, the IPC helpers
 *   hostile_check.c    reply checks, protocol-violation checks, /proc and log readers
 *   hostile_tbs.c      the TBS builder, one knob per rule
 *   hostile_profile.c  invariants 1-6: one case per hole, table-driven
 *   hostile_ipc.c      protocol violations
 *   hostile_rate.c     invariant 7 with its own signer
 *   hostile_main.c     the groups */
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

#include <openssl/evp.h>
#include <openssl/x509.h>

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
} hf_state;

extern hf_state hf;

/* ---- hostile_tbs.c: TBS certificates, built the way a front end would ------------ */

typedef enum {
    EXTRA_NONE,
    EXTRA_PRIVATE_OID,      /* 1.3.6.1.4.1.55555.1.1, not critical */
    EXTRA_NAME_CONSTRAINTS, /* a leaf that would constrain names: never ours to add */
} extra_ext;

typedef struct {
    int ca_true;           /* basicConstraints CA:TRUE instead of CA:FALSE */
    const char *issuer_cn; /* non-NULL: issuer CN=this instead of the CA subject */
    long not_after;        /* notAfter = now + this (0: 3600) */
    const char *uri;       /* NULL: HF_SPIFFE_ID; "" for no URI SAN */
    const char *dns;       /* non-NULL: a DNS SAN next to the URI */
    extra_ext extra;       /* an extension outside the allowlist */
    EVP_PKEY *key;         /* NULL: a fresh EC P-256 key */
    int sig_nid;           /* 0: ecdsa-with-SHA256 (the CA's) */
    int ku_cert_sign;      /* keyUsage also asserts keyCertSign */
} tbs_spec;

/* A DER TBSCertificate per spec (OPENSSL_malloc'd); fails the test when it cannot. */
uint8_t *hf_build_tbs(const tbs_spec *s, size_t *len);
/* A TBS the workload profile accepts, with a fresh key and serial. */
uint8_t *hf_valid_tbs(size_t *len);

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
/* Waits for the next reply, whatever its id (timeout_ms); fails the test on a hang,
 * EOF, a dead signer or a wrong type. what names the wait in failure messages. */
Hsmca__Ipc__SignReply *hf_recv_reply(int fd, int timeout_ms, uint64_t *rid, const char *what);
/* Waits for the reply to id; a reply to another request fails the test too. */
Hsmca__Ipc__SignReply *hf_await_reply(int fd, uint64_t id, int timeout_ms);
/* Sends tbs on the current connection and waits for its reply. */
Hsmca__Ipc__SignReply *hf_sign(uint32_t profile, const uint8_t *tbs, size_t len);
/* One raw packet of n bytes on the front end connection. */
void hf_send_raw(const uint8_t *p, size_t n);
/* 1 when fd is readable within timeout_ms. */
int hf_wait_readable(int fd, int timeout_ms);

/* ---- hostile_check.c: what a reply, a dropped connection and a process must show -- */

/* An OK reply whose certificate verifies under the root and carries exactly the
 * TBS we sent: the signer added nothing and changed nothing. */
void hf_assert_signed(const Hsmca__Ipc__SignReply *rep, const uint8_t *tbs, size_t len);
/* The signer still does its job: a fresh valid TBS is signed on the current connection. */
void hf_assert_signs_fresh(void);
/* Sends tbs; the signer must refuse it with code and a reason that names the
 * rule (rule, e.g. "invariant 3") and the check (detail), sign nothing, and
 * then still sign a fresh valid TBS. */
void hf_assert_refused(uint32_t profile, const uint8_t *tbs, size_t len, hsmca_code code,
                       const char *rule, const char *detail);
void hf_refuse_spec(const tbs_spec *s, hsmca_code code, const char *rule, const char *detail);

/* After a violation: the signer ends the connection (replies may still come for
 * requests [lo, hi) sent before it), asks the supervisor for a new front end
 * ('K' on ctl), stays alive, and signs again on the connection handed to it. */
void hf_assert_dropped_then_reconnect_after(uint64_t lo, uint64_t hi);
void hf_assert_dropped_then_reconnect(void);

/* ---- the groups' tests (hostile_main.c runs them) -------------------------------- */

extern const struct CMUnitTest hf_profile_tests[];
extern const size_t hf_n_profile_tests;
extern const struct CMUnitTest hf_ipc_tests[];
extern const size_t hf_n_ipc_tests;
extern const struct CMUnitTest hf_rate_tests[];
extern const size_t hf_n_rate_tests;
int hf_rate_group_setup(void **state);
int hf_rate_group_teardown(void **state);

#endif

/* audit_entry.h - one entry of the signing log as a canonical JSON line (docs/ARCHITECTURE.md §7.2):
 * keys in byte order, integers only (no floats), strings escaped by common/log.h's escaper
 * (valid UTF-8 kept, every other byte as the text \xNN, so any bytes fit on one line), each
 * string capped with "<key>_truncated":<original length> when cut. A line is at most
 * AUDIT_LINE_MAX bytes, its '\n' included, whatever the strings.
 *
 * audit_entry_parse is strict: it accepts exactly the bytes audit_entry_encode writes for
 * the entry it reads (re-encodes and compares), so a line has one spelling. */
#ifndef HSMCA_AUDIT_ENTRY_H
#define HSMCA_AUDIT_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "hsmca_err.h"

#define AUDIT_LINE_MAX 65536u
#define AUDIT_STR_MAX 2048u  /* input bytes kept of requester, reason, error */
#define AUDIT_SANS_MAX 4096u /* input bytes kept of the SAN list */
#define AUDIT_SERIAL_HEX_MAX 40u
#define AUDIT_PROFILE_MAX 32u
#define AUDIT_NAME_STR_MAX 64u /* input bytes kept of an authenticator name */
#define AUDIT_CLUSTER_MAX 63u  /* a cluster id (config.h CONFIG_MAX_CLUSTER_ID) */
#define AUDIT_BLOB_MAX 12288u  /* base64 characters of a CSR or certificate (DER) */
#define AUDIT_RENEW_PROOF_MAX 1024u  /* base64 characters of a renewal proof (a signature) */
#define AUDIT_ORIGIN_MAX 255u        /* bytes of a log's origin (audit_note.h AUDIT_NAME_MAX) */

typedef enum {
    AUDIT_START = 1,
    AUDIT_STOP,
    AUDIT_ISSUE_INTENT,
    AUDIT_ISSUE_RESULT,
    AUDIT_DENY,
    AUDIT_RECOVERY,
    AUDIT_CONFIG,
    AUDIT_KEY,
    AUDIT_FRONTEND_DENY,
    AUDIT_SUPPRESSED,
    AUDIT_ICA_REQUEST,
    AUDIT_ICA_APPROVE,
    AUDIT_ICA_DENY,
    AUDIT_ICA_CERT,
    AUDIT_ICA_FETCH,
    AUDIT_REVOKE,
    AUDIT_CRL,
    AUDIT_CA_KEY,
    AUDIT_ICA_AUTO_APPROVE,
    AUDIT_BAN,
    AUDIT_BAN_LIFT,
} audit_kind;
#define AUDIT_KIND_LAST AUDIT_BAN_LIFT

/* A string field: len bytes at p (any bytes); full is the length before the cap (0 means
 * len). The caller owns p. */
typedef struct {
    const char *p;
    size_t len;
    size_t full;
} audit_str;

/* One entry. Which fields a kind has:
 *   every kind:   seq, time (unix seconds)
 *   issue-intent: request_id, requester, csr_sha256 (may be ""), tbs_sha256, sans, serial,
 *                 not_before, not_after, profile, authenticator (the front end's word;
 *                 absent when "", as in logs from before it), and bound when the signer itself
 * bound the URI SAN to the caller's credential (identity binding: "jwt"; absent from the line when
 * "", so logs written before it still verify), and cluster when a remote cluster's keys
 * bound it (multicluster; absent otherwise) issue-result: request_id, intent_seq, and cert_sha256
 * or (code and error); code "UNKNOWN" when the signer stopped before it recorded the outcome deny:
 * request_id, requester, code, reason (the signer's own refusal) recovery:     reason start, stop:
 * nothing more config:       config_sha256 (the config file's bytes), policy_sha256 (the signer's
 *                 canonical policy text, signer/signer_audit.c)
 *   key:          ca_key_alg (signature algorithm), ca_key_type, ca_key_uri, ca_spki_sha256
 *                 (SubjectPublicKeyInfo DER), ca_cert_sha256 (certificate DER),
 *                 audit_key_alg ("ed25519", "ecdsa-p256", "ecdsa-p384" or ""),
 *                 audit_key_uri, audit_public_key (Ed25519: 64 hex of the raw key; ECDSA:
 *                 hex of the DER SubjectPublicKeyInfo; "" when no audit key)
 *   frontend-deny: request_id (0 when none), requester, authenticator, code, reason, and
 *                 source "frontend" (written by the encoder): the front end's word only
 *   suppressed:   of (the kind whose entries were dropped: "deny" or "frontend-deny"),
 *                 count, limit (entries allowed per window), interval_s (the window)
 *   intermediate-request: an istiod intermediate CA asked for through the admin socket
 *                 (its id is this entry's seq): requester (the unix user), cluster, csr
 *                 (base64 of the CSR's DER), key_sha256 (SHA-256 of the CSR's
 *                 SubjectPublicKeyInfo DER: what both sides compare), required (approvals it
 *                 needs), expires (unix seconds: no approval after), ttl_s (asked; 0: the max)
 *   intermediate-approve: request_id (the request's seq), requester (the approver)
 *   intermediate-deny: request_id, requester (who denied), reason
 *   intermediate-cert: request_id, cert (base64 DER of the signed certificate), cert_sha256
 *   intermediate-fetch: request_id, requester (who took the cacerts files)
 *   revoke:       serial (the revoked certificate's), reason (an RFC 5280 reason name,
 *                 audit/audit_crl.h), requester (the unix user), profile ("intermediate",
 *                 "workload": a serial the log knows; "unknown": revoked with force)
 *   crl:          crl_number, crl_sha256 (SHA-256 of the CRL's DER), count (revoked
 *                 entries in it), not_before (thisUpdate), not_after (nextUpdate)
 *   ca-key:       a CA key's ceremony step, written by the `hsmca` command that did it
 *                 (ca/ca_audit.h): step ("init", "import", "keygen", "audit-keygen",
 *                 "rotate-prepare", "rotate-import", "rotate-overlap", "rotate-switch",
 *                 "rotate-cross-sign", "rotate-finish"),
 *                 requester (the unix user), ca_key_uri, ca_key_alg, ca_key_type,
 *                 ca_spki_sha256 (the key the step is about), ca_cert_sha256 (the
 *                 certificate it made, installed or moved; "" when none, as for a CSR)
 *   intermediate-auto-approve: request_id (the renewal), requester (who asked for it),
 *                 renews (the id of the issued request it renews), proof (base64 of the
 *                 current intermediate key's signature, audit_ica_renew.h), origin (the
 *                 log's origin the proof was made for); entries written before the proof
 *                 was bound to its request have no origin, and no proof when the renewal
 *                 had the same key
 *   revoke-identity: a revocation by identity (audit/audit_crl.h): identity (a SPIFFE ID,
 *                 or with profile "namespace" the ID prefix spiffe://TD/ns/NS), profile
 *                 ("identity" or "namespace"), reason (an RFC 5280 name), requester (the
 *                 unix user), expires (unix seconds it ends; 0: until lifted); the
 *                 revoke entries of that identity's certificates follow it
 *   revoke-identity-lift: identity, profile, requester: the ban in force on it ends
 * intermediate-request, -approve and -deny also carry uid (the unix uid of the caller;
 *                 absent in logs from before it).
 * Hex fields are lowercase; sha256 fields 64 characters, serial 2..40. */
typedef struct {
    audit_kind kind;
    uint64_t seq;
    int64_t time;
    uint64_t request_id;
    uint64_t intent_seq;
    int64_t not_before, not_after;
    char csr_sha256[65], tbs_sha256[65], cert_sha256[65];
    char serial[AUDIT_SERIAL_HEX_MAX + 1];
    char profile[AUDIT_PROFILE_MAX + 1];
    char code[AUDIT_PROFILE_MAX + 1];  /* hsmca_code_name of an error; "" on success */
    char bound[AUDIT_PROFILE_MAX + 1]; /* issue-intent: "jwt" when bound, else "" */
    /* issue-intent, multicluster: the remote cluster (config auth.clusters id) whose issuer
     * keys bound the token; "" (absent from the line) for the local cluster or unbound */
    char cluster[AUDIT_CLUSTER_MAX + 1];
    audit_str requester, sans, reason, error;
    /* config */
    char config_sha256[65], policy_sha256[65];
    /* key */
    char ca_key_alg[AUDIT_PROFILE_MAX + 1], ca_key_type[AUDIT_PROFILE_MAX + 1];
    char ca_spki_sha256[65], ca_cert_sha256[65];
    char audit_key_alg[AUDIT_PROFILE_MAX + 1], audit_public_key[2 * 128 + 1]; /* AUDIT_KEY_MAX bytes */
    audit_str ca_key_uri, audit_key_uri;
    /* frontend-deny */
    audit_str authenticator;
    /* suppressed */
    char of[AUDIT_PROFILE_MAX + 1];
    uint64_t count, limit, interval_s;
    /* intermediate-* (cluster, requester, reason, request_id and cert_sha256 as above) */
    audit_str csr, cert; /* base64 text, never cut: longer than AUDIT_BLOB_MAX is refused */
    char key_sha256[65];
    int64_t expires;
    uint64_t required, ttl_s;
    /* crl (count, not_before, not_after as above) */
    uint64_t crl_number;
    char crl_sha256[65];
    /* ca-key (the ca_* fields and requester as above) */
    char step[AUDIT_PROFILE_MAX + 1];
    /* intermediate-request, -approve, -deny: the caller's uid (SO_PEERCRED), written when
     * has_uid (absent from logs written before it: users are then compared by name) */
    int has_uid;
    uint64_t uid;
    /* config: approval.required in force (absent when 0, as in logs written before it) */
    uint64_t approval_required;
    /* intermediate-auto-approve */
    uint64_t renews;
    audit_str proof; /* base64 text, at most AUDIT_RENEW_PROOF_MAX; len 0: none */
    char origin[AUDIT_ORIGIN_MAX + 1]; /* "": none (absent from the line) */
    /* revoke-identity, revoke-identity-lift (profile, reason, requester, expires as above) */
    audit_str identity;
} audit_entry;

/* The name of a kind ("issue-intent"), or NULL. */
const char *audit_kind_name(audit_kind k);

/* Encodes *ent as one line into out (AUDIT_LINE_MAX bytes), '\n' included; *len gets its
 * length. HSMCA_EINVAL when a fixed field is malformed (bad hex, unknown kind, an
 * issue-result with neither a hash nor an error). */
HSMCA_MUSTCHECK hsmca_code audit_entry_encode(const audit_entry *ent, char *out, size_t *len,
                                              hsmca_err *e);

/* Storage for the strings of a parsed entry (the unescaped bytes). */
typedef struct {
    char requester[AUDIT_STR_MAX], reason[AUDIT_STR_MAX], error[AUDIT_STR_MAX];
    char sans[AUDIT_SANS_MAX];
    char ca_key_uri[AUDIT_STR_MAX], audit_key_uri[AUDIT_STR_MAX];
    char authenticator[AUDIT_NAME_STR_MAX];
    char csr[AUDIT_BLOB_MAX + 1], cert[AUDIT_BLOB_MAX + 1];
    char proof[AUDIT_RENEW_PROOF_MAX + 1];
    char identity[AUDIT_STR_MAX];
} audit_entry_buf;

/* Parses one line (len bytes, without its '\n') into *ent, whose strings point into *buf.
 * HSMCA_EINVAL naming the rule when the line is not an entry in canonical form. */
HSMCA_MUSTCHECK hsmca_code audit_entry_parse(const char *line, size_t len, audit_entry *ent,
                                             audit_entry_buf *buf, hsmca_err *e);

#endif

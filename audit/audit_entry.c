/* audit_entry.c - canonical JSON lines of the signing log (audit_entry.h). */
#include "audit_entry.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "config.h"
#include "log.h"
#include "util.h"

/* The longest entry (an intent: requester, authenticator and SANs, every character
 * escaped to 6 bytes, plus fixed fields well under 2 KiB) fits a line. */
static_assert(6 * (AUDIT_STR_MAX + AUDIT_NAME_STR_MAX + AUDIT_SANS_MAX) + 2048 < AUDIT_LINE_MAX,
              "an intent fits");
static_assert(6 * (2 * AUDIT_STR_MAX) + 2048 < AUDIT_LINE_MAX, "a deny fits");
static_assert(6 * (2 * AUDIT_STR_MAX + AUDIT_NAME_STR_MAX) + 2048 < AUDIT_LINE_MAX,
              "a frontend-deny and a key entry fit");
static_assert(6 * AUDIT_STR_MAX + AUDIT_BLOB_MAX + 2048 < AUDIT_LINE_MAX,
              "an intermediate request or certificate fits");

static const char *const kind_names[] = {
    [AUDIT_START] = "start",
    [AUDIT_STOP] = "stop",
    [AUDIT_ISSUE_INTENT] = "issue-intent",
    [AUDIT_ISSUE_RESULT] = "issue-result",
    [AUDIT_DENY] = "deny",
    [AUDIT_RECOVERY] = "recovery",
    [AUDIT_CONFIG] = "config",
    [AUDIT_KEY] = "key",
    [AUDIT_FRONTEND_DENY] = "frontend-deny",
    [AUDIT_SUPPRESSED] = "suppressed",
    [AUDIT_ICA_REQUEST] = "intermediate-request",
    [AUDIT_ICA_APPROVE] = "intermediate-approve",
    [AUDIT_ICA_DENY] = "intermediate-deny",
    [AUDIT_ICA_CERT] = "intermediate-cert",
    [AUDIT_ICA_FETCH] = "intermediate-fetch",
    [AUDIT_REVOKE] = "revoke",
    [AUDIT_CRL] = "crl",
    [AUDIT_CA_KEY] = "ca-key",
    [AUDIT_ICA_AUTO_APPROVE] = "intermediate-auto-approve",
    [AUDIT_BAN] = "revoke-identity",
    [AUDIT_BAN_LIFT] = "revoke-identity-lift",
};

const char *audit_kind_name(audit_kind k)
{
    if (k < AUDIT_START || k > AUDIT_KIND_LAST)
        return NULL;
    return kind_names[k];
}

typedef struct {
    char *buf;
    size_t len, cap;
    int first;
} jw;

/* Appends raw bytes; the static_asserts bound every line, so overflowing is a bug. */
static void jw_put(jw *w, const char *s, size_t n)
{
    assert(n <= w->cap - w->len);
    if (n > w->cap - w->len)
        n = w->cap - w->len;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void jw_key(jw *w, const char *key)
{
    if (!w->first)
        jw_put(w, ",", 1);
    w->first = 0;
    jw_put(w, "\"", 1);
    jw_put(w, key, strlen(key));
    jw_put(w, "\":", 2);
}

static void jw_u64(jw *w, const char *key, uint64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%" PRIu64, v);
    jw_key(w, key);
    jw_put(w, num, (size_t)n);
}

static void jw_i64(jw *w, const char *key, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%" PRId64, v);
    jw_key(w, key);
    jw_put(w, num, (size_t)n);
}

/* A plain string the encoder checked (hex, a kind, a profile name): no escaping needed. */
static void jw_plain(jw *w, const char *key, const char *s)
{
    jw_key(w, key);
    jw_put(w, "\"", 1);
    jw_put(w, s, strlen(s));
    jw_put(w, "\"", 1);
}

/* "key":"<escaped, capped>" and, when cut, "key_truncated":<full length>. Its sort
 * position is right after key for every key this file uses (checked in the tests). */
static void jw_str(jw *w, const char *key, const audit_str *s, size_t cap)
{
    size_t full = s->full > s->len ? s->full : s->len, olen;
    jw_key(w, key);
    jw_put(w, "\"", 1);
    size_t kept = log_json_escape(s->p ? s->p : "", s->p ? s->len : 0, cap, w->buf + w->len,
                                  w->cap - w->len, &olen);
    w->len += olen;
    jw_put(w, "\"", 1);
    if (kept < full) {
        char k[40];
        snprintf(k, sizeof(k), "%s_truncated", key);
        jw_u64(w, k, full);
    }
}

static int is_hex(const char *s, size_t min, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n < min || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* A profile or code name: [a-z0-9_-] and upper case, at most AUDIT_PROFILE_MAX. */
static int is_name(const char *s, size_t min)
{
    size_t n = strnlen(s, AUDIT_PROFILE_MAX + 1);
    if (n < min || n > AUDIT_PROFILE_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

/* A log's origin as an entry keeps it (written as is): 1..AUDIT_ORIGIN_MAX bytes of
 * printable ASCII without space, '"' or '\\'. */
static int origin_ok(const char *s)
{
    size_t n = strnlen(s, AUDIT_ORIGIN_MAX + 1);
    if (n < 1 || n > AUDIT_ORIGIN_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~' || s[i] == '"' || s[i] == '\\')
            return 0;
    return 1;
}

/* Base64 (RFC 4648, with padding) of min..AUDIT_BLOB_MAX characters: written as is. */
static int is_b64(const audit_str *b)
{
    if (!b->p || b->len == 0 || b->len > AUDIT_BLOB_MAX || b->len % 4 != 0)
        return 0;
    for (size_t i = 0; i < b->len; i++) {
        char c = b->p[i];
        int pad = c == '=' && i + 2 >= b->len && (i + 1 == b->len || b->p[i + 1] == '=');
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || pad))
            return 0;
    }
    return 1;
}

static void jw_blob(jw *w, const char *key, const audit_str *b)
{
    jw_key(w, key);
    jw_put(w, "\"", 1);
    jw_put(w, b->p, b->len);
    jw_put(w, "\"", 1);
}

/* The intermediate-* kinds' own fields. */
static HSMCA_MUSTCHECK hsmca_code check_ica(const audit_entry *ent, hsmca_err *e)
{
    if (ent->kind == AUDIT_ICA_REQUEST) {
        HSMCA_ENSURE(is_b64(&ent->csr), e, HSMCA_EINVAL,
                     "audit entry: an intermediate request needs its CSR in base64");
        HSMCA_ENSURE(is_hex(ent->key_sha256, 64, 64), e, HSMCA_EINVAL,
                     "audit entry: key_sha256 must be 64 lowercase hex digits");
        HSMCA_ENSURE(config_cluster_id_ok(ent->cluster, strlen(ent->cluster)), e, HSMCA_EINVAL,
                     "audit entry: an intermediate request needs a cluster name");
        HSMCA_ENSURE(ent->required >= 1 && ent->required <= 16 && ent->ttl_s <= INT64_MAX, e,
                     HSMCA_EINVAL, "audit entry: required must be 1..16");
    }
    if (ent->kind == AUDIT_ICA_CERT) {
        HSMCA_ENSURE(is_b64(&ent->cert), e, HSMCA_EINVAL,
                     "audit entry: an intermediate certificate needs its DER in base64");
        HSMCA_ENSURE(is_hex(ent->cert_sha256, 64, 64), e, HSMCA_EINVAL,
                     "audit entry: cert_sha256 must be 64 lowercase hex digits");
    }
    if (ent->kind >= AUDIT_ICA_REQUEST && ent->kind != AUDIT_ICA_CERT && ent->kind != AUDIT_CRL)
        HSMCA_ENSURE(ent->requester.len > 0, e, HSMCA_EINVAL,
                     "audit entry: an intermediate step or a revocation needs its user");
    if (ent->kind == AUDIT_REVOKE)
        HSMCA_ENSURE(is_hex(ent->serial, 2, AUDIT_SERIAL_HEX_MAX) && strlen(ent->serial) % 2 == 0 &&
                         is_name(ent->profile, 1) && ent->reason.len > 0,
                     e, HSMCA_EINVAL, "audit entry: a revocation needs a serial, kind and reason");
    if (ent->kind == AUDIT_ICA_AUTO_APPROVE)
        HSMCA_ENSURE(ent->renews >= 1 && ent->renews <= INT64_MAX &&
                         ent->proof.len <= AUDIT_RENEW_PROOF_MAX &&
                         (ent->proof.len == 0 || is_b64(&ent->proof)),
                     e, HSMCA_EINVAL,
                     "audit entry: an auto-approval needs the request it renews, and its proof "
                     "in base64");
    if (ent->kind == AUDIT_BAN || ent->kind == AUDIT_BAN_LIFT)
        HSMCA_ENSURE(ent->identity.len > 0 && ent->identity.len <= AUDIT_STR_MAX &&
                         (strcmp(ent->profile, "identity") == 0 ||
                          strcmp(ent->profile, "namespace") == 0) &&
                         (ent->kind == AUDIT_BAN_LIFT || (ent->reason.len > 0 && ent->expires >= 0)),
                     e, HSMCA_EINVAL,
                     "audit entry: a revocation by identity needs its identity, profile "
                     "(identity or namespace), and a reason and end (0 or later)");
    if (ent->kind == AUDIT_ICA_AUTO_APPROVE && ent->origin[0])
        HSMCA_ENSURE(ent->proof.len > 0 && origin_ok(ent->origin), e, HSMCA_EINVAL,
                     "audit entry: an auto-approval with an origin needs its proof, and the "
                     "origin printable ASCII without spaces, quotes or backslashes");
    if (ent->kind == AUDIT_CRL)
        HSMCA_ENSURE(is_hex(ent->crl_sha256, 64, 64) && ent->crl_number >= 1 &&
                         ent->crl_number <= INT64_MAX,
                     e, HSMCA_EINVAL, "audit entry: a CRL needs its number and SHA-256");
    return HSMCA_OK;
}

/* The fixed fields of each kind are well formed (the strings are escaped, not checked). */
static HSMCA_MUSTCHECK hsmca_code check_fixed(const audit_entry *ent, hsmca_err *e)
{
    audit_kind k = ent->kind;
    int ok_result = k == AUDIT_ISSUE_RESULT && ent->cert_sha256[0];
    if (k == AUDIT_ISSUE_INTENT) {
        HSMCA_ENSURE(is_hex(ent->tbs_sha256, 64, 64), e, HSMCA_EINVAL,
                     "audit entry: tbs_sha256 must be 64 lowercase hex digits");
        HSMCA_ENSURE(ent->csr_sha256[0] == 0 || is_hex(ent->csr_sha256, 64, 64), e, HSMCA_EINVAL,
                     "audit entry: csr_sha256 must be empty or 64 lowercase hex digits");
        HSMCA_ENSURE(is_hex(ent->serial, 2, AUDIT_SERIAL_HEX_MAX), e, HSMCA_EINVAL,
                     "audit entry: serial must be 2-40 lowercase hex digits");
        HSMCA_ENSURE(is_name(ent->profile, 1), e, HSMCA_EINVAL, "audit entry: bad profile name");
        HSMCA_ENSURE(ent->bound[0] == 0 || is_name(ent->bound, 1), e, HSMCA_EINVAL,
                     "audit entry: bad bound name");
        HSMCA_ENSURE(
            ent->cluster[0] == 0 ||
                (ent->bound[0] && config_cluster_id_ok(ent->cluster, strlen(ent->cluster))),
            e, HSMCA_EINVAL, "audit entry: cluster must be a cluster id, and bound");
    }
    if (ok_result)
        HSMCA_ENSURE(is_hex(ent->cert_sha256, 64, 64), e, HSMCA_EINVAL,
                     "audit entry: cert_sha256 must be 64 lowercase hex digits");
    if ((k == AUDIT_ISSUE_RESULT && !ok_result) || k == AUDIT_DENY || k == AUDIT_FRONTEND_DENY)
        HSMCA_ENSURE(is_name(ent->code, 1), e, HSMCA_EINVAL,
                     "audit entry: an error or deny needs a code");
    if (k == AUDIT_CONFIG)
        HSMCA_ENSURE(is_hex(ent->config_sha256, 64, 64) && is_hex(ent->policy_sha256, 64, 64), e,
                     HSMCA_EINVAL, "audit entry: config and policy need their SHA-256 in hex");
    if (k == AUDIT_KEY) {
        HSMCA_ENSURE(is_hex(ent->ca_spki_sha256, 64, 64) && is_hex(ent->ca_cert_sha256, 64, 64), e,
                     HSMCA_EINVAL, "audit entry: the CA key and certificate need their SHA-256");
        HSMCA_ENSURE(is_name(ent->ca_key_alg, 1) && is_name(ent->ca_key_type, 1), e, HSMCA_EINVAL,
                     "audit entry: bad CA key algorithm or type name");
        const char *alg = ent->audit_key_alg, *pub = ent->audit_public_key;
        int ed = strcmp(alg, "ed25519") == 0,
            ec = strcmp(alg, "ecdsa-p256") == 0 || strcmp(alg, "ecdsa-p384") == 0;
        HSMCA_ENSURE(pub[0] == 0 ? alg[0] == 0
                                 : (ed && is_hex(pub, 64, 64)) ||
                                       (ec && is_hex(pub, 2, 256) && strlen(pub) % 2 == 0),
                     e, HSMCA_EINVAL,
                     "audit entry: audit_public_key must be hex of an ed25519 (64 digits) or "
                     "ecdsa-p256/ecdsa-p384 key with its algorithm, or both empty");
    }
    if (k == AUDIT_CA_KEY)
        HSMCA_ENSURE(is_hex(ent->ca_spki_sha256, 64, 64) &&
                         (!ent->ca_cert_sha256[0] || is_hex(ent->ca_cert_sha256, 64, 64)) &&
                         is_name(ent->ca_key_alg, 1) && is_name(ent->ca_key_type, 1) &&
                         is_name(ent->step, 1),
                     e, HSMCA_EINVAL, "audit entry: a ca-key step needs its step, key type and "
                     "SHA-256 (and the certificate's, or none)");
    if (k == AUDIT_SUPPRESSED)
        HSMCA_ENSURE((strcmp(ent->of, "deny") == 0 || strcmp(ent->of, "frontend-deny") == 0) &&
                         ent->count > 0 && ent->interval_s > 0,
                     e, HSMCA_EINVAL,
                     "audit entry: suppressed needs of deny or frontend-deny, a count and a "
                     "window");
    HSMCA_GUARD(check_ica(ent, e));
    HSMCA_ENSURE(ent->approval_required <= 16 && (!ent->has_uid || ent->uid <= UINT32_MAX), e,
                 HSMCA_EINVAL, "audit entry: approval_required must be 0..16, uid a uid");
    HSMCA_ENSURE(ent->seq <= INT64_MAX && ent->request_id <= INT64_MAX &&
                     ent->intent_seq <= INT64_MAX && ent->count <= INT64_MAX &&
                     ent->limit <= INT64_MAX && ent->interval_s <= INT64_MAX,
                 e, HSMCA_EINVAL, "audit entry: a number is out of range");
    return HSMCA_OK;
}

/* A key entry's audit_key_* fields, in key order. */
static void jw_audit_key(jw *w, const audit_entry *ent)
{
    jw_plain(w, "audit_key_alg", ent->audit_key_alg);
    jw_str(w, "audit_key_uri", &ent->audit_key_uri, AUDIT_STR_MAX);
    jw_plain(w, "audit_public_key", ent->audit_public_key);
}

/* A key entry's ca_* fields, in key order. */
static void jw_ca_key(jw *w, const audit_entry *ent)
{
    jw_plain(w, "ca_cert_sha256", ent->ca_cert_sha256);
    jw_plain(w, "ca_key_alg", ent->ca_key_alg);
    jw_plain(w, "ca_key_type", ent->ca_key_type);
    jw_str(w, "ca_key_uri", &ent->ca_key_uri, AUDIT_STR_MAX);
    jw_plain(w, "ca_spki_sha256", ent->ca_spki_sha256);
}

/* Which kind an entry is, as the two halves of its encoding ask it. */
typedef struct {
    audit_kind k;
    int intent, result, ok_result, deny, fdeny, key, supp;
    int ireq, iappr, ideny, icert, ifetch, iauto;
    int ban, lift;
} entry_kind;

static entry_kind entry_kind_of(const audit_entry *ent)
{
    audit_kind k = ent->kind;
    return (entry_kind){.k = k,
                        .intent = k == AUDIT_ISSUE_INTENT,
                        .result = k == AUDIT_ISSUE_RESULT,
                        .ok_result = k == AUDIT_ISSUE_RESULT && ent->cert_sha256[0],
                        .deny = k == AUDIT_DENY,
                        .fdeny = k == AUDIT_FRONTEND_DENY,
                        .key = k == AUDIT_KEY,
                        .supp = k == AUDIT_SUPPRESSED,
                        .ireq = k == AUDIT_ICA_REQUEST,
                        .iappr = k == AUDIT_ICA_APPROVE,
                        .ideny = k == AUDIT_ICA_DENY,
                        .icert = k == AUDIT_ICA_CERT,
                        .ifetch = k == AUDIT_ICA_FETCH,
                        .iauto = k == AUDIT_ICA_AUTO_APPROVE,
                        .ban = k == AUDIT_BAN,
                        .lift = k == AUDIT_BAN_LIFT};
}

/* The keys before "kind", in byte order. */
static void encode_head(jw *w, const audit_entry *ent, const entry_kind *f)
{
    if (f->k == AUDIT_CONFIG && ent->approval_required) /* absent in older logs */
        jw_u64(w, "approval_required", ent->approval_required);
    if (f->key)
        jw_audit_key(w, ent);
    /* An intent's authenticator is optional: logs from before the front end named it
     * have none (and an empty one is not written). */
    if (f->fdeny || (f->intent && ent->authenticator.len))
        jw_str(w, "authenticator", &ent->authenticator, AUDIT_NAME_STR_MAX);
    if (f->intent && ent->bound[0]) /* optional: a log from before identity binding has none */
        jw_plain(w, "bound", ent->bound);
    if (f->key || f->k == AUDIT_CA_KEY)
        jw_ca_key(w, ent);
    if (f->icert)
        jw_blob(w, "cert", &ent->cert);
    if (f->ok_result || f->icert)
        jw_plain(w, "cert_sha256", ent->cert_sha256);
    if ((f->intent && ent->cluster[0]) ||
        f->ireq) /* an intent's: bound by a remote cluster's keys */
        jw_plain(w, "cluster", ent->cluster);
    if ((f->result && !f->ok_result) || f->deny || f->fdeny)
        jw_plain(w, "code", ent->code);
    if (f->k == AUDIT_CONFIG)
        jw_plain(w, "config_sha256", ent->config_sha256);
    if (f->supp || f->k == AUDIT_CRL)
        jw_u64(w, "count", ent->count);
    if (f->k == AUDIT_CRL) {
        jw_u64(w, "crl_number", ent->crl_number);
        jw_plain(w, "crl_sha256", ent->crl_sha256);
    }
    if (f->ireq)
        jw_blob(w, "csr", &ent->csr);
    if (f->intent)
        jw_plain(w, "csr_sha256", ent->csr_sha256);
    if (f->result && !f->ok_result)
        jw_str(w, "error", &ent->error, AUDIT_STR_MAX);
    if (f->ireq || f->ban)
        jw_i64(w, "expires", ent->expires);
    if (f->ban || f->lift)
        jw_str(w, "identity", &ent->identity, AUDIT_STR_MAX);
    if (f->result)
        jw_u64(w, "intent_seq", ent->intent_seq);
    if (f->supp)
        jw_u64(w, "interval_s", ent->interval_s);
    if (f->ireq)
        jw_plain(w, "key_sha256", ent->key_sha256);
}

/* The keys after "kind", in byte order. */
static void encode_tail(jw *w, const audit_entry *ent, const entry_kind *f)
{
    if (f->supp)
        jw_u64(w, "limit", ent->limit);
    if (f->intent || f->k == AUDIT_CRL) {
        jw_i64(w, "not_after", ent->not_after);
        jw_i64(w, "not_before", ent->not_before);
    }
    if (f->supp)
        jw_plain(w, "of", ent->of);
    if (f->iauto && ent->origin[0]) /* absent from auto-approvals of older logs */
        jw_plain(w, "origin", ent->origin);
    if (f->k == AUDIT_CONFIG)
        jw_plain(w, "policy_sha256", ent->policy_sha256);
    if (f->intent || f->k == AUDIT_REVOKE || f->ban || f->lift)
        jw_plain(w, "profile", ent->profile);
    if (f->iauto && ent->proof.len) /* absent: the renewal has the renewed one's key */
        jw_blob(w, "proof", &ent->proof);
    if (f->deny || f->fdeny || f->k == AUDIT_RECOVERY || f->ideny || f->k == AUDIT_REVOKE ||
        f->ban)
        jw_str(w, "reason", &ent->reason, AUDIT_STR_MAX);
    if (f->iauto)
        jw_u64(w, "renews", ent->renews);
    if (f->ireq)
        jw_u64(w, "required", ent->required);
    if (f->intent || f->result || f->deny || f->fdeny || f->iappr || f->ideny || f->icert ||
        f->ifetch || f->iauto)
        jw_u64(w, "request_id", ent->request_id);
    if (f->intent || f->deny || f->fdeny || f->ireq || f->iappr || f->ideny || f->ifetch ||
        f->k == AUDIT_REVOKE || f->k == AUDIT_CA_KEY || f->iauto || f->ban || f->lift)
        jw_str(w, "requester", &ent->requester, AUDIT_STR_MAX);
    if (f->intent)
        jw_str(w, "sans", &ent->sans, AUDIT_SANS_MAX);
    jw_u64(w, "seq", ent->seq);
    if (f->intent || f->k == AUDIT_REVOKE)
        jw_plain(w, "serial", ent->serial);
    if (f->fdeny) /* the front end's word, never the signer's: an auditor weighs it so */
        jw_plain(w, "source", "frontend");
    if (f->k == AUDIT_CA_KEY)
        jw_plain(w, "step", ent->step);
    if (f->intent)
        jw_plain(w, "tbs_sha256", ent->tbs_sha256);
    jw_i64(w, "time", ent->time);
    if (f->ireq)
        jw_u64(w, "ttl_s", ent->ttl_s);
    if ((f->ireq || f->iappr || f->ideny) && ent->has_uid) /* absent in older logs */
        jw_u64(w, "uid", ent->uid);
}

hsmca_code audit_entry_encode(const audit_entry *ent, char *out, size_t *len, hsmca_err *e)
{
    const char *kname = audit_kind_name(ent->kind);
    HSMCA_ENSURE(kname, e, HSMCA_EINVAL, "audit entry: unknown kind %d", (int)ent->kind);
    HSMCA_GUARD(check_fixed(ent, e));
    /* Keys in byte order; the order below is that order. */
    jw w = {out, 0, AUDIT_LINE_MAX - 2, 1};
    jw_put(&w, "{", 1);
    entry_kind f = entry_kind_of(ent);
    encode_head(&w, ent, &f);
    jw_plain(&w, "kind", kname);
    encode_tail(&w, ent, &f);
    w.cap += 2;
    jw_put(&w, "}\n", 2);
    *len = w.len;
    return HSMCA_OK;
}

/* signer_audit.c - see signer_audit.h. */
#include "signer_audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "audit_entry.h"
#include "audit_ica.h"
#include "certasm.h"
#include "signer_casign.h"
#include "signer_ica_sign.h"
#include "ipc_contract.h"
#include "signer_ctx.h"
#include "util.h"

/* What the front end may send is logged whole: the signing log's caps (a format the
 * verifier reads, so not derived from the IPC's) hold every field at the IPC's cap. */
_Static_assert(AUDIT_STR_MAX >= IPC_REQUESTER_MAX && AUDIT_STR_MAX >= IPC_DENY_REASON_MAX,
               "requester and reason fit the log uncut");
_Static_assert(AUDIT_NAME_STR_MAX >= IPC_AUTHENTICATOR_MAX, "an authenticator fits the log uncut");
_Static_assert(AUDIT_CLUSTER_MAX >= IPC_CLUSTER_MAX, "a cluster id fits the log");

/* ---- config and key entries ---------------------------------------------------------- */

static int put_line(char *out, size_t cap, size_t *len, const char *key, const char *val)
{
    int n = snprintf(out + *len, cap - *len, "%s=%s\n", key, val);
    if (n < 0 || (size_t)n >= cap - *len)
        return 0;
    *len += (size_t)n;
    return 1;
}

size_t signer_policy_text(const signer_ctx *s, char *out, size_t cap)
{
    return signer_policy_text_of(s, &s->policy, out, cap);
}

size_t signer_policy_text_of(const signer_ctx *s, const tbs_policy *p, char *out, size_t cap)
{
    char num[24];
    size_t len = 0;
    int ok = put_line(out, cap, &len, "hsmca-signer-policy", "1") &&
             put_line(out, cap, &len, "ca_sig_alg", s->alg->name);
    snprintf(num, sizeof(num), "%u", p->max_ttl);
    ok = ok && put_line(out, cap, &len, "workload_max_ttl", num);
    snprintf(num, sizeof(num), "%u", p->serving_max_ttl);
    ok = ok && put_line(out, cap, &len, "serving_max_ttl", num);
    for (int i = 0; ok && i < p->n_trust_domains; i++)
        ok = put_line(out, cap, &len, "trust_domain", p->trust_domains[i]);
    for (int i = 0; ok && i < p->n_serving_dns; i++)
        ok = put_line(out, cap, &len, "serving_dns", p->serving_dns[i]);
    for (int i = 0; ok && i < p->n_serving_ips; i++)
        ok = put_line(out, cap, &len, "serving_ip", p->serving_ips[i]);
    if (ok && p->policy_file) { /* which rules were in force: the file's hash */
        char hex[65];
        util_hex(policy_set_sha256(p->policy_file), 32, hex);
        ok = put_line(out, cap, &len, "policy_file_sha256", hex);
    }
    snprintf(num, sizeof(num), "%u", s->cfg.rate_per_second);
    ok = ok && put_line(out, cap, &len, "rate_per_second", num);
    snprintf(num, sizeof(num), "%u", s->cfg.rate_burst);
    ok = ok && put_line(out, cap, &len, "rate_burst", num);
    return ok ? len : 0;
}

static HSMCA_MUSTCHECK hsmca_code append(signer_ctx *s, audit_entry *a, uint64_t *last,
                                         hsmca_err *e)
{
    return audit_log_append(s->audit, a, last, e);
}

static HSMCA_MUSTCHECK hsmca_code config_entry(signer_ctx *s, const tbs_policy *p, uint64_t *last,
                                               hsmca_err *e)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_CONFIG;
    util_hex(s->cfg.source_sha256, 32, a.config_sha256);
    /* Room for every line at its longest: a config string per name, a few fixed lines. */
    size_t cap = (CONFIG_MAX_STR + 32) * (3 * PROFILE_MAX_NAMES + 8);
    char *text = malloc(cap);
    HSMCA_ENSURE(text, e, HSMCA_ENOMEM, "out of memory");
    size_t n = signer_policy_text_of(s, p, text, cap);
    uint8_t h[SHA256_DIGEST_LENGTH];
    SHA256((const uint8_t *)text, n, h);
    free(text);
    HSMCA_ENSURE(n > 0, e, HSMCA_EINTERNAL, "audit: the policy text does not fit %zu bytes", cap);
    util_hex(h, sizeof(h), a.policy_sha256);
    /* The count in force, for the replay's rule on waiting requests (audit_ica.h). */
    a.approval_required = s->cfg.approval_required;
    HSMCA_GUARD(append(s, &a, last, e));
    signer_ica_follow(s->ca, &a);
    return HSMCA_OK;
}

/* A key URI as logged: without its query, where RFC 7512 puts pin-value, pin-source
 * and module attributes (never a secret in the log). */
static audit_str uri_public(const char *uri)
{
    const char *q = strchr(uri, '?');
    return (audit_str){uri, q ? (size_t)(q - uri) : strlen(uri), 0};
}

/* The SHA-256 of the DER of the CA's public key (spki) or certificate, in hex. */
static HSMCA_MUSTCHECK hsmca_code der_sha256(signer_ctx *s, int spki, char hex[65], hsmca_err *e)
{
    int ok = spki ? certasm_spki_sha256(X509_get0_pubkey(s->ca_cert), hex)
                  : certasm_cert_sha256(s->ca_cert, hex);
    HSMCA_ENSURE(ok, e, HSMCA_EINTERNAL, "audit: cannot encode the CA %s",
                 spki ? "key" : "certificate");
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code key_entry(signer_ctx *s, uint64_t *last, hsmca_err *e)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_KEY;
    snprintf(a.ca_key_alg, sizeof(a.ca_key_alg), "%s", s->alg->name);
    EVP_PKEY *pub = X509_get0_pubkey(s->ca_cert);
    HSMCA_ENSURE(pub, e, HSMCA_EINTERNAL, "audit: the CA certificate has no key");
    sigalg_key_type(pub, a.ca_key_type, sizeof(a.ca_key_type));
    HSMCA_GUARD(der_sha256(s, 1, a.ca_spki_sha256, e));
    HSMCA_GUARD(der_sha256(s, 0, a.ca_cert_sha256, e));
    a.ca_key_uri = uri_public(s->cfg.ca_key_uri);
    a.audit_key_uri = uri_public(s->cfg.audit_key_uri);
    if (s->audit_key) {
        snprintf(a.audit_key_alg, sizeof(a.audit_key_alg), "%s", p11_signkey_alg(s->audit_key));
        util_hex(p11_signkey_public_raw(s->audit_key), p11_signkey_public_len(s->audit_key),
                 a.audit_public_key);
    }
    return append(s, &a, last, e);
}

hsmca_code signer_audit_started(signer_ctx *s, uint64_t *last, hsmca_err *e)
{
    HSMCA_GUARD(config_entry(s, &s->policy, last, e));
    return key_entry(s, last, e);
}

hsmca_code signer_audit_policy(signer_ctx *s, const tbs_policy *p, hsmca_err *e)
{
    uint64_t seq;
    return s->audit ? config_entry(s, p, &seq, e) : HSMCA_OK;
}

hsmca_code signer_audit_close_open(signer_ctx *s, const audit_replay *replay, uint64_t *last,
                                   hsmca_err *e)
{
    size_t n = 0, it = 0;
    uint64_t intent_seq, request_id;
    while (audit_replay_open_next(replay, &it, &intent_seq, &request_id)) {
        char why[160];
        snprintf(why, sizeof(why),
                 "outcome unknown: the signer stopped before recording it (intent at seq %llu)",
                 (unsigned long long)intent_seq);
        audit_entry a;
        memset(&a, 0, sizeof(a));
        a.kind = AUDIT_ISSUE_RESULT;
        a.request_id = request_id;
        a.intent_seq = intent_seq;
        snprintf(a.code, sizeof(a.code), "UNKNOWN");
        a.error = (audit_str){why, strlen(why), 0};
        HSMCA_GUARD(append(s, &a, last, e));
        /* An intermediate's intent is closed in the state too: its request can be
         * signed again (fetch) or denied. */
        signer_ica_follow(s->ca, &a);
        n++;
    }
    if (n) {
        char nb[24];
        snprintf(nb, sizeof(nb), "%zu", n);
        LOG_EVENT(LOG_LVL_WARN, "intents without a result: recorded as outcome unknown",
                  LOG_STR("count", nb));
    }
    return HSMCA_OK;
}

/* ---- the replay at start ------------------------------------------------------------- */

hsmca_code signer_replay_init(signer_replay *r, signer_ctx *s, hsmca_err *e)
{
    memset(r, 0, sizeof(*r));
    r->serials = s->serials;
    r->now = util_wall_now();
    HSMCA_GUARD(der_sha256(s, 1, r->ca_spki_sha256, e));
    return audit_replay_new(&r->replay, e);
}

hsmca_code signer_replay_entry(void *ctx, const audit_entry *ent, uint64_t off, hsmca_err *e)
{
    signer_replay *r = ctx;
    return audit_replay_entry(r->replay, ent, off, e);
}

static void restore_one(void *ctx, const uint8_t *serial, size_t len, int64_t not_after)
{
    signer_replay *r = ctx;
    hsmca_err e;
    /* A serial of an intent before any key entry may also be under this key's: the set
     * keeps it once, with the later notAfter. */
    if (serial_set_restore(r->serials, serial, len, not_after, r->now, &e) == HSMCA_OK)
        r->restored++;
}

void signer_replay_restore(signer_replay *r)
{
    audit_replay_serials(r->replay, r->ca_spki_sha256, r->now, restore_one, r);
}

void signer_replay_free(signer_replay *r)
{
    audit_replay_free(r->replay);
    r->replay = NULL;
}

/* ---- refusals under a flood limit ------------------------------------------------------ */

/* Appends an entry nothing waits for (deny, frontend-deny, suppressed). A failed log
 * (HSMCA_EUNAVAIL) is not reported per entry: the log says so once (audit_log.c), and a
 * flood of refusals must not become a flood of lines. Any other failure is this entry's
 * own (malformed, out of memory) and is logged: the limiter bounds those lines. */
static void append_unwaited(signer_ctx *s, audit_entry *a)
{
    uint64_t seq;
    hsmca_err e;
    hsmca_code rc = audit_log_append(s->audit, a, &seq, &e);
    if (rc != HSMCA_OK && rc != HSMCA_EUNAVAIL)
        LOG_EVENT(LOG_LVL_ERROR, "audit: entry not written",
                  LOG_STR("kind", audit_kind_name(a->kind)), LOG_STR("error", e.msg));
}

static void summary(signer_ctx *s, const char *of, uint64_t count)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_SUPPRESSED;
    snprintf(a.of, sizeof(a.of), "%s", of);
    a.count = count;
    a.limit = SIGNER_DENY_ENTRIES_PER_S;
    a.interval_s = SIGNER_DENY_WINDOW_S;
    append_unwaited(s, &a);
}

/* 1 when the entry may be written (after the summary of a window just ended). */
static int allowed(signer_ctx *s, window_limiter *l, const char *of)
{
    uint64_t report;
    int ok = window_limiter_allow(l, util_mono_now(), &report);
    if (report)
        summary(s, of, report);
    return ok;
}

void signer_audit_deny(signer_ctx *s, uint64_t id, const char *requester, hsmca_code code,
                       const char *why)
{
    if (!s->audit || !allowed(s, s->deny_limit, "deny"))
        return;
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_DENY;
    a.request_id = id;
    a.requester = (audit_str){requester, strlen(requester), 0};
    snprintf(a.code, sizeof(a.code), "%s", hsmca_code_name(code));
    a.reason = (audit_str){why, strlen(why), 0};
    append_unwaited(s, &a);
}

void signer_audit_frontend_deny(signer_ctx *s, uint64_t id, const Hsmca__Ipc__FrontendDeny *d)
{
    if (!s->audit)
        return;
    if (d->suppressed)
        window_limiter_add_dropped(s->frontend_deny_limit, d->suppressed);
    if (!allowed(s, s->frontend_deny_limit, "frontend-deny"))
        return;
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_FRONTEND_DENY;
    a.request_id = id; /* at most IPC_ID_MAX, which the log holds (ipc_frame_decode) */
    a.requester = (audit_str){d->requester, strlen(d->requester), 0};
    a.authenticator = (audit_str){d->authenticator, strlen(d->authenticator), 0};
    snprintf(a.code, sizeof(a.code), "%s", hsmca_code_name((hsmca_code)d->code));
    a.reason = (audit_str){d->reason, strlen(d->reason), 0};
    append_unwaited(s, &a);
}

void signer_audit_flush_summaries(signer_ctx *s, double mono_now)
{
    if (!s->audit)
        return;
    uint64_t n = window_limiter_flush(s->deny_limit, mono_now);
    if (n)
        summary(s, "deny", n);
    n = window_limiter_flush(s->frontend_deny_limit, mono_now);
    if (n)
        summary(s, "frontend-deny", n);
}

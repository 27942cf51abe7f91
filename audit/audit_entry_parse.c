/* audit_entry_parse.c - audit_entry_parse (audit_entry.h): a line read strictly, then
 * re-encoded and compared, so a line has one spelling. */
#include "audit_entry.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "util.h"

/* Undoes the escaper's text forms in a decoded JSON string: "\\" is a backslash and
 * "\xNN" the byte NN; any other backslash cannot come from the escaper. */
static HSMCA_MUSTCHECK hsmca_code unescape(const char *key, json_t *v, char *out, size_t cap,
                                           size_t *n, hsmca_err *e)
{
    HSMCA_ENSURE(json_is_string(v), e, HSMCA_EINVAL, "audit line: %s must be a string", key);
    const char *s = json_string_value(v);
    size_t len = json_string_length(v), o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\') {
            if (i + 1 < len && s[i + 1] == '\\') {
                c = '\\';
                i += 1;
            } else if (i + 3 < len && s[i + 1] == 'x') {
                size_t one;
                HSMCA_ENSURE(util_unhex(s + i + 2, 2, &c, 1, &one), e, HSMCA_EINVAL,
                             "audit line: bad \\x in %s", key);
                i += 3;
            } else {
                return hsmca_fail(e, HSMCA_EINVAL, "audit line: stray backslash in %s", key);
            }
        }
        HSMCA_ENSURE(o < cap, e, HSMCA_EINVAL, "audit line: %s is longer than its cap", key);
        out[o++] = (char)c;
    }
    *n = o;
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code get_str(json_t *obj, const char *key, audit_str *s, char *buf,
                                          size_t cap, hsmca_err *e)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return HSMCA_OK;
    HSMCA_GUARD(unescape(key, v, buf, cap, &s->len, e));
    s->p = buf;
    char k[40];
    snprintf(k, sizeof(k), "%s_truncated", key);
    json_t *t = json_object_get(obj, k);
    if (t) {
        HSMCA_ENSURE(json_is_integer(t) && json_integer_value(t) > 0, e, HSMCA_EINVAL,
                     "audit line: %s must be a positive integer", k);
        s->full = (size_t)json_integer_value(t);
        /* The encoder cuts only at the cap, at most a 4-byte character short of it. */
        HSMCA_ENSURE(s->len + 4 > cap, e, HSMCA_EINVAL,
                     "audit line: %s is marked truncated but is shorter than its cap", key);
    }
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code get_plain(json_t *obj, const char *key, char *out, size_t size,
                                            hsmca_err *e)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return HSMCA_OK;
    HSMCA_ENSURE(json_is_string(v) && json_string_length(v) < size, e, HSMCA_EINVAL,
                 "audit line: %s must be a short string", key);
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code get_int(json_t *obj, const char *key, int64_t min, int64_t *out,
                                          hsmca_err *e)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return HSMCA_OK;
    HSMCA_ENSURE(json_is_integer(v) && json_integer_value(v) >= min, e, HSMCA_EINVAL,
                 "audit line: %s must be an integer >= %" PRId64, key, min);
    *out = (int64_t)json_integer_value(v);
    return HSMCA_OK;
}

/* A base64 field, copied as is (the encoder checks its characters). */
static HSMCA_MUSTCHECK hsmca_code get_blob(json_t *obj, const char *key, audit_str *s, char *buf,
                                           hsmca_err *e)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return HSMCA_OK;
    HSMCA_ENSURE(json_is_string(v) && json_string_length(v) <= AUDIT_BLOB_MAX, e, HSMCA_EINVAL,
                 "audit line: %s must be a string of at most %u characters", key, AUDIT_BLOB_MAX);
    memcpy(buf, json_string_value(v), json_string_length(v) + 1);
    s->p = buf;
    s->len = json_string_length(v);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code fields_ica(json_t *o, audit_entry *ent, audit_entry_buf *buf,
                                             hsmca_err *e)
{
    int64_t req = 0, ttl = 0;
    HSMCA_GUARD(get_int(o, "expires", INT64_MIN, &ent->expires, e));
    HSMCA_GUARD(get_int(o, "required", 0, &req, e));
    HSMCA_GUARD(get_int(o, "ttl_s", 0, &ttl, e));
    ent->required = (uint64_t)req;
    ent->ttl_s = (uint64_t)ttl;
    HSMCA_GUARD(get_blob(o, "csr", &ent->csr, buf->csr, e));
    HSMCA_GUARD(get_blob(o, "cert", &ent->cert, buf->cert, e));
    int64_t crl_number = 0;
    HSMCA_GUARD(get_int(o, "crl_number", 0, &crl_number, e));
    ent->crl_number = (uint64_t)crl_number;
    HSMCA_GUARD(get_plain(o, "crl_sha256", ent->crl_sha256, sizeof(ent->crl_sha256), e));
    int64_t renews = 0, uid = -1, areq = 0;
    HSMCA_GUARD(get_int(o, "uid", 0, &uid, e));
    HSMCA_GUARD(get_int(o, "approval_required", 0, &areq, e));
    ent->has_uid = uid >= 0;
    ent->uid = uid >= 0 ? (uint64_t)uid : 0;
    ent->approval_required = (uint64_t)areq;
    HSMCA_GUARD(get_int(o, "renews", 0, &renews, e));
    ent->renews = (uint64_t)renews;
    json_t *proof = json_object_get(o, "proof");
    HSMCA_ENSURE(!proof || (json_is_string(proof) && json_string_length(proof) <= AUDIT_RENEW_PROOF_MAX),
                 e, HSMCA_EINVAL, "audit line: proof must be a string of at most %u characters",
                 AUDIT_RENEW_PROOF_MAX);
    if (proof) {
        memcpy(buf->proof, json_string_value(proof), json_string_length(proof) + 1);
        ent->proof = (audit_str){buf->proof, json_string_length(proof), 0};
    }
    return get_plain(o, "key_sha256", ent->key_sha256, sizeof(ent->key_sha256), e);
}

static HSMCA_MUSTCHECK hsmca_code fields(json_t *o, audit_entry *ent, audit_entry_buf *buf,
                                         hsmca_err *e)
{
    json_t *k = json_object_get(o, "kind");
    HSMCA_ENSURE(json_is_string(k), e, HSMCA_EINVAL, "audit line: no kind");
    for (int i = AUDIT_START; i <= AUDIT_KIND_LAST; i++)
        if (strcmp(json_string_value(k), audit_kind_name((audit_kind)i)) == 0)
            ent->kind = (audit_kind)i;
    HSMCA_ENSURE(ent->kind, e, HSMCA_EINVAL, "audit line: unknown kind");
    int64_t seq = -1, rid = 0, iseq = 0, count = 0, limit = 0, interval = 0;
    HSMCA_GUARD(get_int(o, "seq", 0, &seq, e));
    HSMCA_ENSURE(seq >= 0, e, HSMCA_EINVAL, "audit line: no seq");
    HSMCA_GUARD(get_int(o, "time", INT64_MIN, &ent->time, e));
    HSMCA_GUARD(get_int(o, "request_id", 0, &rid, e));
    HSMCA_GUARD(get_int(o, "intent_seq", 0, &iseq, e));
    HSMCA_GUARD(get_int(o, "not_before", INT64_MIN, &ent->not_before, e));
    HSMCA_GUARD(get_int(o, "not_after", INT64_MIN, &ent->not_after, e));
    HSMCA_GUARD(get_int(o, "count", 0, &count, e));
    HSMCA_GUARD(get_int(o, "limit", 0, &limit, e));
    HSMCA_GUARD(get_int(o, "interval_s", 0, &interval, e));
    HSMCA_GUARD(fields_ica(o, ent, buf, e));
    ent->count = (uint64_t)count;
    ent->limit = (uint64_t)limit;
    ent->interval_s = (uint64_t)interval;
    ent->seq = (uint64_t)seq;
    ent->request_id = (uint64_t)rid;
    ent->intent_seq = (uint64_t)iseq;
    HSMCA_GUARD(get_plain(o, "csr_sha256", ent->csr_sha256, sizeof(ent->csr_sha256), e));
    HSMCA_GUARD(get_plain(o, "tbs_sha256", ent->tbs_sha256, sizeof(ent->tbs_sha256), e));
    HSMCA_GUARD(get_plain(o, "cert_sha256", ent->cert_sha256, sizeof(ent->cert_sha256), e));
    HSMCA_GUARD(get_plain(o, "serial", ent->serial, sizeof(ent->serial), e));
    HSMCA_GUARD(get_plain(o, "profile", ent->profile, sizeof(ent->profile), e));
    HSMCA_GUARD(get_plain(o, "code", ent->code, sizeof(ent->code), e));
    HSMCA_GUARD(get_plain(o, "bound", ent->bound, sizeof(ent->bound), e));
    HSMCA_GUARD(get_plain(o, "cluster", ent->cluster, sizeof(ent->cluster), e));
    HSMCA_GUARD(get_plain(o, "config_sha256", ent->config_sha256, sizeof(ent->config_sha256), e));
    HSMCA_GUARD(get_plain(o, "policy_sha256", ent->policy_sha256, sizeof(ent->policy_sha256), e));
    HSMCA_GUARD(get_plain(o, "ca_key_alg", ent->ca_key_alg, sizeof(ent->ca_key_alg), e));
    HSMCA_GUARD(get_plain(o, "ca_key_type", ent->ca_key_type, sizeof(ent->ca_key_type), e));
    HSMCA_GUARD(
        get_plain(o, "ca_spki_sha256", ent->ca_spki_sha256, sizeof(ent->ca_spki_sha256), e));
    HSMCA_GUARD(
        get_plain(o, "ca_cert_sha256", ent->ca_cert_sha256, sizeof(ent->ca_cert_sha256), e));
    HSMCA_GUARD(get_plain(o, "audit_key_alg", ent->audit_key_alg, sizeof(ent->audit_key_alg), e));
    HSMCA_GUARD(
        get_plain(o, "audit_public_key", ent->audit_public_key, sizeof(ent->audit_public_key), e));
    HSMCA_GUARD(get_plain(o, "of", ent->of, sizeof(ent->of), e));
    HSMCA_GUARD(get_plain(o, "origin", ent->origin, sizeof(ent->origin), e));
    HSMCA_GUARD(get_plain(o, "step", ent->step, sizeof(ent->step), e));
    HSMCA_GUARD(get_str(o, "ca_key_uri", &ent->ca_key_uri, buf->ca_key_uri, AUDIT_STR_MAX, e));
    HSMCA_GUARD(
        get_str(o, "audit_key_uri", &ent->audit_key_uri, buf->audit_key_uri, AUDIT_STR_MAX, e));
    HSMCA_GUARD(get_str(o, "authenticator", &ent->authenticator, buf->authenticator,
                        AUDIT_NAME_STR_MAX, e));
    HSMCA_GUARD(get_str(o, "requester", &ent->requester, buf->requester, AUDIT_STR_MAX, e));
    HSMCA_GUARD(get_str(o, "reason", &ent->reason, buf->reason, AUDIT_STR_MAX, e));
    HSMCA_GUARD(get_str(o, "error", &ent->error, buf->error, AUDIT_STR_MAX, e));
    HSMCA_GUARD(get_str(o, "identity", &ent->identity, buf->identity, AUDIT_STR_MAX, e));
    return get_str(o, "sans", &ent->sans, buf->sans, AUDIT_SANS_MAX, e);
}

hsmca_code audit_entry_parse(const char *line, size_t len, audit_entry *ent, audit_entry_buf *buf,
                             hsmca_err *e)
{
    memset(ent, 0, sizeof(*ent));
    HSMCA_ENSURE(len > 0 && len < AUDIT_LINE_MAX, e, HSMCA_EINVAL,
                 "audit line: empty or longer than %u bytes", AUDIT_LINE_MAX - 1);
    HSMCA_ENSURE(memchr(line, '\n', len) == NULL, e, HSMCA_EINVAL, "audit line: embedded newline");
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    HSMCA_ENSURE(o, e, HSMCA_EINVAL, "audit line: not JSON: %s", je.text);
    hsmca_code rc = json_is_object(o) ? fields(o, ent, buf, e)
                                      : hsmca_fail(e, HSMCA_EINVAL, "audit line: not an object");
    json_decref(o);
    if (rc != HSMCA_OK)
        return rc;
    /* Canonical: the line is exactly what the encoder writes for what we read (this also
     * refuses unknown or misplaced keys, whitespace, other escapes, floats, key order). */
    static _Thread_local char again[AUDIT_LINE_MAX];
    size_t n;
    HSMCA_GUARD(audit_entry_encode(ent, again, &n, e));
    HSMCA_ENSURE(n == len + 1 && memcmp(again, line, len) == 0, e, HSMCA_EINVAL,
                 "audit line: not in canonical form");
    return HSMCA_OK;
}

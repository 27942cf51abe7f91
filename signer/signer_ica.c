/* signer_ica.c - see signer_ica.h: the admin ops on intermediate requests. */
#include "signer_ica.h"
#include "audit_ica_renew.h"
#include "signer_ica_sign.h"
#include "signer_casign.h"
#include "signer_caops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "admin_contract.h"
#include "certasm.h"
#include "config.h"
#include "log.h"
#include "util.h"

hsmca_code signer_ica_load(signer_caops *ca, hsmca_err *e)
{
    size_t len;
    BIO *b = BIO_new(BIO_s_mem());
    HSMCA_ENSURE(b && PEM_write_bio_X509(b, ca->ca_cert), e, HSMCA_ENOMEM, "out of memory");
    ca->ica_ca_pem = certasm_bio_string(b);
    BIO_free(b);
    HSMCA_ENSURE(ca->ica_ca_pem, e, HSMCA_ENOMEM, "out of memory");
    /* A renewal proof names the log's origin: the checkpoints' one, also without them. */
    if (!ca->cfg->audit_origin[0])
        config_default_origin(ca->cfg->trust_domain, ca->cfg->audit_origin,
                              sizeof(ca->cfg->audit_origin));
    if (ca->cfg->chain[0])
        HSMCA_GUARD(util_read_file(ca->cfg->chain, 1 << 20, &ca->ica_chain_pem, &len, e));
    return util_read_file(ca->cfg->root_bundle, 1 << 20, &ca->ica_roots_pem, &len, e);
}

/* Intermediates need the log: their state lives in it. */
static HSMCA_MUSTCHECK hsmca_code need_log(signer_caops *ca, hsmca_err *e)
{
    HSMCA_ENSURE(ca->ica && ca->audit, e, HSMCA_EUNAVAIL,
                 "intermediate requests need the audit log (audit.dir): their approvals are "
                 "its entries");
    return HSMCA_OK;
}

size_t signer_ica_pending(signer_caops *ca)
{
    size_t n = 0;
    int64_t now = time(NULL);
    for (size_t i = 0; i < audit_ica_count(ca->ica); i++)
        n += audit_ica_state_of(audit_ica_at(ca->ica, i), now) == ICA_PENDING;
    return n;
}

/* The request's id ("id", a positive integer) and its entry, or NULL with e. */
static const audit_ica_req *req_of(signer_caops *ca, json_t *req, hsmca_err *e)
{
    json_t *id = json_object_get(req, "id");
    if (need_log(ca, e) != HSMCA_OK)
        return NULL;
    if (!json_is_integer(id) || json_integer_value(id) < 0) {
        hsmca_fail(e, HSMCA_EINVAL, "id must be a request id (hsmca intermediate list)");
        return NULL;
    }
    const audit_ica_req *r = audit_ica_find(ca->ica, (uint64_t)json_integer_value(id));
    if (!r)
        hsmca_fail(e, HSMCA_ENOTFOUND, "intermediate request %lld does not exist",
                   (long long)json_integer_value(id));
    return r;
}

static json_t *req_json(const audit_ica_req *r)
{
    json_t *approvers = json_array();
    for (unsigned i = 0; approvers && i < r->n_approvers; i++)
        json_array_append_new(approvers, json_string(r->approvers[i]));
    return json_pack("{s:I, s:s, s:s, s:s, s:o, s:I, s:s, s:I, s:I, s:I, s:s, s:s, s:s}", "id",
                     (json_int_t)r->id, "state",
                     audit_ica_state_name(audit_ica_state_of(r, time(NULL))), "cluster",
                     r->cluster, "requester", r->requester, "approvers", approvers, "required",
                     (json_int_t)r->required, "key_sha256", r->key_sha256, "requested",
                     (json_int_t)r->time, "expires", (json_int_t)r->expires, "ttl_s",
                     (json_int_t)r->ttl_s, "denied_by", r->denied_by, "reason", r->reason,
                     "cert_sha256", r->cert_b64 ? r->cert_sha256 : "");
}

json_t *signer_ica_list(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    if (need_log(ca, e) != HSMCA_OK)
        return NULL;
    /* Newest first, as many as fit one reply. */
    json_t *list = json_array();
    size_t total = audit_ica_count(ca->ica), bytes = 0;
    for (size_t i = total; list && i > 0 && bytes < ADMIN_MAX_MSG - 8192; i--) {
        json_t *one = req_json(audit_ica_at(ca->ica, i - 1));
        char *text = one ? json_dumps(one, JSON_COMPACT) : NULL;
        bytes += text ? strlen(text) + 1 : 0;
        free(text);
        if (bytes < ADMIN_MAX_MSG - 8192)
            json_array_append(list, one);
        json_decref(one);
    }
    return json_pack("{s:b, s:o, s:I}", "ok", 1, "requests", list, "total", (json_int_t)total);
}

json_t *signer_ica_show(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    const audit_ica_req *r = req_of(ca, req, e);
    if (!r)
        return NULL;
    json_t *profile = r->csr_b64 ? signer_ica_profile(ca, r, e)
                                 : json_string("none: the request is denied or expired, its "
                                               "CSR is no longer kept");
    if (!profile)
        return NULL;
    return json_pack("{s:b, s:o, s:o}", "ok", 1, "request", req_json(r), "profile", profile);
}

/* The CSR of a request: PEM, proof of possession, key type; its DER in base64 and the
 * SHA-256 of its SubjectPublicKeyInfo into ent (b64 has AUDIT_BLOB_MAX + 1 bytes). */
static HSMCA_MUSTCHECK hsmca_code take_csr(const char *pem, audit_entry *ent, char *b64,
                                           hsmca_err *e)
{
    HSMCA_ENSURE(pem && strlen(pem) <= ADMIN_MAX_CSR, e, HSMCA_EINVAL,
                 "csr must be a PEM certificate request of at most %d bytes", ADMIN_MAX_CSR);
    BIO *b = BIO_new_mem_buf(pem, (int)strlen(pem));
    X509_REQ *csr = b ? PEM_read_bio_X509_REQ(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    HSMCA_ENSURE(csr, e, HSMCA_EINVAL, "csr: not a PEM certificate request");
    EVP_PKEY *key = X509_REQ_get0_pubkey(csr);
    const char *why = key ? signer_ica_key_problem(key) : "no public key";
    hsmca_code rc = HSMCA_OK;
    unsigned char *der = NULL;
    int n = 0;
    if (why[0])
        rc = hsmca_fail(e, HSMCA_EINVAL, "csr: %s", why);
    else if (X509_REQ_verify(csr, key) != 1)
        rc = hsmca_fail(e, HSMCA_EINVAL,
                        "csr: its signature does not verify with its own key (no proof of "
                        "possession)");
    else if ((n = i2d_X509_REQ(csr, &der)) <= 0 || !certasm_spki_sha256(key, ent->key_sha256) ||
             (size_t)n > AUDIT_BLOB_MAX / 4 * 3)
        rc = hsmca_fail(e, HSMCA_EINVAL, "csr: cannot be encoded, or too large");
    if (rc == HSMCA_OK) {
        ent->csr.len = util_b64_encode_to(der, (size_t)n, b64, AUDIT_BLOB_MAX + 1);
        ent->csr.p = b64;
    }
    OPENSSL_free(der);
    X509_REQ_free(csr);
    return rc;
}

/* The reply to a request: its id, key, state; an auto-approved renewal's once signed (an
 * op run again after the signature, signer_ica_sign.h: "renewal_id" names it). */
static json_t *request_reply(signer_caops *ca, uint64_t id, const char *sign_error)
{
    const audit_ica_req *r = audit_ica_find(ca->ica, id);
    return json_pack("{s:b, s:I, s:s, s:I, s:I, s:s, s:I, s:s, s:s, s:s}", "ok", 1, "id",
                     (json_int_t)id, "key_sha256", r->key_sha256, "required",
                     (json_int_t)r->required, "expires", (json_int_t)r->expires, "state",
                     audit_ica_state_name(audit_ica_state_of(r, time(NULL))), "renews",
                     (json_int_t)r->auto_renews, "sign_error", sign_error, "origin",
                     ca->cfg->audit_origin, "cluster", r->cluster);
}

static json_t *renewal_signed(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    json_t *id = json_object_get(req, "renewal_id");
    if (!json_is_integer(id) || !audit_ica_find(ca->ica, (uint64_t)json_integer_value(id))) {
        hsmca_fail(e, HSMCA_EINTERNAL, "renewal: no request");
        return NULL;
    }
    return request_reply(ca, (uint64_t)json_integer_value(id), "");
}

/* Room for one more waiting request of user (the caller, ca->admin_uid): at most
 * approval.max_pending_per_user of its own and approval.max_pending in all. */
static HSMCA_MUSTCHECK hsmca_code room_for(signer_caops *ca, const char *user, hsmca_err *e)
{
    size_t all;
    size_t mine = audit_ica_waiting(ca->ica, user, ca->admin_uid, (int64_t)time(NULL), &all);
    HSMCA_ENSURE(mine < ca->cfg->approval_max_pending_per_user, e, HSMCA_EUNAVAIL,
                 "%s has %zu intermediate requests waiting (approval.max_pending_per_user is "
                 "%u): refused until one is signed, denied or expires (approval.pending_ttl)",
                 user, mine, ca->cfg->approval_max_pending_per_user);
    HSMCA_ENSURE(all < ca->cfg->approval_max_pending, e, HSMCA_EUNAVAIL,
                 "%zu intermediate requests are waiting (approval.max_pending is %u): refused "
                 "until one is signed, denied or expires (approval.pending_ttl)",
                 all, ca->cfg->approval_max_pending);
    return HSMCA_OK;
}

json_t *signer_ica_request(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    static char b64[AUDIT_BLOB_MAX + 1];
    const char *cluster = json_string_value(json_object_get(req, "cluster"));
    json_t *ttl = json_object_get(req, "ttl_s");
    audit_entry ent = {.kind = AUDIT_ICA_REQUEST};
    if (need_log(ca, e) != HSMCA_OK)
        return NULL;
    if (!cluster || !config_cluster_id_ok(cluster, strlen(cluster))) {
        hsmca_fail(e, HSMCA_EINVAL, "cluster must be 1-63 characters of [A-Za-z0-9._-]");
        return NULL;
    }
    if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) < 0 ||
                json_integer_value(ttl) > ca->cfg->ica_max_ttl)) {
        hsmca_fail(e, HSMCA_EINVAL, "ttl: at most intermediate.max_ttl (%us)",
                   ca->cfg->ica_max_ttl);
        return NULL;
    }
    if (signer_ca_open(ca, e) != HSMCA_OK || room_for(ca, user, e) != HSMCA_OK)
        return NULL;
    if (take_csr(json_string_value(json_object_get(req, "csr")), &ent, b64, e) != HSMCA_OK)
        return NULL;
    snprintf(ent.cluster, sizeof(ent.cluster), "%s", cluster);
    ent.requester = (audit_str){user, strlen(user), 0};
    ent.has_uid = ca->admin_uid >= 0;
    ent.uid = (uint64_t)ca->admin_uid;
    ent.required = ca->cfg->approval_required;
    ent.expires = (int64_t)time(NULL) + ca->cfg->approval_pending_ttl;
    ent.ttl_s = ttl ? (uint64_t)json_integer_value(ttl) : 0;
    if (signer_ica_log(ca, &ent, e) != HSMCA_OK)
        return NULL;
    LOG_EVENT(LOG_LVL_INFO, "intermediate requested", LOG_STR("user", user),
              LOG_STR("cluster", cluster), LOG_STR("key_sha256", ent.key_sha256));
    /* A renewal's proof names this request: it comes next (ica-renew-proof). */
    json_t *r = request_reply(ca, ent.seq, "");
    if (!r)
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    return r;
}

/* The proof of ica-renew-proof ("proof", base64) decoded into *proof (caller frees). */
static HSMCA_MUSTCHECK hsmca_code take_proof(json_t *req, const char **b64, uint8_t **proof,
                                             size_t *plen, hsmca_err *e)
{
    const char *t = json_string_value(json_object_get(req, "proof"));
    size_t n = t ? strlen(t) : 0;
    *b64 = t;
    *proof = n && n <= AUDIT_RENEW_PROOF_MAX ? util_b64_decode(t, n, plen) : NULL;
    HSMCA_ENSURE(*proof, e, HSMCA_EINVAL,
                 "proof must be base64 of a signature, at most %u characters",
                 AUDIT_RENEW_PROOF_MAX);
    return HSMCA_OK;
}

json_t *signer_ica_renew_proof(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    const audit_ica_req *r = req_of(ca, req, e);
    const char *b64;
    uint8_t *proof;
    size_t plen;
    uint64_t renews = 0;
    if (!r)
        return NULL;
    uint64_t id = r->id;
    if (!ca->cfg->approval_auto_renew) {
        hsmca_fail(e, HSMCA_EPERM,
                   "approval.auto_renew is off: intermediate request %llu waits for approvals",
                   (unsigned long long)id);
        return NULL;
    }
    if (signer_ca_open(ca, e) != HSMCA_OK || take_proof(req, &b64, &proof, &plen, e) != HSMCA_OK)
        return NULL;
    /* Two seconds' margin, as for an approval: the entry's own time is what is checked. */
    hsmca_code rc = audit_ica_may_renew(ca->ica, id, ca->cfg->audit_origin, proof, plen,
                                        (int64_t)time(NULL) + 2, &renews, e);
    free(proof);
    if (rc != HSMCA_OK)
        return NULL;
    audit_entry ent = {.kind = AUDIT_ICA_AUTO_APPROVE, .request_id = id, .renews = renews};
    ent.requester = (audit_str){user, strlen(user), 0};
    ent.proof = (audit_str){b64, strlen(b64), 0};
    size_t olen = strlen(ca->cfg->audit_origin);
    if (olen > AUDIT_ORIGIN_MAX) {
        hsmca_fail(e, HSMCA_EINVAL, "audit.origin is longer than %u bytes", AUDIT_ORIGIN_MAX);
        return NULL;
    }
    memcpy(ent.origin, ca->cfg->audit_origin, olen + 1);
    if (signer_ica_log(ca, &ent, e) != HSMCA_OK)
        return NULL;
    r = audit_ica_find(ca->ica, id);
    LOG_EVENT(LOG_LVL_INFO, "intermediate auto-approved", LOG_STR("user", user),
              LOG_STR("cluster", r->cluster), LOG_STR("basis", "proof of possession"));
    hsmca_err why;
    hsmca_err_clear(&why);
    if (json_object_set_new(req, "renewal_id", json_integer((json_int_t)id)) == 0 &&
        signer_ica_issue(ca, r, user, req, renewal_signed, &why) == HSMCA_OK)
        return SIGNER_REPLY_LATER;
    return request_reply(ca, id, why.msg);
}

json_t *signer_ica_approve(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    const audit_ica_req *r = req_of(ca, req, e);
    /* Two seconds' margin: the entry's own time, set as it is written, stays before
     * expires (what the verifier checks). */
    if (!r || signer_ca_open(ca, e) != HSMCA_OK ||
        audit_ica_may_approve(ca->ica, r->id, user, ca->admin_uid, (int64_t)time(NULL) + 2, e) !=
            HSMCA_OK)
        return NULL;
    uint64_t id = r->id;
    audit_entry ent = {.kind = AUDIT_ICA_APPROVE, .request_id = id};
    ent.requester = (audit_str){user, strlen(user), 0};
    ent.has_uid = ca->admin_uid >= 0;
    ent.uid = (uint64_t)ca->admin_uid;
    if (signer_ica_log(ca, &ent, e) != HSMCA_OK)
        return NULL;
    r = audit_ica_find(ca->ica, id);
    LOG_EVENT(LOG_LVL_INFO, "intermediate approved", LOG_STR("user", user),
              LOG_STR("cluster", r->cluster));
    hsmca_err why;
    hsmca_err_clear(&why);
    if (audit_ica_state_of(r, time(NULL)) == ICA_APPROVED) {
        if (signer_ica_issue(ca, r, user, req, NULL, &why) == HSMCA_OK)
            return SIGNER_REPLY_LATER; /* once signed, or not (signer_casign.h) */
        LOG_EVENT(LOG_LVL_WARN, "intermediate not signed (fetch tries again)",
                  LOG_STR("cluster", r->cluster), LOG_STR("reason", why.msg));
    }
    r = audit_ica_find(ca->ica, id);
    return json_pack("{s:b, s:I, s:I, s:I, s:s, s:s}", "ok", 1, "id", (json_int_t)id, "approvals",
                     (json_int_t)r->n_approvers, "required", (json_int_t)r->required, "state",
                     audit_ica_state_name(audit_ica_state_of(r, time(NULL))), "sign_error",
                     why.msg);
}

json_t *signer_ica_deny(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    const audit_ica_req *r = req_of(ca, req, e);
    const char *reason = json_string_value(json_object_get(req, "reason"));
    if (!r)
        return NULL;
    if (!reason || !reason[0] || strlen(reason) > ADMIN_MAX_REASON) {
        hsmca_fail(e, HSMCA_EINVAL, "a denial needs a reason (--reason, at most %d bytes)",
                   ADMIN_MAX_REASON);
        return NULL;
    }
    if (signer_ca_open(ca, e) != HSMCA_OK || audit_ica_may_deny(ca->ica, r->id, e) != HSMCA_OK)
        return NULL;
    audit_entry ent = {.kind = AUDIT_ICA_DENY, .request_id = r->id};
    ent.requester = (audit_str){user, strlen(user), 0};
    ent.has_uid = ca->admin_uid >= 0;
    ent.uid = (uint64_t)ca->admin_uid;
    ent.reason = (audit_str){reason, strlen(reason), 0};
    if (signer_ica_log(ca, &ent, e) != HSMCA_OK)
        return NULL;
    LOG_EVENT(LOG_LVL_INFO, "intermediate denied", LOG_STR("user", user),
              LOG_STR("cluster", r->cluster));
    return json_pack("{s:b, s:I, s:s}", "ok", 1, "id", (json_int_t)ent.request_id, "state",
                     "denied");
}

/* cert-chain.pem: the intermediate, then up to the root (the CA certificate, ca.chain, and
 * the roots when the CA certificate is not one itself). */
static char *chain_text(signer_caops *ca, const char *ica_pem)
{
    int self = X509_check_issued(ca->ca_cert, ca->ca_cert) == X509_V_OK;
    const char *parts[] = {ica_pem, ca->ica_ca_pem, ca->ica_chain_pem ? ca->ica_chain_pem : "",
                           self ? "" : ca->ica_roots_pem};
    size_t n = 1;
    for (size_t i = 0; i < 4; i++)
        n += strlen(parts[i]) + 1;
    char *out = malloc(n), *p = out;
    for (size_t i = 0; out && i < 4; i++) {
        size_t l = strlen(parts[i]);
        memcpy(p, parts[i], l);
        p += l;
        if (l && p[-1] != '\n')
            *p++ = '\n';
    }
    if (out)
        *p = '\0';
    return out;
}

json_t *signer_ica_fetch(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    const audit_ica_req *r = req_of(ca, req, e);
    if (!r)
        return NULL;
    uint64_t id = r->id;
    audit_ica_state st = audit_ica_state_of(r, time(NULL));
    if (signer_ca_open(ca, e) != HSMCA_OK)
        return NULL;
    /* Signed once approved; a token fault then is retried here. The signature is the CA
     * signing thread's: the reply waits for it (signer_casign.h). */
    if (st == ICA_APPROVED)
        return signer_ica_issue(ca, r, user, req, signer_ica_fetch, e) == HSMCA_OK
                   ? SIGNER_REPLY_LATER
                   : NULL;
    r = audit_ica_find(ca->ica, id);
    if (!r->cert_b64) {
        hsmca_fail(e, HSMCA_EPERM, "intermediate request %llu is %s, not signed",
                   (unsigned long long)id, audit_ica_state_name(st));
        return NULL;
    }
    /* Who took the files, on the record before they are handed out. */
    audit_entry fe = {.kind = AUDIT_ICA_FETCH, .request_id = id};
    fe.requester = (audit_str){user, strlen(user), 0};
    if (signer_ica_log(ca, &fe, e) != HSMCA_OK)
        return NULL;
    r = audit_ica_find(ca->ica, id);
    size_t n;
    uint8_t *der = util_b64_decode(r->cert_b64, strlen(r->cert_b64), &n);
    char *pem = der ? certasm_der_to_pem(der, n) : NULL;
    char *chain = pem ? chain_text(ca, pem) : NULL;
    json_t *out = chain ? json_pack("{s:b, s:I, s:s, s:s, s:s, s:s}", "ok", 1, "id",
                                    (json_int_t)id, "ca_cert", pem, "cert_chain", chain,
                                    "root_cert", ca->ica_roots_pem, "cluster", r->cluster)
                        : NULL;
    free(der);
    free(pem);
    free(chain);
    if (!out)
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    return out;
}

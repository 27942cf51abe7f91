/* signer_ica_sign.c - the CA profile of an istiod intermediate and its signature (see
 * signer_ica_sign.h). The signer builds every field itself: of the CSR only the public key
 * (checked, with the CSR's signature) goes in; the subject is intermediate.subject_prefix
 * and the cluster name; CA:TRUE with pathLenConstraint 0, keyUsage keyCertSign, cRLSign and
 * digitalSignature, and name constraints (add_name_constraints: the SPIFFE URIs of the
 * trust domain and its policy aliases, istiod's DNS names and intermediate.dns_suffixes,
 * no IP address or e-mail name unless configured), all critical; SKI and AKI; a validity
 * of at most intermediate.max_ttl from a notBefore a few minutes back, never past the CA
 * certificate's. */
#include "signer_ica_sign.h"
#include "signer_casign.h"
#include "signer_caops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "certasm.h"
#include "ipc_contract.h"
#include "log.h"
#include "profile.h"
#include "util.h"

#define ICA_SERIAL_LEN 16
#define ICA_KEY_USAGE "critical,digitalSignature,keyCertSign,cRLSign"

/* audit_check_fn: the intermediate rules on the entry as it will be written. */
static hsmca_code ica_rule(void *ctx, const audit_entry *ent, hsmca_err *e)
{
    const signer_caops *ca = ctx;
    return audit_ica_check(ca->ica, ent, e);
}

void signer_ica_follow(signer_caops *ca, const audit_entry *ent)
{
    hsmca_err why;
    if (ca->ica && audit_ica_apply(ca->ica, ent, 0, &why) != HSMCA_OK)
        signer_ca_close(ca, ent->seq, why.msg);
}

hsmca_code signer_ica_log(signer_caops *ca, audit_entry *ent, hsmca_err *e)
{
    uint64_t seq;
    /* Checked against the rules before it is written: a line they refuse never is. */
    HSMCA_GUARD(audit_log_append_checked(ca->audit, ent, ica_rule, ca, &seq, e));
    /* Written: the state follows the log at once, durable or not yet (a failed sync leaves
     * the line to be written when the log recovers). Only memory can fail here, and then
     * the state no longer matches the log: the CA profile closes. */
    hsmca_err why;
    hsmca_err_clear(&why);
    if (audit_ica_apply(ca->ica, ent, 0, &why) != HSMCA_OK)
        signer_ca_close(ca, seq, why.msg);
    return audit_log_sync_through(ca->audit, seq, e);
}

const char *signer_ica_key_problem(EVP_PKEY *key)
{
    if (EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA) {
        int bits = EVP_PKEY_get_bits(key);
        return bits >= 2048 && bits <= 8192 ? "" : "an RSA key must have 2048 to 8192 bits";
    }
    if (EVP_PKEY_get_base_id(key) == EVP_PKEY_EC) {
        char curve[32] = "";
        size_t n;
        EVP_PKEY_get_utf8_string_param(key, "group", curve, sizeof(curve), &n);
        return strcmp(curve, "prime256v1") == 0 || strcmp(curve, "secp384r1") == 0
                   ? ""
                   : "an EC key must be on P-256 or P-384";
    }
    return "the key must be RSA (2048 bits or more) or EC P-256/P-384";
}

/* Validity and subject of r as it would be signed at now. */
typedef struct {
    int64_t not_before, not_after;
    uint64_t ttl;
    char subject[CONFIG_MAX_STR + 80];
} ica_facts;

static HSMCA_MUSTCHECK hsmca_code facts_of(signer_caops *ca, const audit_ica_req *r, int64_t now,
                                           ica_facts *f, hsmca_err *e)
{
    struct tm tm;
    HSMCA_ENSURE(ASN1_TIME_to_tm(X509_get0_notAfter(ca->ca_cert), &tm) == 1, e, HSMCA_EINTERNAL,
                 "the CA certificate's notAfter cannot be read");
    int64_t ca_end = (int64_t)timegm(&tm);
    f->ttl = r->ttl_s && r->ttl_s < ca->cfg->ica_max_ttl ? r->ttl_s : ca->cfg->ica_max_ttl;
    /* Backdated, so an istiod whose clock lags the signer's accepts it at once; the
     * backdate is inside the TTL, as a workload certificate's is. */
    f->not_before = now - PROFILE_ICA_BACKDATE_S;
    f->not_after = f->not_before + (int64_t)f->ttl < ca_end ? f->not_before + (int64_t)f->ttl
                                                             : ca_end;
    HSMCA_ENSURE(f->not_after > now + 3600, e, HSMCA_EPERM,
                 "the CA certificate expires within the hour: nothing to sign under it");
    snprintf(f->subject, sizeof(f->subject), "%s%sCN=%s", ca->cfg->ica_subject_prefix,
             ca->cfg->ica_subject_prefix[0] ? "," : "", r->cluster);
    return HSMCA_OK;
}

/* The subject: each ATTR=value of the prefix (checked by config_validate), then CN. */
static X509_NAME *subject_of(const char *text)
{
    X509_NAME *n = X509_NAME_new();
    char buf[CONFIG_MAX_STR + 80];
    snprintf(buf, sizeof(buf), "%s", text);
    for (char *save = NULL, *part = strtok_r(buf, ",", &save); n && part;
         part = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(part, '=');
        if (!eq)
            break;
        *eq = '\0';
        if (!X509_NAME_add_entry_by_txt(n, part, MBSTRING_UTF8, (unsigned char *)eq + 1, -1, -1,
                                        0)) {
            X509_NAME_free(n);
            return NULL;
        }
    }
    return n;
}

static int push_subtree(STACK_OF(GENERAL_SUBTREE) * sk, int type, ASN1_STRING *v)
{
    GENERAL_SUBTREE *st = GENERAL_SUBTREE_new();
    if (!st || !v || !sk_GENERAL_SUBTREE_push(sk, st)) {
        GENERAL_SUBTREE_free(st);
        ASN1_STRING_free(v);
        return 0;
    }
    GENERAL_NAME_set0_value(st->base, type, v);
    return 1;
}

static int add_subtree(STACK_OF(GENERAL_SUBTREE) * sk, int type, const char *name)
{
    ASN1_IA5STRING *v = ASN1_IA5STRING_new();
    if (v && !ASN1_STRING_set(v, name, (int)strlen(name))) {
        ASN1_IA5STRING_free(v);
        v = NULL;
    }
    return push_subtree(sk, type, v);
}

/* An iPAddress subtree: address and mask (util_cidr_parse's bytes). */
static int add_ip_subtree(STACK_OF(GENERAL_SUBTREE) * sk, const uint8_t *range, size_t len)
{
    ASN1_OCTET_STRING *v = ASN1_OCTET_STRING_new();
    if (v && !ASN1_OCTET_STRING_set(v, range, (int)len)) {
        ASN1_OCTET_STRING_free(v);
        v = NULL;
    }
    return push_subtree(sk, GEN_IPADD, v);
}

/* A permitted subtree constrains only names of its own type (RFC 5280 4.2.1.10), so each
 * type a relying party checks gets one: URI on each trust domain's host; DNS on istiod's
 * own names and each configured suffix (config_validate keeps that set non-empty); IP on
 * each configured range, every address of a family without one excluded (0.0.0.0/0,
 * ::/0); rfc822Name on each configured host, else only the reserved host "invalid"
 * (RFC 6761): OpenSSL reads an empty excluded rfc822Name as matching nothing. */
static int add_name_constraints(signer_caops *ca, X509 *x)
{
    static const uint8_t all_v4[8], all_v6[32];
    NAME_CONSTRAINTS *nc = NAME_CONSTRAINTS_new();
    int ok = nc && (nc->permittedSubtrees = sk_GENERAL_SUBTREE_new_null()) != NULL &&
             (nc->excludedSubtrees = sk_GENERAL_SUBTREE_new_null()) != NULL;
    STACK_OF(GENERAL_SUBTREE) *pe = ok ? nc->permittedSubtrees : NULL;
    const hsmca_config *c = ca->cfg;
    int v4 = 0, v6 = 0;
    for (int i = 0; ok && i < ca->policy->n_trust_domains; i++)
        ok = add_subtree(pe, GEN_URI, ca->policy->trust_domains[i]);
    for (int i = 0; ok && i < c->ica_istiod_names.n; i++)
        ok = add_subtree(pe, GEN_DNS, c->ica_istiod_names.items[i]);
    for (int i = 0; ok && i < c->ica_dns_suffixes.n; i++)
        ok = add_subtree(pe, GEN_DNS, c->ica_dns_suffixes.items[i]);
    for (int i = 0; ok && i < c->ica_ip_ranges.n; i++) {
        uint8_t range[32];
        size_t n = 0;
        ok = util_cidr_parse(c->ica_ip_ranges.items[i], range, &n) && add_ip_subtree(pe, range, n);
        v4 |= n == 8;
        v6 |= n == 32;
    }
    for (int i = 0; ok && i < c->ica_email_domains.n; i++)
        ok = add_subtree(pe, GEN_EMAIL, c->ica_email_domains.items[i]);
    ok = ok && (c->ica_email_domains.n || add_subtree(pe, GEN_EMAIL, "invalid"));
    ok = ok && (v4 || add_ip_subtree(nc->excludedSubtrees, all_v4, sizeof(all_v4)));
    ok = ok && (v6 || add_ip_subtree(nc->excludedSubtrees, all_v6, sizeof(all_v6)));
    ok = ok && X509_add1_ext_i2d(x, NID_name_constraints, nc, 1, X509V3_ADD_DEFAULT) == 1;
    NAME_CONSTRAINTS_free(nc);
    return ok;
}

static int add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    int ok = ext && X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

/* The certificate to sign (unsigned), or NULL. */
static X509 *build_cert(signer_caops *ca, EVP_PKEY *key, const ica_facts *f,
                        const uint8_t serial[ICA_SERIAL_LEN])
{
    X509 *x = X509_new();
    X509_NAME *subj = subject_of(f->subject);
    BIGNUM *bn = BN_bin2bn(serial, ICA_SERIAL_LEN, NULL);
    X509V3_CTX ctx;
    int ok = x && subj && bn && X509_set_version(x, X509_VERSION_3) &&
             BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
             X509_set_issuer_name(x, X509_get_subject_name(ca->ca_cert)) &&
             X509_set_subject_name(x, subj) &&
             ASN1_TIME_set(X509_getm_notBefore(x), (time_t)f->not_before) &&
             ASN1_TIME_set(X509_getm_notAfter(x), (time_t)f->not_after) && X509_set_pubkey(x, key);
    if (ok) {
        X509V3_set_ctx(&ctx, ca->ca_cert, x, NULL, NULL, 0);
        ok = add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
             add_ext(x, &ctx, NID_key_usage, ICA_KEY_USAGE) &&
             add_ext(x, &ctx, NID_subject_key_identifier, "hash") &&
             add_ext(x, &ctx, NID_authority_key_identifier, "keyid:always") &&
             add_name_constraints(ca, x);
    }
    X509_NAME_free(subj);
    BN_free(bn);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

/* The name constraints as text, in the extension's order, for show and the intent
 * entry's sans: permitted ("URI:cluster.local DNS:istiod.istio-system.svc email:invalid")
 * into out, excluded ("IP:0.0.0.0/0 IP:::/0") into excl. */
static void constraints_text(signer_caops *ca, char *out, size_t cap, char *excl, size_t ecap)
{
    const hsmca_config *c = ca->cfg;
    const struct {
        const char *type;
        const config_list *l;
    } lists[] = {{"DNS", &c->ica_istiod_names},
                 {"DNS", &c->ica_dns_suffixes},
                 {"IP", &c->ica_ip_ranges},
                 {"email", &c->ica_email_domains}};
    size_t n = 0, m = 0;
    int v4 = 0, v6 = 0;
    out[0] = excl[0] = '\0';
    for (int i = 0; i < ca->policy->n_trust_domains && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%sURI:%s", n ? " " : "",
                              ca->policy->trust_domains[i]);
    for (size_t k = 0; k < sizeof(lists) / sizeof(lists[0]); k++)
        for (int i = 0; i < lists[k].l->n && n < cap; i++)
            n += (size_t)snprintf(out + n, cap - n, "%s%s:%s", n ? " " : "", lists[k].type,
                                  lists[k].l->items[i]);
    if (!c->ica_email_domains.n && n < cap)
        n += (size_t)snprintf(out + n, cap - n, "%semail:invalid", n ? " " : "");
    for (int i = 0; i < c->ica_ip_ranges.n; i++) {
        v6 |= strchr(c->ica_ip_ranges.items[i], ':') != NULL;
        v4 |= strchr(c->ica_ip_ranges.items[i], ':') == NULL;
    }
    if (!v4)
        m += (size_t)snprintf(excl + m, ecap - m, "IP:0.0.0.0/0");
    if (!v6 && m < ecap)
        snprintf(excl + m, ecap - m, "%sIP:::/0", m ? " " : "");
}

static X509_REQ *csr_of(const audit_ica_req *r, hsmca_err *e)
{
    size_t n;
    if (!r->csr_b64) {
        hsmca_fail(e, HSMCA_EPERM, "intermediate request %llu is denied or expired: its CSR is "
                   "no longer kept", (unsigned long long)r->id);
        return NULL;
    }
    uint8_t *der = util_b64_decode(r->csr_b64, strlen(r->csr_b64), &n);
    const unsigned char *p = der;
    X509_REQ *csr = der ? d2i_X509_REQ(NULL, &p, (long)n) : NULL;
    free(der);
    if (!csr)
        hsmca_fail(e, HSMCA_EINTERNAL, "intermediate request %llu: its CSR does not parse",
                   (unsigned long long)r->id);
    return csr;
}

json_t *signer_ica_profile(signer_caops *ca, const audit_ica_req *r, hsmca_err *e)
{
    ica_facts f;
    char nc[2048], excl[64], key[64];
    if (facts_of(ca, r, (int64_t)time(NULL), &f, e) != HSMCA_OK)
        return NULL;
    X509_REQ *csr = csr_of(r, e);
    if (!csr)
        return NULL;
    EVP_PKEY *pk = X509_REQ_get0_pubkey(csr);
    snprintf(key, sizeof(key), "%s %d bits",
             pk && EVP_PKEY_get_base_id(pk) == EVP_PKEY_EC ? "EC" : "RSA",
             pk ? EVP_PKEY_get_bits(pk) : 0);
    X509_REQ_free(csr);
    constraints_text(ca, nc, sizeof(nc), excl, sizeof(excl));
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:s}", "subject",
                     f.subject, "key", key, "key_sha256", r->key_sha256, "basic_constraints",
                     "critical, CA:TRUE, pathlen:0", "key_usage",
                     "critical, digitalSignature, keyCertSign, cRLSign", "name_constraints",
                     "critical", "permitted", nc, "excluded", excl,
                     "ttl_s", (json_int_t)f.ttl, "not_before", (json_int_t)f.not_before,
                     "not_after", (json_int_t)f.not_after, "from_csr",
                     "the public key only: the CSR's subject, extensions and attributes are "
                     "ignored");
}

/* The intent entry, durable before the signature: *intent gets its seq. */
static HSMCA_MUSTCHECK hsmca_code log_intent(signer_caops *ca, const audit_ica_req *r,
                                             const char *user, const ica_facts *f,
                                             const uint8_t *tbs, size_t tbs_len,
                                             const uint8_t serial[ICA_SERIAL_LEN],
                                             uint64_t *intent, hsmca_err *e)
{
    static char nc[AUDIT_SANS_MAX];
    char excl[64];
    uint8_t md[32];
    audit_entry ent = {.kind = AUDIT_ISSUE_INTENT, .request_id = r->id};
    size_t der_len;
    uint8_t *der = util_b64_decode(r->csr_b64, strlen(r->csr_b64), &der_len);
    HSMCA_ENSURE(der, e, HSMCA_ENOMEM, "out of memory");
    SHA256(der, der_len, md);
    free(der);
    util_hex(md, 32, ent.csr_sha256);
    SHA256(tbs, tbs_len, md);
    util_hex(md, 32, ent.tbs_sha256);
    util_hex(serial, ICA_SERIAL_LEN, ent.serial);
    snprintf(ent.profile, sizeof(ent.profile), "%s", AUDIT_ICA_PROFILE);
    constraints_text(ca, nc, sizeof(nc), excl, sizeof(excl));
    size_t used = strlen(nc);
    if (excl[0] && used < sizeof(nc))
        snprintf(nc + used, sizeof(nc) - used, " excluded %s", excl);
    ent.sans = (audit_str){nc, strlen(nc), 0};
    ent.requester = (audit_str){user, strlen(user), 0};
    ent.not_before = f->not_before;
    ent.not_after = f->not_after;
    HSMCA_GUARD(signer_ica_log(ca, &ent, e));
    *intent = ent.seq;
    return HSMCA_OK;
}

/* The result after the signature (and with a certificate its intermediate-cert entry),
 * durable before the caller's reply. */
static HSMCA_MUSTCHECK hsmca_code log_result(signer_caops *ca, const audit_ica_req *r,
                                             uint64_t intent, const uint8_t *cert, size_t len,
                                             const hsmca_err *why, hsmca_err *e)
{
    static char b64[AUDIT_BLOB_MAX + 1];
    audit_entry res = {.kind = AUDIT_ISSUE_RESULT, .request_id = r->id, .intent_seq = intent};
    uint8_t md[32];
    if (cert) {
        SHA256(cert, len, md);
        util_hex(md, 32, res.cert_sha256);
    } else {
        snprintf(res.code, sizeof(res.code), "%s", hsmca_code_name(why->code));
        res.error = (audit_str){why->msg, strlen(why->msg), 0};
    }
    audit_entry ce = {.kind = AUDIT_ICA_CERT, .request_id = r->id};
    memcpy(ce.cert_sha256, res.cert_sha256, sizeof(ce.cert_sha256));
    hsmca_err rule;
    hsmca_err_clear(&rule);
    if (cert && len <= AUDIT_BLOB_MAX / 4 * 3) {
        ce.cert = (audit_str){b64, util_b64_encode_to(cert, len, b64, sizeof(b64)), 0};
        /* The certificate's entry is checked before the result's: a certificate the rules
         * would refuse is recorded as not handed out, and never written. */
        if (audit_ica_check(ca->ica, &ce, &rule) != HSMCA_OK) {
            memset(res.cert_sha256, 0, sizeof(res.cert_sha256));
            snprintf(res.code, sizeof(res.code), "%s", hsmca_code_name(HSMCA_EPERM));
            res.error = (audit_str){rule.msg, strlen(rule.msg), 0};
            cert = NULL;
        }
    }
    if (!cert || len > AUDIT_BLOB_MAX / 4 * 3) {
        HSMCA_GUARD(signer_ica_log(ca, &res, e));
        return rule.msg[0] ? hsmca_fail(e, HSMCA_EPERM, "%s", rule.msg) : HSMCA_OK;
    }
    HSMCA_GUARD(signer_ica_log(ca, &res, e));
    return signer_ica_log(ca, &ce, e);
}

/* The certificate: the TBS with the token's signature sig over digest md, verified
 * against the CA certificate first; NULL when it fails (e says why). */
static uint8_t *assemble_checked(signer_caops *ca, const uint8_t *tbs, size_t tbs_len,
                                 const uint8_t *md, const uint8_t *sig, size_t sig_len,
                                 size_t *len, hsmca_err *e)
{
    uint8_t *cert = NULL;
    if (!sigalg_verify_digest(ca->alg, X509_get0_pubkey(ca->ca_cert), md, sig, sig_len)) {
        hsmca_fail(e, HSMCA_EINTERNAL, "token signature failed verification");
        return NULL;
    }
    if (certasm_assemble(tbs, tbs_len, ca->alg->nid, sig, sig_len, &cert, len, e) != HSMCA_OK)
        return NULL;
    return cert;
}

/* A fresh serial of ICA_SERIAL_LEN octets, positive, its first octet non-zero (so its DER
 * keeps that length), marked used in the serial set until not_after. */
static HSMCA_MUSTCHECK hsmca_code new_serial(signer_caops *ca, int64_t not_after,
                                             uint8_t serial[ICA_SERIAL_LEN], hsmca_err *e)
{
    HSMCA_ENSURE(RAND_bytes(serial, ICA_SERIAL_LEN) == 1, e, HSMCA_EINTERNAL, "no randomness");
    serial[0] = (uint8_t)((serial[0] & 0x7f) | 0x40);
    return serial_set_insert(ca->serials, serial, ICA_SERIAL_LEN, not_after, (int64_t)time(NULL),
                             e);
}

/* An intermediate out for its signature (signer_casign.h): its intent is durable. */
typedef struct {
    uint64_t id, intent;
    uint8_t *tbs, md[64];
    size_t tbs_len;
    char user[AUDIT_ICA_USER_MAX + 1];
    json_t *req;          /* the waiting caller's request */
    signer_ica_then then; /* its op, run again once signed; NULL: ica-approve's reply */
} ica_job;

/* The approver's reply: the request's state, and why it is not signed ("" when it is). */
static json_t *approve_reply(signer_caops *ca, uint64_t id, const char *sign_error)
{
    const audit_ica_req *r = audit_ica_find(ca->ica, id);
    return json_pack("{s:b, s:I, s:I, s:I, s:s, s:s}", "ok", 1, "id", (json_int_t)id, "approvals",
                     (json_int_t)r->n_approvers, "required", (json_int_t)r->required, "state",
                     audit_ica_state_name(audit_ica_state_of(r, time(NULL))), "sign_error",
                     sign_error);
}

/* The waiting caller's reply once request j is signed (rc HSMCA_OK) or not (e). */
static json_t *caller_reply(signer_caops *ca, ica_job *j, hsmca_code rc, hsmca_err *e)
{
    json_t *r = NULL;
    if (!j->then)
        r = approve_reply(ca, j->id, rc == HSMCA_OK ? "" : e->msg);
    else if (rc == HSMCA_OK && audit_ica_find(ca->ica, j->id)->cert_b64)
        r = j->then(ca, j->user, j->req, e); /* finds the certificate: signs nothing again */
    else if (rc == HSMCA_OK)
        hsmca_fail(e, HSMCA_EINTERNAL, "intermediate request %llu: no certificate after signing",
                   (unsigned long long)j->id);
    if (r)
        return r;
    LOG_EVENT(LOG_LVL_WARN, "admin request refused", LOG_STR("user", j->user),
              LOG_STR("op", j->then ? "ica-fetch" : "ica-approve"), LOG_STR("reason", e->msg));
    return json_pack("{s:b, s:s}", "ok", 0, "error", e->msg);
}

/* signer_casign_done: the certificate assembled and checked, the result (and certificate)
 * entries durable, then the caller's reply. */
static json_t *ica_done(signer_caops *ca, void *arg, const uint8_t *sig, size_t sig_len,
                        const hsmca_err *why)
{
    ica_job *j = arg;
    hsmca_err w = *why, e;
    hsmca_err_clear(&e);
    size_t cert_len = 0;
    uint8_t *cert = sig ? assemble_checked(ca, j->tbs, j->tbs_len, j->md, sig, sig_len,
                                           &cert_len, &w)
                        : NULL;
    if (!sig && w.code == HSMCA_EUNAVAIL && strstr(w.msg, "pkcs11.sign_timeout"))
        snprintf(w.msg + strlen(w.msg), sizeof(w.msg) - strlen(w.msg), "; fetch again");
    hsmca_code rc = log_result(ca, audit_ica_find(ca->ica, j->id), j->intent, cert, cert_len,
                               &w, &e);
    if (rc == HSMCA_OK && !cert)
        rc = hsmca_fail(&e, w.code, "intermediate request %llu not signed: %s",
                        (unsigned long long)j->id, w.msg);
    if (rc == HSMCA_OK)
        signer_stats_issued(ca->stats, SIGSTAT_PROFILE_CA);
    if (rc == HSMCA_OK)
        LOG_EVENT(LOG_LVL_INFO, "intermediate signed", LOG_STR("cluster",
                  audit_ica_find(ca->ica, j->id)->cluster), LOG_STR("user", j->user));
    else
        LOG_EVENT(LOG_LVL_WARN, "intermediate not signed", LOG_STR("reason", e.msg));
    json_t *r = j->req ? caller_reply(ca, j, rc, &e) : NULL;
    OPENSSL_free(cert);
    OPENSSL_free(j->tbs);
    json_decref(j->req);
    free(j);
    return r;
}

/* Hands the logged intermediate j to the CA signing thread; when it cannot, the intent
 * gets its result (not signed) and j is freed. */
static HSMCA_MUSTCHECK hsmca_code hand_over(signer_caops *ca, ica_job *j, hsmca_err *e)
{
    hsmca_err why;
    hsmca_err_clear(&why);
    if (sigalg_digest(ca->alg, j->tbs, j->tbs_len, j->md) != 1)
        hsmca_fail(&why, HSMCA_EINTERNAL, "digest failed");
    else if (signer_casign_start(ca, j->md, ca->alg->digest_len, ica_done, j, &why) == HSMCA_OK)
        return HSMCA_OK;
    hsmca_code rc = log_result(ca, audit_ica_find(ca->ica, j->id), j->intent, NULL, 0, &why, e);
    if (rc == HSMCA_OK)
        rc = hsmca_fail(e, why.code, "intermediate request %llu not signed: %s",
                        (unsigned long long)j->id, why.msg);
    OPENSSL_free(j->tbs);
    json_decref(j->req);
    free(j);
    return rc;
}

hsmca_code signer_ica_issue(signer_caops *ca, const audit_ica_req *r, const char *user, json_t *req,
                            signer_ica_then then, hsmca_err *e)
{
    ica_facts f;
    uint8_t serial[ICA_SERIAL_LEN], *tbs = NULL;
    size_t tbs_len = 0;
    uint64_t intent = 0, id = r->id;
    /* Refused up front (nothing logged): a reconnecting token, a CA signature still out. */
    HSMCA_GUARD(signer_casign_ready(ca, e));
    HSMCA_GUARD(facts_of(ca, r, (int64_t)time(NULL), &f, e));
    HSMCA_GUARD(new_serial(ca, f.not_after, serial, e));
    X509_REQ *csr = csr_of(r, e);
    if (!csr)
        return e->code;
    /* Checked when it was asked for; again here, before the CA key signs for it. */
    EVP_PKEY *key = X509_REQ_get0_pubkey(csr);
    hsmca_code rc = HSMCA_OK;
    if (!key || signer_ica_key_problem(key)[0] || X509_REQ_verify(csr, key) != 1)
        rc = hsmca_fail(e, HSMCA_EPERM, "intermediate request %llu: its CSR fails its checks",
                        (unsigned long long)id);
    X509 *x = rc == HSMCA_OK ? build_cert(ca, key, &f, serial) : NULL;
    if (rc == HSMCA_OK && !x)
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "intermediate certificate: cannot be built");
    if (rc == HSMCA_OK)
        rc = certasm_tbs_der(x, ca->alg->nid, &tbs, &tbs_len, e);
    ica_job *j = rc == HSMCA_OK ? calloc(1, sizeof(*j)) : NULL;
    if (rc == HSMCA_OK && !j)
        rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    if (rc == HSMCA_OK)
        rc = log_intent(ca, r, user, &f, tbs, tbs_len, serial, &intent, e);
    if (rc == HSMCA_OK) {
        *j = (ica_job){.id = id, .intent = intent, .tbs = tbs, .tbs_len = tbs_len,
                       .req = json_incref(req), .then = then};
        snprintf(j->user, sizeof(j->user), "%s", user);
        ica_job *out = j;
        tbs = NULL;
        j = NULL;
        rc = hand_over(ca, out, e);
    }
    free(j);
    OPENSSL_free(tbs);
    X509_free(x);
    X509_REQ_free(csr);
    return rc;
}

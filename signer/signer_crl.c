/* signer_crl.c - the CA's CRL: built, signed in the token, checked, recorded and written
 * (see signer_crl.h). */
#include "signer_crl.h"
#include "signer_casign.h"
#include "signer_caops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "audit_crl.h"
#include "certasm.h"
#include "ipc_contract.h"
#include "log.h"
#include "util.h"

#define CRL_RETRY_S 30.0 /* after a failure, the tick's next try */
#define CRL_LOOK_S 10.0  /* the tick's look at crl.path and the CRL's age */

/* The throwaway key of tbs_of, made once per life (an RSA one takes tens of ms). */
static EVP_PKEY *g_alg_key;

void signer_crl_free(signer_caops *ca)
{
    EVP_PKEY_free(g_alg_key);
    g_alg_key = NULL;
    audit_crl_free(ca->crl);
    ca->crl = NULL;
    free(ca->crl_pem);
    ca->crl_pem = NULL;
}

/* The octets of a revoked serial (lowercase hex of whole octets: the entry's rule); 0 when
 * it is not that. */
static size_t octets(const audit_crl_rev *rv, uint8_t bin[AUDIT_SERIAL_HEX_MAX / 2])
{
    size_t n = 0;
    if (!util_unhex(rv->serial, strlen(rv->serial), bin, AUDIT_SERIAL_HEX_MAX / 2, &n))
        return 0;
    return n;
}

void signer_crl_restore(signer_caops *ca)
{
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; i < audit_crl_count(ca->crl); i++) {
        uint8_t bin[AUDIT_SERIAL_HEX_MAX / 2];
        size_t n = octets(audit_crl_at(ca->crl, i), bin);
        hsmca_err e; /* a serial in the set already (a live certificate's) stays there */
        if (n)
            (void)!serial_set_restore(ca->serials, bin, n, now + SIGNER_CRL_SERIAL_HOLD_S, now, &e);
    }
}

static int add_revoked(X509_CRL *c, const audit_crl_rev *rv)
{
    uint8_t bin[AUDIT_SERIAL_HEX_MAX / 2];
    size_t n = octets(rv, bin);
    X509_REVOKED *r = X509_REVOKED_new();
    BIGNUM *bn = BN_bin2bn(bin, (int)n, NULL);
    ASN1_INTEGER *serial = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
    ASN1_TIME *when = ASN1_TIME_set(NULL, (time_t)rv->time);
    ASN1_ENUMERATED *reason = ASN1_ENUMERATED_new();
    /* RFC 5280 §5.3.1: reasonCode unspecified (0) SHOULD be absent, not written. */
    int ok = n && r && serial && when && reason && ASN1_ENUMERATED_set(reason, rv->reason) &&
             X509_REVOKED_set_serialNumber(r, serial) && X509_REVOKED_set_revocationDate(r, when) &&
             (rv->reason == 0 || X509_REVOKED_add1_ext_i2d(r, NID_crl_reason, reason, 0, 0) == 1) &&
             X509_CRL_add0_revoked(c, r);
    if (!ok)
        X509_REVOKED_free(r);
    BN_free(bn);
    ASN1_INTEGER_free(serial);
    ASN1_TIME_free(when);
    ASN1_ENUMERATED_free(reason);
    return ok;
}

/* The TBS fields (algorithm aside); NULL when out of memory. */
static X509_CRL *build(signer_caops *ca, uint64_t number, int64_t now)
{
    ASN1_TIME *nu = ASN1_TIME_set(NULL, (time_t)(now + (int64_t)ca->cfg->crl_validity));
    X509_CRL *c = nu ? certasm_crl_new(ca->ca_cert, now, nu, number) : NULL;
    int ok = c != NULL;
    ASN1_TIME_free(nu);
    for (size_t i = 0; ok && i < audit_crl_count(ca->crl); i++)
        ok = add_revoked(c, audit_crl_at(ca->crl, i));
    if (ok)
        ok = X509_CRL_sort(c);
    if (!ok) {
        X509_CRL_free(c);
        return NULL;
    }
    return c;
}

/* The TBS's DER with the CA key's signature algorithm inside. OpenSSL has no setter for a
 * CRL's inner algorithm: a signature by a throwaway key of the same type sets it (its
 * signature is discarded), and the DER of the algorithm is checked against the CA's. */
static HSMCA_MUSTCHECK hsmca_code tbs_of(signer_caops *ca, X509_CRL *c, uint8_t **tbs, size_t *len,
                                         hsmca_err *e)
{
    if (!g_alg_key)
        g_alg_key = ca->alg->key_type == EVP_PKEY_EC ? EVP_EC_gen("P-256") : EVP_RSA_gen(1024);
    const EVP_MD *md = EVP_get_digestbyname(ca->alg->digest);
    int ok = g_alg_key && md && X509_CRL_sign(c, g_alg_key, md) > 0;
    HSMCA_ENSURE(ok, e, HSMCA_EINTERNAL, "CRL: cannot set its signature algorithm");
    unsigned char *buf = NULL;
    int n = i2d_re_X509_CRL_tbs(c, &buf);
    HSMCA_ENSURE(n > 0, e, HSMCA_EINTERNAL, "CRL: cannot encode its TBS");
    *tbs = buf;
    *len = (size_t)n;
    const X509_ALGOR *alg = NULL;
    X509_CRL_get0_signature(c, NULL, &alg);
    unsigned char *ad = NULL;
    int an = i2d_X509_ALGOR(alg, &ad);
    ok = an > 0 && (size_t)an == ca->alg->alg_der_len &&
         memcmp(ad, ca->alg->alg_der, (size_t)an) == 0;
    OPENSSL_free(ad);
    HSMCA_ENSURE(ok, e, HSMCA_EINTERNAL, "CRL: its signature algorithm is not the CA key's");
    return HSMCA_OK;
}

/* The signed CRL's DER: the TBS with the token's signature, checked against the CA
 * certificate. */
static HSMCA_MUSTCHECK hsmca_code assemble_crl(signer_caops *ca, const uint8_t *tbs, size_t tbs_len,
                                               const uint8_t *sig, size_t sig_len, uint8_t **der,
                                               size_t *len, hsmca_err *e)
{
    HSMCA_GUARD(certasm_assemble(tbs, tbs_len, ca->alg->nid, sig, sig_len, der, len, e));
    const unsigned char *p = *der;
    X509_CRL *c = d2i_X509_CRL(NULL, &p, (long)*len);
    int ok = c && p == *der + *len && X509_CRL_verify(c, X509_get0_pubkey(ca->ca_cert)) == 1;
    X509_CRL_free(c);
    if (!ok) {
        OPENSSL_free(*der);
        *der = NULL;
        return hsmca_fail(e, HSMCA_EINTERNAL, "CRL: the token's signature fails verification");
    }
    return HSMCA_OK;
}

/* The CRL written atomically over PATH, its mode 0644 less the umask (the sandbox allows no
 * chmod). */
static HSMCA_MUSTCHECK hsmca_code write_file(const char *path, const char *text, hsmca_err *e)
{
    hsmca_err why;
    if (util_write_file_umask(path, text, strlen(text), 0644, &why) == HSMCA_OK)
        return HSMCA_OK;
    return hsmca_fail(e, HSMCA_EUNAVAIL,
                      "crl.path: %s (its directory must be writable by signer.user)", why.msg);
}

/* audit_check_fn: a crl entry passes the log's CRL rules as it is written. */
static hsmca_code crl_rule(void *ctx, const audit_entry *ent, hsmca_err *e)
{
    const signer_caops *ca = ctx;
    return audit_crl_check(ca->crl, ent, e);
}

/* The crl entry, durable; then the file and the PEM kept for crl-get. */
static HSMCA_MUSTCHECK hsmca_code record(signer_caops *ca, const uint8_t *der, size_t len,
                                         uint64_t number, int64_t now, hsmca_err *e)
{
    audit_entry ent = {.kind = AUDIT_CRL, .crl_number = number, .not_before = now};
    ent.not_after = now + (int64_t)ca->cfg->crl_validity;
    ent.count = audit_crl_count(ca->crl);
    uint8_t md[32];
    SHA256(der, len, md);
    util_hex(md, 32, ent.crl_sha256);
    uint64_t seq;
    HSMCA_GUARD(audit_log_append_checked(ca->audit, &ent, crl_rule, ca, &seq, e));
    HSMCA_GUARD(audit_log_sync_through(ca->audit, seq, e));
    HSMCA_GUARD(audit_crl_apply(ca->crl, &ent, 0, e));
    BIO *b = BIO_new(BIO_s_mem());
    const unsigned char *p = der;
    X509_CRL *c = d2i_X509_CRL(NULL, &p, (long)len);
    char *pem = b && c && PEM_write_bio_X509_CRL(b, c) ? certasm_bio_string(b) : NULL;
    BIO_free(b);
    X509_CRL_free(c);
    HSMCA_ENSURE(pem, e, HSMCA_ENOMEM, "out of memory");
    free(ca->crl_pem);
    ca->crl_pem = pem;
    char num[24], count[24];
    snprintf(num, sizeof(num), "%llu", (unsigned long long)number);
    snprintf(count, sizeof(count), "%llu", (unsigned long long)ent.count);
    LOG_EVENT(LOG_LVL_INFO, "CRL signed", LOG_STR("path", ca->cfg->crl_path),
              LOG_STR("crl_number", num), LOG_STR("revoked", count));
    return write_file(ca->cfg->crl_path, pem, e);
}

/* A CRL out for its signature (signer_casign.h). */
typedef struct {
    uint8_t *tbs;
    size_t tbs_len;
    uint64_t number;
    int64_t now;
    json_t *reply; /* the waiting revoke's reply, completed with crl_number or crl_error */
} crl_job;

/* signer_casign_done: the CRL assembled, checked, recorded and written; the reply. */
static json_t *crl_done(signer_caops *ca, void *arg, const uint8_t *sig, size_t sig_len,
                        const hsmca_err *why)
{
    crl_job *j = arg;
    hsmca_err e = *why;
    uint8_t *der = NULL;
    size_t len = 0;
    hsmca_code rc = sig ? assemble_crl(ca, j->tbs, j->tbs_len, sig, sig_len, &der, &len, &e)
                        : why->code;
    if (rc == HSMCA_OK)
        rc = record(ca, der, len, j->number, j->now, &e);
    if (rc == HSMCA_OK)
        signer_stats_issued(ca->stats, SIGSTAT_PROFILE_CRL);
    if (rc != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_WARN, "CRL not published (tried again later)",
                  LOG_INT("retry_s", CRL_RETRY_S), LOG_STR("error", e.msg));
        ca->crl_next_try = util_mono_now() + CRL_RETRY_S;
    }
    if (j->reply && rc == HSMCA_OK)
        json_object_set_new(j->reply, "crl_number", json_integer((json_int_t)j->number));
    else if (j->reply)
        json_object_set_new(j->reply, "crl_error", json_string(e.msg));
    json_t *r = j->reply;
    OPENSSL_free(der);
    OPENSSL_free(j->tbs);
    free(j);
    return r;
}

hsmca_code signer_crl_publish(signer_caops *ca, json_t *reply, hsmca_err *e)
{
    HSMCA_ENSURE(ca->cfg->crl_path[0] && ca->crl && ca->audit, e, HSMCA_EUNAVAIL,
                 "CRLs are off: set crl.path (and audit.dir: the CRL's number comes from the "
                 "log)");
    HSMCA_ENSURE(ca->cfg->crl_validity >= 3600, e, HSMCA_EINVAL,
                 "config: crl.validity must be at least 1h");
    HSMCA_GUARD(signer_casign_ready(ca, e));
    int64_t now = (int64_t)time(NULL);
    uint64_t number = audit_crl_last_number(ca->crl) + 1;
    X509_CRL *c = build(ca, number, now);
    HSMCA_ENSURE(c, e, HSMCA_ENOMEM, "CRL: cannot be built (out of memory)");
    crl_job *j = calloc(1, sizeof(*j));
    uint8_t md[64];
    hsmca_code rc = j ? tbs_of(ca, c, &j->tbs, &j->tbs_len, e)
                      : hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    X509_CRL_free(c);
    if (rc == HSMCA_OK && !sigalg_digest(ca->alg, j->tbs, j->tbs_len, md))
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "digest failed");
    if (rc == HSMCA_OK) {
        *j = (crl_job){j->tbs, j->tbs_len, number, now, reply};
        rc = signer_casign_start(ca, md, ca->alg->digest_len, crl_done, j, e);
    }
    if (rc != HSMCA_OK && j) {
        OPENSSL_free(j->tbs);
        free(j);
    }
    return rc;
}

/* The CRL at crl.path when it is the log's last (its number) and verifies under the CA:
 * kept for crl-get, so a restart does not sign a new one for nothing. */
static void load_existing(signer_caops *ca)
{
    char *text = NULL;
    size_t len;
    hsmca_err e;
    if (util_read_file(ca->cfg->crl_path, 1 << 24, &text, &len, &e) != HSMCA_OK)
        return;
    BIO *b = BIO_new_mem_buf(text, (int)len);
    X509_CRL *c = b ? PEM_read_bio_X509_CRL(b, NULL, NULL, NULL) : NULL;
    ASN1_INTEGER *num = c ? X509_CRL_get_ext_d2i(c, NID_crl_number, NULL, NULL) : NULL;
    uint64_t n = 0;
    if (num && ASN1_INTEGER_get_uint64(&n, num) == 1 && n == audit_crl_last_number(ca->crl) &&
        X509_CRL_verify(c, X509_get0_pubkey(ca->ca_cert)) == 1)
        ca->crl_pem = text;
    else
        free(text);
    ASN1_INTEGER_free(num);
    X509_CRL_free(c);
    BIO_free(b);
}

/* Due: the list changed since the last CRL, there is none (in the log or at crl.path),
 * or half of the last one's validity has passed. */
static int due(signer_caops *ca, int64_t now)
{
    if (!ca->crl_pem && audit_crl_last_number(ca->crl))
        load_existing(ca);
    if (audit_crl_changed(ca->crl) || !ca->crl_pem || access(ca->cfg->crl_path, F_OK) != 0)
        return 1;
    int64_t t = audit_crl_last_this(ca->crl), n = audit_crl_last_next(ca->crl);
    return now >= t + (n - t) / 2;
}

void signer_crl_tick(signer_caops *ca)
{
    double mono = util_mono_now();
    if (!ca->cfg->crl_path[0] || !ca->crl || !ca->audit || mono < ca->crl_next_try)
        return;
    ca->crl_next_try = mono + CRL_LOOK_S;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (!due(ca, (int64_t)time(NULL)) || signer_casign_ready(ca, &e) != HSMCA_OK)
        return; /* a reconnecting token, or a CA signature still out: the next look */
    if (signer_crl_publish(ca, NULL, &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_WARN, "CRL not published (tried again later)",
                  LOG_INT("retry_s", CRL_RETRY_S), LOG_STR("error", e.msg));
        ca->crl_next_try = mono + CRL_RETRY_S;
    }
}

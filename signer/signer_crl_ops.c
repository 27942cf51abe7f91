/* signer_crl_ops.c - the admin ops on revocations (see signer_crl.h): ca-revoke, crl-get. */
#include "signer_crl.h"
#include "signer_casign.h"
#include "signer_caops.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/x509.h>

#include "admin_contract.h"
#include "audit_crl.h"
#include "audit_ica.h"
#include "log.h"
#include "util.h"

/* Whether serial (lowercase hex) is an intermediate this CA signed (in the log). */
static int is_intermediate(signer_caops *ca, const char *serial)
{
    int found = 0;
    for (size_t i = 0; !found && i < audit_ica_count(ca->ica); i++) {
        const audit_ica_req *r = audit_ica_at(ca->ica, i);
        size_t n;
        uint8_t *der = r->cert_b64 ? util_b64_decode(r->cert_b64, strlen(r->cert_b64), &n)
                                   : NULL;
        const unsigned char *p = der;
        X509 *x = der ? d2i_X509(NULL, &p, (long)n) : NULL;
        BIGNUM *bn = x ? ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL) : NULL;
        char *hex = bn ? BN_bn2hex(bn) : NULL;
        for (char *c = hex; c && *c; c++)
            *c = (char)(*c >= 'A' && *c <= 'F' ? *c - 'A' + 'a' : *c);
        found = hex && strcmp(hex, serial) == 0;
        OPENSSL_free(hex);
        BN_free(bn);
        X509_free(x);
        free(der);
    }
    return found;
}

/* The serial's octets from lowercase hex of even length 2..40; 0 when malformed. */
static size_t serial_octets(const char *hex, uint8_t out[AUDIT_SERIAL_HEX_MAX / 2])
{
    size_t n = hex ? strlen(hex) : 0, len = 0;
    if (n < 2 || !util_unhex(hex, n, out, AUDIT_SERIAL_HEX_MAX / 2, &len))
        return 0;
    return len;
}

/* "intermediate" or "workload" for a serial the log knows (the serial set holds every
 * serial this CA key signed whose certificate has not expired: a probe that finds it
 * taken), "unknown" otherwise. The probe of an unknown serial takes it for a second, or
 * with force for SIGNER_CRL_SERIAL_HOLD_S: a revoked serial is never signed again. */
static const char *kind_of(signer_caops *ca, const uint8_t *bin, size_t n, const char *serial,
                           int force, hsmca_err *e)
{
    if (is_intermediate(ca, serial))
        return "intermediate";
    int64_t now = (int64_t)time(NULL);
    hsmca_err why;
    int64_t until = force ? now + SIGNER_CRL_SERIAL_HOLD_S : now + 1;
    hsmca_code rc = serial_set_insert(ca->serials, bin, n, until, now, &why);
    if (rc == HSMCA_EPERM)
        return "workload";
    if (rc != HSMCA_OK) {
        hsmca_fail(e, rc, "%s", why.msg);
        return NULL;
    }
    if (!force)
        hsmca_fail(e, HSMCA_ENOTFOUND,
                   "serial %s is not a certificate this CA signed that is still valid (the "
                   "log does not know it): revoke it anyway with --force-unknown",
                   serial);
    return force ? "unknown" : NULL;
}

static json_t *revoke_reply(audit_entry *ent, const char *serial, const char *why)
{
    json_t *r = json_pack("{s:b, s:s, s:s, s:s, s:I}", "ok", 1, "serial", serial, "reason",
                          ent->reason.p, "kind", ent->profile, "seq", (json_int_t)ent->seq);
    if (r && why)
        json_object_set_new(r, "crl_error", json_string(why));
    return r;
}

hsmca_code signer_crl_rule(void *ctx, const audit_entry *ent, hsmca_err *e)
{
    const signer_caops *ca = ctx;
    HSMCA_GUARD(audit_crl_check(ca->crl, ent, e));
    return ca->ica ? audit_ica_check(ca->ica, ent, e) : HSMCA_OK;
}

json_t *signer_crl_revoke(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    if (signer_ca_open(ca, e) != HSMCA_OK)
        return NULL;
    if (!ca->crl || !ca->audit) {
        hsmca_fail(e, HSMCA_EUNAVAIL, "revocations need the audit log (audit.dir): they are "
                                      "its entries");
        return NULL;
    }
    const char *serial = json_string_value(json_object_get(req, "serial"));
    const char *reason = json_string_value(json_object_get(req, "reason"));
    int force = json_is_true(json_object_get(req, "force_unknown"));
    uint8_t bin[AUDIT_SERIAL_HEX_MAX / 2];
    size_t n = serial_octets(serial, bin);
    if (!n || !reason || audit_crl_reason_code(reason, strlen(reason)) < 0) {
        hsmca_fail(e, HSMCA_EINVAL, !n ? "serial: lowercase hex of 1 to 20 octets"
                                       : "reason: one of %s", audit_crl_reason_names());
        return NULL;
    }
    if (audit_crl_revoked(ca->crl, serial)) {
        hsmca_fail(e, HSMCA_EPERM, "serial %s is revoked already", serial);
        return NULL;
    }
    const char *kind = kind_of(ca, bin, n, serial, force, e);
    if (!kind)
        return NULL;
    audit_entry ent = {.kind = AUDIT_REVOKE};
    snprintf(ent.serial, sizeof(ent.serial), "%s", serial);
    snprintf(ent.profile, sizeof(ent.profile), "%s", kind);
    ent.reason = (audit_str){reason, strlen(reason), 0};
    ent.requester = (audit_str){user, strlen(user), 0};
    /* An intermediate's serial while its signature is in flight: refused by its rule,
     * named as such (checked again as the entry is written). */
    if (signer_crl_rule(ca, &ent, e) != HSMCA_OK)
        return NULL;
    /* Refused before its entry while a CA signature is out (a CRL's count is the list's
     * length as that CRL was built): the revocation and its CRL stay one step. */
    if (ca->cfg->crl_path[0] && signer_casign_busy(ca)) {
        hsmca_fail(e, HSMCA_EUNAVAIL, "a CA signature is out (a token call hangs?): nothing "
                                      "revoked now (try again)");
        return NULL;
    }
    uint64_t seq;
    pthread_mutex_lock(&ca->rev_lock); /* the checker reads the list (signer_revoke.h) */
    int ok = audit_log_append_checked(ca->audit, &ent, signer_crl_rule, ca, &seq, e) == HSMCA_OK &&
             audit_log_sync_through(ca->audit, seq, e) == HSMCA_OK &&
             audit_crl_apply(ca->crl, &ent, 0, e) == HSMCA_OK &&
             (!ca->ica || audit_ica_apply(ca->ica, &ent, 0, e) == HSMCA_OK); /* as the replay */
    pthread_mutex_unlock(&ca->rev_lock);
    if (!ok)
        return NULL;
    ent.seq = seq;
    LOG_EVENT(LOG_LVL_INFO, "certificate revoked", LOG_STR("serial", serial),
              LOG_STR("reason", reason), LOG_STR("kind", kind), LOG_STR("user", user));
    hsmca_err why;
    hsmca_err_clear(&why);
    if (!ca->cfg->crl_path[0])
        return revoke_reply(&ent, serial, "crl.path is not set: no CRL is written");
    json_t *r = revoke_reply(&ent, serial, NULL);
    if (r && signer_crl_publish(ca, r, &why) == HSMCA_OK)
        return SIGNER_REPLY_LATER; /* once the CRL is signed, or not (signer_casign.h) */
    if (r)
        json_object_set_new(r, "crl_error", json_string(why.msg));
    else
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    return r;
}

json_t *signer_crl_get(signer_caops *ca, const char *user, json_t *req, hsmca_err *e)
{
    (void)user, (void)req;
    if (!ca->cfg->crl_path[0] || !ca->crl_pem) {
        hsmca_fail(e, HSMCA_ENOTFOUND, ca->cfg->crl_path[0]
                                           ? "no CRL signed yet (the signer signs one at start)"
                                           : "CRLs are off: crl.path is not set");
        return NULL;
    }
    return json_pack("{s:b, s:s, s:I}", "ok", 1, "crl", ca->crl_pem, "crl_number",
                     (json_int_t)audit_crl_last_number(ca->crl));
}

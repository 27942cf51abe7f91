/* fe_request.c - one CreateCertificate request from bytes to a TBS, and the
 * signed leaf back to a response (docs/ARCHITECTURE.md §4, steps 2-6). */
#include "fe_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "ca.pb-c.h"
#include "certasm.h"
#include "leaf_csr.h"
#include "fe_impersonate.h"
#include "fe_k8spods.h"
#include "fe_metrics.h"
#include "fe_pbcheck.h"
#include "fe_policy.h"
#include "leaf_tbs.h"
#include "profile.h"
#include "util.h"

static HSMCA_MUSTCHECK hsmca_code
check_and_build(const fe_app *app, const Istio__V1__Auth__IstioCertificateRequest *req, int64_t now,
                fe_checked_request *out, hsmca_err *e)
{
    leaf_csr csr;
    memset(&csr, 0, sizeof(csr));
    hsmca_code rc = leaf_csr_parse((const char *)req->csr.data, req->csr.len, &csr, e);
    if (rc != HSMCA_OK)
        return rc;
    /* The certificate carries the caller's identity the CSR asked for (first when the
     * chain found several); a CSR in an alias trust domain gets the caller's own. */
    const char *ids[FE_AUTH_MAX_IDS];
    for (int i = 0; i < out->who.n_ids; i++) {
        ids[i] = out->who.ids[i];
        if (i > 0 && csr.n_uris == 1 && strcmp(ids[i], csr.uris[0]) == 0) {
            ids[i] = ids[0];
            ids[0] = out->who.ids[i];
        }
    }
    fe_policy_grant grant;
    rc = fe_apply_policy(app, ids, out->who.n_ids, &csr, req->validity_duration, &grant, e);
    if (rc == HSMCA_OK) {
        snprintf(out->requester, sizeof(out->requester), "%s", ids[0]);
        leaf_tbs_params p = {.ca_cert = app->ca_cert,
                           .sig_nid = app->sig_nid,
                           .subject_key = csr.pubkey,
                           .subject_spki = csr.spki,
                           .uri_san = out->requester,
                           .dns = grant.dns,
                           .n_dns = grant.n_dns,
                           .now = now,
                           .ttl = grant.ttl};
        rc = leaf_tbs_build(&p, &out->tbs, &out->tbs_len, e);
    }
    memcpy(out->csr_sha256, csr.der_sha256, 32);
    leaf_csr_free(&csr);
    return rc;
}

hsmca_code fe_check_request(const fe_app *app, const uint8_t *body, size_t len,
                            const fe_auth_creds *creds, fe_checked_request *out, hsmca_err *e)
{
    memset(out, 0, sizeof(*out));
    int64_t now = creds->now;
    /* Authenticate before looking at the body: strangers learn nothing about it. */
    double t0 = util_mono_now();
    hsmca_code rc = fe_auth_run(app, creds, &out->who, e);
    if (!out->who.deferred)
        fe_metrics_observe(FE_HIST_AUTH, util_mono_now() - t0);
    out->authenticator = out->who.authenticator;
    if (rc != HSMCA_OK) {
        out->requester[0] = 0; /* nobody was authenticated */
        return rc;
    }
    if (out->who.deferred) {
        out->deferred = 1; /* the rest on an authentication thread (fe_request.h) */
        return HSMCA_OK;
    }
    snprintf(out->requester, sizeof(out->requester), "%s", out->who.ids[0]);
    /* The token goes to the signer with the TBS, which verifies it again (identity
     * binding, signer/signer_bind.h): the one fe_auth_jwt accepted. */
    hsmca_err ignored;
    if (out->authenticator && strcmp(out->authenticator, "jwt") == 0 &&
        fe_auth_bearer(creds, &out->token, &out->token_len, &ignored) != HSMCA_OK) {
        out->token = NULL; /* cannot happen: fe_auth_jwt parsed the same metadata */
        out->token_len = 0;
    }
    if (out->token && out->who.cluster > 0)
        out->cluster = config_cluster_name(app->cfg, out->who.cluster);
    if (len > app->cfg->max_request_bytes)
        return hsmca_fail(e, HSMCA_EINVAL, "request: %zu bytes exceeds the limit of %u", len,
                          app->cfg->max_request_bytes);
    Istio__V1__Auth__IstioCertificateRequest *req =
        istio__v1__auth__istio_certificate_request__unpack(NULL, len, body);
    if (!req)
        return hsmca_fail(e, HSMCA_EINVAL, "request: not a valid IstioCertificateRequest");
    rc = fe_pb_check_struct(req->metadata.data, req->metadata.len, FE_METADATA_MAX_DEPTH, e);
    if (rc == HSMCA_OK && req->csr.len == 0)
        rc = hsmca_fail(e, HSMCA_EINVAL, "request: csr is empty");
    const uint8_t *imp = NULL;
    size_t imp_len = 0;
    char caller[POLICY_MAX_ID];
    snprintf(caller, sizeof(caller), "%s", out->who.ids[0]);
    if (rc == HSMCA_OK && fe_pb_struct_string(req->metadata.data, req->metadata.len,
                                              FE_IMPERSONATED_KEY, &imp, &imp_len)) {
        rc = fe_impersonate(app, creds, &out->who, (const char *)imp, imp_len, &out->deferred, e);
        if (rc == HSMCA_OK && out->deferred) { /* the API reads on an authentication thread */
            istio__v1__auth__istio_certificate_request__free_unpacked(req, NULL);
            return HSMCA_OK;
        }
    }
    if (rc == HSMCA_OK)
        rc = check_and_build(app, req, now, out, e);
    if (rc == HSMCA_OK && imp) {
        /* The audit entry shows both: who asked, for whom. The signer cannot check a
         * node's right to impersonate (it needs the API server), so the request goes
         * unbound, under its own name: the token names the node, not the identity. */
        snprintf(out->requester, sizeof(out->requester), "%s as %s", caller, out->who.ids[0]);
        out->authenticator = FE_IMPERSONATION_AUTHENTICATOR;
        out->token = NULL;
        out->token_len = 0;
        out->cluster = NULL;
    }
    istio__v1__auth__istio_certificate_request__free_unpacked(req, NULL);
    if (rc != HSMCA_OK) {
        OPENSSL_free(out->tbs);
        out->tbs = NULL;
    }
    return rc;
}

hsmca_code fe_build_response(const fe_app *app, const uint8_t *leaf_der, size_t leaf_len,
                             uint8_t **out, size_t *out_len, hsmca_err *e)
{
    char *leaf = certasm_der_to_pem(leaf_der, leaf_len);
    if (!leaf)
        return hsmca_fail(e, HSMCA_EINTERNAL, "signer returned an empty certificate");
    char *chain[1 + FE_MAX_CHAIN];
    chain[0] = leaf;
    for (int i = 0; i < app->n_chain_tail; i++)
        chain[1 + i] = app->chain_tail[i];
    Istio__V1__Auth__IstioCertificateResponse resp =
        ISTIO__V1__AUTH__ISTIO_CERTIFICATE_RESPONSE__INIT;
    resp.n_cert_chain = 1 + (size_t)app->n_chain_tail;
    resp.cert_chain = chain;
    size_t n = istio__v1__auth__istio_certificate_response__get_packed_size(&resp);
    *out = malloc(n ? n : 1);
    if (!*out) {
        free(leaf);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    *out_len = istio__v1__auth__istio_certificate_response__pack(&resp, *out);
    free(leaf);
    return HSMCA_OK;
}

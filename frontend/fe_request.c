/* fe_request.c - one CreateCertificate request from bytes to a TBS, and the
 * signed leaf back to a response (DESIGN.md §3, steps 2-6). */
#include "fe_app.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "ca.pb-c.h"
#include "certasm.h"
#include "fe_clientcert.h"
#include "fe_csr.h"
#include "fe_pbcheck.h"
#include "fe_tbs.h"
#include "profile.h"

static const char bearer[] = "Bearer ";

/* The identity a TokenReview answered, as the SPIFFE ID the CSR must carry. */
static HSMCA_MUSTCHECK hsmca_code tokenreview_requester(const fe_app *app, const fe_tr_identity *id,
                                                        fe_checked_request *out, hsmca_err *e)
{
    HSMCA_GUARD(policy_spiffe_id(app->policy.trust_domain, id->ns, id->sa, out->requester,
                                 sizeof(out->requester), e));
    memcpy(out->pod_name, id->pod_name, sizeof(out->pod_name));
    memcpy(out->pod_uid, id->pod_uid, sizeof(out->pod_uid));
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code authenticate(const fe_app *app, const char *auth, size_t auth_len,
                                               int64_t now, fe_checked_request *out, hsmca_err *e)
{
    if (!auth || auth_len == 0)
        return hsmca_fail(e, HSMCA_EAUTH,
                          "authentication: no 'authorization' metadata and no client certificate");
    if (auth_len <= sizeof(bearer) - 1 || strncmp(auth, bearer, sizeof(bearer) - 1) != 0)
        return hsmca_fail(e, HSMCA_EAUTH, "authentication: 'authorization' is not a Bearer token");
    const char *token = auth + sizeof(bearer) - 1;
    size_t token_len = auth_len - (sizeof(bearer) - 1);
    if (app->jwks) {
        fe_jwt_identity who;
        hsmca_code rc = fe_jwt_verify(app->jwks, &app->jwt_rules, token, token_len, now, &who, e);
        if (rc == HSMCA_OK)
            return policy_spiffe_id(app->policy.trust_domain, who.ns, who.sa, out->requester,
                                    sizeof(out->requester), e);
        if (rc != HSMCA_EAUTH || !app->tokenreview)
            return rc;
    }
    /* A token the JWT authenticator refused (or with none configured) goes to
     * TokenReview: from the cache now, else later on an authentication thread. */
    out->authenticator = "tokenreview";
    fe_tr_identity id;
    if (!fe_tokenreview_cached(app->tokenreview, token, token_len, now, &id)) {
        out->deferred = 1;
        return HSMCA_OK;
    }
    return tokenreview_requester(app, &id, out, e);
}

static HSMCA_MUSTCHECK hsmca_code check_and_build(const fe_app *app, const Istio__V1__Auth__IstioCertificateRequest *req,
                                  int64_t now, fe_checked_request *out, hsmca_err *e)
{
    fe_csr csr;
    memset(&csr, 0, sizeof(csr));
    hsmca_code rc = fe_csr_parse((const char *)req->csr.data, req->csr.len, &csr, e);
    if (rc != HSMCA_OK)
        return rc;
    const char *ids[1] = {out->requester};
    uint32_t ttl = 0;
    rc = policy_check_sans(ids, 1, (const char *const *)csr.uris, csr.n_uris, csr.n_other_sans, e);
    if (rc == HSMCA_OK)
        rc = policy_ttl(&app->policy, req->validity_duration, &ttl, e);
    if (rc == HSMCA_OK) {
        fe_tbs_params p = {.ca_cert = app->ca_cert,
                           .sig_nid = app->sig_nid,
                           .subject_key = csr.pubkey,
                           .subject_spki = X509_REQ_get_X509_PUBKEY(csr.req),
                           .uri_san = out->requester,
                           .now = now,
                           .ttl = ttl};
        rc = fe_tbs_build(&p, &out->tbs, &out->tbs_len, e);
    }
    memcpy(out->csr_sha256, csr.der_sha256, 32);
    fe_csr_free(&csr);
    return rc;
}

/* Steps 3-5 for an authenticated caller (out->requester set). */
static HSMCA_MUSTCHECK hsmca_code check_body(const fe_app *app, const uint8_t *body, size_t len,
                                             int64_t now, fe_checked_request *out, hsmca_err *e)
{
    if (len > app->cfg->max_request_bytes)
        return hsmca_fail(e, HSMCA_EINVAL, "request: %zu bytes exceeds the limit of %u", len,
                          app->cfg->max_request_bytes);
    Istio__V1__Auth__IstioCertificateRequest *req =
        istio__v1__auth__istio_certificate_request__unpack(NULL, len, body);
    if (!req)
        return hsmca_fail(e, HSMCA_EINVAL, "request: not a valid IstioCertificateRequest");
    hsmca_code rc = fe_pb_check_struct(req->metadata.data, req->metadata.len, FE_METADATA_MAX_DEPTH, e);
    if (rc == HSMCA_OK && req->csr.len == 0)
        rc = hsmca_fail(e, HSMCA_EINVAL, "request: csr is empty");
    if (rc == HSMCA_OK)
        rc = check_and_build(app, req, now, out, e);
    istio__v1__auth__istio_certificate_request__free_unpacked(req, NULL);
    if (rc != HSMCA_OK) {
        OPENSSL_free(out->tbs);
        out->tbs = NULL;
    }
    return rc;
}

hsmca_code fe_check_request(const fe_app *app, const uint8_t *body, size_t len, const char *auth,
                            size_t auth_len, const grpc_auth_context *peer, int64_t now,
                            fe_checked_request *out, hsmca_err *e)
{
    memset(out, 0, sizeof(*out));
    out->authenticator = auth && auth_len ? "jwt" : "none";
    /* Authenticate before looking at the body: strangers learn nothing about it. */
    hsmca_code rc;
    if ((!auth || auth_len == 0) && fe_clientcert_presented(peer)) {
        /* No token but a certificate: Istio's renewal path. A token, when sent, wins. */
        out->authenticator = "client_cert";
        rc = fe_clientcert_identity(app->clientcert, peer, now, out->requester,
                                    sizeof(out->requester), e);
    } else {
        rc = authenticate(app, auth, auth_len, now, out, e);
    }
    if (rc != HSMCA_OK) {
        out->requester[0] = 0; /* nobody was authenticated */
        return rc;
    }
    if (out->deferred)
        return HSMCA_OK; /* the rest after the TokenReview */
    return check_body(app, body, len, now, out, e);
}

hsmca_code fe_check_request_tokenreview(const fe_app *app, const uint8_t *body, size_t len,
                                        const char *auth, size_t auth_len, int64_t now,
                                        fe_checked_request *out, hsmca_err *e)
{
    memset(out, 0, sizeof(*out));
    out->authenticator = "tokenreview";
    HSMCA_ENSURE(app->tokenreview && auth && auth_len > sizeof(bearer) - 1 &&
                     !strncmp(auth, bearer, sizeof(bearer) - 1),
                 e, HSMCA_EAUTH, "authentication: 'authorization' is not a Bearer token");
    fe_tr_identity id;
    hsmca_code rc = fe_tokenreview_identity(app->tokenreview, auth + sizeof(bearer) - 1,
                                            auth_len - (sizeof(bearer) - 1), now, &id, e);
    if (rc == HSMCA_OK)
        rc = tokenreview_requester(app, &id, out, e);
    if (rc != HSMCA_OK) {
        out->requester[0] = 0;
        return rc;
    }
    return check_body(app, body, len, now, out, e);
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
    Istio__V1__Auth__IstioCertificateResponse resp = ISTIO__V1__AUTH__ISTIO_CERTIFICATE_RESPONSE__INIT;
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

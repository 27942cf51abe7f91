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
#include "fe_policy.h"
#include "fe_tbs.h"
#include "profile.h"

static HSMCA_MUSTCHECK hsmca_code authenticate(const fe_app *app, const char *auth, size_t auth_len, int64_t now,
                               char *identity, size_t idsz, hsmca_err *e)
{
    static const char bearer[] = "Bearer ";
    if (!auth || auth_len == 0)
        return hsmca_fail(e, HSMCA_EAUTH,
                          "authentication: no 'authorization' metadata and no client certificate");
    if (auth_len <= sizeof(bearer) - 1 || strncmp(auth, bearer, sizeof(bearer) - 1) != 0)
        return hsmca_fail(e, HSMCA_EAUTH, "authentication: 'authorization' is not a Bearer token");
    fe_jwt_identity who;
    hsmca_code rc = fe_jwt_verify_cached(app->jwt_cache, app->jwks, &app->jwt_rules, auth + sizeof(bearer) - 1,
                                  auth_len - (sizeof(bearer) - 1), now, &who, e);
    if (rc != HSMCA_OK)
        return rc;
    return policy_spiffe_id(app->policy.trust_domain, who.ns, who.sa, identity, idsz, e);
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
    fe_policy_grant grant;
    rc = fe_apply_policy(app, ids, 1, &csr, req->validity_duration, &grant, e);
    if (rc == HSMCA_OK) {
        fe_tbs_params p = {.ca_cert = app->ca_cert,
                           .sig_nid = app->sig_nid,
                           .subject_key = csr.pubkey,
                           .subject_spki = csr.spki,
                           .uri_san = out->requester,
                           .dns = grant.dns,
                           .n_dns = grant.n_dns,
                           .now = now,
                           .ttl = grant.ttl};
        rc = fe_tbs_build(&p, &out->tbs, &out->tbs_len, e);
    }
    memcpy(out->csr_sha256, csr.der_sha256, 32);
    fe_csr_free(&csr);
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
        rc = authenticate(app, auth, auth_len, now, out->requester, sizeof(out->requester), e);
    }
    if (rc != HSMCA_OK) {
        out->requester[0] = 0; /* nobody was authenticated */
        return rc;
    }
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
    if (rc == HSMCA_OK)
        rc = check_and_build(app, req, now, out, e);
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

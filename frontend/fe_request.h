/* fe_request.h - one CreateCertificate request from bytes to a TBS, and the signed leaf
 * back to a response (fe_request.c). */
#ifndef HSMCA_FE_REQUEST_H
#define HSMCA_FE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "fe_app.h"
#include "fe_auth.h"
#include "hsmca_err.h"
#include "policy.h"

/* The request's metadata Struct: nesting deeper than this is refused (fe_pbcheck.h). */
#define FE_METADATA_MAX_DEPTH 16

/* What a CreateCertificate request becomes once checked: a TBS for the signer. */
typedef struct {
    uint8_t *tbs; /* OPENSSL_malloc'd */
    size_t tbs_len;
    char requester[2 * POLICY_MAX_ID + 4]; /* "" until authenticated; "<caller> as <id>"
                                              for an impersonation (fe_impersonate.h) */
    const char *authenticator;             /* the chain's winner, or on refusal the last that
                                              found credentials ("none" if none did) */
    fe_auth_result who;                    /* who the chain says the caller is */
    uint8_t csr_sha256[32];
    /* For identity binding: a jwt caller's bearer token (without "Bearer "), pointing
     * into the call's metadata (valid as long as the call); NULL for other callers. */
    const char *token;
    size_t token_len;
    /* The ClusterID whose keys verified the token (points into the config); NULL for the
     * local cluster. Goes with the token: the signer verifies with that cluster's keys. */
    const char *cluster;
    /* HSMCA_OK with deferred = 1: an authenticator of the chain must call a remote
     * service (TokenReview) and creds->may_block was 0; nothing else was checked. Run
     * fe_check_request again with may_block = 1 on an authentication thread. */
    int deferred;
} fe_checked_request;

/* Runs steps 2-5 of docs/ARCHITECTURE.md §4 on a request body: authenticate the caller with
 * the authenticator chain (creds: the call's metadata and peer, fe_auth.h), decode
 * and depth-check the request, parse the CSR, apply the SAN and TTL policy, build
 * the TBS. On refusal, e names the check and its code maps to the gRPC status. */
HSMCA_MUSTCHECK hsmca_code fe_check_request(const fe_app *app, const uint8_t *body, size_t len,
                                            const fe_auth_creds *creds, fe_checked_request *out,
                                            hsmca_err *e);

/* The response body for a signed leaf (DER): IstioCertificateResponse with
 * cert_chain = [leaf PEM, chain_tail...]. New buffer (caller frees). */
HSMCA_MUSTCHECK hsmca_code fe_build_response(const fe_app *app, const uint8_t *leaf_der,
                                             size_t leaf_len, uint8_t **out, size_t *out_len,
                                             hsmca_err *e);

#endif

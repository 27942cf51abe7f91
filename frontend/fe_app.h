/* fe_app.h - what the front end loaded at start-up, shared by every call. */
#ifndef HSMCA_FE_APP_H
#define HSMCA_FE_APP_H

#include "config.h"
#include "fe_auth.h"
#include "fe_clientcert.h"
#include "fe_ipc.h"
#include "fe_sigstat.h"
#include "tok_jwt.h"
#include "tok_keys.h"
#include "fe_tokenreview.h"
#include "hsmca_err.h"
#include "policy.h"
#include "policy_file.h"
#include "policy_live.h"
#include <grpc/grpc_security.h>
#include <openssl/x509.h>
#include <stddef.h>
#include <stdint.h>

#define FE_MAX_CHAIN 8
#define FE_METADATA_MAX_DEPTH 16

typedef struct fe_app {
    const hsmca_config *cfg;
    fe_ipc *ipc;
    /* Per cluster (index config_cluster_index: 0 local, i + 1 auth.clusters[i]): the JWT
     * issuer's keys as the supervisor last pushed them and the rules (NULL keys: that
     * cluster has no jwt authenticator), and the TokenReview client (NULL: none). */
    tok_keys *keys[IPC_KEYSETS];
    tok_jwt_rules jwt_rules[IPC_KEYSETS];
    const fe_authenticator *chain[CONFIG_MAX_LIST]; /* auth.chain, in order */
    int n_chain;
    const char *audiences[CONFIG_MAX_LIST];
    policy_rules policy;
    policy_live *policies; /* issuance.policy_file in force (a version's set NULL: none) */
    X509 *ca_cert;
    fe_clientcert *clientcert; /* verifies the client certificates of renewals */
    /* the TokenReview authenticators per cluster; [0] is NULL unless tokenreview is on */
    fe_tokenreview *tokenreview[IPC_KEYSETS];
    int sig_nid;
    /* cert_chain after the leaf: each intermediate, then the root bundle as one
     * element (it may hold several roots during rotation). Each ends in "\n". */
    char *chain_tail[FE_MAX_CHAIN];
    int n_chain_tail;
    fe_sigstat *sigstat; /* the signer's figures (fe_sigstat.h); NULL: out of memory */
} fe_app;

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

typedef struct fe_listener fe_listener;

/* Creates the gRPC server with the TLS credentials (released here) and binds
 * cfg->listen, without accepting yet: the sandbox goes on between the two. */
fe_listener *fe_server_listen(fe_app *app, grpc_server_credentials *creds);

/* Starts serving and runs until *stop becomes non-zero; frees the listener. */
int fe_server_serve(fe_listener *l, volatile int *stop);

#endif

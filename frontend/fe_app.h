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
#include <openssl/x509.h>
#include <stddef.h>
#include <stdint.h>

#define FE_MAX_CHAIN 8

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

#endif

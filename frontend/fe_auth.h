/* fe_auth.h - the authenticator chain (docs/ARCHITECTURE.md §4 step 2).
 *
 * auth.chain names authenticators in order; each looks at the call's
 * credentials and either names the caller or refuses. The first that succeeds
 * wins (Istio's semantics). When none does, the refusal lists every
 * authenticator that ran and why it refused ("client_cert: no client
 * certificate; jwt: JWT expired"); it never quotes a token. */
#ifndef HSMCA_FE_AUTH_H
#define HSMCA_FE_AUTH_H

#include "tok_jwt.h"
#include "hsmca_err.h"
#include "policy.h"
#include <grpc/grpc_security.h>
#include <stddef.h>
#include <stdint.h>

#define FE_AUTH_MAX_IDS 4

struct fe_app;

/* What a call brings: its "authorization" metadata (NULL when absent) and its
 * transport's auth context (the TLS peer: client certificate; NULL in tests). */
typedef struct {
    const char *authorization;
    size_t authorization_len;
    const grpc_auth_context *peer;
    int64_t now;   /* wall clock, seconds */
    int may_block; /* 1 on an authentication thread: an authenticator may call a remote
                      service (bounded by its timeout); 0 on the gRPC threads */
    /* The "clusterid" metadata (istio-agent's ClusterID; NULL when absent): which
     * cluster's authenticators check the token (fe_auth_cluster). */
    const char *cluster_id;
    size_t cluster_id_len;
} fe_auth_creds;

/* Who the caller is, once an authenticator succeeded. */
typedef struct {
    char ids[FE_AUTH_MAX_IDS][POLICY_MAX_ID]; /* SPIFFE IDs the caller may hold */
    int n_ids;
    tok_jwt_identity k8s;       /* token authenticators: namespace, account, pod (else zeroed) */
    const char *authenticator; /* the name of the one that succeeded */
    int cluster;  /* token authenticators: the cluster that vouched (config_cluster_index),
                     0 (local) otherwise */
    int deferred; /* HSMCA_OK, no identity yet: authenticator must block, may_block was 0 */
    /* client_cert: the presented certificate's serial octets and SHA-256 of its issuer
     * Name's DER, for the signer's revocation check (cert_serial_len 0: none) */
    uint8_t cert_serial[20];
    size_t cert_serial_len;
    uint8_t cert_issuer[32];
} fe_auth_result;

/* One authenticator. Returns:
 *   HSMCA_OK        the caller is out->ids (n_ids >= 1); or, only when c->may_block
 *                   is 0, out->deferred = 1: it must call a remote service first;
 *   HSMCA_ENOTFOUND the call carries no credentials of this kind (e says which);
 *   HSMCA_EAUTH     the credentials are there and refused (e names the check);
 *   HSMCA_EUNAVAIL  cannot decide now (keys not loaded, a remote service down):
 *                   the caller should retry, so it wins over EAUTH in the chain.
 * Thread-safe: called on the gRPC completion-queue threads. */
typedef hsmca_code (*fe_auth_fn)(const struct fe_app *app, const fe_auth_creds *c,
                                 fe_auth_result *out, hsmca_err *e);

typedef struct {
    const char *name; /* as in auth.chain */
    fe_auth_fn fn;
} fe_authenticator;

/* The authenticator called name (CONFIG_AUTHENTICATORS), NULL when unknown. */
const fe_authenticator *fe_auth_find(const char *name);

/* Runs app's chain. HSMCA_OK with *out from the first authenticator that succeeded,
 * or with out->deferred when one must block first (run the chain again with
 * may_block on an authentication thread);
 * else HSMCA_EUNAVAIL when any answered that, otherwise HSMCA_EAUTH, with e listing
 * "name: reason" for each that ran. out->authenticator is set either way: the winner,
 * or on refusal the last one that found credentials of its kind ("none" if no one did). */
HSMCA_MUSTCHECK hsmca_code fe_auth_run(const struct fe_app *app, const fe_auth_creds *c,
                                       fe_auth_result *out, hsmca_err *e);

/* The bearer token of the call's "authorization" metadata, for the token
 * authenticators: HSMCA_ENOTFOUND without the metadata, HSMCA_EAUTH when it is not
 * "Bearer <token>"; *token points into c's metadata (len bytes, not terminated). */
HSMCA_MUSTCHECK hsmca_code fe_auth_bearer(const fe_auth_creds *c, const char **token, size_t *len,
                                          hsmca_err *e);

/* The cluster whose authenticators check the call's token (Istio multicluster): *idx 0
 * for no ClusterID or auth.cluster_id, i + 1 for auth.clusters[i]. Any other ClusterID is
 * HSMCA_EAUTH naming it (when it is a well-formed id; never otherwise echoed) and the
 * clusters we know. */
HSMCA_MUSTCHECK hsmca_code fe_auth_cluster(const struct fe_app *app, const fe_auth_creds *c,
                                           int *idx, hsmca_err *e);

/* The authenticators themselves (fe_auth.c, fe_auth_jwt.c). */
HSMCA_MUSTCHECK hsmca_code fe_auth_jwt(const struct fe_app *app, const fe_auth_creds *c,
                                       fe_auth_result *out, hsmca_err *e);
HSMCA_MUSTCHECK hsmca_code fe_auth_client_cert(const struct fe_app *app, const fe_auth_creds *c,
                                               fe_auth_result *out, hsmca_err *e);
HSMCA_MUSTCHECK hsmca_code fe_auth_tokenreview(const struct fe_app *app, const fe_auth_creds *c,
                                               fe_auth_result *out, hsmca_err *e);

#endif

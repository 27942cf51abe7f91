/* signer_bind.c - see signer_bind.h. */
#include "signer_bind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_jwt.h"
#include "tok_keys.h"
#include "ipc_contract.h"
#include "log.h"


struct signer_bind {
    const hsmca_config *cfg;
    /* Per cluster (config_cluster_index), NULL where a cluster has no jwt authenticator:
     * pushed by the supervisor; verified tokens cached by hash (tok_cache), per set. */
    tok_keys *keys[IPC_KEYSETS];
    tok_jwt_rules rules[IPC_KEYSETS];
    const char *audiences[CONFIG_MAX_LIST];
    int required; /* auth.jwt.bind_required */
};

hsmca_code signer_bind_new(const hsmca_config *cfg, signer_bind **out, hsmca_err *e)
{
    *out = NULL;
    if (!cfg->jwt_bind || !config_chain_has(cfg, "jwt")) {
        LOG_EVENT(
            LOG_LVL_INFO, "identity binding off",
            LOG_STR("reason", cfg->jwt_bind ? "no jwt in auth.chain" : "auth.jwt.bind: false"));
        return HSMCA_OK;
    }
    signer_bind *b = calloc(1, sizeof(*b));
    HSMCA_ENSURE(b, e, HSMCA_ENOMEM, "identity binding: out of memory");
    b->cfg = cfg;
    int n = cfg->jwt_audiences.n < CONFIG_MAX_LIST ? cfg->jwt_audiences.n : CONFIG_MAX_LIST;
    for (int i = 0; i < n; i++)
        b->audiences[i] = cfg->jwt_audiences.items[i];
    /* Each cluster's own issuer (and keys): a token of one cluster never verifies as
     * another's, whatever ClusterID the front end names. */
    for (int cl = 0; cl <= cfg->n_clusters && cl < IPC_KEYSETS; cl++) {
        if (!config_cluster_has_jwt(cfg, cl))
            continue;
        if (!(b->keys[cl] = tok_keys_new())) {
            signer_bind_free(b);
            return hsmca_fail(e, HSMCA_ENOMEM, "identity binding: out of memory");
        }
        b->rules[cl] = (tok_jwt_rules){cl ? cfg->clusters[cl - 1].jwt_issuer : cfg->jwt_issuer,
                                      b->audiences, n, cfg->jwt_skew};
    }
    b->required = cfg->jwt_bind_required;
    LOG_EVENT(LOG_LVL_INFO, "identity binding on: jwt callers' tokens are verified again here",
              LOG_STR("unbound", b->required ? "refused (auth.jwt.bind_required)" : "signed"));
    *out = b;
    return HSMCA_OK;
}

void signer_bind_free(signer_bind *b)
{
    if (!b)
        return;
    for (int cl = 0; cl < IPC_KEYSETS; cl++)
        tok_keys_free(b->keys[cl]);
    free(b);
}

hsmca_code signer_bind_load_fd(signer_bind *b, int cluster, int fd, hsmca_err *e)
{
    if (!b)
        return HSMCA_OK; /* binding off: the keys are not ours to hold */
    HSMCA_ENSURE(cluster >= 0 && cluster < IPC_KEYSETS && b->keys[cluster], e, HSMCA_EINVAL,
                 "identity binding: keys for cluster %d, which has no jwt authenticator", cluster);
    HSMCA_GUARD(tok_keys_load_fd(b->keys[cluster], fd, e));
    LOG_EVENT(LOG_LVL_INFO, "identity binding: issuer keys received",
              LOG_STR("cluster", config_cluster_name(b->cfg, cluster)),
              LOG_UINT("generation", tok_keys_generation(b->keys[cluster])));
    return HSMCA_OK;
}

/* 1 when sans begins with the URI SAN "uri:spiffe://<td>/ns/<ns>/sa/<sa>" for one of
 * the policy's trust domains. The validator let exactly one URI SAN through and only as
 * the first name (tbs_san_uri), and SPIFFE IDs hold no ',' (policy_spiffe_id_check), so
 * the first name ends at ',' or at the end of the text. */
static int san_is_identity(const tbs_policy *pol, const tok_jwt_identity *id, const char *sans)
{
    char want[32 + 3 * TOK_K8S_NAME_MAX + 64];
    for (int i = 0; i < pol->n_trust_domains && i < PROFILE_MAX_NAMES; i++) {
        int n = snprintf(want, sizeof(want), "uri:spiffe://%s/ns/%s/sa/%s", pol->trust_domains[i],
                         id->ns, id->sa);
        if (n <= 0 || (size_t)n >= sizeof(want))
            continue;
        if (strncmp(sans, want, (size_t)n) == 0 && (sans[n] == '\0' || sans[n] == ','))
            return 1;
    }
    return 0;
}

hsmca_code signer_bind_check(signer_bind *b, const tbs_policy *pol, const char *authenticator,
                             const char *token, size_t token_len, const char *cluster,
                             const char *sans, int64_t now, int *bound, hsmca_err *e)
{
    *bound = 0;
    if (!b)
        return HSMCA_OK;
    if (strcmp(authenticator, "jwt") != 0) {
        /* The front end's word that no token was involved: a lie here is the residual the
         * rate limit bounds (signer_bind.h), unless the operator requires binding. */
        HSMCA_ENSURE(!b->required, e, HSMCA_EPERM,
                     "identity binding: a request from authenticator \"%.32s\" cannot be bound "
                     "and auth.jwt.bind_required is on",
                     authenticator[0] ? authenticator : "(none)");
        return HSMCA_OK;
    }
    HSMCA_ENSURE(token_len > 0, e, HSMCA_EAUTH,
                 "identity binding: a jwt caller's request came without its token");
    /* The front end's word for the cluster picks whose keys verify the token: naming
     * another cluster than the token's only makes the token fail to verify. */
    size_t clen = cluster ? strlen(cluster) : 0;
    HSMCA_ENSURE(clen == 0 || config_cluster_id_ok(cluster, clen), e, HSMCA_EAUTH,
                 "identity binding: the token's cluster is not a cluster name");
    int cl = config_cluster_index(b->cfg, cluster, clen);
    HSMCA_ENSURE(cl >= 0 && cl < IPC_KEYSETS && b->keys[cl], e, HSMCA_EAUTH,
                 "identity binding: the token's cluster \"%.63s\" has no jwt authenticator here",
                 cluster ? cluster : "");
    tok_jwt_identity id;
    int unknown_kid = 0;
    hsmca_err why;
    hsmca_code rc =
        tok_keys_verify(b->keys[cl], &b->rules[cl], token, token_len, now, &id, &unknown_kid, &why);
    if (rc == HSMCA_EUNAVAIL)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "identity binding: %s", why.msg);
    if (rc != HSMCA_OK)
        return hsmca_fail(e, HSMCA_EAUTH, "identity binding: the forwarded token: %s", why.msg);
    HSMCA_ENSURE(san_is_identity(pol, &id, sans), e, HSMCA_EPERM,
                 "identity binding: the URI SAN is not the token's identity (ns %.64s, sa %.64s)",
                 id.ns, id.sa);
    *bound = 1;
    return HSMCA_OK;
}

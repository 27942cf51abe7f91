/* config_cluster.c - the multicluster helpers of config.h: which cluster a call's
 * ClusterID names, and the per-cluster view of the config that the key fetcher, the
 * TokenReview client and the signer's binder are built from. */
#include "config.h"

#include <string.h>

int config_cluster_id_ok(const char *id, size_t len)
{
    if (len < 1 || len > CONFIG_MAX_CLUSTER_ID)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = id[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return 0;
    }
    return 1;
}

static int same_id(const char *a, const char *id, size_t len)
{
    return strlen(a) == len && memcmp(a, id, len) == 0;
}

int config_cluster_index(const hsmca_config *c, const char *id, size_t len)
{
    /* Istio (pilot/pkg/security/server/authenticate: KubeJWTAuthenticator): no
     * ClusterID, or the local one, is the local cluster. */
    if (!id || len == 0 || same_id(c->cluster_id, id, len))
        return 0;
    for (int i = 0; i < c->n_clusters && i < CONFIG_MAX_CLUSTERS; i++)
        if (same_id(c->clusters[i].id, id, len))
            return i + 1;
    return -1;
}

const char *config_cluster_name(const hsmca_config *c, int idx)
{
    if (idx <= 0 || idx > c->n_clusters)
        return c->cluster_id;
    return c->clusters[idx - 1].id;
}

void config_cluster_view(const hsmca_config *c, int idx, hsmca_config *out)
{
    if (out != c)
        memcpy(out, c, sizeof(*out));
    if (idx <= 0 || idx > c->n_clusters)
        return;
    const config_cluster *cl = &c->clusters[idx - 1];
    memcpy(out->jwt_issuer, cl->jwt_issuer, sizeof(out->jwt_issuer));
    memcpy(out->jwks_file, cl->jwks_file, sizeof(out->jwks_file));
    out->jwt_discovery = cl->jwt_discovery;
    memcpy(out->jwt_ca_bundle, cl->jwt_ca_bundle, sizeof(out->jwt_ca_bundle));
    memcpy(out->jwt_fetch_token_file, cl->jwt_fetch_token_file, sizeof(out->jwt_fetch_token_file));
    memcpy(out->tr_kubeconfig, cl->tr_kubeconfig, sizeof(out->tr_kubeconfig));
}

int config_cluster_has_jwt(const hsmca_config *c, int idx)
{
    if (!config_chain_has(c, "jwt") || idx < 0 || idx > c->n_clusters)
        return 0;
    return idx == 0 || c->clusters[idx - 1].jwt_issuer[0] != '\0';
}

int config_cluster_has_tokenreview(const hsmca_config *c, int idx)
{
    if (!config_tokenreview_on(c) || idx < 0 || idx > c->n_clusters)
        return 0;
    return idx == 0 || c->clusters[idx - 1].tr_kubeconfig[0] != '\0';
}

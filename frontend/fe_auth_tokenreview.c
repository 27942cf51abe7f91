/* fe_auth_tokenreview.c - the Kubernetes TokenReview authenticator: the bearer token
 * of the "authorization" metadata, as the API server judges it (fe_tokenreview.h).
 *
 * On a gRPC completion-queue thread it answers from its cache only; a miss defers
 * the call to an authentication thread (fe_authpool.h), where the chain runs again
 * with may_block and this asks the API server, within auth.tokenreview.timeout.
 *
 * The API server asked is the one of the caller's cluster (its ClusterID metadata,
 * fe_auth_cluster); each cluster's client has its own cache, so a token one cluster
 * approved is never a cache hit for another. */
#include "fe_auth.h"

#include <stdio.h>
#include <string.h>

#include "fe_app.h"

hsmca_code fe_auth_tokenreview(const struct fe_app *app, const fe_auth_creds *c,
                               fe_auth_result *out, hsmca_err *e)
{
    const char *token;
    size_t len;
    int cl = 0;
    HSMCA_GUARD(fe_auth_bearer(c, &token, &len, e));
    HSMCA_GUARD(fe_auth_cluster(app, c, &cl, e));
    fe_tokenreview *tr = app->tokenreview[cl];
    if (!tr && cl)
        return hsmca_fail(e, HSMCA_EAUTH,
                          "the caller's cluster has no tokenreview authenticator (auth.clusters)");
    if (!tr)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "not configured");
    fe_tr_identity id;
    if (!fe_tokenreview_cached(tr, token, len, c->now, &id)) {
        if (!c->may_block) {
            out->deferred = 1;
            return HSMCA_OK;
        }
        HSMCA_GUARD(fe_tokenreview_identity(tr, token, len, c->now, &id, e));
    }
    out->cluster = cl;
    snprintf(out->k8s.ns, sizeof(out->k8s.ns), "%s", id.ns);
    snprintf(out->k8s.sa, sizeof(out->k8s.sa), "%s", id.sa);
    snprintf(out->k8s.pod_name, sizeof(out->k8s.pod_name), "%s", id.pod_name);
    snprintf(out->k8s.pod_uid, sizeof(out->k8s.pod_uid), "%s", id.pod_uid);
    HSMCA_GUARD(policy_spiffe_id(app->policy.trust_domain, id.ns, id.sa, out->ids[0],
                                 sizeof(out->ids[0]), e));
    out->n_ids = 1;
    return HSMCA_OK;
}

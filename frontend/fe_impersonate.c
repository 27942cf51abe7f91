/* fe_impersonate.c - see fe_impersonate.h. The two reads, Kubernetes API
 * reference (Pod v1, "get" and "list" operations):
 *   GET /api/v1/namespaces/{namespace}/pods/{name}            -> Pod
 *   GET /api/v1/namespaces/{namespace}/pods?fieldSelector=... -> PodList
 * Istio reads the same through an informer indexed by node name; hsmca has no
 * watch, so it asks at request time (on an authentication thread, bounded by
 * auth.tokenreview.timeout each). */
#include "fe_impersonate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_app.h"
#include "fe_k8spods.h"
#include "util.h"

/* A path segment that needs no escaping: Kubernetes names are [a-z0-9.-]. */
static int plain(const char *s)
{
    return s[0] && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") == strlen(s);
}

/* From the API server of the caller's cluster (Istio looks the pods up in the cluster
 * the node's token came from). */
static HSMCA_MUSTCHECK hsmca_code api_get(fe_tokenreview *tr, const char *path, int allow_404,
                                          char **resp, size_t *resp_len, int *status, hsmca_err *e)
{
    HSMCA_GUARD(fe_tokenreview_api_get(tr, path, FE_K8S_MAX_PODLIST, status, resp, resp_len, e));
    if (*status == 200 || (allow_404 && *status == 404))
        return HSMCA_OK;
    free(*resp);
    *resp = NULL;
    if (*status == 401 || *status == 403)
        return hsmca_fail(e, HSMCA_EUNAVAIL,
                          "impersonation: the API server refused hsmca's own credentials (HTTP "
                          "%d): they need get and list on pods",
                          *status);
    return hsmca_fail(e, HSMCA_EUNAVAIL, "impersonation: the API server answered HTTP %d", *status);
}

/* The node the caller's pod runs on. */
static HSMCA_MUSTCHECK hsmca_code caller_node(fe_tokenreview *tr, const tok_jwt_identity *k,
                                              char node[FE_K8S_NODE_MAX + 1], hsmca_err *e)
{
    char path[1024];
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", k->ns, k->pod_name);
    char *resp = NULL;
    size_t n = 0;
    int status = 0;
    HSMCA_GUARD(api_get(tr, path, 1, &resp, &n, &status, e));
    hsmca_code rc = status == 404 ? hsmca_fail(e, HSMCA_EPERM,
                                               "impersonation: the caller's pod %s/%s does not "
                                               "exist",
                                               k->ns, k->pod_name)
                                  : fe_k8s_parse_pod(resp, n, k->pod_uid, k->sa, node, e);
    free(resp);
    return rc;
}

hsmca_code fe_impersonate(const fe_app *app, const fe_auth_creds *c, fe_auth_result *who,
                          const char *requested, size_t len, int *deferred, hsmca_err *e)
{
    *deferred = 0;
    const hsmca_config *cfg = app->cfg;
    const char *trusted[CONFIG_MAX_LIST];
    for (int i = 0; i < cfg->trusted_node_accounts.n; i++)
        trusted[i] = cfg->trusted_node_accounts.items[i];
    HSMCA_ENSURE(who->k8s.ns[0] && fe_k8s_trusted_node(trusted, cfg->trusted_node_accounts.n,
                                                       who->k8s.ns, who->k8s.sa),
                 e, HSMCA_EPERM,
                 "impersonation: caller %s is not a trusted node account "
                 "(auth.trusted_node_accounts)",
                 who->ids[0]);
    char ns[POLICY_NS_MAX + 1], sa[POLICY_SA_MAX + 1];
    HSMCA_GUARD(fe_k8s_parse_impersonated(cfg->trust_domain, requested, len, ns, sa, e));
    HSMCA_ENSURE(who->k8s.pod_name[0] && who->k8s.pod_uid[0] && plain(who->k8s.pod_name) &&
                     plain(who->k8s.ns),
                 e, HSMCA_EPERM,
                 "impersonation: caller %s's token names no pod (a pod-bound token is needed)",
                 who->ids[0]);
    fe_tokenreview *tr =
        who->cluster >= 0 && who->cluster < IPC_KEYSETS ? app->tokenreview[who->cluster] : NULL;
    HSMCA_ENSURE(tr, e, HSMCA_EPERM,
                 "impersonation: needs tokenreview in auth.chain for the caller's cluster (its API "
                 "server)");
    if (!c->may_block) {
        *deferred = 1;
        return HSMCA_OK;
    }
    char node[FE_K8S_NODE_MAX + 1];
    HSMCA_GUARD(caller_node(tr, &who->k8s, node, e));
    char path[1024];
    snprintf(path, sizeof(path),
             "/api/v1/namespaces/%s/pods?fieldSelector=spec.nodeName%%3D%s%%2Cstatus.phase%%3D"
             "Running",
             ns, node);
    char *resp = NULL;
    size_t n = 0;
    int status = 0, found = 0;
    HSMCA_GUARD(api_get(tr, path, 0, &resp, &n, &status, e));
    hsmca_code rc = fe_k8s_parse_podlist(resp, n, ns, sa, node, &found, e);
    free(resp);
    HSMCA_GUARD(rc);
    HSMCA_ENSURE(found, e, HSMCA_EPERM,
                 "impersonation: no running pod of service account %s/%s on node %s, where "
                 "the caller's pod is",
                 ns, sa, node);
    snprintf(who->ids[0], sizeof(who->ids[0]), "%.*s", (int)len, requested);
    who->n_ids = 1;
    return HSMCA_OK;
}

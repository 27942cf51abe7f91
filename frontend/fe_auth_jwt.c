/* fe_auth_jwt.c - the bearer-JWT authenticator: the token of the "authorization"
 * metadata verified against the keys of the issuer of the caller's cluster (its
 * ClusterID metadata, fe_auth_cluster) that the supervisor pushed (tok_keys.h), and the
 * Kubernetes service account it names made a SPIFFE ID. */
#include "fe_auth.h"

#include "fe_app.h"
#include "tok_keys.h"

hsmca_code fe_auth_jwt(const struct fe_app *app, const fe_auth_creds *c, fe_auth_result *out,
                       hsmca_err *e)
{
    const char *token;
    size_t len;
    int cl = 0;
    HSMCA_GUARD(fe_auth_bearer(c, &token, &len, e));
    HSMCA_GUARD(fe_auth_cluster(app, c, &cl, e));
    if (!app->keys[cl])
        return hsmca_fail(e, cl ? HSMCA_EAUTH : HSMCA_EUNAVAIL, "%s",
                          cl ? "the caller's cluster has no jwt authenticator (auth.clusters)"
                             : "JWT issuer keys not loaded yet");
    int unknown_kid = 0;
    hsmca_code rc = tok_keys_verify(app->keys[cl], &app->jwt_rules[cl], token, len, c->now,
                                   &out->k8s, &unknown_kid, e);
    /* The issuer may have rotated its keys since the last fetch: ask the supervisor
     * (it fetches at most once per auth.jwt.min_refresh, so a stream of made-up kids
     * costs the issuer nothing). This call is refused; a retry after the push passes. */
    if (unknown_kid && app->ipc)
        fe_ipc_ask_keys(app->ipc, app->cfg ? app->cfg->jwt_min_refresh : 30);
    if (rc != HSMCA_OK)
        return rc;
    out->cluster = cl;
    rc = policy_spiffe_id(app->policy.trust_domain, out->k8s.ns, out->k8s.sa, out->ids[0],
                          sizeof(out->ids[0]), e);
    if (rc == HSMCA_OK)
        out->n_ids = 1;
    return rc;
}

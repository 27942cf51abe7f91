/* fe_auth_jwt.c - the bearer-JWT authenticator: the token of the "authorization"
 * metadata verified against the issuer's keys the supervisor pushed (fe_keys.h),
 * and the Kubernetes service account it names made a SPIFFE ID. */
#include "fe_auth.h"

#include "fe_app.h"
#include "fe_keys.h"

hsmca_code fe_auth_jwt(const struct fe_app *app, const fe_auth_creds *c, fe_auth_result *out,
                       hsmca_err *e)
{
    const char *token;
    size_t len;
    HSMCA_GUARD(fe_auth_bearer(c, &token, &len, e));
    if (!app->keys)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "JWT issuer keys not loaded yet");
    int unknown_kid = 0;
    hsmca_code rc =
        fe_keys_verify(app->keys, &app->jwt_rules, token, len, c->now, &out->k8s, &unknown_kid, e);
    /* The issuer may have rotated its keys since the last fetch: ask the supervisor
     * (it fetches at most once per auth.jwt.min_refresh, so a stream of made-up kids
     * costs the issuer nothing). This call is refused; a retry after the push passes. */
    if (unknown_kid && app->ipc)
        fe_ipc_ask_keys(app->ipc, app->cfg ? app->cfg->jwt_min_refresh : 30);
    if (rc != HSMCA_OK)
        return rc;
    rc = policy_spiffe_id(app->policy.trust_domain, out->k8s.ns, out->k8s.sa, out->ids[0],
                          sizeof(out->ids[0]), e);
    if (rc == HSMCA_OK)
        out->n_ids = 1;
    return rc;
}

/* fe_auth.c - see fe_auth.h: the chain, and the table of authenticators. */
#include "fe_auth.h"

#include <stdio.h>
#include <string.h>

#include "fe_app.h"

static const fe_authenticator fe_authenticators[] = {
    {"client_cert", fe_auth_client_cert},
    {"jwt", fe_auth_jwt},
    {"tokenreview", fe_auth_tokenreview},
};

const fe_authenticator *fe_auth_find(const char *name)
{
    for (size_t i = 0; i < sizeof(fe_authenticators) / sizeof(fe_authenticators[0]); i++)
        if (!strcmp(fe_authenticators[i].name, name))
            return &fe_authenticators[i];
    return NULL;
}

hsmca_code fe_auth_bearer(const fe_auth_creds *c, const char **token, size_t *len, hsmca_err *e)
{
    static const char bearer[] = "Bearer ";
    if (!c->authorization || c->authorization_len == 0)
        return hsmca_fail(e, HSMCA_ENOTFOUND, "no 'authorization' metadata");
    if (c->authorization_len <= sizeof(bearer) - 1 ||
        strncmp(c->authorization, bearer, sizeof(bearer) - 1) != 0)
        return hsmca_fail(e, HSMCA_EAUTH, "'authorization' is not a Bearer token");
    *token = c->authorization + sizeof(bearer) - 1;
    *len = c->authorization_len - (sizeof(bearer) - 1);
    return HSMCA_OK;
}

hsmca_code fe_auth_cluster(const struct fe_app *app, const fe_auth_creds *c, int *idx, hsmca_err *e)
{
    const hsmca_config *cfg = app->cfg;
    *idx = 0;
    if (!cfg || !c->cluster_id || c->cluster_id_len == 0)
        return HSMCA_OK;
    *idx = config_cluster_index(cfg, c->cluster_id, c->cluster_id_len);
    if (*idx >= 0)
        return HSMCA_OK;
    /* Istio's words (KubeJWTAuthenticator.authenticate); the id is echoed only once it
     * is known to be short and plain. */
    char remote[CONFIG_MAX_CLUSTERS * (CONFIG_MAX_CLUSTER_ID + 1) + 1] = "";
    for (int i = 0; i < cfg->n_clusters && i < CONFIG_MAX_CLUSTERS; i++) {
        size_t off = strlen(remote);
        snprintf(remote + off, sizeof(remote) - off, "%s%s", i ? " " : "", cfg->clusters[i].id);
    }
    if (!config_cluster_id_ok(c->cluster_id, c->cluster_id_len))
        return hsmca_fail(e, HSMCA_EAUTH,
                          "the ClusterID metadata is not a cluster name (1-%d of A-Z a-z 0-9 . _ "
                          "-); we know local cluster \"%s\" and remote clusters [%s]",
                          CONFIG_MAX_CLUSTER_ID, cfg->cluster_id, remote);
    return hsmca_fail(e, HSMCA_EAUTH,
                      "client claims to be in cluster \"%.*s\", but we only know about local "
                      "cluster \"%s\" and remote clusters [%s]",
                      (int)c->cluster_id_len, c->cluster_id, cfg->cluster_id, remote);
}

/* The certificate the caller presented in its TLS handshake, verified to our CA
 * (fe_clientcert.h): Istio's renewal path, and VMs. */
hsmca_code fe_auth_client_cert(const struct fe_app *app, const fe_auth_creds *c,
                               fe_auth_result *out, hsmca_err *e)
{
    if (!fe_clientcert_presented(c->peer))
        return hsmca_fail(e, HSMCA_ENOTFOUND, "no client certificate");
    HSMCA_GUARD(fe_clientcert_identity(app->clientcert, c->peer, c->now, out->ids[0],
                                       sizeof(out->ids[0]), e));
    out->n_ids = 1;
    /* The signer refuses a renewal by a certificate it revoked: it needs which one. */
    HSMCA_GUARD(fe_clientcert_ref(c->peer, out->cert_serial, &out->cert_serial_len,
                                  out->cert_issuer, e));
    return HSMCA_OK;
}

/* Appends "name: reason" to the refusal list buf (sz bytes), "; "-separated; a list
 * that does not fit ends in "..." rather than losing an authenticator's name. */
static void append_reason(char *buf, size_t sz, const char *name, const char *reason)
{
    size_t off = strlen(buf);
    if (off >= sz - 1)
        return;
    int n = snprintf(buf + off, sz - off, "%s%s: %s", off ? "; " : "", name, reason);
    if (n < 0 || (size_t)n >= sz - off)
        memcpy(buf + sz - 4, "...", 4);
}

hsmca_code fe_auth_run(const struct fe_app *app, const fe_auth_creds *c, fe_auth_result *out,
                       hsmca_err *e)
{
    char reasons[sizeof(e->msg)] = "";
    int unavailable = 0;
    memset(out, 0, sizeof(*out));
    out->authenticator = "none";
    const char *tried = "none";
    for (int i = 0; i < app->n_chain; i++) {
        const fe_authenticator *a = app->chain[i];
        fe_auth_result r;
        memset(&r, 0, sizeof(r));
        hsmca_err ae;
        hsmca_err_clear(&ae);
        hsmca_code rc = a->fn(app, c, &r, &ae);
        if (rc == HSMCA_OK && (r.n_ids >= 1 || (r.deferred && !c->may_block))) {
            *out = r;
            out->authenticator = a->name;
            return HSMCA_OK;
        }
        if (rc == HSMCA_OK) /* a bug: success without an identity is a refusal */
            hsmca_fail(&ae, HSMCA_EINTERNAL, "named no identity");
        if (rc != HSMCA_ENOTFOUND)
            tried = a->name;
        unavailable |= rc == HSMCA_EUNAVAIL;
        append_reason(reasons, sizeof(reasons) - 20, a->name, ae.msg[0] ? ae.msg : "refused");
    }
    out->authenticator = tried;
    if (app->n_chain == 0)
        snprintf(reasons, sizeof(reasons), "no authenticator configured");
    return hsmca_fail(e, unavailable ? HSMCA_EUNAVAIL : HSMCA_EAUTH, "authentication: %s", reasons);
}

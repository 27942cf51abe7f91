/* config_auth.c - `hsmca config check`'s checks of what authentication and issuance
 * read at start (config_check.h): the SAN policy file (policy_file_load, the loader of
 * the front end and the signer), each cluster's issuer keys (tok_jwks_parse, as the
 * supervisor and the children parse them), its CA bundle and fetch token, and its
 * kubeconfig (kubeconfig_load, the front end's reader, built into hsmca for this). */
#include "config_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/x509.h>

#include "ca_util.h"
#include "kubeconfig.h"
#include "policy_file.h"
#include "tok_jwks.h"
#include "util.h"

static void check_policy(const hsmca_config *c, cc_report *r)
{
    policy_set *p = NULL;
    hsmca_err e;
    if (!c->policy_file[0])
        return;
    if (policy_file_load(c->policy_file, &p, &e) != HSMCA_OK)
        cc_problem(r, "issuance.policy_file", "%s", e.msg);
    policy_set_free(p);
}

static void check_jwks(cc_report *r, const char *key, const char *path)
{
    char *doc = NULL;
    size_t len = 0;
    tok_jwks *ks = NULL;
    hsmca_err e;
    if (util_read_file(path, TOK_JWKS_MAX_LEN, &doc, &len, &e) != HSMCA_OK)
        cc_problem(r, key, "%s", e.msg);
    else if (tok_jwks_parse(doc, len, &ks, &e) != HSMCA_OK)
        cc_problem(r, key, "%s: %s", path, e.msg);
    tok_jwks_free(ks);
    free(doc);
}

static void check_exists(cc_report *r, const char *key, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        cc_problem(r, key, "%s: %s", path, strerror(errno));
}

/* The jwt sources of cluster idx (v: its view), keys under prefix ("auth.jwt",
 * "auth.clusters[0].jwt"). */
static void check_jwt(const hsmca_config *v, const char *prefix, cc_report *r)
{
    char key[96];
    hsmca_err e;
    if (v->jwks_file[0]) {
        snprintf(key, sizeof(key), "%.64s.jwks_file", prefix);
        check_jwks(r, key, v->jwks_file);
    }
    if (v->jwt_ca_bundle[0]) {
        STACK_OF(X509) *certs = certfile_load(v->jwt_ca_bundle, v->jwt_ca_bundle, &e);
        snprintf(key, sizeof(key), "%.64s.ca_bundle", prefix);
        if (!certs)
            cc_problem(r, key, "%s", e.msg);
        sk_X509_pop_free(certs, X509_free);
    }
    if (v->jwt_fetch_token_file[0]) {
        snprintf(key, sizeof(key), "%.64s.fetch_token_file", prefix);
        check_exists(r, key, v->jwt_fetch_token_file);
    }
}

static void check_kubeconfig(cc_report *r, const char *key, const char *path)
{
    k8s_target t;
    hsmca_err e;
    if (kubeconfig_load(path, &t, &e) != HSMCA_OK)
        cc_problem(r, key, "%s: %s", path, e.msg);
    else
        k8s_target_clear(&t);
}

void cc_check_auth(const hsmca_config *c, cc_report *r)
{
    check_policy(c, r);
    hsmca_config *v = malloc(sizeof(*v));
    if (!v) {
        cc_problem(r, "auth", "out of memory");
        return;
    }
    char prefix[64], key[96];
    for (int idx = 0; idx <= c->n_clusters && idx <= CONFIG_MAX_CLUSTERS; idx++) {
        config_cluster_view(c, idx, v);
        if (idx == 0)
            snprintf(prefix, sizeof(prefix), "auth");
        else
            snprintf(prefix, sizeof(prefix), "auth.clusters[%d]", idx - 1);
        if (config_cluster_has_jwt(c, idx)) {
            snprintf(key, sizeof(key), "%s.jwt", prefix);
            check_jwt(v, key, r);
        }
        if (config_cluster_has_tokenreview(c, idx) && v->tr_kubeconfig[0]) {
            snprintf(key, sizeof(key), "%s.tokenreview.kubeconfig", prefix);
            check_kubeconfig(r, key, v->tr_kubeconfig);
        }
    }
    free(v);
    /* serve loads it at start when it runs publish-roots itself (supervisor/sup_publish.h). */
    if (c->publish_enabled && c->publish_kubeconfig[0])
        check_kubeconfig(r, "publish.kubeconfig", c->publish_kubeconfig);
    else if (c->publish_enabled && !getenv("KUBERNETES_SERVICE_HOST"))
        cc_warn(r, "publish.kubeconfig",
                "empty: serve takes the in-cluster config, and KUBERNETES_SERVICE_HOST is not "
                "set here (serve outside a pod refuses to start with publish.enabled)");
}

/* kubeconfig.c - see kubeconfig.h.
 *
 * A kubeconfig (https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/)
 * is read with libyaml's document API: it is a local file the operator wrote,
 * capped in size; only the keys named below are looked at. */
#include "kubeconfig.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <yaml.h>

#include "util.h"
#include "yaml_strict.h"

static const char *scalar(yaml_document_t *d, yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value of key in mapping m, or NULL. */
static yaml_node_t *map_get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(d, yaml_document_get_node(d, p->key));
        if (k && !strcmp(k, key))
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

static const char *map_str(yaml_document_t *d, yaml_node_t *m, const char *key)
{
    const char *s = scalar(d, map_get(d, m, key));
    return s && *s ? s : NULL;
}

/* The `inner` mapping of the element of list `list` whose name is `name`
 * (contexts[].context, clusters[].cluster, users[].user). */
static yaml_node_t *named(yaml_document_t *d, yaml_node_t *root, const char *list, const char *name,
                          const char *inner)
{
    yaml_node_t *seq = map_get(d, root, list);
    if (!seq || seq->type != YAML_SEQUENCE_NODE)
        return NULL;
    for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top;
         i++) {
        yaml_node_t *el = yaml_document_get_node(d, *i);
        const char *n = map_str(d, el, "name");
        if (n && !strcmp(n, name))
            return map_get(d, el, inner);
    }
    return NULL;
}

/* data (base64 in the file) or the file at path (relative to dir) into *out. */
static HSMCA_MUSTCHECK hsmca_code data_or_file(const char *dir, const char *data, const char *path,
                                               const char *key, char **out, size_t *len,
                                               hsmca_err *e)
{
    if (data) {
        *out = (char *)util_b64_decode(data, strlen(data), len);
        HSMCA_ENSURE(*out, e, HSMCA_EINVAL, "kubeconfig: %s-data is not base64", key);
        char *z = realloc(*out, *len + 1); /* NUL-terminated like a file read */
        if (!z)
            return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        z[*len] = 0;
        *out = z;
        return HSMCA_OK;
    }
    char full[1024];
    if (path[0] == '/')
        snprintf(full, sizeof(full), "%s", path);
    else
        snprintf(full, sizeof(full), "%s/%s", dir, path);
    hsmca_code rc = util_read_file(full, K8S_MAX_FILE, out, len, e);
    if (rc != HSMCA_OK)
        return hsmca_fail(e, rc, "kubeconfig: %s: %s", key, e->msg);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code read_token(const char *path, char **out, hsmca_err *e)
{
    size_t len;
    HSMCA_GUARD(util_read_file(path, K8S_MAX_FILE, out, &len, e));
    while (len && ((*out)[len - 1] == '\n' || (*out)[len - 1] == '\r'))
        (*out)[--len] = 0;
    HSMCA_ENSURE(len > 0, e, HSMCA_EINVAL, "kubernetes token file %s is empty", path);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code load_cluster(yaml_document_t *d, yaml_node_t *cl, const char *dir,
                                               k8s_target *t, hsmca_err *e)
{
    const char *server = map_str(d, cl, "server");
    HSMCA_ENSURE(server && !strncmp(server, "https://", 8), e, HSMCA_EINVAL,
                 "kubeconfig: cluster.server must be an https:// URL");
    HSMCA_ENSURE(strlen(server) < sizeof(t->server), e, HSMCA_EINVAL,
                 "kubeconfig: cluster.server is too long");
    snprintf(t->server, sizeof(t->server), "%s", server);
    size_t n = strlen(t->server);
    while (n > 8 && t->server[n - 1] == '/')
        t->server[--n] = 0;
    const char *skip = map_str(d, cl, "insecure-skip-tls-verify");
    HSMCA_ENSURE(!skip || !strcmp(skip, "false"), e, HSMCA_EINVAL,
                 "kubeconfig: insecure-skip-tls-verify is refused: the API server's answers "
                 "decide who gets a certificate");
    const char *ca_data = map_str(d, cl, "certificate-authority-data");
    const char *ca_file = map_str(d, cl, "certificate-authority");
    HSMCA_ENSURE(ca_data || ca_file, e, HSMCA_EINVAL,
                 "kubeconfig: cluster.certificate-authority[-data] is required");
    return data_or_file(dir, ca_data, ca_file, "certificate-authority", &t->ca_pem, &t->ca_len, e);
}

static HSMCA_MUSTCHECK hsmca_code load_user(yaml_document_t *d, yaml_node_t *u, const char *dir,
                                            k8s_target *t, hsmca_err *e)
{
    HSMCA_ENSURE(!map_get(d, u, "exec") && !map_get(d, u, "auth-provider"), e, HSMCA_EINVAL,
                 "kubeconfig: user.exec and user.auth-provider are not supported (use a token, "
                 "tokenFile or a client certificate)");
    const char *tok = map_str(d, u, "token");
    const char *tok_file = map_str(d, u, "tokenFile");
    if (tok) {
        if (!(t->token = strdup(tok)))
            return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    } else if (tok_file) {
        char full[1024];
        snprintf(full, sizeof(full), "%s%s%s", tok_file[0] == '/' ? "" : dir,
                 tok_file[0] == '/' ? "" : "/", tok_file);
        HSMCA_GUARD(read_token(full, &t->token, e));
    }
    const char *cd = map_str(d, u, "client-certificate-data");
    const char *cf = map_str(d, u, "client-certificate");
    const char *kd = map_str(d, u, "client-key-data");
    const char *kf = map_str(d, u, "client-key");
    HSMCA_ENSURE(!(cd || cf) == !(kd || kf), e, HSMCA_EINVAL,
                 "kubeconfig: user.client-certificate and user.client-key go together");
    if (cd || cf) {
        HSMCA_GUARD(data_or_file(dir, cd, cf, "client-certificate", &t->cert_pem, &t->cert_len, e));
        HSMCA_GUARD(data_or_file(dir, kd, kf, "client-key", &t->key_pem, &t->key_len, e));
    }
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code load_doc(yaml_document_t *d, const char *dir, k8s_target *t,
                                           hsmca_err *e)
{
    yaml_node_t *root = yaml_document_get_root_node(d);
    HSMCA_ENSURE(root && root->type == YAML_MAPPING_NODE, e, HSMCA_EINVAL,
                 "kubeconfig: not a mapping");
    const char *cur = map_str(d, root, "current-context");
    HSMCA_ENSURE(cur, e, HSMCA_EINVAL, "kubeconfig: current-context is required");
    yaml_node_t *ctx = named(d, root, "contexts", cur, "context");
    HSMCA_ENSURE(ctx, e, HSMCA_EINVAL, "kubeconfig: no context named by current-context");
    const char *cl_name = map_str(d, ctx, "cluster");
    const char *u_name = map_str(d, ctx, "user");
    yaml_node_t *cl = cl_name ? named(d, root, "clusters", cl_name, "cluster") : NULL;
    HSMCA_ENSURE(cl, e, HSMCA_EINVAL, "kubeconfig: the current context's cluster is not defined");
    HSMCA_GUARD(load_cluster(d, cl, dir, t, e));
    if (!u_name)
        return HSMCA_OK; /* anonymous: the API server must allow it (it rarely does) */
    yaml_node_t *u = named(d, root, "users", u_name, "user");
    HSMCA_ENSURE(u, e, HSMCA_EINVAL, "kubeconfig: the current context's user is not defined");
    return load_user(d, u, dir, t, e);
}

hsmca_code kubeconfig_load(const char *path, k8s_target *t, hsmca_err *e)
{
    memset(t, 0, sizeof(*t));
    char *buf = NULL;
    size_t len;
    HSMCA_GUARD(util_read_file(path, K8S_MAX_FILE, &buf, &len, e));
    char pathcopy[1024];
    snprintf(pathcopy, sizeof(pathcopy), "%s", path);
    const char *dir = dirname(pathcopy);

    yaml_parser_t p;
    yaml_document_t d;
    hsmca_code rc = yaml_strict_check(path, "kubeconfig", buf, len, e);
    if (rc != HSMCA_OK) {
        OPENSSL_cleanse(buf, len);
        free(buf);
        return rc;
    }
    if (!yaml_parser_initialize(&p)) {
        OPENSSL_cleanse(buf, len);
        free(buf);
        return hsmca_fail(e, HSMCA_ENOMEM, "kubeconfig %s: out of memory", path);
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&p, &d)) {
        rc = hsmca_fail(e, HSMCA_EINVAL, "kubeconfig %s: YAML error at line %zu", path,
                        p.problem_mark.line + 1);
    } else {
        rc = load_doc(&d, dir, t, e);
        yaml_document_delete(&d);
    }
    yaml_parser_delete(&p);
    OPENSSL_cleanse(buf, len); /* it may hold a token or a key */
    free(buf);
    if (rc != HSMCA_OK)
        k8s_target_clear(t);
    return rc;
}

hsmca_code k8s_incluster(const char *sa_dir, k8s_target *t, hsmca_err *e)
{
    memset(t, 0, sizeof(*t));
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    HSMCA_ENSURE(host && *host && port && *port, e, HSMCA_EINVAL,
                 "auth.tokenreview: not in a pod (KUBERNETES_SERVICE_HOST/PORT unset): "
                 "set auth.tokenreview.kubeconfig");
    int v6 = strchr(host, ':') != NULL;
    if (snprintf(t->server, sizeof(t->server), "https://%s%s%s:%s", v6 ? "[" : "", host,
                 v6 ? "]" : "", port) >= (int)sizeof(t->server))
        return hsmca_fail(e, HSMCA_EINVAL, "KUBERNETES_SERVICE_HOST is too long");
    char path[1024];
    const char *dir = sa_dir ? sa_dir : K8S_SA_DIR;
    snprintf(path, sizeof(path), "%s/ca.crt", dir);
    hsmca_code rc = util_read_file(path, K8S_MAX_FILE, &t->ca_pem, &t->ca_len, e);
    if (rc == HSMCA_OK) {
        snprintf(path, sizeof(path), "%s/token", dir);
        rc = read_token(path, &t->token, e);
    }
    if (rc != HSMCA_OK)
        k8s_target_clear(t);
    return rc;
}

static void wipe(char **p, size_t len)
{
    if (*p)
        OPENSSL_cleanse(*p, len);
    free(*p);
    *p = NULL;
}

void k8s_target_clear(k8s_target *t)
{
    wipe(&t->ca_pem, t->ca_len);
    wipe(&t->token, t->token ? strlen(t->token) : 0);
    wipe(&t->cert_pem, t->cert_len);
    wipe(&t->key_pem, t->key_len);
    memset(t, 0, sizeof(*t));
}

/* k8s_publish_objects.c - see k8s_publish.h: what is published (the roots, the CRL) and
 * the objects that carry it. Every write is an update of the object as read, with its
 * metadata.resourceVersion: the API server refuses it (409 Conflict) when someone wrote
 * in between, and the object is then read again and the change made again, at most
 * KP_CONFLICT_TRIES times. Each write is one log line naming the object. */
#include "k8s_publish.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "certfile.h"
#include "log.h"
#include "util.h"

#define CRL_MAX (16 * 1024 * 1024)

void kp_roots_clear(kp_roots *r)
{
    free(r->pem);
    memset(r, 0, sizeof(*r));
}

/* The ClusterTrustBundle rules the API server applies to spec.trustBundle: every
 * certificate a CA (basicConstraints cA true), none twice. */
static void ctb_check(STACK_OF(X509) * certs, kp_roots *r)
{
    for (int i = 0; i < sk_X509_num(certs); i++) {
        X509 *x = sk_X509_value(certs, i);
        char name[160];
        X509_NAME_oneline(X509_get_subject_name(x), name, sizeof(name));
        if (!(X509_get_extension_flags(x) & EXFLAG_CA)) {
            snprintf(r->ctb_problem, sizeof(r->ctb_problem),
                     "certificate %d (%.150s) is not a CA (basicConstraints cA)", i + 1, name);
            return;
        }
        for (int j = 0; j < i; j++)
            if (!X509_cmp(x, sk_X509_value(certs, j))) {
                snprintf(r->ctb_problem, sizeof(r->ctb_problem),
                         "certificate %d (%.150s) is certificate %d again", i + 1, name, j + 1);
                return;
            }
    }
}

hsmca_code kp_roots_load(const char *path, kp_roots *r, hsmca_err *e)
{
    memset(r, 0, sizeof(*r));
    STACK_OF(X509) *certs = certfile_load(path, "ca.root_bundle", e);
    if (!certs)
        return e->code;
    /* certfile_pem writes each with PEM_write_bio_X509: every one ends in "\n". */
    r->pem = certfile_pem(certs);
    ctb_check(certs, r);
    sk_X509_pop_free(certs, X509_free);
    if (!r->pem)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    return HSMCA_OK;
}

hsmca_code kp_crl_load(const char *path, char **pem, hsmca_err *e)
{
    *pem = NULL;
    struct stat st;
    if (!path[0] || (stat(path, &st) != 0 && errno == ENOENT))
        return HSMCA_OK;
    char *buf = NULL;
    size_t len;
    HSMCA_GUARD(util_read_file(path, CRL_MAX, &buf, &len, e));
    BIO *b = BIO_new_mem_buf(buf, (int)len);
    X509_CRL *crl = b ? PEM_read_bio_X509_CRL(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    if (!crl) {
        free(buf);
        return hsmca_fail(e, HSMCA_EINVAL, "crl.path %s does not hold a PEM CRL", path);
    }
    X509_CRL_free(crl);
    *pem = buf;
    return HSMCA_OK;
}

void kp_names_free(char **names)
{
    for (size_t i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}

/* The names of one page's items into *names (n so far), those being deleted left out. */
static HSMCA_MUSTCHECK hsmca_code add_names(json_t *items, char ***names, size_t *n, hsmca_err *e)
{
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        json_t *md = json_object_get(it, "metadata");
        const char *name = json_string_value(json_object_get(md, "name"));
        const char *phase =
            json_string_value(json_object_get(json_object_get(it, "status"), "phase"));
        if (!name || json_object_get(md, "deletionTimestamp") ||
            (phase && !strcmp(phase, "Terminating")))
            continue;
        char **nn = realloc(*names, (*n + 2) * sizeof(char *));
        if (!nn)
            return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        *names = nn;
        if (!(nn[*n] = strdup(name)))
            return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        nn[++*n] = NULL;
    }
    return HSMCA_OK;
}

hsmca_code kp_namespaces(k8s_client *a, const char *selector, char ***names, hsmca_err *e)
{
    char sel[1600], cont[2048] = "", path[4000];
    *names = NULL;
    size_t n = 0;
    HSMCA_ENSURE(!k8s_query_escape(selector, sel, sizeof(sel)), e, HSMCA_EINVAL,
                 "publish.namespace_selector is too long");
    hsmca_code rc = HSMCA_OK;
    do {
        snprintf(path, sizeof(path), "/api/v1/namespaces?limit=500%s%s%s%s",
                 sel[0] ? "&labelSelector=" : "", sel, cont[0] ? "&continue=" : "", cont);
        long status = 0;
        json_t *list = NULL;
        rc = k8s_get(a, path, &status, &list, e);
        if (rc == HSMCA_OK && status != 200)
            rc = hsmca_fail(e, HSMCA_EUNAVAIL,
                            "listing namespaces answered HTTP %ld (RBAC: list namespaces; "
                            "publish.namespace_selector valid?)",
                            status);
        if (rc == HSMCA_OK)
            rc = add_names(json_object_get(list, "items"), names, &n, e);
        const char *c =
            json_string_value(json_object_get(json_object_get(list, "metadata"), "continue"));
        if (rc == HSMCA_OK && c && c[0] && k8s_query_escape(c, cont, sizeof(cont)))
            rc = hsmca_fail(e, HSMCA_EUNAVAIL, "listing namespaces: continue token too long");
        else if (!c || !c[0])
            cont[0] = 0;
        json_decref(list);
    } while (rc == HSMCA_OK && cont[0]);
    if (rc == HSMCA_OK && !*names && !(*names = calloc(1, sizeof(char *))))
        rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    if (rc != HSMCA_OK) {
        kp_names_free(*names);
        *names = NULL;
    }
    return rc;
}

static void logged_write(const char *kind, const char *ns, const char *name, const char *op,
                         const char *value)
{
    uint8_t d[SHA256_DIGEST_LENGTH];
    char hex[2 * SHA256_DIGEST_LENGTH + 1];
    SHA256((const unsigned char *)value, strlen(value), d);
    util_hex(d, sizeof(d), hex);
    LOG_EVENT(LOG_LVL_INFO, "published", LOG_STR("kind", kind), LOG_STR("namespace", ns),
              LOG_STR("name", name), LOG_STR("op", op), LOG_STR("sha256", hex));
}

/* Makes the object at path (a collection at coll for a create) hold what edit puts in
 * it: create when absent, update (with its resourceVersion) when edit changed it,
 * re-read on a conflict. new_obj makes the object to create. */
typedef struct {
    const char *kind, *ns, *name, *coll, *path, *value;
    json_t *(*new_obj)(const void *arg);
    int (*edit)(json_t *obj, const void *arg); /* 1 when it changed obj */
    const void *arg;
} kp_target;

static HSMCA_MUSTCHECK hsmca_code put_object(k8s_client *a, const kp_target *t, int *wrote,
                                             hsmca_err *e)
{
    *wrote = 0;
    for (int attempt = 0; attempt < KP_CONFLICT_TRIES; attempt++) {
        long status = 0;
        json_t *obj = NULL, *resp = NULL;
        HSMCA_GUARD(k8s_get(a, t->path, &status, &obj, e));
        const char *op = NULL, *method = "PUT", *where = t->path;
        if (status == 404) {
            json_decref(obj);
            if (!(obj = t->new_obj(t->arg)))
                return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
            op = "created", method = "POST", where = t->coll;
        } else if (status != 200 || !json_is_object(obj)) {
            json_decref(obj);
            return hsmca_fail(e, HSMCA_EUNAVAIL, "reading %s %s%s%s answered HTTP %ld", t->kind,
                              t->ns, t->ns[0] ? "/" : "", t->name, status);
        } else if (t->edit(obj, t->arg)) {
            op = "updated";
        }
        hsmca_code rc = HSMCA_OK;
        if (op)
            rc = k8s_call(a, method, where, obj, &status, &resp, e);
        json_decref(obj);
        json_decref(resp);
        if (rc != HSMCA_OK || !op)
            return rc;
        if (status == 200 || status == 201) {
            logged_write(t->kind, t->ns, t->name, op, t->value);
            *wrote = 1;
            return HSMCA_OK;
        }
        if (status != 409)
            return hsmca_fail(e, HSMCA_EUNAVAIL, "%s %s %s%s%s answered HTTP %ld", method, t->kind,
                              t->ns, t->ns[0] ? "/" : "", t->name, status);
        LOG_EVENT(LOG_LVL_INFO, "write conflicted: reading it again", LOG_STR("kind", t->kind),
                  LOG_STR("namespace", t->ns), LOG_STR("name", t->name));
    }
    return hsmca_fail(e, HSMCA_EUNAVAIL, "%s %s/%s: still conflicting after %d tries", t->kind,
                      t->ns, t->name, KP_CONFLICT_TRIES);
}

typedef struct {
    const char *ns, *name, *key, *value;
} cm_arg;

static json_t *cm_new(const void *arg)
{
    const cm_arg *c = arg;
    /* The label istiod's own namespace controller puts on these ConfigMaps. */
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s}}", "apiVersion", "v1", "kind",
                     "ConfigMap", "metadata", "name", c->name, "namespace", c->ns, "labels",
                     "istio.io/config", "true", "data", c->key, c->value);
}

static int cm_edit(json_t *obj, const void *arg)
{
    const cm_arg *c = arg;
    json_t *data = json_object_get(obj, "data");
    const char *now = json_string_value(json_object_get(data, c->key));
    if (now && !strcmp(now, c->value))
        return 0;
    if (!json_is_object(data)) {
        data = json_object();
        json_object_set_new(obj, "data", data);
    }
    json_object_set_new(data, c->key, json_string(c->value));
    return 1;
}

hsmca_code kp_put_configmap(k8s_client *a, const char *ns, const char *name, const char *key,
                            const char *value, int *wrote, hsmca_err *e)
{
    char coll[600], path[900];
    snprintf(coll, sizeof(coll), "/api/v1/namespaces/%s/configmaps", ns);
    snprintf(path, sizeof(path), "%s/%s", coll, name);
    cm_arg c = {ns, name, key, value};
    kp_target t = {"ConfigMap", ns, name, coll, path, value, cm_new, cm_edit, &c};
    return put_object(a, &t, wrote, e);
}

static json_t *ctb_new(const void *arg)
{
    return json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s}}", "apiVersion", "certificates.k8s.io/v1beta1",
                     "kind", "ClusterTrustBundle", "metadata", "name", KP_CTB_NAME, "spec",
                     "signerName", KP_CTB_SIGNER, "trustBundle", ((const kp_roots *)arg)->pem);
}

static int ctb_edit(json_t *obj, const void *arg)
{
    const char *pem = ((const kp_roots *)arg)->pem;
    json_t *spec = json_object_get(obj, "spec");
    const char *now = json_string_value(json_object_get(spec, "trustBundle"));
    if (now && !strcmp(now, pem))
        return 0;
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(obj, "spec", spec);
    }
    json_object_set_new(spec, "signerName", json_string(KP_CTB_SIGNER));
    json_object_set_new(spec, "trustBundle", json_string(pem));
    return 1;
}

hsmca_code kp_put_ctb(k8s_client *a, const kp_roots *r, int *wrote, hsmca_err *e)
{
    *wrote = 0;
    HSMCA_ENSURE(!r->ctb_problem[0], e, HSMCA_EINVAL,
                 "ClusterTrustBundle %s not written: ca.root_bundle: %s (a ClusterTrustBundle "
                 "holds only CA certificates, each once; or set "
                 "publish.cluster_trust_bundle: false)",
                 KP_CTB_NAME, r->ctb_problem);
    static const char obj[] = KP_CTB_PATH "/" KP_CTB_NAME;
    kp_target t = {
        "ClusterTrustBundle", "", KP_CTB_NAME, KP_CTB_PATH, obj, r->pem, ctb_new, ctb_edit, r};
    return put_object(a, &t, wrote, e);
}

/* fe_k8spods.c - see fe_k8spods.h.
 *
 * Shapes from the Kubernetes API reference, Pod v1
 * (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/):
 *   Pod     {"kind":"Pod","apiVersion":"v1",
 *            "metadata":{"name":"...","namespace":"...","uid":"..."},
 *            "spec":{"nodeName":"...","serviceAccountName":"..."},
 *            "status":{"phase":"Running"}}
 *   PodList {"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"..."},
 *            "items":[Pod...]}   (items carry no kind/apiVersion of their own)
 * Field selectors (https://kubernetes.io/docs/concepts/overview/working-with-objects/
 * field-selectors/): pods support spec.nodeName and status.phase. */
#include "fe_k8spods.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "util.h"

#define SPIFFE_SCHEME "spiffe://"

int fe_k8s_trusted_node(const char *const *trusted, int n, const char *ns, const char *sa)
{
    size_t nl = strlen(ns);
    for (int i = 0; i < n; i++) {
        const char *t = trusted[i];
        if (!strncmp(t, ns, nl) && t[nl] == '/' && !strcmp(t + nl + 1, sa))
            return 1;
    }
    return 0;
}

/* One path segment "name" after "key/" at *p, up to the next '/' or the end. */
static int take_segment(const char **p, const char *end, const char *key, const char **seg,
                        size_t *seglen)
{
    size_t kl = strlen(key);
    if ((size_t)(end - *p) < kl + 1 || memcmp(*p, key, kl) != 0 || (*p)[kl] != '/')
        return 0;
    *p += kl + 1;
    const char *s = *p;
    while (*p < end && **p != '/')
        (*p)++;
    *seg = s;
    *seglen = (size_t)(*p - s);
    return 1;
}

hsmca_code fe_k8s_parse_impersonated(const char *td, const char *requested, size_t len,
                                     char ns[POLICY_NS_MAX + 1], char sa[POLICY_SA_MAX + 1],
                                     hsmca_err *e)
{
    char shown[96];
    util_printable(requested, len, shown, sizeof(shown));
    size_t tl = strlen(td), sl = strlen(SPIFFE_SCHEME);
    const char *p = requested, *end = requested + len;
    const char *nsp, *sap;
    size_t nsl, sal;
    int ok = len > sl + tl + 1 && !memcmp(p, SPIFFE_SCHEME, sl) && !memcmp(p + sl, td, tl) &&
             p[sl + tl] == '/';
    if (ok) {
        p += sl + tl + 1;
        ok = take_segment(&p, end, "ns", &nsp, &nsl) && p < end && *p++ == '/' &&
             take_segment(&p, end, "sa", &sap, &sal) && p == end &&
             policy_is_k8s_name(nsp, nsl, POLICY_NS_MAX, 0) &&
             policy_is_k8s_name(sap, sal, POLICY_SA_MAX, 1);
    }
    HSMCA_ENSURE(ok, e, HSMCA_EPERM,
                 "impersonation: requested identity \"%s\" is not a SPIFFE ID "
                 "spiffe://%s/ns/<ns>/sa/<sa>",
                 shown, td);
    memcpy(ns, nsp, nsl);
    ns[nsl] = '\0';
    memcpy(sa, sap, sal);
    sa[sal] = '\0';
    return HSMCA_OK;
}

static const char *str_at(json_t *o, const char *k1, const char *k2)
{
    json_t *v = json_object_get(json_object_get(o, k1), k2);
    /* An embedded NUL would let "a\0b" compare equal to "a". */
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return NULL;
    return json_string_value(v);
}

static json_t *load_kind(const char *body, size_t len, const char *kind, hsmca_err *e)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    json_t *k = json_object_get(root, "kind"), *v = json_object_get(root, "apiVersion");
    if (!json_is_object(root) || !json_is_string(k) || strcmp(json_string_value(k), kind) ||
        !json_is_string(v) || strcmp(json_string_value(v), "v1")) {
        json_decref(root);
        hsmca_fail(e, HSMCA_EUNAVAIL, "impersonation: the API server's answer is not a v1 %s",
                   kind);
        return NULL;
    }
    return root;
}

hsmca_code fe_k8s_parse_pod(const char *body, size_t len, const char *want_uid, const char *want_sa,
                            char node[FE_K8S_NODE_MAX + 1], hsmca_err *e)
{
    json_t *root = load_kind(body, len, "Pod", e);
    if (!root)
        return HSMCA_EUNAVAIL;
    hsmca_code rc = HSMCA_OK;
    const char *uid = str_at(root, "metadata", "uid");
    const char *n = str_at(root, "spec", "nodeName");
    const char *psa = str_at(root, "spec", "serviceAccountName");
    if (!uid || strcmp(uid, want_uid) != 0)
        rc = hsmca_fail(e, HSMCA_EPERM,
                        "impersonation: the caller's pod has another uid than its token's "
                        "(recreated)");
    else if (!psa || strcmp(psa, want_sa) != 0)
        rc = hsmca_fail(e, HSMCA_EPERM,
                        "impersonation: the caller's pod runs as another service account than "
                        "its token's");
    else if (!n || !policy_is_k8s_name(n, strlen(n), FE_K8S_NODE_MAX, 1))
        rc = hsmca_fail(e, HSMCA_EPERM, "impersonation: the caller's pod is on no node");
    else
        snprintf(node, FE_K8S_NODE_MAX + 1, "%s", n);
    json_decref(root);
    return rc;
}

hsmca_code fe_k8s_parse_podlist(const char *body, size_t len, const char *ns, const char *sa,
                                const char *node, int *found, hsmca_err *e)
{
    *found = 0;
    json_t *root = load_kind(body, len, "PodList", e);
    if (!root)
        return HSMCA_EUNAVAIL;
    json_t *items = json_object_get(root, "items");
    if (!json_is_array(items) && !json_is_null(items) && items) {
        json_decref(root);
        return hsmca_fail(e, HSMCA_EUNAVAIL, "impersonation: PodList items is not a list");
    }
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        const char *pns = str_at(it, "metadata", "namespace");
        const char *psa = str_at(it, "spec", "serviceAccountName");
        const char *pn = str_at(it, "spec", "nodeName");
        const char *ph = str_at(it, "status", "phase");
        if (pns && psa && pn && ph && !strcmp(pns, ns) && !strcmp(psa, sa) && !strcmp(pn, node) &&
            !strcmp(ph, "Running")) {
            *found = 1;
            break;
        }
    }
    json_decref(root);
    return HSMCA_OK;
}

/* fuzz_podlist.c - libFuzzer target for the Kubernetes API answers ztunnel
 * impersonation reads (frontend/fe_k8spods.h): the input as a Pod body
 * (fe_k8s_parse_pod), as a PodList body (fe_k8s_parse_podlist), and as a
 * requested identity (fe_k8s_parse_impersonated). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fe_k8spods.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FE_K8S_MAX_PODLIST)
        return 0;
    char *doc = malloc(size ? size : 1); /* exactly size bytes: no NUL for the parser to lean on */
    if (!doc)
        return 0;
    memcpy(doc, data, size);
    hsmca_err e;
    char node[FE_K8S_NODE_MAX + 1] = "";
    hsmca_err_clear(&e);
    hsmca_code rc = fe_k8s_parse_pod(doc, size, "u-1", "ztunnel", node, &e);
    if (rc == HSMCA_OK) {
        if (!policy_is_k8s_name(node, strlen(node), FE_K8S_NODE_MAX, 1))
            abort(); /* a node name, never empty */
    } else if ((rc != HSMCA_EPERM && rc != HSMCA_EUNAVAIL) || e.msg[0] == '\0') {
        abort();
    }
    int found = -1;
    hsmca_err_clear(&e);
    rc = fe_k8s_parse_podlist(doc, size, "prod", "web", "node-a", &found, &e);
    if (rc == HSMCA_OK ? (found != 0 && found != 1) : (rc != HSMCA_EUNAVAIL || found != 0))
        abort();
    char ns[POLICY_NS_MAX + 1], sa[POLICY_SA_MAX + 1];
    hsmca_err_clear(&e);
    rc = fe_k8s_parse_impersonated("cluster.local", doc, size, ns, sa, &e);
    if (rc == HSMCA_OK) {
        char id[POLICY_MAX_ID];
        if (policy_spiffe_id("cluster.local", ns, sa, id, sizeof(id), &e) != HSMCA_OK ||
            strlen(id) != size || memcmp(id, doc, size) != 0)
            abort(); /* accepted exactly what policy_spiffe_id would build */
    } else if (rc != HSMCA_EPERM || e.msg[0] == '\0') {
        abort();
    }
    free(doc);
    return 0;
}

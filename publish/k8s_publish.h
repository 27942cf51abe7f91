/* k8s_publish.h - hsmca-publish (`hsmca k8s publish-roots`): keeps the CA's roots where
 * Istio reads them in a Kubernetes cluster (docs/KUBERNETES.md):
 *   - the ConfigMap istio-ca-root-cert (key root-cert.pem) in every namespace the label
 *     selector publish.namespace_selector matches, namespaces being deleted skipped;
 *   - with publish.cluster_trust_bundle, the certificates.k8s.io/v1beta1
 *     ClusterTrustBundle istio.io:istiod-ca:root-cert (signerName istio.io/istiod-ca),
 *     which Istio reads with ENABLE_CLUSTER_TRUST_BUNDLE_API;
 *   - once crl.path exists, the ConfigMap istio-ca-crl (key ca-crl.pem) beside the roots.
 * Several replicas may run it: only the holder of the coordination.k8s.io/v1 Lease
 * publish.lease_namespace/publish.lease_name writes (k8s/k8s.h: k8s_lease).
 *
 * The pieces, one job per file: the API server and the Lease are k8s/ (k8s.h);
 * k8s_publish_objects.c (the roots and the objects written), k8s_publish.c (the
 * command and its loop), main.c (the program). */
#ifndef HSMCA_K8S_PUBLISH_H
#define HSMCA_K8S_PUBLISH_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "hsmca_err.h"
#include "k8s.h"

#define KP_ROOT_CM "istio-ca-root-cert"
#define KP_ROOT_KEY "root-cert.pem"
#define KP_CRL_CM "istio-ca-crl"
#define KP_CRL_KEY "ca-crl.pem"
#define KP_CTB_NAME "istio.io:istiod-ca:root-cert"
#define KP_CTB_SIGNER "istio.io/istiod-ca"
#define KP_CTB_PATH "/apis/certificates.k8s.io/v1beta1/clustertrustbundles"
#define KP_CONFLICT_TRIES 5 /* re-reads of an object whose update conflicted */

/* hsmca-publish's entry (publish/main.c), which `hsmca k8s publish-roots` and serve
 * (publish.enabled) run: argv as `hsmca k8s publish-roots` takes it after its name.
 * Returns 0, 1 (a failed --once round), 2 usage, 78 (EXIT_CONFIG) config. */
int kp_main(int argc, char **argv);

/* ---- the roots and the objects (k8s_publish_objects.c) ---- */

typedef struct {
    char *pem;             /* every root, PEM, each ending in "\n" */
    char ctb_problem[256]; /* why the ClusterTrustBundle must not hold them, or "" */
} kp_roots;

/* The certificates of the PEM file at path (ca.root_bundle), and whether a
 * ClusterTrustBundle may hold them: every one a CA, none twice. */
HSMCA_MUSTCHECK hsmca_code kp_roots_load(const char *path, kp_roots *r, hsmca_err *e);
void kp_roots_clear(kp_roots *r);

/* The CRL at path as PEM (checked to parse) into *pem, or *pem NULL when the file does
 * not exist yet. */
HSMCA_MUSTCHECK hsmca_code kp_crl_load(const char *path, char **pem, hsmca_err *e);

/* The names of the namespaces selector matches ("" all), those being deleted left
 * out: a new NULL-terminated array (kp_names_free). */
HSMCA_MUSTCHECK hsmca_code kp_namespaces(k8s_client *a, const char *selector, char ***names,
                                         hsmca_err *e);
void kp_names_free(char **names);

/* ConfigMap ns/name holds data[key] = value afterwards: created, or updated (other keys
 * kept) when it differs, a conflicting update re-read and retried. *wrote is 1 when
 * something was written. */
HSMCA_MUSTCHECK hsmca_code kp_put_configmap(k8s_client *a, const char *ns, const char *name,
                                            const char *key, const char *value, int *wrote,
                                            hsmca_err *e);

/* The ClusterTrustBundle KP_CTB_NAME holds roots (refused when r->ctb_problem is set). */
HSMCA_MUSTCHECK hsmca_code kp_put_ctb(k8s_client *a, const kp_roots *r, int *wrote, hsmca_err *e);

#endif
